"""A sweep over learning rate, seed, training length and warmup (and, with weight decay or
fairseq's Adam, over Adam's betas, epsilon and decay rate) compiles one XLA program.

These settings enter the train step as tensors (training/optimization.WarmupDecay's variables,
the dropout generators' seeded state), so XLA's persistent compilation cache, which names each
file by the program's signature and HLO fingerprint, holds the same file names after each run;
a setting that does change the program (the sequence length) gives another. And the schedule,
written with tensors, still computes TF1's own tf.compat.v1.train.polynomial_decay /
cosine_decay with the release's warmup, bit for bit.
"""

import json
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_utils import tokenization
from tests import warm
from tests.hang_guard import HANG_GUARD
from training import optimization

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = ("the film was long and the story went on with many scenes of people talking about "
         "their day while music played softly").split()


@pytest.fixture(scope="module")
def sst2(tmp_path_factory):
  d = tmp_path_factory.mktemp("sst2")
  rng = random.Random(0)
  for split, n in (("train", 64), ("dev", 16)):
    rows = []
    for _ in range(n):
      label = rng.randrange(2)
      words = rng.sample(WORDS, 8) + [("excellent", "awful")[label]]
      rows.append(f"{' '.join(words)}\t{label}\n")
    (d / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(rows))
  text = d / "text.txt"
  text.write_text((d / "train.tsv").read_text().replace("\t", " "))
  sp = tokenization.train_sentencepiece([str(text)], str(d / "sp"), 60, lower=True)
  cfg = d / "config.json"
  cfg.write_text(json.dumps({"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8,
                             "d_inner": 32, "n_token": 60}))
  return d, sp, cfg


def _programs(tmp_path, sst2, name, *flags):
  """The names of the XLA cache files a tiny fine-tuning run writes into a fresh directory."""
  d, sp, cfg = sst2
  cache = tmp_path / f"cache_{name}"
  env = dict(os.environ, TF_XLA_FLAGS=f"--tf_xla_persistent_cache_directory={cache}")
  args = [sys.executable, "run_classifier.py", "--task_name=sst-2", f"--data_dir={d}",
          f"--sp_model={sp}", "--uncased", f"--model_config_path={cfg}",
          f"--model_dir={tmp_path / name}", "--train_batch_size=8", "--steps_per_loop=2",
          "--save_every=4", "--dropout=0.1", "--do_train"]
  defaults = {"--max_seq_length": "24", "--learning_rate": "1e-3", "--seed": "0",
              "--train_steps": "4", "--warmup_steps": "0"}
  for flag in flags:
    defaults[flag.split("=")[0]] = flag.split("=", 1)[1]
  args += [f"{k}={v}" for k, v in defaults.items()]
  r = warm.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                     timeout=HANG_GUARD)
  assert r.returncode == 0, r.stderr[-3000:]
  names = {n for n in os.listdir(cache) if n.endswith(".pb")}
  assert names, f"no XLA cache file in {cache}: {os.listdir(cache)}"
  return names


def test_sweep_settings_do_not_change_the_program(tmp_path, sst2):
  base = _programs(tmp_path, sst2, "base")
  swept = _programs(tmp_path, sst2, "swept", "--learning_rate=3e-4", "--seed=7",
                    "--train_steps=6", "--warmup_steps=2")
  assert swept == base
  longer = _programs(tmp_path, sst2, "longer", "--max_seq_length=32")
  assert longer.isdisjoint(base)


@pytest.mark.parametrize("semantics", ["release", "fairseq"])
def test_a_sweep_over_adams_settings_compiles_once(tmp_path, sst2, semantics):
  """With weight decay on (the release's AdamWeightDecayOptimizer, fairseq's Adam), the betas,
  epsilon and the decay rate enter the update as tensors: one program for the sweep. (Decay on
  or off is part of the program; the release's rule without decay, TF1's AdamOptimizer, keeps
  its settings as constants: training/optimization.py.)"""
  rule = f"--optimizer={semantics}"
  base = _programs(tmp_path, sst2, "base", rule, "--weight_decay=0.01")
  swept = _programs(tmp_path, sst2, "swept", rule, "--adam_beta1=0.8", "--adam_beta2=0.98",
                    "--adam_epsilon=1e-6", "--weight_decay=0.1")
  assert swept == base


# ---- the schedule against TF1 ----------------------------------------------------------------
def _tf1_lr(peak, train_steps, warmup_steps, decay, min_lr_ratio, global_step):
  """The release's model_utils.get_train_op schedule, in TF1's own ops."""
  v1 = tf.compat.v1.train
  if decay == "linear":
    decay_lr = v1.polynomial_decay(peak, global_step=global_step - warmup_steps,
                                   decay_steps=train_steps - warmup_steps,
                                   end_learning_rate=peak * min_lr_ratio, power=1.0)
  else:
    decay_lr = v1.cosine_decay(peak, global_step=global_step - warmup_steps,
                               decay_steps=train_steps - warmup_steps, alpha=min_lr_ratio)
  if warmup_steps == 0:
    return decay_lr
  warmup_lr = (tf.cast(global_step, tf.float32) / tf.cast(warmup_steps, tf.float32) * peak)
  return tf.where(global_step < warmup_steps, warmup_lr, decay_lr)


@pytest.mark.parametrize("peak, train_steps, warmup_steps, decay, min_lr_ratio", [
    (1e-3, 1000, 100, "linear", 0.0),
    (5e-5, 333, 7, "linear", 0.1),
    (3e-4, 120, 0, "cosine", 0.0),
    (2.5e-5, 1200, 120, "cosine", 0.01),
])
def test_schedule_equals_tf1_bit_for_bit(peak, train_steps, warmup_steps, decay, min_lr_ratio):
  # Over every step and past the end. In a graph (as TF1 ran it: its graph rewriting folds
  # the constants) ours equals TF1's bit for bit. Compiled by XLA (the train step: one scalar
  # step at a time), ours equals TF1's own graph compiled by XLA: bit for bit for linear decay;
  # for cosine XLA folds TF1's constant pi into 1/decay_steps, another rounding (XLA's cosine
  # and multiply-adds differ from the graph's kernels anyway: XLA and graph values differ).
  steps = tf.range(train_steps + 20, dtype=tf.int64)
  tf1 = lambda s: tf.cast(_tf1_lr(peak, train_steps, warmup_steps, decay, min_lr_ratio, s),
                          tf.float32)
  schedule = optimization.WarmupDecay(peak, train_steps, warmup_steps, decay, min_lr_ratio)
  each = lambda fn: lambda s: tf.map_fn(fn, s, fn_output_signature=tf.float32)
  graph = {"graph": (tf.function(schedule)(steps), tf.function(tf1)(steps)),
           "graph, one step at a time": (tf.function(each(schedule))(steps),
                                         tf.function(each(tf1))(steps)),
           "xla, one step at a time": (tf.function(each(schedule), jit_compile=True)(steps),
                                       tf.function(each(tf1), jit_compile=True)(steps))}
  for mode, (ours, ref) in graph.items():
    ours, ref = ours.numpy(), ref.numpy()
    if mode.startswith("graph"):
      assert ref[-1] == np.float32(peak * min_lr_ratio)
    if mode.startswith("xla") and decay == "cosine":
      np.testing.assert_allclose(ours, ref, rtol=3e-7, atol=1e-7 * peak)
      continue
    differ = np.flatnonzero(ours.view(np.int32) != ref.view(np.int32))
    assert differ.size == 0, (mode, differ[:5], ours[differ[:5]], ref[differ[:5]])


def _summary_count(tmp_path, sst2, name, cache, *flags):
  """(loaded, compiled) from the run summary's "XLA programs" line of a tiny fine-tuning run
  with the project's own cache (--compile_cache) in `cache`."""
  d, sp, cfg = sst2
  args = [sys.executable, "run_classifier.py", "--task_name=sst-2", f"--data_dir={d}",
          f"--sp_model={sp}", "--uncased", f"--model_config_path={cfg}",
          f"--model_dir={tmp_path / name}", "--train_batch_size=8", "--steps_per_loop=2",
          "--save_every=2", "--max_seq_length=24", "--do_train", f"--compile_cache={cache}",
          *flags]
  env = {k: v for k, v in os.environ.items() if k != "TF_XLA_FLAGS"}
  r = warm.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                     timeout=HANG_GUARD)
  assert r.returncode == 0, r.stderr[-3000:]
  (line,) = [l for l in r.stdout.splitlines() if l.strip().startswith("XLA programs:")]
  words = line.split(":", 1)[1].split()
  assert words[1:3] == ["program(s)", "loaded,"] and words[4:7] == ["compiled", "and", "stored"]
  return int(words[0]), int(words[3])


def test_a_sweep_run_and_a_resumed_run_load_the_compiled_program(tmp_path, sst2):
  cache = tmp_path / "cache"
  assert _summary_count(tmp_path, sst2, "base", cache, "--train_steps=2") == (0, 1)
  assert _summary_count(tmp_path, sst2, "swept", cache, "--train_steps=4", "--seed=3",
                        "--learning_rate=2e-3", "--warmup_steps=1") == (1, 0)
  # base resumed from its step-2 checkpoint to step 4 (a longer run asked for): what a run
  # restarted after a preemption does before its first step
  assert _summary_count(tmp_path, sst2, "base", cache, "--train_steps=4",
                        "--allow_changed_settings") == (1, 0)
