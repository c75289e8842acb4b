"""SQuAD metrics against hand-computed cases (official v1.1 / v2.0 semantics)."""

import json

import pytest

from finetuning import squad_metrics as sm


def _data(qas):
  return [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]


def test_normalisation_articles_punctuation_case():
  assert sm.normalize_answer("The  Cat, a dog!") == "cat dog"
  assert sm.normalize_answer("An apple.") == "apple"
  assert sm.normalize_answer("theatre") == "theatre"       # "the" only as a word
  assert sm.exact("the Eiffel Tower", "Eiffel tower.") == 1


def test_f1_by_hand():
  # gold "the big red dog" -> [big, red, dog]; pred "red dog runs" -> [red, dog, runs]
  # common 2: precision 2/3, recall 2/3, F1 2/3
  assert sm.f1_v2("the big red dog", "red dog runs") == pytest.approx(2 / 3)
  assert sm.f1_v1("the big red dog", "red dog runs") == pytest.approx(2 / 3)
  assert sm.f1_v2("", "") == 1.0 and sm.f1_v2("", "x") == 0.0   # no-answer agreement
  assert sm.f1_v2("a b", "c") == 0.0


def test_v1_best_over_golds_and_missing_counts_zero():
  data = _data([
      {"id": "q1", "answers": [{"text": "Denver Broncos"}, {"text": "the Broncos"}]},
      {"id": "q2", "answers": [{"text": "Santa Clara, California"}]},
      {"id": "q3", "answers": [{"text": "gold"}]}])
  preds = {"q1": "Broncos", "q2": "Santa Clara"}            # q3 missing
  out = sm.evaluate_v1(data, preds)
  # q1: exact with "the Broncos"; q2: exact 0, F1 = 2*(1)*(2/3)/(1+2/3) = 0.8; q3: 0
  assert out["exact_match"] == pytest.approx(100 / 3)
  assert out["f1"] == pytest.approx(100 * (1 + 0.8) / 3)


def test_v2_no_answer_threshold_and_best_threshold():
  data = _data([
      {"id": "a", "answers": [{"text": "blue"}], "is_impossible": False},
      {"id": "b", "answers": [], "is_impossible": True},
      {"id": "c", "answers": [{"text": "green tea"}], "is_impossible": False},
      {"id": "d", "answers": [], "is_impossible": True}])
  preds = {"a": "blue", "b": "", "c": "tea", "d": "red"}
  out = sm.evaluate_v2(data, preds)
  # exact: a 1, b 1 (""==""), c 0, d 0 -> 50; F1: 1, 1, 2/3, 0 -> 66.67
  assert out["exact"] == pytest.approx(50.0) and out["f1"] == pytest.approx(100 * (8 / 3) / 4)
  assert out["HasAns_total"] == 2 and out["HasAns_exact"] == pytest.approx(50.0)
  assert out["NoAns_total"] == 2 and out["NoAns_exact"] == pytest.approx(50.0)
  assert "best_f1" not in out
  na = {"a": 0.1, "b": 0.9, "c": 0.2, "d": 0.8}
  out = sm.evaluate_v2(data, preds, na, na_prob_thresh=0.5)
  # d -> no answer (0.8 > 0.5): correct -> exact 75
  assert out["exact"] == pytest.approx(75.0)
  # best threshold search (official): start 2 (no-answer count); sorted by prob:
  # a +1 -> 3 (thresh .1), c +0 -> 3, d pred "red" -1 -> 2, b pred "" 0 -> 2 => 75 at 0.1
  assert out["best_exact"] == pytest.approx(75.0) and out["best_exact_thresh"] == 0.1
  # F1: a +1 -> 3 (.1), c +2/3 -> 3.667 (.2), d -1, b 0 => 91.67 at 0.2
  assert out["best_f1"] == pytest.approx(100 * (11 / 3) / 4) and out["best_f1_thresh"] == 0.2


def test_files_version_detection_and_errors(tmp_path):
  data = {"version": "1.1", "data": _data([{"id": "q", "answers": [{"text": "x y"}]}])}
  (tmp_path / "d.json").write_text(json.dumps(data))
  (tmp_path / "p.json").write_text(json.dumps({"q": "x"}))
  out = sm.evaluate_files(tmp_path / "d.json", tmp_path / "p.json")
  assert out == {"exact_match": 0.0, "f1": pytest.approx(100 * 2 / 3)}
  (tmp_path / "bad.json").write_text("{\n oops")
  with pytest.raises(ValueError, match=r"bad.json: line 2"):
    sm.evaluate_files(tmp_path / "d.json", tmp_path / "bad.json")
  with pytest.raises(FileNotFoundError, match="none.json: predictions file not found"):
    sm.evaluate_files(tmp_path / "d.json", tmp_path / "none.json")


# A hand-made v2.0 file: q1 and q4 have answers that all normalise to "" ("the",
# "...", "an"): the official script counts them as HasAns (raw `answers` list non-empty)
# with gold [""]; q3 gets an empty prediction; null odds tie at 0.2 and 0.5.
_EDGE_QAS = [
    {"id": "q1", "answers": [{"text": "the", "answer_start": 0}, {"text": "...", "answer_start": 4}],
     "is_impossible": False},
    {"id": "q2", "answers": [], "is_impossible": True},
    {"id": "q3", "answers": [{"text": "Blue whale", "answer_start": 0}], "is_impossible": False},
    {"id": "q4", "answers": [{"text": "an", "answer_start": 0}], "is_impossible": False},
    {"id": "q5", "answers": [], "is_impossible": True},
    {"id": "q6", "answers": [{"text": "red fox", "answer_start": 0}], "is_impossible": False}]
_EDGE_PREDS = {"q1": "", "q2": "", "q3": "", "q4": "a cat", "q5": "whale", "q6": "fox"}
_EDGE_NA = {"q1": 0.5, "q2": 0.5, "q3": 0.2, "q4": 0.5, "q5": 0.9, "q6": 0.2}


def test_v2_has_answer_from_the_raw_answers_list_as_the_official_script():
  out = sm.evaluate_v2(_data(_EDGE_QAS), _EDGE_PREDS, _EDGE_NA)
  # raw exact: q1 ""=="" 1, q2 1, q3 0, q4 "cat" vs "" 0, q5 0, q6 0      -> 2/6
  # raw F1:    q1 1 (both empty), q2 1, q3 0, q4 0, q5 0, q6 P 1 R 1/2 -> 2/3
  assert out["exact"] == pytest.approx(100 * 2 / 6)
  assert out["f1"] == pytest.approx(100 * (2 + 2 / 3) / 6)
  assert out["total"] == 6
  # HasAns = q1, q3, q4, q6 (q1 and q4 although their golds normalise to "")
  assert out["HasAns_total"] == 4 and out["NoAns_total"] == 2
  assert out["HasAns_exact"] == pytest.approx(25.0)
  assert out["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 4)
  assert out["NoAns_exact"] == pytest.approx(50.0) and out["NoAns_f1"] == pytest.approx(50.0)
  # best threshold: start at the 2 NoAns questions; order by probability, ties in file
  # order: q3 (.2) +0, q6 (.2) +0 | +2/3, q1 (.5) +1, q2 (.5) 0 ("" predicted),
  # q4 (.5) +0, q5 (.9) -1 ("whale" predicted).
  # exact: 2, 2, 3 (best, .5), 3, 3, 2        -> 3/6 at 0.5
  # F1:    2, 2.667 (.2), 3.667 (.5), ..., 2.667 -> 3.667/6 at 0.5
  assert out["best_exact"] == pytest.approx(50.0) and out["best_exact_thresh"] == 0.5
  assert out["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 6)
  assert out["best_f1_thresh"] == 0.5
  # threshold 0.4: q1, q2, q4, q5 predicted "no answer": q1 0, q2 1, q4 0, q5 1
  low = sm.evaluate_v2(_data(_EDGE_QAS), _EDGE_PREDS, _EDGE_NA, na_prob_thresh=0.4)
  assert low["exact"] == pytest.approx(100 * 2 / 6)
  assert low["f1"] == pytest.approx(100 * (2 + 2 / 3) / 6)
  assert low["HasAns_exact"] == 0.0 and low["NoAns_exact"] == 100.0


def test_v2_ties_in_null_odds_follow_the_file_order_as_the_official_script(tmp_path):
  # One right HasAns answer and one wrong NoAns answer at the same probability 0.3.
  # Start 1 (one NoAns). File order [b, a]: b -1 -> 0, a +1 -> 1, never above 1:
  # best 50% at 0.0. Order [a, b]: a +1 -> 2 (best, at .3), b -1 -> 1: best 100% at 0.3.
  data = {"version": "v2.0", "data": _data([
      {"id": "a", "answers": [{"text": "yes"}]}, {"id": "b", "answers": []}])}
  (tmp_path / "d.json").write_text(json.dumps(data))
  (tmp_path / "p.json").write_text(json.dumps({"a": "yes", "b": "x"}))
  (tmp_path / "ba.json").write_text('{"b": 0.3, "a": 0.3}')
  (tmp_path / "ab.json").write_text('{"a": 0.3, "b": 0.3}')
  ba = sm.evaluate_files(tmp_path / "d.json", tmp_path / "p.json", tmp_path / "ba.json")
  ab = sm.evaluate_files(tmp_path / "d.json", tmp_path / "p.json", tmp_path / "ab.json")
  assert (ba["best_exact"], ba["best_exact_thresh"]) == (50.0, 0.0)
  assert (ab["best_exact"], ab["best_exact_thresh"]) == (100.0, 0.3)
  assert ab["exact"] == ba["exact"] == 50.0


def test_v2_inputs_the_official_script_cannot_score_are_one_line_errors(tmp_path):
  data = {"data": _data(_EDGE_QAS)}
  (tmp_path / "d.json").write_text(json.dumps(data))
  partial = dict(_EDGE_PREDS)
  del partial["q3"]
  cases = [
      ("p.json", partial, None, r"p.json: no prediction for 1 of 6 questions \(first: 'q3'\)"),
      ("p.json", dict(_EDGE_PREDS, q2=None), None, r"p.json: the prediction for 'q2' is None"),
      ("p.json", _EDGE_PREDS, {"q1": 0.1}, r"n.json: no no-answer probability for question"),
      ("p.json", _EDGE_PREDS, dict(_EDGE_NA, q4="high"), r"n.json: .*'q4' is 'high', not a"),
      ("p.json", ["q1"], None, r"p.json: predictions must be a JSON object")]
  for name, preds, na, message in cases:
    (tmp_path / name).write_text(json.dumps(preds))
    (tmp_path / "n.json").write_text(json.dumps(na))
    with pytest.raises(ValueError, match=message) as err:
      sm.evaluate_files(tmp_path / "d.json", tmp_path / name,
                        tmp_path / "n.json" if na is not None else None, version="2.0")
    assert "\n" not in str(err.value)
  (tmp_path / "bad.json").write_text(json.dumps({"data": [{"paragraphs": [{"qas": [{}]}]}]}))
  with pytest.raises(ValueError, match=r"bad.json: not the SQuAD layout"):
    sm.evaluate_files(tmp_path / "bad.json", tmp_path / "p.json")
  (tmp_path / "bin.json").write_bytes(b'{"q1": "\xff"}')
  with pytest.raises(ValueError, match=r"bin.json: byte 8: not UTF-8"):
    sm.evaluate_files(tmp_path / "d.json", tmp_path / "bin.json")
