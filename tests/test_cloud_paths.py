"""Every path on a tf.io.gfile URL: the whole chain, in one process, on TensorFlow's in-memory
`ram://` file system (the same code path as `gs://`).

tokenizer -> records -> pretraining (then a rerun that resumes; its export with the encoder's
SavedModel) -> run_classifier / run_squad / run_race from that export, with their prediction and
submission files and their --export_dir SavedModels (names not prefixes of each other: see
ARCHITECTURE.md on ram://): each step
is the entry script's own `main`, run in this process (ram:// lives in one process's memory).
Nothing may be written to the local disk outside pytest's temporary directory: a Python audit
hook records every local open-for-writing, mkdir, rename and remove while the chain runs, the
working directory is an empty temporary folder that must stay empty (a URL turned into a
relative local path would land there, e.g. `ram:/...`), and TMPDIR points inside tmp_path.
"""

import json
import os
import sys
import tempfile

import pytest

from data_utils import fileio
from reproduction import tasks
from tests.script_helpers import run_main

BUCKET = "ram://chain-bucket"

_audit = {"active": False, "allowed": (), "writes": []}


def _hook(event, args):
  if not _audit or not _audit["active"]:   # (None at interpreter teardown)
    return
  path = None
  if event == "open" and args and isinstance(args[0], (str, bytes)):
    mode, flags = (args[1] or ""), (args[2] if len(args) > 2 else 0) or 0
    if any(c in str(mode) for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
      path = args[0]
  elif event in ("os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir", "os.truncate",
                 "shutil.copyfile", "shutil.rmtree", "os.symlink", "os.link"):
    path = args[0] if args else None
  if isinstance(path, bytes):
    path = os.fsdecode(path)
  if isinstance(path, str) and not path.startswith("/dev/"):
    full = os.path.abspath(path)
    if not full.startswith(_audit["allowed"]):
      _audit["writes"].append(f"{event} {full}")


_installed = []


def _copy_tree(local, url):
  for directory, _, files in os.walk(local):
    for name in files:
      src = os.path.join(directory, name)
      fileio.write_atomic(fileio.join(url, os.path.relpath(src, local)),
                          open(src, "rb").read())


@pytest.fixture()
def bucket(tmp_path, monkeypatch):
  """Task data written under tmp_path, then copied to the bucket (before the audit starts)."""
  docs = tasks.split_documents(tasks.load_documents(), seed=0)
  data = tmp_path / "data"
  data.mkdir()
  tasks.write_pretrain_corpus(docs["train"][:300], str(data / "corpus.txt"), passes=1, seed=0)
  tasks.write_classification(docs, str(data / "classify"), seed=0, train_per_class=6,
                             test_per_class=2, n_labels=3)
  tasks.write_squad(docs, str(data / "squad"), seed=0, n_train=16, n_eval=8, max_chars=300)
  tasks.write_race(docs, str(data / "RACE"), seed=0, n_train=8, n_eval=4, max_chars=300)
  _copy_tree(str(data), f"{BUCKET}/data")
  config = {"n_layer": 2, "d_model": 32, "n_head": 2, "d_head": 16, "d_inner": 64,
            "ff_activation": "gelu", "untie_r": True, "n_token": 300}
  fileio.write_atomic(f"{BUCKET}/models/xlnet_config.json", json.dumps(config))
  work = tmp_path / "cwd"
  work.mkdir()
  (tmp_path / "tmpdir").mkdir()
  monkeypatch.chdir(work)
  monkeypatch.setenv("TMPDIR", str(tmp_path / "tmpdir"))
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmpdir"))   # autograph's files
  monkeypatch.setattr(sys, "dont_write_bytecode", True)
  if not _installed:
    sys.addaudithook(_hook)
    _installed.append(True)
  _audit.update(active=True, allowed=(str(tmp_path),), writes=[])
  yield work
  _audit["active"] = False
  assert not _audit["writes"], "written outside tmp_path:\n" + "\n".join(_audit["writes"][:20])
  assert not os.listdir(work), f"written to the working directory: {os.listdir(work)}"
  fileio.rmtree(BUCKET)


def test_the_whole_chain_runs_on_a_bucket(bucket, capsys):
  b = BUCKET
  spm = f"{b}/models/spiece"
  run_main("data_utils/train_tokenizer.py", input_glob=f"{b}/data/corpus.txt",
           model_prefix=spm, vocab_size=300, seed=0)
  assert fileio.exists(f"{spm}.model")
  shape = dict(seq_len=32, reuse_len=16, bsz_per_host=4, num_predict=5, bi_data=False)
  run_main("data_utils/create_pretrain_data.py", input_glob=f"{b}/data/corpus.txt",
           sp_model=f"{spm}.model", output_dir=f"{b}/records", seed=0, **shape)
  assert fileio.glob(f"{b}/records/*.tfrecord*")
  pre = dict(record_dir=f"{b}/records", model_config_path=f"{b}/models/xlnet_config.json",
             model_dir=f"{b}/pretrain", mem_len=16, learning_rate=1e-3, warmup_steps=1,
             steps_per_loop=2, save_every=2, seed=0, xla="off", **shape)
  run_main("run_pretrain.py", train_steps=2, **pre)
  run_main("run_pretrain.py", train_steps=4, sp_model=f"{spm}.model",   # resumes at 2 (run.json:
           allow_changed_settings=True, **pre)                       # more steps, recorded)
  out = capsys.readouterr().out
  assert f"resumed from {b}/pretrain/ckpt/ckpt-2 at step 2" in out, out[-2000:]
  export = f"{b}/pretrain/export"
  assert fileio.exists(f"{export}/xlnet_model.ckpt.index")
  assert fileio.exists(f"{export}/saved_model/saved_model.pb")     # the encoder on raw text
  # the export names the step its parts come from: the second run's last (the first run's
  # export of step 2 was replaced whole)
  assert json.loads(fileio.read_text(f"{export}/export.json"))["step"] == 4
  init = dict(model_config_path=f"{export}/xlnet_config.json",
              init_checkpoint=f"{export}/xlnet_model.ckpt", sp_model=f"{spm}.model",
              train_steps=2, steps_per_loop=2, save_every=2, warmup_steps=1,
              learning_rate=1e-3, seed=0, xla="off")   # paths are the point, not XLA
  run_main("run_classifier.py", task_name="dbpedia", data_dir=f"{b}/data/classify",
           model_dir=f"{b}/cls", max_seq_length=32, train_batch_size=4, eval_batch_size=4,
           do_train=True, do_eval=True, do_predict=True, export_dir=f"{b}/serving-cls",
           **init)
  assert fileio.exists(f"{b}/serving-cls/saved_model.pb")
  submissions = fileio.glob(f"{b}/cls/*test*")
  assert submissions, fileio.listdir(f"{b}/cls")
  lines = fileio.read_text(submissions[0]).splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 1 + 3 * 2
  assert fileio.glob(f"{b}/cls/features/*.tfrecord")
  run_main("run_squad.py", train_file=f"{b}/data/squad/train-v2.0.json",
           predict_file=f"{b}/data/squad/dev-v2.0.json", model_dir=f"{b}/squad",
           max_seq_length=64, doc_stride=28, max_query_length=32, train_batch_size=4,
           do_train=True, do_predict=True, export_dir=f"{b}/serving-squad", **init)
  assert fileio.exists(f"{b}/serving-squad/saved_model.pb")
  predictions = json.loads(fileio.read_text(f"{b}/squad/predictions.json"))
  questions = json.loads(fileio.read_text(f"{b}/data/squad/dev-v2.0.json"))["data"]
  assert set(predictions) == {q["id"] for d in questions for p in d["paragraphs"]
                              for q in p["qas"]}
  assert fileio.exists(f"{b}/squad/null_odds.json")
  run_main("run_race.py", data_dir=f"{b}/data/RACE", model_dir=f"{b}/race",
           max_seq_length=64, max_qa_length=32, train_batch_size=2, do_train=True,
           do_eval=True, export_dir=f"{b}/serving-race", **init)
  assert fileio.exists(f"{b}/serving-race/saved_model.pb")
  assert fileio.glob(f"{b}/race/ckpt*") or fileio.glob(f"{b}/race/ckpt/*")
