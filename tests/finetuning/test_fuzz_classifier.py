"""Fuzz suite (tests/fuzz_helpers.py): GLUE TSV (every task and split), the text-classification
CSV layouts and IMDB folders, each through classifier_features.encode.

Every input is first judged by this file's own model of read_split's documented rules (built
from the bytes, never from the reader): which rows are examples (guid, texts, label), which are
skipped and counted (blank lines; GLUE train/dev lines with too few columns), or which line must
be refused. The reader must then do exactly that: refuse (one line naming the file, and the
line the model names) where the model refuses, else return exactly the model's examples in
order with the model's counts in its summary. Unedited files (a separate test per layout, and
edits drawn to zero in the fuzz tests) are also checked against the generator's own rows.
python -m pytest tests/finetuning/test_fuzz_classifier.py"""

import csv
import io
import json
import math
import os
import re
import tempfile

import numpy as np
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from finetuning import classifier_data, classifier_features
from tests.fuzz_helpers import (each_input_bounded, ERRORS, fuzz_settings, PLAIN, edited,
                                file_bytes, physical_lines, captured, check_summary,
                                check_refusal, split_lines, strip_bom)

pytestmark = pytest.mark.slow   # a long system test (pyproject.toml)

UNDECODED = re.compile("[\udc80-\udcff]")


def _plural(n, unit):
  return f"{n:,} {unit if n == 1 else unit + 's'}"


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
def glue_file(draw, name_split=None):
  """(task, split, header row or None, data rows, file bytes): a valid file of the layout."""
  name, split = name_split or draw(st.sampled_from(GLUE_SPLITS))
  spec = classifier_data.GLUE[name]
  a, b, label = spec.columns[split]
  used = [c for c in (a, b, label) if c is not None and c >= 0]
  n_cols = max(used) + 1 + (label == -1) + draw(st.integers(0, 2))
  if label == -1:
    label = n_cols - 1
  header = ["index"] + [f"col{k}" for k in range(1, n_cols)] if _has_header(spec, split) else None
  rows = []
  for k in range(draw(st.integers(3, 8))):
    row = [str(k)] + [draw(st.sampled_from(["x", "12", "main", ""])) for _ in range(n_cols - 1)]
    for col in (a, b):
      if col is not None:
        row[col] = draw(PLAIN)
    if label is not None:
      row[label] = _label_value(draw, spec)
    rows.append(row)
  data = "".join("\t".join(r) + "\n" for r in ([header] if header else []) + rows).encode()
  return name, split, header, rows, data


@st.composite
def glue_case(draw):
  """(task, split, file bytes): a valid file of the task's layout, then hostile edits."""
  name, split, _, _, valid = draw(glue_file())
  return name, split, draw(file_bytes(valid))


def glue_expected(spec, split, rows, header):
  """The examples of an unedited file, from the generator's rows: every row, in order."""
  a, b, label = spec.columns[split]
  out = []
  for k, row in enumerate(rows):
    line = k + 1 + (header is not None)
    guid = row[0] if split.startswith("test") and header else f"{split}-{line}"
    value = (None if label is None else float(row[label]) if spec.is_regression
             else row[label])
    out.append((guid, row[a], None if b is None else row[b], value))
  return out


def glue_model(spec, split, data):
  """read_split's documented rules applied to `data` by this test: ("refuse", line or None) or
  ("read", [(guid, text_a, text_b, label)], lines counted, blank, too short)."""
  a, b, label_col = spec.columns[split]
  needed = max(c + 1 if c >= 0 else -c for c in (a, b, label_col) if c is not None)
  header, test = _has_header(spec, split), split.startswith("test")
  out, total, blank, short = [], 0, 0, 0
  for k, raw in enumerate(split_lines(strip_bom(data))):
    line = k + 1
    try:
      text = raw.decode("utf-8")
    except UnicodeDecodeError:
      return "refuse", line                 # not UTF-8 (a header too)
    if header and k == 0:
      continue
    total += 1
    fields = text.split("\t")               # no quoting in GLUE's TSV
    if all(not f.strip() for f in fields):
      blank += 1
      continue
    if len(fields) < needed:
      if test:
        return "refuse", line               # the submission needs every index
      short += 1
      continue
    value = None
    if label_col is not None:
      value = fields[label_col].strip()
      if spec.is_regression:
        try:
          value = float(value)
        except ValueError:
          value = math.nan
        if not math.isfinite(value):
          return "refuse", line
      elif value not in spec.labels:
        return "refuse", line
    guid = fields[0] if test and header else f"{split}-{line}"
    out.append((guid, fields[a], None if b is None else fields[b], value))
  if not out:
    return "refuse", None
  return "read", out, total, blank, short


def _summary_parts(total, unit, **skipped):
  """The totals a summary line must state; no "skipped" part when nothing was skipped."""
  parts = [f" of {_plural(total, unit)}"]
  reasons = [f"{n:,} {why}" for why, n in skipped.items() if n]
  if reasons:
    parts.append(f"skipped {sum(skipped.values()):,}: ")
  return parts + reasons


def _read(spec, split, data):
  """`data` as the split's file, read: (path, examples or None, the error or None, stdout)."""
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, spec.files[split])
    with open(path, "wb") as f:
      f.write(data)
    with captured() as out:
      try:
        return path, classifier_data.read_split(spec, d, split), None, out
      except ERRORS as e:
        return path, None, e, out


def _as_tuples(examples):
  return [(e.guid, e.text_a, e.text_b, e.label) for e in examples]


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


def check_glue(spec, split, data):
  """read_split on `data` does exactly what glue_model says; returns the examples (or None)."""
  path, examples, err, out = _read(spec, split, data)
  model = glue_model(spec, split, data)
  if model[0] == "refuse":
    assert err is not None, ("the model refuses at line", model[1], _as_tuples(examples))
    check_refusal(err, path, model[1], len(physical_lines(data.decode("utf-8", "replace"))))
    return None
  assert err is None, f"refused a file the model reads ({len(model[1])} examples): {err}"
  _, expected, total, blank, short = model
  assert _as_tuples(examples) == expected
  check_summary(out, path, len(expected), *_summary_parts(
      total, "line", **{"with too few columns": short, "blank": blank}))
  event("GLUE: lines skipped" if blank + short else "GLUE: every line used")
  return examples


@given(case=glue_case(), max_len=st.integers(5, 40), model_type=st.sampled_from(["xlnet", "mpnet"]))
# Regressions: bytes that are not UTF-8 gave a bare UnicodeDecodeError (no file, no line).
@example(case=("ax", "test", b"\x80"), max_len=8, model_type="xlnet")
@example(case=("rte", "dev", b"index\ts1\ts2\tlabel\n0\ta\xff\tb\tentailment\n"), max_len=8,
         model_type="xlnet")
# A score of nan / inf was accepted as an STS-B label.
@example(case=("sts-b", "dev", (STSB + "0\tm\tf\t2012\t1\tx\ty\tA.\tB.\tnan\n").encode()),
         max_len=8, model_type="mpnet")
# Blank and short lines skipped and counted; a CR line end, a BOM.
@example(case=("qnli", "train", b"\xef\xbb\xbfindex\tq\ts\tlabel\r\n\r\n1\tq\r2\tq\ts\tentailment\n"
                                b" \t \n"), max_len=8, model_type="xlnet")
@fuzz_settings(800)
@each_input_bounded
def test_fuzz_glue_tsv(tok, case, max_len, model_type):
  name, split, data = case
  spec = classifier_data.GLUE[name]
  examples = check_glue(spec, split, data)
  if examples is not None:
    _check_encoded(tok, examples, spec.labels, max_len, model_type)


@pytest.mark.parametrize("name,split", GLUE_SPLITS)
@given(data=st.data())
@fuzz_settings(6)
def test_glue_unedited_files_are_read_whole(name, split, data):
  """Zero edits: read without error, every row an example, as the generator wrote it."""
  spec = classifier_data.GLUE[name]
  _, _, header, rows, valid = data.draw(glue_file((name, split)))
  path, examples, err, out = _read(spec, split, valid)
  assert err is None, err
  assert _as_tuples(examples) == glue_expected(spec, split, rows, header)
  check_summary(out, path, len(rows), f"used {len(rows):,} of {_plural(len(rows), 'line')}")
  assert "skipped" not in out.getvalue()
  assert check_glue(spec, split, valid) is not None      # and the model agrees


# ---- text classification: CSV layouts and IMDB folders ------------------------------------------

CSV_TASKS = sorted(n for n, s in classifier_data.TEXT.items() if s.reader == "csv")


def _quote(field):
  return '"' + field.replace('"', '""') + '"'


@st.composite
def csv_file(draw, name=None):
  """(task, split, rows, file bytes): a valid CSV of the layout, every field quoted."""
  name = name or draw(st.sampled_from(CSV_TASKS))
  spec = classifier_data.TEXT[name]
  split = draw(st.sampled_from(sorted(spec.files)))
  n_text = len(spec.columns[split][0])
  rows = []
  for _ in range(draw(st.integers(1, 5))):
    fields = [draw(st.sampled_from(spec.labels))] + [draw(PLAIN) for _ in range(n_text)]
    if draw(st.booleans()):
      fields[-1] = fields[-1] + draw(st.sampled_from([', with a comma', ' say "hi"', "\nnext",
                                                      "\r\nnext"]))
    rows.append(fields)
  data = "".join(",".join(map(_quote, r)) + "\n" for r in rows).encode()
  return name, split, rows, data


@st.composite
def csv_case(draw):
  name, split, _, valid = draw(csv_file())
  return name, split, draw(file_bytes(valid))


def csv_expected(split, rows):
  """The examples of an unedited CSV, from the generator's rows (a row's first line: 1 + the
  line breaks of the rows before it)."""
  out, line = [], 1
  for fields in rows:
    out.append((f"{split}-{line}", " ".join(fields[1:]), None, fields[0]))
    line += 1 + sum(len(physical_lines(f)) - 1 for f in fields)
  return out


def parse_csv(text):
  """[(first line, fields)] of `text` by the CSV dialect read_split uses (Excel's, as Python's
  csv module documents it), written out here: a field opened by a quote runs to the next single
  quote ("" is a quote), characters after it join the field; a quote inside an unquoted field
  is a character; \\r\\n, \\r or \\n end a row outside quotes. A quoted field still open at the
  end of the text: (first line, None) ends the list."""
  rows, i, n, line = [], 0, len(text), 1
  while i < n:
    start, fields = line, []
    while True:
      buf = []
      if text[i:i + 1] == '"':                       # a quoted field
        i += 1
        while True:
          if i >= n:
            return rows + [(start, None)]
          c = text[i]
          if c == '"':
            if text[i + 1:i + 2] == '"':
              buf.append('"')
              i += 2
              continue
            i += 1
            break
          if c in "\r\n":
            line += 1
            if text[i:i + 2] == "\r\n":
              buf.append("\r")
              i += 1
          buf.append(text[i])
          i += 1
      while i < n and text[i] not in ",\r\n":        # unquoted (or after the closing quote)
        buf.append(text[i])
        i += 1
      fields.append("".join(buf))
      if i < n and text[i] == ",":
        i += 1
        continue
      if i < n:                                      # the row's end
        i += 2 if text[i:i + 2] == "\r\n" else 1
        line += 1
      break
    rows.append((start, fields))
  return rows


def csv_model(spec, split, data):
  """("refuse", line or None) or ("read", [(guid, text_a, None, label)], rows, blank)."""
  text_cols, _, label_col = spec.columns[split]
  needed = max(*text_cols, label_col) + 1
  out, blank = [], 0
  rows = parse_csv(strip_bom(data).decode("utf-8", "surrogateescape"))
  for line, fields in rows:
    if fields is None or UNDECODED.search("".join(fields)):
      return "refuse", line      # a stray quote swallowing the rest; bytes that are not UTF-8
    if all(not f.strip() for f in fields):
      blank += 1
      continue
    if len(fields) < needed:
      return "refuse", line      # the CSV layouts are regular: no short rows
    if fields[label_col].strip() not in spec.labels:
      return "refuse", line
    out.append((f"{split}-{line}", " ".join(fields[c] for c in text_cols), None,
                fields[label_col].strip()))
  if not out:
    return "refuse", None
  return "read", out, len(rows), blank


def check_csv(spec, split, data):
  path, examples, err, out = _read(spec, split, data)
  model = csv_model(spec, split, data)
  if model[0] == "refuse":
    assert err is not None, ("the model refuses at line", model[1], _as_tuples(examples))
    check_refusal(err, path, model[1], len(physical_lines(data.decode("utf-8", "replace"))))
    return None
  assert err is None, f"refused a file the model reads ({len(model[1])} examples): {err}"
  _, expected, total, blank = model
  assert _as_tuples(examples) == expected
  check_summary(out, path, len(expected), *_summary_parts(total, "row", blank=blank))
  event("CSV: rows skipped" if blank else "CSV: every row used")
  return examples


@given(case=csv_case(), max_len=st.integers(5, 40), model_type=st.sampled_from(["xlnet", "mpnet"]))
# Regression: a line break inside a quoted field split the text in two in the tokenizer's
# batch, so every later row got the next example's tokens (IndexError at the end).
@example(case=("ag-news", "dev", b'"1","a","a\nnext"\n'), max_len=8, model_type="xlnet")
# A file cut inside its last quoted field was read silently (the text cut short); a quote inside
# an unquoted field made a row with a multi-line field "run to the end of the file".
@example(case=("ag-news", "dev", b'"1","a","a\n'), max_len=8, model_type="xlnet")
@example(case=("ag-news", "dev", b'"1","a","b"\n"2","a","b'), max_len=8, model_type="xlnet")
@example(case=("ag-news", "dev", b'"1",x"y,"a\nb"\n'), max_len=8, model_type="xlnet")
@fuzz_settings(400)
@each_input_bounded
def test_fuzz_text_classification_csv(tok, case, max_len, model_type):
  name, split, data = case
  spec = classifier_data.TEXT[name]
  examples = check_csv(spec, split, data)
  if examples is not None:
    _check_encoded(tok, examples, spec.labels, max_len, model_type)


@pytest.mark.parametrize("name", CSV_TASKS)
@given(data=st.data())
@fuzz_settings(10)
def test_csv_unedited_files_are_read_whole(name, data):
  """Zero edits: read without error, every row an example, as the generator wrote it."""
  spec = classifier_data.TEXT[name]
  _, split, rows, valid = data.draw(csv_file(name))
  path, examples, err, out = _read(spec, split, valid)
  assert err is None, err
  assert _as_tuples(examples) == csv_expected(split, rows)
  check_summary(out, path, len(rows), f"used {len(rows):,} of {_plural(len(rows), 'row')}")
  assert "skipped" not in out.getvalue()
  assert check_csv(spec, split, valid) is not None       # and the model agrees


REVIEW = b"A fine film.<br /><br />The cast is good and the story moves along."
IMDB_NAMES = ["1_9.txt", "2_3.txt", "3_1.txt", "x.txt.bak", "dir.txt"]


def _read_imdb(files):
  """`files` [(label, name, bytes)] written as train/{label}/{name} ("dir.txt": a directory),
  read: (split dir, examples or None, error or None, stdout)."""
  spec = classifier_data.TEXT["imdb"]
  with tempfile.TemporaryDirectory() as d:
    split_dir = os.path.join(d, "train")
    for label, name, data in files:
      os.makedirs(os.path.join(split_dir, label), exist_ok=True)
      path = os.path.join(split_dir, label, name)
      if name == "dir.txt":       # a directory that looks like a review
        os.makedirs(path)
        continue
      with open(path, "wb") as f:
        f.write(data)
    with captured() as out:
      try:
        return split_dir, classifier_data.read_split(spec, d, "train"), None, out
      except ERRORS as e:
        return split_dir, None, e, out


def imdb_model(files):
  """Every */*.txt is a review (label: its folder; text: UTF-8, BOM dropped, <br /> a space), in
  label then name order; one that cannot be read as UTF-8 text (or no review at all): refused."""
  reviews = sorted((label, name, data) for label, name, data in files if name.endswith(".txt"))
  if not reviews:
    return "refuse", None
  out = []
  for label, name, data in reviews:
    try:
      if name == "dir.txt":
        raise ValueError
      out.append((name, strip_bom(data).decode("utf-8").replace("<br />", " "), None, label))
    except ValueError:
      return "refuse", name
  return "read", out


@given(files=st.lists(st.tuples(st.sampled_from(["pos", "neg"]), st.sampled_from(IMDB_NAMES),
                                st.one_of(edited(REVIEW), st.binary(max_size=100))),
                      max_size=5, unique_by=lambda t: t[:2]))
# Regressions: not UTF-8 (bare UnicodeDecodeError), a directory named *.txt (IsADirectoryError),
# a review starting with a line break (the batch misalignment above), a BOM kept in the text.
@example(files=[("pos", "1_9.txt", b"\xff")])
@example(files=[("neg", "dir.txt", b"")])
@example(files=[("pos", "1_9.txt", b"\nA fine film."), ("neg", "2_3.txt", b"Bad.")])
@example(files=[("neg", "2_3.txt", b"\xef\xbb\xbfGood")])
@example(files=[("neg", "2_3.txt", REVIEW), ("pos", "1_9.txt", REVIEW), ("pos", "3_1.txt", b"")])
@fuzz_settings(150)
@each_input_bounded
def test_fuzz_imdb_folders(tok, files):
  spec = classifier_data.TEXT["imdb"]
  split_dir, examples, err, out = _read_imdb(files)
  model = imdb_model(files)
  if model[0] == "refuse":
    assert err is not None, ("the model refuses", model[1], _as_tuples(examples))
    check_refusal(err, split_dir if model[1] is None else os.path.join(split_dir, ""))
    if model[1] is not None:
      assert model[1] in str(err), (model[1], str(err))
    return
  assert err is None, f"refused folders the model reads: {err}"
  assert sorted(_as_tuples(examples), key=lambda t: (t[3], t[0])) == model[1]
  counts = [f"{sum(l == label for l, n, _ in files if n.endswith('.txt')):,} {label}"
            for label in spec.labels]
  check_summary(out, split_dir, len(model[1]), f"({', '.join(counts)})")
  _check_encoded(tok, examples, spec.labels, 24, "xlnet")


def test_imdb_unedited_folders_are_read_whole():
  """Zero edits: every review of both folders is an example, text as written (<br /> a space)."""
  files = [(label, name, REVIEW + name.encode()) for label in ("neg", "pos")
           for name in IMDB_NAMES[:3]]
  split_dir, examples, err, out = _read_imdb(files)
  assert err is None, err
  text = "A fine film.  The cast is good and the story moves along."
  assert sorted(_as_tuples(examples), key=lambda t: (t[3], t[0])) == [
      (name, text + name, None, label) for label in ("neg", "pos") for name in IMDB_NAMES[:3]]
  check_summary(out, split_dir, 6, "(3 neg, 3 pos)")


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


# ---- your own data: TSV / CSV / JSON Lines tables (finetuning/table_data.py) -------------------
# Written by the standard library's own writers (csv, json) from generated rows; read back, the
# rows must come out exactly (texts, labels, ids, the line each row starts on). Edited tables are
# held to the error contract only: the examples, or one ValueError / FileNotFoundError line
# naming the file (and a line inside it).

from finetuning import table_data   # noqa: E402

TABLE_TEXT = {   # what each format can hold in a cell
    "tsv": st.text(st.characters(exclude_characters="\t\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
                                 exclude_categories=("Cs",)), max_size=12),
    "csv": st.text(st.characters(exclude_characters="\r", exclude_categories=("Cs",)),
                   max_size=12),
    "jsonl": st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
}
TABLE_LABELS = ("neg", "pos", "10", "2")


@st.composite
def table_file(draw, kind=None):
  """(kind, columns, rows [(id or None, text_a, text_b or None, label)], bytes)."""
  kind = kind or draw(st.sampled_from(sorted(TABLE_TEXT)))
  pair, ids = draw(st.booleans()), draw(st.booleans())
  columns = table_data.Columns("q", "r" if pair else None, "y", "key")
  names = ["y", "q"] + (["r"] if pair else []) + (["key"] if ids else []) + ["extra"]
  text = TABLE_TEXT[kind]
  if kind != "jsonl":      # a text that is all blank would make a blank row (skipped)
    text = text.filter(lambda s: s.strip())
  rows = []
  for k in range(draw(st.integers(1, 6))):
    rows.append((f"id{k}" if ids else None, draw(text), draw(text) if pair else None,
                 draw(st.sampled_from(TABLE_LABELS))))
  records = [{"y": l, "q": a, **({"r": b} if pair else {}), **({"key": i} if ids else {}),
              "extra": "x"} for i, a, b, l in rows]
  if kind == "jsonl":
    data = "".join(json.dumps(r) + "\n" for r in records)
    starts = list(range(1, len(rows) + 1))
  else:
    out = io.StringIO()
    if kind == "tsv":        # GLUE's layout: cells joined by tabs, no quoting
      writer = type("Tsv", (), {"writerow": lambda self, cells: out.write("\t".join(cells) + "\n")})()
    else:
      writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    starts, line = [], 2
    for r in records:
      before = out.tell()
      writer.writerow([r[n] for n in names])
      starts.append(line)
      line += out.getvalue()[before:].count("\n")
    data = out.getvalue()
  return kind, columns, rows, starts, data.encode("utf-8")


def _read_table(kind, columns, data, labels=None):
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, f"dev.{kind}")
    with open(path, "wb") as f:
      f.write(data)
    try:
      return path, table_data.read_table(path, "dev", columns, labels=labels,
                                         report=lambda _: None)
    except ERRORS as e:
      return path, e


@given(case=table_file())
@fuzz_settings(150)
def test_tables_written_by_the_standard_writers_are_read_whole(case):
  kind, columns, rows, starts, data = case
  event(kind)
  path, examples = _read_table(kind, columns, data, labels=TABLE_LABELS)
  assert not isinstance(examples, Exception), examples
  assert [(e.guid, e.text_a, e.text_b, e.label) for e in examples] == [
      (i if i is not None else f"dev-{line}", a, b, l) for (i, a, b, l), line in
      zip(rows, starts)]


@given(case=table_file(), edits=st.data())
@fuzz_settings(300)
@each_input_bounded
def test_edited_tables_are_read_or_refused_in_one_line(case, edits):
  kind, columns, _, _, valid = case
  data = edits.draw(file_bytes(valid))
  path, result = _read_table(kind, columns, data, labels=TABLE_LABELS)
  if isinstance(result, Exception):
    n_lines = max(len(split_lines(data)), 1)
    check_refusal(result, path, n_lines=n_lines)
  else:
    event("read")
    assert all(isinstance(e.text_a, str) and e.label in (None, *TABLE_LABELS) for e in result)
