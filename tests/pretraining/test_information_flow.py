"""Information flow at training time: which input tokens can each prediction depend on?

A tiny seeded model (2 layers) runs the objective's own forward pass (`PretrainTask.predict`,
which `loss` and so run_pretrain.py use; dropout off; XLA as the train step) on a batch of the
real input pipeline, with the memory the previous batch of the same lanes left (XLNet). One
input token of one row is replaced at a time, and for every prediction of every row the test
records whether its logits changed. That observed dependency must equal, exactly, what the
papers allow.

The expectation never goes through the project's pipeline or mask code: the batch is read
again from the writer's TFRecord files (tf.train.Example, the schema's feature names, bytes
decoded here with numpy), and the rules below are transcribed from the release and the papers:

- rank: the stored `perm` is a position's rank inside its perm_size block; blocks are ordered
  and each half (reuse part, new part) is ordered apart, as the release's `_local_perm`
  (called once per half), so rank = start of the block within the half + stored rank.
- XLNet PLM, one layer (the release's `_local_perm` + the concatenation of the two halves):
  a token of the new half sees the whole reuse half, the reuse half never the new half; inside
  a half an ordinary non-target is seen by all (rank -1) and sees no target and no <sep>/<cls>;
  a target sees strictly lower ranks; a <sep>/<cls> sees ranks up to its own. The content
  stream also sees itself. Through n layers a prediction depends on Q C^(n-1) (Q the query
  stream's row, C the content stream's matrix).
- XLNet MLM ("DAE + Transformer-XL"): every token except the targets that the 80/10/10 draw
  replaced (a target whose input was kept is visible, itself included).
- MPNet: the predictions are the stored targets, ordered by stored rank (a rank of the reuse
  half before the same rank of the new half), or by position without permutation (mpnet
  mode): all non-predicted tokens, the predicted tokens earlier in the order, and for itself
  and later predictions only their input copies (so only a copy the 80/10/10 draw kept carries
  the token); - position compensation (plm mode): no copies at all; MLM mode: non-predicted
  tokens and kept copies. Only the 80/10/10 draw (`kind`, a random input) is read from the
  forward pass.

Cases: perm_size = reuse_len (block offsets all 0) and perm_size < reuse_len (offsets 4, 8, 12
inside each half), bi_data off and on (first half of the batch forward, second half backward).
"""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from data_utils import record_format, writer
from data_utils.tokenization import CLS_ID, SEP_ID, Tokenizer
from modeling.mpnet import encoder as mpnet
from modeling.mpnet import pretrain as mpnet_pretrain
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from pretraining.task import PretrainConfig, PretrainTask

SEQ, REUSE, NP, BSZ, LAYERS = 32, 16, 8, 4, 2
STEP = 1            # the batch checked; batch STEP - 1 makes XLNet's memory
KEPT = mpnet_pretrain.KEPT


@pytest.fixture(scope="module")
def make_records(tmp_path_factory, text_and_sp):
  """(perm_size, bi_data) -> (vocab, record_dir, RecordParams), written once per module."""
  text, sp = text_and_sp
  vocab = Tokenizer(sp, lower=True).vocab_size
  made = {}

  def make(perm_size, bi_data):
    if (perm_size, bi_data) not in made:
      params = record_format.RecordParams(
          seq_len=SEQ, reuse_len=REUSE, perm_size=perm_size, num_predict=NP, bsz_per_host=BSZ,
          bi_data=bi_data, uncased=True)
      out = str(tmp_path_factory.mktemp(f"flow-perm{perm_size}-{'bi' if bi_data else 'uni'}"))
      writer.create(text, sp, out, params, shard_bytes=10**9, progress=lambda m: None)
      made[perm_size, bi_data] = vocab, out, params
    return made[perm_size, bi_data]
  return make


# ---- the stored bytes -------------------------------------------------------------------------
def stored_batch(record_dir, params, step):
  """Batch `step` (records step*B .. step*B + B-1, in file order) decoded from the TFRecord
  bytes: dict of numpy [B, L] input_ids, is_masked, perm, and rank (within its half)."""
  files = sorted(glob.glob(os.path.join(record_dir, "*" + record_format.RECORD_SUFFIX)))
  rows = {"input_ids": [], "is_masked": [], "perm": []}
  for raw in tf.data.TFRecordDataset(files).skip(step * BSZ).take(BSZ):
    feature = tf.train.Example.FromString(raw.numpy()).features.feature
    assert sorted(feature) == sorted(record_format.FEATURES)
    value = {name: feature[name].bytes_list.value[0] for name in record_format.FEATURES}
    rows["input_ids"].append(np.frombuffer(value["input_ids"], "<u2").astype(np.int64))
    rows["perm"].append(np.frombuffer(value["perm"], np.uint8).astype(np.int64))
    bits = np.unpackbits(np.frombuffer(value["is_masked"], np.uint8), bitorder="little")
    rows["is_masked"].append(bits.astype(bool))
  out = {k: np.stack(v) for k, v in rows.items()}
  assert out["input_ids"].shape == (BSZ, SEQ) and params.id_dtype() == np.dtype("<u2")
  assert params.perm_dtype() == np.dtype(np.uint8)
  size = params.perm_size
  blocks = out["perm"].reshape(BSZ, SEQ // size, size)
  assert (np.sort(blocks, -1) == np.arange(size)).all(), "a block's ranks are not a permutation"
  assert (out["is_masked"].sum(1) == NP).all()
  pos = np.arange(SEQ)
  in_half = np.where(pos < REUSE, pos, pos - REUSE)
  out["rank"] = (in_half - in_half % size)[None] + out["perm"]
  return out


def xlnet_plm_expected(ids, is_masked, rank):
  """[P, L] for one row: may prediction p (targets in position order) depend on token j."""
  length = len(ids)
  func = (ids == SEP_ID) | (ids == CLS_ID)
  target = is_masked & ~func
  plain = ~is_masked & ~func
  new = np.arange(length) >= REUSE
  query = np.zeros((length, length), bool)
  for i in range(length):
    for j in range(length):
      if new[i] != new[j]:
        query[i, j] = new[i]                 # new sees all of reuse; reuse never sees new
      elif plain[j]:
        query[i, j] = True                   # rank -1: seen by all
      elif plain[i]:
        query[i, j] = False                  # sees no target, no <sep>/<cls>
      elif target[i]:
        query[i, j] = rank[j] < rank[i]      # strictly earlier: never itself
      else:
        query[i, j] = rank[j] <= rank[i]     # <sep>/<cls>: up to its own rank
  content = query | np.eye(length, dtype=bool)
  depends = query
  for _ in range(LAYERS - 1):
    depends = (depends.astype(np.int64) @ content.astype(np.int64)) > 0
  return depends[np.flatnonzero(target)]


def xlnet_mlm_expected(ids, is_masked, kind):
  target = is_masked & ~((ids == SEP_ID) | (ids == CLS_ID))
  hidden = target & (kind != KEPT)           # replaced by <mask> or a random piece
  return np.array([~hidden for _ in np.flatnonzero(target)])


def mpnet_order(is_masked, rank, permute):
  """Positions of one row's predictions in prediction order."""
  pred = np.flatnonzero(is_masked)
  return pred[np.lexsort((pred, rank[pred]))] if permute else pred


def mpnet_expected(order, kind, mode, length):
  """In record positions. MPNet reads a record row <s> first with its last token (<cls>)
  dropped (modeling/mpnet/pretrain.bos_first): that token reaches no prediction."""
  slot = {int(p): k for k, p in enumerate(order)}
  out = np.zeros((len(order), length), bool)
  for k in range(len(order)):
    for j in range(length - 1):
      if j not in slot:
        out[k, j] = True                                     # non-predicted
      elif mode == "mlm":
        out[k, j] = kind[slot[j]] == KEPT                    # only through its copy
      elif slot[j] < k:
        out[k, j] = True                                     # earlier prediction
      else:
        out[k, j] = mode == "mpnet" and kind[slot[j]] == KEPT
  return out


# ---- the model ----------------------------------------------------------------------------------
def observed_dependency(task):
  """(changed [B, P, B', L]: did prediction p of row b change when token j of row b' did?,
  the pipeline's batch, the forward pass's 80/10/10 draw or None)."""
  tf.keras.utils.set_random_seed(0)
  model = task.build_model()
  before, batch = list(task.dataset(None, skip_batches=STEP - 1).take(2))
  step = tf.constant(STEP, tf.int64)

  def run(b, state):
    logits, _, _, extra, new_state = task.predict(model, b, state, step, training=True)
    return logits, extra.get("kind"), new_state
  predict = tf.function(run, jit_compile=True)
  state = tf.zeros(task.state_shape())
  if task.run_config.mem_len:
    state = predict(before, state)[2]          # the memory the previous batch left
    assert np.abs(state.numpy()).max() > 0
  base, kind, _ = predict(batch, state)
  base = base.numpy()
  ids = batch["input_ids"].numpy()
  rows, length = ids.shape
  changed = np.zeros(base.shape[:2] + (rows, length), bool)
  for r in range(rows):
    for j in range(length):
      new = ids.copy()
      new[r, j] = 9 + (ids[r, j] - 9 + 1 + 7 * r + j) % (task.vocab_size - 9)  # another piece
      out = predict(dict(batch, input_ids=tf.constant(new), input_k=tf.constant(new)), state)[0]
      # Blocked keys get exactly zero attention, so a token a prediction cannot see leaves
      # its logits bit-identical; a visible one moves them.
      changed[:, :, r, j] = np.abs(out.numpy() - base).max(-1) > 0
  return changed, batch, None if kind is None else kind.numpy()


def _check(changed, expected):
  rows = changed.shape[0]
  assert all(e.any(-1).all() for e in expected) and any((~e).any() for e in expected)
  for b in range(rows):
    for other in range(rows):
      if other != b:
        assert not changed[b, :, other].any(), f"row {b} depends on row {other}"
    mismatch = np.argwhere(changed[b, :, b] != expected[b])
    assert not len(mismatch), (
        f"row {b}: (prediction, token) pairs where the logits "
        f"{'changed' if changed[b, :, b][tuple(mismatch[0])] else 'did not change'} against the "
        f"papers' visibility: {mismatch[:8].tolist()}")


def _same_rows(batch, stored):
  """The pipeline's batch is the stored one (so the expectation talks about these rows)."""
  np.testing.assert_array_equal(batch["input_ids"].numpy(), stored["input_ids"])
  np.testing.assert_array_equal(batch["is_masked"].numpy(), stored["is_masked"])


def _offsets_matter(stored, perm_size):
  """Some same-half target pair whose order by stored perm alone differs from its rank order."""
  if perm_size == REUSE:
    return False
  for b in range(BSZ):
    t = np.flatnonzero(stored["is_masked"][b])
    half = t >= REUSE
    r, p = stored["rank"][b, t], stored["perm"][b, t]
    same = half[:, None] == half[None, :]
    if ((r[:, None] < r[None, :]) != (p[:, None] < p[None, :]))[same].any():
      return True
  return False


@pytest.mark.parametrize("objective,perm_size,bi_data", [
    ("plm", REUSE, False), ("mlm", REUSE, False), ("plm", 4, False), ("plm", 4, True),
    ("mlm", 4, True)])
@pytest.mark.slow
def test_xlnet_predictions_see_what_the_paper_says(make_records, objective, perm_size, bi_data):
  vocab, record_dir, params = make_records(perm_size, bi_data)
  task = PretrainTask(
      PretrainConfig(record_dir=record_dir, seq_len=SEQ, reuse_len=REUSE, num_predict=NP,
                     bsz_per_host=BSZ, bi_data=bi_data, objective=objective),
      XLNetConfig(n_layer=LAYERS, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=vocab),
      RunConfig(dropout=0.0, dropatt=0.0, mem_len=2 * REUSE, reuse_len=REUSE, bi_data=bi_data))
  assert task.run_config.bi_data is bi_data
  changed, batch, kind = observed_dependency(task)
  stored = stored_batch(record_dir, params, STEP)
  _same_rows(batch, stored)
  ids, is_masked = stored["input_ids"], stored["is_masked"]
  if objective == "plm":
    expected = [xlnet_plm_expected(ids[b], is_masked[b], stored["rank"][b]) for b in range(BSZ)]
    assert _offsets_matter(stored, perm_size) == (perm_size < REUSE)
  else:
    expected = [xlnet_mlm_expected(ids[b], is_masked[b], kind[b]) for b in range(BSZ)]
    assert (kind[is_masked] != KEPT).any()
  _check(changed, expected)


@pytest.mark.parametrize("mode,permute,perm_size", [
    ("mpnet", True, 4), ("plm", True, 4), ("mlm", True, REUSE), ("mpnet", False, REUSE)])
@pytest.mark.slow
def test_mpnet_predictions_see_what_the_paper_says(make_records, mode, permute, perm_size):
  vocab, record_dir, params = make_records(perm_size, False)
  task = PretrainTask(
      PretrainConfig(record_dir=record_dir, seq_len=SEQ, reuse_len=REUSE, num_predict=NP,
                     bsz_per_host=BSZ, bi_data=False, objective="mpnet", mpnet_mode=mode,
                     mpnet_permute=permute),
      mpnet.MPNetConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=LAYERS,
                        num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=SEQ + 8, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, pad_token_id=5),
      RunConfig(dropout=0.0, dropatt=0.0))
  changed, batch, kind = observed_dependency(task)
  stored = stored_batch(record_dir, params, STEP)
  _same_rows(batch, stored)
  orders = [mpnet_order(stored["is_masked"][b], stored["rank"][b], permute) for b in range(BSZ)]
  if permute:
    assert any((o != np.sort(o)).any() for o in orders)
    assert _offsets_matter(stored, perm_size) == (perm_size < REUSE)
  expected = [mpnet_expected(orders[b], kind[b], mode, SEQ) for b in range(BSZ)]
  _check(changed, expected)
