"""Every bench/ script starts as bench/README.md documents it, from any directory: the scripts
import the installed packages only (the tests package is not installed)."""

import os
import re
import subprocess
import sys

from tests import warm
from tests.docs import harness
from tests.hang_guard import HANG_GUARD


def test_every_bench_script_runs_from_outside_the_repository(tmp_path):
  """`python bench/X.py --help` from a directory outside the repository: the scripts import
  the installed packages only (not the tests, which are not installed)."""
  scripts = sorted(f for f in os.listdir(os.path.join(harness.ROOT, "bench"))
                   if f.endswith(".py"))
  assert {"memory.py", "preprocess.py", "pretrain_step.py", "serving.py"} <= set(scripts)
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  env.update(TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
  procs = {s: warm.popen([sys.executable, os.path.join(harness.ROOT, "bench", s), "--help"],
                               cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for s in scripts}
  failed = {}
  for script, proc in procs.items():
    out, err = proc.communicate(timeout=HANG_GUARD)
    if proc.returncode or "usage:" not in out:
      failed[script] = err.strip().splitlines()[-1:]
  assert not failed, failed
  for source in scripts:          # and none reaches into the tests package
    text = open(os.path.join(harness.ROOT, "bench", source), encoding="utf-8").read()
    assert not re.search(r"^\s*(from|import) tests\b", text, re.MULTILINE), source
