"""Fuzz suite (tests/fuzz_helpers.py): RACE JSON files through race.read_split and race.encode
(tiny and odd lengths). python -m pytest tests/test_fuzz_race.py"""

import copy
import json
import os
import tempfile

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from data_utils.tokenization import CLS_ID
from finetuning import race
from tests.fuzz_helpers import (each_input_bounded, ERRORS, fuzz_settings, HOSTILE, PLAIN, to_bytes, edited, check_error, captured, check_summary)


# ---- RACE JSON ----------------------------------------------------------------------------------

ODD_VALUES = [None, 0, 1.5, True, "", "str", [], {}, ["A"], [["a", "b", "c", "d"]], "ABCD",
              float("nan"), 10 ** 30, "\ud800"]


@st.composite
def race_doc(draw):
  """One RACE document (bytes): a valid one, then JSON-level and byte-level edits."""
  n = draw(st.integers(0, 3))
  text = st.one_of(PLAIN, PLAIN, HOSTILE)
  doc = {"id": "1.txt", "article": draw(text),
         "questions": [draw(st.one_of(text, st.just("the door was _ ."))) for _ in range(n)],
         "options": [[draw(text) for _ in range(4)] for _ in range(n)],
         "answers": [draw(st.sampled_from("ABCD")) for _ in range(n)]}
  for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
    if not isinstance(doc, dict):
      break
    op = draw(st.sampled_from(["del", "odd", "item", "option", "answer", "length", "shape"]))
    key = draw(st.sampled_from(["article", "questions", "options", "answers"]))
    if op == "del":
      doc.pop(key, None)
    elif op == "odd":
      doc[key] = copy.deepcopy(draw(st.sampled_from(ODD_VALUES)))
    elif op == "item" and isinstance(doc.get(key), list) and doc[key]:
      k = draw(st.integers(0, len(doc[key]) - 1))
      doc[key][k] = copy.deepcopy(draw(st.sampled_from(ODD_VALUES)))
    elif op == "option" and isinstance(doc.get("options"), list) and doc["options"]:
      k = draw(st.integers(0, len(doc["options"]) - 1))
      doc["options"][k] = [draw(PLAIN) for _ in range(draw(st.sampled_from([0, 3, 5])))]
    elif op == "answer" and isinstance(doc.get("answers"), list) and doc["answers"]:
      doc["answers"][0] = draw(st.sampled_from(["a", "E", "AB", " A", "", 0, 3, None]))
    elif op == "length" and isinstance(doc.get(key), list):
      doc[key].append(doc[key][0] if doc[key] else "extra")
    elif op == "shape":
      doc = draw(st.sampled_from([[doc], "doc", None, 3, [], {}]))
  text = json.dumps(doc, ensure_ascii=draw(st.sampled_from([True, True, False])))
  data = to_bytes(text)
  kind = draw(st.sampled_from(["json"] * 12 + ["edited", "raw", "deep", "bignum"]))
  if kind == "edited":
    data = draw(edited(data, max_edits=2))
  elif kind == "raw":
    data = draw(st.binary(max_size=200))
  elif kind == "deep":
    data = b"[" * 5000
  elif kind == "bignum":
    data = data.replace(b'"id": "1.txt"', b'"id": ' + b"9" * 5000)
  return data


@st.composite
def race_case(draw):
  files = []
  for k in range(draw(st.integers(1, 3))):
    files.append((draw(st.sampled_from(race.LEVELS)), f"{k}.txt", draw(race_doc())))
  return files


def _race_strings(value):
  """The strings a JSON value holds (for tracing items back to files)."""
  if isinstance(value, str):
    yield value
  elif isinstance(value, list):
    for v in value:
      yield from _race_strings(v)
  elif isinstance(value, dict):
    for v in value.values():
      yield from _race_strings(v)


def _race_json(article="a", questions=("q",), options=(("a", "b", "c", "d"),), answers=("B",)):
  return json.dumps({"article": article, "questions": list(questions),
                     "options": [list(o) for o in options], "answers": list(answers)}).encode()


@given(files=race_case(), max_len=st.integers(6, 48), max_qa=st.integers(1, 64),
       model_type=st.sampled_from(["xlnet", "mpnet"]))
@example(files=[], max_len=8, max_qa=4, model_type="xlnet")      # no files at all
# Regressions. JSON of the wrong shape: TypeError / RecursionError instead of a one-line error.
@example(files=[("high", "0.txt", b'{"article": "a", "questions": null, "options": [], '
                                  b'"answers": []}')], max_len=8, max_qa=4, model_type="xlnet")
@example(files=[("high", "0.txt", b'[{"article": "a"}]')], max_len=8, max_qa=4,
         model_type="xlnet")
@example(files=[("high", "0.txt", _race_json(answers=[0]))], max_len=8, max_qa=4,
         model_type="xlnet")
@example(files=[("high", "0.txt", b"[" * 5000)], max_len=8, max_qa=4, model_type="xlnet")
# Question+option longer than the row's room: numpy broadcast error in layouts.pack.
@example(files=[("high", "0.txt", _race_json(options=[["a", "a", "a", "aaa"]]))], max_len=6,
         max_qa=4, model_type="xlnet")
@example(files=[("high", "0.txt", _race_json(options=[["a", "a", "a", "aa"]]))], max_len=6,
         max_qa=3, model_type="mpnet")
# A lone surrogate (JSON escape): TypeError inside SentencePiece.
@example(files=[("middle", "0.txt", b'{"article": "a\\ud800b", "questions": ["q"], '
                                    b'"options": [["a", "b", "c", "d"]], "answers": ["B"]}')],
         max_len=16, max_qa=8, model_type="xlnet")
# An article with a line break: the next item's rows got the wrong context.
@example(files=[("middle", "0.txt", _race_json(article="one\ntwo")),
                ("middle", "1.txt", _race_json(article="three four five"))],
         max_len=24, max_qa=8, model_type="xlnet")
@fuzz_settings(600)
@each_input_bounded
def test_fuzz_race_json(tok, files, max_len, max_qa, model_type):
  with tempfile.TemporaryDirectory() as d:
    strings = set()
    for level, name, data in files:
      os.makedirs(os.path.join(d, "dev", level), exist_ok=True)
      with open(os.path.join(d, "dev", level, name), "wb") as f:
        f.write(data)
      try:
        strings.update(_race_strings(json.loads(data.decode("utf-8-sig"))))
      except (ValueError, RecursionError):
        pass
    with captured() as out:
      try:
        items = race.read_split(d, "dev")
      except ERRORS as e:
        check_error(e, d)
        return
    check_summary(out, os.path.join(d, "dev"), len(items))
  for level, article, question, options, label in items:
    assert level in race.LEVELS and 0 <= label < 4 and len(options) == 4
    assert all(isinstance(t, str) and t in strings for t in [article, question, *options])
  feats = race.encode(tok, items, max_len, max_qa_length=max_qa, model_type=model_type)
  n = len(items)
  assert feats["input_ids"].shape == (n, 4, max_len) == feats["input_mask"].shape
  assert set(feats["label"].tolist()) <= {0, 1, 2, 3} and set(feats["level"].tolist()) <= {0, 1}
  if model_type == "xlnet":
    assert (feats["input_ids"][:, :, -1] == CLS_ID).all()
  for k in range(min(n, 3)):   # rows line up with items
    alone = race.encode(tok, items[k:k + 1], max_len, max_qa_length=max_qa,
                        model_type=model_type)
    np.testing.assert_array_equal(feats["input_ids"][k], alone["input_ids"][0])



def test_race_reader_rejects_what_it_used_to_drop_or_misread(tmp_path):
  os.makedirs(tmp_path / "dev" / "middle")
  doc = tmp_path / "dev" / "middle" / "1.txt"
  doc.write_bytes(b"\xef\xbb\xbf" + _race_json())      # a BOM: "Unexpected UTF-8 BOM" before
  with captured():
    assert race.read_split(tmp_path, "dev")[0][4] == 1
  doc.write_bytes(_race_json(questions=["q1", "q2"]))   # zip() dropped the second question
  with pytest.raises(ValueError, match=r"1.txt: not a RACE file \(2 questions, 1 option lists "
                                       r"and 1 answers\)"):
    race.read_split(tmp_path, "dev")
  doc.write_bytes(_race_json(options=[["a", "b", "c", 4]]))
  with pytest.raises(ValueError, match=r"question 0: options must be a list of 4 strings"):
    race.read_split(tmp_path, "dev")
  doc.write_bytes(b'{"article": "a",\n "questions": [}')
  with pytest.raises(ValueError, match=r"1.txt:2: not a RACE file \(not JSON: Expecting value"):
    race.read_split(tmp_path, "dev")
