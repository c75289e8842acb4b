"""Reruns of the records writer: after any change to the inputs (a file's text changed, a file
added to or dropped from the glob) or the settings, --output_dir holds the bytes of a run into
an empty directory; unchanged shards are skipped; only the writer's own files are removed; an
--output_dir that is a file or someone else's folder is refused with nothing written."""

import json
import os
import shutil

import pytest

from data_utils import outputs, record_format, writer
from tests import script_helpers

PARAMS = record_format.RecordParams(seq_len=32, reuse_len=16, perm_size=16, num_predict=5,
                                    bsz_per_host=4, num_core_per_host=1, bi_data=False,
                                    uncased=True)
SHARD = 24_000      # files of ~14 KB: two packed into most shards, so a new file moves the plan


@pytest.fixture(scope="module")
def docs(text_and_sp):
  """The corpus cut at blank lines into six text chunks of ~14 KB (whole documents)."""
  text = open(text_and_sp[0], encoding="utf-8").read()
  parts, current = [], ""
  for doc in text.split("\n\n"):
    current += doc + "\n\n"
    if len(current) > 14_000:
      parts.append(current)
      current = ""
      if len(parts) == 6:
        break
  return parts


def _corpus(directory, docs, names="abcdef"):
  os.makedirs(directory, exist_ok=True)
  for name, text in zip(names, docs):
    with open(os.path.join(directory, f"{name}.txt"), "w", encoding="utf-8") as f:
      f.write(text)
  return os.path.join(directory, "*.txt")


def _create(glob, sp, out, **kw):
  messages = []
  summary = writer.create(glob, sp, str(out), PARAMS, shard_bytes=SHARD,
                          progress=messages.append, **kw)
  return summary, messages


def _files(out):
  """{name: bytes} of every file in OUT (the marker included)."""
  return {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}


def _fresh(glob, sp, tmp_path, **kw):
  out = tmp_path / f"fresh{len(os.listdir(tmp_path))}"
  _create(glob, sp, out, **kw)
  return _files(out)


def _assert_same(got, want):
  assert sorted(got) == sorted(want)
  for name in want:
    assert got[name] == want[name], name


def test_unchanged_inputs_are_skipped(tmp_path, docs, text_and_sp):
  glob, sp = _corpus(tmp_path / "text", docs), text_and_sp[1]
  first, _ = _create(glob, sp, tmp_path / "out")
  assert first["shards"] >= 3
  before = {n: os.stat(tmp_path / "out" / n).st_mtime_ns for n in os.listdir(tmp_path / "out")}
  again, messages = _create(glob, sp, tmp_path / "out")
  assert again["shards"] == 0 and again["already_complete"] == first["shards"]
  assert again["outdated"] == 0 and again["removed"] == 0
  assert f"{first['shards']} already complete, 0 to write" in messages[0]
  assert {n: os.stat(tmp_path / "out" / n).st_mtime_ns
          for n in os.listdir(tmp_path / "out")} == before
  info = json.loads(next(open(tmp_path / "out" / n).read() for n in sorted(before)
                         if n.startswith(record_format.INFO_PREFIX)))
  source = record_format.info_source(info)
  assert source["seed"] == 0 and len(source["sp_model_sha256"]) == 64
  assert [p["path"] for p in source["pieces"]] == [str(tmp_path / "text" / "a.txt"),
                                                   str(tmp_path / "text" / "b.txt")]


@pytest.mark.parametrize("change", ["edit_same_size", "append", "add_file", "drop_file",
                                    "drop_last_files", "seed"])
def test_any_change_gives_the_bytes_of_a_fresh_run(change, tmp_path, docs, text_and_sp):
  sp = text_and_sp[1]
  glob = _corpus(tmp_path / "text", docs[:5], names="abdef")
  out = tmp_path / "out"
  _create(glob, sp, out)
  text, kw = tmp_path / "text", {}
  if change == "edit_same_size":         # same names and sizes: only the hash can tell
    data = (text / "d.txt").read_bytes()
    k = data.index(b"the ")
    (text / "d.txt").write_bytes(data[:k] + b"THY " + data[k + 4:])
  elif change == "append":               # the file grows: its last shard moves, earlier stay
    with open(text / "f.txt", "a", encoding="utf-8") as f:
      f.write(docs[5])
  elif change == "add_file":             # sorted between a and b: every later shard moves
    _corpus(text, docs[5:], names="c")
  elif change == "drop_file":
    os.remove(text / "b.txt")
  elif change == "drop_last_files":      # fewer shards: the last ones must go
    os.remove(text / "e.txt")
    os.remove(text / "f.txt")
  else:
    kw = {"seed": 3}
  summary, _ = _create(glob, sp, out, **kw)
  assert summary["shards"] >= 1
  if change == "drop_last_files":
    assert summary["removed"] >= 2
  _assert_same(_files(out), _fresh(glob, sp, tmp_path, **kw))


def test_tasks_rerun_removes_only_what_the_plan_dropped(tmp_path, docs, text_and_sp):
  """With --num_tasks=2 each task rewrites its own shards; the shards beyond the new plan go
  whichever task runs first; foreign files, other splits and other parameter sets stay."""
  sp = text_and_sp[1]
  glob = _corpus(tmp_path / "text", docs)
  out = tmp_path / "out"
  for task in (0, 1):
    _create(glob, sp, out, num_tasks=2, task=task)
  _create(glob, sp, out, split="valid")
  other = record_format.RecordParams(**{**PARAMS.__dict__, "seq_len": 40, "reuse_len": 24,
                                        "perm_size": 8})
  writer.create(glob, sp, str(out), other, shard_bytes=SHARD, progress=lambda m: None)
  (out / "notes.txt").write_text("mine")
  keep = {n: b for n, b in _files(out).items()
          if ".seqlen-40." in n or n.startswith(("valid-", "record_info-valid-", "manifest-valid."))}
  assert keep
  for name in "def":
    os.remove(tmp_path / "text" / f"{name}.txt")
  summary, _ = _create(glob, sp, out, num_tasks=2, task=1)
  assert summary["removed"] >= 2
  _create(glob, sp, out, num_tasks=2, task=0)
  got = _files(out)
  assert got["notes.txt"] == b"mine" and all(got[n] == b for n, b in keep.items())
  mine = {n: b for n, b in got.items() if n not in keep and n != "notes.txt"}
  _assert_same(mine, _fresh(glob, sp, tmp_path))


def test_earlier_versions_directory_is_claimed_and_rewritten(tmp_path, docs, text_and_sp):
  """Records of a writer without sources or marker: the directory is accepted (every entry is
  the writer's), every shard rewritten (its inputs are unknown)."""
  sp = text_and_sp[1]
  glob = _corpus(tmp_path / "text", docs[:3])
  out = tmp_path / "out"
  first, _ = _create(glob, sp, out)
  os.remove(out / outputs.OUTPUT_MARKER)
  for name in os.listdir(out):
    if name.startswith(record_format.INFO_PREFIX):
      info = json.loads((out / name).read_text())
      del info["source"]
      (out / name).write_text(record_format.info_text(info))
  record = next(n for n in sorted(os.listdir(out)) if n.endswith(record_format.RECORD_SUFFIX))
  (out / (record + ".tmp-1-dead")).write_bytes(b"half")
  again, _ = _create(glob, sp, out)
  assert again["outdated"] == first["shards"] and again["shards"] == first["shards"]
  _assert_same(_files(out), _fresh(glob, sp, tmp_path))
  # the training side reads old and new record-infos alike
  params, files, _ = record_format.find_records(str(out))
  assert params.seq_len == PARAMS.seq_len and len(files) == first["shards"]


def _main(**flag_values):
  """create_pretrain_data.py's main in this process: its SystemExit's message, or None."""
  return script_helpers.main_exit("data_utils/create_pretrain_data.py", **flag_values)


def _flags(glob, sp, out):
  return dict(input_glob=glob, sp_model=sp, output_dir=out, seq_len=32, reuse_len=16,
              num_predict=5, bsz_per_host=4, bi_data=False, uncased=True)


def test_output_dir_a_file_or_someone_elses_folder_is_refused(tmp_path, docs, text_and_sp):
  sp = text_and_sp[1]
  glob = _corpus(tmp_path / "text", docs[:2])
  (tmp_path / "afile").write_text("precious")
  message = _main(**_flags(glob, sp, tmp_path / "afile"))
  assert message.startswith("create_pretrain_data.py: --output_dir=") and \
      "existing file" in message and "\n" not in message
  assert (tmp_path / "afile").read_text() == "precious"
  message = _main(**_flags(glob, sp, tmp_path / "afile" / "sub"))
  assert "afile is a file" in message
  theirs = tmp_path / "theirs"
  theirs.mkdir()
  (theirs / "data.csv").write_text("a,b\n")
  (theirs / PARAMS.record_name("train", 0)).write_bytes(b"looks like ours")
  message = _main(**_flags(glob, sp, theirs))
  assert "did not write" in message and "\n" not in message
  assert sorted(os.listdir(theirs)) == ["data.csv", PARAMS.record_name("train", 0)]
  run = tmp_path / "run"
  run.mkdir()
  outputs.claim_dir(str(run), outputs.RUN)
  message = _main(**_flags(glob, sp, run))
  assert "training run's directory" in message
  assert os.listdir(run) == [outputs.OUTPUT_MARKER]
  # a bad input after a good --output_dir: refused, the directory not even created
  message = _main(**_flags(str(tmp_path / "none*.txt"), sp, tmp_path / "new"))
  assert "matched no files" in message and not (tmp_path / "new").exists()
  assert _main(**_flags(glob, sp, tmp_path / "new")) is None
  assert outputs.kind_of(str(tmp_path / "new")) == outputs.RECORDS
  shutil.rmtree(tmp_path / "new")
