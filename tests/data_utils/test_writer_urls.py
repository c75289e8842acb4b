"""The text-to-records writer, the tokenizer trainer and the Tokenizer on tf.io.gfile URLs.

TensorFlow's in-memory `ram://` file system takes the same code path as `gs://`. Its
`exists`/`isdir` answer True for any prefix of an existing name, so sibling names here are never
prefixes of each other.
"""

import os
import subprocess
import sys

import pytest

from data_utils import fileio, record_format, tokenization, writer
from tests.hang_guard import HANG_GUARD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PARAMS = record_format.RecordParams(seq_len=64, reuse_len=32, perm_size=16, num_predict=10,
                                    bsz_per_host=4, num_core_per_host=2, bi_data=True,
                                    uncased=True)
SHARD = 60_000


def _create(text, sp, out, **kw):
  return writer.create(text, sp, out, PARAMS, shard_bytes=SHARD, progress=lambda m: None, **kw)


def _records(directory):
  """{name: bytes} of the record files, and {name: info} of the record-infos, in DIRECTORY."""
  names = fileio.listdir(directory)
  records = {n: fileio.read_bytes(fileio.join(directory, n)) for n in names
             if n.endswith(record_format.RECORD_SUFFIX)}
  infos = {n: record_format.read_info(fileio.join(directory, n)) for n in names
           if n.startswith(record_format.INFO_PREFIX)}
  return records, infos


def _to_ram(local, url):
  fileio.write_atomic(url, open(local, "rb").read())
  return url


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, text_and_sp):
  text, sp = text_and_sp
  out = str(tmp_path_factory.mktemp("local_records"))
  summary = _create(text, sp, out)
  assert summary["shards"] >= 3
  return _records(out)


def test_ram_input_and_output_give_the_local_bytes(text_and_sp, local_run):
  text, sp = text_and_sp
  root = "ram://wurl-same"
  ram_text = _to_ram(text, f"{root}/corpus/part-a.txt")
  ram_sp = _to_ram(sp, f"{root}/model/sp.model")
  summary = _create(f"{root}/corpus/*.txt", ram_sp, f"{root}/records", num_workers=2)
  records, infos = _records(f"{root}/records")
  want_records, want_infos = local_run
  assert summary["shards"] == len(want_records) and records.keys() == want_records.keys()
  for name, data in records.items():
    assert data == want_records[name], name
  assert infos.keys() == want_infos.keys()
  for name, info in infos.items():
    assert info["sha256"] == want_infos[name]["sha256"] and info["bytes"] == len(
        records[info["record_file"]])
    assert info["inputs"][0].startswith(ram_text)
  # The training side finds and checks them there.
  _, files, num_batch = record_format.find_records(f"{root}/records", verify="sha256")
  assert len(files) == len(records) and num_batch == sum(i["num_batch"] for i in infos.values())


def test_rerun_skips_finished_shards_and_replaces_broken_ones(text_and_sp, local_run):
  text, sp = text_and_sp
  root = "ram://wurl-rerun"
  ram_text = _to_ram(text, f"{root}/corpus.txt")
  out = f"{root}/records"
  first = _create(ram_text, sp, out)
  again = _create(ram_text, sp, out)
  assert again["shards"] == 0 and again["already_complete"] == first["shards"]
  names = sorted(local_run[0])
  params = PARAMS.__class__(**{**PARAMS.__dict__, "vocab_size": 800})
  # shard 0: a half-written record file (its info still says the whole size)
  fileio.write_atomic(f"{out}/{names[0]}", local_run[0][names[0]][:1000])
  # shard 1: the record published, its info never written (killed between the two)
  fileio.remove(f"{out}/{params.info_name('train', 1)}")
  # leftovers of killed runs: this task's temporary objects, another task's is not ours
  stale = [f"{out}/{names[2]}{fileio.TMP_MARK}77-deadbeef",
           f"{out}/{params.info_name('train', 2)}{fileio.TMP_MARK}77-feedf00d"]
  for path in stale:
    fileio.write_atomic(path, b"half")
  third = _create(ram_text, sp, out)
  assert third["shards"] == 2 and third["already_complete"] == first["shards"] - 2
  records, infos = _records(out)
  assert records == local_run[0]
  assert {i["sha256"] for i in infos.values()} == {i["sha256"] for i in local_run[1].values()}
  assert not any(fileio.TMP_MARK in n for n in fileio.listdir(out))
  # With two tasks, task 1 leaves task 0's temporary objects (its run may be in flight).
  theirs = f"{out}/{names[0]}{fileio.TMP_MARK}88-0badcafe"
  fileio.write_atomic(theirs, b"in flight")
  _create(ram_text, sp, out, num_tasks=2, task=1)
  assert fileio.basename(theirs) in fileio.listdir(out)


def test_a_run_killed_before_its_info_is_rewritten(text_and_sp, local_run, monkeypatch):
  text, sp = text_and_sp
  out = "ram://wurl-killed/records"
  real = writer._write_atomic

  def dies_at_the_info(path, data):
    if fileio.basename(path).startswith(record_format.INFO_PREFIX):
      raise KeyboardInterrupt("killed")
    real(path, data)

  monkeypatch.setattr(writer, "_write_atomic", dies_at_the_info)
  with pytest.raises(KeyboardInterrupt):
    _create(text, sp, out)
  monkeypatch.setattr(writer, "_write_atomic", real)
  assert not any(n.startswith(record_format.INFO_PREFIX) for n in fileio.listdir(out))
  summary = _create(text, sp, out)
  assert summary["already_complete"] == 0
  assert _records(out)[0] == local_run[0]


def test_train_tokenizer_and_tokenizer_on_ram(tmp_path, text_and_sp):
  text, _ = text_and_sp
  root = "ram://wurl-spm"
  ram_text = _to_ram(text, f"{root}/text/corpus.txt")
  model = tokenization.train_sentencepiece([ram_text], f"{root}/out/spiece", 300, lower=True)
  assert model == f"{root}/out/spiece.model"
  assert fileio.listdir(f"{root}/out") == ["spiece.model", "spiece.vocab"]
  local = tokenization.train_sentencepiece([text], str(tmp_path / "spiece"), 300, lower=True)
  assert fileio.read_bytes(model) == open(local, "rb").read()
  assert fileio.read_bytes(f"{root}/out/spiece.vocab") == open(tmp_path / "spiece.vocab",
                                                               "rb").read()
  vocab = fileio.read_text(f"{root}/out/spiece.vocab").splitlines()
  assert len(vocab) == 300 and vocab[3] == "<cls>\t0"
  tok = tokenization.Tokenizer(model, lower=True)
  assert tok.encode("The quick brown fox.") == tokenization.Tokenizer(local, lower=True).encode(
      "The quick brown fox.")
  with pytest.raises(FileNotFoundError, match="ram://wurl-spm/out/missing.model: SentencePiece "
                                              "model not found"):
    tokenization.Tokenizer(f"{root}/out/missing.model")
  fileio.write_atomic(f"{root}/junk/x.model", b"not a model")
  with pytest.raises(ValueError, match="x.model: not a SentencePiece model"):
    tokenization.Tokenizer(f"{root}/junk/x.model")


def test_a_local_run_never_imports_tensorflow(tmp_path, text_and_sp):
  """Local paths stay off TensorFlow (3 s of start-up per process, and not fork-safe)."""
  text, sp = text_and_sp
  code = ("import sys\n"
          "from data_utils import record_format, writer\n"
          f"s = writer.create({text!r}, {sp!r}, {str(tmp_path / 'o')!r}, "
          "record_format.RecordParams(seq_len=64, reuse_len=32, perm_size=16, num_predict=10,"
          " bsz_per_host=4), shard_bytes=60_000, num_workers=2, progress=lambda m: None)\n"
          "assert s['shards'] >= 3, s\n"
          "print('tensorflow' in sys.modules)\n")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=HANG_GUARD)
  assert result.returncode == 0, result.stderr
  assert result.stdout.strip() == "False"
