"""The end-of-run summary: the last lines of a training script that finished, saying where its
results are and how long it took.

  run_classifier.py finished in 0:02:41
    model dir:   runs/sst-2 (last checkpoint ckpt/ckpt-1000, step 1000)
    best:        accuracy 0.9312 at step 800 (runs/sst-2/best/step-800/ckpt)
    exports:     runs/sst-2/export
    predictions: runs/sst-2/SST-2.tsv

training/entry.prologue starts one per script run (`start`) and data_utils/cli_app.run prints
it once main returns without an error (a refusal, a crash or a preemption prints none). The
library adds to it as it goes: finetuning/runner.py the task's main metric, the exports and the
prediction files (Task.write_predictions returns their paths). What is on disk at the end
(MODEL_DIR's last checkpoint, best/best.json, MODEL_DIR/export) is read then, so the summary
says what the run left, not what it meant to write.
"""

import time

from data_utils import fileio
from modeling import checkpoint as ckpt_lib
from training import best as best_lib
from training import compile_cache
from training import progress


class RunSummary:
  """What one script run made. `started`: the clock (time.time) when the script began;
  `clock` the clock `lines` reads when not given a time."""

  def __init__(self, script, model_dir, started=None, clock=time.time):
    self.script, self.model_dir, self.clock = script, model_dir, clock
    self.started = clock() if started is None else started
    self.metric = None                     # the task's main metric (best.json holds them all)
    self.exports, self.predictions = [], []

  def add_predictions(self, paths):
    """Records the files a task's write_predictions returned: a list of paths, one path, or
    None (a task that does not say)."""
    if isinstance(paths, str):
      paths = [paths]
    for path in paths or ():
      if path not in self.predictions:
        self.predictions.append(path)

  def add_export(self, path):
    if path and path not in self.exports:
      self.exports.append(path)

  def lines(self, now=None):
    """The summary's lines (see the module docstring); `now` the clock at the end."""
    now = self.clock() if now is None else now
    out = [f"{self.script} finished in {progress.hms(now - self.started)}"]
    rows = []
    if self.model_dir:
      where = self.model_dir
      ckpt_dir = fileio.join(self.model_dir, ckpt_lib.CHECKPOINT_DIR)
      step = ckpt_lib.latest_step(self.model_dir) if fileio.isdir(ckpt_dir) else None
      if step is not None:
        where += f" (last checkpoint {ckpt_lib.CHECKPOINT_DIR}/ckpt-{step}, step {step})"
      rows.append(("model dir", where))
      record, best = best_lib.read(fileio.join(self.model_dir, "best"))
      if record:
        metric = self.metric if self.metric in record else next(
            (k for k in record if k not in ("step", "checkpoint")), None)
        value = best_lib.score(record, metric)
        said = f"{metric} {value:.4f} " if value is not None else ""
        rows.append(("best", f"{said}at step {record.get('step')} ({best})"))
      export = fileio.join(self.model_dir, "export")      # pretraining's
      if export not in self.exports and fileio.isdir(export):
        self.exports.insert(0, export)
    exports = [p for p in self.exports if fileio.exists(p)]
    if exports:
      rows.append(("exports", ", ".join(exports)))
    if self.predictions:
      rows.append(("predictions", ", ".join(self.predictions)))
    cache = compile_cache.active()
    if cache is not None:
      rows.append(("XLA programs", cache.report()))
    width = max((len(name) for name, _ in rows), default=0) + 1
    out += [f"  {(name + ':').ljust(width)} {text}" for name, text in rows]
    return out


_current = [None]


def start(script, model_dir, started=None):
  """The summary of this script run (replacing any earlier one in the process)."""
  _current[0] = RunSummary(script, model_dir, started=started)
  return _current[0]


def current():
  """The summary started by this script run, or None (a library caller: nothing to add to)."""
  return _current[0]


def report(log=print):
  """Logs the current summary, once (it is then cleared)."""
  summary, _current[0] = _current[0], None
  if summary is not None:
    for line in summary.lines():
      log(line)
