"""SQuAD 1.1 / 2.0 as a task of the shared trainer, and the answer extraction.

Training loss (the release's): 0.5 (start CE + end CE), end conditioned on the
true start, + 0.5 BCE of the answerability logit. Prediction: start/end beam of
every window, spans mapped back to the original characters, the best non-null
answer per question (predictions.json), the n-best list with probabilities and
each text's character span in the context (nbest_predictions.json) and the
smallest answerability logit over the windows (null_odds.json), scored with the
official metrics when the file has answers. Beside the release's files: for SQuAD 2.0
the file one submits (predictions_submission.json: "" where the null odds exceed the
threshold chosen on a dev file with answers, recorded in null_threshold.json), and
predictions.jsonl, one readable line per question.
"""

import collections
import dataclasses
import json
import math

import numpy as np
import tensorflow as tf

from data_utils import fileio, layouts
from finetuning import classifier_task, predictions, squad_features, squad_metrics
from modeling import families
from modeling import flags as model_flags
from serving import export
from serving import tasks as serving_tasks
from serving import utf8
from training import flags as training_flags
from training import task as task_lib
from training.task import OptimizerConfig, Task


@dataclasses.dataclass(kw_only=True)
class SquadConfig(OptimizerConfig):
  model_dir: str = None
  train_file: str = None
  predict_file: str = None
  max_seq_length: int = 512
  doc_stride: int = 128
  max_query_length: int = 64
  max_answer_length: int = 64
  start_n_top: int = 5
  end_n_top: int = 5
  n_best_size: int = 5
  train_batch_size: int = 48
  predict_batch_size: int = 32
  train_steps: int = 8000
  model_type: str = "xlnet"     # or "mpnet" (see squad_features.make_features)
  null_odds_threshold: float = None   # SQuAD 2.0 submission: "" where null odds exceed it
  version: str = None           # "1.1" (no submission file), "2.0", or None: from the data


class SquadTask(Task):
  """See training/trainer.py for the interface."""

  main_metric = "f1"
  recipe_script = "squad"

  @property
  def family(self):
    return self.config.model_type

  def __init__(self, flags_config, model_config, run_config, tokenizer=None,
               init_checkpoint=None):
    self.c, self.model_config, self.run_config = flags_config, model_config, run_config
    self.config = flags_config
    self.tokenizer, self.init_checkpoint = tokenizer, init_checkpoint
    self.seed = flags_config.seed
    self.tokens_per_step = flags_config.train_batch_size * flags_config.max_seq_length
    self._train = None
    self._warned_small = False     # warn_small_train_set: once

  def _features(self, path, is_training):
    """Examples and windows of one file; prints one line saying what was used."""
    examples, skipped = squad_features.read_squad(path, is_training)
    # SQuAD 2.0 data (unanswerable questions) seen: the export then answers no_answer_probability
    self.saw_impossible = getattr(self, "saw_impossible", False) or any(
        ex.is_impossible for ex in examples)
    arrays, infos = squad_features.make_features(
        self.tokenizer, examples, self.c.max_seq_length, self.c.doc_stride,
        self.c.max_query_length, is_training, self.c.model_type)
    line = (f"{path}: used {len(examples):,} of {len(examples) + skipped:,} questions "
            f"({len(infos):,} windows)")
    if skipped:
      line += f"; skipped {skipped:,} whose answer text is not at its answer_start"
    print(line, flush=True)
    return examples, arrays, infos, skipped

  def train_arrays(self):
    if self._train is None:
      self._train = self._features(self.c.train_file, True)[1]
    return self._train

  def dataset(self, input_context, skip_batches=0):
    batch = self.c.train_batch_size
    if input_context:
      batch = input_context.get_per_replica_batch_size(batch)
    ds = tf.data.Dataset.from_tensor_slices(self.train_arrays())
    if not self._warned_small:
      self._warned_small = True
      classifier_task.warn_small_train_set(len(self.train_arrays()["input_ids"]),
                                           self.c.train_batch_size, "windows")
    ds = task_lib.host_examples(ds, input_context)
    ds = ds.shuffle(len(self.train_arrays()["input_ids"]), seed=self.seed).repeat()
    ds = task_lib.static_batches(ds.batch(batch, drop_remainder=True), batch)
    return ds.skip(skip_batches) if skip_batches else ds

  def build_model(self):
    return families.get(self.c.model_type).squad_model(
        self.model_config, self.run_config, self.c.start_n_top, self.c.end_n_top)

  def loss(self, model, batch, state, step, training=True):
    out = model(batch, training=training)
    seq_len = tf.shape(out["start_log_probs"])[1]
    nll = lambda lp, pos: -tf.reduce_mean(tf.reduce_sum(
        tf.cast(lp, tf.float32) * tf.one_hot(pos, seq_len), axis=-1))
    loss = 0.5 * (nll(out["start_log_probs"], batch["start_positions"]) +
                  nll(out["end_log_probs"], batch["end_positions"]))
    cls = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
        labels=batch["is_impossible"], logits=tf.cast(out["cls_logits"], tf.float32)))
    loss = loss + 0.5 * cls
    return loss / self.replicas(), {"cls_loss": cls}, state

  def initialize(self, model, log):
    if self.init_checkpoint:
      families.get(self.c.model_type).initialize(model, self.init_checkpoint, log)

  # ---- prediction ---------------------------------------------------------------------
  def predict(self, model, path, output_dir):
    """Writes the prediction files (predict_files); returns the official metrics (or {})."""
    return self.predict_files(model, path, output_dir)[0]

  def write_predictions(self, model, path, output_dir):
    """Writes the prediction files (predict_files); returns the list of paths written."""
    return self.predict_files(model, path, output_dir)[1]

  def predict_files(self, model, path, output_dir, log=print):
    """Predicts the SQuAD file `path` into `output_dir`; returns (metrics, paths written).

    Files: the release's predictions.json, nbest_predictions.json and null_odds.json; for
    SQuAD 2.0 the file one submits, predictions_submission.json (predictions.json with ""
    where null_odds > the threshold; submission_threshold says which, in one line to `log`)
    and, on a file with answers, null_threshold.json (the
    threshold chosen on it); and predictions.jsonl, one readable line per question. metrics:
    the official metrics when the file has answers, else {}."""
    examples, arrays, infos, _ = self._features(path, False)
    ds = tf.data.Dataset.from_tensor_slices(dict(arrays)).batch(self.c.predict_batch_size)
    forward = task_lib.inference_fn(model)
    outs = collections.defaultdict(list)
    for batch in ds:
      for k, v in forward(layouts.model_inputs(batch)).items():
        outs[k].append(v.numpy())
    outs = {k: np.concatenate(v) for k, v in outs.items()}
    preds, nbest, null_odds = extract_answers(examples, infos, outs, self.c.start_n_top,
                                              self.c.end_n_top, self.c.max_answer_length,
                                              self.c.n_best_size)
    paths = []
    for name, obj in (("predictions.json", preds), ("nbest_predictions.json", nbest),
                      ("null_odds.json", null_odds)):
      paths.append(write_json(fileio.join(output_dir, name), obj))
    labelled = any(ex.all_answers or ex.is_impossible for ex in examples)
    v2 = any(ex.is_impossible for ex in examples)
    v1 = self.c.version == "1.1" or (labelled and not v2 and self.c.version != "2.0")
    metrics, data = {}, None
    if labelled:
      data = squad_metrics.load_json(path, "SQuAD file")["data"]
      metrics = (squad_metrics.evaluate_v2(data, preds, null_odds) if v2
                 else squad_metrics.evaluate_v1(data, preds))
    threshold, written = submission_threshold(path, data, preds, null_odds, output_dir,
                                              self.c.null_odds_threshold, v1, log)
    paths += written
    submitted = preds
    if threshold is not None:
      submitted = squad_metrics.apply_null_threshold(preds, null_odds, threshold)
      paths.append(write_json(fileio.join(output_dir, SUBMISSION), submitted))
    paths.append(write_readable(fileio.join(output_dir, READABLE), examples, submitted, nbest,
                                null_odds, labelled))
    return metrics, paths

  def evaluate(self, model):
    return self.predict_files(model, self.c.predict_file, fileio.join(self.c.model_dir, "eval"),
                              log=lambda _: None)[0]

  def export(self, model, export_dir, log=print, padding=None, xla=False, version=None):
    """The SavedModel on raw text (export_squad); with no_answer_probability when `version`
    (--version) is 2.0, or, unset, when the data read held unanswerable questions (squad_v2)."""
    return export_squad(self, model, export_dir, squad_v2(self, version), log, padding=padding,
                        xla=xla)

  def prepare_training_data(self):
    """The training windows (kept for training) and --predict_file's layout, read and checked
    before the run writes anything."""
    self.train_arrays()
    if self.evaluate and self.c.predict_file:
      squad_features.read_squad(self.c.predict_file, False)

  def eval_without_labels(self):
    """Why the trainer's evaluation cannot score --predict_file (no question has answers or
    is_impossible: the SQuAD test layout), or None. predict() still writes its files."""
    examples, _ = squad_features.read_squad(self.c.predict_file, False)
    if any(ex.all_answers or ex.is_impossible for ex in examples):
      return None
    return (f"{self.c.predict_file} has no answers ({len(examples):,} questions without "
            "'answers' or 'is_impossible', as in SQuAD's test layout): nothing to score")


# ---- run_squad.py's flags -> the task ----------------------------------------------------
def check_flags(f):
  """run_squad.py's flag combinations that cannot work: ValueError, one line naming the
  flags, before any work."""
  squad_features.check_window_flags(f.max_seq_length, f.doc_stride, f.max_query_length,
                                    f.model_type)
  for name in ("max_answer_length", "start_n_top", "end_n_top", "n_best_size",
               "train_batch_size", "predict_batch_size"):
    if getattr(f, name) < 1:
      raise ValueError(f"--{name}={getattr(f, name)}: must be at least 1")
  for name in ("start_n_top", "end_n_top"):
    if getattr(f, name) > f.max_seq_length:
      raise ValueError(f"--{name}={getattr(f, name)}: the beam cannot be wider than "
                       f"--max_seq_length={f.max_seq_length}")
  if f.null_odds_threshold is not None:
    if not math.isfinite(f.null_odds_threshold):
      raise ValueError(f"--null_odds_threshold={f.null_odds_threshold}: must be a finite number")
    if f.version == "1.1":
      raise ValueError("--null_odds_threshold with --version=1.1: SQuAD 1.1 has no "
                       "unanswerable questions (its predictions.json is the submission)")


def task_from_flags(f, model_dir):
  """run_squad.py's SquadTask: its config, the model's configs and the tokenizer (checked
  against the model's vocabulary), from the flags `f`."""
  config = SquadConfig(
      model_dir=model_dir, train_file=f.train_file, predict_file=f.predict_file,
      max_seq_length=f.max_seq_length, doc_stride=f.doc_stride,
      max_query_length=f.max_query_length, max_answer_length=f.max_answer_length,
      start_n_top=f.start_n_top, end_n_top=f.end_n_top, n_best_size=f.n_best_size,
      train_batch_size=f.train_batch_size, predict_batch_size=f.predict_batch_size,
      model_type=f.model_type, null_odds_threshold=f.null_odds_threshold, version=f.version,
      seed=f.seed, **training_flags.optimizer_kwargs(f))
  model_config = model_flags.model_config_from_flags(f)
  tokenizer = layouts.make_tokenizer(f.model_type, f.sp_model, f.vocab_file, f.uncased)
  layouts.check_vocab(model_config, tokenizer, f.max_seq_length)
  return SquadTask(config, model_config, model_flags.run_config_from_flags(f), tokenizer,
                   f.init_checkpoint)


def stripped_span(context, begin, end):
  """(text, start, end): context[begin:end].strip() and its character span in context.

  The span is [start, end) in code points (end exclusive); an empty text has -1, -1.
  """
  raw = context[begin:end]
  text = raw.strip()
  if not text:
    return "", -1, -1
  start = begin + len(raw) - len(raw.lstrip())
  return text, start, start + len(text)


def extract_answers(examples, infos, outs, start_n_top, end_n_top, max_answer_length,
                    n_best_size):
  """Beam outputs of every window -> (predictions, nbest, null_odds).

  A candidate's text is context[starts[s]:ends[e]].strip(); per text the best score is kept
  (the first candidate reaching it gives the text's "start"/"end", character offsets of the
  stripped text in the context, -1/-1 for an empty text); texts are ranked by score, ties in
  the order the texts first appeared (window, start beam, end beam). serving/squad_graph.py
  picks the same best answer in-graph.
  """
  by_example = collections.defaultdict(list)
  for f, info in enumerate(infos):
    by_example[info["example_index"]].append(f)
  preds, nbest, null_odds = {}, {}, {}
  for ex_index, ex in enumerate(examples):
    candidates, score_null = {}, float("inf")
    for f in by_example[ex_index]:
      info = infos[f]
      score_null = min(score_null, float(outs["cls_logits"][f]))
      offset = info.get("doc_offset", 0)
      for i in range(start_n_top):
        s = int(outs["start_top_index"][f, i]) - offset
        for j in range(end_n_top):
          e = int(outs["end_top_index"][f, i * end_n_top + j]) - offset
          if (s < 0 or s >= info["length"] or e >= info["length"] or e < s
              or e - s + 1 > max_answer_length):
            continue
          score = float(outs["start_top_log_probs"][f, i]
                        + outs["end_top_log_probs"][f, i * end_n_top + j])
          text, start, end = stripped_span(ex.context, info["starts"][s], info["ends"][e])
          if text not in candidates or candidates[text][0] < score:
            candidates[text] = (score, start, end)
    best = sorted(candidates.items(), key=lambda kv: -kv[1][0])[:n_best_size]
    if best:
      scores = np.array([s for _, (s, _, _) in best])
      probs = np.exp(scores - scores.max())
      probs /= probs.sum()
      nbest[ex.qas_id] = [{"text": t, "probability": float(p), "log_score": s,
                           "start": start, "end": end}
                          for (t, (s, start, end)), p in zip(best, probs)]
      preds[ex.qas_id] = best[0][0]
    else:
      nbest[ex.qas_id] = [{"text": "", "probability": 1.0, "log_score": 0.0, "start": -1,
                           "end": -1}]
      preds[ex.qas_id] = ""
    null_odds[ex.qas_id] = score_null
  return preds, nbest, null_odds


# ---- the prediction files beside the release's -----------------------------------------
SUBMISSION = "predictions_submission.json"    # SQuAD 2.0: the null threshold applied
THRESHOLD_FILE = "null_threshold.json"        # the threshold chosen on a file with answers
READABLE = "predictions.jsonl"                # one readable line per question


def write_json(path, obj):
  """`obj` as indented UTF-8 JSON at `path`, atomically; returns `path`."""
  fileio.write_atomic(path, json.dumps(obj, indent=1, ensure_ascii=False).encode("utf-8"))
  return path


def recorded_threshold(output_dir):
  """(threshold, record) of OUTPUT_DIR/null_threshold.json, or (None, None) without one; a
  one-line ValueError naming the file when it holds no number "threshold"."""
  path = fileio.join(output_dir, THRESHOLD_FILE)
  if not fileio.exists(path):
    return None, None
  record = squad_metrics.load_json(path, "null threshold file")
  value = record.get("threshold") if isinstance(record, dict) else None
  if (not isinstance(value, (int, float)) or isinstance(value, bool)
      or not math.isfinite(value)):
    raise ValueError(f"{path}: not a null threshold record (no finite number 'threshold')")
  return float(value), record


def submission_threshold(path, data, preds, null_odds, output_dir, given=None, v1=False,
                         log=print):
  """The no-answer threshold predictions_submission.json applies, or None; returns
  (threshold, [paths written]) and says in one line to `log` which threshold it is.

  `data`: the "data" list of `path` when it has answers, else None. `v1`: SQuAD 1.1 (no
  threshold: predictions.json is its submission). A SQuAD 2.0 file with answers: its threshold (squad_metrics.
  choose_null_threshold) is recorded in OUTPUT_DIR/null_threshold.json with the file's
  path, best_f1 / best_exact and their thresholds. Applied: `given` (--null_odds_threshold)
  when set, else, on a file with answers, the one chosen on it, else the one recorded in
  OUTPUT_DIR; with none, no submission is written (an earlier one, for other predictions,
  is removed) rather than a guess."""
  stale = fileio.join(output_dir, SUBMISSION)
  labelled = data is not None
  if v1:
    if fileio.exists(stale):
      fileio.remove(stale)
    return None, []
  shown = f"{SUBMISSION}: \"\" where the null odds exceed"
  if labelled:
    choice = squad_metrics.choose_null_threshold(data, preds, null_odds)
    chosen = choice.pop("threshold")
    record = {"threshold": chosen, "chosen_on": str(path), "questions": len(preds), **choice}
    written = [write_json(fileio.join(output_dir, THRESHOLD_FILE), record)]
    if given is not None:
      log(f"{shown} {given!r} (--null_odds_threshold); the threshold chosen on {path}, "
          f"{chosen!r}, is recorded in {written[0]}")
      return given, written
    log(f"{shown} {chosen!r}, the threshold chosen on {path} (best_f1 "
        f"{record['best_f1']:.2f}; best_exact {record['best_exact']:.2f} at "
        f"{record['best_exact_thresh']!r}), recorded in {written[0]}")
    return chosen, written
  if given is not None:
    log(f"{shown} {given!r} (--null_odds_threshold)")
    return given, []
  threshold, record = recorded_threshold(output_dir)
  if threshold is not None:
    log(f"{shown} {threshold!r}, the threshold chosen on {record.get('chosen_on')} (from "
        f"{fileio.join(output_dir, THRESHOLD_FILE)})")
    return threshold, []
  removed = fileio.exists(stale)
  if removed:
    fileio.remove(stale)
  log(f"no {SUBMISSION}: {path} has no answers to choose a no-answer threshold on, and "
      f"neither --null_odds_threshold nor {fileio.join(output_dir, THRESHOLD_FILE)} gives "
      "one (predict a SQuAD 2.0 dev file into this directory first, or pass "
      "--null_odds_threshold); predictions.json holds the best non-null answers"
      + (f" (the earlier {SUBMISSION} was removed)" if removed else ""))
  return None, []


def write_readable(path, examples, submitted, nbest, null_odds, labelled):
  """predictions.jsonl: per question, in the file's order, {"id", "question", "context",
  "prediction" (the submitted answer: "" where the null threshold says no answer),
  "probabilities" ({n-best text: probability}, summing to 1), "null_odds", and "gold" (the
  answer texts, [] for an unanswerable question) when the file has answers}."""
  def rows():
    for ex in examples:
      row = {"id": ex.qas_id, "question": ex.question, "context": ex.context,
             "prediction": submitted[ex.qas_id],
             "probabilities": {c["text"]: c["probability"] for c in nbest[ex.qas_id]},
             "null_odds": null_odds[ex.qas_id]}
      if labelled:
        row["gold"] = list(ex.all_answers or [])
      yield row
  return predictions.write_jsonl(path, rows())


# ---- --export_dir: the serving module and the Python path it is checked against ----------
def squad_python_path(task, model, questions, contexts):
  """run_squad's prediction on (question, context) pairs -> dict answer, start, end, score,
  no_answer_probability (numpy), from predictions / nbest / null odds as the files hold them."""
  c = task.c
  questions, contexts = utf8.python_texts(questions), utf8.python_texts(contexts)
  examples = [squad_features.SquadExample(f"q{k}", q, ctx)
              for k, (q, ctx) in enumerate(zip(questions, contexts))]
  arrays, infos = squad_features.make_features(task.tokenizer, examples, c.max_seq_length,
                                               c.doc_stride, c.max_query_length, False,
                                               c.model_type)
  outs = serving_tasks.forward(model, arrays)
  preds, nbest, null_odds = extract_answers(examples, infos, outs, c.start_n_top,
                                                  c.end_n_top, c.max_answer_length, 1)
  top = [nbest[ex.qas_id][0] for ex in examples]
  return {"answer": np.array([preds[ex.qas_id] for ex in examples], object),
          "start": np.array([t.get("start", -1) for t in top], np.int64),
          "end": np.array([t.get("end", -1) for t in top], np.int64),
          "score": np.array([t["log_score"] for t in top], np.float64),
          "no_answer_probability": 1 / (1 + np.exp(-np.array(
              [null_odds[ex.qas_id] for ex in examples], np.float64)))}


def export_squad(task, model, export_dir, v2=True, log=print, padding=None, xla=False):
  contexts = [serving_tasks.LONG_PROBE, export.PROBE_TEXTS[0], export.PROBE_TEXTS[1]]
  questions = ["Who sold 1,000 pastries?", "When was Café Müller founded?", ""]
  expected = squad_python_path(task, model, questions, contexts)
  if not v2:
    del expected["no_answer_probability"]
  probes = {"question": np.array(questions, object), "context": np.array(contexts, object)}
  module = export.squad_module(model, task.tokenizer, task.c.model_type, task.c, v2=v2,
                               padding=padding, xla=xla)
  return export.save(module, export_dir, probes, expected, log=log)


def squad_v2(task, version=None):
  """Whether a SQuAD export also answers no_answer_probability: --version when given, else
  whether the data the task read held unanswerable questions (True when it read none)."""
  return {"1.1": False, "2.0": True}.get(version, getattr(task, "saw_impossible", True))
