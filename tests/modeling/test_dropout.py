"""The hash-based dropout: rate, scaling, independence, determinism, XLA."""

import keras
import numpy as np
import tensorflow as tf

from modeling import dropout as dropout_lib


def test_rate_scale_and_identity_in_eval():
  layer = dropout_lib.Dropout(0.1, seed=3)
  x = tf.ones([400, 1000])
  y = layer(x, training=True).numpy()
  kept = y > 0
  assert abs(kept.mean() - 0.9) < 0.002
  np.testing.assert_allclose(y[kept], 65536 / (65536 - round(0.1 * 65536)), rtol=1e-6)
  assert abs(y.mean() - 1.0) < 0.003                       # unbiased
  np.testing.assert_array_equal(layer(x, training=False), x)
  np.testing.assert_array_equal(dropout_lib.Dropout(0.0)(x, training=True), x)


def test_bits_look_uniform_and_independent():
  bits = dropout_lib.random_bits16(1 << 20, tf.constant([7, 11])).numpy().astype(np.int64)
  assert bits.min() >= 0 and bits.max() < 65536
  hist = np.bincount(bits >> 12, minlength=16) / len(bits)  # 16 equal buckets
  assert np.all(np.abs(hist - 1 / 16) < 0.002)
  x = (bits / 65536.0) - 0.5
  for lag in (1, 2, len(bits) // 2):                        # neighbours and the two halves
    assert abs(np.corrcoef(x[:-lag], x[lag:])[0, 1]) < 0.01
  other = dropout_lib.random_bits16(1 << 20, tf.constant([7, 12])).numpy()
  assert abs(np.corrcoef(bits, other)[0, 1]) < 0.01         # neighbouring seeds differ


def test_seeded_calls_differ_and_repeat_and_compile():
  keras.utils.set_random_seed(0)
  a = dropout_lib.Dropout(0.5, seed=1)
  x = tf.ones([64, 64])
  first, second = a(x, training=True).numpy(), a(x, training=True).numpy()
  assert not np.array_equal(first, second)                  # a new seed every call
  b = dropout_lib.Dropout(0.5, seed=1)
  np.testing.assert_array_equal(b(x, training=True), first)  # same seed, same masks
  c = dropout_lib.Dropout(0.5, seed=1)
  compiled = tf.function(lambda v: c(v, training=True), jit_compile=True)
  np.testing.assert_array_equal(compiled(x), first)
  assert dropout_lib.Dropout.from_config(a.get_config()).get_config() == a.get_config()
