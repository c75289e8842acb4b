"""finetuning/retrieval_metrics.py against references written here: MRR@10 and recall@k from a
loop that sorts each query's candidates by (-score, column) by hand (the documented tie rule),
on crafted score matrices with ties and a gold past rank 10; Spearman against
scipy.stats.spearmanr; the pairs file readers' one-line refusals."""

import numpy as np
import pytest

from finetuning import pairs_data
from finetuning import retrieval_metrics as rm
from tests.reference_libs import require

def _reference(scores):
  """Loops: query i's ranking = its columns sorted by descending score, ties by column."""
  ranks = []
  for i, row in enumerate(np.asarray(scores, np.float64).tolist()):
    order = sorted(range(len(row)), key=lambda j: (-row[j], j))
    ranks.append(order.index(i) + 1)
  out = {"mrr@10": sum(1.0 / r if r <= 10 else 0.0 for r in ranks) / len(ranks)}
  for k in (1, 5, 10):
    out[f"recall@{k}"] = sum(r <= k for r in ranks) / len(ranks)
  return ranks, out

def test_crafted_matrix_by_hand():
  scores = np.array([[0.9, 0.1, 0.2],      # gold first: rank 1
                     [0.5, 0.5, 0.7],      # gold ties column 0 (earlier: ahead), 2 higher: 3
                     [0.3, 0.3, 0.3]])     # all tie: columns 0 and 1 ahead: rank 3
  assert rm.gold_ranks(scores).tolist() == [1, 3, 3]
  got = rm.retrieval_metrics(scores)
  assert got["recall@1"] == pytest.approx(1 / 3)
  assert got["recall@5"] == got["recall@10"] == 1.0
  assert got["mrr@10"] == pytest.approx((1 + 1 / 3 + 1 / 3) / 3)
  # a tie with a LATER column does not push the gold back
  assert rm.gold_ranks([[0.4, 0.4], [0.0, 1.0]]).tolist() == [1, 1]

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_matrices_with_ties_and_deep_golds(seed):
  rng = np.random.default_rng(seed)
  n, m = 14, 17                            # more candidates than queries
  scores = rng.integers(0, 6, size=(n, m)).astype(np.float64) / 5   # many ties
  scores[3, 3] = -1.0                      # a gold ranked last: past 10, MRR 0, no recall
  ranks, expected = _reference(scores)
  assert max(ranks) > 10 and min(ranks) == 1
  assert rm.gold_ranks(scores).tolist() == ranks
  got = rm.retrieval_metrics(scores)
  assert got.keys() == expected.keys()
  for k in expected:
    assert got[k] == pytest.approx(expected[k], abs=1e-12), k

def test_spearman_of_cosines_equals_scipy():
  stats = require("scipy.stats")
  rng = np.random.default_rng(3)
  a, b = rng.normal(size=(12, 5)), rng.normal(size=(12, 5))
  gold = np.round(rng.uniform(0, 5, size=12), 0)          # tied gold scores
  cos = np.array([x @ y / np.linalg.norm(x) / np.linalg.norm(y) for x, y in zip(a, b)])
  got = rm.sts_metrics(a, b, gold)["spearman"]
  assert got == pytest.approx(stats.spearmanr(cos, gold).statistic, abs=1e-12)

def test_readers_refuse_in_one_line(tmp_path):
  cols = pairs_data.PairColumns()
  missing = tmp_path / "p.tsv"
  missing.write_text("anchor\tother\na\tb\n")
  with pytest.raises(ValueError, match=r"p.tsv: no column 'positive' \(--positive_column\); "
                     r"its columns: 'anchor', 'other'$"):
    pairs_data.read_pairs(str(missing), cols)
  header_only = tmp_path / "h.csv"
  header_only.write_text("anchor,positive\n")
  with pytest.raises(ValueError, match="h.csv: no rows"):
    pairs_data.read_pairs(str(header_only), cols)
  empty = tmp_path / "e.jsonl"
  empty.write_text("\n")
  with pytest.raises(ValueError, match="e.jsonl: no rows"):
    pairs_data.read_pairs(str(empty), cols)
  bad_key = tmp_path / "k.jsonl"
  bad_key.write_text('{"anchor": "a", "positive": "b"}\n{"anchor": "a"}\n')
  with pytest.raises(ValueError, match=r"k.jsonl:2: no 'positive'"):
    pairs_data.read_pairs(str(bad_key), cols)
  sts = tmp_path / "sts.tsv"
  sts.write_text("sentence1\tsentence2\tscore\na\tb\t3.5\nc\td\tx\n")
  with pytest.raises(ValueError, match=r"sts.tsv:3: score 'x' is not a finite number"):
    pairs_data.read_sts(str(sts))

def test_readers_read_glue_sts_and_hard_negatives(tmp_path):
  sts = tmp_path / "dev.tsv"
  sts.write_text("index\tgenre\tsentence1\tsentence2\tscore\n0\tx\tA man.\tA dog.\t1.25\n\n"
                 "1\ty\tB\tC\t5.000\n")
  assert pairs_data.read_sts(str(sts)) == (["A man.", "B"], ["A dog.", "C"], [1.25, 5.0])
  path = tmp_path / "t.csv"
  path.write_text('q,p,n\n"a, b",c,d\ne,f,g\n')
  pairs = pairs_data.read_pairs(str(path), pairs_data.PairColumns("q", "p", "n"))
  assert (pairs.anchors, pairs.positives, pairs.negatives, pairs.lines) == \
      (["a, b", "e"], ["c", "f"], ["d", "g"], [2, 3])
  assert len(pairs) == 2
