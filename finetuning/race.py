"""RACE: reader (official JSON directory layout), features, and its trainer task.

Layout per option: (context, question+option) as a pair in the model type's
layout (data_utils/layouts.py; XLNet's release: `context <sep> question+option
<sep> <cls>`, LEFT padded). The question+option text keeps its last `max_qa_length`
tokens (fewer if the row has no room for them); the context is cut to fit. A question
containing "_" has the option written into the blank. Each option is built from fresh
copies (the release's list aliasing let options accumulate into the context).
"""

import json

import numpy as np
import tensorflow as tf

from data_utils import fileio
from data_utils import layouts
from finetuning import classifier_data, classifier_task, metrics, predictions
from modeling import families
from serving import export
from serving import tasks as serving_tasks
from serving import utf8
from training import task as task_lib

LEVELS = ("middle", "high")
N_CHOICE = 4
UNLABELLED = -1       # the label of a question whose file has no answers (read_files)
PREDICT_FILE = "--predict_file"   # the `split` that reads RaceTask.predict_file (read_path)


def _json_type(value):
  for kind, name in ((bool, "true/false"), (str, "a string"), (dict, "an object"),
                     (list, "a list"), ((int, float), "a number")):
    if isinstance(value, kind):
      return name
  return "null"


def _short(value, limit=40):
  text = repr(value)
  return text if len(text) <= limit else text[:limit] + "..."


def _read_file(path, level, require_answers=True):
  """The questions of one RACE file; ValueError (one line, naming the file) if it is not one.

  Without `require_answers`, a file with no "answers" key is read unlabelled (label -1)."""
  def bad(why):
    return ValueError(f"{path}: not a RACE file ({why})")
  try:
    data = fileio.read_bytes(path)
  except OSError as e:
    raise ValueError(f"{path}: cannot read ({e.strerror or e})") from None
  try:
    doc = json.loads(data.decode("utf-8-sig"))
  except UnicodeDecodeError as e:
    raise bad(f"not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start}") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}:{e.lineno}: not a RACE file (not JSON: {e.msg} at column "
                     f"{e.colno})") from None
  except RecursionError:
    raise bad("JSON nested too deeply") from None
  except ValueError as e:    # e.g. a number too long to convert
    raise bad(f"not JSON: {_short(str(e), 80)}") from None
  if not isinstance(doc, dict):
    raise bad(f"the top level is {_json_type(doc)}, not an object")
  labelled = require_answers or "answers" in doc
  keys = ("article", "questions", "options") + (("answers",) if labelled else ())
  missing = [k for k in keys if k not in doc]
  if missing:
    raise bad(f"no {', '.join(map(repr, missing))}")
  if not isinstance(doc["article"], str):
    raise bad(f"'article' is {_json_type(doc['article'])}, not a string")
  for key in keys[1:]:
    if not isinstance(doc[key], list):
      raise bad(f"{key!r} is {_json_type(doc[key])}, not a list")
  questions, options = doc["questions"], doc["options"]
  answers = doc["answers"] if labelled else [None] * len(questions)
  if not len(questions) == len(options) == len(answers):
    raise bad(f"{len(questions)} questions, {len(options)} option lists and {len(answers)} "
              "answers")
  out = []
  for k, (question, opts, answer) in enumerate(zip(questions, options, answers)):
    if not isinstance(question, str):
      raise bad(f"question {k} is {_json_type(question)}, not a string")
    if not (isinstance(opts, list) and len(opts) == N_CHOICE
            and all(isinstance(o, str) for o in opts)):
      raise bad(f"question {k}: options must be a list of {N_CHOICE} strings, not "
                f"{_short(opts)}")
    if labelled and not (isinstance(answer, str) and len(answer) == 1 and answer in "ABCD"):
      raise bad(f"question {k}: answer {_short(answer)} is not one of A, B, C, D")
    label = "ABCD".index(answer) if labelled else UNLABELLED
    out.append((level, doc["article"], question, list(opts), label))
  return out


def read_files(data_dir, split, levels=LEVELS, report=print, require_answers=True):
  """[(file name under the split, e.g. "high/1.txt", [items])] from RACE/{split}/{level}/*.txt:
  levels in order, files by name. An item: (level, article, question, [4 options], label
  index; UNLABELLED when the file has no answers).

  A file that is not a RACE document (not UTF-8 JSON, keys missing or of the wrong type,
  not 4 options, an answer outside A-D) is an error naming it: official files are regular.
  Without `require_answers` (evaluation and prediction), files may have no "answers" key: the
  split is then unlabelled, but only as a whole (some files with answers and some without is an
  error naming the first without). Nothing is skipped (long items are cut by `encode`, as the
  release); `report` gets one summary line (questions per level, files without questions).
  """
  root = fileio.join(data_dir, split)
  groups = [(level, level + "/", fileio.glob(fileio.join(root, level, "*.txt")))
            for level in levels]
  if not any(files for _, _, files in groups):
    raise FileNotFoundError(f"{root}: no {'/'.join(levels)}/*.txt files")
  return _read_groups(root, groups, report, require_answers)


def read_path(path, report=print):
  """read_files' [(name, [items])] of --predict_file: one RACE file (named by its base name),
  a directory in the split layout ({middle,high}/*.txt, named "high/1.txt"), or a directory of
  *.txt files (named by base name). Answers are optional (the whole input has them or none);
  a file's level is its directory's name when that is "middle" or "high", else "" (such
  questions count in the overall accuracy only)."""
  path = str(path).rstrip("/") or "/"
  level_of = lambda directory: fileio.basename(directory) if fileio.basename(
      directory) in LEVELS else ""
  if not fileio.isdir(path):
    if not fileio.exists(path):
      raise FileNotFoundError(f"{path}: --predict_file not found")
    groups = [(level_of(fileio.dirname(path)), "", [path])]
  else:
    groups = [(level, level + "/", fileio.glob(fileio.join(path, level, "*.txt")))
              for level in LEVELS]
    if not any(files for _, _, files in groups):
      groups = [(level_of(path), "", fileio.glob(fileio.join(path, "*.txt")))]
    if not any(files for _, _, files in groups):
      raise FileNotFoundError(f"{path}: no *.txt or {'/'.join(LEVELS)}/*.txt files")
  return _read_groups(path, groups, report, require_answers=False)


def _read_groups(root, groups, report, require_answers):
  """[(name, [items])] of [(level, name prefix, [paths])]: the checks and the summary line of
  read_files."""
  out, counts, n_files, empty, n_items = [], [], 0, 0, 0
  for level, prefix, files in groups:
    before = n_items
    for path in files:
      items = _read_file(path, level, require_answers)
      empty += not items
      n_items += len(items)
      out.append((prefix + fileio.basename(path), path, items))
    n_files += len(files)
    if level:
      counts.append(f"{level} {n_items - before:,}")
  if not n_items:
    raise ValueError(f"{root}: no questions in {n_files:,} file{'s' * (n_files > 1)}")
  kinds = {items[0][4] == UNLABELLED for _, _, items in out if items}
  if kinds == {True, False}:
    first = next(path for _, path, items in out if items and items[0][4] == UNLABELLED)
    raise ValueError(f"{first}: no 'answers', while other files of {root} have them: a split "
                     "is scored whole (answers in every file or in none)")
  report(f"{root}: used {n_items:,} questions from {n_files:,} file{'s' * (n_files > 1)}"
         + (f" ({', '.join(counts)})" if counts else "")
         + (f"; {empty:,} without questions" if empty else "")
         + ("; no answers (unlabelled)" if kinds == {True} else ""))
  return [(name, items) for name, _, items in out]


def read_split(data_dir, split, levels=LEVELS, report=print, require_answers=True):
  """read_files' items, all files in order: [(level, article, question, [4 options], label)]."""
  return [it for _, items in read_files(data_dir, split, levels, report, require_answers)
          for it in items]


def encode(tokenizer, items, max_seq_length, max_qa_length=128, model_type="xlnet"):
  """-> input_ids / seg_ids / input_mask [N, 4, L], label [N], level [N] (0 middle, 1 high,
  -1 neither: a --predict_file outside the split layout)."""
  n = len(items)
  ids = np.zeros([n, N_CHOICE, max_seq_length], np.int32)
  seg = np.zeros([n, N_CHOICE, max_seq_length], np.int32)
  mask = np.ones([n, N_CHOICE, max_seq_length], np.float32)
  budget = max_seq_length - layouts.special_count(model_type, pair=True)
  if budget < 1 or max_qa_length < 1:
    raise ValueError(f"--max_seq_length={max_seq_length} / --max_qa_length={max_qa_length} "
                     "leave no room for the question and option")
  qa_keep = min(max_qa_length, budget)   # question+option keeps its last tokens
  contexts = tokenizer.encode_lines([it[1] for it in items])
  qa_texts = []
  for _, _, question, options, _ in items:
    for option in options:
      qa_texts.append(question.replace("_", option) if "_" in question
                      else f"{question} {option}")
  qas = tokenizer.encode_lines(qa_texts)
  for i in range(n):
    for c in range(N_CHOICE):
      qa = list(qas[i * N_CHOICE + c])
      qa = qa[max(len(qa) - qa_keep, 0):]
      context = list(contexts[i])[:max(budget - len(qa), 0)]
      ids[i, c], seg[i, c], mask[i, c], _, _ = layouts.pack(model_type, tokenizer, context, qa,
                                                            max_seq_length)
  return {"input_ids": ids, "seg_ids": seg, "input_mask": mask,
          "label": np.array([it[4] for it in items], np.int32),
          "level": np.array([LEVELS.index(it[0]) if it[0] in LEVELS else -1 for it in items],
                            np.int32)}


class RaceTask(classifier_task.ClassifierTask):
  """Multiple choice over 4 options; accuracy on middle, high and all."""

  recipe_script = "race"
  feature_cache = False     # features in memory: --cache_dir is not used

  def __init__(self, config, model_config, run_config, init_checkpoint=None, max_qa_length=128,
               predict_file=None):
    self.max_qa_length = max_qa_length
    self.predict_file = predict_file     # read when `split` is PREDICT_FILE
    self._cache = {}
    spec = classifier_data.TaskSpec("race", ("A", "B", "C", "D"), {}, {})
    super().__init__(config, model_config, run_config, init_checkpoint, spec=spec)
    self.main_metric = "accuracy"
    self.tokens_per_step = config.train_batch_size * N_CHOICE * config.max_seq_length

  def _files(self, split):
    """read_files of a split (read_path of --predict_file for PREDICT_FILE), once; answers
    are required for training only."""
    key = ("files", split)
    if key not in self._cache:
      self._cache[key] = (read_path(self.predict_file) if split == PREDICT_FILE else
                          read_files(self.config.data_dir, split,
                                     require_answers=split == "train"))
    return self._cache[key]

  def source(self, split):
    """What `split` reads, for messages: DATA_DIR/split or --predict_file."""
    return (str(self.predict_file) if split == PREDICT_FILE
            else fileio.join(self.config.data_dir, split))

  def _features(self, split):
    if split not in self._cache:
      items = [it for _, file_items in self._files(split) for it in file_items]
      self._cache[split] = encode(self.tokenizer, items, self.config.max_seq_length,
                                  self.max_qa_length, self.config.model_type)
    return self._cache[split]

  def _dataset(self, split, batch_size, train, input_context=None):
    feats = self._features(split)
    ds = tf.data.Dataset.from_tensor_slices({k: v for k, v in feats.items() if k != "level"})
    if not train:
      return ds.batch(batch_size)
    if not self._warned_small:
      self._warned_small = True
      classifier_task.warn_small_train_set(len(feats["label"]), self.config.train_batch_size,
                                           "questions")
    ds = task_lib.host_examples(ds, input_context).shuffle(10_000, seed=self.config.seed)
    return task_lib.static_batches(ds.repeat().batch(batch_size, drop_remainder=True),
                                   batch_size)

  def build_model(self):
    return families.get(self.config.model_type).race_model(
        self.model_config, self.run_config, self.config.summary_type, self.config.use_proj)

  def export(self, model, export_dir, log=print, padding=None, xla=False, version=None):
    """The SavedModel on raw text (export_race)."""
    return export_race(self, model, export_dir, log, padding=padding, xla=xla)

  def prepare_training_data(self):
    """The train split's features and the evaluation split's files, read and checked before
    the run writes anything (kept in memory for training)."""
    self._features("train")
    self._files(self.config.eval_split)

  def eval_without_labels(self, split=None):
    """Why `split` (default --eval_split) cannot be scored (its files have no "answers"), or
    None."""
    split = split or self.config.eval_split
    files = self._files(split)
    if any(items[0][4] != UNLABELLED for _, items in files if items):
      return None
    n = sum(len(items) for _, items in files)
    return (f"{self.source(split)} has no answers ({n:,} questions in "
            f"{len(files):,} file{'s' * (len(files) > 1)} without 'answers'): nothing to score")

  def evaluate(self, model, split=None):
    """Accuracy on middle, high and all; {} for a split without answers."""
    split = split or self.config.eval_split
    if self.eval_without_labels(split):
      return {}
    preds, labels = self.predict(model, split)
    return self._accuracy(split, preds, labels)

  def _accuracy(self, split, preds, labels):
    level = self._features(split)["level"]
    out = {"accuracy": metrics.accuracy(labels, preds)}
    for k, name in enumerate(LEVELS):
      if (level == k).any():
        out[f"accuracy_{name}"] = metrics.accuracy(labels[level == k], preds[level == k])
    return out

  def predict_logits(self, model, split):
    """(logits [N, 4] float32, labels [N]) over a split's questions, in read order (labels
    UNLABELLED for a split without answers)."""
    ds = self._dataset(split, self.config.eval_batch_size, train=False)
    forward = task_lib.inference_fn(model)
    logits, labels = [], []
    for batch in ds:
      logits.append(np.asarray(forward(layouts.model_inputs(batch)), np.float32)
                    .reshape(-1, N_CHOICE))
      labels.append(batch["label"].numpy())
    return np.concatenate(logits), np.concatenate(labels)

  def predict(self, model, split):
    """(predicted option index [N], labels [N]): the argmax of predict_logits."""
    logits, labels = self.predict_logits(model, split)
    return logits.argmax(-1), labels

  def predictions_name(self, split):
    """The predictions files' stem: race_SPLIT_predictions, or for --predict_file
    race_NAME_predictions (NAME: its base name without .txt / .json)."""
    if split == PREDICT_FILE:
      split = fileio.basename(str(self.predict_file).rstrip("/"))
      for ext in (".txt", ".json"):
        split = split[:-len(ext)] if split.endswith(ext) else split
    return f"race_{split}_predictions"

  def write_predictions(self, model, split, output_dir):
    """predict_files' paths: [the .json path, the .jsonl path]."""
    return self.predict_files(model, split, output_dir)[1]

  def predict_files(self, model, split, output_dir):
    """Writes a split's predictions (PREDICT_FILE: --predict_file's) into `output_dir`;
    returns (accuracies as `evaluate`'s, {} without answers; [the .json path, the .jsonl
    path]).

    race_SPLIT_predictions.json: {file under the split ("high/1.txt"): its answers, "A".."D"
    in question order} (the layout of the RACE files' own "answers"). race_SPLIT_
    predictions.jsonl: one line per question, in read order (levels, files by name, questions
    in file order): {"id": "high/1.txt#0" (file, question index), "article", "question",
    "options" (4 texts), "prediction" (letter), "probabilities" ({"A".."D": softmax of the 4
    option logits}), "gold" (letter, when the split has answers)}. The article is written in
    full on each of its questions, so every line stands alone."""
    logits, labels = self.predict_logits(model, split)
    probs = serving_tasks.softmax(logits.astype(np.float64))
    letters = ["ABCD"[int(p)] for p in probs.argmax(-1)]
    out, rows, k = {}, [], 0
    for name, items in self._files(split):
      out[name] = letters[k:k + len(items)]
      for q, (_, article, question, options, label) in enumerate(items):
        row = {"id": f"{name}#{q}", "article": article, "question": question,
               "options": list(options), "prediction": letters[k + q],
               "probabilities": predictions.probabilities("ABCD", probs[k + q])}
        if label != UNLABELLED:
          row["gold"] = "ABCD"[label]
        rows.append(row)
      k += len(items)
    stem = fileio.join(output_dir, self.predictions_name(split))
    fileio.write_atomic(stem + ".json", json.dumps(out, indent=1, sort_keys=True) + "\n")
    paths = [stem + ".json", predictions.write_jsonl(stem + ".jsonl", rows)]
    labelled = len(labels) and labels[0] != UNLABELLED     # a split has answers whole or none
    return (self._accuracy(split, probs.argmax(-1), labels) if labelled else {}), paths


# ---- --export_dir: the serving module and the Python path it is checked against ----------
def race_outputs(task, model, articles, questions, options):
  """The Python path's RACE outputs (options: 4 strings per question)."""
  c = task.config
  articles, questions, options = map(utf8.python_texts, (articles, questions, options))
  items = [("middle", a, q, list(o), 0) for a, q, o in zip(articles, questions, options)]
  feats = encode(task.tokenizer, items, c.max_seq_length, task.max_qa_length, c.model_type)
  logits = serving_tasks.forward(model, {k: feats[k]
                                         for k in ("input_ids", "seg_ids", "input_mask")})
  return {"logits": logits, "probabilities": serving_tasks.softmax(logits),
          "answer": np.array([export.RACE_ANSWERS[i] for i in logits.argmax(-1)], object)}


def export_race(task, model, export_dir, log=print, padding=None, xla=False):
  c = task.config
  articles = [serving_tasks.LONG_PROBE, export.PROBE_TEXTS[0]]
  questions = ["Who sold the _ to the Élysée?", "What is true? 1,000"]
  options = [["pastries", "$1 \\1 cakes", "東京", ""], ["a_b", "   ", "½", "Tokyo!"]]
  probes = {"article": np.array(articles, object), "question": np.array(questions, object),
            "options": np.array(options, object)}
  module = export.race_module(model, task.tokenizer, c.model_type, c.max_seq_length,
                              task.max_qa_length, padding=padding, xla=xla)
  return export.save(module, export_dir, probes,
                     race_outputs(task, model, articles, questions, options), log=log)
