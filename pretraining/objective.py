"""The contract of a pretraining objective (pretraining/task.py calls these, nothing else).

An objective is one module of this package and one line in its registry (OBJECTIVES in
pretraining/objectives.py). It decides the model, the model's inputs from a batch of the
records, the predictions the LM loss scores, any extra loss, and the export; the task around it
owns the records, the carried state, the seeds and the optimizer, the same for every objective.

Shapes: B rows per replica, L tokens, P predictions per row, V vocabulary.
"""

import abc
import dataclasses
import json

from data_utils import fileio

# MODEL_DIR/export/export.json: the step every part of the export was made from (written last).
EXPORT_RECORD = "export.json"


class Objective(abc.ABC):
  """One pretraining objective (--objective=NAME)."""

  name = None           # the --objective value
  family = "xlnet"      # the model family it trains (modeling/families.py): config, recipes
  carries_memory = True     # Transformer-XL memory from step to step (when --mem_len > 0)
  exports_encoder = False   # run_pretrain.py --sp_model writes a SavedModel on raw text
  export_files = ()         # the names `export` writes into MODEL_DIR/export
  exports_hf_layout = False   # MODEL_DIR/export is a Hugging Face directory (+ its tokenizer)

  def run_config(self, run_config):
    """The RunConfig the model is built with: no memory for an objective that carries none."""
    return run_config if self.carries_memory else dataclasses.replace(run_config, mem_len=0)

  @abc.abstractmethod
  def build_model(self, task):
    """A fresh model for `task` (its model_config, run_config and config)."""

  @abc.abstractmethod
  def predict(self, task, model, batch, state, step, training=True):
    """The forward pass on one batch of the input pipeline (data_utils/pipeline.expand).

    Returns (logits [B, P, V], target [B, P], target_mask [B, P] or None, extra, new_state);
    `extra` holds what an analysis needs to know which inputs each prediction could see
    ("query_pos" [B, P], "kind": the 80/10/10 draw of each prediction's input copy).
    """

  @abc.abstractmethod
  def span_log_probs(self, task, model, row):
    """Zero-shot scoring (pretraining/cloze.py): the log-probabilities [P] the model gives the
    tokens of one span of one row, each predicted as this objective predicts its targets.

    row: a cloze.Row (input_ids [L], seg_ids [L] in the records' layout
    `A <sep> B <sep> <cls>`, the span [start, end) inside B).
    """

  def span_log_probs_many(self, task, model, rows):
    """span_log_probs of every row (an objective may batch them)."""
    return [self.span_log_probs(task, model, row) for row in rows]

  def extra_losses(self, task, batch, extra):
    """[(metric name, loss, weight)] added to the LM loss (none by default)."""
    del task, batch, extra
    return []

  @abc.abstractmethod
  def export(self, task, model, export_dir, log):
    """Writes the trained model to `export_dir` in the format its users load."""

  def export_encoder(self, task, model_dir, sp_model, uncased=False, log=print):
    """With exports_encoder: MODEL_DIR/export/saved_model, the encoder on raw text."""
    raise NotImplementedError(f"--objective={self.name} exports no encoder SavedModel")


def scorer(model, forward, key=None):
  """`forward(model, inputs) -> tensor` as one tf.function of the inputs per model and `key`,
  made at the first call: the zero-shot scorers run thousands of batches of varying shapes
  through one model, which eager execution dispatches op by op (reduce_retracing: one graph
  for them all after the second shape). It holds the model weakly (training/task.
  model_function): it goes with it."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from training import task as task_lib  # pylint: disable=import-outside-toplevel
  return task_lib.model_function(
      model, ("scorer", key),
      lambda ref: tf.function(lambda inputs: forward(ref(), inputs), reduce_retracing=True,
                              autograph=False))


# ---- the export's record (pretraining/task.py's on_end, the objectives' export_encoder) -----
def read_export_record(export_dir):
  """export.json's dict, or None (absent or unreadable: the export is to be rewritten)."""
  path = fileio.join(export_dir, EXPORT_RECORD)
  try:
    return json.loads(fileio.read_text(path)) if fileio.exists(path) else None
  except (OSError, ValueError):
    return None


def remove_export_record(export_dir):
  path = fileio.join(export_dir, EXPORT_RECORD)
  if fileio.exists(path):
    fileio.remove(path)


def write_export_record(export_dir, record):
  fileio.makedirs(export_dir)
  fileio.write_atomic(fileio.join(export_dir, EXPORT_RECORD),
                      json.dumps(record, indent=2, sort_keys=True) + "\n")
