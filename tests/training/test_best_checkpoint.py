"""best/ (issue #31): the best fine-tuning checkpoint keeps its score across resumes, and its
weights and score are published as one unit (training/best.py): a reader sees the old pair or
the new one after a SIGKILL at either publish point, and the rerun keeps the true best.

The task (tests/best_helpers.py) evaluates to SCORES[step] and its one weight is -step, so a
checkpoint says which step it holds: a (checkpoint, score) pair is consistent when the score
is SCORES[the checkpoint's step]."""

import json
import os
import re
import shutil
import sys

import pytest
import tensorflow as tf

from modeling import checkpoint as ckpt_lib
from tests import best_helpers
from tests.training.test_deterministic import ENV, launch  # noqa: F401  (the fixture)
from training import best as best_lib
from training import trainer

pytestmark = pytest.mark.slow   # a long system test (pyproject.toml)

SCORES = {1: 0.3, 2: 0.5, 3: 0.4, 4: 0.7, 5: 0.6, 6: 0.9, 7: 0.2, 8: 0.1}


def checkpoint_step(prefix):
  reader = tf.train.load_checkpoint(prefix)
  [name] = [n for n in reader.get_variable_to_shape_map() if "kernel" in n]
  return int(round(-float(reader.get_tensor(name).reshape(()))))


def published(model_dir):
  """(step of best/'s checkpoint, its score): best.json read here, its checkpoint followed; the
  pair must be consistent, and the trainer's own reader (training/best.py) must agree."""
  best = os.path.join(model_dir, "best")
  with open(os.path.join(best, "best.json")) as f:
    record = json.load(f)
  prefix = os.path.join(best, record.get("checkpoint", "ckpt"))
  step = checkpoint_step(prefix)
  assert (record["step"], record["score"]) == (step, SCORES[step]), (record, step)
  assert best_lib.read(best) == (record, prefix)
  assert ckpt_lib.resolve(best) == prefix            # --init_checkpoint=MODEL_DIR/best
  return step, record["score"]


def entries(model_dir):
  return sorted(os.listdir(os.path.join(model_dir, "best")))


def test_resume_keeps_the_recorded_best_when_the_next_evaluation_is_worse(tmp_path):
  lines = []
  model_dir = str(tmp_path)
  best_helpers.train(model_dir, 2, SCORES, lines.append)     # evaluations 0.3, 0.5
  assert published(model_dir) == (2, 0.5)
  model = best_helpers.train(model_dir, 3, SCORES, lines.append)   # resumed; 0.4 is worse
  assert f"resumed from {tmp_path}/ckpt/ckpt-2 at step 2" in lines
  assert "eval at step 3: score 0.4000 step_seen 3.0000" in lines
  assert published(model_dir) == (2, 0.5)
  assert best_helpers.step_of(model) == 2                     # what the runner reloaded
  assert not any(l.startswith("evaluating step") for l in lines)   # step 2's was recorded
  model = best_helpers.train(model_dir, 4, SCORES, lines.append)   # 0.7: a better one
  assert published(model_dir) == (4, 0.7) and best_helpers.step_of(model) == 4
  assert entries(model_dir) == ["best.json", "step-4"]


def test_the_layout_before_issue_31_is_read_then_replaced(tmp_path):
  model_dir = str(tmp_path)
  best_helpers.train(model_dir, 2, SCORES, lambda line: None)
  best = tmp_path / "best"                     # rewritten as the old code left it
  for name in os.listdir(best / "step-2"):
    shutil.move(best / "step-2" / name, best / name)
  os.rmdir(best / "step-2")
  record = json.loads((best / "best.json").read_text())
  del record["checkpoint"]
  (best / "best.json").write_text(json.dumps(record))
  model = best_helpers.train(model_dir, 3, SCORES, lambda line: None)   # 0.4 < 0.5
  assert published(model_dir) == (2, 0.5) and best_helpers.step_of(model) == 2
  assert entries(model_dir) == ["best.json", "ckpt.data-00000-of-00001", "ckpt.index"]
  model = best_helpers.train(model_dir, 4, SCORES, lambda line: None)   # 0.7
  assert published(model_dir) == (4, 0.7) and best_helpers.step_of(model) == 4
  assert entries(model_dir) == ["best.json", "step-4"]


def test_sigkill_at_each_publish_point_then_rerun_keeps_the_true_best(tmp_path, launch):  # noqa: F811
  model_dir = str(tmp_path / "run")
  command = [sys.executable, "-m", "tests.best_helpers", model_dir, "8", json.dumps(SCORES)]
  best = os.path.join(model_dir, "best")
  runs = []

  # 1. Publishing step 4 (the third best: 0.3, 0.5, 0.7): its checkpoint is written into
  # best/step-4, best.json does not name it yet. The reader sees step 2's pair.
  runs.append(launch(command, env=dict(ENV, **{trainer.PAUSE_BEST_ENV: "written:3"})))
  runs[-1].wait_for(lambda l: l == f"best checkpoint paused written: {best}/step-4")
  runs[-1].kill()
  assert published(model_dir) == (2, 0.5)
  assert entries(model_dir) == ["best.json", "step-2", "step-4"]
  assert checkpoint_step(f"{best}/step-4/ckpt") == 4

  # 2. The rerun resumes at step 4 (its checkpoint was published before the evaluation),
  # evaluates it again (the killed run did not record that evaluation), beats the remembered
  # 0.5 and is killed after best.json names step 4, before step 2 is deleted.
  runs.append(launch(command, env=dict(ENV, **{trainer.PAUSE_BEST_ENV: "switched:1"})))
  assert runs[-1].wait_for(lambda l: l.startswith("resumed from")) == (
      f"resumed from {model_dir}/ckpt/ckpt-4 at step 4")
  runs[-1].wait_for(lambda l: l == f"best checkpoint paused switched: {best}/step-2")
  runs[-1].kill()
  assert published(model_dir) == (4, 0.7)
  assert entries(model_dir) == ["best.json", "step-2", "step-4"]

  # 3. The same command again, to the end: step 6's 0.9 is the best of every evaluation.
  runs.append(launch(command))
  assert runs[-1].finish() == 0, runs[-1].lines[-20:]
  assert f"resumed from {model_dir}/ckpt/ckpt-4 at step 4" in runs[-1].lines
  assert "reloaded step 6" in runs[-1].lines                  # what the runner reloaded
  assert published(model_dir) == (6, 0.9)
  assert entries(model_dir) == ["best.json", "step-6"]
  evaluated = {}
  for run in runs:
    for line in run.lines:
      m = re.fullmatch(r"eval at step (\d+): score ([\d.]+) .*", line or "")
      if m:
        evaluated[int(m[1])] = float(m[2])
  assert sorted(evaluated) == list(range(1, 9))
  true_best = max(evaluated, key=lambda s: (evaluated[s], -s))
  assert published(model_dir) == (true_best, evaluated[true_best])
