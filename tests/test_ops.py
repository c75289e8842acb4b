"""Exact small-matrix tests for the pure functions of modeling/ops.py."""

import numpy as np
import tensorflow as tf

from modeling import ops


def test_rel_shift_exact():
  qlen, klen = 3, 4  # M = 1, R = K + L = 7
  x = np.array([[10 * i + t for t in range(klen + qlen)] for i in range(qlen)], np.float32)
  out = ops.rel_shift(tf.constant(x[None, None]), klen).numpy()[0, 0]
  np.testing.assert_array_equal(out, [[3, 4, 5, 6], [12, 13, 14, 15], [21, 22, 23, 24]])


def test_rel_shift_matches_distance_rule_batched():
  rng = np.random.default_rng(0)
  b, h, qlen, mlen = 2, 3, 5, 2
  klen = qlen + mlen
  pos = ops.relative_positions(qlen, klen).numpy()  # column t holds distance pos[t]
  x = rng.standard_normal([b, h, qlen, klen + qlen]).astype(np.float32)
  out = ops.rel_shift(tf.constant(x), klen).numpy()
  for i in range(qlen):
    for j in range(klen):
      t = int(np.where(pos == (mlen + i) - j)[0][0])
      np.testing.assert_array_equal(out[:, :, i, j], x[:, :, i, t])


def test_relative_positions_exact():
  np.testing.assert_array_equal(ops.relative_positions(3, 5, "bi"), [5, 4, 3, 2, 1, 0, -1, -2])
  np.testing.assert_array_equal(ops.relative_positions(3, 5, "uni"), [5, 4, 3, 2, 1, 0])
  np.testing.assert_array_equal(ops.relative_positions(3, 5, "bi", clamp_len=2),
                                [2, 2, 2, 2, 1, 0, -1, -2])


def _sinusoid(p, d):
  inv = 1.0 / 10000 ** (np.arange(0, d, 2) / d)
  return np.concatenate([np.sin(p * inv), np.cos(p * inv)])


def test_positional_encoding_exact_bi_data_and_clamp():
  emb = ops.relative_positional_encoding(2, 3, 4, bi_data=True, clamp_len=2).numpy()
  assert emb.shape == (2, 5, 4)
  fwd = [2, 2, 1, 0, -1]  # 3, 2, 1, 0, -1 clamped to [-2, 2]
  for t, p in enumerate(fwd):
    np.testing.assert_allclose(emb[0, t], _sinusoid(p, 4), atol=1e-7)
    np.testing.assert_allclose(emb[1, t], _sinusoid(-p, 4), atol=1e-7)
  # halves, not interleaved: position 1 -> [sin 1, sin .01, cos 1, cos .01]
  np.testing.assert_allclose(emb[0, 2], [np.sin(1), np.sin(0.01), np.cos(1), np.cos(0.01)],
                             atol=1e-7)
  single = ops.relative_positional_encoding(2, 3, 4).numpy()
  assert single.shape == (1, 5, 4)


def test_segment_matrix_exact():
  seg = tf.constant([[0, 0, 1, 2], [1, 1, 1, 0]])
  out = ops.segment_matrix(seg, mlen=2).numpy().astype(int)
  np.testing.assert_array_equal(out[0], [[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 1, 1],
                                         [1, 1, 1, 1, 0, 1], [1, 1, 1, 1, 1, 0]])
  np.testing.assert_array_equal(out[1], [[1, 1, 0, 0, 0, 1], [1, 1, 0, 0, 0, 1],
                                         [1, 1, 0, 0, 0, 1], [0, 0, 1, 1, 1, 0]])


def test_causal_mask_exact():
  np.testing.assert_array_equal(ops.causal_mask(3, 2).numpy().astype(int),
                                [[0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(ops.causal_mask(3, 2, same_length=True).numpy().astype(int),
                                [[0, 0, 0, 1, 1], [1, 0, 0, 0, 1], [1, 1, 0, 0, 0]])


def test_attention_masks_exact_two_streams():
  input_mask = tf.constant([[0, 0, 1], [0, 0, 0]], tf.float32)
  perm = tf.constant([[[0, 1, 0], [0, 0, 0], [1, 1, 0]],
                      [[1, 0, 0], [0, 0, 0], [0, 0, 0]]], tf.float32)
  content, query = ops.attention_masks(3, 1, input_mask, perm)
  np.testing.assert_array_equal(query.numpy().astype(int)[0],
                                [[0, 0, 1, 1], [0, 0, 0, 1], [0, 1, 1, 1]])
  np.testing.assert_array_equal(content.numpy().astype(int)[0],
                                [[0, 0, 1, 1], [0, 0, 0, 1], [0, 1, 1, 0]])
  np.testing.assert_array_equal(query.numpy().astype(int)[1],
                                [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
  np.testing.assert_array_equal(content.numpy().astype(int)[1], np.zeros([3, 4]))
  assert ops.attention_masks(3, 1) == (None, None)
  content, query = ops.attention_masks(3, 2, input_mask=input_mask)   # padding only, memory
  np.testing.assert_array_equal(np.broadcast_to(query.numpy().astype(int)[0], (3, 5)),
                                [[0, 0, 0, 0, 1]] * 3)
  np.testing.assert_array_equal(content.numpy().astype(int)[0],
                                [[0, 0, 0, 0, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]])
  content, query = ops.attention_masks(2, 1, attn_type="uni")
  np.testing.assert_array_equal(query.numpy().astype(int)[0], [[0, 0, 1], [0, 0, 0]])
  np.testing.assert_array_equal(content.numpy().astype(int)[0], [[0, 0, 1], [0, 0, 0]])


def test_cache_memory_exact():
  curr = tf.constant([[[1.0], [2.0], [3.0], [4.0]]])
  prev = tf.constant([[[-1.0], [-2.0]]])
  out = ops.cache_memory(curr, prev, mem_len=3, reuse_len=2)
  np.testing.assert_array_equal(out.numpy()[0, :, 0], [-2, 1, 2])
  np.testing.assert_array_equal(ops.cache_memory(curr, None, 2).numpy()[0, :, 0], [3, 4])
  assert ops.cache_memory(curr, prev, mem_len=0) is None


def test_target_positions_exact():
  mapping = tf.constant([[[0, 1, 0], [0, 0, 0]], [[0, 0, 1], [1, 0, 0]]], tf.float32)
  pos, valid = ops.target_positions(mapping)
  np.testing.assert_array_equal(pos, [[1, 0], [2, 0]])
  np.testing.assert_array_equal(valid, [[1, 0], [1, 1]])


def test_gelu_is_tanh_form():
  x = tf.constant([-1.0, 0.0, 1.0, 3.0])
  np.testing.assert_allclose(ops.gelu(x), [-0.15880801, 0.0, 0.84119199, 2.99636261], atol=1e-6)
  # the erf form gives 0.8413447 at 1.0: make sure that is NOT what we compute
  assert abs(float(ops.gelu(tf.constant(1.0))) - 0.8413447) > 1e-4


def test_large_negative_is_finite_per_dtype():
  for dtype in (tf.float16, tf.bfloat16, tf.float32):
    value = ops.large_negative(dtype)
    assert value.dtype == dtype and np.isfinite(float(value)) and float(value) < -1e4
