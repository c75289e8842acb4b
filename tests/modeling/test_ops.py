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


def test_rel_shift_gradient_is_the_transposed_gather_in_every_mode():
  rng = np.random.default_rng(4)
  b, h, qlen, mlen = 2, 3, 5, 2
  klen = qlen + mlen
  x = tf.constant(rng.standard_normal([b, h, qlen, klen + qlen]).astype(np.float32))
  w = tf.constant(rng.standard_normal([b, h, qlen, klen]).astype(np.float32))
  # Reference: out[i, j] = x[i, L - i + j] as an explicit gather.
  idx = qlen - np.arange(qlen)[:, None] + np.arange(klen)[None, :]
  idx = np.broadcast_to(idx, [b, h, qlen, klen])

  def run(fn):
    with tf.GradientTape() as tape:
      tape.watch(x)
      loss = tf.reduce_sum(fn(x) * w)
    return tape.gradient(loss, x)

  g_ref = run(lambda v: tf.gather(v, idx, batch_dims=3))
  for mode in ("full", "fusible", "off"):
    try:
      ops.set_xla_mode(mode)
      g = tf.function(lambda: run(lambda v: ops.rel_shift(v, klen)))()
    finally:
      ops.set_xla_mode("full")
    np.testing.assert_array_equal(g.numpy(), g_ref.numpy())
  # Column 0 (distance K) and the last L - 1 - i columns of row i are never read.
  assert (g_ref.numpy()[..., 0] == 0).all()


def test_rel_position_scores_banded_exact():
  qlen, mlen = 4, 2
  klen = qlen + mlen
  # q_i = [1, i], k_r[t] = [t, 100]: score(i, t) = t + 100 i; row i reads t = L - i + j.
  q = np.array([[1, i] for i in range(qlen)], np.float32)[None, None]
  k_r = np.array([[t, 100] for t in range(klen + qlen)], np.float32)[None, None]
  expected = [[4, 5, 6, 7, 8, 9], [103, 104, 105, 106, 107, 108],
              [202, 203, 204, 205, 206, 207], [301, 302, 303, 304, 305, 306]]
  for block in (1, 2, 4):        # 4 = one block: the full product
    out = ops.rel_position_scores(tf.constant(q), tf.constant(k_r), klen, block=block)
    np.testing.assert_array_equal(out.numpy()[0, 0], expected)


def test_rel_position_scores_equal_the_full_product_values_and_gradients():
  rng = np.random.default_rng(5)
  b, h, qlen, mlen, d = 4, 3, 8, 4, 5
  klen = qlen + mlen
  w = tf.constant(rng.standard_normal([b, h, qlen, klen]).astype(np.float32))
  for rows in (1, 2):            # 2 = bi_data: the batch halves use different rows
    q = tf.constant(rng.standard_normal([b, h, qlen, d]).astype(np.float32))
    k_r = tf.constant(rng.standard_normal([rows, h, klen + qlen, d]).astype(np.float32))

    def run(fn):
      with tf.GradientTape() as tape:
        tape.watch([q, k_r])
        y = fn(q, k_r)
        loss = tf.reduce_sum(y * w)
      return [y] + tape.gradient(loss, [q, k_r])

    ref = run(lambda a, r: ops.rel_shift(ops.position_scores(a, r), klen))
    for mode, jit in (("full", True), ("fusible", False), ("off", False)):
      try:
        ops.set_xla_mode(mode)
        got = tf.function(lambda: run(lambda a, r: ops.rel_position_scores(a, r, klen, 2)),
                          jit_compile=jit)()
      finally:
        ops.set_xla_mode("full")
      for x, y in zip(got, ref):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-5)
  # Rows of k_r that no query reads (distance K: column 0) get no gradient.
  assert (ref[2].numpy()[:, :, 0] == 0).all()


def test_rel_position_scores_fall_back_where_the_band_does_not_apply():
  rng = np.random.default_rng(6)
  q = tf.constant(rng.standard_normal([2, 1, 6, 3]).astype(np.float32))
  for klen, rlen, block in ((8, 14, 4), (8, 9, 2), (8, 14, 6)):   # 6 % 4, "uni", one block
    k_r = tf.constant(rng.standard_normal([1, 1, rlen, 3]).astype(np.float32))
    got = ops.rel_position_scores(q, k_r, klen, block)
    ref = ops.rel_shift(ops.position_scores(q, k_r), klen)
    np.testing.assert_array_equal(got.numpy(), ref.numpy())


def test_rel_shift_rows_exact_and_equal_to_rel_shift_rows():
  qlen, klen = 3, 4  # the matrix of test_rel_shift_exact
  x = np.array([[10 * i + t for t in range(klen + qlen)] for i in range(qlen)], np.float32)
  # Query rows for targets at positions 2 and 0 read what content rows 2 and 0 read.
  rows = tf.constant(x[[2, 0]][None, None])
  out = ops.rel_shift_rows(rows, tf.constant([[2, 0]]), qlen, klen).numpy()[0, 0]
  np.testing.assert_array_equal(out, [[21, 22, 23, 24], [3, 4, 5, 6]])


def test_rel_shift_rows_xla_path_same_values_and_gradient():
  rng = np.random.default_rng(1)
  b, h, qlen, mlen, p = 2, 3, 6, 2, 3
  klen = qlen + mlen
  x = tf.constant(rng.standard_normal([b, h, p, klen + qlen]).astype(np.float32))
  positions = tf.constant([[5, 0, 2], [1, 4, 3]])
  w = tf.constant(rng.standard_normal([b, h, p, klen]).astype(np.float32))

  def run():
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = ops.rel_shift_rows(x, positions, qlen, klen)
      loss = tf.reduce_sum(y * w)
    return y, tape.gradient(loss, x)

  y_ref, g_ref = run()                       # eager: TensorFlow's gather
  try:
    ops.set_xla_mode("fusible")              # the XLA-compiled gather
    y, g = tf.function(run)()
  finally:
    ops.set_xla_mode("full")
  np.testing.assert_array_equal(y.numpy(), y_ref.numpy())
  np.testing.assert_allclose(g.numpy(), g_ref.numpy(), rtol=1e-6)
  # Each row's gradient lands on exactly the klen columns it read.
  counts = (g_ref.numpy() != 0).sum(-1)
  np.testing.assert_array_equal(counts, np.full([b, h, p], klen))


def _softmax_reference(x, mask, keep):
  y = tf.nn.softmax(tf.where(mask, -1e30, x), axis=-1)
  return y if keep is None else y * keep


def test_attention_values_and_gradients_equal_autodiff():
  rng = np.random.default_rng(2)
  x = tf.constant(rng.standard_normal([2, 3, 4, 5]).astype(np.float32))
  v = tf.constant(rng.standard_normal([2, 3, 5, 6]).astype(np.float32))
  mask = tf.constant(rng.random([2, 1, 4, 5]) < 0.3)
  keep = tf.constant((rng.random([2, 3, 4, 5]) < 0.9) / 0.9, tf.float32)
  dout = tf.constant(rng.standard_normal([2, 3, 4, 6]).astype(np.float32))
  for k in (None, keep):
    with tf.GradientTape(persistent=True) as tape:
      tape.watch([x, v])
      ours = ops.attention_values(x, v, mask, k)
      ref = tf.matmul(_softmax_reference(x, mask, k), v)
      l_ours, l_ref = tf.reduce_sum(ours * dout), tf.reduce_sum(ref * dout)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    for ours_g, ref_g in zip(tape.gradient(l_ours, [x, v]), tape.gradient(l_ref, [x, v])):
      np.testing.assert_allclose(ours_g.numpy(), ref_g.numpy(), rtol=1e-5, atol=1e-5)
    blocked = np.broadcast_to(mask.numpy(), x.shape)
    assert (tape.gradient(l_ours, x).numpy()[blocked] == 0).all()
  probs = ops.masked_softmax(x, mask).numpy()
  np.testing.assert_allclose(probs, _softmax_reference(x, mask, None).numpy(), rtol=1e-6)
  assert (probs[blocked] == 0).all()


def test_masked_softmax_bfloat16_kernel_is_the_rounded_float32_softmax():
  rng = np.random.default_rng(3)
  x = tf.constant((3 * rng.standard_normal([2, 4, 16, 48])).astype(np.float32))
  x16 = tf.cast(x, tf.bfloat16)
  mask = tf.constant(rng.random([2, 1, 16, 48]) < 0.3)
  ref = tf.cast(_softmax_reference(tf.cast(x16, tf.float32), mask, None), tf.bfloat16)
  for kernel in (False, True):
    try:
      ops.set_xla_mode("off" if kernel else "full")
      out = tf.function(lambda v: ops.masked_softmax(v, mask))(x16)
    finally:
      ops.set_xla_mode("full")
    assert out.dtype == tf.bfloat16
    diff = np.abs(tf.cast(out, tf.float32).numpy() - tf.cast(ref, tf.float32).numpy())
    # at most one bfloat16 rounding step apart (2^-8 relative)
    assert (diff <= 2 ** -8 * tf.cast(ref, tf.float32).numpy() + 1e-30).all(), kernel


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
