"""run_pretrain.py --distribution_strategy=multi_worker_mirrored: two worker processes on
127.0.0.1 (TF_CONFIG, free ports, gRPC collectives on localhost) train the same losses as one
process with the same global batch, only the chief writes files, and a second run of the same
command (more steps) resumes on both workers from the same step, with every host's memory.

The one-process reference: run_pretrain.main with MirroredStrategy over two logical CPUs, whose
two replicas are fed exactly what the two hosts read (host h: shards h, h + 2, ...; the
pipeline is the real one, called with each host's InputContext). Same global batch, same
replica ids (dropout seeds, the mlm draw), same all-reduce of the gradients.
"""

import json
import os
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

from tests import pretrain_helpers as ph

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

REFERENCE = r"""
import sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
sys.path.insert(0, sys.argv[1])
sys.argv = ["run_pretrain.py"] + sys.argv[2:]
import run_pretrain
from absl import app
from training import distribution
from training.pretrain_task import PretrainTask

host_dataset = PretrainTask.dataset

def both_hosts(self, ctx, skip_batches=0):   # element 2s + h = host h's batch of step s
  ds = [host_dataset(self, tf.distribute.InputContext(2, h, 2), skip_batches) for h in (0, 1)]
  return tf.data.Dataset.zip(*ds).flat_map(
      lambda a, b: tf.data.Dataset.from_tensors(a).concatenate(tf.data.Dataset.from_tensors(b)))

PretrainTask.dataset = both_hosts
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
  return dict(env, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPATH=ROOT, **extra)


def losses(stdout):
  return {int(m.group(1)): float(m.group(2))
          for m in re.finditer(r"^step (\d+)/\d+ loss ([\d.]+)", stdout, re.M)}


def run_all(procs, timeout=300):
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
          f"--train_steps={steps}", "--steps_per_loop=1", "--save_every=3"]


def test_two_workers_train_as_one_process_and_resume_together(setup):
  base, records, cfg = setup
  from data_utils import pipeline
  _, files, _ = pipeline.record_format.find_records(records)
  assert len(files) >= 2, files               # both hosts read data

  ports = free_ports(2)
  workers = [f"127.0.0.1:{p}" for p in ports]

  def launch(steps):
    model_dir = base / "mw"
    args = command(records, cfg, model_dir, steps) + ["--distribution_strategy="
                                                      "multi_worker_mirrored"]
    return [subprocess.Popen(
        [sys.executable, "run_pretrain.py"] + args, cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=clean_env(TF_CONFIG=json.dumps({"cluster": {"worker": workers},
                                            "task": {"type": "worker", "index": i}})))
            for i in range(2)]

  # First run: 3 steps (checkpoint at 3), alongside the one-process reference of 6 steps.
  reference = subprocess.Popen(
      [sys.executable, "-c", REFERENCE, ROOT] + command(records, cfg, base / "ref", 6),
      cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env())
  first = run_all(launch(3) + [reference])
  expected = losses(first[2])
  assert sorted(expected) == [1, 2, 3, 4, 5, 6]
  for out in first[:2]:                       # both workers log the same (all-reduced) losses
    got = losses(out)
    assert sorted(got) == [1, 2, 3]
    # Same arithmetic, another all-reduce (gRPC ring vs in-process): float32 sums in another
    # order; measured differences are below 1e-6 relative.
    np.testing.assert_allclose([got[s] for s in (1, 2, 3)], [expected[s] for s in (1, 2, 3)],
                               rtol=1e-5)
  model_dir = base / "mw"
  assert sorted(os.listdir(model_dir / "ckpt")) == ["checkpoint", "ckpt-3.data-00000-of-00001",
                                                    "ckpt-3.index"]
  assert (model_dir / "export" / "xlnet_config.json").exists()
  assert "exported" in first[0] and "saved" in first[1]   # the non-chief saved, elsewhere

  # Second run of the same command, with --train_steps=6: both resume at step 3.
  second = run_all(launch(6))
  for out in second:
    assert "at step 3" in out, out[-2000:]
    got = losses(out)
    assert sorted(got) == [4, 5, 6]
    # memory of both hosts restored: the resumed losses are the uninterrupted reference's
    np.testing.assert_allclose([got[s] for s in (4, 5, 6)], [expected[s] for s in (4, 5, 6)],
                               rtol=1e-5)
  assert sorted(os.listdir(model_dir / "ckpt"))[-2:] == ["ckpt-6.data-00000-of-00001",
                                                         "ckpt-6.index"]
