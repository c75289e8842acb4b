"""The pretraining input pipeline: records -> the tensors the model needs.

`parse` decodes a batch of serialized records into compact tensors; `expand`
turns those into perm_mask / target_mapping / targets. Both are vectorised over
the batch, use static shapes, and compile with XLA, so `expand` can run in
tf.data or inside the (jit-compiled) train step on the accelerator.

Shapes: B records, L seq_len, P num_predict. Mask convention: 1 = blocked.
"""

import contextlib
import re

import tensorflow as tf

from data_utils import lanes
from data_utils import record_format
from data_utils.tokenization import CLS_ID, SEP_ID


def parse(serialized, params):
  """[B] serialized records -> compact dict of [B, ...] tensors.

  Returns input_ids int32 [B, L], perm int32 [B, L] (rank inside its block),
  is_masked bool [B, L], a_len int32 [B], label int32 [B].
  """
  spec = {name: tf.io.FixedLenFeature([], tf.string) for name in record_format.FEATURES}
  raw = tf.io.parse_example(serialized, spec)
  seq_len = params.seq_len
  rows = _static_rows(serialized)
  id_type = tf.uint16 if params.id_dtype().itemsize == 2 else tf.uint32
  perm_type = tf.uint8 if params.perm_dtype().itemsize == 1 else tf.uint16
  ids = tf.reshape(tf.io.decode_raw(raw["input_ids"], id_type), [rows, seq_len])
  perm = tf.reshape(tf.io.decode_raw(raw["perm"], perm_type), [rows, seq_len])
  packed = tf.cast(tf.reshape(tf.io.decode_raw(raw["is_masked"], tf.uint8), [rows, seq_len // 8]),
                   tf.int32)
  bits = tf.bitwise.bitwise_and(tf.bitwise.right_shift(packed[:, :, None], tf.range(8)), 1)
  meta = tf.reshape(tf.io.decode_raw(raw["meta"], tf.uint16), [rows, 2])
  return {"input_ids": tf.cast(ids, tf.int32), "perm": tf.cast(perm, tf.int32),
          "is_masked": tf.reshape(bits, [rows, seq_len]) > 0,
          "a_len": tf.cast(meta[:, 0], tf.int32), "label": tf.cast(meta[:, 1], tf.int32)}


def _static_rows(tensor):
  """The batch size if known when tracing (batches of drop_remainder=True), else -1: every
  shape stays static, as TPUs need."""
  return tensor.shape[0] if tensor.shape.rank and tensor.shape[0] is not None else -1


def factorization_rank(perm, params):
  """[B, L] rank inside block -> rank inside its half (blocks in order)."""
  pos = tf.range(params.seq_len)
  in_half = tf.where(pos < params.reuse_len, pos, pos - params.reuse_len)
  base = (in_half // params.perm_size) * params.perm_size
  return base[None, :] + perm


def expand(compact, params):
  """Compact records -> model inputs, the release's `_local_perm` rules.

  Returns input_ids / input_k [B, L] int32, seg_ids [B, L] int32 (0 A, 1 B,
  2 <cls>), input_mask [B, L] zeros, perm_mask [B, L, L] float32,
  target_mapping [B, P, L] float32, target [B, P] int32, target_mask [B, P]
  float32, input_q [B, L] float32 (1 at targets), is_masked, rank [B, L] (the
  stored factorization rank), label.
  """
  ids, is_masked = compact["input_ids"], compact["is_masked"]
  seq_len, reuse, num_predict = params.seq_len, params.reuse_len, params.num_predict
  batch = _static_rows(ids)
  batch = tf.shape(ids)[0] if batch == -1 else batch
  pos = tf.range(seq_len)

  func = tf.logical_or(tf.equal(ids, SEP_ID), tf.equal(ids, CLS_ID))
  non_mask = tf.logical_and(tf.logical_not(is_masked), tf.logical_not(func))
  masked_or_func = tf.logical_not(non_mask)
  targets = tf.logical_and(is_masked, tf.logical_not(func))
  # Non-targets get the smallest rank: visible to all, and they see no target.
  rank = tf.where(non_mask, -1, factorization_rank(compact["perm"], params))
  self_rank = tf.where(targets, rank, rank + 1)   # a target does not see itself
  within = tf.logical_and(self_rank[:, :, None] <= rank[:, None, :], masked_or_func[:, None, :])
  half = pos >= reuse
  same_half = tf.equal(half[:, None], half[None, :])
  reuse_sees_new = tf.logical_and(tf.logical_not(half)[:, None], half[None, :])  # blocked
  perm_mask = tf.where(same_half[None], within, reuse_sees_new[None])

  # Targets in position order, padded with all-zero rows.
  slot = tf.where(targets, tf.cumsum(tf.cast(targets, tf.int32), axis=1) - 1, num_predict)
  target_mapping = tf.transpose(tf.one_hot(slot, num_predict + 1)[:, :, :num_predict], [0, 2, 1])
  target = tf.cast(tf.einsum("bpl,bl->bp", target_mapping, tf.cast(ids, tf.float32)), tf.int32)

  a_len = compact["a_len"][:, None]
  seg_ids = tf.where(pos[None, :] < reuse + a_len + 1, 0,
                     tf.where(pos[None, :] < seq_len - 1, 1, 2))
  return {"input_ids": ids, "input_k": ids, "seg_ids": seg_ids,
          "input_mask": tf.zeros([batch, seq_len], tf.float32),
          "perm_mask": tf.cast(perm_mask, tf.float32), "target_mapping": target_mapping,
          "target": target, "target_mask": tf.reduce_sum(target_mapping, axis=-1),
          "input_q": tf.cast(targets, tf.float32), "is_masked": is_masked,
          "rank": factorization_rank(compact["perm"], params),
          "label": compact["label"]}


# The record functions are plain TensorFlow ops: AutoGraph (tf.data converts map functions by
# default) would only add the time to convert them, in every run.
@tf.autograph.experimental.do_not_convert
def pretrain_dataset(record_dir, seq_len, reuse_len, num_predict, bsz_per_host, bi_data,
                     num_core_per_host=1, vocab_size=None, split="train", expand_records=True,
                     repeat=True, host_id=0, num_hosts=1, skip_steps=0, verify="auto"):
  """This host's per-replica batches, each row continuing its own lane, from `record_dir`.

  The run's layout: `num_hosts` hosts of `bsz_per_host` rows over `num_core_per_host` replicas
  each. Any layout the records can serve (data_utils/lanes.py, `lanes.RULE`) reads the same
  record set; one it cannot serve, or flags that differ from the records' data settings, is
  refused (ValueError, one line) before anything is read. Each element is one replica's batch
  (bsz_per_host / num_core_per_host rows); consecutive elements are the host's replicas of one
  step in order, and row r of a replica reads one lane of the records in order from step to
  step, so memory can be carried. Files are never shuffled. `skip_steps` skips that many steps
  (a resumed run continues where it stopped). `verify` checks the files against their
  record-info first (record_format.find_records: "size", "sha256", "auto"); a record corrupted
  later is reported by tf.data as it is read (wrap the loop in `named_record_errors` to have the
  file named).

  Returns (dataset, params, steps): the records' RecordParams and the steps of one pass.
  """
  expected = dict(seq_len=seq_len, reuse_len=reuse_len, num_predict=num_predict,
                  bi_data=bi_data)
  if vocab_size is not None:
    expected["vocab_size"] = vocab_size
  params, files, file_steps = record_format.find_records(record_dir, split, verify,
                                                         per_file=True, **expected)
  layout = plan_layout(params, len(files), bsz_per_host, num_core_per_host, num_hosts,
                       record_dir)
  lanes_per_step = params.bsz_per_host
  rows = tf.constant(layout.rows[:, host_id], tf.int32)      # [groups, R * b]
  if layout.groups > 1:      # each file read once per pass, each pass its own lanes
    pairs = [(f, g) for f in files for g in range(layout.groups)]
    ds = tf.data.Dataset.from_tensor_slices(
        ([f for f, _ in pairs], tf.constant([g for _, g in pairs], tf.int32)))
    if repeat:
      ds = ds.repeat()
    ds = ds.flat_map(lambda f, g: tf.data.TFRecordDataset(f).batch(
        lanes_per_step, drop_remainder=True).map(
            lambda step: tf.gather(step, tf.gather(rows, g))))
  else:                      # streams read side by side: only those this host's rows use
    used = layout.host_streams(host_id)
    parts = []
    for s in used:
      part = tf.data.TFRecordDataset(files[s::layout.streams])
      parts.append((part.repeat() if repeat else part).batch(lanes_per_step,
                                                             drop_remainder=True))
    index = {s: k for k, s in enumerate(used)}       # stream -> its place among the read ones
    local = [index[p // lanes_per_step] * lanes_per_step + p % lanes_per_step
             for p in layout.rows[0, host_id].tolist()]
    ds = tf.data.Dataset.zip(tuple(parts)).map(
        lambda *steps: tf.gather(tf.concat(steps, 0), local))
  if skip_steps:   # resume: the data position is the step (records are read in order)
    ds = ds.skip(skip_steps)
  ds = ds.map(lambda step: tf.reshape(step, [num_core_per_host, -1])).unbatch()
  ds = ds.map(lambda x: parse(x, params), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if expand_records:
    ds = ds.map(lambda x: expand(x, params), num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE), params, lanes.steps_per_epoch(layout, file_steps)


def plan_layout(params, num_files, bsz_per_host, num_core_per_host, num_hosts, record_dir=""):
  """data_utils/lanes.plan for records of `params` in `num_files` files, read by `num_hosts`
  hosts of `bsz_per_host` rows on `num_core_per_host` replicas; ValueError (one line naming the
  flags and `record_dir`) when the records cannot serve that layout."""
  where = f"{record_dir}: " if record_dir else ""
  if bsz_per_host < 1 or num_core_per_host < 1 or bsz_per_host % num_core_per_host:
    raise ValueError(f"--bsz_per_host={bsz_per_host} must be a positive multiple of "
                     f"--num_core_per_host={num_core_per_host} (rows per replica)")
  try:
    return lanes.plan(params.bsz_per_host, num_files, num_hosts, num_core_per_host,
                      bsz_per_host // num_core_per_host, params.bi_data,
                      params.num_core_per_host)
  except ValueError as e:
    raise ValueError(f"{where}{num_hosts} host(s) x --bsz_per_host={bsz_per_host} over "
                     f"--num_core_per_host={num_core_per_host} replicas: {e}") from None


@contextlib.contextmanager
def named_record_errors(record_dir, split="train"):
  """Runs the block; a tf.errors.DataLossError from reading `record_dir`'s records (whose
  message gives a byte offset but no file) becomes a one-line ValueError naming the file."""
  try:
    yield
  except tf.errors.DataLossError as e:
    message = record_format.explain_data_loss(record_dir, split, e.message)
    if message is None:
      raise
    raise ValueError(message) from None
