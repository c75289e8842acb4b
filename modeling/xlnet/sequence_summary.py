"""Sequence summary (release scope `sequnece_summary`, typo included)."""

import keras
import tensorflow as tf

from modeling import ops
from modeling import dropout as dropout_lib
from modeling import initializers

SUMMARY_TYPES = ("last", "first", "mean", "attn")


class SequenceSummary(keras.layers.Layer):
  """Pools [B, L, D] to [B, D]: `last` (needs LEFT padding so `<cls>` is last,
  the release default), `first`, `mean` (over all positions, as the release),
  or `attn` (one learned query, `summary_bias`, attending over the sequence with
  the release's absolute multi-head attention `abs_attn` and a LayerNorm).
  Then dense(D, tanh) named `summary` when use_proj, then dropout.
  """

  def __init__(self, summary_type="last", use_proj=True, n_head=1, d_head=1, dropout=0.0,
               dropatt=0.0, kernel_initializer="glorot_uniform", **kwargs):
    kwargs.setdefault("name", "sequnece_summary")
    super().__init__(**kwargs)
    if summary_type not in SUMMARY_TYPES:
      raise ValueError(f"summary_type must be one of {SUMMARY_TYPES}, got {summary_type!r}")
    self.summary_type, self.use_proj = summary_type, use_proj
    self.n_head, self.d_head = n_head, d_head
    self.dropout, self.dropatt = dropout, dropatt
    self.kernel_initializer = initializers.independent(kernel_initializer)
    self.summary_dropout = dropout_lib.Dropout(dropout)
    self.attention_dropout = dropout_lib.Dropout(dropatt)
    self.proj = None
    self.layer_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="LayerNorm")

  def build(self, input_shape):
    d_model = input_shape[-1]
    if self.summary_type == "attn":
      self.summary_bias = self.add_weight(name="summary_bias", shape=(d_model,),
                                          initializer=self.kernel_initializer)
      shape = (d_model, self.n_head, self.d_head)
      for name in ("q", "k", "v", "o"):
        setattr(self, f"{name}_kernel", self.add_weight(
            name=f"{name}_kernel", shape=shape, initializer=self.kernel_initializer))
      self.layer_norm.build((None, d_model))
    if self.use_proj:
      self.proj = keras.layers.Dense(d_model, activation="tanh",
                                     kernel_initializer=self.kernel_initializer, name="summary")
      self.proj.build((None, d_model))

  def call(self, hidden, input_mask=None, training=False):
    """hidden: [B, L, D]; input_mask: [B, L] 1 = padding (used by `attn`)."""
    if self.summary_type == "last":
      summary = hidden[:, -1]
    elif self.summary_type == "first":
      summary = hidden[:, 0]
    elif self.summary_type == "mean":
      summary = tf.reduce_mean(hidden, axis=1)
    else:
      summary = self._attention_summary(hidden, input_mask, training)
    if self.proj is not None:
      summary = self.proj(summary)
    return self.summary_dropout(summary, training=training)

  def _attention_summary(self, hidden, input_mask, training):
    dtype = hidden.dtype
    k = tf.einsum("blD,Dnd->blnd", hidden, tf.cast(self.k_kernel, dtype))
    v = tf.einsum("blD,Dnd->blnd", hidden, tf.cast(self.v_kernel, dtype))
    q = tf.einsum("D,Dnd->nd", tf.cast(self.summary_bias, dtype), tf.cast(self.q_kernel, dtype))
    score = tf.einsum("nd,blnd->bnl", q, k) * tf.cast(1.0 / self.d_head ** 0.5, dtype)
    if input_mask is not None:
      blocked = tf.cast(input_mask, tf.float32)[:, None, :] > 0
      score = tf.where(blocked, ops.large_negative(dtype), score)
    prob = self.attention_dropout(tf.nn.softmax(score, axis=-1), training=training)
    vec = tf.einsum("bnl,blnd->bnd", prob, v)
    out = tf.einsum("bnd,Dnd->bD", vec, tf.cast(self.o_kernel, dtype))
    out = self.summary_dropout(out, training=training)
    return self.layer_norm(out)  # residual=False in the release

  def get_config(self):
    config = super().get_config()
    config.update(summary_type=self.summary_type, use_proj=self.use_proj, n_head=self.n_head,
                  d_head=self.d_head, dropout=self.dropout, dropatt=self.dropatt,
                  kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config
