"""mpnet: MPNet (masked and permuted pretraining, modeling/mpnet/pretrain.py) on the same
records, laid out as MPNet's (<s> first: mpnet_pretrain.bos_first, so the <s> its fine-tuning
rows pool is trained): the stored targets are the predicted set, their stored ranks the order of the
predictions. --mpnet_mode switches the paper's ablations (mpnet | plm: - position compensation |
mlm: - both) and --nompnet_permute keeps the predictions in position order (- permutation).
MPNet carries no memory; its export is the Hugging Face layout (MPNetForMaskedLM).
"""

import numpy as np
import tensorflow as tf

from data_utils.tokenization import BOS_ID, CLS_ID, PAD_ID
from modeling.mpnet import hf as mpnet_hf
from modeling.mpnet import pretrain as mpnet_pretrain
from pretraining import objective


class MPNet(objective.Objective):
  name = "mpnet"
  family = "mpnet"
  carries_memory = False
  export_files = ("config.json", "model.safetensors")
  exports_hf_layout = True

  def build_model(self, task):
    mpnet_hf.special_tokens(task.model_config)   # the end-of-run export's check, before training
    return mpnet_pretrain.MPNetPretrainModel(task.model_config, mode=task.config.mpnet_mode,
                                             recompute=task.run_config.recompute)

  def predict(self, task, model, batch, state, step, training=True):
    c = task.config
    ids, is_masked, rank = mpnet_pretrain.bos_first(batch["input_ids"], batch["is_masked"],
                                                    batch["rank"], BOS_ID)
    inputs = mpnet_pretrain.build_inputs(
        ids, is_masked, rank, c.num_predict,
        task.step_seed(step), mode=c.mpnet_mode, permute=c.mpnet_permute,
        vocab_size=task.vocab_size)
    extra = {"query_pos": inputs["query_pos"], "kind": inputs["kind"]}
    return model(inputs, training=training), inputs["targets"], None, extra, state

  def span_log_probs(self, task, model, row):
    """The span as MPNet's predicted set, predicted left to right (rank = position), every
    copy <mask> (no 80/10/10), in the run's --mpnet_mode."""
    return self._score(task, model, [row])[0]

  def span_log_probs_many(self, task, model, rows, batch_size=32):
    """Rows of the same span length in batches, right padded (MPNet's positions are absolute:
    a row keeps its own) with the padding blocked as keys; --mpnet_mode=mlm (no masks to
    block with) row by row."""
    if task.config.mpnet_mode == "mlm":
      return [self._score(task, model, [row])[0] for row in rows]
    out = [None] * len(rows)
    by_length = {}
    for i, row in enumerate(rows):
      by_length.setdefault(row.end - row.start, []).append(i)
    for indices in by_length.values():
      for k in range(0, len(indices), batch_size):
        chunk = indices[k:k + batch_size]
        for i, logp in zip(chunk, self._score(task, model, [rows[i] for i in chunk])):
          out[i] = logp
    return out

  def _score(self, task, model, rows):
    """Rows with spans of one length, right padded to the longest: [P] log-probs per row. The
    rows (XLNet's layout, ending in <cls>) are laid out as in pretraining (bos_first)."""
    length = max(len(r.input_ids) for r in rows)
    ids = np.full([len(rows), length], PAD_ID, np.int32)
    masked = np.zeros(ids.shape, bool)
    pad = np.ones(ids.shape, bool)
    for j, row in enumerate(rows):
      if row.input_ids[-1] != CLS_ID:
        raise ValueError("a scored row must end in <cls> (XLNet's layout, as the records)")
      ids[j, :len(row.input_ids)] = (BOS_ID,) + tuple(row.input_ids[:-1])
      masked[j, row.start + 1:row.end + 1] = True
      pad[j, :len(row.input_ids)] = False
    rank = np.broadcast_to(np.arange(length), ids.shape)
    inputs = mpnet_pretrain.build_inputs(
        tf.constant(ids), tf.constant(masked), tf.constant(rank), rows[0].end - rows[0].start,
        tf.constant([0, 0], tf.int64), mode=task.config.mpnet_mode, permute=True,
        vocab_size=task.vocab_size, corrupt=False)
    if pad.any():      # no query of either stream sees a padding key
      key_pad = tf.gather(tf.constant(pad), inputs["content_pos"], batch_dims=1)[:, None, :]
      inputs["content_mask"] = tf.logical_or(inputs["content_mask"], key_pad)
      inputs["query_mask"] = tf.logical_or(inputs["query_mask"], key_pad)
    logits = objective.scorer(model, lambda m, x: m(x, training=False), "logits")(inputs)
    logp = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    return list(tf.gather(logp, inputs["targets"], batch_dims=2).numpy())

  def export(self, task, model, export_dir, log):
    """config.json + model.safetensors (transformers' MPNetForMaskedLM)."""
    mpnet_hf.save_hf_weights(model.hf_variable_map(), task.model_config, export_dir,
                             "MPNetForMaskedLM")
    log(f"exported MPNet in the Hugging Face layout: {export_dir}/config.json + "
        "model.safetensors")
