"""Learning-rate schedule, the release's AdamW, layer-wise learning rates."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.config import RunConfig, XLNetConfig
from modeling.models import XLNetClassifier
from training import optimization


def test_warmup_then_linear_and_cosine_decay():
  lin = optimization.WarmupDecay(1.0, 110, warmup_steps=10, decay="linear", min_lr_ratio=0.1)
  got = [float(lin(s)) for s in (0, 5, 10, 60, 110, 200)]
  np.testing.assert_allclose(got, [0.0, 0.5, 1.0, 0.55, 0.1, 0.1], rtol=1e-6)
  cos = optimization.WarmupDecay(2.0, 110, warmup_steps=10, decay="cosine")
  np.testing.assert_allclose([float(cos(s)) for s in (10, 60, 110)], [2.0, 1.0, 0.0], atol=1e-6)
  with pytest.raises(ValueError, match="decay_method"):
    optimization.WarmupDecay(1.0, 10, decay="step")


def _one_step(weight_decay, multipliers, bias_correction=False, clip=None):
  kernel = keras.Variable(np.array([1.0, -2.0], np.float32), name="kernel")
  bias = keras.Variable(np.array([0.5], np.float32), name="r_w_bias")
  opt = optimization.AdamWeightDecay(learning_rate=0.1, weight_decay_rate=weight_decay,
                                     beta_1=0.9, beta_2=0.99, epsilon=1e-6,
                                     bias_correction=bias_correction, clip_norm=clip,
                                     lr_multipliers={kernel.path: multipliers})
  grads = [tf.constant([0.3, -0.4]), tf.constant([2.0])]
  opt.apply_gradients(zip(grads, [kernel, bias]))
  return kernel.numpy(), bias.numpy()


def test_adam_weight_decay_exact_step():
  kernel, bias = _one_step(weight_decay=0.01, multipliers=0.5)
  g = np.array([0.3, -0.4])
  m, v = 0.1 * g, 0.01 * g ** 2                      # no bias correction (the release)
  update = m / (np.sqrt(v) + 1e-6) + 0.01 * np.array([1.0, -2.0])
  np.testing.assert_allclose(kernel, [1.0, -2.0] - 0.1 * 0.5 * update, rtol=1e-6)
  # "*bias*" variables (r_w_bias too) get no weight decay and the full learning rate
  np.testing.assert_allclose(bias, 0.5 - 0.1 * (0.2 / (np.sqrt(0.04) + 1e-6)), rtol=1e-6)
  corrected, _ = _one_step(weight_decay=0.0, multipliers=1.0, bias_correction=True)
  np.testing.assert_allclose(corrected, [1.0, -2.0] - 0.1 * g / (np.abs(g) + 1e-6), rtol=1e-5)


def test_clipping_uses_the_global_norm_of_all_gradients():
  kernel, bias = _one_step(weight_decay=0.0, multipliers=1.0, clip=1.0)
  norm = np.sqrt(0.3 ** 2 + 0.4 ** 2 + 2.0 ** 2)
  g = np.array([0.3, -0.4]) / norm                   # Adam is scale-free, eps aside
  m, v = 0.1 * g, 0.01 * g ** 2
  np.testing.assert_allclose(kernel, [1.0, -2.0] - 0.1 * m / (np.sqrt(v) + 1e-6), rtol=1e-5)


def test_clipping_counts_repeated_embedding_rows_once():
  """A gather's gradient repeats rows (one per lookup); the global norm is that of the summed
  (dense) gradient, as on TPU and in PyTorch. Before the fix the norm summed the squares of
  the repeats: here sqrt(3 * 0.5**2) = 0.87 < 1, so nothing was clipped, while the true norm is
  1.5 and the step must be scaled by 1 / 1.5."""
  table = keras.Variable(np.zeros([4, 1], np.float32), name="table")
  other = keras.Variable(np.zeros([1], np.float32), name="other")
  with tf.GradientTape() as tape:
    loss = 0.5 * tf.reduce_sum(tf.gather(table, [2, 2, 2]))
  grad = tape.gradient(loss, table)
  assert isinstance(grad, tf.IndexedSlices)
  dense = optimization.dense_gradients([grad, None])
  np.testing.assert_allclose(dense[0].numpy(), [[0.0], [0.0], [1.5], [0.0]])
  assert dense[1] is None
  opt = optimization.AdamWeightDecay(learning_rate=0.1, clip_norm=1.0, epsilon=0.0)
  opt.apply_gradients([(grad, table), (tf.zeros([1]), other)])
  # Adam's first step is 0.1 * m / sqrt(v) = 0.1 * 0.1 g / (sqrt(0.001) |g|): scale-free, so
  # look at the moment instead: m = 0.1 * clipped gradient = 0.1 * 1.5 / 1.5.
  m = opt._m[opt._get_variable_index(table)].numpy()
  np.testing.assert_allclose(m[2], [0.1], rtol=1e-6)


def test_layer_decay_multipliers_by_depth():
  config = XLNetConfig(n_layer=3, d_model=16, n_head=2, d_head=8, d_inner=16, n_token=30)
  model = XLNetClassifier(config, RunConfig(), n_class=2).ensure_built()
  mult = optimization.layer_decay_multipliers(model, 0.5)
  by_name = {path.split("/", 1)[1]: value for path, value in mult.items()}
  assert by_name["transformer/layer_2/rel_attn/q_kernel"] == 1.0
  assert by_name["transformer/layer_1/ff/layer_1/kernel"] == 0.5
  assert by_name["transformer/layer_0/rel_attn/LayerNorm/gamma"] == 0.25
  assert by_name["transformer/word_embedding"] == 0.125
  np.testing.assert_array_equal(by_name["transformer/r_w_bias"].ravel(), [0.25, 0.5, 1.0])
  assert not any("sequnece_summary" in p or "logit" in p for p in by_name)  # heads: full rate
  assert optimization.layer_decay_multipliers(model, 1.0) == {}


def test_gradient_accumulation_updates_every_n_steps_with_the_mean():
  def run(accumulate, grads_seq):
    var = keras.Variable(np.array([1.0, 2.0], np.float32), name="kernel")
    opt = optimization.AdamWeightDecay(learning_rate=0.1, gradient_accumulation_steps=accumulate)
    values = []
    for g in grads_seq:
      opt.apply_gradients([(tf.constant(g), var)])
      values.append(var.numpy().copy())
    return values
  acc = run(2, [[0.2, -0.4], [0.6, 0.0]])
  np.testing.assert_array_equal(acc[0], [1.0, 2.0])               # no update yet
  single = run(None, [[0.4, -0.2]])                                 # the mean of the two
  np.testing.assert_allclose(acc[1], single[0], rtol=1e-6)
