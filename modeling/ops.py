"""The tricky maths of XLNet as pure functions (each has an exact small-matrix test).

Layout is batch-major everywhere (the release is time-major; numbers are the same).

Shape glossary:
  B  batch                      L  query length (tokens of this segment)
  M  memory length              K  key length = M + L
  R  relative positions: K + L for attn_type "bi", K + 1 for "uni"
  P  number of predicted targets (num_predict)
  D  d_model    H  n_head    d  d_head    V  vocabulary

THE MASK CONVENTION (the one used across this project, data and model alike):
  every mask holds 1 / True where attention is BLOCKED (or a token is padding)
  and 0 / False where it is allowed.  `input_mask[b, j] = 1` means token j is
  padding; `perm_mask[b, i, j] = 1` means token i may not see token j.  This
  is the release's convention, so released data and masks need no flipping.
  Memory is always visible.
"""

import contextlib
import functools
import math

import numpy as np
import tensorflow as tf


def large_negative(dtype):
  """The value written into blocked attention scores, safe for `dtype`.

  float32 / bfloat16 use the release's -1e30 (bfloat16 has float32's range);
  float16 uses -6e4, which is finite there.
  """
  dtype = tf.as_dtype(dtype)
  if dtype == tf.float16:
    return tf.constant(-6e4, dtype)
  return tf.constant(-1e30, dtype)


# How the step around these ops is compiled (training/trainer.configure_xla sets it from --xla):
#   "full"     one XLA computation: bfloat16 softmax is cast to float32 (XLA's own bfloat16
#              softmax exponentiates in bfloat16: up to 7% error);
#   "fusible"  TensorFlow kernels + XLA element-wise clusters: where TensorFlow uses oneDNN,
#              the bfloat16 softmax runs on its kernel, kept out of the clusters (float32
#              inside, the rounded float32 result, faster on CPU), so does rel_shift's
#              gradient (TensorFlow's Pad, faster than XLA's CPU pad loop), and rel_shift_rows'
#              gather is compiled by XLA (faster than TensorFlow's GatherV2 / UnsortedSegmentSum);
#   "off"      TensorFlow kernels only: the same softmax kernel, TensorFlow's gather.
_XLA_MODE = ["full"]


def set_xla_mode(mode):
  """See _XLA_MODE."""
  if mode not in ("full", "fusible", "off"):
    raise ValueError(f"unknown XLA mode {mode!r}")
  _XLA_MODE[0] = mode


def _in_graph(mode_set):
  return _XLA_MODE[0] in mode_set and not tf.executing_eagerly()


def _tf_kernels():
  """Keeps the ops created inside out of XLA clusters in fusible / off steps."""
  if _in_graph(("fusible", "off")):
    return tf.xla.experimental.jit_scope(compile_ops=False)
  return contextlib.nullcontext()


@functools.lru_cache(maxsize=None)
def onednn_enabled():
  """Whether TensorFlow's CPU kernels are oneDNN's (TF_ENABLE_ONEDNN_OPTS; by default
  only on some x86 CPUs).

  Without oneDNN the bfloat16 kernels are Eigen's: its softmax exponentiates in
  bfloat16 (up to 7% error, measured on an AMD EPYC), so masked_softmax uses the
  float32 softmax, and its bf16 matmuls are slower than float32.
  """
  try:
    from tensorflow.python.util import _pywrap_util_port
    return bool(_pywrap_util_port.IsMklEnabled())
  except (ImportError, AttributeError):
    return False


def masked_softmax(logits, mask=None):
  """Attention probabilities: softmax over the last axis, computed in float32.

  Args:
    logits: [..., K] scores (any float dtype; the result has the same dtype).
    mask: bool, broadcastable to logits, True = blocked (probability 0), or None.
  Returns:
    softmax(where(mask, -1e30, logits)). Attention differentiates it through
    attention_values' written-out gradient.
  """
  logits = tf.convert_to_tensor(logits)
  dtype = logits.dtype
  if dtype == tf.bfloat16 and _in_graph(("fusible", "off")) and onednn_enabled():
    if mask is not None:
      logits = tf.where(mask, tf.constant(-1e30, dtype), logits)
    with _tf_kernels():
      return tf.nn.softmax(logits, axis=-1)
  x32 = tf.cast(logits, tf.float32)
  if mask is not None:
    x32 = tf.where(mask, tf.constant(-1e30, tf.float32), x32)
  return tf.cast(tf.nn.softmax(x32, axis=-1), dtype)


def attention_values(logits, values, mask=None, keep=None):
  """Attention output: (masked_softmax(logits, mask) * keep) @ values.

  Args:
    logits: [..., Q, K] scores; values: [..., K, d] (same leading dims).
    mask, keep: as for masked_softmax.
  Returns:
    [..., Q, d] in values' dtype.

  The gradient is written out, with FlashAttention's shortcut: the row sums
  the softmax gradient needs, sum_k(dprob * keep * p), equal sum_d(dout * out)
  over the [Q, d] output, so no reduction runs over the [Q, K] tensor and the
  score gradient is one element-wise pass, dlogits = p * (dprob * keep -
  sum_d(dout * out)), in float32. Automatic differentiation of the same ops
  makes six passes with float32 copies between them. Blocked entries have
  p = 0, so they get 0.
  """
  logits = tf.convert_to_tensor(logits)
  dtype = logits.dtype

  @tf.custom_gradient
  def forward(x, v, *maybe_keep):
    p = masked_softmax(x, mask)
    pk = p * maybe_keep[0] if maybe_keep else p
    out = tf.matmul(pk, v)

    def grad(dout):
      dprob = tf.matmul(dout, v, transpose_b=True)
      dv = tf.matmul(pk, dout, transpose_a=True)
      row = tf.reduce_sum(tf.cast(dout, tf.float32) * tf.cast(out, tf.float32), axis=-1,
                          keepdims=True)
      g = tf.cast(dprob, tf.float32)
      if maybe_keep:
        g = g * tf.cast(maybe_keep[0], tf.float32)
      dx = tf.cast(p, tf.float32) * (g - row)
      return (tf.cast(dx, dtype), dv) + ((None,) if maybe_keep else ())
    return out, grad

  return forward(logits, values, keep) if keep is not None else forward(logits, values)


def rel_shift(x, klen):
  """Aligns scores over relative positions to keys (Transformer-XL's trick).

  Args:
    x: [B, H, L, R] scores; column t holds relative position `K - t` (that is,
      column 0 is distance K, as `relative_positions` lays them out).
  Returns:
    [B, H, L, klen] with out[..., i, j] = x[..., i, L - i + j], the score for
    relative distance (M + i) - j.

  The gradient (two zero pads) runs on TensorFlow's Pad kernel outside full-XLA
  steps: much faster on CPU than XLA's element-wise pad loop (bench/pretrain_step.py).
  """
  @tf.custom_gradient
  def forward(x):
    b, h, l, r = tf.unstack(tf.shape(x))
    y = tf.reshape(x, [b, h, r, l])[:, :, 1:, :]
    y = tf.reshape(y, [b, h, l, r - 1])[:, :, :, :klen]

    def grad(dy):
      with _tf_kernels():
        dx = tf.pad(dy, [[0, 0], [0, 0], [0, 0], [0, r - 1 - klen]])
        dx = tf.pad(tf.reshape(dx, [b, h, r - 1, l]), [[0, 0], [0, 0], [1, 0], [0, 0]])
        return tf.reshape(dx, [b, h, l, r])
    return y, grad
  return forward(x)


def position_scores(q, k_r):
  """Scores of every query against every relative position.

  Args:
    q: [B, H, Q, d] queries (biased and scaled).
    k_r: [1 or 2, H, R, d] projected relative positions; with 2 rows (bi_data)
      the first half of the batch uses row 0 and the second half row 1.
  Returns:
    [B, H, Q, R] = q @ k_r^T, the [1 or 2] axis broadcast over the batch.
  """
  if k_r.shape[0] == 1:
    return tf.matmul(q, k_r, transpose_b=True)
  # A broadcasting batched matmul: no copy of k_r per batch row.
  shape = tf.shape(q)
  q2 = tf.reshape(q, tf.concat([[2, shape[0] // 2], shape[1:]], axis=0))
  out = tf.matmul(q2, k_r[:, None], transpose_b=True)
  return tf.reshape(out, tf.concat([shape[:-1], tf.shape(k_r)[2:3]], axis=0))


# Query rows per block of rel_position_scores' banded product (64 beat 0 and 128 on
# one bench-small layer: see bench/README.md).
REL_BLOCK = 64


def rel_position_scores(q, k_r, klen, block=REL_BLOCK):
  """rel_shift(position_scores(q, k_r), klen), computed on the band it keeps.

  Args:
    q: [B, H, L, d] content-stream queries; k_r: [1 or 2, H, R, d] as for
      position_scores, laid out as relative_positions ("bi": R = K + L).
    klen: K. block: query rows per block.
  Returns:
    [B, H, L, K] with out[..., i, j] = q_i . k_r[L - i + j].

  Query rows [n*b, (n+1)*b) read only the K + b positions starting at
  L - (n+1)*b, so each block multiplies by its own window of k_r and
  rel-shifts within it: (K + b) / (K + L) of the full product's work and
  memory (448 / 640 at bench-small's L = 256, K = 384, b = 64), the same
  numbers. Falls back to the full product when L is not a static multiple of
  the block, when there is only one block, or when R != K + L ("uni").
  """
  qlen = q.shape[2]
  rlen = k_r.shape[2]
  if (not qlen or not isinstance(klen, int) or not block or qlen % block
      or qlen <= block or rlen != klen + qlen):
    return rel_shift(position_scores(q, k_r), klen)
  n = qlen // block
  width = klen + block
  starts = qlen - block * (np.arange(n) + 1)                   # [n], static
  idx = starts[:, None] + np.arange(width)[None, :]            # [n, K + b]
  windows = tf.gather(k_r, idx.astype(np.int32), axis=2)       # [1|2, H, n, K + b, d]
  shape = tf.shape(q)
  qb = tf.reshape(q, tf.concat([shape[:2], [n, block], shape[3:]], axis=0))
  if k_r.shape[0] == 1:
    x = tf.matmul(qb, windows, transpose_b=True)               # [B, H, n, b, K + b]
  else:
    q2 = tf.reshape(qb, tf.concat([[2, shape[0] // 2, shape[1], n, block], shape[3:]], 0))
    x = tf.matmul(q2, windows[:, None], transpose_b=True)
  x = tf.reshape(x, [shape[0], shape[1] * n, block, width])
  y = rel_shift(x, klen)                                       # [B, H * n, b, K]
  return tf.reshape(y, [shape[0], shape[1], qlen, klen])


def rel_shift_rows(x, positions, qlen, klen):
  """rel_shift for rows at arbitrary positions (the query stream's targets).

  Args:
    x: [B, H, P, R] scores laid out as for rel_shift; row p belongs to the
      token at positions[b, p] of a segment of length qlen (L).
    positions: int [B, P].
  Returns:
    [B, H, P, klen] with out[..., p, j] = x[..., p, L - positions[p] + j],
    what rel_shift gives the content row at that position.
  """
  fn = _rel_shift_rows_xla if _in_graph(("fusible",)) else _rel_shift_rows
  return fn(x, positions, qlen, klen)


def _rel_shift_rows(x, positions, qlen, klen):
  idx = qlen - positions[:, None, :, None] + tf.range(klen)[None, None, None, :]
  idx = tf.clip_by_value(idx, 0, tf.shape(x)[-1] - 1)
  idx = tf.broadcast_to(idx, tf.concat([tf.shape(x)[:3], [klen]], axis=0))
  return tf.gather(x, idx, batch_dims=3)


# The same gather compiled by XLA (faster forward and backward on CPU than
# TensorFlow's batched GatherV2 / UnsortedSegmentSum), used in fusible steps.
_rel_shift_rows_xla = tf.function(_rel_shift_rows, jit_compile=True)


def relative_positions(qlen, klen, attn_type="bi", clamp_len=-1):
  """Relative distances, as floats: K, K-1, ..., -L+1 ("bi") or K, ..., 0 ("uni").

  Returns [R]; clipped to [-clamp_len, clamp_len] when clamp_len > 0.
  """
  if attn_type == "bi":
    beg, end = klen, -qlen
  elif attn_type == "uni":
    beg, end = klen, -1
  else:
    raise ValueError(f"unknown attn_type {attn_type!r}")
  pos = tf.range(beg, end, -1, dtype=tf.float32)
  if clamp_len > 0:
    pos = tf.clip_by_value(pos, -float(clamp_len), float(clamp_len))
  return pos


def sinusoid_embedding(pos, d_model):
  """[R] positions -> [R, D] = concat(sin(pos * inv_freq), cos(pos * inv_freq)).

  inv_freq = 1 / 10000^(range(0, D, 2) / D); the halves are concatenated,
  not interleaved.
  """
  freq = tf.range(0, d_model, 2.0, dtype=tf.float32)
  inv_freq = 1.0 / tf.pow(10000.0, freq / d_model)
  angles = pos[:, None] * inv_freq[None, :]
  return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)


def relative_positional_encoding(qlen, klen, d_model, attn_type="bi",
                                 bi_data=False, clamp_len=-1, dtype=tf.float32):
  """The relative position embeddings all layers share.

  Returns [1, R, D], or [2, R, D] with bi_data: row 0 (forward positions) is
  for the first half of the batch, row 1 (negated positions) for the second.
  """
  fwd = relative_positions(qlen, klen, attn_type, clamp_len)
  rows = [fwd]
  if bi_data:
    # The release builds the backward sequence as range(-beg, -end) and clamps
    # it on its own; that equals -fwd in every case.
    rows.append(-fwd)
  emb = tf.stack([sinusoid_embedding(p, d_model) for p in rows], axis=0)
  return tf.cast(emb, dtype)


def segment_matrix(seg_ids, mlen):
  """Which query/key pairs are in different segments.

  Args:
    seg_ids: [B, L] integer segment ids (any values; only equality matters).
    mlen: memory length M; memory counts as segment 0.
  Returns:
    bool [B, L, K], True where token i and key j are in different segments.
  """
  seg_ids = tf.convert_to_tensor(seg_ids)
  if mlen:
    mem = tf.zeros([tf.shape(seg_ids)[0], mlen], seg_ids.dtype)
    keys = tf.concat([mem, seg_ids], axis=1)
  else:
    keys = seg_ids
  return tf.not_equal(seg_ids[:, :, None], keys[:, None, :])


def causal_mask(qlen, mlen, same_length=False):
  """The "uni" attention mask, [L, K] bool (True = blocked).

  Query i sees memory and tokens j <= i; with same_length it also loses the
  i oldest keys, so that every query sees exactly M + 1 keys (as the release).
  """
  ones = tf.ones([qlen, qlen], tf.float32)
  upper = tf.linalg.band_part(ones, 0, -1)
  diag = tf.linalg.band_part(ones, 0, 0)
  mask = tf.concat([tf.zeros([qlen, mlen]), upper - diag], axis=1)
  if same_length:
    lower = tf.linalg.band_part(ones, -1, 0)
    mask = tf.concat([mask[:, :qlen] + lower - diag, mask[:, qlen:]], axis=1)
  return mask > 0


def attention_masks(qlen, mlen, input_mask=None, perm_mask=None, attn_type="bi",
                    same_length=False):
  """The masks of the two streams (True = blocked).

  Args:
    qlen, mlen: L and M.
    input_mask: [B, L], 1 for padding (keys that nobody may see), or None.
    perm_mask: [B, L, L], 1 where query i may not see token j, or None.
  Returns:
    (content_mask, query_mask): each bool [B or 1, L or 1, K] (broadcastable
    to [B, L, K]), or (None, None) when
    nothing is blocked. query_mask is the data mask as is (a target never sees
    its own content); content_mask is the same with the diagonal of the L part
    forced visible (a token always sees itself).
  """
  mask = None
  if attn_type == "uni":
    mask = causal_mask(qlen, mlen, same_length)[None]
  elif attn_type != "bi":
    raise ValueError(f"unknown attn_type {attn_type!r}")
  data = None
  if input_mask is not None:
    data = tf.cast(input_mask, tf.float32)[:, None, :] > 0
  if perm_mask is not None:
    perm = tf.cast(perm_mask, tf.float32) > 0
    data = perm if data is None else tf.logical_or(data, perm)
  if data is not None:
    if mlen:
      pad = tf.zeros([tf.shape(data)[0], tf.shape(data)[1], mlen], tf.bool)
      data = tf.concat([pad, data], axis=2)
    mask = data if mask is None else tf.logical_or(mask, data)
  if mask is None:
    return None, None
  eye = tf.concat([tf.zeros([qlen, mlen], tf.bool),
                   tf.cast(tf.eye(qlen), tf.bool)], axis=1)
  content = tf.logical_and(mask, tf.logical_not(eye)[None])
  return content, mask


def cache_memory(curr, prev, mem_len, reuse_len=0):
  """The memory a layer passes to the next segment (stop-gradient).

  Args:
    curr: [B, L, D] the layer's input for this segment.
    prev: [B, M, D] the layer's memory, or None.
    mem_len: how many positions to keep (0 = keep none, returns None).
    reuse_len: cache only curr[:, :reuse_len] when > 0.
  Returns:
    [B, min(mem_len, M + L'), D] or None.
  """
  if not mem_len:
    return None
  if reuse_len and reuse_len > 0:
    curr = curr[:, :reuse_len]
  new = curr if prev is None else tf.concat([tf.cast(prev, curr.dtype), curr], axis=1)
  return tf.stop_gradient(new[:, -mem_len:])


def target_positions(target_mapping):
  """One-hot target_mapping [B, P, L] -> (positions [B, P] int32, valid [B, P]).

  Rows that are all zero (padding targets) get position 0 and valid 0.
  """
  target_mapping = tf.convert_to_tensor(target_mapping)
  positions = tf.argmax(target_mapping, axis=-1, output_type=tf.int32)
  valid = tf.reduce_sum(target_mapping, axis=-1)
  return positions, valid


def gelu(x):
  """GELU, tanh approximation (as the release)."""
  c = math.sqrt(2.0 / math.pi)
  return 0.5 * x * (1.0 + tf.tanh(c * (x + 0.044715 * tf.pow(x, 3))))

