"""Corrupt inputs end in one line naming the file, before any step trains on them (issue #21).

Record shards (truncated, a bit flipped in a record's payload or in its length header), record-
infos that do not match their shard, checkpoints with a missing or truncated data file: for
--init_checkpoint (modeling/checkpoint.py) and for the trainer's own resume. The run_pretrain.py
cases run the script as a user would (concurrently: each is mostly TensorFlow's start-up).
"""

import glob
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_utils import pipeline, record_format
from modeling import checkpoint, loading
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.models import XLNetPretrainModel
from tests import warm
from tests import pretrain_helpers as ph
from tests import reference as ref
from tests.hang_guard import HANG_GUARD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORD = 189          # framed bytes of one record at the helpers' sizes (seq 32)


@pytest.fixture(scope="module")
def recs(tmp_path_factory, text_and_sp):
  text, sp = text_and_sp
  base = tmp_path_factory.mktemp("corrupt")
  from data_utils.tokenization import Tokenizer
  vocab = Tokenizer(sp, lower=True).vocab_size
  cfg = base / "xlnet_config.json"
  cfg.write_text(json.dumps(dict(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=16,
                                 n_token=vocab)))
  one = ph.make_records(text, sp, base / "one")                       # one shard
  many = ph.make_records(text, sp, base / "many", max_bytes=60_000)   # several shards
  return {"one": one, "many": many, "cfg": str(cfg), "base": base}


def _copy(src, dst):
  shutil.copytree(src, dst)
  return (str(dst), sorted(glob.glob(f"{dst}/*.tfrecord")),
          sorted(glob.glob(f"{dst}/record_info-*.json")))     # (not the manifest)


def _flip(path, offset, bit=3):
  data = bytearray(open(path, "rb").read())
  data[offset] ^= 1 << bit
  open(path, "wb").write(bytes(data))


def _truncate(path, size):
  data = open(path, "rb").read()
  open(path, "wb").write(data[:size])


def _pretrain_argv(record_dir, model_dir, cfg, *extra):
  return [sys.executable, "run_pretrain.py", f"--record_dir={record_dir}",
          f"--model_config_path={cfg}", f"--model_dir={model_dir}", "--seq_len=32",
          "--reuse_len=16", "--num_predict=5", "--bsz_per_host=4", "--nobi_data", "--mem_len=16",
          *extra]


def _run_concurrently(argvs):
  """{name: argv} -> {name: (returncode, stdout, stderr)}; no child is left running."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  procs = {name: warm.popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env) for name, argv in argvs.items()}
  try:
    outputs = {name: proc.communicate(timeout=HANG_GUARD) for name, proc in procs.items()}
  finally:
    for proc in procs.values():
      proc.kill()
  return {name: (procs[name].returncode, *outputs[name]) for name in procs}


def _assert_one_line_error(result, names, script="run_pretrain.py"):
  code, _, stderr = result
  last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
  assert code != 0, stderr[-2000:]
  assert last.startswith(f"{script}: ") and names in last, stderr[-2000:]
  assert "Traceback" not in stderr and "DataLossError" not in stderr, stderr[-3000:]
  return last


def _checkpoints(model_dir):
  return sorted(os.path.basename(p) for p in glob.glob(f"{model_dir}/ckpt/ckpt-*.index"))


# ---- record shards, through run_pretrain.py --------------------------------------------------

@pytest.mark.slow
def test_corrupted_shards_stop_run_pretrain_with_one_line_naming_the_shard(tmp_path, recs):
  """A shard truncated at a random byte, a payload bit flipped (caught up front: the sha256 of
  --verify_records=auto), a length-header bit flipped with --verify_records=size (caught by the
  CRC32C when tf.data reads it, mapped back to the file): each stops the run with one line
  naming the shard, and no checkpoint is written."""
  rng = np.random.default_rng(21)
  runs, shards = {}, {}
  for case in ("truncated", "payload", "header"):
    record_dir, files, _ = _copy(recs["one"], tmp_path / case)
    shards[case] = files[0]
    size = os.path.getsize(files[0])
    if case == "truncated":
      _truncate(files[0], int(rng.integers(1, size)))
    elif case == "payload":
      _flip(files[0], int(rng.integers(0, size // RECORD)) * RECORD + 12 + 40)
    else:                  # length field of record 20 (batch 5): read during the first loop
      _flip(files[0], 20 * RECORD + 1)
    extra = ["--verify_records=size"] if case == "header" else []
    runs[case] = _pretrain_argv(record_dir, tmp_path / f"model-{case}", recs["cfg"],
                                "--train_steps=20", "--steps_per_loop=10", "--save_every=10",
                                *extra)
  results = _run_concurrently(runs)
  for case, result in results.items():
    last = _assert_one_line_error(result, shards[case])
    assert {"truncated": "(truncated)", "payload": "sha256",
            "header": "record 20 (bytes 3780-3968) fails its CRC32C"}[case] in last, last
    assert _checkpoints(tmp_path / f"model-{case}") == [], case    # nothing trained on


# ---- record shards and record-infos, in-process ----------------------------------------------

def test_bit_flip_read_mid_run_names_the_right_shard_of_several(tmp_path, recs):
  """tf.data's DataLossError gives a byte offset only ("corrupted record at N"); every shard has
  a record at that offset, and named_record_errors finds the one whose CRC fails."""
  record_dir, files, _ = _copy(recs["many"], tmp_path / "r")
  assert len(files) >= 3
  _flip(files[1], 7 * RECORD + 12 + 100)           # payload of record 7 of the second shard
  ds, _, _ = pipeline.pretrain_dataset(record_dir, ph.SEQ, ph.REUSE, ph.NP, ph.BSZ, False,
                                       repeat=False, verify="size")
  with pytest.raises(ValueError) as err:
    with pipeline.named_record_errors(record_dir):
      for _ in ds:
        pass
  message = str(err.value)
  assert message.startswith(files[1] + ": record 7 (bytes 1323-1511)") and "\n" not in message
  # the up-front hash names it before anything is read
  with pytest.raises(ValueError, match=f"^{files[1]}: sha256 .* differs"):
    pipeline.pretrain_dataset(record_dir, ph.SEQ, ph.REUSE, ph.NP, ph.BSZ, False)


def _edit_info(key, value):
  def edit(info_path, record_path):
    info = json.load(open(info_path))
    info[key] = value
    json.dump(info, open(info_path, "w"))
  return edit


def _drop_param(info_path, record_path):
  info = json.load(open(info_path))
  del info["params"]["perm_size"]
  json.dump(info, open(info_path, "w"))


@pytest.mark.parametrize("case,edit,error,names,words", [
    ("num_batch", _edit_info("num_batch", 3), ValueError, "info", "num_records={n} is not"),
    ("bytes", _edit_info("bytes", 1000), ValueError, "info", "bytes=1000 but {n} records"),
    ("sha256", _edit_info("sha256", "0" * 64), ValueError, "record", "sha256 "),
    ("missing file", lambda i, r: os.remove(r), FileNotFoundError, "record", "not found"),
    ("points elsewhere", _edit_info("record_file", "train-00009.tfrecord"), FileNotFoundError,
     "train-00009.tfrecord", "not found"),
    ("truncated json", lambda i, r: _truncate(i, 300), ValueError, "info", "not valid JSON"),
    ("not json", lambda i, r: open(i, "wb").write(b"\x00\xff"), ValueError, "info", "record-info"),
    ("params missing keys", _drop_param, ValueError, "info", "params lack perm_size"),
    ("params wrong type", lambda i, r: _edit_info("params", {
        **json.load(open(i))["params"], "seq_len": "32"})(i, r), ValueError, "info",
     "seq_len='32'"),
    ("info deleted", lambda i, r: os.remove(i), FileNotFoundError, "dir", "no record_info"),
])
def test_record_info_that_does_not_match_its_shard(tmp_path, recs, case, edit, error, names,
                                                   words):
  record_dir, files, infos = _copy(recs["one"], tmp_path / "r")
  words = words.format(n=json.load(open(infos[0]))["num_records"])   # as the writer counted
  edit(infos[0], files[0])
  with pytest.raises(error) as err:
    pipeline.pretrain_dataset(record_dir, ph.SEQ, ph.REUSE, ph.NP, ph.BSZ, False)
  message = str(err.value)
  named = {"info": infos[0], "record": files[0], "dir": record_dir}.get(names, names)
  assert named in message.split(": ")[0] and words in message and "\n" not in message, message


def test_a_shard_without_its_record_info_is_not_silently_left_out(tmp_path, recs):
  record_dir, files, infos = _copy(recs["many"], tmp_path / "r")
  os.remove(infos[1])
  with pytest.raises(ValueError, match=f"^{files[1]}: record file without a record-info"):
    record_format.find_records(record_dir)


# ---- checkpoints -----------------------------------------------------------------------------

SIZE = dict(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=24, n_token=40)


def _init_checkpoints(tmp_path):
  """A release-named (TF1) and a native TF2 checkpoint of the same small model."""
  tf1 = ref.write_tf1_checkpoint(ref.random_release_weights(**SIZE), str(tmp_path / "tf1.ckpt"))
  model = XLNetPretrainModel(XLNetConfig(**SIZE), RunConfig(dropout=0.0, dropatt=0.0))
  native = checkpoint.save_native_checkpoint(model, str(tmp_path / "native" / "ckpt"))
  return {"tf1": tf1, "native": native}


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_init_checkpoint_with_a_bad_data_file(tmp_path, damage):
  for kind, prefix in _init_checkpoints(tmp_path).items():
    data = prefix + ".data-00000-of-00001"
    if damage == "deleted":
      os.remove(data)
    else:
      _truncate(data, os.path.getsize(data) // 2)
    model = XLNetPretrainModel(XLNetConfig(**SIZE), RunConfig(dropout=0.0, dropatt=0.0))
    error = FileNotFoundError if damage == "deleted" else ValueError
    with pytest.raises(error) as err:
      loading.load_checkpoint(model, prefix)
    message = str(err.value)
    assert message.startswith(data + ": ") and "\n" not in message, (kind, message)
    assert ("not found" if damage == "deleted" else "truncated") in message, (kind, message)


@pytest.mark.slow
def test_resume_from_a_checkpoint_with_a_bad_data_file(tmp_path, recs):
  """The trainer's own resume (model_dir/ckpt): a deleted or truncated data file of the latest
  checkpoint stops run_pretrain.py with one line naming it (and which older one to fall back
  to), before any step."""
  first = _run_concurrently({"first": _pretrain_argv(
      recs["one"], tmp_path / "m", recs["cfg"], "--train_steps=4", "--steps_per_loop=2",
      "--save_every=2", "--xla=off")})["first"]       # (off: no XLA compile, quicker here)
  assert first[0] == 0, first[2][-2000:]
  assert _checkpoints(tmp_path / "m") == ["ckpt-2.index", "ckpt-4.index"]
  runs = {}
  for damage in ("deleted", "truncated"):
    shutil.copytree(tmp_path / "m", tmp_path / damage)
    data = str(tmp_path / damage / "ckpt" / "ckpt-4.data-00000-of-00001")
    if damage == "deleted":
      os.remove(data)
    else:
      _truncate(data, os.path.getsize(data) // 3)
    runs[damage] = _pretrain_argv(recs["one"], tmp_path / damage, recs["cfg"],
                                  "--train_steps=8", "--steps_per_loop=2", "--save_every=2",
                                  "--allow_changed_settings")   # more steps (run.json)
  for damage, result in _run_concurrently(runs).items():
    data = str(tmp_path / damage / "ckpt" / "ckpt-4.data-00000-of-00001")
    last = _assert_one_line_error(result, data)
    assert "resume from ckpt-2" in last, last
    assert _checkpoints(tmp_path / damage) == ["ckpt-2.index", "ckpt-4.index"], damage


def test_feature_cache_damaged_or_stale_is_rebuilt(tmp_path, text_and_sp, capsys):
  """A fine-tuning feature cache is ours: truncated or bit-flipped, it is rebuilt (one line
  says so), never read into a DataLossError; an edited data file gets a fresh cache."""
  from data_utils.tokenization import Tokenizer
  from finetuning import classifier_features
  from finetuning.classifier_task import ClassifierConfig, ClassifierTask
  _, sp = text_and_sp
  data = tmp_path / "sst2"
  data.mkdir()
  (data / "train.tsv").write_text("sentence\tlabel\n" + "".join(
      f"{w} film number {k}\t{k % 2}\n" for k, w in enumerate(["good", "bad"] * 6)))
  cfg = tmp_path / "c.json"
  cfg.write_text(json.dumps(dict(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=16,
                                 n_token=Tokenizer(sp, lower=True).vocab_size)))
  config = ClassifierConfig(task_name="sst-2", data_dir=str(data), sp_model=sp,
                            cache_dir=str(tmp_path / "cache"), uncased=True, max_seq_length=16)
  task = ClassifierTask(config, XLNetConfig.from_json(str(cfg)), RunConfig())
  path = task.features_path("train")
  good = open(path, "rb").read()
  classifier_features.check_cache(path, 16)
  rows = lambda: sum(1 for _ in tf.data.TFRecordDataset(task.features_path("train")))
  for damaged in (good[:-7], good[:40] + bytes([good[40] ^ 4]) + good[41:]):
    open(path, "wb").write(damaged)
    with pytest.raises(ValueError, match=rf"^{path}: .*(truncated|CRC32C)"):
      classifier_features.check_cache(path, 16)
    assert rows() == 12
    assert "rebuilding the feature cache" in capsys.readouterr().out
    assert open(path, "rb").read() == good
  with open(data / "train.tsv", "a") as f:
    f.write("great film again\t1\n")
  assert task.features_path("train") != path and rows() == 13
