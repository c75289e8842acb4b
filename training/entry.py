"""The set-up every training entry script runs first (run_pretrain.py, run_classifier.py,
run_squad.py, run_race.py): `prologue` in the order it must run, each error one line naming
the script (sys.exit).

  model_dir, strategy = entry.prologue("run_race.py", FLAGS,
                                       actions=["do_train", "do_eval", ...],
                                       required=["data_dir", "model_dir", "model_config_path"])
"""

import sys

from absl import logging
import keras

from data_utils import cli_app
from training import compile_cache
from training import distribution
from training import loss_scale
from training import run_record
from training import summary
from training import trainer as trainer_lib


def configure(flag_values):
  """absl logging at WARNING, TensorFlow's Python-side start-up noise filtered unless --verbose
  (data_utils/cli_app.py), XLA's persistent compilation cache (--compile_cache,
  training/compile_cache.py), then --xla and --deterministic: TensorFlow reads them when it runs
  its first op, so this comes before anything else."""
  logging.set_verbosity(logging.WARNING)
  cli_app.quiet_python_side(not getattr(flag_values, "verbose", False))
  compile_cache.enable(getattr(flag_values, "compile_cache", None))
  trainer_lib.configure_xla(flag_values.xla)
  trainer_lib.configure_determinism(flag_values.deterministic)


def prologue(script, flag_values, required, actions=None, check=None):
  """`configure`, then the script's flags checked and its distribution set up:

  1. MODEL_DIR = --model_dir, or its alias --output_dir;
  2. `actions` (flag names; None: no such check): unless one is set,
     "SCRIPT: nothing to do: pass --a, --b or --c";
  3. `required` (flag names in the order checked; "model_dir" is MODEL_DIR): the first one
     not set exits with "SCRIPT: --NAME is required"; MODEL_DIR must be absent, empty or a
     run directory of this project (training/run_record.check_dir);
  4. --use_float16 and --use_bfloat16 not both; `check()`, the script's own flag checks (a
     ValueError exits with "SCRIPT: message");
  5. the tf.distribute strategy of --distribution_strategy / --tpu, before any other
     TensorFlow op (a multi-worker strategy configures the collectives first); a ValueError
     exits with "SCRIPT: message";
  6. the seed (--seed) of Keras, Python and numpy, and --use_bfloat16's or --use_float16's
     dtype policy (float16: the trainer then scales the loss, training/loss_scale.py);
  7. the run's end-of-run summary started (training/summary.py), printed by cli_app.run once
     main returns without an error.

  Returns (MODEL_DIR, strategy)."""
  f = flag_values
  configure(f)
  model_dir = f.model_dir or f.output_dir
  if actions is not None and not any(getattr(f, name) for name in actions):
    names = [f"--{name}" for name in actions]
    sys.exit(f"{script}: nothing to do: pass {', '.join(names[:-1])} or {names[-1]}")
  for name in required:
    if not (model_dir if name == "model_dir" else getattr(f, name)):
      sys.exit(f"{script}: --{name} is required")
  if model_dir:      # an existing file or somebody else's folder: refused before any work
    try:
      run_record.check_dir(model_dir, "model_dir" if f.model_dir else "output_dir")
    except ValueError as e:
      sys.exit(f"{script}: {e}")
  if f.use_bfloat16 and getattr(f, "use_float16", False):
    sys.exit(f"{script}: --use_float16 and --use_bfloat16 exclude each other: pass one")
  try:
    if check is not None:
      check()
    strategy = distribution.get_strategy(f.distribution_strategy, f.tpu, tpu_zone=f.tpu_zone,
                                         gcp_project=f.gcp_project)
  except ValueError as e:
    sys.exit(f"{script}: {e}")
  keras.utils.set_random_seed(f.seed)
  if f.use_bfloat16:
    trainer_lib.use_bfloat16(f)
  if getattr(f, "use_float16", False):
    loss_scale.use_float16(f)
  run = summary.start(script, model_dir, started=cli_app.STARTED)
  for name in ("export_dir", "export_hf_dir"):     # named in the summary if written
    run.add_export(getattr(f, name, None))
  cli_app.on_success(summary.report)
  return model_dir, strategy
