"""The in-batch-negatives loss of sentence embeddings: sentence-transformers'
MultipleNegativesRankingLoss in its default form (one softmax from each anchor over every
candidate of the batch, InfoNCE).

Each anchor i is scored against every positive of the batch and every hard negative:
  scores = similarity(anchors, concat(positives, negatives...)) * scale   [batch, batch * (1 + n)]
and the loss is the mean cross-entropy of those scores with label i (its own positive, column
i); the other positives are the in-batch negatives. `scale` is 1 / temperature (20 = 0.05).
"""

import tensorflow as tf

from modeling.pooling import normalize

SIMILARITIES = ("cosine", "dot")


def similarity_matrix(a, b, kind="cosine"):
  """Every row of `a` against every row of `b`.

  Args:
    a: float [n, dim]; b: float [m, dim]; kind: "cosine" (as sentence-transformers' cos_sim:
      both normalised, torch.nn.functional.normalize's epsilon) or "dot".
  Returns:
    [n, m].
  """
  if kind not in SIMILARITIES:
    raise ValueError(f"similarity {kind!r}: expected one of {', '.join(SIMILARITIES)}")
  if kind == "cosine":
    a, b = normalize(a), normalize(b)
  return tf.matmul(a, b, transpose_b=True)


def candidates(positives, negatives=None):
  """The columns the anchors are scored against: positives first (anchor i's label is column
  i), then each hard-negative column's rows.

  Args:
    positives: float [batch, dim]; negatives: None, one float [batch, dim], or a list of them.
  Returns:
    [batch * (1 + number of negative columns), dim].
  """
  if negatives is None:
    negatives = []
  elif not isinstance(negatives, (list, tuple)):
    negatives = [negatives]
  return tf.concat([positives] + list(negatives), axis=0)


def in_batch_scores(anchors, positives, negatives=None, scale=20.0, similarity_kind="cosine"):
  """The scaled scores the loss takes a softmax of: float [batch, batch * (1 + n)]; column i
  of row i is anchor i's own positive. Arguments as in_batch_negatives_loss."""
  if not float(scale) > 0:
    raise ValueError(f"scale={scale}: must be positive (it is 1 / temperature)")
  return similarity_matrix(anchors, candidates(positives, negatives), similarity_kind) * scale


def in_batch_negatives_loss(anchors, positives, negatives=None, scale=20.0,
                            similarity="cosine"):
  """sentence-transformers' MultipleNegativesRankingLoss (directions=("query_to_doc",),
  partition_mode="joint", no hardness weighting) on embeddings.

  Args:
    anchors: float [batch, dim], one per pair (the query / first text).
    positives: float [batch, dim], positives[i] the match of anchors[i].
    negatives: None, float [batch, dim] (negatives[i] a hard negative of anchors[i], and an
      in-batch negative of every other anchor), or a list of such columns.
    scale: multiplies the similarities (1 / temperature; sentence-transformers' default 20).
    similarity: "cosine" (the default, sentence-transformers' cos_sim) or "dot".
  Returns:
    scalar float32, the mean over anchors of -log softmax(scores[i])[i].
  """
  scores = tf.cast(in_batch_scores(anchors, positives, negatives, scale, similarity),
                   tf.float32)
  labels = tf.range(tf.shape(scores)[0])
  return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                        logits=scores))
