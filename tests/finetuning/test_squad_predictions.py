"""run_squad.py's readable and submitted files: SQuAD 2.0's predictions_submission.json (the
null-odds threshold chosen on dev applied), null_threshold.json, predictions.jsonl.

The submission file is scored by this file's own transcription of the official SQuAD 2.0
evaluation script (evaluate-v2.0.py), not by finetuning/squad_metrics.py."""

import collections
import json
import random
import re
import string

import numpy as np
import pytest

from data_utils import outputs, tokenization
from finetuning import squad, squad_metrics
from tests.script_helpers import main_exit, run_main

TINY = {"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8, "d_inner": 32}


# ---- the official SQuAD 2.0 evaluation script, transcribed (evaluate-v2.0.py) ----------------
def make_qid_to_has_ans(dataset):
  qid_to_has_ans = {}
  for article in dataset:
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        qid_to_has_ans[qa["id"]] = bool(qa["answers"])
  return qid_to_has_ans


def normalize_answer(s):
  def remove_articles(text):
    regex = re.compile(r"\b(a|an|the)\b", re.UNICODE)
    return re.sub(regex, " ", text)

  def white_space_fix(text):
    return " ".join(text.split())

  def remove_punc(text):
    exclude = set(string.punctuation)
    return "".join(ch for ch in text if ch not in exclude)

  return white_space_fix(remove_articles(remove_punc(s.lower())))


def get_tokens(s):
  if not s:
    return []
  return normalize_answer(s).split()


def compute_exact(a_gold, a_pred):
  return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
  gold_toks = get_tokens(a_gold)
  pred_toks = get_tokens(a_pred)
  common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
  num_same = sum(common.values())
  if len(gold_toks) == 0 or len(pred_toks) == 0:
    return int(gold_toks == pred_toks)
  if num_same == 0:
    return 0
  precision = 1.0 * num_same / len(pred_toks)
  recall = 1.0 * num_same / len(gold_toks)
  return (2 * precision * recall) / (precision + recall)


def get_raw_scores(dataset, preds):
  exact_scores, f1_scores = {}, {}
  for article in dataset:
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        qid = qa["id"]
        gold_answers = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
        if not gold_answers:
          gold_answers = [""]
        if qid not in preds:
          continue
        a_pred = preds[qid]
        exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
        f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
  return exact_scores, f1_scores


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh):
  new_scores = {}
  for qid, s in scores.items():
    pred_na = na_probs[qid] > na_prob_thresh
    new_scores[qid] = float(not qid_to_has_ans[qid]) if pred_na else s
  return new_scores


def make_eval_dict(exact_scores, f1_scores):
  total = len(exact_scores)
  return {"exact": 100.0 * sum(exact_scores.values()) / total,
          "f1": 100.0 * sum(f1_scores.values()) / total, "total": total}


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
  num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
  cur_score = num_no_ans
  best_score = cur_score
  best_thresh = 0.0
  qid_list = sorted(na_probs, key=lambda k: na_probs[k])
  for qid in qid_list:
    if qid not in scores:
      continue
    if qid_to_has_ans[qid]:
      diff = scores[qid]
    else:
      diff = -1 if preds[qid] else 0
    cur_score += diff
    if cur_score > best_score:
      best_score = cur_score
      best_thresh = na_probs[qid]
  return 100.0 * best_score / len(scores), best_thresh


def official_v2(dataset, preds, na_probs=None, na_prob_thresh=1.0):
  """main() of evaluate-v2.0.py (without the HasAns/NoAns splits and plots)."""
  with_na = na_probs is not None
  na_probs = na_probs if with_na else {k: 0.0 for k in preds}
  qid_to_has_ans = make_qid_to_has_ans(dataset)
  exact_raw, f1_raw = get_raw_scores(dataset, preds)
  exact_thresh = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
  f1_thresh = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
  out = make_eval_dict(exact_thresh, f1_thresh)
  if with_na:
    out["best_exact"], out["best_exact_thresh"] = find_best_thresh(preds, exact_raw, na_probs,
                                                                   qid_to_has_ans)
    out["best_f1"], out["best_f1_thresh"] = find_best_thresh(preds, f1_raw, na_probs,
                                                             qid_to_has_ans)
  return out


# ---- the threshold on hand-made predictions --------------------------------------------------
def _data(qas):
  return [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]


# 8 questions, null odds as logits (negative and positive, all distinct). Sorted by odds:
# h1 -2.5 right (+1), n1 -1.5 wrong answer (-1), h2 -0.5 partly right ("red fox" for "fox":
# F1 2/3, exact 0), h3 0.25 right (+1), n2 0.5 "" (0), h4 1.5 wrong (0), n3 2.5 wrong (-1),
# h5 3.0 wrong (0). Starting from 3 (the no-answer questions):
# exact: 4, 3, 3, 4, 4, 4, 3, 3 -> best 4/8 first at -2.5
# F1:    4, 3, 3.67, 4.67, 4.67, 4.67, 3.67, 3.67 -> best 4.67/8 first at 0.25; all answered
# (predictions.json as it is) 3.67/8
CRAFTED_QAS = [{"id": k, "answers": [{"text": g}] if g else []} for k, g in [
    ("h1", "blue"), ("n1", None), ("h2", "fox"), ("h3", "green tea"), ("n2", None),
    ("h4", "Paris"), ("n3", None), ("h5", "the moon")]]
CRAFTED_PREDS = {"h1": "blue", "n1": "cat", "h2": "red fox", "h3": "Green tea.", "n2": "",
                 "h4": "Rome", "n3": "dog", "h5": "Sun"}
CRAFTED_ODDS = {"h1": -2.5, "n1": -1.5, "h2": -0.5, "h3": 0.25, "n2": 0.5, "h4": 1.5, "n3": 2.5,
                "h5": 3.0}


def test_submission_with_the_chosen_threshold_scores_best_f1_in_the_official_script():
  data = _data(CRAFTED_QAS)
  reference = official_v2(data, CRAFTED_PREDS, CRAFTED_ODDS)
  assert reference["best_f1_thresh"] == 0.25 and reference["best_exact_thresh"] == -2.5
  choice = squad_metrics.choose_null_threshold(data, CRAFTED_PREDS, CRAFTED_ODDS)
  assert choice == {"threshold": 0.25, "best_f1": pytest.approx(reference["best_f1"]),
                    "best_f1_thresh": 0.25, "best_exact": pytest.approx(reference["best_exact"]),
                    "best_exact_thresh": -2.5}
  submission = squad_metrics.apply_null_threshold(CRAFTED_PREDS, CRAFTED_ODDS,
                                                  choice["threshold"])
  assert submission == {**CRAFTED_PREDS, "h4": "", "n3": "", "h5": ""}
  scored = official_v2(data, submission)                     # the file as one submits it
  assert scored["f1"] == pytest.approx(reference["best_f1"]) == pytest.approx(100 * 14 / 3 / 8)
  at = official_v2(data, CRAFTED_PREDS, CRAFTED_ODDS, na_prob_thresh=choice["threshold"])
  assert scored["exact"] == pytest.approx(at["exact"])
  # as submitted before: predictions.json alone scores the raw answers
  assert official_v2(data, CRAFTED_PREDS)["f1"] == pytest.approx(100 * 11 / 3 / 8)


def test_when_answering_nothing_is_best_the_threshold_is_below_every_odds():
  """find_best_thresh then reports its starting 0.0, which answers every question whose
  (logit) odds are at most 0; the submission must answer none of them."""
  data = _data(CRAFTED_QAS)
  wrong = {k: "wrong" for k in CRAFTED_PREDS}
  reference = official_v2(data, wrong, CRAFTED_ODDS)
  assert reference["best_f1_thresh"] == 0.0 and reference["best_f1"] == pytest.approx(37.5)
  choice = squad_metrics.choose_null_threshold(data, wrong, CRAFTED_ODDS)
  assert choice["threshold"] < -2.5 and choice["best_f1_thresh"] == 0.0
  submission = squad_metrics.apply_null_threshold(wrong, CRAFTED_ODDS, choice["threshold"])
  assert set(submission.values()) == {""}
  assert official_v2(data, submission)["f1"] == pytest.approx(reference["best_f1"])
  zero = squad_metrics.apply_null_threshold(wrong, CRAFTED_ODDS, 0.0)   # the 0.0 taken as is
  assert official_v2(data, zero)["f1"] < reference["best_f1"]


# ---- run_squad.py end to end -------------------------------------------------------------
def _one_piece_words(sp, n, rng):
  """`n` lower-case words that the uncased tokenizer keeps as one piece: a one-word context
  has one possible answer, so every question's F1 is its exact match (0 or 1) and the best
  exact and F1 thresholds coincide."""
  tok = tokenization.Tokenizer(sp, lower=True)
  words = sorted({tok.id_to_piece(i)[1:] for i in range(tok.vocab_size)
                  if tok.id_to_piece(i).startswith("\u2581")
                  and tok.id_to_piece(i)[1:].isalpha() and len(tok.id_to_piece(i)) > 4})
  words = [w for w in words if w not in ("the", "and") and len(tok.encode(w)) == 1]
  return rng.sample(words, n), tok


def _dev_file(path, words, rng, labelled=True):
  data = []
  for k, word in enumerate(words):
    qa = {"id": f"q{k:02d}", "question": " ".join(rng.sample(words, 1 + k % 4)) + "?"}
    if labelled:
      impossible = k % 3 == 0
      qa["is_impossible"] = impossible
      qa["answers"] = [] if impossible else [{"text": word, "answer_start": 0}]
    data.append({"title": "t", "paragraphs": [{"context": word, "qas": [qa]}]})
  path.write_text(json.dumps({"version": "v2.0", "data": data}))
  return path


def _read(path):
  return json.loads(path.read_text(encoding="utf-8"))


def _jsonl(path):
  return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def squad_run(tmp_path_factory, text_and_sp):
  _, sp = text_and_sp
  d = tmp_path_factory.mktemp("squad_predictions")
  rng = random.Random(5)
  words, tok = _one_piece_words(sp, 18, rng)
  dev = _dev_file(d / "dev.json", words, rng)
  test = _dev_file(d / "test.json", words[::-1], rng, labelled=False)
  cfg = d / "config.json"
  cfg.write_text(json.dumps(dict(TINY, n_token=tok.vocab_size)))
  common = dict(sp_model=sp, uncased=True, model_config_path=str(cfg), max_seq_length=24,
                max_query_length=8, doc_stride=4, start_n_top=8, end_n_top=8,
                predict_batch_size=4, seed=3, xla="off")
  return d, dev, test, common


def test_dev_prediction_writes_the_submission_scoring_best_f1(squad_run, capsys):
  d, dev, _, common = squad_run
  out = d / "m"
  run_main("run_squad.py", do_predict=True, predict_file=str(dev), model_dir=str(out), **common)
  printed = capsys.readouterr().out
  data = _read(dev)["data"]
  preds, odds = _read(out / "predictions.json"), _read(out / "null_odds.json")
  assert "" not in preds.values()                       # the release's file: best non-null
  reference = official_v2(data, preds, odds)
  record = _read(out / "null_threshold.json")
  assert list(record) == ["threshold", "chosen_on", "questions", "best_f1", "best_f1_thresh",
                          "best_exact", "best_exact_thresh"]
  assert record["chosen_on"] == str(dev) and record["questions"] == 18
  for key in ("best_f1", "best_f1_thresh", "best_exact", "best_exact_thresh"):
    assert record[key] == pytest.approx(reference[key]), key
  submission = _read(out / squad.SUBMISSION)
  scored = official_v2(data, submission)
  assert scored["f1"] == pytest.approx(reference["best_f1"])
  at = official_v2(data, preds, odds, na_prob_thresh=record["threshold"])
  assert scored["exact"] == pytest.approx(at["exact"])
  assert reference["best_exact_thresh"] == reference["best_f1_thresh"]   # the data's design
  assert scored["exact"] == pytest.approx(reference["best_exact"])
  assert (f'{squad.SUBMISSION}: "" where the null odds exceed {record["threshold"]!r}, the '
          f"threshold chosen on {dev}") in printed
  written = [l for l in printed.splitlines() if l.startswith("wrote ")]
  assert written == [f"wrote {out / n}" for n in (
      "predictions.json", "nbest_predictions.json", "null_odds.json", "null_threshold.json",
      squad.SUBMISSION, squad.READABLE)]

  # predictions.jsonl: ids in the file's order, the submitted answer, n-best probabilities
  rows = _jsonl(out / squad.READABLE)
  nbest = _read(out / "nbest_predictions.json")
  qas = [(p["context"], qa) for a in data for p in a["paragraphs"] for qa in p["qas"]]
  assert [r["id"] for r in rows] == [qa["id"] for _, qa in qas]
  for row, (context, qa) in zip(rows, qas):
    assert list(row) == ["id", "question", "context", "prediction", "probabilities",
                         "null_odds", "gold"]
    assert (row["question"], row["context"]) == (qa["question"], context)
    assert row["gold"] == [a["text"] for a in qa["answers"]]
    assert row["prediction"] == submission[qa["id"]]
    assert row["null_odds"] == odds[qa["id"]]
    assert sum(row["probabilities"].values()) == pytest.approx(1, abs=1e-6)
    assert row["probabilities"] == {c["text"]: c["probability"] for c in nbest[qa["id"]]}
    top = max(row["probabilities"], key=row["probabilities"].get)
    assert top == preds[qa["id"]]
    assert row["prediction"] == ("" if odds[qa["id"]] > record["threshold"] else top)


@pytest.mark.slow
def test_a_file_without_answers_gets_the_recorded_threshold_or_the_flag(squad_run, capsys):
  d, dev, test, common = squad_run
  out = d / "m"
  if not (out / "null_threshold.json").exists():        # run alone: record one first
    run_main("run_squad.py", do_predict=True, predict_file=str(dev), model_dir=str(out),
             **common)
  record = _read(out / "null_threshold.json")
  capsys.readouterr()
  run_main("run_squad.py", do_predict=True, predict_file=str(test), model_dir=str(out), **common)
  printed = capsys.readouterr().out
  assert (f'{squad.SUBMISSION}: "" where the null odds exceed {record["threshold"]!r}, the '
          f"threshold chosen on {dev} (from {out / 'null_threshold.json'})") in printed
  assert _read(out / "null_threshold.json") == record            # the dev record is kept
  preds, odds = _read(out / "predictions.json"), _read(out / "null_odds.json")
  assert set(preds) == {f"q{k:02d}" for k in range(18)}
  expected = {k: "" if odds[k] > record["threshold"] else v for k, v in preds.items()}
  assert _read(out / squad.SUBMISSION) == expected
  rows = _jsonl(out / squad.READABLE)
  assert [r["id"] for r in rows] == [f"q{k:02d}" for k in range(18)]
  assert all("gold" not in r for r in rows)

  threshold = sorted(odds.values())[9]                            # the flag wins
  run_main("run_squad.py", do_predict=True, predict_file=str(test), model_dir=str(out),
           null_odds_threshold=threshold, **common)
  assert (f'{squad.SUBMISSION}: "" where the null odds exceed {threshold!r} '
          "(--null_odds_threshold)") in capsys.readouterr().out
  assert sum(v == "" for v in _read(out / squad.SUBMISSION).values()) == 8

  flagged = d / "flagged"             # on a dev file the flag wins too; the choice is recorded
  run_main("run_squad.py", do_predict=True, predict_file=str(dev), model_dir=str(flagged),
           null_odds_threshold=threshold, **common)
  printed = capsys.readouterr().out
  chosen = _read(flagged / "null_threshold.json")["threshold"]
  assert (f'{squad.SUBMISSION}: "" where the null odds exceed {threshold!r} '
          f"(--null_odds_threshold); the threshold chosen on {dev}, {chosen!r}, is recorded "
          f"in {flagged / 'null_threshold.json'}") in printed
  odds = _read(flagged / "null_odds.json")
  assert _read(flagged / squad.SUBMISSION) == {
      k: "" if odds[k] > threshold else v for k, v in _read(flagged / "predictions.json").items()}

  fresh = d / "fresh"                                             # neither: no guess
  run_main("run_squad.py", do_predict=True, predict_file=str(test), model_dir=str(fresh),
           **common)
  printed = capsys.readouterr().out
  assert f"no {squad.SUBMISSION}: {test} has no answers" in printed
  assert not (fresh / squad.SUBMISSION).exists() and (fresh / "predictions.json").exists()
  assert (fresh / squad.READABLE).exists()


def test_bad_threshold_inputs_are_one_line_refusals(squad_run, tmp_path):
  d, _, test, common = squad_run
  run = tmp_path / "run"
  outputs.claim_dir(str(run), outputs.RUN)                 # a run directory of this project
  (run / "null_threshold.json").write_text('{"threshold": "high"}')
  code = main_exit("run_squad.py", do_predict=True, predict_file=str(test), model_dir=str(run),
                   **common)
  assert code == (f"run_squad.py: {run / 'null_threshold.json'}: not a null threshold "
                  "record (no finite number 'threshold')")
  assert not (run / "predictions.json").exists()
  code = main_exit("run_squad.py", do_predict=True, predict_file=str(test), version="1.1",
                   null_odds_threshold=0.5, model_dir=str(tmp_path / "v1"), **common)
  assert "--null_odds_threshold with --version=1.1" in code and "\n" not in code
