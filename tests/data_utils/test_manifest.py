"""The manifest of a record set (data_utils/manifest.py) as the local writer leaves it: written
last, only once every planned shard is there (with --num_tasks, by the task that completes the
set); its fields equal what is on disk, hashed and counted here independently; the same bytes
for the same corpus and seed; untouched by a rerun with nothing to do; replaced when the corpus
changes, and gone before any shard is rewritten."""

import dataclasses
import hashlib
import json
import os
import struct

import pytest

from data_utils import fileio, manifest, record_format, writer

PARAMS = record_format.RecordParams(seq_len=32, reuse_len=16, perm_size=16, num_predict=5,
                                    bsz_per_host=4, num_core_per_host=1, bi_data=True,
                                    uncased=True)
SHARD = 30_000


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory, text_and_sp):
  """The test corpus as three files of whole documents (~60 KB each)."""
  text = open(text_and_sp[0], encoding="utf-8").read()
  docs = text.split("\n\n")
  directory = tmp_path_factory.mktemp("parts")
  third = len(docs) // 3
  for k, part in enumerate((docs[:third], docs[third:2 * third], docs[2 * third:])):
    (directory / f"part-{k}.txt").write_text("\n\n".join(part) + "\n\n", encoding="utf-8")
  return directory


def _copy_corpus(src, dst):
  os.makedirs(dst, exist_ok=True)
  for name in sorted(os.listdir(src)):
    with open(os.path.join(src, name), "rb") as f, open(os.path.join(dst, name), "wb") as g:
      g.write(f.read())
  return os.path.join(dst, "*.txt")


def _create(glob, sp, out, **kw):
  return writer.create(glob, sp, str(out), PARAMS, shard_bytes=SHARD, progress=lambda m: None,
                       **kw)


def _manifests(out):
  return sorted(n for n in os.listdir(out) if n.startswith("manifest-"))


def _read(out):
  (name,) = _manifests(out)
  with open(os.path.join(out, name), "rb") as f:
    return name, f.read()


def _tfrecord_count(path):
  """Records in a TFRecord file, by walking its framing: u64 length, u32 CRC, data, u32 CRC."""
  with open(path, "rb") as f:
    data = f.read()
  count, offset = 0, 0
  while offset < len(data):
    (length,) = struct.unpack("<Q", data[offset:offset + 8])
    offset += 8 + 4 + length + 4
    count += 1
  assert offset == len(data)
  return count


def test_fields_match_the_files_on_disk(tmp_path, corpus_dir, text_and_sp):
  sp = text_and_sp[1]
  glob = _copy_corpus(corpus_dir, tmp_path / "text")
  out = tmp_path / "out"
  _create(glob, sp, out)
  name, raw = _read(out)
  vocab = json.loads(open(out / next(n for n in os.listdir(out) if n.startswith(
      "record_info-"))).read())["params"]["vocab_size"]
  assert name == ("manifest-train.seqlen-32.reuse-16.perm-16.np-5.lanes-4.bi.alpha-6.beta-1."
                  f"word.uncased.eod.vocab-{vocab}.json")
  m = json.loads(raw)
  assert raw == (json.dumps(m, indent=1, sort_keys=True) + "\n").encode()   # canonical form
  assert m["manifest_version"] == 1 and m["split"] == "train" and m["seed"] == 0
  assert m["sp_model_sha256"] == hashlib.sha256(open(sp, "rb").read()).hexdigest()
  assert m["params"]["bsz_per_host"] == 4 and m["params"]["seq_len"] == 32
  records = sorted(n for n in os.listdir(out) if n.endswith(".tfrecord"))
  assert [s["shard"] for s in m["shards"]] == list(range(len(m["shards"])))
  assert [s["record_file"] for s in m["shards"]] == records and len(records) >= 5
  texts = {}
  total_records = 0
  for entry in m["shards"]:
    data = open(out / entry["record_file"], "rb").read()
    assert entry["bytes"] == len(data)
    assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert entry["info_sha256"] == hashlib.sha256(open(out / entry["info_file"], "rb").read(
        )).hexdigest()
    n = _tfrecord_count(out / entry["record_file"])
    assert entry["num_records"] == n and entry["num_batch"] * 4 == n
    total_records += n
    for piece in entry["pieces"]:
      if piece["path"] not in texts:
        texts[piece["path"]] = open(piece["path"], "rb").read()
      chunk = texts[piece["path"]][piece["start"]:piece["end"]]
      assert piece["sha256"] == hashlib.sha256(chunk).hexdigest()
  # The pieces cover every byte of every input file, once, in order.
  covered = {p: 0 for p in texts}
  for entry in m["shards"]:
    for piece in entry["pieces"]:
      assert piece["start"] == covered[piece["path"]]
      covered[piece["path"]] = piece["end"]
  assert covered == {p: len(t) for p, t in texts.items()} and len(texts) == 3
  counts = m["counts"]
  assert counts["shards"] == counts["shards_with_records"] == len(records)
  assert counts["records"] == total_records and counts["steps"] * 4 == total_records
  assert counts["input_bytes"] == sum(len(t) for t in texts.values())
  assert counts["tokens"] == sum(s["tokens"] for s in m["shards"]) > total_records


def test_written_last_and_only_when_every_shard_is_there(tmp_path, corpus_dir, text_and_sp,
                                                          monkeypatch):
  sp = text_and_sp[1]
  glob = _copy_corpus(corpus_dir, tmp_path / "text")
  out = tmp_path / "out"
  writes = []
  real = fileio.write_atomic_light

  def spy(path, data):
    writes.append((os.path.basename(path), sorted(os.listdir(out))))
    return real(path, data)

  monkeypatch.setattr(fileio, "write_atomic_light", spy)
  _create(glob, sp, out, num_tasks=2, task=1)
  assert _manifests(out) == []                       # task 0's shards are missing
  _create(glob, sp, out, num_tasks=2, task=0)
  last, listing = writes[-1]
  assert last.startswith("manifest-train.")
  m = json.loads(open(out / last).read())
  for entry in m["shards"]:                          # every shard published before it
    assert entry["record_file"] in listing and entry["info_file"] in listing
  assert [w for w, _ in writes].count(last) == 1
  # The two tasks' manifest is the single task's, byte for byte.
  _create(glob, sp, tmp_path / "one")
  assert _read(out) == _read(tmp_path / "one")


def test_same_bytes_for_the_same_corpus_and_seed_and_a_rerun_keeps_it(tmp_path, corpus_dir,
                                                                       text_and_sp):
  sp = text_and_sp[1]
  glob = _copy_corpus(corpus_dir, tmp_path / "text")
  _create(glob, sp, tmp_path / "a")
  _create(glob, sp, tmp_path / "b", num_workers=2)
  assert _read(tmp_path / "a") == _read(tmp_path / "b")
  name, before = _read(tmp_path / "a")
  stamp = os.stat(tmp_path / "a" / name).st_mtime_ns
  summary = _create(glob, sp, tmp_path / "a")          # nothing to do: not rewritten
  assert summary["already_complete"] == summary["total_shards"]
  assert _read(tmp_path / "a") == (name, before)
  assert os.stat(tmp_path / "a" / name).st_mtime_ns == stamp
  _create(glob, sp, tmp_path / "c", seed=1)            # another seed: other records
  other = json.loads(_read(tmp_path / "c")[1])
  assert other["seed"] == 1 and [s["sha256"] for s in other["shards"]] != [
      s["sha256"] for s in json.loads(before)["shards"]]


def test_a_changed_corpus_replaces_it_and_removes_it_before_rewriting(tmp_path, corpus_dir,
                                                                      text_and_sp, monkeypatch):
  sp = text_and_sp[1]
  glob = _copy_corpus(corpus_dir, tmp_path / "text")
  out = tmp_path / "out"
  _create(glob, sp, out)
  _, before = _read(out)
  path = tmp_path / "text" / "part-2.txt"
  path.write_text(path.read_text(encoding="utf-8").replace("the", "a"), encoding="utf-8")
  # A rerun that dies while rewriting its first shard leaves no manifest (the old one named
  # the old shards).
  real = writer._write_atomic

  def die(path_, data):
    raise KeyboardInterrupt
  monkeypatch.setattr(writer, "_write_atomic", die)
  with pytest.raises(KeyboardInterrupt):
    _create(glob, sp, out)
  assert _manifests(out) == []
  monkeypatch.setattr(writer, "_write_atomic", real)
  _create(glob, sp, out)
  name, after = _read(out)
  assert after != before
  old, new = json.loads(before), json.loads(after)
  changed = [a["sha256"] != b["sha256"] for a, b in zip(old["shards"], new["shards"])]
  touches = [any(p["path"].endswith("part-2.txt") for p in s["pieces"]) for s in new["shards"]]
  assert any(changed) and changed == touches
  _create(glob, sp, tmp_path / "fresh")               # = a run into an empty directory
  assert _read(tmp_path / "fresh") == (name, after)
  params = dataclasses.replace(PARAMS, vocab_size=new["params"]["vocab_size"])
  assert manifest.read(str(out), params, "train") == new
