"""Losses of the XLNet objectives and fine-tuning tasks."""

import tensorflow as tf


def lm_loss(logits, target, target_mask=None):
  """Mean cross-entropy over real targets.

  Args:
    logits: [B, P, V]; target: int [B, P]; target_mask: [B, P] 1 for a real
      target, 0 for padding (None = all real).
  Returns:
    scalar float32.
  """
  loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tf.cast(target, tf.int32), logits=tf.cast(logits, tf.float32))
  if target_mask is None:
    return tf.reduce_mean(loss)
  mask = tf.cast(target_mask, tf.float32)
  return tf.reduce_sum(loss * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)
