"""Fuzz suite (tests/fuzz_helpers.py): RACE JSON files through race.read_split and race.encode
(tiny and odd lengths).

Every input is first judged by this file's own model of read_split's documented rules (from
the bytes: UTF-8 JSON, an object with a string article and equal-length lists of string
questions, lists of 4 string options, answers A-D, or, when answers are not required, no
"answers" key at all in every file that has questions; nothing skipped): the reader must refuse
exactly where the model refuses (naming the first bad file, in level then name order), else
return exactly the model's items in order, with the counts in its summary. Unedited documents
(a separate test, and edits drawn to zero in the fuzz test) are also checked against the
generator's own dicts. python -m pytest tests/finetuning/test_fuzz_race.py"""

import copy
import json
import os
import tempfile

import numpy as np
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from data_utils.tokenization import CLS_ID
from finetuning import race
from tests.fuzz_helpers import (each_input_bounded, ERRORS, fuzz_settings, HOSTILE, PLAIN,
                                to_bytes, edited, captured, check_summary, check_refusal,
                                strip_bom)

pytestmark = pytest.mark.slow   # a long system test (pyproject.toml)


# ---- RACE JSON ----------------------------------------------------------------------------------

ODD_VALUES = [None, 0, 1.5, True, "", "str", [], {}, ["A"], [["a", "b", "c", "d"]], "ABCD",
              float("nan"), 10 ** 30, "\ud800"]
TEXT = st.one_of(PLAIN, PLAIN, HOSTILE)


@st.composite
def race_valid_doc(draw, min_questions=0):
  """One RACE document as a dict, as the release's files are."""
  n = draw(st.integers(min_questions, 3))
  return {"id": "1.txt", "article": draw(TEXT),
          "questions": [draw(st.one_of(TEXT, st.just("the door was _ ."))) for _ in range(n)],
          "options": [[draw(TEXT) for _ in range(4)] for _ in range(n)],
          "answers": [draw(st.sampled_from("ABCD")) for _ in range(n)]}


def _dumps(draw, doc):
  """doc as bytes: ASCII escapes or raw UTF-8 (lone surrogates then become invalid UTF-8)."""
  return to_bytes(json.dumps(doc, ensure_ascii=draw(st.sampled_from([True, True, False]))))


@st.composite
def race_doc(draw):
  """One RACE document (bytes): a valid one, then JSON-level and byte-level edits."""
  doc = draw(race_valid_doc())
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
  data = _dumps(draw, doc)
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


def _race_json(article="a", questions=("q",), options=(("a", "b", "c", "d"),), answers=("B",)):
  """A RACE file's bytes (answers None: no "answers" key)."""
  doc = {"article": article, "questions": list(questions), "options": [list(o) for o in options]}
  if answers is not None:
    doc["answers"] = list(answers)
  return json.dumps(doc).encode()


def doc_items(level, doc):
  """The items of one valid document (dict): one per question, in order (label -1 for every
  question of a document without "answers")."""
  answers = doc.get("answers", [None] * len(doc["questions"]))
  return [(level, doc["article"], q, list(o), -1 if a is None else "ABCD".index(a))
          for q, o, a in zip(doc["questions"], doc["options"], answers)]


def file_model(level, data, require_answers=True):
  """The items of one file by read_split's rules, or None where it must be refused."""
  try:
    doc = json.loads(strip_bom(data).decode("utf-8"))
  except (ValueError, RecursionError):        # not UTF-8, not JSON, nested too deep
    return None
  if not isinstance(doc, dict):
    return None
  keys = ["article", "questions", "options"]
  if require_answers or "answers" in doc:
    keys.append("answers")
  if not all(k in doc for k in keys):
    return None
  questions, options = doc["questions"], doc["options"]
  answers = doc["answers"] if "answers" in keys else ["A"] * len(questions) \
      if isinstance(questions, list) else None
  if not (isinstance(doc["article"], str) and isinstance(questions, list)
          and isinstance(options, list) and isinstance(answers, list)
          and len(questions) == len(options) == len(answers)):
    return None
  for q, o, a in zip(questions, options, answers):
    if not (isinstance(q, str) and isinstance(o, list) and len(o) == 4
            and all(isinstance(x, str) for x in o) and a in ("A", "B", "C", "D")):
      return None
  return doc_items(level, doc)


def split_model(root, files, require_answers=True):
  """("refuse", path) or ("read", items, files, files without questions): levels in order,
  files by name, the first file that is not a RACE document refused; then, of a split where
  some files with questions have answers and some not, the first without."""
  items, empty, unlabelled = [], 0, []
  if not files:
    return "refuse", root
  for level in race.LEVELS:
    for lev, name, data in sorted(files, key=lambda f: f[1]):
      if lev != level:
        continue
      got = file_model(level, data, require_answers)
      if got is None:
        return "refuse", os.path.join(root, level, name)
      items += got
      empty += not got
      if got and got[0][4] == -1:
        unlabelled.append(os.path.join(root, level, name))
  if not items:
    return "refuse", root
  if unlabelled and any(it[4] != -1 for it in items):
    return "refuse", unlabelled[0]
  return "read", items, len(files), empty


def _read_race(files, require_answers=True):
  """files [(level, name, bytes)] written as {d}/dev/{level}/{name}, read: (root, items or None,
  error or None, stdout)."""
  with tempfile.TemporaryDirectory() as d:
    for level, name, data in files:
      os.makedirs(os.path.join(d, "dev", level), exist_ok=True)
      with open(os.path.join(d, "dev", level, name), "wb") as f:
        f.write(data)
    with captured() as out:
      try:
        return (os.path.join(d, "dev"),
                race.read_split(d, "dev", require_answers=require_answers), None, out)
      except ERRORS as e:
        return os.path.join(d, "dev"), None, e, out


def _plural(n, unit):
  return f"{n:,} {unit}{'s' * (n != 1)}"


def check_race(files, require_answers=True):
  """read_split on `files` does exactly what split_model says; returns the items (or None)."""
  root, items, err, out = _read_race(files, require_answers)
  model = split_model(root, files, require_answers)
  if model[0] == "refuse":
    assert err is not None, ("the model refuses", model[1], items)
    check_refusal(err, model[1])
    return None
  assert err is None, f"refused files the model reads ({len(model[1])} items): {err}"
  _, expected, n_files, empty = model
  assert items == expected
  counts = [f"{level} {sum(it[0] == level for it in expected):,}" for level in race.LEVELS]
  check_summary(out, root, len(expected), f"questions from {_plural(n_files, 'file')} "
                f"({', '.join(counts)})", *([f"; {empty:,} without questions"] if empty else []))
  if not empty:
    assert "without questions" not in out.getvalue()
  assert ("no answers (unlabelled)" in out.getvalue()) == (expected[0][4] == -1)
  event("RACE: files without questions" if empty else "RACE: every file has questions")
  event("RACE: unlabelled split" if expected[0][4] == -1 else "RACE: labelled split")
  return items


@given(files=race_case(), max_len=st.integers(6, 48), max_qa=st.integers(1, 64),
       model_type=st.sampled_from(["xlnet", "mpnet"]), require_answers=st.booleans())
@example(files=[], max_len=8, max_qa=4, model_type="xlnet",
         require_answers=True)  # no files at all
# Regressions. JSON of the wrong shape: TypeError / RecursionError instead of a one-line error.
@example(files=[("high", "0.txt", b'{"article": "a", "questions": null, "options": [], '
                                  b'"answers": []}')], max_len=8, max_qa=4, model_type="xlnet",
         require_answers=True)
@example(files=[("high", "0.txt", b'[{"article": "a"}]')], max_len=8, max_qa=4,
         model_type="xlnet", require_answers=True)
@example(files=[("high", "0.txt", _race_json(answers=[0]))], max_len=8, max_qa=4,
         model_type="xlnet", require_answers=True)
@example(files=[("high", "0.txt", b"[" * 5000)], max_len=8, max_qa=4, model_type="xlnet",
         require_answers=True)
# Question+option longer than the row's room: numpy broadcast error in layouts.pack.
@example(files=[("high", "0.txt", _race_json(options=[["a", "a", "a", "aaa"]]))], max_len=6,
         max_qa=4, model_type="xlnet", require_answers=True)
@example(files=[("high", "0.txt", _race_json(options=[["a", "a", "a", "aa"]]))], max_len=6,
         max_qa=3, model_type="mpnet", require_answers=True)
# A lone surrogate (JSON escape): TypeError inside SentencePiece.
@example(files=[("middle", "0.txt", b'{"article": "a\\ud800b", "questions": ["q"], '
                                    b'"options": [["a", "b", "c", "d"]], "answers": ["B"]}')],
         max_len=16, max_qa=8, model_type="xlnet", require_answers=True)
# An article with a line break: the next item's rows got the wrong context.
@example(files=[("middle", "0.txt", _race_json(article="one\ntwo")),
                ("middle", "1.txt", _race_json(article="three four five"))],
         max_len=24, max_qa=8, model_type="xlnet", require_answers=True)
# Both levels, a file without questions (counted), a second file after a valid one refused.
@example(files=[("high", "0.txt", _race_json()), ("middle", "1.txt", _race_json(
    questions=[], options=[], answers=[])), ("middle", "2.txt", _race_json(answers=["C"]))],
         max_len=16, max_qa=8, model_type="xlnet", require_answers=True)
@example(files=[("high", "0.txt", _race_json()), ("high", "1.txt", _race_json(answers=["E"]))],
         max_len=16, max_qa=8, model_type="xlnet", require_answers=True)
# Without answers (evaluation, prediction): a whole split read with label -1, a mixed one
# refused naming its first file without; a file without questions does not make it mixed.
@example(files=[("high", "0.txt", _race_json(answers=None)), ("middle", "1.txt",
                                                                _race_json(answers=None))],
         max_len=16, max_qa=8, model_type="xlnet", require_answers=False)
@example(files=[("high", "0.txt", _race_json()), ("high", "1.txt", _race_json(answers=None))],
         max_len=16, max_qa=8, model_type="xlnet", require_answers=False)
@example(files=[("high", "0.txt", _race_json(questions=[], options=[], answers=[])),
                ("high", "1.txt", _race_json(answers=None))],
         max_len=16, max_qa=8, model_type="mpnet", require_answers=False)
@example(files=[("high", "0.txt", _race_json(answers=None))], max_len=16, max_qa=8,
         model_type="xlnet", require_answers=True)
@fuzz_settings(600)
@each_input_bounded
def test_fuzz_race_json(tok, files, max_len, max_qa, model_type, require_answers):
  items = check_race(files, require_answers)
  if items is None:
    return
  for level, article, question, options, label in items:
    assert level in race.LEVELS and -1 <= label < 4 and len(options) == 4
  feats = race.encode(tok, items, max_len, max_qa_length=max_qa, model_type=model_type)
  n = len(items)
  assert feats["input_ids"].shape == (n, 4, max_len) == feats["input_mask"].shape
  np.testing.assert_array_equal(feats["label"], [it[4] for it in items])
  np.testing.assert_array_equal(feats["level"], [race.LEVELS.index(it[0]) for it in items])
  if model_type == "xlnet":
    assert (feats["input_ids"][:, :, -1] == CLS_ID).all()
  for k in range(min(n, 3)):   # rows line up with items
    alone = race.encode(tok, items[k:k + 1], max_len, max_qa_length=max_qa,
                        model_type=model_type)
    np.testing.assert_array_equal(feats["input_ids"][k], alone["input_ids"][0])


@st.composite
def unedited_files(draw):
  files = []
  for k in range(draw(st.integers(1, 4))):
    doc = draw(race_valid_doc(min_questions=1))
    text = json.dumps(doc, ensure_ascii=False)
    ascii_only = draw(st.booleans()) or any(0xd800 <= ord(c) < 0xe000 for c in text)
    files.append((draw(st.sampled_from(race.LEVELS)), f"{k}.txt", doc,
                  json.dumps(doc, ensure_ascii=ascii_only).encode("utf-8")))
  return files


@given(files=unedited_files())
@fuzz_settings(60)
def test_race_unedited_files_are_read_whole(files):
  """Zero edits: read without error; every question of every file an item, as generated."""
  root, items, err, out = _read_race([(level, name, data) for level, name, _, data in files])
  assert err is None, err
  expected = [it for level in race.LEVELS for lev, _, doc, _ in files if lev == level
              for it in doc_items(level, doc)]
  assert items == expected
  counts = [f"{level} {sum(it[0] == level for it in expected):,}" for level in race.LEVELS]
  check_summary(out, root, len(expected),
                f"questions from {_plural(len(files), 'file')} ({', '.join(counts)})")
  assert "without questions" not in out.getvalue()
  assert check_race([(level, name, data) for level, name, _, data in files]) == expected


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
