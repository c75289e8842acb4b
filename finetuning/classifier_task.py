"""Sequence classification / regression as a task of the shared trainer: the GLUE and
text-classification data sets (finetuning/classifier_data.py) and your own data
(finetuning/table_data.py), their features, metrics, predictions files and exports."""

import dataclasses
import json

import numpy as np
import tensorflow as tf

from data_utils import fileio
from data_utils import layouts
from finetuning import classifier_data, classifier_features, metrics, predictions, table_data
from modeling import checkpoint as ckpt_lib
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


class ClassifierTask(task_lib.TokenizerFromFlags, Task):
  """See training/trainer.py for the interface."""

  recipe_script = "classifier"
  feature_cache = True      # features cached under --cache_dir (RACE keeps them in memory)

  @property
  def family(self):
    return self.config.model_type

  def __init__(self, config, model_config, run_config, init_checkpoint=None, spec=None,
               columns=None):
    """SPEC: the task (default: the built-in --task_name); COLUMNS: your own data's
    table_data.Columns (recorded in MODEL_DIR/task.json at the end of training)."""
    self.config, self.model_config, self.run_config = config, model_config, run_config
    self.spec = spec or classifier_data.get_task(config.task_name)
    self.columns = columns
    self._tokenizer = None
    if config.sp_model or config.vocab_file:      # else: made (and refused) when first needed
      layouts.check_vocab(model_config, self.tokenizer, config.max_seq_length)
    self.init_checkpoint = init_checkpoint
    self.seed = config.seed
    self.tokens_per_step = config.train_batch_size * config.max_seq_length
    eval_metrics = metrics.task_metrics(self.spec.name, [0, 1], [0, 1],
                                        regression=self.spec.is_regression)
    self.main_metric = next(iter(eval_metrics))
    if config.cache_dir and self.feature_cache:   # refused before any work; made when written
      classifier_features.check_cache_dir(config.cache_dir)
    self._checked = set()     # (cache path, size, mtime) already checked in this process
    self._claimed = self._warned_small = False

  # ---- features ---------------------------------------------------------------------
  def cache_path(self, split):
    """The feature cache file of a split (its name: the task, settings and source file)."""
    c = self.config
    self.tokenizer      # no --sp_model / --vocab_file: its one-line error before the cache name
    source = classifier_data.split_path(self.spec, c.data_dir, split)
    return fileio.join(c.cache_dir, classifier_features.cache_name(
        self.spec.key or self.spec.name, split, c.max_seq_length, c.vocab_file or c.sp_model,
        c.uncased, c.model_type, classifier_features.source_stamp(source)))

  def features_path(self, split):
    c = self.config
    path = self.cache_path(split)
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
    ds = ds.map(tf.autograph.experimental.do_not_convert(   # plain ops: nothing to convert
        lambda x: classifier_features.parse(x, self.config.max_seq_length,
                                            self.spec.is_regression)))
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
  def outputs(self, model, split):
    """(outputs, labels) over a split, in the file's order: the logits `[N, num_labels]` (the
    scores `[N]` for regression) and the labels `[N]` (class indices, -1 or NaN when the split
    has none)."""
    return self._forward(model, self._dataset(split, self.config.eval_batch_size, train=False))

  def _forward(self, model, ds):
    forward = task_lib.inference_fn(model)
    outs, labels = [], []
    for batch in ds:
      outs.append(np.asarray(forward(layouts.model_inputs(batch)).numpy(), np.float64))
      labels.append(batch["label"].numpy())
    return np.concatenate(outs), np.concatenate(labels)

  def predict(self, model, split):
    """(predictions, labels) over a split: class indices or scores."""
    outs, labels = self.outputs(model, split)
    return (outs if self.spec.is_regression else outs.argmax(-1)), labels

  def export(self, model, export_dir, log=print, padding=None, xla=False, version=None):
    """The SavedModel on raw text (export_classifier)."""
    return export_classifier(self, model, export_dir, log, padding=padding, xla=xla)

  def prepare_training_data(self):
    """The train split's features (and the evaluation split's), read, checked and cached
    before the run writes anything."""
    splits = ["train"]
    if self.evaluate and self.config.eval_split in self.spec.files:
      splits.append(self.config.eval_split)
    for split in splits:      # every file checked before the first cache file is written
      if not fileio.exists(self.cache_path(split)):
        classifier_data.read_split(self.spec, self.config.data_dir, split, report=lambda _: None)
    for split in splits:
      self.features_path(split)

  def eval_without_labels(self, split=None):
    """Why `split` (default --eval_split) cannot be scored (its layout has no label column:
    the GLUE test files), or None."""
    split = split or self.config.eval_split
    columns = self.spec.columns.get(split)
    if self.spec.reader == "table" and split in self.spec.files:   # your own: as the file says
      path = self.spec.files[split]
      if fileio.exists(path) and not table_data.has_column(path, columns[2]):
        return (f"{path} ({split} split) has no column {columns[2]!r} (--label_column): "
                "nothing to score")
      return None
    if columns is None or columns[2] is not None:   # IMDB, the CSV layouts: always labelled
      return None
    path = classifier_data.split_path(self.spec, self.config.data_dir, split)
    return f"{path} ({self.spec.name}'s {split} split) has no labels: nothing to score"

  def evaluate(self, model, split=None):
    """The task's metrics on `split`; {} for a split without labels (eval_without_labels)."""
    if self.eval_without_labels(split):
      return {}
    return self._metrics(*self.outputs(model, split or self.config.eval_split))

  def _metrics(self, outs, labels):
    preds = outs if self.spec.is_regression else outs.argmax(-1)
    return metrics.task_metrics(self.spec.name, labels, preds,
                                regression=self.spec.is_regression)

  def evaluate_and_write(self, model, split, output_dir):
    """(evaluate's metrics, write_predictions' paths) of a labelled split from one pass of the
    model over it."""
    outs, labels = self.outputs(model, split)
    return self._metrics(outs, labels), self.write_predictions(model, split, output_dir, outs)

  def write_predictions(self, model, split, output_dir, outs=None):
    """Writes a split's predictions; returns the paths written: for a test split of a built-in
    task its submission file (GLUE's `index<TAB>prediction`), and for every split
    OUTPUT_DIR/predictions/TASK.SPLIT.jsonl (finetuning/predictions.py's layout). OUTS: the
    model's outputs on the split (`outputs`), when already computed."""
    if outs is None:
      outs, _ = self.outputs(model, split)
    examples = classifier_data.read_split(self.spec, self.config.data_dir, split,
                                          report=lambda _: None)
    written = []
    if split.startswith("test") and self.spec.reader != "table":
      name = (self.spec.submission or {}).get(split, f"{self.spec.name}.{split}.tsv")
      path = fileio.join(output_dir, name)
      preds = outs if self.spec.is_regression else outs.argmax(-1)
      with fileio.atomic_write(path) as f:
        f.write("index\tprediction\n")
        for ex, p in zip(examples, preds):
          value = f"{float(p):.3f}" if self.spec.is_regression else self.spec.labels[int(p)]
          f.write(f"{ex.guid}\t{value}\n")
      written.append(path)
    written.append(predictions.write_jsonl(
        predictions_path(output_dir, self.spec.name, split),
        prediction_rows(self.spec, examples, outs)))
    return written

  # ---- --predict_file: a file of raw text -------------------------------------------
  def read_predict_file(self, path, columns):
    """The examples of a raw file to predict (table_data's formats; ids PREDICT-LINE unless
    it has the id column), read and checked before any model work: one-line errors naming the
    file and line. A label column, when present, is read as gold."""
    table_data.file_format(path, "predict_file")
    pair = is_pair_task(self.spec)
    if pair and columns.text_b is None:
      raise ValueError(f"--predict_file: {self.spec.name} takes two texts: name the second "
                       "column with --text_b_column")
    if not pair and columns.text_b is not None:
      raise ValueError(f"--text_b_column={columns.text_b}: {self.spec.name} takes one text")
    return table_data.read_table(path, "predict", columns, labels=self.spec.labels or None,
                                 regression=self.spec.is_regression)

  def predict_file(self, model, path, examples, output_dir):
    """Predicts EXAMPLES (read_predict_file's, from PATH) and writes
    OUTPUT_DIR/predictions/TASK.predict-STEM.jsonl (STEM: PATH's name without its ending);
    returns [that path]."""
    c = self.config
    feats = classifier_features.encode(self.tokenizer, examples, c.max_seq_length,
                                       self.spec.labels, c.model_type)
    outs, _ = self._forward(model, tf.data.Dataset.from_tensor_slices(feats).batch(
        c.eval_batch_size))
    stem = fileio.basename(path).rsplit(".", 1)[0]
    return [predictions.write_jsonl(
        predictions_path(output_dir, self.spec.name, f"predict-{stem}"),
        prediction_rows(self.spec, examples, outs))]

  def on_end(self, model, model_dir, log):
    """The end of training: MODEL_DIR/task.json records the task (write_task_file)."""
    if self.recipe_script == "classifier":      # not RACE's (a subclass)
      write_task_file(model_dir, self.spec, self.columns)


def predictions_path(output_dir, task_name, split):
  """OUTPUT_DIR/predictions/TASK.SPLIT.jsonl: one file per task and split (or predicted file)."""
  return fileio.join(output_dir, "predictions", f"{task_name}.{split}.jsonl")


def prediction_rows(spec, examples, outs):
  """The predictions file's rows (finetuning/predictions.py's layout) of EXAMPLES and the
  model's OUTS on them: logits `[N, num_labels]` (probabilities: their softmax), or scores
  `[N]` for regression. `text_b` for a pair task, `gold` for a labelled example."""
  pair = is_pair_task(spec)
  probs = None if spec.is_regression else serving_tasks.softmax(np.asarray(outs, np.float64))
  for k, ex in enumerate(examples):
    row = {"id": ex.guid, "text_a": ex.text_a}
    if pair:
      row["text_b"] = ex.text_b
    if spec.is_regression:
      row["prediction"] = row["score"] = float(outs[k])
    else:
      row["prediction"] = spec.labels[int(np.argmax(outs[k]))]
      row["probabilities"] = predictions.probabilities(spec.labels, probs[k])
    if ex.label is not None:
      row["gold"] = ex.label
    yield row


# ---- what a run records of its task, and what a later run reads back -----------------------
TASK_FILE = "task.json"
CUSTOM_ONLY = ("train_file", "dev_file", "test_file", "labels", "regression")


def write_task_file(model_dir, spec, columns=None):
  """MODEL_DIR/task.json: the task's name, its labels in the model's output order, whether it
  is a regression, and (your own data) the columns, so that evaluation, prediction and the
  exports of a later run use the same."""
  record = {"task": spec.name, "labels": list(spec.labels), "regression": spec.is_regression,
            "pair": is_pair_task(spec)}
  if columns is not None:
    record["columns"] = dataclasses.asdict(columns)
  fileio.write_atomic(fileio.join(model_dir, TASK_FILE), json.dumps(record, indent=1) + "\n")


def read_task_file(model_dir):
  """MODEL_DIR/task.json's record, or None."""
  path = fileio.join(model_dir, TASK_FILE) if model_dir else None
  if not path or not fileio.exists(path):
    return None
  return fileio.read_json(path, "task record")


def resolve_spec(f, model_dir):
  """(TaskSpec, table_data.Columns) of run_classifier.py's flags F: a built-in task, or
  --task_name=custom's files, columns and label set (--labels; else MODEL_DIR/task.json's;
  else the training file's, sorted). One-line ValueErrors: a custom-only flag on a built-in
  task, a label set other than the one MODEL_DIR was trained with, no label set at all."""
  name = f.task_name.lower()
  recorded = read_task_file(model_dir)
  where = fileio.join(model_dir, TASK_FILE) if recorded else None
  if recorded and recorded.get("task") != name:
    raise ValueError(f"--task_name={f.task_name}: {model_dir} was trained on "
                     f"{recorded.get('task')} ({where})")
  present = lambda flag: f[flag].present if hasattr(f, "__getitem__") else False
  kept = (recorded or {}).get("columns") or {}
  columns = table_data.Columns(**{
      key: kept[key] if key in kept and not present(f"{key}_column") else
      getattr(f, f"{key}_column") for key in ("text_a", "text_b", "label", "id")})
  if name != metrics.CUSTOM:
    for flag in CUSTOM_ONLY:
      if getattr(f, flag):
        raise ValueError(f"--{flag} is for --task_name=custom ({name} reads its official "
                         "files from --data_dir)")
    return classifier_data.get_task(name), columns
  files = {}
  for split in table_data.SPLITS:
    path = getattr(f, f"{split}_file") or (
        table_data.find_split_file(f.data_dir, split) if f.data_dir else None)
    if path:
      table_data.file_format(path, f"{split}_file")
      files[split] = path
  regression = f.regression
  if recorded and present("regression") and regression != recorded["regression"]:
    raise ValueError(f"--regression={regression}: {where} records regression="
                     f"{recorded['regression']}")
  regression = recorded["regression"] if recorded and not present("regression") else regression
  if regression:
    labels = ()
  elif f.labels:
    labels = table_data.parse_labels(f.labels)
  elif recorded:
    labels = tuple(recorded["labels"])
  elif "train" in files:
    labels = table_data.labels_from_file(files["train"], columns)
  else:
    raise ValueError("--task_name=custom: no label set: pass --labels=A,B,..., or a training "
                     "file (--train_file, or --data_dir with train.tsv, train.csv or "
                     "train.jsonl), or a --model_dir trained on your data")
  if recorded and not regression and list(labels) != recorded["labels"]:
    raise ValueError(f"the labels {list(labels)} are not those {model_dir} was trained with "
                     f"({recorded['labels']}, {where})")
  return table_data.custom_spec(files, columns, labels, regression), columns


def trained_checkpoint(model_dir, log=print):
  """The checkpoint to evaluate or predict with when MODEL_DIR holds a trained run and no
  --init_checkpoint is given: its best/ (training/best.py), else its latest; None if none
  (modeling/checkpoint.run_checkpoint: the rule of --init_checkpoint=RUN_DIR)."""
  found = ckpt_lib.run_checkpoint(model_dir) if model_dir else None
  if found is None:
    return None
  prefix, said = found
  log(f"using the run's {'best' if said.startswith('best/') else 'last'} checkpoint {prefix}: "
      f"{said}")
  return prefix


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
