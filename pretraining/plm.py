"""plm: XLNet's permutation language model, the two-stream attention on the records' stored
factorization order (perm_mask [B, L, L], target_mapping [B, P, L]); the query stream predicts
the targets. The XLNet objectives (this and mlm.py) share the model (XLNetPretrainModel), the
Transformer-XL memory carried per batch lane, the optional next-sentence loss on the stored A/B
label (--nsp_weight) and the export under the release's variable names.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from data_utils import fileio
from data_utils.tokenization import CLS_ID, PAD_ID, SEP_ID, Tokenizer
from modeling.xlnet.models import XLNetPretrainModel
from modeling.xlnet import release_checkpoint
from pretraining import objective
from serving import tasks as serving_tasks


def span_perm_mask(input_ids, start, end):
  """perm_mask [L, L] (1 = i may not see j) that predicts input_ids[start:end] left to right
  after the rest, by the release's rule for the records (data_utils/pipeline.expand): ordinary
  tokens have rank -1 and see no ranked token; <sep> / <cls> are ranked (first, in position
  order), then the span's tokens in order; i may not see a ranked j of rank >= its own. So the
  k-th span token sees the context, <sep>, <cls> and the span tokens before it, never itself
  (the model's content stream makes the diagonal visible)."""
  ids = np.asarray(input_ids)
  length = len(ids)
  func = (ids == SEP_ID) | (ids == CLS_ID)
  span = np.zeros(length, bool)
  span[start:end] = True
  func &= ~span
  rank = np.full(length, -1)
  rank[func] = np.arange(func.sum())
  rank[span] = func.sum() + np.arange(end - start)
  ranked = func | span
  return (ranked[None, :] & (rank[:, None] <= rank[None, :])).astype(np.float32)


def span_target_mapping(length, start, end):
  """target_mapping [P, L]: one-hot rows at start, ..., end - 1."""
  return np.eye(length, dtype=np.float32)[start:end]


def _log_probs(logits, targets):
  """log softmax(logits [P, V]) at targets [P], in float32."""
  logp = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
  return tf.gather(logp, tf.constant(targets), batch_dims=1).numpy()


class PLM(objective.Objective):
  name = "plm"
  family = "xlnet"
  exports_encoder = True
  query_stream = True    # predictions from the query stream (mlm: from the content stream)
  export_files = ("xlnet_config.json", "xlnet_model.ckpt.index",
                  "xlnet_model.ckpt.data-00000-of-00001", "checkpoint")

  def build_model(self, task):
    return XLNetPretrainModel(task.model_config, task.run_config, nsp=task.config.nsp_weight > 0)

  def model_inputs(self, task, batch, step):
    """(the model's inputs, extra) from a batch: the batch as it is."""
    del task, step
    return dict(batch), {}

  def predict(self, task, model, batch, state, step, training=True):
    mems = state if task.run_config.mem_len else None
    inputs, extra = self.model_inputs(task, batch, step)
    out = model(inputs, mems=mems, training=training, query_stream=self.query_stream)
    extra["nsp_logits"] = out.get("nsp_logits")
    new_state = out["new_mems"] if task.run_config.mem_len else state
    return out["logits"], batch["target"], batch["target_mask"], extra, new_state

  def row_ids(self, row):
    """The row's input ids as the model reads them (plm: as they are)."""
    return np.asarray(row.input_ids)

  def span_inputs(self, row, length=None, n_predict=None):
    """The model's inputs (batch of 1) that predict row.span two-stream, left to right; left
    padded to `length` tokens (input_mask 1: XLNet's positions are relative, so padding changes
    nothing) with `n_predict` target rows (all-zero rows past the span)."""
    ids = self.row_ids(row)
    n = len(ids)
    length, n_predict = length or n, n_predict or row.end - row.start
    pad = length - n
    out_ids = np.full([length], PAD_ID, np.int32)
    out_ids[pad:] = ids
    seg = np.zeros([length], np.int32)
    seg[pad:] = row.seg_ids
    mask = np.zeros([length], np.float32)
    mask[:pad] = 1.0
    perm = np.zeros([length, length], np.float32)
    perm[pad:, pad:] = span_perm_mask(row.input_ids, row.start, row.end)
    mapping = np.zeros([n_predict, length], np.float32)
    mapping[:row.end - row.start, pad:] = span_target_mapping(n, row.start, row.end)
    return {"input_ids": out_ids[None], "seg_ids": seg[None], "input_mask": mask[None],
            "perm_mask": perm[None], "target_mapping": mapping[None]}

  def span_log_probs(self, task, model, row):
    return self.span_log_probs_many(task, model, [row])[0]

  def span_log_probs_many(self, task, model, rows, batch_size=32):
    """In batches of `batch_size` rows, each left padded to the longest row."""
    length = max(len(r.input_ids) for r in rows)
    n_predict = max(r.end - r.start for r in rows)
    out = []
    for i in range(0, len(rows), batch_size):
      chunk = rows[i:i + batch_size]
      parts = [self.span_inputs(r, length, n_predict) for r in chunk]
      inputs = {k: tf.constant(np.concatenate([p[k] for p in parts])) for k in parts[0]}
      logits = objective.scorer(
          model, lambda m, x: m(x, training=False, query_stream=self.query_stream)["logits"],
          ("logits", self.query_stream))(inputs)
      for k, row in enumerate(chunk):
        p = row.end - row.start
        out.append(_log_probs(logits[k, :p], np.asarray(row.input_ids)[row.start:row.end]))
    return out

  def extra_losses(self, task, batch, extra):
    if task.config.nsp_weight <= 0:
      return []
    nsp = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=batch["label"], logits=tf.cast(extra["nsp_logits"], tf.float32)))
    return [("nsp_loss", nsp, task.config.nsp_weight)]

  def export(self, task, model, export_dir, log):
    """xlnet_config.json + xlnet_model.ckpt under the release's variable names."""
    fileio.makedirs(export_dir)
    task.model_config.to_json(fileio.join(export_dir, "xlnet_config.json"))
    path = release_checkpoint.save_tf1_checkpoint(model,
                                                  fileio.join(export_dir, "xlnet_model.ckpt"))
    log(f"exported the model under the release's variable names: {path} (+ xlnet_config.json)")

  def export_encoder(self, task, model_dir, sp_model, uncased=False, log=print):
    """MODEL_DIR/export/saved_model: the encoder of the finished run (read back from its
    release-named export, run without memory, bi_data or dropout) on raw text. Nothing to do
    when the export's record (objective.EXPORT_RECORD) already names a SavedModel made with
    this tokenizer at the export's step; otherwise the SavedModel and the tokenizer's files are
    written and the record updated to list them."""
    from modeling import tokenizer_files
    export_root = fileio.join(model_dir, "export")
    source = tokenizer_files.Source.of(sp_model, None, uncased)
    record = objective.read_export_record(export_root)
    if record and "saved_model" in record.get("parts", ()) and \
        record.get("tokenizer") == source.sha256() and \
        fileio.exists(fileio.join(export_root, "saved_model")):
      log(f"{export_root}/saved_model: current (step {record.get('step')})")
      return fileio.join(export_root, "saved_model")
    run_config = dataclasses.replace(task.run_config, bi_data=False, mem_len=0, reuse_len=0,
                                     dropout=0.0, dropatt=0.0)
    model = XLNetPretrainModel(task.model_config, run_config)
    release_checkpoint.load_tf1_checkpoint(model, fileio.join(export_root, "xlnet_model.ckpt"))
    path = serving_tasks.export_encoder(model, Tokenizer(sp_model, lower=uncased),
                                        task.config.seq_len,
                                        fileio.join(export_root, "saved_model"), log)
    if record is not None:        # called after the task's export (no --sp_model in its config)
      objective.remove_export_record(export_root)
      tokenizer_files.write(export_root, source, None, log)
      parts = [p for p in record.get("parts", []) if p != "saved_model"]
      parts += [n for n in (tokenizer_files.FILE_NAMES[source.kind], tokenizer_files.INFO,
                            "saved_model") if n not in parts]
      objective.write_export_record(export_root, dict(record, parts=parts,
                                                      tokenizer=source.sha256()))
    return path
