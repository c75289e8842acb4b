"""Dropout with a counter-based hash for its random bits (fast under XLA on CPU).

XLA's CPU random-bit generator costs ~100 ns per element, which made dropout the
largest part of a pretraining step. Here each element's bits come from a
stateless integer hash of (its index, a per-call seed): the "lowbias32"
finalizer (two multiply-xorshift rounds, full avalanche), a handful of
vectorisable integer ops. Each 32-bit hash decides two elements (its 16-bit
halves against round(rate * 65536)), so the drop probability is within 8e-6 of
`rate`; kept values are scaled by the exact inverse keep probability. Seeds come
from a Keras SeedGenerator: seeded, checkpointed, identical under XLA and eagerly.

Recomputation (modeling/recompute.py) runs a layer's forward twice, and a generator's
`next()` is stateful: a second draw would give other masks. Inside `replayed_seeds` a Dropout
draws instead from seeds given as tensors, exactly the values its generator's `next()` would
have returned (its k-th draw: the state + [0, k]), and counts its draws, so that the caller
advances the generator once by that count.
"""

import contextlib
import threading

import keras
import tensorflow as tf

# The active `replayed_seeds` of this thread (MirroredStrategy traces each replica in a thread).
_REPLAY = threading.local()


@contextlib.contextmanager
def replayed_seeds(bases):
  """Dropouts draw from `bases` ({id(Dropout): int64 [2] generator state}) instead of their
  generators; yields {id(Dropout): draws so far}. A Dropout not in `bases` that draws inside is
  an error (its draw would be stateful, and a recomputation would draw again)."""
  outer = getattr(_REPLAY, "active", None)
  counts = {}
  _REPLAY.active = (bases, counts)
  try:
    yield counts
  finally:
    _REPLAY.active = outer


def hash32(x):
  """lowbias32 (C. Wellons): uint32 -> uint32 with full avalanche."""
  x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))
  x = x * tf.constant(0x7FEB352D, tf.uint32)
  x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 15))
  x = x * tf.constant(0x846CA68B, tf.uint32)
  return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))


def random_bits16(num, seed):
  """[num] uint32 values in [0, 65536) from a 2-int seed; one hash per two values."""
  seed = tf.cast(tf.bitcast(tf.cast(seed, tf.int32), tf.uint32), tf.uint32)
  key = hash32(seed[0] * tf.constant(0x9E3779B9, tf.uint32) + hash32(seed[1]))
  half = (num + 1) // 2
  counter = tf.bitcast(tf.range(half, dtype=tf.int32), tf.uint32)
  words = hash32(hash32(counter + key) ^ key)
  bits = tf.concat([tf.bitwise.bitwise_and(words, 0xFFFF), tf.bitwise.right_shift(words, 16)], 0)
  return bits[:num]


class Dropout(keras.layers.Layer):

  def __init__(self, rate, seed=None, **kwargs):
    super().__init__(**kwargs)
    if not 0.0 <= rate < 1.0:
      raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
    self.rate = rate
    self.seed = seed
    self.threshold = int(round(rate * 65536))
    self.seed_generator = keras.random.SeedGenerator(seed) if self.threshold else None

  def call(self, x, training=False):
    keep = self.keep_mask(tf.shape(x), x.dtype, training)
    return x if keep is None else x * keep

  def keep_mask(self, shape, dtype, training=False):
    """The scaled keep mask (0 or 1 / keep probability) of one call, or None when
    nothing is dropped. `call(x)` is `x * keep_mask(tf.shape(x), x.dtype)`."""
    if not training or not self.threshold:
      return None
    bits = random_bits16(tf.reduce_prod(shape), self.next_seed())
    scale = 65536.0 / (65536 - self.threshold)
    keep = tf.cast(bits >= self.threshold, dtype) * tf.cast(scale, dtype)
    return tf.reshape(keep, shape)

  def next_seed(self):
    """int64 [2]: the generator's `next()`, or inside `replayed_seeds` the same value taken
    from the given state (the generator untouched)."""
    active = getattr(_REPLAY, "active", None)
    if active is None:
      return self.seed_generator.next()
    bases, counts = active
    if id(self) not in bases:
      raise RuntimeError(f"dropout {self.name!r} draws inside a recomputed call but was not "
                         "given a seed (modeling/recompute.py: pass it in `dropouts`)")
    k = counts.get(id(self), 0)
    counts[id(self)] = k + 1
    base = bases[id(self)]
    return base + tf.constant([0, k], base.dtype)

  def get_config(self):
    config = super().get_config()
    config.update(rate=self.rate, seed=self.seed)
    return config
