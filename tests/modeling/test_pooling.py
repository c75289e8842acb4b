"""modeling/pooling.py on small matrices written out by hand: both padding sides, uneven
lengths, a row of length 1; and against sentence-transformers' Pooling / torch's normalize on
the same numbers."""

import numpy as np
import pytest
import tensorflow as tf

from modeling import pooling
from tests.reference_libs import require

# 3 rows of 4 columns, hidden 2; the value at row b, column j is (10 b + j, -(10 b + j) / 2)
STATES = np.array([[[10 * b + j, -(10 * b + j) / 2] for j in range(4)] for b in range(3)],
                  np.float32)
# right padded (MPNet): lengths 4, 2, 1
RIGHT = np.array([[0, 0, 0, 0], [0, 0, 1, 1], [0, 1, 1, 1]], np.float32)
# left padded (XLNet): lengths 3, 1, 2
LEFT = np.array([[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0]], np.float32)

BY_HAND = {
    # right: row 0 columns 0-3, row 1 columns 0-1, row 2 column 0
    ("right", "mean"): [[1.5, -0.75], [10.5, -5.25], [20, -10]],
    ("right", "first"): [[0, 0], [10, -5], [20, -10]],
    ("right", "last"): [[3, -1.5], [11, -5.5], [20, -10]],
    # left: row 0 columns 1-3, row 1 column 3, row 2 columns 2-3
    ("left", "mean"): [[2, -1], [13, -6.5], [22.5, -11.25]],
    ("left", "first"): [[1, -0.5], [13, -6.5], [22, -11]],
    ("left", "last"): [[3, -1.5], [13, -6.5], [23, -11.5]],
}


@pytest.mark.parametrize("side,mode", sorted(BY_HAND))
def test_pool_by_hand(side, mode):
  mask = RIGHT if side == "right" else LEFT
  got = pooling.pool(tf.constant(STATES), tf.constant(mask), mode).numpy()
  np.testing.assert_array_equal(got, np.array(BY_HAND[side, mode], np.float32))
  # padding holds anything: changing it changes nothing
  noisy = np.where(mask[:, :, None] == 1, 1e6, STATES).astype(np.float32)
  np.testing.assert_array_equal(pooling.pool(noisy, mask, mode).numpy(), got)
  # a bool mask (True = padding) is the same mask
  np.testing.assert_array_equal(pooling.pool(STATES, mask.astype(bool), mode).numpy(), got)


def test_pool_in_a_graph_with_unknown_shapes_and_its_gradient():
  fn = tf.function(lambda s, m: pooling.pool(s, m, "last"),
                   input_signature=[tf.TensorSpec([None, None, 2]), tf.TensorSpec([None, None])])
  np.testing.assert_array_equal(fn(STATES, LEFT).numpy(), BY_HAND["left", "last"])
  for mode in pooling.MODES:     # compiled by XLA (the training step's and serving's graphs)
    xla = tf.function(lambda s, m, mode=mode: pooling.embed(s, m, mode), jit_compile=True)
    np.testing.assert_allclose(xla(STATES, RIGHT).numpy(),
                               pooling.embed(STATES, RIGHT, mode).numpy(), rtol=1e-6)
  states = tf.constant(STATES)
  for mode, weights in (("mean", [[0, 1 / 3, 1 / 3, 1 / 3], [0, 0, 0, 1], [0, 0, .5, .5]]),
                        ("first", [[0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]])):
    with tf.GradientTape() as tape:
      tape.watch(states)
      total = tf.reduce_sum(pooling.pool(states, LEFT, mode))
    grad = tape.gradient(total, states).numpy()
    np.testing.assert_allclose(grad, np.repeat(np.array(weights, np.float32)[:, :, None], 2, 2),
                               atol=1e-7)


def test_row_with_no_token_pools_as_sentence_transformers():
  mask = np.array([[1, 1, 1, 1], [0, 0, 1, 1]], np.float32)
  states = STATES[1:]                 # rows (10 + j, ...) and (20 + j, ...)
  for mode, expected in (("mean", [[0, 0], [20.5, -10.25]]), ("last", [[0, 0], [21, -10.5]]),
                         ("first", [[10, -5], [20, -10]])):
    np.testing.assert_array_equal(pooling.pool(states, mask, mode).numpy(), expected)


def test_unknown_mode_is_one_line():
  with pytest.raises(ValueError, match="pooling mode 'cls': expected one of mean, first, last"):
    pooling.pool(STATES, RIGHT, "cls")


def test_normalize_by_hand():
  x = np.array([[3, 4], [0, 0], [1e-13, 0], [-2, 0]], np.float32)
  got = pooling.normalize(x).numpy()
  np.testing.assert_allclose(got, [[0.6, 0.8], [0, 0], [0.1, 0], [-1, 0]], rtol=1e-6)
  half = pooling.normalize(tf.constant(x[:2], tf.bfloat16))
  assert half.dtype == tf.bfloat16
  np.testing.assert_allclose(tf.cast(half, tf.float32).numpy(), [[0.6, 0.8], [0, 0]], atol=1e-2)
  # a gradient at zero is finite (1 / epsilon on the diagonal), as torch's
  zero = tf.zeros([1, 2])
  with tf.GradientTape() as tape:
    tape.watch(zero)
    y = pooling.normalize(zero)[0, 0]
  np.testing.assert_allclose(tape.gradient(y, zero).numpy(), [[1e12, 0]], rtol=1e-6)


def test_equal_to_sentence_transformers_pooling_and_torch_normalize():
  """The same numbers through sentence-transformers' Pooling (its attention mask is 1 on
  tokens) and torch.nn.functional.normalize, random states, both padding sides."""
  torch = require("torch")
  st_modules = require("sentence_transformers.sentence_transformer.modules")
  rng = np.random.default_rng(0)
  states = rng.standard_normal([3, 5, 4]).astype(np.float32)
  right = np.array([[0, 0, 0, 0, 0], [0, 0, 1, 1, 1], [0, 1, 1, 1, 1]], np.float32)
  for mask in (right, right[:, ::-1].copy()):
    for mode, st_mode in pooling.ST_MODES.items():
      ref = st_modules.Pooling(4, pooling_mode=st_mode)(
          {"token_embeddings": torch.tensor(states),
           "attention_mask": torch.tensor(1 - mask, dtype=torch.long)})["sentence_embedding"]
      ours = pooling.pool(states, mask, mode).numpy()
      np.testing.assert_allclose(ours, ref.numpy(), atol=1e-6, err_msg=mode)
      np.testing.assert_allclose(pooling.normalize(ours).numpy(),
                                 torch.nn.functional.normalize(ref, p=2, dim=-1).numpy(),
                                 atol=1e-6, err_msg=mode)
      np.testing.assert_allclose(pooling.embed(states, mask, mode).numpy(),
                                 pooling.normalize(ours).numpy(), atol=0)
