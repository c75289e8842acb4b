"""Heads written once (modeling/heads.py) over both families' encoders: the head's outputs from
the encoder's states by numpy, checkpoint and Hugging Face names declared by the head, config
round trips, and a head written outside the project loading and exporting Hugging Face
weights with no change to the project."""

import numpy as np
import pytest
import tensorflow as tf

from modeling import families, heads
from modeling.mpnet.models import MPNetWithHead
from modeling.run_config import RunConfig
from modeling.xlnet.models import XLNetWithHead

XLNET = dict(n_token=40, n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
             ff_activation="gelu", untie_r=True)
MPNET = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=40, pad_token_id=5)
RUN = RunConfig(dropout=0.0, dropatt=0.0)
TAGGER = {"type": "token_tagger", "n_class": 5, "labels": ["O", "B-PER", "I-PER", "B-LOC",
                                                            "I-LOC"]}


def _model(family, spec):
  config = XLNET if family == "xlnet" else MPNET
  return families.get(family).with_head(config, RUN, spec).ensure_built()


def _rows(family):
  """Two rows of uneven length, padded on the family's side (xlnet left, mpnet right)."""
  rng = np.random.default_rng(3)
  ids = rng.integers(6, 40, size=[2, 7]).astype(np.int32)
  mask = np.zeros([2, 7], np.float32)
  if family == "xlnet":
    mask[1, :3] = 1.0
  else:
    mask[1, 4:] = 1.0
  ids[mask == 1.0] = 5
  return {"input_ids": tf.constant(ids), "seg_ids": tf.zeros([2, 7], tf.int32),
          "input_mask": tf.constant(mask)}


def _states(model, inputs):
  """The encoder's last token states [B, L, D], as the family's host model reads them."""
  family = families.of(model)
  hidden, _ = family.encode_rows(model.encoder, inputs["input_ids"], inputs["seg_ids"],
                                 inputs["input_mask"])
  return hidden.numpy()


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_token_tagger_is_a_dense_layer_over_every_token_state(family):
  model = _model(family, TAGGER)
  inputs = _rows(family)
  kernel, bias = (v.numpy() for v in (model.head.classifier.kernel, model.head.classifier.bias))
  want = np.einsum("bld,dc->blc", _states(model, inputs), kernel) + bias
  np.testing.assert_allclose(model(inputs).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
@pytest.mark.parametrize("mode", ["mean", "first", "last"])
def test_sentence_pooler_pools_the_real_tokens_on_either_padding_side(family, mode):
  model = _model(family, {"type": "sentence_pooler", "mode": mode})
  inputs = _rows(family)
  states, real = _states(model, inputs), inputs["input_mask"].numpy() == 0
  want = []
  for row, keep in zip(states, real):
    cols = np.flatnonzero(keep)
    vec = {"mean": row[cols].mean(0), "first": row[cols[0]], "last": row[cols[-1]]}[mode]
    want.append(vec / np.linalg.norm(vec))
  np.testing.assert_allclose(model(inputs).numpy(), np.array(want), rtol=1e-5, atol=1e-6)


def test_the_head_declares_its_checkpoint_and_hugging_face_names():
  xlnet, mpnet = _model("xlnet", TAGGER), _model("mpnet", TAGGER)
  assert xlnet.hf_architecture == "XLNetForTokenClassification"
  assert mpnet.hf_architecture == "MPNetForTokenClassification"
  names = xlnet.tf1_variables()
  assert names["model/classifier/kernel"] is xlnet.head.classifier.kernel
  assert ("classifier.weight", "model/classifier/kernel", None, True) in xlnet.hf_head_rows()
  assert mpnet.hf_variable_map()["classifier.weight"][0] is mpnet.head.classifier.kernel
  assert "mpnet.embeddings.word_embeddings.weight" in mpnet.hf_variable_map()
  bare = _model("mpnet", {"type": "sentence_pooler"})
  assert bare.hf_architecture == "MPNetModel"
  assert "embeddings.word_embeddings.weight" in bare.hf_variable_map()     # no prefix
  assert _model("xlnet", {"type": "sentence_pooler"}).hf_encoder_prefix == ""
  keys = xlnet.hf_config_keys()
  assert keys["num_labels"] == 5 and keys["id2label"]["1"] == "B-PER"


@pytest.mark.parametrize("cls,config,kwargs", [(XLNetWithHead, XLNET, {"run_config": RUN}),
                                               (MPNetWithHead, MPNET, {})])
def test_get_config_rebuilds_the_same_model(cls, config, kwargs):
  model = cls(config, head=TAGGER, **kwargs).ensure_built()
  again = cls(**model.get_config()).ensure_built()
  assert again.get_config() == model.get_config()
  again.set_weights(model.get_weights())
  inputs = _rows(model.family)
  np.testing.assert_array_equal(again(inputs).numpy(), model(inputs).numpy())


def test_an_unknown_head_is_one_line():
  with pytest.raises(ValueError, match=r"^head type 'nope': expected one of .*token_tagger"):
    _model("xlnet", {"type": "nope"})


@heads.register("outside_tagger")
class OutsideTagger(heads.Head):
  """A tagger written outside the project: a tanh layer on the states, then no bias, under
  Hugging Face names of its own choosing."""
  hf_suffix = "ForTokenClassification"

  def __init__(self, n_class, **kwargs):
    super().__init__(**kwargs)
    self.n_class = n_class
    self.classifier = tf.keras.layers.Dense(n_class, use_bias=False, name="classifier")

  def call(self, hidden, input_mask=None, training=False):
    return self.classifier(tf.tanh(hidden))

  def spec(self):
    return {**super().spec(), "n_class": self.n_class}

  def hf_layers(self):
    return {"classifier": self.classifier}


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_a_head_written_outside_exports_and_loads_hugging_face_weights(family, tmp_path):
  """Its Hugging Face file round trips through the family's readers and writers, which
  never name its class."""
  model = _model(family, {"type": "outside_tagger", "n_class": 3})
  path = str(tmp_path / "hf")
  families.export_hf(model, path, log=lambda line: None)
  fresh = _model(family, {"type": "outside_tagger", "n_class": 3})
  families.get(family).initialize(fresh, path, log=lambda line: None)
  for got, want in zip(fresh.get_weights(), model.get_weights()):
    np.testing.assert_array_equal(got, want)
  inputs = _rows(family)
  np.testing.assert_array_equal(fresh(inputs).numpy(), model(inputs).numpy())
