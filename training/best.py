"""The best checkpoint by the task's main metric, MODEL_DIR/best/: its weights and its score
as one unit.

Layout:

  best/best.json         {"step": S, <the evaluation's metrics>, "checkpoint": "step-S/ckpt"}
  best/step-S/ckpt.*     the model's weights at step S (a native TF2 checkpoint)

best.json is both the score and the pointer to the weights, in one file. A new best is
published in this order: (1) its checkpoint is written into a fresh directory best/step-S/
(no reader looks there yet); (2) best.json is replaced atomically (`fileio.write_atomic`: a
temporary name, then a rename; on gs:// a copy and a delete, still whole or absent for a
reader) to name it; (3) every other entry of best/ is deleted (the previous best, leftovers of
killed runs). A directory is never written again once best.json has named it, so a reader that
follows best.json (`read`) sees the old pair or the new one, whatever moment a SIGKILL comes.
Only best.json is ever renamed: gs:// has no atomic directory rename. A resumed run reads the
recorded score and publishes only a better one.

The older layout (best/ckpt.* beside a best.json without "checkpoint") is read as
is, and replaced at the next publish.

Test hook (tests/training/test_best_checkpoint.py): with PAUSE_ENV=POINT or POINT:N in the
environment, the N-th publish of the process (default the first) logs one line and sleeps (10 minutes) at
POINT, so a test can SIGKILL the run there: "written" (step 1 done, best.json not yet
switched), "switched" (step 2 done, the old best not yet deleted); a stop request (SIGTERM,
SIGINT: training/preemption.py) ends the pause and the publish completes. Unset: no pause.
"""

import json
import math
import os

from data_utils import fileio
from modeling import checkpoint as ckpt_lib
from training import preemption

POINTER = ckpt_lib.BEST_POINTER
LEGACY_CHECKPOINT = ckpt_lib.BEST_LEGACY_CHECKPOINT
PAUSE_ENV = "TRAINER_TEST_PAUSE_BEST"
PAUSE_POINTS = ("written", "switched")
_publishes = [0]                 # publishes in this process, for the test hook


def read(best_dir):
  """(record, checkpoint prefix) of the published best in `best_dir`, or (None, None): see
  modeling/checkpoint.read_best (it lives there so that --init_checkpoint=MODEL_DIR/best
  resolves without an import up from modeling/)."""
  return ckpt_lib.read_best(best_dir)


def score(record, metric):
  """The recorded value of `metric` (None without a record or a finite value of it)."""
  value = (record or {}).get(metric)
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
    return None
  return float(value)


def is_better(value, best, lower_is_better=False):
  """A finite value beating the best so far (None: no best yet): higher, or lower for a metric
  such as a loss (`lower_is_better`); ties keep the earlier."""
  if not math.isfinite(value):
    return False
  return best is None or (value < best if lower_is_better else value > best)


def _head(record):
  """The entry of best/ that `record`'s checkpoint lives in (a directory, or the old layout's
  file prefix)."""
  return record.get("checkpoint", LEGACY_CHECKPOINT).split("/")[0] if record else None


def remove_stale(best_dir, keep=None):
  """Deletes every entry of best/ but best.json and the checkpoint it names (or `keep`, the
  head of a record): earlier bests and what killed runs left. Returns the names removed."""
  if not fileio.isdir(best_dir):
    return []
  if keep is None:
    keep = _head(read(best_dir)[0])
  removed = []
  for name in fileio.listdir(best_dir):
    if name == POINTER or (keep and (name == keep or name.startswith(keep + "."))):
      continue
    path = fileio.join(best_dir, name)
    if fileio.isdir(path):
      fileio.rmtree(path)
    else:
      fileio.remove(path)
    removed.append(name)
  return removed


def _pause(point, path, log):
  hook = os.environ.get(PAUSE_ENV)
  if not hook:
    return
  name, _, nth = hook.partition(":")
  if name == point and _publishes[0] == int(nth or 1):
    log(f"best checkpoint paused {point}: {path}")
    preemption.sleep(600)


def publish(best_dir, model, step, results, log=print):
  """Makes `model` (evaluated at `step` with `results`) the best: see the module docstring for
  the order. Returns the record written to best.json."""
  _publishes[0] += 1
  current = _head(read(best_dir)[0])
  name, n = f"step-{step}", 1
  while name == current:                      # the same step published again (a resumed run)
    name, n = f"step-{step}-{n}", n + 1
  target = fileio.join(best_dir, name)
  if fileio.exists(target):                  # a killed run's unpublished copy
    fileio.rmtree(target)
  ckpt_lib.save_native_checkpoint(model, fileio.join(target, "ckpt"))
  _pause("written", target, log)
  record = {"step": step, **results, "checkpoint": f"{name}/ckpt"}
  fileio.write_atomic(fileio.join(best_dir, POINTER), json.dumps(record, indent=1))
  _pause("switched", fileio.join(best_dir, current) if current else best_dir, log)
  remove_stale(best_dir, keep=name)
  return record
