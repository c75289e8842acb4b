"""Sentence embeddings fine-tuned on pairs with in-batch negatives, as a task of the shared
trainer (training/trainer.py): the family's encoder under modeling/heads.SentencePooler
(masked pooling and normalisation), sentence-transformers' MultipleNegativesRankingLoss
(modeling/contrastive.in_batch_negatives_loss), retrieval and STS-B evaluation
(finetuning/retrieval_metrics.py), the sentence-transformers export (finetuning/st_export.py) and
the SavedModel on raw text (serving/embedding_graph.py).

Rows have the fixed length --max_seq_length (static shapes: the train step compiles with XLA).
A batch's anchors, positives (and hard negatives) run through the encoder as one stack of rows
[(2 or 3) * batch, max_seq_length]; each anchor's in-batch negatives are the other positives
(and every negative) of its replica's batch.
"""

import dataclasses
import json

import numpy as np
import tensorflow as tf

from data_utils import fileio
from data_utils import layouts
from finetuning import pairs_data
from finetuning import retrieval_metrics
from finetuning.classifier_task import warn_small_train_set
from modeling import contrastive
from modeling import families
from modeling import pooling
from serving import embedding_graph
from training import task as task_lib
from training.task import OptimizerConfig, Task

ROW_KEYS = ("input_ids", "seg_ids", "input_mask")
ROLES = ("anchor", "positive", "negative")
EVAL_FILE = "pairs_eval.json"       # MODEL_DIR/pairs_eval.json: run_pairs.py --do_eval's results


@dataclasses.dataclass(kw_only=True)
class PairsConfig(OptimizerConfig):
  train_file: str = None
  dev_file: str = None            # (query, positive) pairs: retrieval metrics
  sts_file: str = None            # STS-B layout: Spearman correlation
  columns: pairs_data.PairColumns = dataclasses.field(default_factory=pairs_data.PairColumns)
  sp_model: str = None
  vocab_file: str = None
  uncased: bool = False
  model_type: str = "xlnet"
  max_seq_length: int = 128
  train_batch_size: int = 32
  eval_batch_size: int = 64
  pooling: str = "mean"           # mean | first | last (modeling/pooling.py)
  scale: float = 20.0             # the loss's 1 / temperature


def check_config(c):
  """One-line ValueErrors for settings no run could use, before any work."""
  pooling.check_mode(c.pooling)
  if c.train_batch_size < 2:
    raise ValueError(f"--train_batch_size={c.train_batch_size}: in-batch negatives need at "
                     "least 2 pairs per batch")
  if not c.scale > 0:
    raise ValueError(f"--scale={c.scale}: must be positive (it is 1 / temperature)")
  if c.eval_batch_size < 1:
    raise ValueError(f"--eval_batch_size={c.eval_batch_size}: must be at least 1")


class PairsTask(task_lib.TokenizerFromFlags, Task):
  """See training/task.py for the interface."""

  recipe_script = "classifier"    # the fine-tuning recipe's optimizer settings

  @property
  def family(self):
    return self.config.model_type

  def __init__(self, config, model_config, run_config, init_checkpoint=None):
    check_config(config)
    self.config, self.model_config, self.run_config = config, model_config, run_config
    self.init_checkpoint = init_checkpoint
    self.seed = config.seed
    self.tokens_per_step = config.train_batch_size * config.max_seq_length * (
        3 if config.columns.negative else 2)
    self._tokenizer = None
    self._train = self._dev = self._sts = None
    self._warned_small = False
    if config.sp_model or config.vocab_file:
      layouts.check_vocab(model_config, self.tokenizer, config.max_seq_length)
    self.main_metric = (f"mrr@{retrieval_metrics.MRR_AT}" if config.dev_file else
                        "spearman" if config.sts_file else None)
    if self.main_metric is None:
      self.evaluate = None          # nothing to evaluate on: no best/

  # ---- data -------------------------------------------------------------------------
  def train_pairs(self):
    if self._train is None:
      if not self.config.train_file:
        raise ValueError("--train_file is required to train")
      self._train = pairs_data.read_pairs(self.config.train_file, self.config.columns)
    return self._train

  def dev_pairs(self):
    if self._dev is None and self.config.dev_file:
      c = self.config
      self._dev = pairs_data.read_pairs(c.dev_file, dataclasses.replace(c.columns, negative=None),
                                        "dev_file")
    return self._dev

  def sts_rows(self):
    if self._sts is None and self.config.sts_file:
      self._sts = pairs_data.read_sts(self.config.sts_file)
    return self._sts

  def prepare_training_data(self):
    """Every file read and checked before the run writes anything."""
    self.train_pairs()
    self.dev_pairs()
    self.sts_rows()

  def rows(self, texts):
    """Texts -> rows at --max_seq_length (pairs_data.rows), in one segment
    (data_utils/layouts.one_segment: what sentence-transformers' XLNet computes)."""
    c = self.config
    return layouts.one_segment(pairs_data.rows(self.tokenizer, texts, c.max_seq_length,
                                               c.model_type))

  def train_features(self):
    """{ROLE_KEY: [N, L] array} of the training pairs (ROLE anchor, positive[, negative]) and
    `index` int32 [N], each pair's row in the file (0-based, blank lines skipped)."""
    pairs = self.train_pairs()
    roles = {"anchor": pairs.anchors, "positive": pairs.positives}
    if pairs.negatives is not None:
      roles["negative"] = pairs.negatives
    feats = {"index": np.arange(len(pairs), dtype=np.int32)}
    for role, texts in roles.items():
      for key, value in self.rows(texts).items():
        feats[f"{role}_{key}"] = value
    return feats

  def dataset(self, input_context, skip_batches=0):
    batch = self.config.train_batch_size
    if input_context:
      batch = input_context.get_per_replica_batch_size(batch)
    if batch < 2:
      raise ValueError(f"--train_batch_size={self.config.train_batch_size}: {batch} pair(s) per "
                       "replica; in-batch negatives need at least 2")
    feats = self.train_features()
    if not self._warned_small:
      self._warned_small = True
      warn_small_train_set(len(feats["index"]), self.config.train_batch_size, unit="pairs")
    ds = tf.data.Dataset.from_tensor_slices(feats)
    ds = task_lib.host_examples(ds, input_context)
    ds = ds.shuffle(len(feats["index"]), seed=self.config.seed).repeat()
    ds = task_lib.static_batches(ds.batch(batch, drop_remainder=True), batch)
    return ds.skip(skip_batches) if skip_batches else ds

  # ---- model ------------------------------------------------------------------------
  def head_spec(self):
    """The model's head (modeling/heads.py): the embedding of a row, unit length."""
    return {"type": "sentence_pooler", "mode": self.config.pooling, "normalize": True}

  def build_model(self):
    """The family's encoder under the sentence pooler: model({"input_ids", "seg_ids",
    "input_mask"} each [B, L]) -> [B, D] unit vectors."""
    return families.get(self.config.model_type).with_head(self.model_config, self.run_config,
                                                          self.head_spec())

  def export(self, model, export_dir, log=print, padding=None, xla=False, version=None):
    """The SavedModel on raw text: `sentence` [N] -> `embedding` [N, D]
    (serving/embedding_graph.py), checked against this task's Python path."""
    del version
    c = self.config
    return embedding_graph.export_embeddings(model, self.tokenizer, c.model_type,
                                             c.max_seq_length, export_dir, log=log,
                                             padding=padding, xla=xla)

  def initialize(self, model, log):
    if self.init_checkpoint:
      families.get(self.config.model_type).initialize(model, self.init_checkpoint, log)

  def embeddings(self, model, batch, training=True):
    """(anchors, positives, negatives or None), each float32 [batch, hidden], of a training
    batch: one forward pass over the stacked rows."""
    roles = [r for r in ROLES if f"{r}_input_ids" in batch]
    rows = {k: tf.concat([batch[f"{r}_{k}"] for r in roles], axis=0) for k in ROW_KEYS}
    parts = tf.split(tf.cast(model(rows, training=training), tf.float32), len(roles), axis=0)
    return parts[0], parts[1], (parts[2] if len(parts) > 2 else None)

  def loss(self, model, batch, state, step, training=True):
    anchors, positives, negatives = self.embeddings(model, batch, training)
    loss = contrastive.in_batch_negatives_loss(anchors, positives, negatives,
                                               scale=self.config.scale)
    return loss / self.replicas(), {}, state

  # ---- evaluation -------------------------------------------------------------------
  def encode(self, model, texts):
    """The model's embeddings of texts: float32 [N, hidden] (unit length), in
    --eval_batch_size batches of rows at --max_seq_length."""
    rows = self.rows(texts)
    forward = task_lib.inference_fn(model)
    out, size = [], self.config.eval_batch_size
    for start in range(0, len(texts), size):
      out.append(np.asarray(forward({k: tf.constant(v[start:start + size])
                                     for k, v in rows.items()}), np.float32))
    return np.concatenate(out) if out else np.zeros([0, 0], np.float32)

  def evaluate(self, model):
    """{mrr@10, recall@1/5/10} on --dev_file and {spearman} on --sts_file (those given)."""
    results = {}
    dev = self.dev_pairs()
    if dev is not None:
      queries, positives = self.encode(model, dev.anchors), self.encode(model, dev.positives)
      results.update(retrieval_metrics.retrieval_metrics(queries @ positives.T))
    sts = self.sts_rows()
    if sts is not None:
      first, second, gold = sts
      results.update(retrieval_metrics.sts_metrics(self.encode(model, first),
                                                   self.encode(model, second), gold))
    return results

  def write_results(self, results, model_dir):
    """MODEL_DIR/pairs_eval.json: the evaluation's results and the files scored. Returns its
    path."""
    path = fileio.join(model_dir, EVAL_FILE)
    record = {"dev_file": self.config.dev_file, "sts_file": self.config.sts_file, **results}
    fileio.write_atomic(path, json.dumps(record, indent=1) + "\n")
    return path
