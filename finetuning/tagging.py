"""Token tagging (named entities, CoNLL-2003's layout) as a task of the shared trainer, on either
family: the head is modeling/heads.TokenTagger, hosted by `families.get(model_type).with_head`.

Data: CoNLL-layout files (finetuning/conll.py), one per split, the tags read in BIO (an IOB1 file
converted as it is read; `scheme="auto"` takes a file as IOB1 when some entity of it starts with
I-, which BIO never does). Rows: finetuning/tagging_features.py (each word tokenized alone, its
label on its first piece, long sentences split into whole-word windows). Loss: cross-entropy
over the labelled positions only (each word's first piece), averaged over them. Evaluation: a
word's tag is the argmax of its first piece's logits (a word of no piece: O); entity precision,
recall and F1 as conlleval counts them (`f1`, the main metric), the same in seqeval's strict
IOB2 mode (`strict_f1`, ...), and the token accuracy (finetuning/entity_metrics.py). Predictions
go to OUTPUT_DIR/tagging_SPLIT_predictions.txt in conlleval's layout (each input line with the
predicted tag appended: `conlleval < file` scores it).

The label set is the training file's tags (O first, then sorted), or given (`labels`: an
evaluation-only run names the checkpoint's labels, e.g. from its Hugging Face config.json); the
dev and test files may not hold a tag outside it (one line naming the file and line).
"""

import dataclasses
import json

import numpy as np
import tensorflow as tf

from data_utils import fileio
from data_utils import layouts
from finetuning import conll
from finetuning import entity_metrics
from finetuning import tag_spans
from finetuning import tagging_features
from modeling import families
from modeling import hf_io
from training import flags as training_flags
from training import task as task_lib
from training.task import OptimizerConfig, Task

SPLITS = ("train", "dev", "test")
# --data_dir's files, per split, in the order looked for: CoNLL-2003's own names, then the
# names of the common copies (e.g. Hugging Face's conll2003 scripts' train.txt / valid.txt)
DATA_DIR_NAMES = {"train": ("eng.train", "train.txt"),
                  "dev": ("eng.testa", "valid.txt", "dev.txt"),
                  "test": ("eng.testb", "test.txt")}
SCHEMES = ("auto",) + conll.SCHEMES
LABELS_FILE = "tagging_labels.json"     # MODEL_DIR's label list, written at the end of training


@dataclasses.dataclass(kw_only=True)
class TaggingConfig(OptimizerConfig):
  files: dict = dataclasses.field(default_factory=dict)   # split -> CoNLL file
  sp_model: str = None
  vocab_file: str = None          # WordPiece vocab.txt (MPNet releases) instead of sp_model
  uncased: bool = False
  model_type: str = "xlnet"       # or "mpnet" (data_utils/layouts.py)
  max_seq_length: int = 128
  train_batch_size: int = 32
  eval_batch_size: int = 64
  eval_split: str = "dev"
  label_scheme: str = "auto"      # auto | bio | iob1
  tag_column: int = -1


def data_dir_files(data_dir):
  """{split: path} of the CoNLL-2003 files found in DATA_DIR (DATA_DIR_NAMES; a split with
  none is left out); FileNotFoundError (one line) when there is none at all."""
  out = {}
  for split, names in DATA_DIR_NAMES.items():
    for name in names:
      path = fileio.join(data_dir, name)
      if fileio.exists(path):
        out[split] = path
        break
  if not out:
    raise FileNotFoundError(f"--data_dir={data_dir}: none of "
                            f"{', '.join(n for v in DATA_DIR_NAMES.values() for n in v)}")
  return out


def config_from_flags(f):
  """The TaggingConfig of run_tagger.py's flags `f`: --data_dir's files (data_dir_files),
  overridden by --train_file / --dev_file / --test_file."""
  files = data_dir_files(f.data_dir) if f.data_dir else {}
  for split in SPLITS:
    if getattr(f, f"{split}_file"):
      files[split] = getattr(f, f"{split}_file")
  return TaggingConfig(
      files=files, sp_model=f.sp_model, vocab_file=f.vocab_file, uncased=f.uncased,
      model_type=f.model_type, max_seq_length=f.max_seq_length,
      train_batch_size=f.train_batch_size, eval_batch_size=f.eval_batch_size,
      eval_split=f.eval_split, label_scheme=f.label_scheme, tag_column=f.tag_column,
      seed=f.seed, **training_flags.optimizer_kwargs(f))


def read_tagged(path, scheme="auto", tag_column=-1, log=print):
  """(sentences in BIO, the scheme used) of a CoNLL file. auto: IOB1 when an entity starts with
  I- (conll.bio_violations), else BIO; bio keeps the tags as written, saying how many entities
  start with I- (if any: such a file may be IOB1); iob1 converts."""
  if scheme not in SCHEMES:
    raise ValueError(f"--label_scheme={scheme}: expected one of {', '.join(SCHEMES)}")
  sentences = conll.read_conll(path, tag_column=tag_column)
  starts = conll.bio_violations(sentences) if scheme != "iob1" else 0
  if scheme == "iob1" or (scheme == "auto" and starts):
    sentences = [dataclasses.replace(s, tags=tuple(conll.iob1_to_bio(s.tags))) for s in sentences]
    if scheme == "auto":
      log(f"{path}: read as IOB1 (an entity starts with I-); tags converted to BIO")
    return sentences, "iob1"
  if starts:
    log(f"{path}: {starts} entities start with I- although --label_scheme=bio (an IOB1 file? "
        "--label_scheme=auto or iob1 converts it)")
  return sentences, "bio"


def labels_of_checkpoint(path):
  """The label list recorded beside a checkpoint, or None: a Hugging Face directory's
  config.json id2label, or tagging_labels.json in the directory or its parent (a run's
  MODEL_DIR, its best/)."""
  if not path:
    return None
  path = str(path).rstrip("/")
  if fileio.isdir(path) and fileio.exists(fileio.join(path, "config.json")):
    config = hf_io.read_config(path)
    if config.get("id2label"):
      return hf_io.config_labels(config)
  for directory in (path, fileio.dirname(path)):
    found = fileio.join(directory, LABELS_FILE)
    if fileio.isdir(directory) and fileio.exists(found):
      return list(json.loads(fileio.read_bytes(found)))
  return None


class TaggingTask(task_lib.TokenizerFromFlags, Task):
  """Token tagging on CoNLL files (module docstring); see training/task.py for the interface."""

  recipe_script = "classifier"    # a classification head per token: the classifier's recipe
  main_metric = "f1"

  def __init__(self, config, model_config, run_config, init_checkpoint=None, labels=None,
               log=print):
    self.config, self.model_config, self.run_config = config, model_config, run_config
    self.init_checkpoint = init_checkpoint
    self.seed = config.seed
    self.log = log
    self.tokens_per_step = config.train_batch_size * config.max_seq_length
    self._labels = conll.label_list(labels=labels) if labels else None
    self._tokenizer = None
    self._cache = {}
    if config.sp_model or config.vocab_file:
      layouts.check_vocab(model_config, self.tokenizer, config.max_seq_length)
    tagging_features.row_budget(config.max_seq_length, config.model_type)
    if config.label_scheme not in SCHEMES:
      raise ValueError(f"--label_scheme={config.label_scheme}: expected one of "
                       f"{', '.join(SCHEMES)}")

  @property
  def family(self):
    return self.config.model_type

  # ---- data -------------------------------------------------------------------------------
  def path(self, split):
    """The CoNLL file of `split` (ValueError naming the flag when none was given)."""
    path = self.config.files.get(split)
    if not path:
      raise ValueError(f"no {split} file: pass --{split}_file or a --data_dir holding "
                       f"{' or '.join(DATA_DIR_NAMES.get(split, (split,)))}")
    return path

  def sentences(self, split):
    """The split's sentences (BIO tags), read and checked once; the tags of dev and test must
    be in the label set."""
    key = ("sentences", split)
    if key not in self._cache:
      path = self.path(split)
      sentences, _ = read_tagged(path, self.config.label_scheme, self.config.tag_column,
                                 self.log)
      if split != "train" or self._labels is not None:
        conll.check_labels(path, sentences, self.labels)
      self._cache[key] = sentences
    return self._cache[key]

  @property
  def labels(self):
    """The label list: given, or the training file's (conll.label_list)."""
    if self._labels is None:
      if not self.config.files.get("train"):
        raise ValueError("the label set is unknown: pass --labels, --train_file or an "
                         "--init_checkpoint that records its labels (a Hugging Face "
                         "directory's id2label, a run's tagging_labels.json)")
      self._labels = conll.label_list(self.sentences("train"))
    return self._labels

  def features(self, split):
    """(tagging_features.encode_sentences' features, its row index) of a split, once."""
    if split not in self._cache:
      c = self.config
      self._cache[split] = tagging_features.encode_sentences(
          self.tokenizer, self.sentences(split), c.max_seq_length, c.model_type, self.labels)
    return self._cache[split]

  def check_inputs(self, splits):
    """Reads and checks the files of SPLITS and settles the label set, before any work (a bad
    line is one error naming it, with nothing written)."""
    for split in splits:
      self.sentences(split)
    return self.labels

  def prepare_training_data(self):
    """The training rows and the evaluation file, read and checked before anything is
    written."""
    self.features("train")
    if self.config.files.get(self.config.eval_split):
      self.sentences(self.config.eval_split)

  def dataset(self, input_context, skip_batches=0):
    batch = self.config.train_batch_size
    if input_context:
      batch = input_context.get_per_replica_batch_size(batch)
    features, _ = self.features("train")
    ds = tf.data.Dataset.from_tensor_slices(features)
    ds = task_lib.host_examples(ds, input_context).shuffle(10_000, seed=self.config.seed)
    ds = task_lib.static_batches(ds.repeat().batch(batch, drop_remainder=True), batch)
    return ds.skip(skip_batches) if skip_batches else ds

  # ---- model ------------------------------------------------------------------------------
  def head_spec(self):
    return {"type": "token_tagger", "n_class": len(self.labels), "labels": list(self.labels)}

  def build_model(self):
    return families.get(self.config.model_type).with_head(self.model_config, self.run_config,
                                                          self.head_spec())

  def initialize(self, model, log):
    if self.init_checkpoint:
      families.get(self.config.model_type).initialize(model, self.init_checkpoint, log)

  def loss(self, model, batch, state, step, training=True):
    """Cross-entropy on the labelled positions (label_weight 1: each word's first piece),
    averaged over them."""
    logits = tf.cast(model(batch, training=training), tf.float32)     # [B, L, n_class]
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=batch["label_ids"],
                                                        logits=logits)
    weight = batch["label_weight"]
    loss = tf.reduce_sum(ce * weight) / tf.maximum(tf.reduce_sum(weight), 1.0)
    return loss / self.replicas(), {}, state

  def on_end(self, model, model_dir, log):
    """MODEL_DIR/tagging_labels.json: the label list, for evaluation-only runs later."""
    if model_dir:
      fileio.write_atomic(fileio.join(model_dir, LABELS_FILE),
                          json.dumps(list(self.labels)).encode())

  # ---- evaluation and prediction ----------------------------------------------------------
  def logits(self, model, split):
    """float32 [R, L, n_class]: the model over the split's rows, in order."""
    features, _ = self.features(split)
    keys = ("input_ids", "seg_ids", "input_mask")
    ds = tf.data.Dataset.from_tensor_slices({k: features[k] for k in keys})
    forward = task_lib.inference_fn(model)
    out = [np.asarray(forward(b), np.float32) for b in ds.batch(self.config.eval_batch_size)]
    n_class = len(self.labels)
    return (np.concatenate(out) if out else
            np.zeros([0, self.config.max_seq_length, n_class], np.float32))

  def predict_tags(self, model, split):
    """One predicted tag list per sentence of the split (tagging_features.word_predictions)."""
    _, index = self.features(split)
    sentences = self.sentences(split)
    return tagging_features.word_predictions(self.logits(model, split), index,
                                             [len(s.words) for s in sentences], self.labels)

  def scores(self, split, predicted):
    """{"conlleval": EntityScores, "strict": EntityScores} of PREDICTED against the split."""
    gold = [s.tags for s in self.sentences(split)]
    return {mode: entity_metrics.score(gold, predicted, mode) for mode in entity_metrics.MODES}

  @staticmethod
  def metrics(scores):
    """The flat metrics of `scores`: precision / recall / f1 (conlleval), strict_precision /
    strict_recall / strict_f1, accuracy (of the tags, per word)."""
    c, s = scores["conlleval"], scores["strict"]
    return {"f1": c.f1, "precision": c.precision, "recall": c.recall, "strict_f1": s.f1,
            "strict_precision": s.precision, "strict_recall": s.recall,
            "accuracy": c.accuracy}

  def eval_without_labels(self, split=None):
    """Why `split` (default --eval_split) cannot be scored: no file for it; else None."""
    split = split or self.config.eval_split
    if not self.config.files.get(split):
      return f"no {split} file (--{split}_file or --data_dir)"
    return None

  def evaluate(self, model, split=None):
    """The entity scores and token accuracy on `split` (default --eval_split)."""
    split = split or self.config.eval_split
    return self.metrics(self.scores(split, self.predict_tags(model, split)))

  def predictions_path(self, split, output_dir):
    return fileio.join(output_dir, f"tagging_{split}_predictions.txt")

  def write_predictions(self, model, split, output_dir, predicted=None):
    """OUTPUT_DIR/tagging_SPLIT_predictions.txt (conll.write_predictions: conlleval's layout);
    returns [its path]. PREDICTED: predict_tags' output, when already computed."""
    if predicted is None:
      predicted = self.predict_tags(model, split)
    path = self.predictions_path(split, output_dir)
    conll.write_predictions(self.path(split), path, predicted, tag_column=self.config.tag_column)
    return [path]

  def evaluate_and_write(self, model, split, output_dir):
    """(scores as `scores` gives them, write_predictions' paths) from one pass over a split."""
    predicted = self.predict_tags(model, split)
    return (self.scores(split, predicted),
            self.write_predictions(model, split, output_dir, predicted))

  # ---- --export_dir -----------------------------------------------------------------------
  def export(self, model, export_dir, log=print, padding=None, xla=False, version=None):
    """The SavedModel on raw text returning entity spans (tag_spans.export_tagger)."""
    c = self.config
    return tag_spans.export_tagger(model, self.tokenizer, c.model_type, c.max_seq_length,
                                   list(self.labels), export_dir, log, padding=padding, xla=xla)
