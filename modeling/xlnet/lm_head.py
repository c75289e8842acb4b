"""Language-model head tied to the word embedding (release scope `lm_loss`)."""

import keras
import tensorflow as tf


class LMHead(keras.layers.Layer):
  """logits = x · word_embedding^T + bias.

  Owns only the bias [V] (`model/lm_loss/bias`); the embedding table is passed
  in, so the weights stay tied.
  """

  def __init__(self, vocab_size, **kwargs):
    kwargs.setdefault("name", "lm_loss")
    super().__init__(**kwargs)
    self.vocab_size = vocab_size

  def build(self, input_shape=None):
    self.bias = self.add_weight(name="bias", shape=(self.vocab_size,), initializer="zeros")

  def call(self, x, embedding_table):
    """x: [B, P, D]; embedding_table: [V, D] -> logits [B, P, V]."""
    table = tf.cast(embedding_table, x.dtype)
    return tf.einsum("bpD,vD->bpv", x, table) + tf.cast(self.bias, x.dtype)

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size)
    return config
