"""One XLNet layer: two-stream relative attention, then the feed-forward block."""

import keras

from modeling.xlnet.feed_forward import PositionwiseFeedForward
from modeling.xlnet.attention import TwoStreamRelativeAttention
from modeling import initializers


class XLNetBlock(keras.layers.Layer):
  """`layer_{l}` of the release: `rel_attn` then `ff`, applied to both streams.

  See TwoStreamRelativeAttention.call for the arguments; returns
  (h [B, L, D], g [B, P, D] or None).
  """

  def __init__(self, n_head, d_head, d_inner, activation="gelu", dropout=0.0, dropatt=0.0,
               kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.n_head, self.d_head, self.d_inner = n_head, d_head, d_inner
    self.activation, self.dropout, self.dropatt = activation, dropout, dropatt
    self.kernel_initializer = initializers.independent(kernel_initializer)
    self.rel_attn = TwoStreamRelativeAttention(
        n_head, d_head, dropout=dropout, dropatt=dropatt,
        kernel_initializer=self.kernel_initializer, name="rel_attn")
    self.ff = PositionwiseFeedForward(
        d_inner, activation=activation, dropout=dropout,
        kernel_initializer=self.kernel_initializer, name="ff")

  def build(self, h_shape):
    self.rel_attn.build(h_shape)
    self.ff.build(h_shape)

  def call(self, h, *args, training=False, **kwargs):
    h, g = self.rel_attn(h, *args, training=training, **kwargs)
    h = self.ff(h, training=training)
    if g is not None:
      g = self.ff(g, training=training)
    return h, g

  def get_config(self):
    config = super().get_config()
    config.update(n_head=self.n_head, d_head=self.d_head, d_inner=self.d_inner,
                  activation=self.activation, dropout=self.dropout, dropatt=self.dropatt,
                  kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config
