"""Fuzz suite (tests/fuzz_helpers.py): pretraining text -> records, read back; the docstring
corpus reader. python -m pytest tests/test_fuzz_pretrain_text.py"""

import os
import tempfile

import numpy as np
import tensorflow as tf
from hypothesis import event, example, given
from hypothesis import strategies as st

from data_utils import corpus, pipeline, record_format, writer
from data_utils.tokenization import CLS_ID, EOD_ID, SEP_ID
from tests.fuzz_helpers import (each_input_bounded, ERRORS, fuzz_settings, file_bytes, check_error)


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
@fuzz_settings(100, deadline_ms=20_000)
@each_input_bounded
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
@fuzz_settings(200)
@each_input_bounded
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
