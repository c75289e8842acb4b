"""BERT's 80/10/10 corruption of the predicted tokens (issue #31), for XLNet's mlm arm
(the mlm objective's `corrupt`, pretraining/mlm.py, and what `PretrainTask.predict` hands the model) and for MPNet
(`mpnet_pretrain.corruption` through `build_inputs`): the exact id at each kind of target
(MASKED: <mask>; RANDOM: a random id, uniform over [9, V) and independent of the original;
KEPT: the original), untouched ids outside the targets, and the proportions over many
draws within 4.5 binomial standard deviations. Fixed seeds: every number here is
deterministic. The ids the kinds name are checked against the ids themselves (a count of
<mask>, of original and of other ids), so a wrong `kind` cannot hide a wrong id."""

import numpy as np
import pytest
import tensorflow as tf

from modeling.mpnet import pretrain as mpnet_pretrain
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from modeling.mpnet.pretrain import KEPT, MASKED, RANDOM
from pretraining.task import PretrainConfig, PretrainTask

MASK_ID = 6
VOCAB = 41                  # random ids in [9, 41): 32 values, so each is drawn ~30 times
FIRST = 9                   # past XLNet's special symbols
SIGMAS = 4.5
PROPORTIONS = {MASKED: 0.8, RANDOM: 0.1, KEPT: 0.1}


def _within_binomial(count, n, p, what):
  sd = np.sqrt(n * p * (1 - p))
  assert abs(count - n * p) <= SIGMAS * sd, (
      f"{what}: {count} of {n} ({count / n:.4f}), expected {p} ± {SIGMAS} sd "
      f"({SIGMAS * sd / n:.4f})")


def check_draws(original, corrupted, kind):
  """original, corrupted [N] int: the ids at N target positions before and after the draw;
  kind [N] its kinds. Asserts the ids per kind, the proportions, and that the random ids are
  uniform over [FIRST, VOCAB) and independent of the original token."""
  n = len(original)
  assert np.all(original >= FIRST)                   # the fixtures hold no special symbol
  masked, random, kept = (kind == k for k in (MASKED, RANDOM, KEPT))
  assert np.all(masked | random | kept)
  np.testing.assert_array_equal(corrupted[masked], MASK_ID)
  np.testing.assert_array_equal(corrupted[kept], original[kept])
  drawn = corrupted[random]
  assert drawn.min() >= FIRST and drawn.max() < VOCAB, (drawn.min(), drawn.max())
  for k, p in PROPORTIONS.items():
    _within_binomial(int((kind == k).sum()), n, p, f"kind {k}")
  # The random ids: the original only by chance (1 in VOCAB - FIRST), not systematically.
  values = VOCAB - FIRST
  _within_binomial(int((drawn == original[random]).sum()), len(drawn), 1 / values,
                   "random ids equal to the original")
  # Uniform over the range: Pearson's chi-square (values - 1 degrees of freedom) below its mean
  # plus 5 standard deviations; every value drawn.
  counts = np.bincount(drawn - FIRST, minlength=values)
  expected = len(drawn) / values
  chi2 = ((counts - expected) ** 2 / expected).sum()
  assert chi2 < values - 1 + 5 * np.sqrt(2 * (values - 1)), (chi2, counts)
  assert counts.min() > 0, counts
  # The same from the ids alone (not trusting `kind`): <mask>, the original, anything else.
  _within_binomial(int((corrupted == MASK_ID).sum()), n, 0.8, "ids equal to <mask>")
  p_same = 0.1 + 0.1 / values
  _within_binomial(int((corrupted == original).sum()), n, p_same, "ids equal to the original")
  _within_binomial(int(((corrupted != MASK_ID) & (corrupted != original)).sum()), n,
                   1 - 0.8 - p_same, "ids neither <mask> nor the original")


# ---- XLNet: the mlm objective's corrupt -----------------------------------------------
B, L, P = 8, 64, 24          # rows, tokens, targets per row


def _task(seed=0):
  config = PretrainConfig(record_dir=None, seq_len=L, reuse_len=L // 2, num_predict=P,
                          bsz_per_host=B, bi_data=False, objective="mlm", seed=seed)
  model = XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=24, n_token=VOCAB)
  return PretrainTask(config, model, RunConfig(dropout=0.0, dropatt=0.0))


def _corrupt(task):
  """The mlm objective's corruption of `task`'s batches: (batch, step) -> (ids, kind)."""
  return lambda batch, step: task.objective.corrupt(task, batch, step)


def _batch(seed):
  """input_ids (never <mask> nor a special symbol) and input_q: P targets per row."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(FIRST, VOCAB, [B, L]).astype(np.int32)
  target = np.zeros([B, L], np.float32)
  for b in range(B):
    target[b, rng.choice(L, P, replace=False)] = 1.0
  return {"input_ids": tf.constant(ids), "input_q": tf.constant(target)}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "xla"])
def test_xlnet_mlm_corruption_ids_and_proportions(jit):
  """Over 60 steps (60 stateless draws, 11,520 targets): exact ids per kind, untouched ids and
  kind KEPT off the targets, 0.8/0.1/0.1. Also compiled (XLA's stateless random numbers differ
  from TensorFlow's kernels: same rules, other draws), as training runs it by default."""
  task = _task()
  corrupt = tf.function(_corrupt(task), jit_compile=True) if jit else _corrupt(task)
  originals, corrupteds, kinds = [], [], []
  for step in range(60):
    batch = _batch(step)
    corrupted, kind = (t.numpy() for t in corrupt(batch, tf.constant(step, tf.int64)))
    ids, target = batch["input_ids"].numpy(), batch["input_q"].numpy() > 0
    np.testing.assert_array_equal(corrupted[~target], ids[~target])   # outside the targets
    np.testing.assert_array_equal(kind[~target], KEPT)
    originals.append(ids[target])
    corrupteds.append(corrupted[target])
    kinds.append(kind[target])
  check_draws(np.concatenate(originals), np.concatenate(corrupteds), np.concatenate(kinds))


def test_xlnet_mlm_draw_is_seeded_by_step_and_run_seed():
  """A resumed run draws the same at the same step; other steps and other --seed draw anew."""
  batch = _batch(0)
  draw = lambda task, step: _corrupt(task)(batch, tf.constant(step, tf.int64))[1].numpy()
  task = _task(seed=0)
  np.testing.assert_array_equal(draw(task, 5), draw(task, 5))
  np.testing.assert_array_equal(draw(task, 5), draw(_task(seed=0), 5))
  assert not np.array_equal(draw(task, 5), draw(task, 6))
  assert not np.array_equal(draw(task, 5), draw(_task(seed=1), 5))


class _Recorder:
  """Stands for XLNetPretrainModel in PretrainTask.predict: records the inputs it gets."""

  def __call__(self, inputs, mems=None, training=False, query_stream=True):
    self.inputs, self.query_stream = inputs, query_stream
    return {"logits": tf.zeros([B, P, VOCAB])}


def test_xlnet_mlm_predict_feeds_the_model_the_corrupted_ids():
  """predict (what training and the analyses run) hands the model _corrupt's ids, not the
  batch's, and reports the same kinds."""
  task, batch = _task(), _batch(3)
  batch.update(target=tf.zeros([B, P], tf.int32), target_mask=tf.ones([B, P]))
  model = _Recorder()
  step = tf.constant(7, tf.int64)
  _, _, _, extra, _ = task.predict(model, batch, None, step)
  corrupted, kind = _corrupt(task)(batch, step)
  assert model.query_stream is False       # mlm: predictions from the content stream
  np.testing.assert_array_equal(model.inputs["input_ids"].numpy(), corrupted.numpy())
  np.testing.assert_array_equal(extra["kind"].numpy(), kind.numpy())
  assert (kind.numpy() == RANDOM).any() and (kind.numpy() == MASKED).any()


# ---- MPNet: mpnet_pretrain.corruption through build_inputs --------------------------------
ROWS, LENGTH, C = 8, 48, 16


def _records(seed):
  rng = np.random.default_rng(100 + seed)
  ids = rng.integers(FIRST, VOCAB, [ROWS, LENGTH]).astype(np.int32)
  masked = np.zeros([ROWS, LENGTH], bool)
  for b in range(ROWS):
    masked[b, rng.choice(LENGTH, C, replace=False)] = True
  rank = np.stack([rng.permutation(LENGTH) for _ in range(ROWS)]).astype(np.int32)
  return ids, masked, rank


@pytest.mark.parametrize("mode", ["mpnet", "mlm", "plm"])
def test_mpnet_copies_ids_and_proportions(mode):
  """Over 90 draws (11,520 predictions): the copies (query stream, and the content stream's
  last C tokens in mpnet and mlm modes) hold <mask> / a random id / the original per kind; the
  other content tokens are the records' ids at their positions, untouched; plm mode's query
  stream holds <mask> only and its content stream no copy."""
  originals, copies_all, kinds = [], [], []
  for draw in range(90):
    ids, masked, rank = _records(draw)
    out = mpnet_pretrain.build_inputs(tf.constant(ids), tf.constant(masked), tf.constant(rank),
                                      C, tf.constant([11, draw]), mode=mode, vocab_size=VOCAB)
    out = {k: v.numpy() for k, v in out.items() if v is not None}
    query_pos, kind = out["query_pos"], out["kind"]
    original = np.take_along_axis(ids, query_pos, axis=1)        # from the records themselves
    np.testing.assert_array_equal(out["targets"], original)
    assert all(masked[b, query_pos[b]].all() for b in range(ROWS))
    content_ids, content_pos = out["content_ids"], out["content_pos"]
    n_plain = LENGTH if mode in ("mpnet", "plm") else LENGTH - C
    np.testing.assert_array_equal(content_ids[:, :n_plain],
                                  np.take_along_axis(ids, content_pos[:, :n_plain], axis=1))
    if mode == "plm":
      assert content_ids.shape[1] == LENGTH
      np.testing.assert_array_equal(out["query_ids"], MASK_ID)
      copies = mpnet_pretrain.build_inputs(   # the copies the other modes would read
          tf.constant(ids), tf.constant(masked), tf.constant(rank), C, tf.constant([11, draw]),
          mode="mpnet", vocab_size=VOCAB)["query_ids"].numpy()
    else:
      copies = out["query_ids"]
      np.testing.assert_array_equal(content_ids[:, -C:], copies)
      np.testing.assert_array_equal(content_pos[:, -C:], query_pos)
    originals.append(original.ravel())
    copies_all.append(copies.ravel())
    kinds.append(kind.ravel())
  check_draws(np.concatenate(originals), np.concatenate(copies_all), np.concatenate(kinds))


def test_mpnet_corruption_kinds_and_random_ids_are_stateless():
  shape = tf.constant([4, 100])
  a = [t.numpy() for t in mpnet_pretrain.corruption(shape, tf.constant([1, 2]), VOCAB)]
  b = [t.numpy() for t in mpnet_pretrain.corruption(shape, tf.constant([1, 2]), VOCAB)]
  c = [t.numpy() for t in mpnet_pretrain.corruption(shape, tf.constant([1, 3]), VOCAB)]
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  assert not np.array_equal(a[0], c[0]) and not np.array_equal(a[1], c[1])
