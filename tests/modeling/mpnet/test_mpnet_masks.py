"""The MPNet masks of each ablation mode, as exact matrices (n = 5 tokens, c = 2 predicted).

Keys: x0 x1 x2 (non-predicted) | P0 P1 (predicted) | M0 M1 (mask copies); 1 = blocked.
"""

import numpy as np
import pytest

from modeling.mpnet.masks import mpnet_masks, position_ids


def test_mpnet_masks_exact():
  content, query = mpnet_masks(5, 2, "mpnet")
  np.testing.assert_array_equal(content.astype(int), [
      # x0 x1 x2 P0 P1 M0 M1
      [0, 0, 0, 1, 1, 0, 0],   # x0: non-predicted and all mask copies
      [0, 0, 0, 1, 1, 0, 0],   # x1
      [0, 0, 0, 1, 1, 0, 0],   # x2
      [0, 0, 0, 0, 1, 1, 0],   # P0: itself, and M1 (later predictions' positions)
      [0, 0, 0, 0, 0, 1, 1],   # P1: P0, itself; no mask copy left after it
      [0, 0, 0, 1, 1, 0, 0],   # M0: like a non-predicted token
      [0, 0, 0, 1, 1, 0, 0]])  # M1
  np.testing.assert_array_equal(query.astype(int), [
      [0, 0, 0, 1, 1, 0, 0],   # query 0: non-predicted, M0 (own position), M1
      [0, 0, 0, 0, 1, 1, 0]])  # query 1: P0 (earlier prediction), M1 (own), not M0


def test_plm_mask_exact_no_position_compensation():
  content, query = mpnet_masks(5, 2, "plm")
  np.testing.assert_array_equal(content.astype(int), [
      [0, 0, 0, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1],
      [0, 0, 0, 0, 1],
      [0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(query.astype(int), [[0, 0, 0, 1, 1], [0, 0, 0, 0, 1]])


def test_mlm_mask_exact():
  content, query = mpnet_masks(5, 2, "mlm")
  assert query is None and not content.any()


def test_every_prediction_sees_n_positions_only_with_compensation():
  for n, c in ((5, 2), (9, 3), (20, 6)):
    _, query = mpnet_masks(n, c, "mpnet")
    # visible: n - c non-predicted + k earlier predicted + (c - k) mask copies = n
    assert ((~query).sum(1) == n).all()
    _, plm = mpnet_masks(n, c, "plm")
    np.testing.assert_array_equal((~plm).sum(1), n - c + np.arange(c))


def test_position_ids():
  perm = [3, 0, 4, 1, 2]          # predicted: positions 1 and 2 (the last two)
  content, query = position_ids(perm, 2, "mpnet")
  np.testing.assert_array_equal(content, [3, 0, 4, 1, 2, 1, 2])
  np.testing.assert_array_equal(query, [1, 2])
  assert position_ids(perm, 2, "mlm")[1] is None
  with pytest.raises(ValueError, match="mode must be one of"):
    mpnet_masks(5, 2, "xlnet")
