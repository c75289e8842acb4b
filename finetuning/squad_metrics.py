"""SQuAD evaluation, identical in its numbers to the official v1.1 and v2.0 scripts.

v1.1: exact match and F1, best over the gold answers; a question with no
prediction counts as 0. v2.0: gold answers that normalise to "" are dropped and
an unanswerable question's gold is [""]; questions without a prediction are left
out; with no-answer probabilities, a prediction is "no answer" when its
probability exceeds the threshold (default 1.0), HasAns/NoAns splits are
reported, and the best thresholds for exact match and F1 are searched.
"""

import collections
import json
import math
import os
import re
import string

from data_utils import fileio

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(s):
  """Lower text and remove punctuation, articles and extra whitespace."""
  s = "".join(ch for ch in s.lower() if ch not in _PUNCT)
  return " ".join(_ARTICLES.sub(" ", s).split())


def _tokens(s):
  return normalize_answer(s).split() if s else []


def exact(gold, pred):
  return int(normalize_answer(gold) == normalize_answer(pred))


def f1_v2(gold, pred):
  gold_toks, pred_toks = _tokens(gold), _tokens(pred)
  if not gold_toks or not pred_toks:
    return float(gold_toks == pred_toks)
  same = sum((collections.Counter(gold_toks) & collections.Counter(pred_toks)).values())
  if same == 0:
    return 0.0
  precision, recall = same / len(pred_toks), same / len(gold_toks)
  return 2 * precision * recall / (precision + recall)


def f1_v1(gold, pred):
  pred_toks, gold_toks = normalize_answer(pred).split(), normalize_answer(gold).split()
  same = sum((collections.Counter(pred_toks) & collections.Counter(gold_toks)).values())
  if same == 0:
    return 0.0
  precision, recall = same / len(pred_toks), same / len(gold_toks)
  return 2 * precision * recall / (precision + recall)


def _questions(dataset):
  for article in dataset:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:
        yield qa


class InputError(ValueError):
  """A one-line complaint about one input: `which` is "data", "predictions" or "null_odds"."""

  def __init__(self, which, message):
    super().__init__(message)
    self.which = which


def _check_inputs(dataset, predictions):
  """The questions; InputError where the official scripts would raise a traceback."""
  try:
    if not isinstance(dataset, list):
      raise TypeError
    qas = list(_questions(dataset))
    for qa in qas:
      if not isinstance(qa["id"], str) or not isinstance(qa["answers"], list):
        raise TypeError
      for a in qa["answers"]:
        if not isinstance(a["text"], str):
          raise TypeError
  except (KeyError, TypeError):
    raise InputError("data", "not the SQuAD layout (data[].paragraphs[].qas[] with a string "
                     "'id' and an 'answers' list of {'text': string})") from None
  if not qas:
    raise InputError("data", "the data file holds no questions")
  if not isinstance(predictions, dict):
    raise InputError("predictions", "predictions must be a JSON object {question id: text}")
  bad = next((qa["id"] for qa in qas
              if not isinstance(predictions.get(qa["id"], ""), str)), None)
  if bad is not None:
    raise InputError("predictions", f"the prediction for {bad!r} is {predictions[bad]!r:.40}, "
                     "not a string")
  return qas


def _check_null_odds(na_probs):
  if not isinstance(na_probs, dict):
    raise InputError("null_odds", "no-answer probabilities must be a JSON object "
                     "{question id: number}")
  bad = next((k for k, v in na_probs.items() if not isinstance(v, (int, float))), None)
  if bad is not None:
    raise InputError("null_odds", f"the no-answer probability of {bad!r} is "
                     f"{na_probs[bad]!r:.40}, not a number")


def evaluate_v1(dataset, predictions):
  """The official v1.1 script: {"exact_match", "f1"} in percent; a question
  without a prediction scores 0."""
  return _score_v1(_check_inputs(dataset, predictions), predictions)


def _score_v1(qas, predictions):
  em = f1 = total = 0
  for qa in qas:
    total += 1
    if qa["id"] not in predictions:
      continue
    golds = [a["text"] for a in qa["answers"]]
    if not golds:
      raise InputError("data", f"question {qa['id']!r} has no gold answer (a v1.1 file needs one; "
                       "score a v2.0 file with --version=2.0)")
    pred = predictions[qa["id"]]
    em += max(exact(g, pred) for g in golds)
    f1 += max(f1_v1(g, pred) for g in golds)
  return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total}


def _best_threshold(preds, scores, na_probs, has_ans):
  """The official find_best_thresh: questions in increasing no-answer probability
  (ties in the probability file's order), the threshold moved one question at a time."""
  best, best_thresh, _ = _threshold_search(preds, scores, na_probs, has_ans)
  return best, best_thresh


def _threshold_search(preds, scores, na_probs, has_ans):
  """find_best_thresh's (best score in percent, its threshold, whether the best answers any
  question): False when no question's answer beat answering none (the threshold is then the
  official script's starting 0.0, which means "none" only for probabilities above 0)."""
  best = cur = sum(1 for k in has_ans if not has_ans[k])
  best_thresh, answered = 0.0, False
  for qid in sorted(na_probs, key=lambda k: na_probs[k]):
    if qid not in scores:
      continue
    if has_ans[qid]:
      cur += scores[qid]
    else:
      cur += -1 if preds[qid] else 0
    if cur > best:
      best, best_thresh, answered = cur, na_probs[qid], True
  return 100.0 * best / len(scores), best_thresh, answered


def choose_null_threshold(dataset, predictions, null_odds):
  """The no-answer threshold to submit with, chosen on a SQuAD 2.0 file with answers.

  `dataset` is the file's "data" list, `predictions` {id: best non-null text} and `null_odds`
  {id: number} (higher: more likely unanswerable). Returns {"threshold", "best_f1",
  "best_f1_thresh", "best_exact", "best_exact_thresh"}: the official script's
  find_best_thresh on F1 and on exact match, and `threshold`, the value apply_null_threshold
  uses so that the submitted file scores best_f1. It is best_f1_thresh, except when answering
  no question scores best: the official search then reports its starting 0.0, which answers
  every question whose odds are at most 0 (null odds are logits, often negative), so the
  threshold is then the largest number below every question's odds. Questions whose odds tie
  with the threshold are all answered (the official `>`), as the official script scores them.
  """
  qas = _check_inputs(dataset, predictions)
  _check_null_odds(null_odds)
  has_ans, exact_raw, f1_raw = _raw_scores(qas, predictions)
  unscored = next((k for k in exact_raw if k not in null_odds), None)
  if unscored is not None:
    raise InputError("null_odds", f"no null odds for question {unscored!r}")
  best_exact, exact_thresh, _ = _threshold_search(predictions, exact_raw, null_odds, has_ans)
  best_f1, f1_thresh, answered = _threshold_search(predictions, f1_raw, null_odds, has_ans)
  threshold = f1_thresh
  if not answered:
    threshold = float(math.nextafter(min(null_odds[k] for k in f1_raw), -math.inf))
  return {"threshold": threshold, "best_f1": best_f1, "best_f1_thresh": f1_thresh,
          "best_exact": best_exact, "best_exact_thresh": exact_thresh}


def apply_null_threshold(predictions, null_odds, threshold):
  """{id: "" where null_odds[id] > threshold, else the prediction}: the file one submits to
  SQuAD 2.0 (the official script's apply_no_ans_threshold, written into the predictions)."""
  return {qid: "" if null_odds[qid] > threshold else text for qid, text in predictions.items()}


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
  """The official v2.0 script's output dict (percentages, HasAns/NoAns, best thresholds).

  As the official script: a question has an answer when its raw `answers` list
  is non-empty (even if every answer normalises to ""); its gold answers are the
  ones that normalise to something, else [""]. Every question needs a prediction
  (the official script fails with a KeyError otherwise; here a one-line
  ValueError), and with `na_probs` every predicted question a probability.
  """
  return _score_v2(_check_inputs(dataset, predictions), predictions, na_probs, na_prob_thresh)


def _raw_scores(qas, predictions):
  """(has_ans, exact, f1) by question id: the official script's get_raw_scores (a question
  without a prediction stops it, as it stops the official script)."""
  has_ans, exact_raw, f1_raw = {}, {}, {}
  for qa in qas:
    has_ans[qa["id"]] = bool(qa["answers"])
  for qa in qas:
    qid = qa["id"]
    golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
    if qid not in predictions:
      continue
    pred = predictions[qid]
    exact_raw[qid] = max(exact(g, pred) for g in golds)
    f1_raw[qid] = max(f1_v2(g, pred) for g in golds)
  missing = [k for k in has_ans if k not in exact_raw]
  if missing:
    raise InputError("predictions", f"no prediction for {len(missing)} of {len(has_ans)} "
                     f"questions (first: {missing[0]!r}); the official v2.0 script stops on "
                     "this too")
  return has_ans, exact_raw, f1_raw


def _score_v2(qas, predictions, na_probs, na_prob_thresh=1.0):
  if na_probs is not None:
    _check_null_odds(na_probs)
  has_ans, exact_raw, f1_raw = _raw_scores(qas, predictions)
  given = na_probs is not None
  na_probs = na_probs if given else {k: 0.0 for k in predictions}
  unscored = next((k for k in exact_raw if k not in na_probs), None)
  if unscored is not None:
    raise InputError("null_odds", f"no no-answer probability for question {unscored!r}")

  def thresholded(scores):
    return {qid: (float(not has_ans[qid]) if na_probs[qid] > na_prob_thresh else s)
            for qid, s in scores.items()}

  def summary(ex, f1, qids):
    n = len(qids)
    return {"exact": 100.0 * sum(ex[k] for k in qids) / n,
            "f1": 100.0 * sum(f1[k] for k in qids) / n, "total": n}

  ex_t, f1_t = thresholded(exact_raw), thresholded(f1_raw)
  out = summary(ex_t, f1_t, list(ex_t))
  for name, qids in (("HasAns", [k for k, v in has_ans.items() if v]),
                     ("NoAns", [k for k, v in has_ans.items() if not v])):
    if qids:
      out.update({f"{name}_{k}": v for k, v in summary(ex_t, f1_t, qids).items()})
  if given:
    out["best_exact"], out["best_exact_thresh"] = _best_threshold(predictions, exact_raw,
                                                                  na_probs, has_ans)
    out["best_f1"], out["best_f1_thresh"] = _best_threshold(predictions, f1_raw, na_probs,
                                                            has_ans)
  return out


def load_json(path, what):
  """A JSON file (local or any tf.io.gfile URL); one-line errors naming it."""
  path = os.fspath(path)
  try:
    return json.loads(fileio.read_bytes(path).decode("utf-8-sig"))
  except FileNotFoundError:
    raise FileNotFoundError(f"{path}: {what} not found") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None
  except UnicodeDecodeError as e:
    raise ValueError(f"{path}: byte {e.start}: not UTF-8") from None
  except RecursionError:
    raise ValueError(f"{path}: JSON nested too deeply") from None


def evaluate_files(data_file, pred_file, na_prob_file=None, version=None):
  """Scores a predictions.json (and optional null_odds.json) against a SQuAD file.

  version: "1.1", "2.0", or None to decide from the data (any is_impossible or
  an unanswerable question -> 2.0). Errors are one line naming the file.
  """
  data = load_json(data_file, "SQuAD data file")
  if not isinstance(data, dict) or "data" not in data:
    raise ValueError(f"{data_file}: not a SQuAD file (no 'data' list)")
  preds = load_json(pred_file, "predictions file")
  na = load_json(na_prob_file, "null odds file") if na_prob_file else None
  files = {"data": data_file, "predictions": pred_file, "null_odds": na_prob_file}
  try:
    qas = _check_inputs(data["data"], preds)
    if version is None:
      version = "2.0" if any(qa.get("is_impossible") or not qa["answers"] for qa in qas) else "1.1"
    return _score_v1(qas, preds) if version == "1.1" else _score_v2(qas, preds, na)
  except InputError as e:
    raise ValueError(f"{files[e.which]}: {e}") from None
