"""Retrieval and similarity metrics of sentence embeddings (run_pairs.py's evaluation).

Retrieval over a file of (query, positive) pairs: every query is scored against every positive
of the file, and query i's one relevant candidate is positive i (a repeated text in another row
is not relevant). From the score matrix `scores [queries, candidates]`:

  rank_i      1 + the number of candidates placed before candidate i in query i's ranking:
              those with a higher score, and those with an EQUAL score and a smaller column
              index (ties are broken by column order, as a stable sort by descending score);
  recall@k    the fraction of queries with rank_i <= k (one relevant candidate: recall@k is
              also hit@k / success@k);
  MRR@k       the mean over queries of 1 / rank_i when rank_i <= k, else 0.

Similarity against gold scores (STS-B): the Spearman correlation of the cosine similarity of
each pair with its gold score (finetuning/metrics.spearman: ranks with ties averaged).
"""

import numpy as np

from finetuning import metrics

RECALL_AT = (1, 5, 10)
MRR_AT = 10


def gold_ranks(scores):
  """The rank (1 = first) of candidate i in query i's ranking, ties broken by column index.

  Args:
    scores: float [queries, candidates], candidates >= queries; column i is query i's relevant
      candidate.
  Returns:
    int64 [queries].
  """
  scores = np.asarray(scores, np.float64)
  n = scores.shape[0]
  if scores.ndim != 2 or scores.shape[1] < n:
    raise ValueError(f"scores of shape {list(scores.shape)}: expected [queries, candidates] "
                     "with at least one candidate per query")
  gold = scores[np.arange(n), np.arange(n)][:, None]                 # [queries, 1]
  columns = np.arange(scores.shape[1])[None, :]
  ahead = (scores > gold) | ((scores == gold) & (columns < np.arange(n)[:, None]))
  return 1 + ahead.sum(axis=1)


def retrieval_metrics(scores, recall_at=RECALL_AT, mrr_at=MRR_AT):
  """{"mrr@10": ..., "recall@1": ..., "recall@5": ..., "recall@10": ...} of a score matrix
  (gold_ranks' argument), floats in [0, 1]."""
  ranks = gold_ranks(scores)
  out = {f"mrr@{mrr_at}": float(np.mean(np.where(ranks <= mrr_at, 1.0 / ranks, 0.0)))}
  for k in recall_at:
    out[f"recall@{k}"] = float(np.mean(ranks <= k))
  return out


def cosine_pairs(a, b):
  """Row-wise cosine similarity of two float [n, dim] arrays -> [n] (float64)."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  norms = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
  return np.sum(a * b, axis=1) / norms


def sts_metrics(emb_a, emb_b, gold):
  """{"spearman": ...} of the pairs' cosine similarities against their gold scores."""
  return {"spearman": float(metrics.spearman(np.asarray(gold, np.float64),
                                             cosine_pairs(emb_a, emb_b)))}
