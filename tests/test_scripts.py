"""The entry scripts: --help works on all, missing flags are one-line errors, and
run_squad.py --do_eval_only scores a file (the quickstart pipeline: tests/reproduction/test_quickstart.py)."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests import warm
from tests.hang_guard import HANG_GUARD

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ["run_pretrain.py", "run_classifier.py", "run_squad.py", "run_race.py",
           "run_tagger.py", "run_pairs.py", "data_utils/create_pretrain_data.py", "data_utils/train_tokenizer.py", "quickstart.py",
           "predict.py"]


def _run(*args, timeout=HANG_GUARD, fresh=False):
  """python *args from the root (in the tests' warm server unless `fresh`: tests/warm.py)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
  if not fresh:
    return warm.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                    timeout=timeout)
  return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=timeout)


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.slow
def test_help(script):
  """--help exits 0 (absl's own exits 1; data_utils/cli_app.py) and prints the script's flags,
  each with its help text."""
  result = _run(script, "--help")
  assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
  assert "Traceback" not in result.stderr, result.stderr
  flag = ("--model_prefix" if "tokenizer" in script else "--output" if script == "predict.py"
          else "--output_dir")
  assert re.search(rf"^  {flag}: \S", result.stdout, re.MULTILINE), result.stdout[-2000:]


def test_help_exits_0_and_errors_still_1():
  """Only the help flags' exit changes: -?, --helpshort and --helpfull print help and exit 0,
  an unknown flag still exits 1 with absl's message."""
  script = "data_utils/train_tokenizer.py"   # the quickest to start (no TensorFlow)
  for help_flag in ("-?", "--helpshort", "--helpfull"):
    result = _run(script, help_flag)
    assert result.returncode == 0, (help_flag, result.returncode, result.stderr)
    assert re.search(r"^  --model_prefix: Writes PREFIX", result.stdout, re.MULTILINE), help_flag
  result = _run(script, "--no_such_flag")
  assert result.returncode == 1, (result.returncode, result.stderr)
  assert "Unknown command line flag 'no_such_flag'" in result.stderr, result.stderr


@pytest.mark.parametrize("script,args,message", [
    ("run_squad.py", (), "nothing to do"), ("run_classifier.py", (), "nothing to do"),
    ("run_classifier.py", ("--do_train",), "--task_name is required"),
    ("run_classifier.py", ("--task_name=sst-2", "--do_eval"), "--data_dir is required"),
    ("run_race.py", (), "nothing to do"), ("run_race.py", ("--do_eval",), "--data_dir is required"),
    ("run_race.py", ("--export_dir=x",), "--model_dir is required"),
    ("run_pretrain.py", (), "--record_dir is required")])
@pytest.mark.slow
def test_missing_flags_are_one_line_errors(script, args, message):
  result = _run(script, *args)
  assert result.returncode != 0
  assert message in result.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_squad_eval_only_scores_a_prediction_file(tmp_path):
  import json
  data = {"data": [{"title": "t", "paragraphs": [{"context": "c", "qas": [
      {"id": "a", "answers": [{"text": "blue sky"}], "is_impossible": False},
      {"id": "b", "answers": [], "is_impossible": True}]}]}]}
  (tmp_path / "dev.json").write_text(json.dumps(data))
  (tmp_path / "pred.json").write_text(json.dumps({"a": "the blue sky", "b": "x"}))
  (tmp_path / "odds.json").write_text(json.dumps({"a": -3.0, "b": 0.5}))
  result = _run("run_squad.py", "--do_eval_only", f"--predict_file={tmp_path}/dev.json",
                f"--predictions={tmp_path}/pred.json", f"--null_odds={tmp_path}/odds.json")
  assert result.returncode == 0, result.stderr
  out = json.loads(result.stdout)
  assert out["exact"] == 50.0 and out["HasAns_exact"] == 100.0
  assert out["best_exact"] == 100.0 and out["best_exact_thresh"] == -3.0


def test_quickstart_refuses_a_bucket_output_dir():
  result = _run("quickstart.py", "--output_dir=gs://bucket/qs")
  assert result.returncode != 0
  assert "must be a local directory" in result.stderr.strip().splitlines()[-1]


_MODULES_AT_EXIT = """
import importlib, runpy, sys
sys.argv = sys.argv[1:]
try:
  runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
  status = e.code
seen = {m: m in sys.modules for m in ("keras", "sklearn", "matplotlib")}
importlib.import_module("sklearn.base")          # anyone else still imports it
print("MODULES", status, seen, "sklearn" in sys.modules, file=sys.stderr)
"""


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None
                    or importlib.util.find_spec("matplotlib") is None,
                    reason="needs scikit-learn and matplotlib installed (requirements-dev.txt)")
def test_scripts_start_without_the_libraries_keras_imports_for_unused_helpers():
  """Keras imports scikit-learn and matplotlib whenever they are installed (the reference: a
  bare `import keras`); an entry script has Keras without them, and its process can still
  import them itself."""
  bare = _run("-c", "import sys, keras; print('sklearn' in sys.modules, "
              "'matplotlib' in sys.modules)", fresh=True)
  assert bare.stdout.split() == ["True", "True"], bare.stderr[-2000:]
  result = _run("-c", _MODULES_AT_EXIT, "run_classifier.py", "--help", fresh=True)
  line = [l for l in result.stderr.splitlines() if l.startswith("MODULES")]
  assert line == ["MODULES 0 {'keras': True, 'sklearn': False, 'matplotlib': False} True"], \
      result.stderr[-2000:]


_GC_SCRIPT = """
import gc
from data_utils import cli_app
cli_app.quiet_imports(__name__)
def main(argv):
  print("GC", gc.get_threshold(), gc.get_freeze_count() > 0)
cli_app.run(main)
"""


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "warm"])
def test_an_entry_script_collects_less_often_and_freezes_its_start_up(tmp_path, fresh):
  """An entry script raises the first threshold of Python's garbage collector above the
  interpreter's own and freezes what start-up made before main; a library import keeps the
  program's settings; a run forked from the tests' warm server starts from Python's own."""
  script = tmp_path / "entry.py"
  script.write_text(_GC_SCRIPT)
  default = _run("-c", "import gc; print(gc.get_threshold())", fresh=True).stdout.strip()
  first = int(default.strip("()").split(",")[0])
  assert _run("-c", "import gc; print(gc.get_threshold())", fresh=fresh).stdout.strip() == default
  library = _run("-c", "import gc; from data_utils import cli_app; print(gc.get_threshold())",
                 fresh=fresh)
  assert library.stdout.strip() == default, library.stderr[-2000:]
  entry = _run(str(script), fresh=fresh)
  assert entry.returncode == 0, entry.stderr[-2000:]
  thresholds, frozen = re.fullmatch(r"GC \((\d+), \d+, \d+\) (\w+)", entry.stdout.strip()).groups()
  assert int(thresholds) > first and frozen == "True", entry.stdout
