"""New weights' initializers, one independent draw per weight.

A Keras 3 initializer draws its seed once, when it is made (unseeded: from Python's `random`,
which keras.utils.set_random_seed seeds), and returns the same values at every call for one
shape. One instance shared by several weights therefore makes them EQUAL: q = k = v = o in every
layer, every layer the same (fresh models would start with that symmetry). TF1's initializers, which the XLNet release used, drew anew at every variable.
`independent(x)` wraps an initializer (or its name) so that each call draws with a fresh copy of
it: weights differ, and the same seed still gives the same bytes (the copies' seeds come from
Python's `random` in the order the weights are built).
"""

import keras


@keras.saving.register_keras_serializable("xlnet_mpnet")
class Independent(keras.initializers.Initializer):
  """Calls a fresh copy of `base` (a seed of its own) at every call."""

  def __init__(self, base):
    self.base = keras.initializers.get(base)

  def __call__(self, shape, dtype=None):
    config = self.base.get_config()
    if "seed" in config:
      config["seed"] = None
    return type(self.base).from_config(config)(shape, dtype=dtype)

  def get_config(self):
    return {"base": keras.initializers.serialize(self.base)}

  @classmethod
  def from_config(cls, config):
    return cls(keras.initializers.deserialize(config["base"]))


def independent(initializer):
  """`initializer` (an instance, a name or a config) drawing anew for every weight."""
  initializer = keras.initializers.get(initializer)   # a config may hold an Independent
  if isinstance(initializer, Independent):
    return initializer
  return Independent(initializer)
