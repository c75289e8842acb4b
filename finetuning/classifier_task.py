"""Sequence classification / regression as a task of the shared trainer."""

import dataclasses

import numpy as np
import tensorflow as tf

from data_utils import fileio
from data_utils import layouts
from finetuning import classifier_data, classifier_features, metrics
from modeling import families
from serving import export
from serving import tasks as serving_tasks
from serving import utf8
from training import flags as training_flags
from training import task as task_lib
from training.task import OptimizerConfig, Task


@dataclasses.dataclass(kw_only=True)
class ClassifierConfig(OptimizerConfig):
  task_name: str
  data_dir: str = None           # None: batches come from elsewhere (training/stepper.py)
  sp_model: str = None
  cache_dir: str = None
  uncased: bool = False
  max_seq_length: int = 128
  train_batch_size: int = 32
  eval_batch_size: int = 64
  eval_split: str = "dev"
  summary_type: str = "last"
  use_proj: bool = True
  model_type: str = "xlnet"     # or "mpnet" (data_utils/layouts.py)
  vocab_file: str = None        # WordPiece vocab.txt (MPNet releases) instead of sp_model


def config_from_flags(f, task_name, cache_dir):
  """The ClassifierConfig of run_classifier.py's or run_race.py's flags `f` (run_race.py has no
  --use_summ_proj: the projection is on)."""
  return ClassifierConfig(
      task_name=task_name, data_dir=f.data_dir, sp_model=f.sp_model, vocab_file=f.vocab_file,
      model_type=f.model_type, cache_dir=cache_dir, uncased=f.uncased,
      max_seq_length=f.max_seq_length, train_batch_size=f.train_batch_size,
      eval_batch_size=f.eval_batch_size, eval_split=f.eval_split, summary_type=f.summary_type,
      use_proj=getattr(f, "use_summ_proj", True), seed=f.seed,
      **training_flags.optimizer_kwargs(f))


def build_classifier(config, model_config, run_config, spec):
  # AX is predicted with an MNLI model: same head, same release names.
  return families.get(config.model_type).classifier(
      model_config, run_config, n_class=max(len(spec.labels), 1),
      task_name="mnli" if spec.name == "ax" else spec.name, regression=spec.is_regression,
      summary_type=config.summary_type, use_proj=config.use_proj)


class ClassifierTask(Task):
  """See training/trainer.py for the interface."""

  recipe_script = "classifier"
  feature_cache = True      # features cached under --cache_dir (RACE keeps them in memory)

  @property
  def family(self):
    return self.config.model_type

  def __init__(self, config, model_config, run_config, init_checkpoint=None, spec=None):
    self.config, self.model_config, self.run_config = config, model_config, run_config
    self.spec = spec or classifier_data.get_task(config.task_name)
    self._tokenizer = None
    if config.sp_model or config.vocab_file:      # else: made (and refused) when first needed
      layouts.check_vocab(model_config, self.tokenizer, config.max_seq_length)
    self.init_checkpoint = init_checkpoint
    self.seed = config.seed
    self.tokens_per_step = config.train_batch_size * config.max_seq_length
    eval_metrics = metrics.task_metrics(self.spec.name, [0, 1], [0, 1])
    self.main_metric = next(iter(eval_metrics))
    if config.cache_dir and self.feature_cache:   # refused before any work; made when written
      classifier_features.check_cache_dir(config.cache_dir)
    self._checked = set()     # (cache path, size, mtime) already checked in this process
    self._claimed = self._warned_small = False

  @property
  def tokenizer(self):
    """--sp_model's SentencePiece or --vocab_file's WordPiece (one-line error without)."""
    if self._tokenizer is None:
      c = self.config
      self._tokenizer = layouts.make_tokenizer(c.model_type, c.sp_model, c.vocab_file, c.uncased)
    return self._tokenizer

  # ---- features ---------------------------------------------------------------------
  def features_path(self, split):
    c = self.config
    self.tokenizer      # no --sp_model / --vocab_file: its one-line error before the cache name
    source = classifier_data.split_path(self.spec, c.data_dir, split)
    path = fileio.join(c.cache_dir, classifier_features.cache_name(
        self.spec.name, split, c.max_seq_length, c.vocab_file or c.sp_model, c.uncased,
        c.model_type, classifier_features.source_stamp(source)))
    stamp = lambda: (path, fileio.size(path), fileio.mtime_ns(path))
    if fileio.exists(path) and stamp() not in self._checked:   # each evaluation calls this
      try:
        classifier_features.check_cache(path, c.max_seq_length)
      except ValueError as e:       # a cache is ours to rebuild
        print(f"rebuilding the feature cache: {e}", flush=True)
        fileio.remove(path)
    if not fileio.exists(path):
      examples = classifier_data.read_split(self.spec, c.data_dir, split)
      feats = classifier_features.encode(self.tokenizer, examples, c.max_seq_length,
                                         self.spec.labels, c.model_type)
      if not self._claimed:     # checked again: the directory may have changed since
        classifier_features.claim_cache_dir(c.cache_dir)
        self._claimed = True
      classifier_features.write_cache(path, feats)
    self._checked.add(stamp())
    return path

  def _dataset(self, split, batch_size, train, input_context=None):
    ds = tf.data.TFRecordDataset(self.features_path(split))
    if train:
      ds = task_lib.host_examples(ds, input_context)
      ds = ds.shuffle(10_000, seed=self.config.seed).repeat()
    ds = ds.batch(batch_size, drop_remainder=train)
    ds = ds.map(lambda x: classifier_features.parse(x, self.config.max_seq_length,
                                                    self.spec.is_regression))
    return task_lib.static_batches(ds, batch_size) if train else ds

  def dataset(self, input_context, skip_batches=0):
    batch = self.config.train_batch_size
    if input_context:
      batch = input_context.get_per_replica_batch_size(batch)
    ds = self._dataset("train", batch, train=True, input_context=input_context)
    if not self._warned_small:
      self._warned_small = True
      warn_small_train_set(classifier_features.count_records(
          self.features_path("train"), self.config.max_seq_length),
                           self.config.train_batch_size)
    return ds.skip(skip_batches) if skip_batches else ds

  # ---- model ------------------------------------------------------------------------
  def build_model(self):
    return build_classifier(self.config, self.model_config, self.run_config, self.spec)

  def initialize(self, model, log):
    if self.init_checkpoint:
      families.get(self.config.model_type).initialize(model, self.init_checkpoint, log)

  def loss(self, model, batch, state, step, training=True):
    logits = model(batch, training=training)
    if self.spec.is_regression:
      loss = tf.reduce_mean(tf.square(tf.cast(logits, tf.float32) - batch["label"]))
    else:
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=batch["label"], logits=tf.cast(logits, tf.float32)))
    return loss / self.replicas(), {}, state

  # ---- evaluation and prediction ----------------------------------------------------
  def predict(self, model, split):
    """(predictions, labels) over a split: class indices or scores."""
    ds = self._dataset(split, self.config.eval_batch_size, train=False)
    forward = tf.function(lambda b: model(b, training=False), reduce_retracing=True)
    preds, labels = [], []
    for batch in ds:
      out = forward(batch).numpy()
      preds.append(out if self.spec.is_regression else out.argmax(-1))
      labels.append(batch["label"].numpy())
    return np.concatenate(preds), np.concatenate(labels)

  def export(self, model, export_dir, log=print, padding=None, xla=False, version=None):
    """The SavedModel on raw text (export_classifier)."""
    return export_classifier(self, model, export_dir, log, padding=padding, xla=xla)

  def prepare_training_data(self):
    """The train split's features (and the evaluation split's), read, checked and cached
    before the run writes anything."""
    self.features_path("train")
    if self.evaluate and self.config.eval_split in self.spec.files:
      self.features_path(self.config.eval_split)

  def eval_without_labels(self, split=None):
    """Why `split` (default --eval_split) cannot be scored (its layout has no label column:
    the GLUE test files), or None."""
    split = split or self.config.eval_split
    columns = self.spec.columns.get(split)
    if columns is None or columns[2] is not None:   # IMDB, the CSV layouts: always labelled
      return None
    path = classifier_data.split_path(self.spec, self.config.data_dir, split)
    return f"{path} ({self.spec.name}'s {split} split) has no labels: nothing to score"

  def evaluate(self, model, split=None):
    """The task's metrics on `split`; {} for a split without labels (eval_without_labels)."""
    if self.eval_without_labels(split):
      return {}
    preds, labels = self.predict(model, split or self.config.eval_split)
    return metrics.task_metrics(self.spec.name, labels, preds)

  def write_predictions(self, model, split, output_dir):
    """The GLUE submission file (index, prediction) for a test split."""
    preds, _ = self.predict(model, split)
    examples = classifier_data.read_split(self.spec, self.config.data_dir, split)
    name = (self.spec.submission or {}).get(split, f"{self.spec.name}.{split}.tsv")
    path = fileio.join(output_dir, name)
    with fileio.atomic_write(path) as f:
      f.write("index\tprediction\n")
      for ex, p in zip(examples, preds):
        value = f"{float(p):.3f}" if self.spec.is_regression else self.spec.labels[int(p)]
        f.write(f"{ex.guid}\t{value}\n")
    return path


def warn_small_train_set(n, batch_size, unit="examples", log=print):
  """One warning line when a train set of `n` rows is smaller than one (global) batch. Such a
  set still trains: the fine-tuning datasets repeat before they batch (drop_remainder then
  never drops a whole epoch), so every batch is the same rows, each about batch/n times."""
  if 0 < n < batch_size:
    log(f"warning: the train set has {n:,} {unit}, fewer than one batch of {batch_size:,}: "
        f"every step trains on the same {n:,}, each repeated about {batch_size / n:.1f} times "
        "in its batch (lower --train_batch_size, or add data)")


# ---- --export_dir: the serving module and the Python path it is checked against ----------
def is_pair_task(spec):
  """Whether a classification task's examples have a second text."""
  return any(cols[1] is not None for cols in spec.columns.values())


def classifier_outputs(task, model, texts, texts_b=None):
  """The Python path's classifier outputs on raw texts (texts_b None: single-text task)."""
  c, spec = task.config, task.spec
  texts = utf8.python_texts(texts)
  texts_b = utf8.python_texts(texts_b) if texts_b is not None else [None] * len(texts)
  examples = [classifier_data.Example(str(k), a, b)
              for k, (a, b) in enumerate(zip(texts, texts_b))]
  feats = classifier_features.encode(task.tokenizer, examples, c.max_seq_length, spec.labels,
                                     c.model_type)
  logits = serving_tasks.forward(model, {k: feats[k]
                                         for k in ("input_ids", "seg_ids", "input_mask")})
  if spec.is_regression:
    return {"score": logits}
  return {"logits": logits, "probabilities": serving_tasks.softmax(logits),
          "label": np.array([spec.labels[i] for i in logits.argmax(-1)], object)}


def export_classifier(task, model, export_dir, log=print, padding=None, xla=False):
  c, spec = task.config, task.spec
  pair = is_pair_task(spec)
  texts = list(export.PROBE_TEXTS) + [serving_tasks.LONG_PROBE]
  texts_b = texts[2:] + texts[:2] if pair else None
  probes = {"sentence": np.array(texts, object)}
  if pair:
    probes["sentence_b"] = np.array(texts_b, object)
  module = export.classifier_module(model, task.tokenizer, c.model_type, c.max_seq_length,
                                    spec.labels, pair, padding=padding, xla=xla)
  return export.save(module, export_dir, probes, classifier_outputs(task, model, texts, texts_b),
                     log=log)
