"""Fuzzing the readers of user files with hostile inputs (issue #21).

Every generated input must either be read (and the output be sane: shapes, labels in range,
every row traceable to an input row, one summary line naming the file) or raise ValueError /
FileNotFoundError with a one-line message naming the file (and its line when it is a line's
fault): the two types the entry scripts catch and print as `run_xxx.py: <message>`. Any other
exception, a hang (hypothesis deadline) or a wrong row fails the test.

Inputs are valid tiny files put through random edits (hostile text inserted: combining marks,
CJK, RTL, NUL, lone surrogates, BOM, CRLF, lone CR, tabs, quotes, huge lines; bytes flipped,
lines dropped or duplicated, files truncated), raw bytes, empty and header-only files, and for
JSON documents of the wrong shape (lists for objects, missing keys, null, numbers for strings,
wrong option counts, deep nesting, huge numbers). Inputs are bounded (< 1 MB), seeds fixed
(derandomize), no example database.

Inputs per reader (max_examples, plus the @example regressions of the bugs this suite found),
and the seconds each took on the 2-core CI VM (loaded: 58 s for the file, 1.4 GB peak RSS):
  pretraining text -> records (writer.create, then pipeline.pretrain_dataset,
    pipeline.parse and pipeline.expand over every record)                     100    19.5 s
  stdlib docstring corpus (corpus.documents over hostile .py files)             200     3.5 s
  GLUE TSV, every task and split of classifier_data.GLUE (+ encode)             800    19.5 s
  text-classification CSV: Yelp-2/5, Amazon-2/5, DBpedia, AG News (+ encode)    400     5.2 s
  IMDB (aclImdb folders; + encode)                                              150     0.9 s
  RACE JSON (+ race.encode with tiny and odd max_seq_length / max_qa_length)    600     4.8 s

  python -m pytest tests/test_fuzz_readers.py
"""

import contextlib
import copy
import io
import json
import math
import os
import re
import tempfile

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from data_utils import corpus, pipeline, record_format, writer
from data_utils.tokenization import CLS_ID, EOD_ID, SEP_ID, Tokenizer
from finetuning import classifier_data, classifier_features, race
from tests import data_fixtures

ERRORS = (ValueError, FileNotFoundError)


def _settings(n, deadline_ms=5000):
  return settings(max_examples=n, derandomize=True, database=None, deadline=deadline_ms,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.large_base_example,
                                         HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
  """The tiny SentencePiece model (conftest's corpus; 800 pieces, uncased)."""
  d = str(tmp_path_factory.mktemp("fuzz_sp"))
  return Tokenizer(data_fixtures.make_sp_model(d, data_fixtures.make_corpus(d)), lower=True)


# ---- hostile text and edits ---------------------------------------------------------------------

SNIPPETS = ["\x00", "\ufeff", "\r", "\r\n", "\n", "\n\n", "\t", "\t\t", '"', '""', "'", ",",
            "\\", "\\n", "e\u0301", "\u0301\u0302\u0303", "中文字", "日本語の文", "한국어",
            "مرحبا بالعالم", "שלום", "\u202e", "\u200b", "\u2028", "\x85", "\x0b\x0c\x1c",
            "\U0001F600", "\ud800", "\udfff", "nan", "inf", "-inf", "1e309", "-1", "0", "1",
            "2", "5.5", "entailment", "neutral", "pos", "neg", "A", "E", " ", "", "_",
            "<br />", "null", "{}", "[]", "9" * 5000]
_NASTY_ALPHABET = "ab \t\r\n\"',\x00é中\u0301\ufeff\u202e\ud800"
HOSTILE = st.one_of(st.sampled_from(SNIPPETS),
                    st.text(st.characters(exclude_categories=()), max_size=12),
                    st.text(_NASTY_ALPHABET, max_size=24))
PLAIN = st.text("abcdefghij ", min_size=1, max_size=12).filter(lambda s: s.strip())


def to_bytes(text):
  return text.encode("utf-8", "surrogatepass")   # lone surrogates -> invalid UTF-8


_EDITS = ("insert", "insert", "field", "field", "bytes", "delete", "truncate", "bom", "crlf",
          "cr", "tab", "newline", "quote", "dup_line", "drop_line", "huge")


@st.composite
def edited(draw, data, max_edits=5):
  """`data` (bytes) after up to `max_edits` random edits."""
  data = bytearray(data)
  for _ in range(draw(st.integers(0, max_edits))):
    op = draw(st.sampled_from(_EDITS))
    pos = draw(st.integers(0, len(data)))
    if op == "insert":
      data[pos:pos] = to_bytes(draw(HOSTILE))
    elif op == "bytes":
      data[pos:pos] = draw(st.binary(min_size=1, max_size=6))
    elif op == "delete":
      del data[pos:pos + draw(st.integers(1, 30))]
    elif op == "truncate":    # keep 10-90% (drawing the cut point itself often cut it all)
      del data[len(data) * draw(st.integers(1, 9)) // 10:]
    elif op == "bom":
      data[:0] = b"\xef\xbb\xbf"
    elif op == "crlf":
      data = bytearray(bytes(data).replace(b"\n", b"\r\n"))
    elif op == "cr":
      data = bytearray(bytes(data).replace(b"\n", b"\r"))
    elif op in ("tab", "newline", "quote"):
      data[pos:pos] = {"tab": b"\t", "newline": b"\n", "quote": b'"'}[op]
    elif op == "field":       # one field of one line replaced (wrong label, number, empty...)
      lines = bytes(data).split(b"\n")
      k = draw(st.integers(0, len(lines) - 1))
      sep = b"\t" if b"\t" in lines[k] else b","
      fields = lines[k].split(sep)
      fields[draw(st.integers(0, len(fields) - 1))] = to_bytes(draw(HOSTILE))
      lines[k] = sep.join(fields)
      data = bytearray(b"\n".join(lines))
    elif op in ("dup_line", "drop_line"):
      lines = bytes(data).split(b"\n")
      k = draw(st.integers(0, len(lines) - 1))
      lines[k:k + 1] = [lines[k]] * (2 if op == "dup_line" else 0)
      data = bytearray(b"\n".join(lines))
    else:   # a huge line
      data[pos:pos] = b"word " * draw(st.sampled_from([2000, 60_000]))
  return bytes(data)


@st.composite
def file_bytes(draw, valid):
  """Hostile contents around one valid file: mostly edits of it; raw bytes, empty, header only."""
  branch = draw(st.integers(0, 8))    # (st.one_of does not weight a repeated branch)
  if branch < 6:
    return draw(edited(valid))
  return draw([st.binary(max_size=300), st.just(b""),
               st.just(valid.split(b"\n")[0] + b"\n")][branch - 6])


def check_error(err, path, n_lines=None):
  """The error contract: one line, names `path`, a line number (if any) inside the file."""
  assert type(err) in ERRORS, f"{type(err).__name__}: {err}"
  message = str(err)
  event("error: " + re.sub(r"[\d']+.*", "", message.split(": ", 2)[-1])[:40])
  assert len(message.splitlines()) == 1, repr(message)
  assert str(path) in message, message
  m = re.match(re.escape(str(path)) + r":(\d+):", message)
  if m and n_lines is not None:
    assert 1 <= int(m.group(1)) <= n_lines, message


def physical_lines(text):
  """Lines as csv (and universal newlines) cut them."""
  return re.split(r"\r\n|\r|\n", text)


@contextlib.contextmanager
def captured():
  buf = io.StringIO()
  with contextlib.redirect_stdout(buf):
    yield buf


def check_summary(out, path, used):
  """Readers print one summary line naming the file and the count they used."""
  event("read" if used else "read nothing")
  lines = [l for l in out.getvalue().splitlines() if l.strip()]
  assert len(lines) == 1 and str(path) in lines[0], lines
  assert f"used {used:,} " in lines[0], lines[0]


# ---- text -> pretraining records ----------------------------------------------------------------

VALID_TEXT = ("The quick brown fox jumps over the lazy dog.\n"
              "It was the best of times, it was the worst of times.\n"
              "A module docstring says what the module is for.\n\n"
              "Return the number of items in a container.\n"
              "Raise ValueError when the argument is empty.\n"
              "In 2000, 3,000 people read 12,5 pages.\n\n"
              "Open the file and return a stream.\n"
              "The buffer is flushed when the stream is closed.\n") * 3
RECORD_PARAMS = dict(seq_len=16, reuse_len=8, perm_size=8, num_predict=4, bsz_per_host=2,
                     num_core_per_host=1, uncased=True)


def _undecodable_lines(data):
  bad = 0
  for raw in data.split(b"\n"):
    try:
      raw.decode("utf-8")
    except UnicodeDecodeError:
      bad += 1
  return bad


@given(files=st.lists(file_bytes(VALID_TEXT.encode()), min_size=1, max_size=2),
       shard_bytes=st.sampled_from([64, 300, 4096, 1 << 20]), bi_data=st.booleans())
@_settings(100, deadline_ms=20_000)
def test_fuzz_pretraining_text_to_records(tok, files, shard_bytes, bi_data):
  params = record_format.RecordParams(bi_data=bi_data, **RECORD_PARAMS)
  with tempfile.TemporaryDirectory() as d:
    paths = []
    for k, data in enumerate(files):
      paths.append(os.path.join(d, f"text{k}.txt"))
      with open(paths[-1], "wb") as f:
        f.write(data)
    out, messages = os.path.join(d, "records"), []
    try:
      summary = writer.create(os.path.join(d, "text*.txt"), tok.model_path, out, params,
                              shard_bytes=shard_bytes, progress=messages.append)
    except ERRORS as e:
      check_error(e, os.path.join(d, "text*.txt"))
      assert all(not data.strip() for data in files), e     # only when every file is blank
      return
    event("bad lines skipped" if summary["bad_lines"] else "all lines decoded")
    assert all(len(m.splitlines()) == 1 for m in messages)
    non_blank = [data for data in files if data.strip()]
    assert summary["bad_lines"] == sum(_undecodable_lines(data) for data in non_blank)
    try:
      ds, got, num_batch = pipeline.pretrain_dataset(
          out, params.seq_len, params.reuse_len, params.num_predict, params.bsz_per_host,
          bi_data, repeat=False, expand_records=False)
    except ERRORS as e:
      check_error(e, out)
      assert summary["records"] == 0
      event("too little text for one batch")
      return
    event("records read back")
    first = next(iter(ds))                               # the library reader works
    assert first["input_ids"].shape == (params.bsz_per_host // params.num_core_per_host,
                                        params.seq_len)
    assert summary["records"] == num_batch * params.bsz_per_host
    _, files, _ = record_format.find_records(out)     # all records at once, parse + expand
    serialized = next(iter(tf.data.TFRecordDataset(files).batch(1 << 20)))
    records = {k: v.numpy() for k, v in pipeline.expand(pipeline.parse(serialized, got),
                                                        got).items()}
    # Every token comes from the text (or is a separator the writer adds).
    texts = []
    for data in non_blank:
      data = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
      for raw in data.split(b"\n"):
        try:
          texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
          pass
    known = np.concatenate([np.array(ids, np.int64) for ids in tok.encode_lines(texts)]
                           + [np.array([SEP_ID, CLS_ID, EOD_ID], np.int64)])
    ids = records["input_ids"]
    assert ids.shape == (summary["records"], params.seq_len) and np.isin(ids, known).all()
    assert (ids[:, -1] == CLS_ID).all() and (ids[:, -2] == SEP_ID).all()
    assert (records["is_masked"].sum(1) == params.num_predict).all()
    assert (records["target_mask"].sum(1) <= params.num_predict).all()
    assert ((records["seg_ids"] == 2).sum(1) == 1).all()


# ---- the stdlib docstring corpus ----------------------------------------------------------------

VALID_PY = b'''"""A module. It has three sentences here. The end is near."""


def f(x):
  """Return x plus one for every caller. Raise nothing at all."""
  return x + 1


class C:
  """A class with a docstring of some words."""
'''
DEEP_PY = st.sampled_from([b"x = " + b"-" * 100_000 + b"1\n",
                           b"x = " + b"+".join([b"a"] * 100_000) + b"\n",
                           b"x = " + b"(" * 300 + b")" * 300 + b"\n",
                           b'"""doc"""\n\x00\n', b"\xff\xfe\x00"])


@given(files=st.lists(st.one_of(file_bytes(VALID_PY), DEEP_PY), min_size=1, max_size=3))
# Regressions: Python's parser raises RecursionError / MemoryError on deep nesting.
@example(files=[b"x = " + b"+".join([b"a"] * 100_000) + b"\n"])
@example(files=[b"x = " + b"-" * 100_000 + b"1\n"])
@_settings(200)
def test_fuzz_corpus_documents(files):
  with tempfile.TemporaryDirectory() as d:
    for k, data in enumerate(files):
      with open(os.path.join(d, f"m{k}.py"), "wb") as f:
        f.write(data)
    docs = list(corpus.documents(stdlib_dir=d))
    for module, name, sentences in docs:
      assert module.startswith("m") and isinstance(name, str) and sentences
      assert all(isinstance(s, str) and len(s.split()) >= 3 and "\n" not in s
                 for s in sentences)


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
@_settings(800)
def test_fuzz_glue_tsv(tok, case, max_len, model_type):
  name, split, data = case
  spec = classifier_data.GLUE[name]
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, spec.files[split])
    with open(path, "wb") as f:
      f.write(data)
    n_lines = len(physical_lines(data.decode("utf-8", "replace")))
    with captured() as out:
      try:
        examples = classifier_data.read_split(spec, d, split)
      except ERRORS as e:
        check_error(e, path, n_lines)
        return
    check_summary(out, path, len(examples))
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
@_settings(400)
def test_fuzz_text_classification_csv(tok, case, max_len, model_type):
  name, split, data = case
  spec = classifier_data.TEXT[name]
  with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, spec.files[split])
    with open(path, "wb") as f:
      f.write(data)
    n_lines = len(physical_lines(data.decode("utf-8", "replace")))
    with captured() as out:
      try:
        examples = classifier_data.read_split(spec, d, split)
      except ERRORS as e:
        check_error(e, path, n_lines)
        return
    check_summary(out, path, len(examples))
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
@_settings(150)
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
@_settings(600)
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


# ---- plain regression tests (behaviour an error-tolerant contract cannot see) -------------------

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


def test_pretraining_text_crlf_documents_and_bom(tmp_path, tok):
  # CRLF blank lines ("\r\n\r\n") were not seen as document ends: shards were cut inside
  # documents (at the first newline after 1 MiB without a "\n\n", or mid-document).
  docs = ["first doc line one\r\nline two\r\n", "second doc\r\nmore\r\n", "third\r\n"]
  path = tmp_path / "crlf.txt"
  path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(docs).encode())
  shards, _ = writer.plan_shards([str(path)], 10)
  data = path.read_bytes()
  assert [data[s:e] for sh in shards for _, s, e in sh.pieces] == [
      b"\xef\xbb\xbf" + docs[0].encode() + b"\r\n", docs[1].encode() + b"\r\n",
      docs[2].encode()]
  lines, bad, _ = writer.read_lines(shards[0])     # a BOM opening the file is not text
  assert lines[0] == "first doc line one\r" and bad == 0
  stream, _, counts = writer.build_stream(tok, lines)
  assert counts["documents"] == 1 and stream[:len(tok.encode(lines[0]))].tolist() == tok.encode(
      "first doc line one")
