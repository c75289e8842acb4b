"""Fresh models start with independent weights (modeling/initializers.py; issue #33: one shared
Keras 3 initializer instance had made q = k = v = o and every layer equal), the same seed gives
the same bytes, and the wrapper survives get_config round trips."""

import itertools

import keras
import numpy as np
import pytest

from modeling import initializers
from modeling.mpnet import config as mpnet_config
from modeling.mpnet import models as mpnet_models
from modeling.mpnet import pretrain as mpnet_pretrain
from modeling.run_config import RunConfig
from modeling.xlnet import models as xlnet_models
from modeling.xlnet.config import XLNetConfig


def _xlnet(seed):
  keras.utils.set_random_seed(seed)
  model = xlnet_models.XLNetClassifier(
      XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=50),
      RunConfig(), n_class=3)
  ids = np.array([[9, 10, 11, 12], [13, 14, 5, 5]], np.int32)
  model({"input_ids": ids, "seg_ids": np.zeros_like(ids),
         "input_mask": (ids == 5).astype(np.float32)}, training=False)
  return model


def _mpnet(seed):
  keras.utils.set_random_seed(seed)
  config = mpnet_config.MPNetConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                    num_attention_heads=2, intermediate_size=32,
                                    max_position_embeddings=20, pad_token_id=5)
  model = mpnet_pretrain.MPNetPretrainModel(config)
  classifier = mpnet_models.MPNetClassifier(config, n_class=3)
  ids = np.array([[1, 10, 11, 2], [1, 14, 2, 5]], np.int32)
  classifier({"input_ids": ids, "seg_ids": np.zeros_like(ids),
              "input_mask": (ids == 5).astype(np.float32)}, training=False)
  return [model.encoder if hasattr(model, "encoder") else model, classifier]


def _random_weights(models):
  """(path, value) of every trainable weight that is not all zeros / ones (biases, LayerNorm)."""
  models = models if isinstance(models, list) else [models]
  out = []
  for m in models:
    for v in m.trainable_weights:
      value = np.asarray(v.numpy())
      if value.std() > 0:
        out.append((v.path, value))
  return out


@pytest.mark.parametrize("build", [_xlnet, _mpnet], ids=["xlnet", "mpnet"])
def test_every_random_weight_is_its_own_draw(build):
  weights = _random_weights(build(0))
  assert len(weights) >= 10
  for (pa, a), (pb, b) in itertools.combinations(weights, 2):
    if a.shape == b.shape:
      assert not np.array_equal(a, b), f"{pa} == {pb}"
    # nor is one the start of the other's stream (a table and a shorter one of the same width)
    if a.ndim == b.ndim == 2 and a.shape[1] == b.shape[1] and a.shape[0] != b.shape[0]:
      n = min(a.shape[0], b.shape[0])
      assert not np.array_equal(a[:n], b[:n]), f"{pa} starts as {pb}"


@pytest.mark.parametrize("build", [_xlnet, _mpnet], ids=["xlnet", "mpnet"])
def test_same_seed_same_bytes_other_seed_other_weights(build):
  a, b, c = (_random_weights(build(s)) for s in (0, 0, 1))
  strip = lambda path: path.split("/", 1)[1]           # the model's unique name differs
  assert [strip(p) for p, _ in a] == [strip(p) for p, _ in b]
  assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(a, b))
  assert not any(np.array_equal(x, y) for (_, x), (_, y) in zip(a, c))


def test_independent_round_trips_and_draws_anew_per_call():
  init = initializers.independent(keras.initializers.RandomNormal(stddev=0.02))
  assert initializers.independent(init) is init
  # a serialized one (a layer's from_config) is not wrapped twice
  again = initializers.independent(keras.initializers.serialize(init))
  assert again.get_config() == init.get_config()
  again = keras.initializers.deserialize(keras.initializers.serialize(init))
  assert isinstance(again, initializers.Independent)
  assert again.base.get_config() == init.base.get_config()
  keras.utils.set_random_seed(3)
  x, y = np.asarray(init((64, 8))), np.asarray(init((64, 8)))
  assert not np.array_equal(x, y) and abs(x.std() - 0.02) < 0.004
  # the failure it fixes: a plain Keras 3 initializer repeats itself
  plain = keras.initializers.RandomNormal(stddev=0.02)
  assert np.array_equal(np.asarray(plain((4, 4))), np.asarray(plain((4, 4))))
