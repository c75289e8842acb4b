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


def pretrain_dataset(record_dir, seq_len, reuse_len, num_predict, bsz_per_host, bi_data,
                     num_core_per_host=1, vocab_size=None, split="train", expand_records=True,
                     repeat=True, host_id=0, num_hosts=1, skip_batches=0, verify="auto"):
  """Batches of one replica each, in lane order, from `record_dir`.

  The training flags are checked against the records' info first (one-line
  error naming what differs). Each element is one replica's batch
  (bsz_per_host / num_core_per_host rows); consecutive elements are the
  replicas of one step in order, so row r of replica c is always the same lane
  and memory can be carried across steps. Files are read in order, never
  shuffled: records of a lane continue each other. `skip_batches` skips that
  many per-replica batches (a resumed run continues where it stopped). `verify` checks the
  files against their record-info first (record_format.find_records: "size", "sha256",
  "auto"); a record corrupted later is reported by tf.data as it is read (wrap the loop in
  `named_record_errors` to have the file named).

  Returns (dataset, params, num_batch).
  """
  expected = dict(seq_len=seq_len, reuse_len=reuse_len, num_predict=num_predict,
                  bsz_per_host=bsz_per_host, bi_data=bi_data,
                  num_core_per_host=num_core_per_host)
  if vocab_size is not None:
    expected["vocab_size"] = vocab_size
  params, files, num_batch = record_format.find_records(record_dir, split, verify, **expected)
  files = host_files(files, split, host_id, num_hosts, record_dir)
  ds = tf.data.TFRecordDataset(files)
  if repeat:
    ds = ds.repeat()
  ds = ds.batch(bsz_per_host // num_core_per_host, drop_remainder=True)
  if skip_batches:   # resume: the data position is the step (records are read in order)
    ds = ds.skip(skip_batches)
  ds = ds.map(lambda x: parse(x, params), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if expand_records:
    ds = ds.map(lambda x: expand(x, params), num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True)
  return ds.prefetch(tf.data.AUTOTUNE), params, num_batch


def shard_index(path, split="train"):
  """The shard number in a record file's name (record_format.RecordParams.record_name)."""
  match = re.match(rf"{re.escape(split)}-(\d+)\.", path.rsplit("/", 1)[-1])
  if not match:
    raise ValueError(f"{path}: not a record file name ({split}-NNNNN.<params>.tfrecord)")
  return int(match.group(1))


def host_files(files, split, host_id, num_hosts, record_dir=""):
  """The record files host `host_id` of `num_hosts` reads: shards whose index is host_id modulo
  num_hosts, in shard order. The writer's `--num_tasks=N --task=t` writes shards t, t+N, ...:
  with N = num_hosts, host t trains on what task t wrote. Every host reads whole files, so its
  lanes (record k of a file is lane k % bsz_per_host) continue each other across files."""
  mine = [f for f in files if shard_index(f, split) % num_hosts == host_id]
  if not mine:
    raise ValueError(f"{record_dir}: {len(files)} record files for {num_hosts} hosts; host "
                     f"{host_id} gets none (shard index = host modulo {num_hosts}): write more, "
                     "smaller shards (create_pretrain_data.py --shard_mb)")
  return mine


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
