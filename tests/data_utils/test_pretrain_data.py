"""create_pretrain_data.py end to end: records written, read back, expanded."""

import glob
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_utils import pipeline, record_format, sampling, writer
from data_utils.tokenization import CLS_ID, SEP_ID, Tokenizer, preprocess_text
from tests import warm
from tests.hang_guard import HANG_GUARD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARAMS = record_format.RecordParams(seq_len=64, reuse_len=32, perm_size=16, num_predict=10,
                                    bsz_per_host=4, num_core_per_host=2, bi_data=True,
                                    uncased=True)


def _create(text, sp, out, params=PARAMS, **kw):
  kw.setdefault("shard_bytes", 60_000)
  return writer.create(text, sp, str(out), params, progress=lambda m: None, **kw)


def _files(out):
  return {os.path.basename(p): open(p, "rb").read()
          for p in sorted(glob.glob(os.path.join(out, "*")))}


@pytest.fixture(scope="module")
def records(tmp_path_factory, text_and_sp):
  text, sp = text_and_sp
  out = tmp_path_factory.mktemp("records")
  summary = _create(text, sp, out)
  return out, summary


def _read_all(out, params=PARAMS, expand=True, first_file_only=False):
  _, files, _ = record_format.find_records(str(out))
  ds = tf.data.TFRecordDataset(files[:1] if first_file_only else files).batch(256)
  ds = ds.map(lambda x: pipeline.parse(x, params))
  if expand:
    ds = ds.map(lambda x: pipeline.expand(x, params))
  batches = list(ds.as_numpy_iterator())
  return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_write_read_round_trip(records, text_and_sp):
  out, summary = records
  text, sp = text_and_sp
  assert summary["shards"] >= 3 and summary["records"] > 500
  # Rebuild shard 0's arrays directly and compare with what the reader decodes.
  shards, _ = writer.plan_shards([text], 60_000)
  tok = Tokenizer(sp, lower=True)
  lines, _, _ = writer.read_lines(shards[0])
  stream, sent, _ = writer.build_stream(tok, lines)
  params = PARAMS.__class__(**{**PARAMS.__dict__, "vocab_size": tok.vocab_size})
  feats, num_batch, _ = writer.build_records(np.random.default_rng([0, 0]), stream, sent,
                                             params, tok.start_piece)
  path = os.path.join(out, params.record_name("train", 0))
  got = list(tf.data.TFRecordDataset(path).batch(10_000).map(
      lambda x: pipeline.parse(x, params)).as_numpy_iterator())[0]
  assert len(got["input_ids"]) == num_batch * PARAMS.bsz_per_host
  np.testing.assert_array_equal(got["input_ids"], feats["input_ids"].view("<u2"))
  np.testing.assert_array_equal(got["perm"], feats["perm"])
  np.testing.assert_array_equal(got["is_masked"],
                                np.unpackbits(feats["is_masked"], axis=1, bitorder="little") > 0)
  meta = feats["meta"].view("<u2")
  np.testing.assert_array_equal(got["a_len"], meta[:, 0])
  np.testing.assert_array_equal(got["label"], meta[:, 1])


def test_layout_and_segments(records):
  out, _ = records
  ex = _read_all(out, first_file_only=True)  # lanes continue within a shard
  ids, seg = ex["input_ids"], ex["seg_ids"]
  assert (ids[:, -1] == CLS_ID).all() and (ids[:, -2] == SEP_ID).all()
  assert ((ids == SEP_ID).sum(1) == 2).all()
  first_sep = np.argmax(ids == SEP_ID, axis=1)
  for k in range(len(ids)):
    s = first_sep[k]
    assert s >= PARAMS.reuse_len
    assert (seg[k, :s + 1] == 0).all() and (seg[k, s + 1:-1] == 1).all() and seg[k, -1] == 2
  assert 0.3 < ex["label"].mean() < 0.7
  # consecutive records of a lane continue each other: A is the start of the next reuse part
  bsz, reuse = PARAMS.bsz_per_host, PARAMS.reuse_len
  a_len = first_sep - reuse
  for k in range(len(ids) - bsz):
    np.testing.assert_array_equal(ids[k + bsz, :a_len[k]], ids[k, reuse:reuse + a_len[k]])
  assert (a_len > 0).mean() > 0.9


def test_expanded_masks_follow_the_factorization_order(records):
  out, _ = records
  ex = _read_all(out)
  reuse, seq_len = PARAMS.reuse_len, PARAMS.seq_len
  half = np.arange(seq_len) >= reuse
  for k in range(0, len(ex["input_ids"]), 7):
    pm, tm = ex["perm_mask"][k] > 0, ex["target_mapping"][k]
    ids = ex["input_ids"][k]
    func = (ids == SEP_ID) | (ids == CLS_ID)
    target = ex["is_masked"][k] & ~func
    assert target.sum() == PARAMS.num_predict                      # exactly num_predict
    assert not (ex["is_masked"][k] & func).any()                    # never <sep>/<cls>
    np.testing.assert_array_equal(tm.sum(0), target)                # each target once
    np.testing.assert_array_equal(tm.sum(1), np.ones(PARAMS.num_predict))
    np.testing.assert_array_equal(ex["target"][k], ids[tm.argmax(1)])
    assert pm[np.ix_(~half, half)].all()                            # reuse sees none of new
    assert not pm[np.ix_(half, ~half)].any()                        # new sees all of reuse
    t = np.flatnonzero(target)
    assert pm[t, t].all()                                           # a target never sees itself
    for h in (False, True):      # within a half: non-targets see no target, all non-targets
      non = np.flatnonzero(~target & ~func & (half == h))
      tt = np.flatnonzero(target & (half == h))
      assert pm[np.ix_(non, tt)].all() and not pm[np.ix_(non, non)].any()


@pytest.mark.parametrize("seed", range(6))
def test_mask_properties_over_seeds(seed, text_and_sp):
  text, sp = text_and_sp
  tok = Tokenizer(sp, lower=True)
  lines = open(text, encoding="utf-8").read().split("\n")[:1500]
  stream, sent, _ = writer.build_stream(tok, lines)
  params = PARAMS.__class__(**{**PARAMS.__dict__, "vocab_size": tok.vocab_size,
                               "span_mode": ["word", "piece", "single"][seed % 3]})
  feats, _, _ = writer.build_records(np.random.default_rng(seed), stream, sent, params,
                                     tok.start_piece)
  compact = {"input_ids": tf.constant(feats["input_ids"].view("<u2").astype(np.int32)),
             "perm": tf.constant(feats["perm"].astype(np.int32)),
             "is_masked": tf.constant(np.unpackbits(feats["is_masked"], axis=1,
                                                    bitorder="little") > 0),
             "a_len": tf.constant(feats["meta"].view("<u2")[:, 0].astype(np.int32)),
             "label": tf.constant(feats["meta"].view("<u2")[:, 1].astype(np.int32))}
  ex = {k: v.numpy() for k, v in pipeline.expand(compact, params).items()}
  rank = pipeline.factorization_rank(compact["perm"], params).numpy()
  half = np.arange(params.seq_len) >= params.reuse_len
  assert (ex["target_mask"].sum(1) == params.num_predict).all()
  for k in range(len(rank)):
    pm, t = ex["perm_mask"][k] > 0, np.flatnonzero(ex["input_q"][k] > 0)
    np.testing.assert_array_equal(ex["target_mapping"][k].argmax(1), t)    # each target once
    assert pm[t, t].all() and pm[np.ix_(~half, half)].all()
    same = half[t][:, None] == half[t][None, :]
    earlier = rank[k, t][None, :] < rank[k, t][:, None]
    np.testing.assert_array_equal(pm[np.ix_(t, t)], same & ~earlier | (~same & ~half[t][:, None]))


def test_targets_see_earlier_targets_by_rank(records):
  out, _ = records
  compact = _read_all(out, expand=False)
  ex = _read_all(out)
  rank = pipeline.factorization_rank(tf.constant(compact["perm"]), PARAMS).numpy()
  half = np.arange(PARAMS.seq_len) >= PARAMS.reuse_len
  for k in range(0, len(rank), 5):
    target = np.flatnonzero(ex["input_q"][k] > 0)
    pm = ex["perm_mask"][k] > 0
    for i in target:
      for j in target:
        if half[i] == half[j]:
          assert pm[i, j] == (rank[k, j] >= rank[k, i])
  # ranks: every perm_size block of every half is a permutation of its slots
  blocks = compact["perm"].reshape(len(rank), -1, PARAMS.perm_size)
  assert (np.sort(blocks, -1) == np.arange(PARAMS.perm_size)).all()


def test_same_seed_same_bytes_whatever_the_workers(tmp_path, records, text_and_sp):
  text, sp = text_and_sp
  ref = _files(records[0])
  _create(text, sp, tmp_path / "w2", num_workers=2)
  assert _files(tmp_path / "w2").keys() == ref.keys()
  for name, data in _files(tmp_path / "w2").items():
    if name.endswith(".tfrecord"):
      assert data == ref[name], name
  _create(text, sp, tmp_path / "s1", seed=1)
  other = _files(tmp_path / "s1")
  assert any(other[n] != ref[n] for n in ref if n.endswith(".tfrecord"))


def test_tasks_split_shards_and_rerun_resumes(tmp_path, records, text_and_sp):
  text, sp = text_and_sp
  out = tmp_path / "t"
  a = _create(text, sp, out, num_tasks=2, task=0)
  b = _create(text, sp, out, num_tasks=2, task=1)
  assert a["shards"] + b["shards"] == records[1]["shards"]
  ref = _files(records[0])
  for name, data in _files(out).items():
    if name.endswith(".tfrecord"):
      assert data == ref[name]
  record = sorted(glob.glob(str(out / "*.tfrecord")))[1]
  os.remove(record)
  (out / "junk.tfrecord.tmp-123").write_text("x")
  stale = str(out / (os.path.basename(record) + ".tmp-999"))
  open(stale, "w").write("half-written")
  again = _create(text, sp, out)
  assert again["shards"] == 1 and again["already_complete"] == records[1]["shards"] - 1
  assert not os.path.exists(stale)
  assert open(record, "rb").read() == ref[os.path.basename(record)]


def test_bad_inputs(tmp_path, text_and_sp):
  text, sp = text_and_sp
  with pytest.raises(FileNotFoundError, match="matched no files"):
    _create(str(tmp_path / "none*.txt"), sp, tmp_path / "o")
  (tmp_path / "empty.txt").write_text("")
  (tmp_path / "blank.txt").write_text("\n\n  \n")
  with pytest.raises(ValueError, match="all 1 files are empty"):
    _create(str(tmp_path / "empty.txt"), sp, tmp_path / "o")
  good = open(text, "rb").read()[:120_000]
  (tmp_path / "bad.txt").write_bytes(good[:5000] + b"\nbad \xff\xfe bytes\n" + good[5000:])
  messages = []
  summary = writer.create(f"{tmp_path}/*.txt", sp, str(tmp_path / "o"), PARAMS,
                          shard_bytes=10**9, progress=messages.append)
  assert summary["bad_lines"] == 1
  assert any("bad.txt:" in m and "undecodable" in m for m in messages)
  assert any("skipped empty or all-blank file" in m and "empty.txt" in m for m in messages)
  assert any("skipped empty or all-blank file" in m and "blank.txt" in m for m in messages)
  assert summary["empty_files"] == 2
  with pytest.raises(ValueError, match="--num_predict=80 cannot fit"):
    _create(text, sp, tmp_path / "o2", params=PARAMS.__class__(
        **{**PARAMS.__dict__, "num_predict": 80}))
  with pytest.raises(ValueError, match="--perm_size=10 must divide"):
    _create(text, sp, tmp_path / "o2", params=PARAMS.__class__(
        **{**PARAMS.__dict__, "perm_size": 10}))


def test_training_side_check_explains_mismatch(records):
  out, _ = records
  with pytest.raises(ValueError, match=r"none matching: record_info-train-00000\..* has "
                                       r"seq_len=64 \(asked 128\)"):
    pipeline.pretrain_dataset(str(out), 128, 32, 10, 4, True, num_core_per_host=2)
  with pytest.raises(FileNotFoundError, match="no record_info-train"):
    pipeline.pretrain_dataset(str(out / "nowhere"), 64, 32, 10, 4, True)


def test_per_replica_batches_keep_the_lane_layout(records):
  out, _ = records
  ds, params, num_batch = pipeline.pretrain_dataset(str(out), 64, 32, 10, 4, True,
                                                    num_core_per_host=2, repeat=False,
                                                    expand_records=False)
  per_replica = list(ds.as_numpy_iterator())
  assert len(per_replica) == 2 * num_batch and per_replica[0]["input_ids"].shape == (2, 64)
  flat = np.concatenate([b["input_ids"] for b in per_replica])
  # replica c of step t holds host rows [2c, 2c+2) = one forward lane and its reverse
  _, files, _ = record_format.find_records(str(out))
  all_ids = _read_all(out, expand=False)["input_ids"]
  np.testing.assert_array_equal(flat, all_ids[:len(flat)])
  data, _, rev = sampling.lanes(np.arange(40), np.zeros(40, bool), 4, 2, True)
  assert list(rev) == [False, True, False, True]


def test_expand_compiles_with_xla(records):
  out, _ = records
  ds, params, _ = pipeline.pretrain_dataset(str(out), 64, 32, 10, 4, True, num_core_per_host=2,
                                            expand_records=False)
  compact = next(iter(ds))
  eager = pipeline.expand(compact, params)
  compiled = tf.function(lambda c: pipeline.expand(c, params), jit_compile=True)(compact)
  for key in eager:
    np.testing.assert_array_equal(eager[key], compiled[key])


def test_cli_end_to_end(tmp_path, text_and_sp):
  text, sp = text_and_sp
  args = [sys.executable, "data_utils/create_pretrain_data.py", f"--input_glob={text}",
          f"--sp_model={sp}", f"--output_dir={tmp_path}", "--seq_len=64", "--reuse_len=32",
          "--num_predict=10", "--bsz_per_host=4", "--uncased", "--shard_mb=1"]
  result = warm.run(args, cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD)
  assert result.returncode == 0, result.stderr
  assert "tokens/s" in result.stdout and "ETA" in result.stdout
  bad = warm.run(args[:3] + [f"--sp_model={tmp_path}/missing.model"] + args[4:],
                       cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD)
  assert bad.returncode == 1 and "missing.model: SentencePiece model not found" in bad.stderr


def test_fast_paths_equal_the_plain_ones(tok):
  """The writer's shortcuts against the plain computations they replace (same bytes)."""
  from data_utils import tfrecord
  rng = np.random.default_rng(0)
  rows = rng.integers(0, 256, (300, 257)).astype(np.uint8)
  rows[:, :5] = 17                                   # constant columns fold into the constant
  rows[:, 100] = 3
  plain = np.concatenate([tfrecord.crc32c(rows[k:k + 50]) for k in range(0, 300, 50)])
  np.testing.assert_array_equal(tfrecord.crc32c(rows), plain)   # (< 64 rows: byte loop)
  check = np.tile(np.frombuffer(b"123456789", np.uint8), (100, 1))
  assert (tfrecord.crc32c(check) == 0xE3069283).all()           # the CRC32C check value
  for perm_size in (1, 16, 128, 1024, 2048):
    got = sampling.permutation_ranks(np.random.default_rng(5), 33, 2 * perm_size, perm_size)
    keys = np.random.default_rng(5).random([33, 2, perm_size])
    np.testing.assert_array_equal(got, np.argsort(keys, axis=-1).reshape(33, -1))
  lines = ["a   b  c", "  In  2000,   we ``left''  ", "x\t\t y", "caf\u00e9   ok", "   "]
  want = tok.sp.Encode([preprocess_text(line, lower=True) for line in lines])
  assert tok.encode_lines(lines) == want
  flat, lengths = tok.encode_flat(lines)
  assert list(lengths) == [len(w) for w in want] and list(flat) == sum(want, [])
  # google-crc32c (when installed) against the numpy computation, many and few rows
  for part in (rows, rows[:7], check):
    np.testing.assert_array_equal(tfrecord.crc32c(part), tfrecord.crc32c(part, native=False))
  # the whole-block normalisation against the per-line one: odd spaces, quotes, case, blank
  # lines (also all-whitespace non-ASCII ones), a lone surrogate, digit-comma pieces
  lines = lines + ["", " \t ", "\u3000", "A ``B'' '''C''' ```D", "x\x1cy\x0bz\r",
                   "\ud800 bad", "Le 1,000, 2000, ET", "\u00c9t\u00e9  1999,"]
  flat, lengths, blank = tok.encode_block("\n".join(lines).encode("utf-8", "surrogatepass"))
  want = tok.encode_lines(lines)
  assert list(lengths) == [len(w) for w in want] and list(flat) == sum(want, [])
  assert list(blank) == [not line.strip() for line in lines]


def test_digit_comma_fix_by_ids_matches_encoding_the_pieces_again(tmp_path):
  """The release's digit-comma split applied id by id (lines without <unk>, cached per id)
  gives the ids of re-encoding each line's pieces (`_fix_digit_commas`), and lines with <unk>
  (whose pieces hold the unknown text) still take that path."""
  from tests import data_fixtures  # pylint: disable=import-outside-toplevel
  tok = Tokenizer(data_fixtures.make_digit_comma_model(
      str(tmp_path), "in 2000, we left.\nby 1999, they came.\n" * 200
      + "we 2000 left, 7, y\n" * 50, 60, ["\u25812000,", "\u25811999,", "7,"]))
  lines = ["in 2000, we", "by 1999, 2000, 7, x", "2000,1999,7,", "no digits", "\u2603 2000, \u00fc",
           "we 2000 left, 7,", "in 2000, \u2603"]
  texts = tok.normalize_lines(lines)
  ids = tok.sp.Encode(texts, out_type=int)
  fix = [k for k, line in enumerate(ids) if tok._needs_split[line].any()]
  assert len(fix) >= 5 and any(0 in ids[k] for k in fix) and any(0 not in ids[k] for k in fix)
  want = tok._fix_digit_commas([texts[k] for k in fix])
  assert tok._fix_digit_comma_ids(texts, ids, fix) == want
  assert tok._fix_digit_comma_ids(texts, ids, fix) == want        # (from the cache)
  assert tok.encode_lines(lines) == [want[fix.index(k)] if k in fix else ids[k]
                                     for k in range(len(lines))]
