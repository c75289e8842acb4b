"""SIGTERM (preemption) and SIGINT (Ctrl-C) stop a training run cleanly (training/preemption.py):
the in-flight host loop finishes, a checkpoint is written, one line is printed, the exit status
is preemption.EXIT_PREEMPTED, and the same command resumes from that checkpoint to the bytes of
a run never interrupted; outside the loop, Ctrl-C and a closed stdout end without a traceback
(data_utils/cli_app.py).

The trainer's rules are checked in-process and exactly on the one-weight task of
tests/best_helpers.py (its log callback sends the signal at a chosen line: during a host loop,
inside a checkpoint write, inside an evaluation); the scripts end to end in subprocesses on
test_deterministic.py's tiny pretraining run and SST-2 fine-tuning run under --deterministic."""

import json
import os
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

from tests import best_helpers
from tests.finetuning.test_classifier import sst2  # noqa: F401  (the tiny SST-2 fixture)
from tests.hang_guard import HANG_GUARD
from tests.training.test_deterministic import (ENV, ROOT, Run, assert_same_bytes, differences,  # noqa: F401
                                               launch, pretrain_args)
from training import preemption
from training import trainer as trainer_lib

SCORES = {4: 0.5, 8: 0.7, 12: 0.6}
FAST = ("--xla=off", "--train_steps=16")   # the pretraining runs: no XLA compile at each start
STOP_LINE = "stopped at step {}; checkpoint written; rerun the same command to resume"


# ---- the trainer's rules, in-process ------------------------------------------------------

def train_scripted(model_dir, signal_at=None, signum=signal.SIGTERM, env=None):
  """Trains the one-weight task to step 12 (a host loop per step, a checkpoint and an
  evaluation every 4); `signal_at(line)` True: the run signals itself as it logs that line.
  Returns (lines, Stopped or None)."""
  lines = []

  def log(line):
    lines.append(line)
    if signal_at and signal_at(line):
      assert preemption.active() is not None          # never the test process's own handler
      assert signal.getsignal(signum) not in (signal.SIG_DFL, signal.default_int_handler)
      os.kill(os.getpid(), signum)

  old = {k: os.environ.get(k) for k in (env or {})}
  os.environ.update(env or {})
  try:
    trainer = trainer_lib.Trainer(best_helpers.ScriptedTask(SCORES), tf.distribute.get_strategy(),
                                  str(model_dir), 12, steps_per_loop=1, save_every=4, xla="off",
                                  log=log)
    trainer.train()
  except preemption.Stopped as e:
    return lines, e
  finally:
    for k, v in old.items():
      os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
  return lines, None


@pytest.fixture(scope="module")
def scripted_reference(tmp_path_factory):
  model_dir = tmp_path_factory.mktemp("scripted-ref")
  lines, stopped = train_scripted(model_dir)
  assert stopped is None, lines
  return model_dir


def same_values(a, b):
  """Every variable of checkpoints `a` and `b` equal (the object graph names Keras objects by
  how many the process has made: not compared in-process)."""
  assert differences(a, b) in ([], ["_CHECKPOINTABLE_OBJECT_GRAPH"]), (a, b)


def same_run_files(a, b):
  """The checkpoints kept, best/ and eval/last.json of two runs of the one-weight task: equal."""
  for step in (4, 8, 12):       # the save counter too: a stop checkpoint is not counted
    assert "save_counter/.ATTRIBUTES/VARIABLE_VALUE" in dict(
        tf.train.list_variables(str(a / "ckpt" / f"ckpt-{step}")))
    same_values(str(a / "ckpt" / f"ckpt-{step}"), str(b / "ckpt" / f"ckpt-{step}"))
  assert (a / "best" / "best.json").read_bytes() == (b / "best" / "best.json").read_bytes()
  assert sorted(os.listdir(a / "best")) == sorted(os.listdir(b / "best")) == ["best.json",
                                                                             "step-8"]
  same_values(str(a / "best" / "step-8" / "ckpt"), str(b / "best" / "step-8" / "ckpt"))
  assert (a / "eval" / "last.json").read_bytes() == (b / "eval" / "last.json").read_bytes()


@pytest.mark.parametrize("where, signal_at, stopped_at", [
    # a host loop: its step is saved (between save points: not counted as a save)
    ("training", lambda l: l.startswith("step 5/"), 5),
    # inside the write of ckpt-8 (before it is published): it completes, no evaluation
    ("checkpoint write", lambda l: l.startswith("checkpoint written, not yet published"), 8),
    # inside the evaluation of step 8: abandoned; the rerun evaluates step 8 again
    ("evaluation", lambda l: l == "evaluating step 8", 8),
], ids=["training", "checkpoint-write", "evaluation"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_trainer_stops_with_a_checkpoint_and_resumes_to_the_same_files(
    tmp_path, scripted_reference, where, signal_at, stopped_at, signum):
  before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
  env = {"checkpoint write": {trainer_lib.PAUSE_BEFORE_PUBLISH_ENV: "8"},
         "evaluation": {trainer_lib.PAUSE_IN_EVALUATION_ENV: "8"}}.get(where, {})
  lines, stopped = train_scripted(tmp_path, signal_at, signum, env)
  assert stopped is not None and stopped.code == preemption.EXIT_PREEMPTED, (where, lines)
  assert lines[-1] == STOP_LINE.format(stopped_at), lines[-5:]
  assert tf.train.latest_checkpoint(str(tmp_path / "ckpt")).endswith(f"ckpt-{stopped_at}")
  assert {s: signal.getsignal(s) for s in before} == before        # the handlers are back
  evaluated = json.loads((tmp_path / "eval" / "last.json").read_text())["step"]
  assert evaluated == 4, lines          # step 8's evaluation never ran or was abandoned

  lines, stopped = train_scripted(tmp_path)                       # the same command again
  assert stopped is None, lines
  assert f"resumed from {tmp_path}/ckpt/ckpt-{stopped_at} at step {stopped_at}" in lines
  again = [l for l in lines if l.startswith("evaluating step")]
  assert again == ([f"evaluating step 8 again: the stopped run did not record its evaluation"]
                   if stopped_at == 8 else []), lines
  same_run_files(tmp_path, scripted_reference)


# ---- the signal machinery and the door, in small subprocesses --------------------------------

def _sigint_default():
  """A child started from a pytest-xdist worker inherits SIGINT ignored (as a shell's background
  job does, which Python then leaves ignored): the child gets Ctrl-C's usual disposition."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_python(code, **kwargs):
  return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True,
                        text=True, timeout=HANG_GUARD, preexec_fn=_sigint_default, **kwargs)


def test_a_second_signal_while_stopping_exits_at_once():
  code = ("import os, signal, time\n"
          "from training import preemption\n"
          "with preemption.watch() as stop:\n"
          "  os.kill(os.getpid(), signal.SIGTERM)\n"
          "  time.sleep(0.5)\n"
          "  print('requested', stop.requested, flush=True)\n"
          "  os.kill(os.getpid(), signal.SIGINT)\n"
          "  time.sleep(30)\n")   # the main thread busy: the watcher thread exits
  done = run_python(code)
  assert done.returncode == 128 + signal.SIGINT, done
  assert done.stdout == "requested True\n"
  assert done.stderr.splitlines() == [
      "second SIGINT: exiting at once; the last published checkpoint is kept"], done.stderr


def test_ctrl_c_outside_the_training_loop_is_one_line():
  code = ("import os, signal, sys, time\n"
          "sys.argv = ['run_x.py']\n"
          "from data_utils import cli_app\n"
          "def main(argv):\n"
          "  print('preparing', flush=True)\n"
          "  os.kill(os.getpid(), signal.SIGINT)\n"
          "  time.sleep(30)\n"
          "cli_app.run(main)\n")
  done = run_python(code)
  assert done.returncode == 130, done
  assert done.stdout == "preparing\n"
  assert done.stderr.splitlines() == ["run_x.py: interrupted; nothing half-written was published"]


def test_ctrl_c_while_importing_is_one_line():
  """Ctrl-C while the script still imports (a hand-made script importing a slow module after
  cli_app.quiet_imports, as the entry scripts do): one line, status 130, no traceback. The
  signal is sent once the slow import has begun (its marker printed), so it lands inside it."""
  code = ("import sys, time\n"
          "from data_utils import cli_app\n"
          "cli_app.quiet_imports(__name__)\n"
          "print('importing', flush=True)\n"
          "time.sleep(%d)   # a slow import: interrupted long before its end\n" % HANG_GUARD)
  proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=ENV, text=True,
                          preexec_fn=_sigint_default,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  try:
    assert proc.stdout.readline() == "importing\n"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG_GUARD)
  finally:
    proc.kill()
  assert proc.returncode == 130, err
  assert err.splitlines() == ["-c: interrupted; nothing half-written was published"], err


@pytest.mark.slow
def test_help_into_a_closed_pipe_exits_quietly():
  """`run_classifier.py --help | head -1`: here the reader is gone before the first byte."""
  read_fd, write_fd = os.pipe()
  os.close(read_fd)
  try:
    done = subprocess.run([sys.executable, "run_classifier.py", "--help"], cwd=ROOT, env=ENV,
                          stdout=write_fd, stderr=subprocess.PIPE, text=True, timeout=HANG_GUARD)
  finally:
    os.close(write_fd)
  assert "BrokenPipeError" not in done.stderr and "Traceback" not in done.stderr, done.stderr
  assert done.returncode == 141


# ---- the scripts end to end --------------------------------------------------------------

def stop_lines(run):
  assert not any("Traceback" in l for l in run.lines if l), run.lines[-30:]
  return [l for l in run.lines if l and l.startswith("stopped at step")]


@pytest.fixture(scope="module")
def pretrain_reference(tmp_path_factory, pretrain_args):
  """The uninterrupted run, started once in the background; keeps every checkpoint."""
  out = tmp_path_factory.mktemp("pretrain-ref")
  run = Run(pretrain_args(out, "--keep_checkpoints=8", *FAST))
  yield out, run
  run.proc.kill()
  run.proc.wait()


@pytest.mark.slow
def test_run_pretrain_sigterm_in_a_checkpoint_write_then_ctrl_c_then_same_bytes(
    tmp_path, pretrain_args, pretrain_reference, launch):  # noqa: F811
  cut = tmp_path / "cut"
  ckpt = lambda step: str(cut / "ckpt" / f"ckpt-{step}")
  command = lambda: pretrain_args(cut, *FAST)

  # 1. SIGTERM inside the write of ckpt-8 (its files complete, not yet published)
  run = launch(command(), env=dict(ENV, **{trainer_lib.PAUSE_BEFORE_PUBLISH_ENV: "8"}))
  run.wait_for(lambda line: line.endswith(f"not yet published: {ckpt(8)}"))
  run.proc.send_signal(signal.SIGTERM)
  assert run.finish() == preemption.EXIT_PREEMPTED, run.lines[-20:]
  assert stop_lines(run) == [STOP_LINE.format(8)] and run.lines[-2] == STOP_LINE.format(8)
  assert tf.train.latest_checkpoint(str(cut / "ckpt")) == ckpt(8)

  # 2. Ctrl-C during training, once step 12 is logged: the host loop in flight finishes, its
  # step is saved (at most that loop's steps were still to come)
  run = launch(command())
  assert run.wait_for(lambda line: line.startswith("resumed from")) == (
      f"resumed from {ckpt(8)} at step 8")
  run.wait_for(lambda line: line.startswith("step 12/"))
  run.proc.send_signal(signal.SIGINT)
  assert run.finish() == preemption.EXIT_PREEMPTED, run.lines[-20:]
  [line] = stop_lines(run)
  stopped = int(line.split()[3].rstrip(";"))
  assert stopped in (12, 14) and run.lines[-2] == line, run.lines[-10:]
  assert tf.train.latest_checkpoint(str(cut / "ckpt")) == ckpt(stopped)

  # 3. The same command to the end: it resumes there, and ends on the reference's bytes
  run = launch(command())
  assert run.finish() == 0, run.lines[-20:]
  assert [l for l in run.lines if l and l.startswith("resumed from")] == [
      f"resumed from {ckpt(stopped)} at step {stopped}"]
  steps = [int(l.split()[1].split("/")[0]) for l in run.lines if l and l.startswith("step ")]
  assert steps == list(range(stopped + 2, 17, 2)), steps
  ref, reference = pretrain_reference
  assert reference.finish() == 0, reference.lines[-20:]
  assert_same_bytes(ckpt(16), str(ref / "ckpt" / "ckpt-16"))
  if stopped == 14:      # a stop checkpoint between save points is no regular save
    assert_same_bytes(ckpt(12), str(ref / "ckpt" / "ckpt-12"))


@pytest.mark.slow
def test_run_classifier_sigterm_during_evaluation_resumes_to_the_same_best(tmp_path, sst2,  # noqa: F811
                                                                           launch):  # noqa: F811
  d, sp, cfg = sst2
  args = lambda out: [
      sys.executable, "run_classifier.py", "--task_name=sst-2", f"--data_dir={d}",
      f"--sp_model={sp}", "--uncased", f"--model_config_path={cfg}", f"--model_dir={out}",
      "--max_seq_length=48", "--train_batch_size=16", "--learning_rate=1e-3",
      "--train_steps=8", "--warmup_steps=2", "--save_every=4", "--steps_per_loop=2",
      "--do_train", "--xla=off", "--deterministic"]
  reference = launch(args(tmp_path / "ref"))
  cut = tmp_path / "cut"
  run = launch(args(cut), env=dict(ENV, **{trainer_lib.PAUSE_IN_EVALUATION_ENV: "4"}))
  run.wait_for(lambda line: line == "evaluating step 4")
  run.proc.send_signal(signal.SIGTERM)
  assert run.finish() == preemption.EXIT_PREEMPTED, run.lines[-20:]
  assert stop_lines(run) == [STOP_LINE.format(4)] and run.lines[-2] == STOP_LINE.format(4)
  assert not (cut / "eval" / "last.json").exists() and not (cut / "best").exists()

  run = launch(args(cut))
  assert run.finish() == 0, run.lines[-20:]
  assert f"resumed from {cut}/ckpt/ckpt-4 at step 4" in run.lines
  assert "evaluating step 4 again: the stopped run did not record its evaluation" in run.lines
  assert reference.finish() == 0, reference.lines[-20:]
  ref = tmp_path / "ref"
  assert_same_bytes(str(cut / "ckpt" / "ckpt-8"), str(ref / "ckpt" / "ckpt-8"))
  for name in ("best/best.json", "eval/last.json"):
    assert (cut / name).read_bytes() == (ref / name).read_bytes(), name
  best = json.loads((ref / "best" / "best.json").read_text())["checkpoint"]
  assert_same_bytes(str(cut / "best" / best), str(ref / "best" / best))
