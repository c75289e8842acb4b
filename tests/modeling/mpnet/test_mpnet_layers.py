"""MPNetLayer: the encoder's layers, their names and checkpoint keys, and one layer's
exact maths against a numpy transcription of a post-LN BERT layer."""

import math

import keras
import numpy as np
import tensorflow as tf

from modeling import checkpoint
from modeling import dropout as dropout_lib
from modeling.mpnet import encoder as mpnet
from modeling.mpnet import models as mpnet_models
from modeling.mpnet.config import MPNetConfig

# attribute -> (Keras name suffix, variables)
SUBLAYERS = {"q": ("q", "kernel bias"), "k": ("k", "kernel bias"), "v": ("v", "kernel bias"),
             "o": ("o", "kernel bias"), "attn_norm": ("attention_LayerNorm", "gamma beta"),
             "inter": ("intermediate", "kernel bias"), "out": ("output", "kernel bias"),
             "out_norm": ("output_LayerNorm", "gamma beta")}


def _config(**kw):
  return MPNetConfig(**dict(dict(vocab_size=40, hidden_size=16, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=24,
                                 max_position_embeddings=20), **kw))


def _randomize(variables, seed=0):
  rng = np.random.default_rng(seed)
  for var in variables:
    var.assign(rng.normal(0.0, 0.3, var.shape).astype(np.float32) + (1.0 if "gamma" in var.path
                                                                    else 0.0))


def test_encoder_layers_are_mpnet_layers_with_named_sublayers():
  encoder = mpnet.MPNetEncoder(_config())
  encoder(tf.zeros([1, 2], tf.int32))
  assert isinstance(encoder.layers_, list) and len(encoder.layers_) == 2
  for i, layer in enumerate(encoder.layers_):
    assert isinstance(layer, mpnet.MPNetLayer) and layer.built
    assert [v.path for v in layer.weights] == [               # the sublayers' order
        f"mpnet/layer_{i}_{s}/{n}" for s, names in SUBLAYERS.values() for n in names.split()]
    for attr, (suffix, names) in SUBLAYERS.items():
      sub = getattr(layer, attr)
      kind = keras.layers.LayerNormalization if "gamma" in names else keras.layers.Dense
      assert isinstance(sub, kind) and sub.name == f"layer_{i}_{suffix}"
      assert [v.path for v in sub.weights] == [f"mpnet/layer_{i}_{suffix}/{n}"
                                               for n in names.split()]


def test_checkpoint_keys_name_each_layer_attribute(tmp_path):
  """The project's checkpoints (checkpoint.native_objects) are keyed by Keras path:
  layers_[i].<attribute>.<variable> is stored under mpnet.layer_{i}_<name>.<variable>."""
  model = mpnet_models.MPNetClassifier(_config())
  model.ensure_built()
  _randomize(model.weights)
  prefix = checkpoint.save_native_checkpoint(model, str(tmp_path / "ckpt"))
  reader = tf.train.load_checkpoint(prefix)
  stored = {k.split("/")[0].replace("..", "."): k for k, _ in tf.train.list_variables(prefix)}
  seen = set()
  for i, layer in enumerate(model.encoder.layers_):
    for attr, (suffix, names) in SUBLAYERS.items():
      for name in names.split():
        key = f"mpnet.layer_{i}_{suffix}.{name}"
        var = getattr(getattr(layer, attr), name)         # layers_/{i}/{attr}/{name}
        np.testing.assert_array_equal(reader.get_tensor(stored[key]), var.numpy())
        seen.add(key)
  assert len(seen) == 2 * 16
  assert {k for k in stored if k.startswith("mpnet.layer_")} == seen


def _layer_norm(x, gamma, beta, eps):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _reference(w, x, kv, bias, blocked, heads, eps):
  """Post-LN BERT layer in float64: rows x [B, T, D] attend kv [B, S, D]."""
  dense = lambda name, t: t @ w[f"{name}/kernel"] + w[f"{name}/bias"]
  b, t, d = x.shape
  dh = d // heads
  split = lambda y: y.reshape(b, -1, heads, dh).transpose(0, 2, 1, 3)
  q, k, v = split(dense("q", x)), split(dense("k", kv)), split(dense("v", kv))
  score = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + bias
  score = np.where(blocked, -np.inf, score)
  p = np.exp(score - score.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  ctx = (p @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
  h = _layer_norm(dense("o", ctx) + x, w["attention_LayerNorm/gamma"],
                  w["attention_LayerNorm/beta"], eps)
  inner = dense("intermediate", h)
  inner = 0.5 * inner * (1.0 + np.vectorize(math.erf)(inner / math.sqrt(2.0)))
  return _layer_norm(dense("output", inner) + h, w["output_LayerNorm/gamma"],
                     w["output_LayerNorm/beta"], eps)


def test_layer_matches_numpy_post_ln_bert_layer():
  config = _config(layer_norm_eps=1e-3)       # large enough that a wrong eps shows
  layer = mpnet.MPNetLayer(config, 0)
  layer.build()
  _randomize(layer.weights, seed=1)
  w = {v.path.split("/", 1)[1][len("layer_0_"):]: v.numpy().astype(np.float64)
       for v in layer.weights}
  rng = np.random.default_rng(2)
  x = rng.normal(size=[2, 6, 16]).astype(np.float32)
  g = rng.normal(size=[2, 3, 16]).astype(np.float32)         # a query stream over x's keys
  bias = rng.normal(size=[2, 2, 6, 6]).astype(np.float32)
  bias_g = rng.normal(size=[2, 2, 3, 6]).astype(np.float32)
  padding = np.array([[0, 0, 0, 0, 0, 1], [0, 0, 0, 1, 1, 1]], bool)   # uneven padding
  blocked = padding[:, None, None, :]
  blocked_g = blocked | (rng.random([2, 1, 3, 6]) < 0.3)
  blocked_g[..., 0] = False                                            # no row fully blocked
  dropout = dropout_lib.Dropout(config.hidden_dropout_prob)
  attention_dropout = dropout_lib.Dropout(config.attention_probs_dropout_prob)

  got = layer(tf.constant(x), tf.constant(bias), tf.constant(blocked), dropout=dropout,
              attention_dropout=attention_dropout, training=False).numpy()
  want = _reference(w, x, x, bias, blocked, 2, config.layer_norm_eps)
  np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)

  k, v = layer.keys_values(tf.constant(x))
  ctx = layer.attend(layer.queries(tf.constant(g)), k, v, tf.constant(bias_g),
                     tf.constant(blocked_g), attention_dropout)
  got_g = layer.post_attention(tf.constant(g), ctx, dropout).numpy()
  want_g = _reference(w, g, x, bias_g, blocked_g, 2, config.layer_norm_eps)
  np.testing.assert_allclose(got_g, want_g, rtol=0, atol=1e-5)
