"""SQuAD head: start logits, end logits conditioned on the start, answerability.

Release scopes (outside `model/`): start_logits/dense, end_logits/{dense_0,
LayerNorm, dense_1}, answer_class/{dense_0, dense_1 (no bias)}.
"""

import keras
import tensorflow as tf

from modeling import ops
from modeling import dropout as dropout_lib
from modeling import initializers


def masked_logits(logits, p_mask):
  """The release's `logits * (1 - p_mask) - 1e30 * p_mask` (1e30 dtype-safe)."""
  p_mask = tf.cast(p_mask, logits.dtype)
  return logits * (1 - p_mask) + ops.large_negative(logits.dtype) * p_mask


class SquadHead(keras.layers.Layer):
  """XLNet's SQuAD 2.0 head.

  Training (start_positions given): start and end log-probabilities [B, L],
  the end conditioned on the true start. Inference: the top start_n_top starts
  and, for each, the top end_n_top ends (beam), as the release. Both return
  `cls_logits` [B], the answerability logit (> 0 leans to "no answer").
  """

  def __init__(self, start_n_top=5, end_n_top=5, dropout=0.0,
               kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.start_n_top, self.end_n_top, self.dropout = start_n_top, end_n_top, dropout
    self.kernel_initializer = initializers.independent(kernel_initializer)
    init = self.kernel_initializer
    self.start_dense = keras.layers.Dense(1, kernel_initializer=init, name="start_dense")
    self.end_dense_0 = None
    self.end_layer_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="end_LayerNorm")
    self.end_dense_1 = keras.layers.Dense(1, kernel_initializer=init, name="end_dense_1")
    self.answer_dense_0 = None
    self.answer_dense_1 = keras.layers.Dense(1, use_bias=False, kernel_initializer=init,
                                             name="answer_dense_1")
    self.answer_dropout = dropout_lib.Dropout(dropout)

  def build(self, input_shape):
    d_model = input_shape[-1]
    init = self.kernel_initializer
    self.end_dense_0 = keras.layers.Dense(d_model, activation="tanh", kernel_initializer=init,
                                          name="end_dense_0")
    self.answer_dense_0 = keras.layers.Dense(d_model, activation="tanh",
                                             kernel_initializer=init, name="answer_dense_0")
    self.start_dense.build((None, d_model))
    self.end_dense_0.build((None, 2 * d_model))
    self.end_layer_norm.build((None, d_model))
    self.end_dense_1.build((None, d_model))
    self.answer_dense_0.build((None, 2 * d_model))
    self.answer_dense_1.build((None, d_model))

  def _end_logits(self, hidden, start_features):
    """hidden [B, L, D], start_features [B, S, D] -> end logits [B, S, L]."""
    seq_len = tf.shape(hidden)[1]
    n_start = tf.shape(start_features)[1]
    h = tf.broadcast_to(hidden[:, None], [tf.shape(hidden)[0], n_start, seq_len,
                                          tf.shape(hidden)[2]])
    s = tf.broadcast_to(start_features[:, :, None], tf.shape(h))
    x = self.end_dense_0(tf.concat([h, s], axis=-1))
    x = self.end_layer_norm(x)
    return self.end_dense_1(x)[..., 0]

  def call(self, hidden, p_mask, cls_index, start_positions=None, training=False):
    """Args:
      hidden: [B, L, D] content-stream output.
      p_mask: [B, L] 1 where a token cannot be part of an answer.
      cls_index: int [B] position of `<cls>`.
      start_positions: int [B] true starts (training), or None (inference).
    """
    # float16 compute: logits, masks and softmaxes in float32 (float16's -6e4 mask and 10-bit
    # log-probabilities; the loss and the beam read these). float32 / bfloat16: their own dtype.
    dtype = tf.float32 if hidden.dtype == tf.float16 else hidden.dtype
    start_logits = masked_logits(tf.cast(self.start_dense(hidden)[..., 0], dtype), p_mask)
    start_log_probs = tf.nn.log_softmax(start_logits, axis=-1)
    outputs = {}
    if start_positions is not None:
      start_features = tf.gather(hidden, start_positions, batch_dims=1)[:, None]
      end_logits = masked_logits(
          tf.cast(self._end_logits(hidden, start_features)[:, 0], dtype), p_mask)
      outputs.update(start_log_probs=start_log_probs,
                     end_log_probs=tf.nn.log_softmax(end_logits, axis=-1))
    else:
      start_top_log_probs, start_top_index = tf.math.top_k(start_log_probs, k=self.start_n_top)
      start_features = tf.gather(hidden, start_top_index, batch_dims=1)
      end_logits = masked_logits(tf.cast(self._end_logits(hidden, start_features), dtype),
                                 p_mask[:, None])
      end_log_probs = tf.nn.log_softmax(end_logits, axis=-1)
      end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, k=self.end_n_top)
      n = self.start_n_top * self.end_n_top
      batch = tf.shape(hidden)[0]
      outputs.update(start_top_log_probs=start_top_log_probs,
                     start_top_index=start_top_index,
                     end_top_log_probs=tf.reshape(end_top_log_probs, [batch, n]),
                     end_top_index=tf.reshape(end_top_index, [batch, n]))
    # Answerability from the expected start feature and the <cls> feature.
    start_p = tf.cast(tf.nn.softmax(start_logits, axis=-1), hidden.dtype)
    start_feature = tf.einsum("blD,bl->bD", hidden, start_p)
    cls_feature = tf.gather(hidden, cls_index, batch_dims=1)
    x = self.answer_dense_0(tf.concat([start_feature, cls_feature], axis=-1))
    x = self.answer_dropout(x, training=training)
    outputs["cls_logits"] = self.answer_dense_1(x)[..., 0]
    return outputs

  def get_config(self):
    config = super().get_config()
    config.update(start_n_top=self.start_n_top, end_n_top=self.end_n_top, dropout=self.dropout,
                  kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config
