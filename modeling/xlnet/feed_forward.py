"""Position-wise feed-forward block of XLNet (post-LN)."""

import keras
import tensorflow as tf

from modeling import ops
from modeling import dropout as dropout_lib
from modeling import initializers

# "gelu" is the release's tanh approximation; "gelu_erf" the exact (erf) form, which is what
# Hugging Face's XLNet calls "gelu" (modeling/xlnet/hf.py maps the names).
ACTIVATIONS = ("gelu", "gelu_erf", "relu")


class PositionwiseFeedForward(keras.layers.Layer):
  """LN(x + dropout(W2(dropout(act(W1 x + b1))) + b2)), epsilon 1e-12; act one of ACTIVATIONS.

  Sub-layer names follow the release: layer_1, layer_2, LayerNorm.
  Input and output: [B, T, D].
  """

  def __init__(self, d_inner, activation="gelu", dropout=0.0,
               kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    if activation not in ACTIVATIONS:
      raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    self.d_inner = d_inner
    self.activation = activation
    self.dropout = dropout
    self.kernel_initializer = initializers.independent(kernel_initializer)
    self.layer_1 = keras.layers.Dense(d_inner, kernel_initializer=self.kernel_initializer,
                                      name="layer_1")
    self.layer_2 = None  # built once d_model is known
    self.layer_norm = keras.layers.LayerNormalization(epsilon=1e-12, name="LayerNorm")
    self.inner_dropout = dropout_lib.Dropout(dropout)
    self.output_dropout = dropout_lib.Dropout(dropout)

  def build(self, input_shape):
    d_model = input_shape[-1]
    self.layer_2 = keras.layers.Dense(d_model, kernel_initializer=self.kernel_initializer,
                                      name="layer_2")
    self.layer_1.build(input_shape)
    self.layer_2.build(tuple(input_shape[:-1]) + (self.d_inner,))
    self.layer_norm.build(input_shape)

  def call(self, x, training=False):
    y = self.layer_1(x)
    if self.activation == "gelu":
      y = ops.gelu(y)
    elif self.activation == "gelu_erf":
      y = tf.nn.gelu(y, approximate=False)
    else:
      y = tf.nn.relu(y)
    y = self.inner_dropout(y, training=training)
    y = self.layer_2(y)
    y = self.output_dropout(y, training=training)
    return self.layer_norm(y + x)

  def get_config(self):
    config = super().get_config()
    config.update(d_inner=self.d_inner, activation=self.activation, dropout=self.dropout,
                  kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config
