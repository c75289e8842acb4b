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
import re
import string

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


def evaluate_v1(dataset, predictions):
  """The official v1.1 script: {"exact_match", "f1"} in percent."""
  em = f1 = total = 0
  for qa in _questions(dataset):
    total += 1
    if qa["id"] not in predictions:
      continue
    golds = [a["text"] for a in qa["answers"]]
    pred = predictions[qa["id"]]
    em += max(exact(g, pred) for g in golds)
    f1 += max(f1_v1(g, pred) for g in golds)
  return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total}


def _best_threshold(preds, scores, na_probs, has_ans):
  best = cur = sum(1 for k in has_ans if not has_ans[k])
  best_thresh = 0.0
  for qid in sorted(na_probs, key=lambda k: na_probs[k]):
    if qid not in scores:
      continue
    if has_ans[qid]:
      cur += scores[qid]
    else:
      cur += -1 if preds[qid] else 0
    if cur > best:
      best, best_thresh = cur, na_probs[qid]
  return 100.0 * best / len(scores), best_thresh


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
  """The official v2.0 script's output dict (percentages, HasAns/NoAns, best thresholds)."""
  has_ans, exact_raw, f1_raw = {}, {}, {}
  for qa in _questions(dataset):
    qid = qa["id"]
    golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
    has_ans[qid] = bool(golds)
    golds = golds or [""]
    if qid not in predictions:
      continue
    pred = predictions[qid]
    exact_raw[qid] = max(exact(g, pred) for g in golds)
    f1_raw[qid] = max(f1_v2(g, pred) for g in golds)
  given = na_probs is not None
  na_probs = na_probs if given else {k: 0.0 for k in predictions}

  def thresholded(scores):
    return {qid: (float(not has_ans[qid]) if na_probs[qid] > na_prob_thresh else s)
            for qid, s in scores.items()}

  def summary(ex, f1, qids=None):
    qids = list(ex) if qids is None else qids
    n = len(qids)
    return {"exact": 100.0 * sum(ex[k] for k in qids) / n if n else 0.0,
            "f1": 100.0 * sum(f1[k] for k in qids) / n if n else 0.0, "total": n}

  ex_t, f1_t = thresholded(exact_raw), thresholded(f1_raw)
  out = summary(ex_t, f1_t)
  has = [k for k, v in has_ans.items() if v]
  no = [k for k, v in has_ans.items() if not v]
  for name, qids in (("HasAns", has), ("NoAns", no)):
    if qids:
      part = summary(ex_t, f1_t, [k for k in qids if k in ex_t])
      out.update({f"{name}_{k}": v for k, v in part.items()})
  if given:
    out["best_exact"], out["best_exact_thresh"] = _best_threshold(predictions, exact_raw,
                                                                  na_probs, has_ans)
    out["best_f1"], out["best_f1_thresh"] = _best_threshold(predictions, f1_raw, na_probs,
                                                            has_ans)
  return out


def load_json(path, what):
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    raise FileNotFoundError(f"{path}: {what} not found") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None


def evaluate_files(data_file, pred_file, na_prob_file=None, version=None):
  """Scores a predictions.json (and optional null_odds.json) against a SQuAD file.

  version: "1.1", "2.0", or None to decide from the data (any is_impossible or
  an unanswerable question -> 2.0).
  """
  data = load_json(data_file, "SQuAD data file")
  if "data" not in data:
    raise ValueError(f"{data_file}: not a SQuAD file (no 'data' list)")
  preds = load_json(pred_file, "predictions file")
  if not isinstance(preds, dict):
    raise ValueError(f"{pred_file}: predictions must be a JSON object {{question id: text}}")
  if version is None:
    version = "2.0" if any(qa.get("is_impossible") or not qa.get("answers")
                           for qa in _questions(data["data"])) else "1.1"
  if version == "1.1":
    return evaluate_v1(data["data"], preds)
  na = load_json(na_prob_file, "null odds file") if na_prob_file else None
  return evaluate_v2(data["data"], preds, na)
