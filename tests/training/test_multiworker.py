"""run_pretrain.py --distribution_strategy=multi_worker_mirrored: two worker processes on
127.0.0.1 (TF_CONFIG, free ports, gRPC collectives on localhost) train the same losses as one
process with the same global batch, only the chief writes files, and a second run of the same
command (more steps) resumes on both workers from the same step, with every host's memory.

The one-process reference: run_pretrain.main with MirroredStrategy over two logical CPUs and
twice the rows per host. The records serve both layouts the same way (data_utils/lanes.py):
global batch 8 from files of 4 lanes is two files read side by side, replica (or host) h taking
file stream h. Same global batch, same replica ids (dropout seeds, the mlm draw), same
all-reduce of the gradients.
"""

import json
import os
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

from tests import warm
from tests import pretrain_helpers as ph
from tests.hang_guard import HANG_GUARD

pytestmark = pytest.mark.slow   # a long system test (pyproject.toml)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

REFERENCE = r"""
from data_utils import cli_app; cli_app.skip_keras_optional_imports()   # as a script starts
import sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.argv = ["run_pretrain.py"] + sys.argv[1:]
import run_pretrain   # python -c from the root: the root is on sys.path
from absl import app
from training import distribution
distribution.get_strategy = lambda *a, **k: tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
app.run(run_pretrain.main)
"""


def free_ports(n):
  socks = [socket.socket() for _ in range(n)]
  for s in socks:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in socks]
  for s in socks:
    s.close()
  return ports


def clean_env(**extra):
  """No proxy for gRPC on localhost; one thread pool each (2 cores, 3 processes)."""
  env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
  return dict(env, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", **extra)


def logged_losses(stdout):
  """{step: loss} from the log lines (4 decimals)."""
  return {int(m.group(1)): float(m.group(2))
          for m in re.finditer(r"^step (\d+)/\d+ loss ([\d.]+)", stdout, re.MULTILINE)}


def event_losses(model_dir):
  """{step: loss} in float32 from the TensorBoard events the run wrote under model_dir/train."""
  import tensorflow as tf
  found = {}
  for path in tf.io.gfile.glob(os.path.join(model_dir, "train", "events.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == "loss":
          found[event.step] = float(tf.make_ndarray(value.tensor))
  return found


def run_all(procs, timeout=HANG_GUARD):
  try:
    outs = [p.communicate(timeout=timeout) for p in procs]
  finally:                                  # a failure or timeout leaves no child running
    for p in procs:
      p.kill()
  for p, (out, err) in zip(procs, outs):
    assert p.returncode == 0, err[-3000:]
  return [out for out, _ in outs]


@pytest.fixture(scope="module")
def setup(tmp_path_factory, text_and_sp):
  text, sp = text_and_sp
  from data_utils.tokenization import Tokenizer
  vocab = Tokenizer(sp, lower=True).vocab_size
  base = tmp_path_factory.mktemp("mw")
  records = ph.make_records(text, sp, base / "records", max_bytes=60_000)   # 3-4 shards
  cfg = base / "config.json"
  cfg.write_text(json.dumps({"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8,
                             "d_inner": 32, "n_token": vocab}))
  return base, records, cfg


def command(records, cfg, model_dir, steps):
  return ["--record_dir=" + records, f"--model_config_path={cfg}", f"--model_dir={model_dir}",
          f"--seq_len={ph.SEQ}", f"--reuse_len={ph.REUSE}", f"--num_predict={ph.NP}",
          f"--bsz_per_host={ph.BSZ}", "--nobi_data", f"--mem_len={2 * ph.REUSE}",
          "--dropout=0.1", "--dropatt=0.1", "--learning_rate=3e-3", "--warmup_steps=2",
          f"--train_steps={steps}", "--steps_per_loop=1", "--save_every=3",
          "--allow_changed_settings",     # the second run goes on to more steps (run.json)
          # The distribution is what is tested here; the step's XLA compile is tested in
          # test_pretrain.py (all --xla modes give the same losses). off halves the wall time.
          "--xla=off"]


def test_two_workers_train_as_one_process_and_resume_together(setup):
  base, records, cfg = setup
  from data_utils import pipeline
  _, files, _ = pipeline.record_format.find_records(records)
  assert len(files) >= 2, files               # both hosts read data

  ports = free_ports(2)
  workers = [f"127.0.0.1:{p}" for p in ports]

  def launch(steps):
    model_dir = base / "mw"
    args = [*command(records, cfg, model_dir, steps),
            "--distribution_strategy=multi_worker_mirrored"]
    return [warm.popen(
        [sys.executable, "run_pretrain.py"] + args, cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=clean_env(TF_CONFIG=json.dumps({"cluster": {"worker": workers},
                                            "task": {"type": "worker", "index": i}})))
            for i in range(2)]

  # First run: 3 steps (checkpoint at 3), alongside the one-process reference of 6 steps.
  reference = warm.popen(
      [sys.executable, "-c", REFERENCE] + command(records, cfg, base / "ref", 6)
      + [f"--bsz_per_host={2 * ph.BSZ}"],
      cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env())
  first = run_all(launch(3) + [reference])
  expected = event_losses(base / "ref")
  assert sorted(expected) == [1, 2, 3, 4, 5, 6]
  model_dir = base / "mw"
  # Both workers log the same (all-reduced) losses; the chief's TensorBoard holds them in full.
  assert logged_losses(first[0]) == logged_losses(first[1])
  assert sorted(logged_losses(first[0])) == [1, 2, 3]
  got = event_losses(model_dir)
  # Same arithmetic, another all-reduce (gRPC collectives between two processes vs in-process
  # copies): float32 sums in another order. Measured: identical.
  np.testing.assert_allclose([got[s] for s in (1, 2, 3)], [expected[s] for s in (1, 2, 3)],
                             rtol=1e-5)
  assert sorted(os.listdir(model_dir / "ckpt")) == ["checkpoint", "ckpt-3.data-00000-of-00001",
                                                    "ckpt-3.index"]
  assert (model_dir / "export" / "xlnet_config.json").exists()
  # The non-chief saved too (the save's collectives) into its own temporary directory, removed.
  saved = re.search(r"^saved (\S+)", first[1], re.MULTILINE).group(1)
  assert not saved.startswith(str(model_dir)) and not os.path.exists(saved + ".index")

  # Second run of the same command with --train_steps=6: both hosts resume at step 3. (Step s
  # updates with the learning rate of step s - 1: warmup 2, so steps 1-3 do not depend on
  # --train_steps and the reference's 6-step schedule applies throughout.)
  second = run_all(launch(6))
  for out in second:
    assert "at step 3" in out, out[-2000:]
  assert logged_losses(second[0]) == logged_losses(second[1])
  got = event_losses(model_dir)
  assert sorted(got) == [1, 2, 3, 4, 5, 6]
  # Every host's memory was restored: the resumed losses are the uninterrupted reference's.
  np.testing.assert_allclose([got[s] for s in (4, 5, 6)], [expected[s] for s in (4, 5, 6)],
                             rtol=1e-5)
  print("multi-worker / one-process loss ratio - 1:",
        [got[s] / expected[s] - 1 for s in range(1, 7)])
  assert sorted(os.listdir(model_dir / "ckpt"))[-2:] == ["ckpt-6.data-00000-of-00001",
                                                         "ckpt-6.index"]
