"""The training log (training/progress.py, training/summary.py, the trainer's lines, the
scripts' start-up noise filter): rate and ETA measured after the first loop (which holds the
compile; the times here are injected, never the wall clock's), h:mm:ss, the model's size and
where its weights come from, the end-of-run summary, and TensorFlow's start-up noise absent by
default and kept with --verbose."""

import os
import random
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from data_utils import cli_app
from tests import warm
from tests import best_helpers
from tests.hang_guard import HANG_GUARD
from tests.training.test_training_steps import _classifier
from training import compile_cache
from training import progress
from training import summary
from training import trainer as trainer_lib
from training.stepper import Stepper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def _no_compile_cache(monkeypatch):
  """The summaries here are of runs without the XLA cache (its row: test_compile_cache.py)."""
  monkeypatch.setattr(compile_cache, "_active", None)


def test_hms_and_counts():
  assert [progress.hms(s) for s in (0, 59.4, 59.6, 3723, 100000, None, float("inf"))] == [
      "0:00:00", "0:00:59", "0:01:00", "1:02:03", "27:46:40", "-:--:--", "-:--:--"]
  assert [progress.count(n) for n in (950, 5954, 117_300_000, 2_500_000_000)] == [
      "950", "6.0K", "117.3M", "2.5B"]
  dense = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4)])   # 3 x 4 + 4
  config = types.SimpleNamespace(n_layer=12, d_model=768)
  assert progress.describe_model(dense, config, "xlnet") == (
      "16 parameters (xlnet, 12 layers, d_model 768)")
  mpnet = types.SimpleNamespace(num_hidden_layers=2, hidden_size=32)
  assert progress.describe_model(dense, mpnet, "mpnet") == (
      "16 parameters (mpnet, 2 layers, hidden 32)")


def test_rate_and_eta_leave_out_the_first_loop():
  """A first loop of 100 s (the compile) then loops of 1 s for 10 steps with 0.5 s between
  them: the ETA is 0.15 s/step x the steps left, never from the first loop's 10 s/step."""
  pace = progress.Progress(0, 1000)
  first = pace.loop(10, 100.0, now=100.0)
  assert first.compile and first.eta is None and first.per_step is None
  second = pace.loop(20, 1.0, now=101.5)           # 1.5 s for 10 steps since the first loop
  assert not second.compile
  assert second.per_step == pytest.approx(0.1) and second.per_second == pytest.approx(10.0)
  assert second.eta == pytest.approx(0.15 * 980)
  third = pace.loop(30, 1.0, now=103.0)
  assert third.eta == pytest.approx(0.15 * 970) and progress.hms(third.eta) == "0:02:26"
  # a resumed run compiles again: its first loop is set aside as well
  resumed = progress.Progress(500, 1000)
  assert resumed.loop(510, 300.0, now=300.0).compile
  after = resumed.loop(520, 1.0, now=301.0)
  assert after.eta == pytest.approx(0.1 * 480)      # not 301 s / 20 steps x 480


class _Clock:
  """The trainer's clock: each host loop reads it before and after; the first loop lasts
  100 s, every later one 1 s, with 0.5 s between loops."""

  def __init__(self):
    self.now, self.calls = 0.0, 0

  def __call__(self):
    self.calls += 1
    if self.calls % 2 == 0:                        # the end of a loop
      self.now += 100.0 if self.calls == 2 else 1.0
    elif self.calls > 1:
      self.now += 0.5
    return self.now


def _events(directory, tag):
  values = []
  for path in tf.io.gfile.glob(os.path.join(directory, "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == tag:
          values.append((event.step, float(tf.make_ndarray(value.tensor))))
  return sorted(values)


def test_trainer_lines_tensorboard_and_summary(tmp_path):
  model_dir = str(tmp_path / "run")
  scores = {step: 0.5 + 0.1 * (step == 6) for step in range(1, 13)}
  lines = []
  task = best_helpers.ScriptedTask(scores)
  task.tokens_per_step = 3
  trainer_lib.Trainer(task, tf.distribute.get_strategy(), model_dir, 6, steps_per_loop=2,
                      save_every=6, xla="off", log=lines.append, clock=_Clock()).train()
  assert lines[0] == "model: 1 parameter, random weights (seed 0, no --init_checkpoint)"
  steps = [line for line in lines if line.startswith("step ")]
  assert steps[0].endswith("lr 1.00e+00 100.0s for 2 steps, with compile"), steps
  # 1 s per loop of 2 steps: 0.5 s/step, 6 tokens/s; (101.5 - 100) s / 2 steps x 2 left
  assert steps[1].endswith("0.50s/step 6 tokens/s ETA 0:00:02"), steps
  assert steps[2].endswith("0.50s/step 6 tokens/s ETA 0:00:00"), steps
  assert _events(os.path.join(model_dir, "train"), "tokens_per_second") == [(4, 6.0), (6, 6.0)]

  # resumed: its first loop compiles again and is set aside too
  lines.clear()
  trainer_lib.Trainer(best_helpers.ScriptedTask(scores), tf.distribute.get_strategy(),
                      model_dir, 12, steps_per_loop=2, save_every=6, xla="off",
                      log=lines.append, clock=_Clock()).train()
  ckpt6 = os.path.join(model_dir, "ckpt", "ckpt-6")
  assert lines[:2] == [f"model: 1 parameter, resuming from {ckpt6}",
                       f"resumed from {ckpt6} at step 6"]
  steps = [line for line in lines if line.startswith("step ")]
  assert steps[0].endswith("100.0s for 2 steps, with compile"), steps
  assert steps[1].endswith("ETA 0:00:02") and steps[2].endswith("ETA 0:00:00"), steps

  run = summary.RunSummary("run_x.py", model_dir, started=1000.0)
  run.metric = "score"
  run.add_predictions(None)                         # a task that does not say what it wrote
  run.add_predictions(["p/dev.jsonl", "p/test.jsonl"])
  run.add_predictions("p/dev.jsonl")
  run.add_export(str(tmp_path / "never-written"))
  best = os.path.join(model_dir, "best", "step-6", "ckpt")
  assert run.lines(now=1000.0 + 3723.4) == [
      "run_x.py finished in 1:02:03",
      f"  model dir:   {model_dir} (last checkpoint ckpt/ckpt-12, step 12)",
      f"  best:        score 0.6000 at step 6 ({best})",
      "  predictions: p/dev.jsonl, p/test.jsonl"]


def test_summary_printed_after_a_successful_main_only(capsys):
  from finetuning import runner
  summary.start("run_x.py", None, started=0.0)
  assert runner.report_written(None) == []
  assert runner.report_written(["a.jsonl"]) == ["a.jsonl"]
  cli_app.on_success(summary.report)
  with pytest.raises(SystemExit) as e:
    cli_app.run(lambda argv: None, argv=["run_x.py"])
  assert e.value.code in (None, 0)
  out = capsys.readouterr().out.splitlines()
  assert out[0] == "wrote a.jsonl" and out[-2].startswith("run_x.py finished in ")
  assert out[-1] == "  predictions: a.jsonl"
  summary.start("run_x.py", None, started=0.0)
  cli_app.on_success(summary.report)
  with pytest.raises(SystemExit) as e:
    cli_app.run(lambda argv: sys.exit("run_x.py: refused"), argv=["run_x.py"])
  assert e.value.code == "run_x.py: refused" and "finished" not in capsys.readouterr().out
  cli_app._on_success.clear()


def test_stepper_says_what_it_loaded(capsys):
  task = _classifier(1e-3)
  lines = []
  stepper = Stepper(task, xla="off", log=lines.append)
  # hand count: embedding 40x16 + mask_emb 16; per layer q, k, v, o, r 5x16x16, biases
  # r_w, r_r, r_s 3x16, seg_embed 2x16, 2 layer norms 4x16, feed-forward 16x32+32+32x16+16;
  # summary projection 16x16+16, logits 16x2+2
  assert progress.parameters(stepper.model) == 40 * 16 + 16 + 2 * (
      5 * 256 + 48 + 32 + 64 + 16 * 32 + 32 + 32 * 16 + 16) + 272 + 34 == 5954
  assert lines == ["model: 6.0K parameters (xlnet, 2 layers, d_model 16), random weights "
                   "(seed 0, no --init_checkpoint)"]
  named = stepper.weights()
  first = sorted(named)[0]
  stepper.load_weights({first: named[first]})
  assert lines[-1].startswith(f"load_weights: set 1 of {len(named)} variables; "
                              f"{len(named) - 1} keep their values (")
  Stepper(task, xla="off")                          # by default: print
  assert capsys.readouterr().out.startswith("model: 6.0K parameters")
  Stepper(task, xla="off", log=None).load_weights({first: named[first]})
  assert capsys.readouterr().out == ""


# ---- the scripts' start-up noise, end to end --------------------------------------------------
NOISE = ("absl::InitializeLog", "oneDNN", "cuInit", "cuda drivers", "Gradients do not exist",
         "cpu_feature_guard", "save_counter", "retracing")


@pytest.fixture(scope="module")
def tiny_sst2(tmp_path_factory):
  from data_utils import tokenization
  d = tmp_path_factory.mktemp("sst2")
  rng = random.Random(0)
  words = "good bad movie film great awful plot actor scene boring fun slow".split()
  sentence = lambda: " ".join(rng.choice(words) for _ in range(rng.randrange(3, 12)))
  for split, n in (("train", 32), ("dev", 8)):
    (d / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{sentence()}\t{rng.randrange(2)}\n" for _ in range(n)))
  (d / "text.txt").write_text((d / "train.tsv").read_text().replace("\t", " ") * 5)
  sp = tokenization.train_sentencepiece([str(d / "text.txt")], str(d / "sp"), 40, lower=True)
  (d / "config.json").write_text('{"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8, '
                                 '"d_inner": 32, "n_token": 40}')
  return d, sp


def _script(*args):
  env = {k: v for k, v in os.environ.items()       # TensorFlow left to say what it says
         if k not in ("TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES")}
  return warm.run([sys.executable, "run_classifier.py", *args], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=HANG_GUARD)


@pytest.mark.slow   # three script runs in subprocesses
def test_start_up_noise_filtered_unless_verbose(tiny_sst2, tmp_path):
  d, sp = tiny_sst2
  model_dir = tmp_path / "run"
  r = _script("--task_name=sst-2", f"--data_dir={d}", f"--sp_model={sp}", "--uncased",
              f"--model_config_path={d / 'config.json'}", f"--model_dir={model_dir}",
              "--max_seq_length=16", "--train_batch_size=4", "--eval_batch_size=8",
              "--train_steps=4", "--steps_per_loop=2", "--save_every=4", "--warmup_steps=0",
              "--xla=off", "--do_train", "--do_eval")
  assert r.returncode == 0, r.stderr[-3000:]
  assert not [line for line in r.stderr.splitlines() if any(n in line for n in NOISE)], r.stderr
  out = r.stdout.splitlines()
  assert ("model: 6.0K parameters (xlnet, 2 layers, d_model 16), random weights (seed 0, no "
          "--init_checkpoint)") in out
  steps = [line for line in out if line.startswith("step ")]
  assert steps[0].endswith("for 2 steps, with compile") and " ETA 0:00:00" in steps[1], out
  end = [k for k, line in enumerate(out) if line.startswith("run_classifier.py finished in 0:")]
  assert len(end) == 1, out
  rows = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in out[end[0] + 1:]}
  assert rows["model dir"] == f"{model_dir} (last checkpoint ckpt/ckpt-4, step 4)", out
  assert rows["best"].startswith("accuracy ") and "at step 4 (" in rows["best"], out
  assert "predictions" in rows, out     # the files run_classifier.py reported

  # a refusal: the one-line error passes the filter, the noise does not; --verbose keeps it
  quiet = _script("--task_name=sst-2", "--do_eval")
  assert quiet.returncode == 1
  assert quiet.stderr.strip() == "run_classifier.py: --data_dir is required", quiet.stderr
  verbose = _script("--task_name=sst-2", "--do_eval", "--verbose")
  assert verbose.returncode == 1
  assert verbose.stderr.strip().splitlines()[-1] == "run_classifier.py: --data_dir is required"
  assert [line for line in verbose.stderr.splitlines() if any(n in line for n in NOISE)]
