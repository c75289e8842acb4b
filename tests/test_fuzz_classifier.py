"""Fuzz suite (tests/fuzz_helpers.py): GLUE TSV (every task and split), the text-classification
CSV layouts and IMDB folders, each through classifier_features.encode.
python -m pytest tests/test_fuzz_classifier.py"""

import math
import os
import re
import tempfile

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from finetuning import classifier_data, classifier_features
from tests.fuzz_helpers import (each_input_bounded, ERRORS, fuzz_settings, PLAIN, edited, file_bytes, check_error, physical_lines, captured, check_summary)


# ---- GLUE TSV -----------------------------------------------------------------------------------

STSB = "\t".join(["index", "genre", "filename", "year", "old_index", "source1", "source2",
                  "sentence1", "sentence2", "score"]) + "\n"
GLUE_SPLITS = sorted((name, split) for name, spec in classifier_data.GLUE.items()
                     for split in spec.files)


def _has_header(spec, split):
  return spec.header if isinstance(spec.header, bool) else split in spec.header


def _label_value(draw, spec):
  if spec.is_regression:
    return draw(st.sampled_from(["0", "5.000", "3.2", "1.75"]))
  return draw(st.sampled_from(spec.labels))


@st.composite
def glue_case(draw):
  """(task, split, file bytes): a valid file of the task's layout, then hostile edits."""
  name, split = draw(st.sampled_from(GLUE_SPLITS))
  spec = classifier_data.GLUE[name]
  a, b, label = spec.columns[split]
  used = [c for c in (a, b, label) if c is not None and c >= 0]
  n_cols = max(used) + 1 + (label == -1) + draw(st.integers(0, 2))
  if label == -1:
    label = n_cols - 1
  rows = []
  if _has_header(spec, split):
    rows.append(["index"] + [f"col{k}" for k in range(1, n_cols)])
  for k in range(draw(st.integers(3, 8))):
    row = [str(k)] + [draw(st.sampled_from(["x", "12", "main", ""])) for _ in range(n_cols - 1)]
    for col in (a, b):
      if col is not None:
        row[col] = draw(PLAIN)
    if label is not None:
      row[label] = _label_value(draw, spec)
    rows.append(row)
  valid = "".join("\t".join(r) + "\n" for r in rows).encode()
  return name, split, draw(file_bytes(valid))


def _read(spec, split, data):
  """`data` as the split's file, read: the examples (after the summary line is checked), or
  None after the error contract is checked."""
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, spec.files[split])
    with open(path, "wb") as f:
      f.write(data)
    with captured() as out:
      try:
        examples = classifier_data.read_split(spec, d, split)
      except ERRORS as e:
        check_error(e, path, len(physical_lines(data.decode("utf-8", "replace"))))
        return None
    check_summary(out, path, len(examples))
  return examples


def _check_encoded(tok, examples, labels, max_len, model_type):
  """Batch encoding = one-by-one encoding (rows line up with examples); labels in range."""
  feats = classifier_features.encode(tok, examples, max_len, labels, model_type)
  n = len(examples)
  assert feats["input_ids"].shape == (n, max_len) == feats["input_mask"].shape
  for k in range(min(n, 4)):
    alone = classifier_features.encode(tok, examples[k:k + 1], max_len, labels, model_type)
    np.testing.assert_array_equal(feats["input_ids"][k], alone["input_ids"][0])
  if labels:
    test = examples[0].label is None
    assert ((feats["label"] == -1) if test else
            ((feats["label"] >= 0) & (feats["label"] < len(labels)))).all()
  else:
    assert all(e.label is None or math.isfinite(e.label) for e in examples)


@given(case=glue_case(), max_len=st.integers(5, 40), model_type=st.sampled_from(["xlnet", "mpnet"]))
# Regressions: bytes that are not UTF-8 gave a bare UnicodeDecodeError (no file, no line).
@example(case=("ax", "test", b"\x80"), max_len=8, model_type="xlnet")
@example(case=("rte", "dev", b"index\ts1\ts2\tlabel\n0\ta\xff\tb\tentailment\n"), max_len=8,
         model_type="xlnet")
# A score of nan / inf was accepted as an STS-B label.
@example(case=("sts-b", "dev", (STSB + "0\tm\tf\t2012\t1\tx\ty\tA.\tB.\tnan\n").encode()),
         max_len=8, model_type="mpnet")
@fuzz_settings(800)
@each_input_bounded
def test_fuzz_glue_tsv(tok, case, max_len, model_type):
  name, split, data = case
  spec = classifier_data.GLUE[name]
  examples = _read(spec, split, data)
  if examples is None:
    return
  text = data.decode("utf-8-sig")           # what was read must have been UTF-8
  lines = physical_lines(text)
  a, b, label_col = spec.columns[split]
  for ex in examples:
    if re.fullmatch(rf"{split}-\d+", ex.guid):
      candidates = [lines[int(ex.guid.rsplit("-", 1)[1]) - 1]]
    else:   # test files with a header: the guid is the index column
      candidates = [l for l in lines if l.split("\t")[0] == ex.guid]
    rows = [l.split("\t") for l in candidates]
    assert any(len(r) > max(a, b or 0) and ex.text_a == r[a] and (b is None or ex.text_b == r[b])
               for r in rows), (ex, candidates)
    if label_col is None:
      assert ex.label is None
    elif spec.is_regression:
      assert isinstance(ex.label, float) and math.isfinite(ex.label)
    else:
      assert ex.label in spec.labels
  _check_encoded(tok, examples, spec.labels, max_len, model_type)


# ---- text classification: CSV layouts and IMDB folders ------------------------------------------

CSV_TASKS = sorted(n for n, s in classifier_data.TEXT.items() if s.reader == "csv")


@st.composite
def csv_case(draw):
  name = draw(st.sampled_from(CSV_TASKS))
  spec = classifier_data.TEXT[name]
  split = draw(st.sampled_from(sorted(spec.files)))
  n_text = len(spec.columns[split][0])
  rows = []
  for _ in range(draw(st.integers(1, 5))):
    fields = [draw(st.sampled_from(spec.labels))] + [draw(PLAIN) for _ in range(n_text)]
    if draw(st.booleans()):
      fields[-1] = fields[-1] + draw(st.sampled_from([', with a comma', ' say "hi"', "\nnext"]))
    rows.append(",".join('"' + f.replace('"', '""') + '"' for f in fields))
  valid = "".join(r + "\n" for r in rows).encode()
  return name, split, draw(file_bytes(valid))


@given(case=csv_case(), max_len=st.integers(5, 40), model_type=st.sampled_from(["xlnet", "mpnet"]))
# Regression: a line break inside a quoted field split the text in two in the tokenizer's
# batch, so every later row got the next example's tokens (IndexError at the end).
@example(case=("ag-news", "dev", b'"1","a","a\nnext"\n'), max_len=8, model_type="xlnet")
@fuzz_settings(400)
@each_input_bounded
def test_fuzz_text_classification_csv(tok, case, max_len, model_type):
  name, split, data = case
  spec = classifier_data.TEXT[name]
  examples = _read(spec, split, data)
  if examples is None:
    return
  n_lines = len(physical_lines(data.decode("utf-8", "replace")))
  unquoted = data.decode("utf-8-sig").replace('"', "")
  for ex in examples:
    assert ex.label in spec.labels and ex.text_b is None
    line = int(ex.guid.rsplit("-", 1)[1])
    assert 1 <= line <= n_lines
    assert all(w.replace('"', "") in unquoted for w in ex.text_a.split(" ")), ex
  _check_encoded(tok, examples, spec.labels, max_len, model_type)


REVIEW = b"A fine film.<br /><br />The cast is good and the story moves along."


@given(files=st.lists(st.tuples(st.sampled_from(["pos", "neg"]),
                                st.sampled_from(["1_9.txt", "2_3.txt", "3_1.txt", "x.txt.bak",
                                                 "dir.txt"]),
                                st.one_of(edited(REVIEW), st.binary(max_size=100))),
                      max_size=5, unique_by=lambda t: t[:2]))
# Regressions: not UTF-8 (bare UnicodeDecodeError), a directory named *.txt (IsADirectoryError),
# a review starting with a line break (the batch misalignment above), a BOM kept in the text.
@example(files=[("pos", "1_9.txt", b"\xff")])
@example(files=[("neg", "dir.txt", b"")])
@example(files=[("pos", "1_9.txt", b"\nA fine film."), ("neg", "2_3.txt", b"Bad.")])
@example(files=[("neg", "2_3.txt", b"\xef\xbb\xbfGood")])
@fuzz_settings(150)
@each_input_bounded
def test_fuzz_imdb_folders(tok, files):
  spec = classifier_data.TEXT["imdb"]
  with tempfile.TemporaryDirectory() as d:
    split_dir = os.path.join(d, "train")
    expected = {}
    for label, name, data in files:
      os.makedirs(os.path.join(split_dir, label), exist_ok=True)
      path = os.path.join(split_dir, label, name)
      if name == "dir.txt":       # a directory that looks like a review
        os.makedirs(path)
        continue
      with open(path, "wb") as f:
        f.write(data)
      if name.endswith(".txt"):
        expected[(label, name)] = data
    with captured() as out:
      try:
        examples = classifier_data.read_split(spec, d, "train")
      except ERRORS as e:
        check_error(e, split_dir)
        return
    check_summary(out, split_dir, len(examples))
  assert len(examples) == len(expected)
  for ex in examples:
    data = expected[(ex.label, ex.guid)]
    assert ex.text_a == data.decode("utf-8-sig").replace("<br />", " ")
  _check_encoded(tok, examples, spec.labels, 24, "xlnet")



def test_csv_bom_quotes_and_line_numbers(tmp_path):
  spec = classifier_data.TEXT["ag-news"]
  # A BOM (files saved by Excel) glued itself to the first label: '\ufeff"3"' is no label.
  (tmp_path / "train.csv").write_bytes(b'\xef\xbb\xbf"3","Title","Body"\n')
  with captured():
    assert classifier_data.read_split(spec, tmp_path, "train")[0].label == "3"
  # Errors name the row's first line, not its row number (a quoted field spans lines).
  (tmp_path / "train.csv").write_bytes(b'"1","a","b\nc"\n"9","x","y"\n')
  with pytest.raises(ValueError, match=r"train.csv:3: label '9' is not one of"):
    classifier_data.read_split(spec, tmp_path, "train")
  # A stray quote that runs to the end of the file swallowed every row after it, silently.
  (tmp_path / "train.csv").write_bytes(b'"1","a","b"\n"2","a","b\n3,c,d\n4,e,f\n')
  with pytest.raises(ValueError, match=r"train.csv:2: a quoted field opened in this row runs "
                                       r"to the end of the file"):
    classifier_data.read_split(spec, tmp_path, "train")
