"""Runs the quickstart's stages: in order, resuming, up to `jobs` script stages at once.

A stage is either a script (argv: run with this Python from the repository root, its output
to OUTPUT_DIR/logs/STAGE.log) or an in-process function (fn). When it succeeds, its results
go to OUTPUT_DIR/stages/STAGE.json (written atomically); a rerun skips every stage with that
file. A failing stage stops the run: the other running stages are killed and StageError says
in one line which stage failed and where its log is.

Order and concurrency: stages start in list order. A stage with `parallel=False` is a barrier:
it starts when every stage before it has finished, and nothing after it starts before it
finishes. A `parallel=True` stage may run beside other parallel stages (at most `jobs` at once)
once the stages named in its `after` have finished. Every stage seeds its own randomness and
TensorFlow's thread pools are sized by the machine's cores, not by its load, so the results do
not depend on `jobs` (tests/reproduction/test_scheduler.py).
"""

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import time

from data_utils import warm_start
from reproduction.tasks import atomic_write

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP_LINE = re.compile(r"^step (\d+)/(\d+) loss (\S+)")
_RELAY = ("eval at step", "done:", "wrote ", "exported", "init from", "using the best")


class StageError(RuntimeError):
  """A stage failed; the message is one line naming the stage and its log file."""


@dataclasses.dataclass
class Stage:
  name: str
  what: str                   # one line for the console
  estimate_s: float           # for the ETA
  argv: object = None         # script + flags, run with this Python from the repository root;
                              # or a function (results so far) -> that list
  fn: object = None           # or an in-process function -> results dict
  parse: object = None        # log text -> results dict (script stages)
  parallel: bool = False      # may run beside other parallel stages (see the module docstring)
  after: tuple = ()           # names of stages that must have finished first


def format_duration(seconds):
  seconds = max(0, int(round(seconds)))
  if seconds < 60:
    return f"{seconds}s"
  if seconds < 3600:
    return f"{seconds // 60}m{seconds % 60:02d}s"
  return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class _Process:
  """One script stage running in the background, its log followed line by line."""

  def __init__(self, stage, python, log_path, env, launcher=None):
    self.stage, self.log_path = stage, log_path
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    cmd = [python, *stage.argv]
    self.log_f = open(log_path, "w", encoding="utf-8")
    self.log_f.write(f"$ cd {ROOT} && {shlex.join(cmd)}\n\n")
    self.log_f.flush()
    self.reader = open(log_path, encoding="utf-8", errors="replace")
    if launcher is not None:
      self.proc = launcher.popen(stage.argv, cwd=ROOT, env=env, stdout=self.log_f,
                                 stderr=subprocess.STDOUT)
    else:
      self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self.log_f, stderr=subprocess.STDOUT,
                                   env=env)
    self.pending = ""
    self.t0 = time.time()

  def poll(self):
    """(new complete lines, finished?)"""
    done = self.proc.poll() is not None
    self.pending += self.reader.read()
    *lines, self.pending = self.pending.split("\n")
    if done and self.pending:
      lines, self.pending = lines + [self.pending], ""
    return [l.strip() for l in lines], done

  def close(self, kill=False):
    if kill and self.proc.poll() is None:
      self.proc.kill()
      self.proc.wait()
    self.log_f.close()
    self.reader.close()

  def result(self):
    """The stage's parsed results, or StageError with the log's telling line."""
    with open(self.log_path, encoding="utf-8", errors="replace") as f:
      text = f.read()
    if self.proc.returncode != 0:
      lines = [l.strip() for l in text.splitlines() if l.strip()]
      argv = self.stage.argv
      script = os.path.basename(argv[1] if argv[0] == "-m" else argv[0])
      errors = [l for l in lines
                if l.startswith(f"{script}:") or re.search(r"\w(Error|Exception)\b", l)]
      last = (errors or lines or ["no output"])[-1][:300]
      raise StageError(f"stage {self.stage.name} failed (exit {self.proc.returncode}): "
                       f"{last} -- full log: {self.log_path}")
    return self.stage.parse(text)


def run_stages(stages, out_dir, python, log, jobs=1, warm=False):
  """Runs every stage of `stages` not done yet in OUT_DIR. Returns (results, seconds) by stage
  name. `log(tag, message)` prints progress. `warm`: script stages run in one server that
  imported TensorFlow once (data_utils/warm_start.py) when `python` is this interpreter."""
  stage_file = lambda name: os.path.join(out_dir, "stages", f"{name}.json")
  log_file = lambda name: os.path.join(out_dir, "logs", f"{name}.log")
  env = dict(os.environ, PYTHONUNBUFFERED="1")
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  results, times = {}, {}
  index = {s.name: i for i, s in enumerate(stages)}
  spent = {"actual": 0.0, "estimate": 0.0}
  start = time.time()
  tag = lambda s: f"{index[s.name] + 1}/{len(stages)} {s.name}"

  def remaining():
    # measured / estimated time so far, pulled towards 1 by a minute of prior; parallel
    # stages share the machine `jobs` ways
    ratio = (spent["actual"] + 60.0) / (spent["estimate"] + 60.0)
    todo = [s.estimate_s / (jobs if s.parallel else 1) for s in stages
            if s.name not in results and s.name not in running]
    return sum(todo) * ratio

  def finished(stage, result, seconds):
    spent["actual"] += seconds / (jobs if stage.parallel else 1)
    spent["estimate"] += stage.estimate_s / (jobs if stage.parallel else 1)
    results[stage.name], times[stage.name] = result, seconds
    record = {"name": stage.name, "seconds": seconds, "results": result,
              "command": [os.path.basename(python), *stage.argv] if stage.argv else None}
    atomic_write(stage_file(stage.name), json.dumps(record, indent=1) + "\n")
    log(tag(stage), f"done in {format_duration(seconds)} (elapsed "
        f"{format_duration(time.time() - start)}, run ETA {format_duration(remaining())})")

  def relay(stage, line, stage_left_default=0.0):
    m = STEP_LINE.match(line)
    if m:
      left = re.search(r"ETA (\d+):(\d\d):(\d\d)", line)   # training/progress.py's h:mm:ss
      stage_left = (int(left[1]) * 3600 + int(left[2]) * 60 + int(left[3]) if left
                    else stage_left_default)
      log(stage.name, f"step {m.group(1)}/{m.group(2)} loss {float(m.group(3)):.3f}; "
          f"stage ETA {format_duration(stage_left)}, run ETA "
          f"{format_duration(stage_left + remaining())}")
    elif line.startswith(_RELAY) or (line.startswith("{") and line.endswith("}")):
      log(stage.name, line[:160])

  queue = []
  for stage in stages:
    if os.path.exists(stage_file(stage.name)):
      with open(stage_file(stage.name), encoding="utf-8") as f:
        saved = json.load(f)
      results[stage.name], times[stage.name] = saved["results"], saved["seconds"]
      log(tag(stage), f"done in an earlier run ({format_duration(saved['seconds'])}), skipped")
    else:
      queue.append(stage)
  running = {}
  launcher = None
  if warm and python == sys.executable and any(s.argv for s in queue):
    launcher = warm_start.Launcher(env).start()   # its imports overlap the first stages

  def ready(k, stage):
    if any(name not in results for name in stage.after):
      return False
    if not stage.parallel:      # a barrier: everything before it done, nothing running
      return k == 0 and not running
    barrier = any(not s.parallel for s in queue[:k]) or any(
        not p.stage.parallel for p in running.values())
    return not barrier and len(running) < max(1, jobs)

  try:
    while queue or running:
      k = 0
      while k < len(queue):
        stage = queue[k]
        if not ready(k, stage):
          if not stage.parallel:
            break
          k += 1
          continue
        queue.pop(k)
        if callable(stage.argv):
          stage = dataclasses.replace(stage, argv=stage.argv(results))
        where = f"; log {log_file(stage.name)}" if stage.argv else ""
        log(tag(stage), f"{stage.what}{where}; run ETA {format_duration(remaining())}")
        if stage.argv:
          running[stage.name] = _Process(stage, python, log_file(stage.name), env, launcher)
          continue
        t0 = time.time()
        try:
          result = stage.fn()
        except (OSError, ValueError) as e:
          raise StageError(f"stage {stage.name} failed: {e}") from None
        finished(stage, result, time.time() - t0)
      for name, proc in list(running.items()):
        lines, done = proc.poll()
        for line in lines:
          relay(proc.stage, line)
        if done:
          del running[name]
          seconds = time.time() - proc.t0
          proc.close()
          finished(proc.stage, proc.result(), seconds)
      if running:
        time.sleep(0.5)
      elif queue and not any(ready(k, s) for k, s in enumerate(queue)):
        missing = [n for n in queue[0].after if n not in results and n not in index]
        raise StageError(f"stage {queue[0].name} waits for {missing or queue[0].after}, "
                         "which no stage provides")
  except BaseException:
    for proc in running.values():
      proc.close(kill=True)
    raise
  finally:
    if launcher is not None:
      launcher.close()
  return results, times
