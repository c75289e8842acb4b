"""Information flow at training time: which input tokens can each prediction depend on?

For a tiny model trained a few steps on records the writer made from real text, the next
batch of the real input pipeline goes through the objective's own forward pass
(`PretrainTask.predict`, which `loss` and so run_pretrain.py use; dropout off). One input
token of one row is replaced at a time, and for every prediction of every row the test
records whether its logits changed. That observed dependency must equal, exactly, what the
papers say each prediction may see, computed here from the records' targets and stored
factorization order (never from the masks the code builds):

- XLNet PLM (two-stream, the release's `_local_perm`): a target sees the non-targets of its
  half, the targets and <sep>/<cls> of its half earlier in the factorization order, and, in
  the new half, the whole reuse half; never itself, never a later target, never another row.
- XLNet MLM ("DAE + Transformer-XL"): every token except the targets that the 80/10/10 draw
  replaced (a target whose input was kept is visible, itself included).
- MPNet (mpnet mode): all non-predicted tokens, the predicted tokens earlier in the order,
  and for itself and later predictions only their input copies (so only a copy the 80/10/10
  draw kept carries the token); - position compensation (plm mode): no copies at all;
  - permutation: the same with the order = position order; MLM mode: non-predicted tokens
  and kept copies.
"""

import numpy as np
import pytest
import tensorflow as tf

from data_utils.tokenization import CLS_ID, SEP_ID
from modeling import mpnet, mpnet_pretrain
from modeling.config import RunConfig
from tests import pretrain_helpers as ph
from training.pretrain_task import PretrainConfig, PretrainTask

KEPT = mpnet_pretrain.KEPT


@pytest.fixture(scope="module")
def recs(tmp_path_factory, text_and_sp):
  text, sp = text_and_sp
  from data_utils.tokenization import Tokenizer
  vocab = Tokenizer(sp, lower=True).vocab_size
  return vocab, ph.make_records(text, sp, tmp_path_factory.mktemp("flow") / "uni")


def _mpnet_task(record_dir, vocab, mode, permute):
  model_config = mpnet.MPNetConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=ph.SEQ + 8, hidden_dropout_prob=0.0,
                                   attention_probs_dropout_prob=0.0, pad_token_id=5)
  config = PretrainConfig(record_dir=record_dir, seq_len=ph.SEQ, reuse_len=ph.REUSE,
                          num_predict=ph.NP, bsz_per_host=ph.BSZ, bi_data=False,
                          objective="mpnet", mpnet_mode=mode, mpnet_permute=permute,
                          learning_rate=3e-3, train_steps=20, warmup_steps=2)
  return PretrainTask(config, model_config, RunConfig(dropout=0.0, dropatt=0.0))


def observed_dependency(task, model, batch, state, step):
  """(changed [B, P, B', L]: did prediction p of row b change when token j of row b' did?,
  the forward pass's extra outputs). Compiled as the train step is (XLA's stateless random
  numbers differ from TensorFlow's kernels, so the 80/10/10 draw is read from this pass)."""
  def run(b):
    logits, _, _, extra, _ = task.predict(model, b, state, step, training=True)
    return logits, {k: v for k, v in extra.items() if v is not None}
  predict = tf.function(run, jit_compile=True)
  base, extra = predict(batch)
  base = base.numpy()
  ids = batch["input_ids"].numpy()
  rows, length = ids.shape
  vocab = task.vocab_size
  changed = np.zeros(base.shape[:2] + (rows, length), bool)
  for r in range(rows):
    for j in range(length):
      new = ids.copy()
      new[r, j] = 9 + (ids[r, j] - 9 + 1 + 7 * r + j) % (vocab - 9)   # another ordinary piece
      out = predict(dict(batch, input_ids=tf.constant(new), input_k=tf.constant(new)))[0]
      # Blocked keys get exactly zero attention, so a token a prediction cannot see leaves
      # its logits bit-identical; a visible one moves them (by 6e-6 or more in a tiny model).
      changed[:, :, r, j] = np.abs(out.numpy() - base).max(-1) > 0
  return changed, {k: v.numpy() for k, v in extra.items()}


def xlnet_plm_visible(ids, is_masked, rank, reuse):
  """[B, P, L] the release's rules, targets in position order."""
  func = (ids == SEP_ID) | (ids == CLS_ID)
  targets = is_masked & ~func
  rows, length = ids.shape
  out = []
  for b in range(rows):
    row = []
    for t in np.flatnonzero(targets[b]):
      see = np.zeros(length, bool)
      for j in range(length):
        if (t >= reuse) != (j >= reuse):
          see[j] = t >= reuse             # the new half sees the whole reuse half, not back
        elif j != t:
          see[j] = (not targets[b, j] and not func[b, j]) or rank[b, j] < rank[b, t]
      row.append(see)
    out.append(row)
  return np.array(out)


def xlnet_mlm_visible(ids, is_masked, kind):
  func = (ids == SEP_ID) | (ids == CLS_ID)
  targets = is_masked & ~func
  hidden = targets & (kind != KEPT)          # replaced by <mask> or a random piece
  return np.array([[~hidden[b] for _ in np.flatnonzero(targets[b])] for b in range(len(ids))])


def mpnet_visible(is_masked, query_pos, kind, mode):
  rows, length = is_masked.shape
  out = np.zeros(query_pos.shape + (length,), bool)
  for b in range(rows):
    order = {int(p): k for k, p in enumerate(query_pos[b])}
    assert sorted(order) == list(np.flatnonzero(is_masked[b]))
    for k in range(query_pos.shape[1]):
      for j in range(length):
        if j not in order:
          out[b, k, j] = True                                    # non-predicted
        elif mode == "mlm":
          out[b, k, j] = kind[b, order[j]] == KEPT               # only through its copy
        elif order[j] < k:
          out[b, k, j] = True                                    # earlier prediction
        else:
          out[b, k, j] = mode == "mpnet" and kind[b, order[j]] == KEPT
  return out


def _check(changed, visible):
  rows = changed.shape[0]
  for b in range(rows):
    for other in range(rows):
      if other != b:
        assert not changed[b, :, other].any(), f"row {b} depends on row {other}"
    mismatch = np.argwhere(changed[b, :, b] != visible[b])
    assert not len(mismatch), (
        f"row {b}: prediction/token pairs where the logits "
        f"{'changed' if changed[b, :, b][tuple(mismatch[0])] else 'did not change'} against the "
        f"paper's visibility: {mismatch[:8].tolist()}")


def _trained(task, tmp_path):
  trainer, losses = ph.train(task, tmp_path, steps_per_loop=5, save_every=20)
  assert np.isfinite(losses).all()
  ds = task.dataset(None, skip_batches=task.config.train_steps)
  batch = next(iter(ds))
  state = trainer.state_store.numpy()[0] if task.run_config.mem_len else tf.zeros([1])
  return trainer.model, batch, tf.constant(state), tf.constant(task.config.train_steps,
                                                                tf.int64)


@pytest.mark.parametrize("objective", ["plm", "mlm"])
def test_xlnet_predictions_see_what_the_paper_says(tmp_path, recs, objective):
  vocab, record_dir = recs
  task = ph.tiny_task(record_dir, vocab, objective=objective, dropout=0.0)
  model, batch, state, step = _trained(task, tmp_path)
  changed, extra = observed_dependency(task, model, batch, state, step)
  ids, is_masked = batch["input_ids"].numpy(), batch["is_masked"].numpy()
  if objective == "plm":
    visible = xlnet_plm_visible(ids, is_masked, batch["rank"].numpy(), ph.REUSE)
    # never itself: the diagonal of (target slot, its position) is always unchanged
    for b in range(len(ids)):
      for p, t in enumerate(np.flatnonzero(is_masked[b])):
        assert not changed[b, p, b, t]
  else:
    kind = extra["kind"]
    visible = xlnet_mlm_visible(ids, is_masked, kind)
    assert (kind[is_masked] != KEPT).any()
  assert visible.any(-1).all() and (~visible).any()
  _check(changed, visible)


@pytest.mark.parametrize("mode,permute", [("mpnet", True), ("plm", True), ("mlm", True),
                                          ("mpnet", False)])
def test_mpnet_predictions_see_what_the_paper_says(tmp_path, recs, mode, permute):
  vocab, record_dir = recs
  task = _mpnet_task(record_dir, vocab, mode, permute)
  model, batch, state, step = _trained(task, tmp_path)
  changed, extra = observed_dependency(task, model, batch, state, step)
  query_pos, kind = extra["query_pos"], extra["kind"]
  is_masked = batch["is_masked"].numpy()
  if not permute:
    np.testing.assert_array_equal(query_pos, np.sort(query_pos, axis=1))
  visible = mpnet_visible(is_masked, query_pos, kind, mode)
  _check(changed, visible)
