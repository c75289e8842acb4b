"""modeling/contrastive.py against sentence-transformers' MultipleNegativesRankingLoss: a torch
transcription of its default path (losses/MultipleNegativesRankingLoss and util.cos_sim) and,
when installed, the real loss on a tiny torch module: loss, gradients (embeddings and a linear
projection's weights) and several SGD steps equal."""

import numpy as np
import pytest
import tensorflow as tf

from modeling import contrastive
from tests.reference_libs import require

torch = require("torch")
TOL = 1e-5


# ---- the reference, transcribed from sentence-transformers ----------------------------
def _cos_sim(a, b):
  """util.cos_sim: normalize_embeddings (torch.nn.functional.normalize, p=2, dim=-1) of both,
  then a @ b.T."""
  a_norm = torch.nn.functional.normalize(a, p=2, dim=-1)
  b_norm = torch.nn.functional.normalize(b, p=2, dim=-1)
  return torch.mm(a_norm, b_norm.transpose(0, 1))


def _dot(a, b):
  return torch.mm(a, b.transpose(0, 1))


def _mnrl(embeddings, scale=20.0, similarity_fct=_cos_sim):
  """MultipleNegativesRankingLoss.compute_loss_from_embeddings with its defaults
  (directions=("query_to_doc",), partition_mode="joint", no hardness, one device):
  embeddings = [anchors, positives, negatives_1, ...]."""
  queries, docs = embeddings[0], embeddings[1:]
  batch_size = queries.size(0)
  docs_all = torch.cat(docs, dim=0)
  local_indices = torch.arange(0, batch_size)
  row_indices = torch.arange(batch_size)
  sim = similarity_fct(queries[local_indices], docs_all) * scale
  positive_scores = sim[row_indices, local_indices]
  log_z = torch.logsumexp(sim, dim=1)
  return -(positive_scores - log_z).mean()


# ---- helpers ---------------------------------------------------------------------------
def _close(ours, reference, what):
  ours = np.asarray(ours, np.float64)
  if hasattr(reference, "detach"):
    reference = reference.detach().numpy()
  reference = np.asarray(reference, np.float64)
  assert ours.shape == reference.shape, (what, ours.shape, reference.shape)
  err = float(np.max(np.abs(ours - reference)))
  assert err < TOL, f"{what}: max difference {err:.3g}"


def _columns(rng, batch, dim, negatives):
  return [rng.standard_normal([batch, dim]).astype(np.float32) for _ in range(2 + negatives)]


def _ours(columns, scale, similarity):
  negatives = columns[2:] if len(columns) > 3 else (columns[2] if len(columns) == 3 else None)
  return contrastive.in_batch_negatives_loss(columns[0], columns[1], negatives, scale=scale,
                                             similarity=similarity)


def test_by_hand_two_pairs():
  """Two orthogonal pairs: anchor i equals positive i, so each row's scores are (scale, 0)."""
  a = np.array([[1, 0], [0, 2]], np.float32)
  got = float(contrastive.in_batch_negatives_loss(a, a, scale=2.0))
  assert abs(got - np.log(1 + np.exp(-2.0))) < 1e-6
  # a hard negative equal to the positive of the other row: row scores (2, 0, 0, 2)
  got = float(contrastive.in_batch_negatives_loss(a, a, a[::-1].copy(), scale=2.0))
  assert abs(got - np.log(1 + 2 * np.exp(-2.0) + 1)) < 1e-6
  scores = contrastive.in_batch_scores(a, a, a[::-1].copy(), scale=2.0).numpy()
  np.testing.assert_allclose(scores, [[2, 0, 0, 2], [0, 2, 2, 0]], atol=1e-6)


@pytest.mark.parametrize("negatives,similarity,scale", [
    (0, "cosine", 20.0), (1, "cosine", 20.0), (2, "cosine", 7.0), (1, "dot", 1.0)])
def test_loss_and_embedding_gradients_equal_the_transcription(negatives, similarity, scale):
  rng = np.random.default_rng(negatives)
  columns = _columns(rng, 5, 6, negatives)
  tf_columns = [tf.constant(c) for c in columns]
  with tf.GradientTape() as tape:
    tape.watch(tf_columns)
    loss = _ours(tf_columns, scale, similarity)
  grads = tape.gradient(loss, tf_columns)
  torch_columns = [torch.tensor(c, requires_grad=True) for c in columns]
  reference = _mnrl(torch_columns, scale, _cos_sim if similarity == "cosine" else _dot)
  reference.backward()
  _close(loss, reference, "loss")
  for i, (g, t) in enumerate(zip(grads, torch_columns)):
    _close(g, t.grad, f"gradient of column {i}")


def _projection_steps(rng, negatives, steps=5, lr=0.5):
  """A linear projection W [in, dim] of each column's inputs, trained by SGD on both sides:
  (our losses, the transcription's, our W after each step, the transcription's)."""
  inputs = _columns(rng, 4, 8, negatives)
  w0 = (rng.standard_normal([8, 3]) / 3).astype(np.float32)
  w_tf, w_torch = tf.Variable(w0), torch.tensor(w0, requires_grad=True)
  ours, reference = [], []
  for _ in range(steps):
    with tf.GradientTape() as tape:
      loss = _ours([tf.matmul(x, w_tf) for x in inputs], 20.0, "cosine")
    grad = tape.gradient(loss, w_tf)
    ref = _mnrl([torch.tensor(x) @ w_torch for x in inputs])
    w_torch.grad = None
    ref.backward()
    _close(grad, w_torch.grad, "gradient of the projection")
    ours.append((float(loss), w_tf.numpy().copy()))
    reference.append((ref.item(), w_torch.detach().numpy().copy()))
    w_tf.assign_sub(lr * grad)
    with torch.no_grad():
      w_torch -= lr * w_torch.grad
  return ours, reference


@pytest.mark.parametrize("negatives", [0, 1])
def test_sgd_on_a_projection_stays_equal_to_the_transcription(negatives):
  ours, reference = _projection_steps(np.random.default_rng(10 + negatives), negatives)
  for step, ((loss, w), (ref_loss, ref_w)) in enumerate(zip(ours, reference)):
    _close(loss, ref_loss, f"loss at step {step}")
    _close(w, ref_w, f"weights at step {step}")
  assert ours[-1][0] < ours[0][0] - 0.1     # the steps did move the loss


def test_equal_to_sentence_transformers_multiple_negatives_ranking_loss():
  """The real loss module (its forward: one embedding per column from a model's
  "sentence_embedding") on a tiny torch module, a linear projection; SGD on both sides."""
  require("sentence_transformers")
  from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

  class Projection(torch.nn.Module):
    def __init__(self, w):
      super().__init__()
      self.w = torch.nn.Parameter(torch.tensor(w))

    def forward(self, features):
      return {"sentence_embedding": features["x"] @ self.w}

  rng = np.random.default_rng(3)
  for negatives in (0, 1, 2):
    inputs = _columns(rng, 4, 8, negatives)
    w0 = (rng.standard_normal([8, 3]) / 3).astype(np.float32)
    module = Projection(w0)
    loss_fn = MultipleNegativesRankingLoss(module, scale=20.0)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
    w_tf = tf.Variable(w0)
    for step in range(4):
      optimizer.zero_grad()
      reference = loss_fn([{"x": torch.tensor(x)} for x in inputs], None)
      reference.backward()
      with tf.GradientTape() as tape:
        loss = _ours([tf.matmul(x, w_tf) for x in inputs], 20.0, "cosine")
      grad = tape.gradient(loss, w_tf)
      what = f"{negatives} negative column(s), step {step}"
      _close(loss, reference, f"loss, {what}")
      _close(grad, module.w.grad, f"gradient, {what}")
      optimizer.step()
      w_tf.assign_sub(0.5 * grad)
      _close(w_tf.numpy(), module.w, f"weights after {what}")


def test_bad_arguments_are_one_line():
  a = np.eye(2, dtype=np.float32)
  with pytest.raises(ValueError, match="similarity 'l2': expected one of cosine, dot"):
    contrastive.in_batch_negatives_loss(a, a, similarity="l2")
  with pytest.raises(ValueError, match="scale=0: must be positive"):
    contrastive.in_batch_negatives_loss(a, a, scale=0)
