"""The records writer on Apache Beam (data_utils/beam_writer.py, Beam's in-process direct
runner): every file it leaves (records, record-infos, manifest, marker) has the local writer's
bytes for the same corpus and seed; a bundle that fails mid-shard and is retried, a leftover
temporary and a duplicated element change none of them; ram:// (the gs:// code path) in and
out; create_pretrain_data.py --runner end to end, and a bad --runner refused in one line.

Skipped when apache_beam is not installed, except under `make test` (CI), where
XLNET_TESTS_REQUIRE_REFERENCE=1 turns the skip into a failure (tests/reference_libs.py).
"""

import os
import subprocess
import sys

import pytest

from tests import reference_libs
from tests.hang_guard import HANG_GUARD

reference_libs.require("apache_beam")

from data_utils import beam_writer, fileio, record_format, writer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARAMS = record_format.RecordParams(seq_len=32, reuse_len=16, perm_size=16, num_predict=5,
                                    bsz_per_host=4, num_core_per_host=1, bi_data=True,
                                    uncased=True)
SHARD = 40_000


def _files(directory):
  """{name: bytes} of every file in DIRECTORY (local or a URL), the marker included."""
  return {n: fileio.read_bytes_light(fileio.join(directory, n))
          for n in fileio.listdir_light(directory)}


def _assert_same(got, want):
  assert sorted(got) == sorted(want)
  for name in want:
    assert got[name] == want[name], name


@pytest.fixture(scope="module")
def local(tmp_path_factory, text_and_sp):
  """The local writer's files for the test corpus: {name: bytes}."""
  text, sp = text_and_sp
  out = str(tmp_path_factory.mktemp("local") / "records")
  summary = writer.create(text, sp, out, PARAMS, shard_bytes=SHARD, progress=lambda m: None)
  assert summary["shards"] >= 4
  files = _files(out)
  assert sum(n.startswith("manifest-train.") for n in files) == 1
  return files


def _beam(text, sp, out, **kw):
  return beam_writer.create(text, sp, str(out), PARAMS, runner="DirectRunner",
                            shard_bytes=SHARD, progress=lambda m: None, **kw)


def test_direct_runner_writes_the_local_bytes(tmp_path, text_and_sp, local):
  text, sp = text_and_sp
  summary = _beam(text, sp, tmp_path / "beam")
  _assert_same(_files(str(tmp_path / "beam")), local)
  assert summary["shards"] + summary["skipped_shards"] == summary["total_shards"]
  # A rerun finds every shard complete: no job, nothing rewritten.
  stamps = {n: os.stat(tmp_path / "beam" / n).st_mtime_ns for n in local}
  again = _beam(text, sp, tmp_path / "beam")
  assert again["already_complete"] == again["total_shards"] and again["shards"] == 0
  assert {n: os.stat(tmp_path / "beam" / n).st_mtime_ns for n in local} == stamps


def test_retried_bundles_stale_temporaries_and_duplicates_give_the_same_bytes(
    tmp_path, text_and_sp, local, monkeypatch):
  text, sp = text_and_sp
  out = tmp_path / "beam"
  os.makedirs(out)
  writer_files = [n for n in local if n.endswith(record_format.RECORD_SUFFIX)]
  info_files = [n for n in local if n.startswith(record_format.INFO_PREFIX)]
  marker = next(n for n in local if n.startswith("."))
  (out / marker).write_bytes(local[marker])
  # A killed attempt's temporary, and a wrong record file under a shard's final name.
  (out / (writer_files[0] + fileio.TMP_MARK + "999-dead")).write_bytes(b"partial")
  (out / writer_files[1]).write_bytes(local[writer_files[1]][:100])
  failures = {writer_files[2]: 1, info_files[3]: 1}     # each fails once, then succeeds
  real = writer._write_atomic
  calls = []

  def flaky(path, data):
    name = os.path.basename(path)
    calls.append(name)
    if failures.get(name):
      failures[name] -= 1
      with open(fileio.tmp_name(path), "wb") as f:      # half a file, then the worker dies
        f.write(data[:len(data) // 2])
      raise RuntimeError(f"injected failure writing {name}")
    return real(path, data)

  monkeypatch.setattr(writer, "_write_atomic", flaky)
  summary = _beam(text, sp, out, shards_to_run=lambda plan: plan.todo + plan.todo[:2])
  assert failures == {writer_files[2]: 0, info_files[3]: 0}     # both failures happened
  assert calls.count(writer_files[2]) == 2 and calls.count(info_files[3]) == 2
  # The duplicated shards 0 and 1 were written once: their second element found them done
  # (the direct runner runs one bundle at a time; a runner running both at once would write
  # the same bytes twice).
  assert calls.count(writer_files[0]) == 1 and calls.count(writer_files[1]) == 1
  _assert_same(_files(str(out)), local)          # no temporary left, every byte the local's
  assert summary["total_shards"] == len(info_files)


def test_ram_urls_in_and_out(text_and_sp, local):
  text, sp = text_and_sp
  root = "ram://beamw"
  fileio.write_atomic(f"{root}/corpus/part.txt", open(text, "rb").read())
  fileio.write_atomic(f"{root}/model/sp.model", open(sp, "rb").read())
  args = (f"{root}/corpus/*.txt", f"{root}/model/sp.model")
  _beam(*args, f"{root}/beam")
  writer.create(*args, f"{root}/local", PARAMS, shard_bytes=SHARD, progress=lambda m: None)
  got = _files(f"{root}/beam")
  _assert_same(got, _files(f"{root}/local"))
  for name, data in local.items():           # the records are the local files' too
    if name.endswith(record_format.RECORD_SUFFIX):
      assert got[name] == data, name
  _, files, _ = record_format.find_records(f"{root}/beam", verify="sha256")
  assert len(files) == sum(n.endswith(record_format.RECORD_SUFFIX) for n in local)


def _script(*args):
  return subprocess.run([sys.executable, os.path.join(ROOT, "data_utils",
                                                      "create_pretrain_data.py"), *args],
                        capture_output=True, text=True, timeout=HANG_GUARD, cwd=ROOT)


def _flags(text, sp, out):
  return [f"--input_glob={text}", f"--sp_model={sp}", f"--output_dir={out}", "--seq_len=32",
          "--reuse_len=16", "--perm_size=16", "--num_predict=5", "--num_lanes=4", "--uncased",
          f"--shard_mb={SHARD / (1 << 20)}"]


@pytest.mark.parametrize("options", [
    "", "--direct_running_mode=multi_processing --direct_num_workers=2"])
def test_script_with_direct_runner(tmp_path, text_and_sp, local, options):
  """In-process, and with two worker processes (each shard written in another process, from a
  pickled DoFn, as on a cluster)."""
  text, sp = text_and_sp
  out = tmp_path / "cli"
  run = _script(*_flags(text, sp, out), "--runner=DirectRunner",
                f"--beam_pipeline_options={options}")
  assert run.returncode == 0, run.stderr
  assert "on DirectRunner" in run.stdout and "manifest: " in run.stdout
  if options:     # Beam's worker processes said they started (their log goes to stderr)
    assert run.stderr.count("Python sdk harness starting") == 2, run.stderr[-3000:]
  _assert_same(_files(str(out)), local)


@pytest.mark.parametrize("extra, message", [
    (["--runner=Spark"], "--runner=Spark: expected local or one of DirectRunner, "
                         "DataflowRunner, FlinkRunner, SparkRunner"),
    (["--runner=DirectRunner", "--num_tasks=2"], "--num_tasks=2 --task=0: with "
                                                 "--runner=DirectRunner the runner spreads"),
    (["--runner=DirectRunner", "--beam_pipeline_options=--runner=DataflowRunner"],
     "--beam_pipeline_options: give the runner as --runner"),
    (["--runner=DirectRunner", "--beam_pipeline_options=--direct_num_workers=two"],
     "--beam_pipeline_options='--direct_num_workers=two': argument --direct_num_workers: "
     "invalid int value: 'two'"),
])
def test_script_refuses_in_one_line_before_any_work(tmp_path, text_and_sp, extra, message):
  text, sp = text_and_sp
  out = tmp_path / "never"
  run = _script(*_flags(text, sp, out), *extra)
  assert run.returncode != 0
  assert run.stderr.startswith("create_pretrain_data.py: " + message), run.stderr
  assert len(run.stderr.strip().splitlines()) == 1, run.stderr
  assert not out.exists()


def test_ram_urls_need_the_in_process_runner(text_and_sp):
  text, sp = text_and_sp
  with pytest.raises(ValueError, match=r"^ram://beamx/out: ram:// lives in this process's "):
    beam_writer.create(text, sp, "ram://beamx/out", PARAMS, runner="DirectRunner",
                       pipeline_options="--direct_running_mode=multi_processing")
  assert not fileio.exists("ram://beamx/out")


def test_without_beam_the_runner_is_refused_in_one_line(monkeypatch):
  monkeypatch.setattr(beam_writer, "beam", None)
  with pytest.raises(ValueError, match=r"^--runner=DataflowRunner needs Apache Beam, which is "
                     r"not installed: pip install -e '\.\[beam\]'$"):
    beam_writer.check("DataflowRunner", "--project=p")
