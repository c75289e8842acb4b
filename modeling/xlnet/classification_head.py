"""Dense logits on a pooled summary: classification, regression, multiple choice."""

import keras
from modeling import initializers


class ClassificationHead(keras.layers.Layer):
  """[B, D] -> [B, n_class] logits (n_class 1 = regression or one choice score).

  The release names it `model/classification_{task}/logit` (classification),
  `model/regression_{task}/logit` (regression) or `logits/dense` (RACE); the
  checkpoint module keeps those names, this layer only holds the weights.
  """

  def __init__(self, n_class, kernel_initializer="glorot_uniform", **kwargs):
    super().__init__(**kwargs)
    self.n_class = n_class
    self.kernel_initializer = initializers.independent(kernel_initializer)
    self.dense = keras.layers.Dense(n_class, kernel_initializer=self.kernel_initializer,
                                    name="logit")

  def build(self, input_shape):
    self.dense.build(input_shape)

  def call(self, summary):
    return self.dense(summary)

  def get_config(self):
    config = super().get_config()
    config.update(n_class=self.n_class,
                  kernel_initializer=keras.initializers.serialize(self.kernel_initializer))
    return config
