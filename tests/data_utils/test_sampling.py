"""The random choices of the data writer: exact small cases and statistics over seeds."""

import numpy as np
import pytest

from data_utils import sampling


def test_lanes_exact_bi_data_two_cores():
  stream = np.arange(12)
  sent = np.zeros(12, bool)
  data, _, rev = sampling.lanes(stream, sent, bsz_per_host=4, num_core_per_host=2, bi_data=True)
  # two forward lanes [0..5] and [6..11]; each core: its forward lane, then it reversed
  np.testing.assert_array_equal(data, [[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0],
                                       [6, 7, 8, 9, 10, 11], [11, 10, 9, 8, 7, 6]])
  np.testing.assert_array_equal(rev, [False, True, False, True])
  data, _, rev = sampling.lanes(stream, sent, bsz_per_host=4, num_core_per_host=1, bi_data=True)
  np.testing.assert_array_equal(data[:, 0], [0, 6, 5, 11])
  data, _, _ = sampling.lanes(np.arange(13), np.zeros(13, bool), 3)
  np.testing.assert_array_equal(data, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]])


def _sentences(rng, total, max_len=12):
  lengths = rng.integers(1, max_len, size=total)
  return np.repeat(np.arange(total) % 2 == 1, lengths)


@pytest.mark.parametrize("seed", range(20))
def test_split_a_b_properties(seed):
  rng = np.random.default_rng(seed)
  sent = _sentences(rng, 300)
  bounds = set(np.flatnonzero(sent[1:] != sent[:-1]) + 1)
  tot = 40
  begins = np.arange(0, len(sent) - 60, 17)
  out = sampling.split_a_b(rng, sent, begins, tot)
  for k, begin in enumerate(begins):
    if not out["ok"][k]:
      continue
    a = out["a_end"][k] - begin
    b = out["b_end"][k] - out["b_begin"][k]
    assert a + b == tot and a >= 0 and b >= 0
    if out["label"][k] == 1:        # true continuation: B starts at the boundary A was cut at
      assert out["b_begin"][k] in bounds and out["a_end"][k] <= out["b_begin"][k]
    else:                            # random B starts at a sentence start
      assert out["b_begin"][k] == 0 or out["b_begin"][k] in bounds
  assert 0.3 < out["label"][out["ok"]].mean() < 0.7 or out["ok"].sum() < 10


def test_split_a_b_rows_is_split_a_b_row_by_row():
  """All rows at once: the same draws in the same order, the same segments (rows without any
  sentence break, rows with many, empty steps)."""
  rs = np.random.default_rng(0)
  for trial in range(200):
    rows, length, tot = int(rs.integers(1, 9)), int(rs.integers(1, 400)), int(rs.integers(1, 60))
    sent = (np.cumsum(rs.random([rows, length]) < rs.choice([0.0, 0.01, 0.1, 0.5]), axis=1)
            % 2).astype(bool)
    begins = np.arange(0, max(length - tot, 0), int(rs.integers(1, 40)))
    one, many = np.random.default_rng(trial), np.random.default_rng(trial)
    want = [sampling.split_a_b(one, sent[r], begins, tot) for r in range(rows)]
    got = sampling.split_a_b_rows(many, sent, begins, tot)
    for key in want[0]:
      np.testing.assert_array_equal(np.stack([w[key] for w in want]).reshape(rows, -1),
                                    got[key], err_msg=key)
    assert one.random() == many.random()


def test_trim_matches_the_release_loop():
  rng = np.random.default_rng(0)
  a, b = rng.integers(0, 30, 500), rng.integers(0, 30, 500)
  tot = rng.integers(0, 40, 500)
  ta, tb = sampling._trim(a, b, tot)
  for k in range(500):
    x, y = int(a[k]), int(b[k])
    while x + y > tot[k]:
      if x > y:
        x -= 1
      else:
        y -= 1
    assert (x, y) == (ta[k], tb[k])


def _words(rng, rows, n, p_start=0.6):
  start = rng.random([rows, n]) < p_start
  start[:, 0] = True
  return start


@pytest.mark.parametrize("mode", ["word", "piece", "single"])
def test_targets_exact_count_never_func(mode):
  rng = np.random.default_rng(1)
  start = _words(rng, 300, 64)
  func = np.zeros_like(start)
  func[:, [20, 62, 63]] = True      # <sep>, <sep>, <cls>
  start |= func
  mask = sampling.sample_targets(rng, start, func, goal=9, mode=mode)
  assert (mask.sum(1) == 9).all()
  assert not (mask & func).any()


def test_word_spans_cover_whole_words():
  rng = np.random.default_rng(2)
  start = _words(rng, 400, 96)
  func = np.zeros_like(start)
  mask = sampling.sample_targets(rng, start, func, goal=None, mode="word")
  runs_ok = 0
  for row in range(len(mask)):
    m = np.concatenate([[False], mask[row], [False]])
    begins = np.flatnonzero(~m[:-1] & m[1:])
    ends = np.flatnonzero(m[:-1] & ~m[1:])
    for b, e in zip(begins, ends):
      assert start[row, b]                              # starts at a word start
      assert e == start.shape[1] or start[row, e]       # ends right before the next word
      runs_ok += 1
  assert runs_ok > 1000
  piece = sampling.sample_targets(np.random.default_rng(2), start, func, goal=None, mode="piece")
  cuts_words = sum(e < start.shape[1] and not start[r, e]
                   for r in range(len(piece))
                   for e in np.flatnonzero(piece[r, :-1] & ~piece[r, 1:]) + 1)
  assert cuts_words > 100          # the release's bug: spans end inside words


@pytest.mark.parametrize("alpha,beta", [(6, 1), (3, 1), (12, 2)])
def test_predicted_fraction_is_one_over_k_plus_one(alpha, beta):
  rng = np.random.default_rng(3)
  start = np.ones([200, 2048], bool)                    # every piece its own word
  mask = sampling.sample_targets(rng, start, np.zeros_like(start), goal=None, alpha=alpha,
                                 beta=beta)
  expected = 1.0 / (alpha / beta + 1)
  assert abs(mask.mean() - expected) < 0.1 * expected, (mask.mean(), expected)


def test_span_lengths_follow_one_over_n():
  rng = np.random.default_rng(4)
  start = np.ones([300, 1024], bool)
  mask = sampling.sample_targets(rng, start, np.zeros_like(start), goal=None)
  m = np.pad(mask, [(0, 0), (1, 1)])
  runs = []
  for row in m:
    b = np.flatnonzero(~row[:-1] & row[1:])
    e = np.flatnonzero(row[:-1] & ~row[1:])
    runs.extend(e - b)
  counts = np.bincount(runs, minlength=6)[1:6] / len(runs)
  expected = (1 / np.arange(1, 6)) / (1 / np.arange(1, 6)).sum()
  # adjacent spans can touch (context 0 on one side), so lengths run slightly long
  assert np.all(np.abs(counts - expected) < 0.06), (counts, expected)


def test_permutation_ranks_uniform_within_blocks():
  rng = np.random.default_rng(5)
  ranks = sampling.permutation_ranks(rng, 4000, 12, 4)
  blocks = ranks.reshape(4000, 3, 4)
  assert (np.sort(blocks, axis=-1) == np.arange(4)).all()   # each block a permutation
  first = np.bincount(blocks[:, :, 0].ravel(), minlength=4) / blocks[:, :, 0].size
  assert np.all(np.abs(first - 0.25) < 0.02)
