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
