"""Two-stream relative multi-head attention (XLNet's `rel_attn`).

Shape glossary: see `modeling/ops.py` (B, L, M, K, R, P, D, H, d).
"""

import keras
import tensorflow as tf

from modeling import ops
from modeling import dropout as dropout_lib
from modeling import initializers


class TwoStreamRelativeAttention(keras.layers.Layer):
  """Relative attention for the content stream h and, optionally, the query stream g.

  Both streams share every weight: bias-free q, k, v, r, o kernels [D, H, d]
  and one post-LayerNorm (epsilon 1e-12). Keys and values come from
  concat(memory, h). The score of query i for key j is
      ((q_i + r_w_bias)·k_j + (q_i + r_r_bias)·r_{(M+i)-j}
       + (q_i + r_s_bias)·seg_embed[different segment?]) / sqrt(d)
  The query stream holds only the P predicted positions; their relative
  position scores are gathered at each target's position, which gives exactly
  the release's scatter/gather through target_mapping at a fraction of the cost.
  """

  def __init__(self, n_head, d_head, dropout=0.0, dropatt=0.0,
               kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.n_head = n_head
    self.d_head = d_head
    self.dropout = dropout
    self.dropatt = dropatt
    self.kernel_initializer = initializers.independent(kernel_initializer)
    self._scale = 1.0 / (d_head ** 0.5)
    self.layer_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="LayerNorm")
    self.output_dropout = dropout_lib.Dropout(dropout)
    self.attention_dropout = dropout_lib.Dropout(dropatt)

  def build(self, h_shape):
    d_model = h_shape[-1]
    shape = (d_model, self.n_head, self.d_head)
    for name in ("q", "k", "v", "r", "o"):
      setattr(self, f"{name}_kernel", self.add_weight(
          name=f"{name}_kernel", shape=shape, initializer=self.kernel_initializer))
    self.layer_norm.build(h_shape)

  def call(self, h, pos_emb, r_w_bias, r_r_bias, r_s_bias, seg_embed, seg_diff=None,
           content_mask=None, mems=None, g=None, query_mask=None, query_seg_diff=None,
           target_pos=None, target_valid=None, training=False):
    """Runs one layer's attention.

    Args:
      h: [B, L, D] content stream.
      pos_emb: [1 or 2, R, D] relative position embeddings (2 with bi_data:
        first half of the batch, second half).
      r_w_bias, r_r_bias, r_s_bias: [H, d] this layer's biases.
      seg_embed: [2, H, d] (same segment, different segment).
      seg_diff: bool [B, L, K], True where query and key segments differ; None
        turns the segment term off.
      content_mask: bool [B or 1, L, K], True = blocked; None = all visible.
      mems: [B, M, D] memory of this layer, or None.
      g: [B, P, D] query stream, or None.
      query_mask, query_seg_diff: the rows of the query-stream mask and of
        seg_diff at each target's position, [B or 1, P, K] / [B, P, K].
      target_pos: int [B, P] position of each target in the segment.
      target_valid: [B, P] 1 for a real target, 0 for a padding row (its
        attention output is zeroed, as the release's all-zero mapping row).
    Returns:
      (h_out [B, L, D], g_out [B, P, D] or None).
    """
    dtype = self.compute_dtype
    cast = lambda x: None if x is None else tf.cast(x, dtype)
    h, g, mems, pos_emb = cast(h), cast(g), cast(mems), cast(pos_emb)
    biases = (cast(r_w_bias), cast(r_r_bias), cast(r_s_bias))
    seg_embed = cast(seg_embed)

    cat = h if mems is None else tf.concat([mems, h], axis=1)
    klen = cat.shape[1] or tf.shape(cat)[1]     # static where known (banded position scores)
    # Heads-major layout [B, H, T, d] throughout: every score and value product
    # is then a plain batched matmul (no transposes inside the einsums).
    k = _split_heads(cat, cast(self.k_kernel))
    v = _split_heads(cat, cast(self.v_kernel))
    k_r = _split_heads(pos_emb, cast(self.r_kernel))     # [1 or 2, H, R, d]
    w_q = cast(self.q_kernel)

    q_h = _split_heads(h, w_q)
    vec_h = self._attend(q_h, k, v, k_r, biases, seg_embed, seg_diff, content_mask,
                         klen, None, training)
    h_out = self._post_attention(h, vec_h, training)
    if g is None:
      return h_out, None
    q_g = _split_heads(g, w_q)
    vec_g = self._attend(q_g, k, v, k_r, biases, seg_embed, query_seg_diff, query_mask,
                         klen, target_pos, training, seg_len=tf.shape(h)[1])
    if target_valid is not None:
      vec_g = vec_g * cast(target_valid)[:, None, :, None]
    return h_out, self._post_attention(g, vec_g, training)

  def _attend(self, q, k, v, k_r, biases, seg_embed, seg_diff, mask, klen, positions,
              training, seg_len=None):
    """q [B, H, Q, d], k / v [B, H, K, d] -> attention output [B, H, Q, d].

    1/sqrt(d) scales the (small) biased queries rather than the [B, H, Q, K]
    scores; the segment term adds (q + r_s_bias)·(seg_embed[1] - seg_embed[0])
    where the segments differ instead of choosing between the two dot products
    everywhere: the two differ by a constant per row, (q + r_s_bias)·seg_embed[0],
    which the softmax ignores, so the probabilities are the release's.
    """
    r_w_bias, r_r_bias, r_s_bias = (b[:, None, :] for b in biases)   # [H, 1, d]
    scale = tf.cast(self._scale, q.dtype)
    ac = tf.matmul((q + r_w_bias) * scale, k, transpose_b=True)
    if positions is None:
      bd = ops.rel_position_scores((q + r_r_bias) * scale, k_r, klen)
    else:
      bd = ops.position_scores((q + r_r_bias) * scale, k_r)
      bd = ops.rel_shift_rows(bd, positions, seg_len, klen)
    score = ac + bd
    if seg_diff is not None:
      ef = tf.einsum("bnqd,nd->bnq", (q + r_s_bias) * scale, seg_embed[1] - seg_embed[0])
      score += tf.where(seg_diff[:, None], ef[..., None], tf.zeros([], score.dtype))
    keep = self.attention_dropout.keep_mask(tf.shape(score), score.dtype, training)
    return ops.attention_values(score, v, None if mask is None else mask[:, None], keep)

  def _post_attention(self, x, vec, training):
    out = tf.einsum("bnqd,Dnd->bqD", vec, tf.cast(self.o_kernel, vec.dtype))
    out = self.output_dropout(out, training=training)
    return self.layer_norm(out + x)

  def get_config(self):
    config = super().get_config()
    config.update(n_head=self.n_head, d_head=self.d_head, dropout=self.dropout,
                  dropatt=self.dropatt,
                  kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config


def _split_heads(x, kernel):
  """[B, T, D] x kernel [D, H, d] -> [B, H, T, d]."""
  return tf.einsum("btD,Dnd->bntd", x, kernel)
