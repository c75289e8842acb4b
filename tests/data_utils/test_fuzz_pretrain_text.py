"""Fuzz suite (tests/fuzz_helpers.py): pretraining text -> records, read back; the docstring
corpus reader.

Every written run is checked against this file's own model of the writer's documented rules,
from the files' bytes: the shards' pieces tile every non-blank file (cut at the first blank
line after shard_bytes), each shard's counts (undecodable lines skipped, sentences, documents,
tokens) and token stream are the model's, and every record's first reuse_len tokens are the
shard's batch lanes step after step, for every step that fits (only the lanes' tails are
dropped, as the release's batchify does). Unedited text (LF and CRLF) is read whole against
its own lines and paragraphs; unedited .py files give exactly their docstrings' documents.
python -m pytest tests/data_utils/test_fuzz_pretrain_text.py"""
import os
import re
import tempfile

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import event, example, given
from hypothesis import strategies as st

from data_utils import corpus, pipeline, record_format, writer
from data_utils.tokenization import CLS_ID, EOD_ID, SEP_ID
from tests.fuzz_helpers import (each_input_bounded, ERRORS, fuzz_settings, file_bytes, check_error,
                                strip_bom)

pytestmark = pytest.mark.slow   # a long system test (pyproject.toml)


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


def shard_model(tok, files, pieces):
  """One shard's token stream by the writer's documented rules, from the files' bytes: each
  piece's lines (split at "\n"; a BOM opening a file dropped; lines that are not UTF-8 skipped
  and counted), then an empty line (a piece ends a document); every line that encodes to ids
  is a sentence, a blank line after a sentence ends a document (<eod> joins that sentence), a
  line that encodes to nothing and is not blank is neither. Returns (stream, counts)."""
  lines, bad = [], 0
  for path, start, end in pieces:
    data = files[path][start:end]
    for raw in (strip_bom(data) if start == 0 else data).split(b"\n"):
      try:
        lines.append(raw.decode("utf-8"))
      except UnicodeDecodeError:
        bad += 1
    lines.append("")
  stream, sentences, documents, after_sentence = [], 0, 0, False
  for line, ids in zip(lines, tok.encode_lines(lines)):
    if len(ids):
      stream += list(ids)
      sentences, after_sentence = sentences + 1, True
    elif not line.strip() and after_sentence:
      stream.append(EOD_ID)
      documents, after_sentence = documents + 1, False
  return np.array(stream, np.int64), {"bad_lines": bad, "sentences": sentences,
                                      "documents": documents}


def lanes_model(stream, params):
  """The batch lanes (the release's batchify: the stream cut into bsz rows, or with bi_data
  bsz/2 rows each followed by itself reversed, per core), and how many steps of reuse_len fit
  a window of seq_len in them."""
  bsz, cores = params.bsz_per_host, params.num_core_per_host
  n_fwd = bsz // 2 if params.bi_data else bsz
  width = len(stream) // n_fwd
  fwd = [stream[r * width:(r + 1) * width] for r in range(n_fwd)]
  lanes = fwd
  if params.bi_data:
    per_core = bsz // cores // 2
    lanes = [lane for c in range(cores) for part in (fwd[c * per_core:(c + 1) * per_core],)
             for lane in part + [l[::-1] for l in part]]
  return lanes, len(range(0, max(width - params.seq_len + 1, 0), params.reuse_len))


_PIECE = re.compile(r"^(.*)\[(\d+):(\d+)\]$")


def check_records(tok, paths, datas, out, params, summary, shard_bytes):
  """The written shards against the test's model: the shards' pieces tile every non-blank file
  (cut just after a line end, at a blank line where one is in reach), each shard's counts and
  token stream are the model's, and the first reuse_len tokens of its records are its lanes,
  step after step, for as many steps as fit (the release drops only the lanes' tails)."""
  files = dict(zip(paths, datas))
  infos = sorted((record_format.read_info(p) for p in record_format.info_paths(out)),
                 key=lambda info: info["shard"])
  assert [info["shard"] for info in infos] == list(range(len(infos)))
  pieces = [[(m.group(1), int(m.group(2)), int(m.group(3)))
             for m in map(_PIECE.match, info["inputs"])] for info in infos]
  flat = [p for shard in pieces for p in shard]
  order = [p for p, _, _ in flat]
  non_blank = [p for p in paths if files[p].strip()]
  assert order == sorted(order) and sorted(set(order)) == non_blank   # each file, in turn
  for path in non_blank:
    data, at = files[path], 0
    mine = [(s, e) for p, s, e in flat if p == path]
    for s, e in mine:
      assert s == at and s < e, (path, mine)
      if e < len(data):       # a cut: the first document end (blank line) after shard_bytes
        ends = [i + len(sep) for sep in (b"\n\n", b"\n\r\n")
                for i in [data.find(sep, s + shard_bytes)] if i >= 0]
        if ends and min(ends) <= s + shard_bytes + (1 << 19):
          assert e == min(ends), (path, s, e, min(ends))
        else:                 # none within 1 MiB: a line end after shard_bytes
          assert e - s >= shard_bytes and data[e - 1:e] == b"\n", (path, s, e)
      at = e
    assert at == len(data), (path, mine)
  for k, shard in enumerate(pieces):           # pieces packed into shards of about shard_bytes
    size = sum(e - s for _, s, e in shard)
    assert size - (shard[-1][2] - shard[-1][1]) < shard_bytes
    assert size >= shard_bytes or k == len(pieces) - 1
  total = {"tokens": 0, "bad_lines": 0, "records": 0}
  for info, shard in zip(infos, pieces):
    stream, counts = shard_model(tok, files, shard)
    assert {k: info[k] for k in counts} == counts
    assert info["tokens"] == len(stream)
    lanes, steps = lanes_model(stream, params)
    assert info["num_batch"] == steps, (info["num_batch"], steps)
    total["tokens"] += len(stream)
    total["bad_lines"] += counts["bad_lines"]
    total["records"] += steps * params.bsz_per_host
    if not steps:
      assert info["record_file"] is None and info.get("skipped")
      continue
    serialized = next(iter(tf.data.TFRecordDataset(os.path.join(out, info["record_file"]))
                           .batch(1 << 20)))
    ids = pipeline.parse(serialized, params)["input_ids"].numpy()
    bsz, reuse = params.bsz_per_host, params.reuse_len
    assert ids.shape == (steps * bsz, params.seq_len)
    expected = np.stack([lanes[k % bsz][(k // bsz) * reuse:(k // bsz + 1) * reuse]
                         for k in range(steps * bsz)])
    np.testing.assert_array_equal(ids[:, :reuse], expected)
  assert {k: summary[k] for k in total} == total
  assert summary["shards"] + summary["skipped_shards"] == len(infos)
  assert summary["empty_files"] == len(paths) - len(non_blank)
  return total


def _write(d, files):
  paths = []
  for k, data in enumerate(files):
    paths.append(os.path.join(d, f"text{k}.txt"))
    with open(paths[-1], "wb") as f:
      f.write(data)
  return paths


@given(files=st.lists(file_bytes(VALID_TEXT.encode()), min_size=1, max_size=2),
       shard_bytes=st.sampled_from([64, 300, 4096, 1 << 20]), bi_data=st.booleans())
@fuzz_settings(100)
@each_input_bounded
def test_fuzz_pretraining_text_to_records(tok, files, shard_bytes, bi_data):
  params = record_format.RecordParams(bi_data=bi_data, **RECORD_PARAMS)
  with tempfile.TemporaryDirectory() as d:
    paths = _write(d, files)
    out, messages = os.path.join(d, "records"), []
    try:
      summary = writer.create(os.path.join(d, "text*.txt"), tok.model_path, out, params,
                              shard_bytes=shard_bytes, progress=messages.append)
    except ERRORS as e:
      check_error(e, os.path.join(d, "text*.txt"))
      assert all(not data.strip() for data in files), e     # only when every file is blank
      return
    event("bad lines skipped" if summary["bad_lines"] else "all lines decoded")
    event("unedited" if all(data == VALID_TEXT.encode() for data in files) else "edited")
    assert all(len(m.splitlines()) == 1 for m in messages)
    assert sum(m.startswith("skipped empty or all-blank file") for m in messages) == sum(
        not data.strip() for data in files)
    total = check_records(tok, paths, files, out, summary.get("params", params), summary,
                          shard_bytes)
    try:
      ds, got, num_batch = pipeline.pretrain_dataset(
          out, params.seq_len, params.reuse_len, params.num_predict, params.bsz_per_host,
          bi_data, repeat=False, expand_records=False)
    except ERRORS as e:
      check_error(e, out)
      assert total["records"] == 0
      event("too little text for one batch")
      return
    event("records read back")
    first = next(iter(ds))                               # the library reader works
    assert first["input_ids"].shape == (params.bsz_per_host // params.num_core_per_host,
                                        params.seq_len)
    assert summary["records"] == num_batch * params.bsz_per_host
    _, record_files, _ = record_format.find_records(out)     # all records, parse + expand
    serialized = next(iter(tf.data.TFRecordDataset(record_files).batch(1 << 20)))
    records = {k: v.numpy() for k, v in pipeline.expand(pipeline.parse(serialized, got),
                                                        got).items()}
    ids = records["input_ids"]
    assert ids.shape == (summary["records"], params.seq_len)
    assert (ids[:, -1] == CLS_ID).all() and (ids[:, -2] == SEP_ID).all()
    assert (records["is_masked"].sum(1) == params.num_predict).all()
    assert (records["target_mask"].sum(1) <= params.num_predict).all()
    assert ((records["seg_ids"] == 2).sum(1) == 1).all()


@pytest.mark.parametrize("shard_bytes", [300, 1 << 20])
@pytest.mark.parametrize("bi_data", [False, True])
def test_unedited_text_is_read_whole(tok, tmp_path, shard_bytes, bi_data):
  """Zero edits: two files of valid text (LF, and CRLF); every line a sentence, every
  paragraph a document ending in <eod>, in order (the shards' streams, end to end, are the
  files' text as written); no line skipped; every shard's records are its lanes in full."""
  params = record_format.RecordParams(bi_data=bi_data, **RECORD_PARAMS)
  files = [VALID_TEXT.encode(), VALID_TEXT.replace("\n", "\r\n").encode()]
  paths = _write(str(tmp_path), files)
  out, messages = str(tmp_path / "records"), []
  summary = writer.create(str(tmp_path / "text*.txt"), tok.model_path, out, params,
                          shard_bytes=shard_bytes, progress=messages.append)
  total = check_records(tok, paths, files, out, params, summary, shard_bytes)
  documents = [d.split("\n") for d in VALID_TEXT.strip("\n").split("\n\n")]
  one_file = [i for doc in documents for i in
              [*(i for ids in tok.encode_lines(doc) for i in ids), EOD_ID]]
  infos = sorted((record_format.read_info(p) for p in record_format.info_paths(out)),
                 key=lambda info: info["shard"])
  streams = [shard_model(tok, dict(zip(paths, files)),
                         [(m.group(1), int(m.group(2)), int(m.group(3)))
                          for m in map(_PIECE.match, info["inputs"])])[0] for info in infos]
  assert np.concatenate(streams).tolist() == 2 * one_file
  assert total == {"tokens": 2 * len(one_file), "bad_lines": 0, "records": total["records"]}
  assert total["records"] > 0 and summary["tokens"] == 2 * len(one_file)
  assert sum(info["sentences"] for info in infos) == 2 * sum(map(len, documents))
  assert sum(info["documents"] for info in infos) == 2 * len(documents)
  assert not any("skipped" in m and "undecodable" in m for m in messages)


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


def valid_py_documents(module):
  """What VALID_PY holds, by the corpus' rules (one document per docstring: module, then its
  functions and classes; sentences of 3 words or more), written out by hand."""
  return [(module, module, ["It has three sentences here.", "The end is near."]),
          (module, "f", ["Return x plus one for every caller.", "Raise nothing at all."]),
          (module, "C", ["A class with a docstring of some words."])]


@given(files=st.lists(st.one_of(file_bytes(VALID_PY), DEEP_PY), min_size=1, max_size=3))
# Regressions: Python's parser raises RecursionError / MemoryError on deep nesting.
@example(files=[b"x = " + b"+".join([b"a"] * 100_000) + b"\n"])
@example(files=[b"x = " + b"-" * 100_000 + b"1\n"])
@example(files=[VALID_PY, b"\xff\xfe\x00", VALID_PY])
@fuzz_settings(200)
@each_input_bounded
def test_fuzz_corpus_documents(files):
  with tempfile.TemporaryDirectory() as d:
    for k, data in enumerate(files):
      with open(os.path.join(d, f"m{k}.py"), "wb") as f:
        f.write(data)
    docs = list(corpus.documents(stdlib_dir=d))
  modules = [f"m{k}" for k in range(len(files))]
  assert [m for m, _, _ in docs] == sorted(m for m, _, _ in docs)     # files in name order
  for module, name, sentences in docs:
    assert module in modules and isinstance(name, str) and sentences
    assert all(isinstance(s, str) and len(s.split()) >= 3 and "\n" not in s
               for s in sentences)
  for module, data in zip(modules, files):      # an unedited file: all its documents, exactly
    if data == VALID_PY:
      event("unedited file")
      assert [doc for doc in docs if doc[0] == module] == valid_py_documents(module)


def test_corpus_unedited_files_are_read_whole(tmp_path):
  for k in range(3):
    (tmp_path / f"m{k}.py").write_bytes(VALID_PY)
  assert list(corpus.documents(stdlib_dir=str(tmp_path))) == [
      doc for k in range(3) for doc in valid_py_documents(f"m{k}")]


NESTED_PY = '''"""Module."""
if x:
  def f():
    """F."""
    class C:
      def g(self): """G."""
try:
  pass
except E:
  def h(): """H."""
else:
  class D: """D."""
finally:
  def k(): """K."""
match y:
  case 1:
    def m(): """M."""
async def a(): """A."""
for i in z:
  def fo(): """Fo."""
else:
  def fe(): """Fe."""
with q:
  def w(): """W."""
while 1:
  lambda: 0
  def wh(): """Wh."""
'''


def test_documents_come_in_ast_walks_order():
  """The corpus reads definitions in ast.walk's order (breadth first): on definitions nested in
  every kind of block, and on the standard library's own files."""
  import ast  # pylint: disable=import-outside-toplevel
  kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
  sources = [NESTED_PY] + [open(os.path.join(os.path.dirname(os.__file__), name),
                                encoding="utf-8").read()
                           for name in ("argparse.py", "typing.py", "asyncio/tasks.py")]
  for source in sources:
    tree = ast.parse(source)
    want = [tree] + [n for n in ast.walk(tree) if isinstance(n, kinds)]
    assert list(corpus._definitions(tree)) == want        # pylint: disable=protected-access


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
