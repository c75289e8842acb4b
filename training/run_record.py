"""A run directory knows how it was made: MODEL_DIR/run.json.

Every training run (run_pretrain.py and the fine-tuning scripts with --do_train) writes its
effective settings once, at its start, before any other file: each flag of the script after the
recipe's and the records' defaults are filled in, the model config's contents, and the
fingerprints of what it reads (tokenizer file, training data, record-infos, initial checkpoint)
in place of their paths, so that moving a file changes nothing and changing its bytes does
(the paths themselves are kept apart, under "paths", for readers such as inference/; never
compared).

A rerun into the same directory compares its settings with the recorded ones:
  - the same: it resumes from the latest checkpoint, as before;
  - different in a setting that changes the result: it is refused in one line naming each
    differing setting and its two values, before anything is written;
  - with --allow_changed_settings: it continues with the new values, and the change (its step
    and each setting's old and new value) is appended to run.json's "history"; "settings" then
    holds the values in force.
Settings that cannot change the trained weights (NEUTRAL: where files go, how often to log or
keep checkpoints, what to evaluate or predict, how the step is compiled or distributed) are
recorded but never compared. Evaluation and prediction without --do_train read a directory
without comparing anything.

A directory written by an earlier version of this project (checkpoints, no run.json) is
adopted: its run.json is written with the current settings, said in one line.
"""

import datetime
import hashlib
import json
import os

from absl import flags

from data_utils import fileio
from data_utils import fingerprint
from data_utils import outputs
from modeling import checkpoint as ckpt_lib

RUN_FILE = "run.json"
ALLOW_FLAG = "allow_changed_settings"

# Flags that never change the trained weights: output places, logging and checkpoint cadence,
# evaluation / prediction / export actions, how the step is compiled, distributed or verified.
NEUTRAL = frozenset({
    "model_dir", "output_dir", "export_dir", "export_hf_dir", "export_padding", "export_xla",
    "cache_dir", "do_train", "do_eval", "do_predict", "do_eval_only", "eval_split",
    "predict_split", "predict_file", "predictions", "null_odds", "eval_batch_size",
    "predict_batch_size", "n_best_size", "steps_per_loop", "save_every", "keep_checkpoints",
    "tpu", "tpu_zone", "gcp_project", "distribution_strategy", "num_hosts", "xla",
    "deterministic", "recompute", "verify_records", "checkpoint_memory", ALLOW_FLAG,
    "model_config_path",     # its contents are recorded as `model_config`, key by key
    "null_odds_threshold",   # SQuAD 2.0: which answers the submission file leaves empty
    "dev_file", "test_file", "id_column",   # --task_name=custom: what is evaluated / predicted
    "verbose", "compile_cache",
})
# Flags naming a file or directory that is read: recorded by fingerprint, not by path.
# (--record_dir: its record-infos' digest, given by pretraining/runner.py: the records
# themselves can be terabytes.)
PATH_FLAGS = ("sp_model", "vocab_file", "init_checkpoint", "data_dir", "train_file")
PATHS_KEY = "paths"   # run.json's {flag: path} of PATH_FLAGS as given, beside the settings


def define_flags(flag_values=flags.FLAGS):
  flags.DEFINE_bool(ALLOW_FLAG, False,
                    "Continue a run whose directory was made with other settings (e.g. a new "
                    "learning rate or more steps): the new values are used and the change is "
                    "appended to MODEL_DIR/run.json's history. Without it such a rerun is "
                    "refused, naming each differing setting.", flag_values=flag_values)


def _project_flags(flag_values):
  """{name: value} of the flags this project defines (absl's and TensorFlow's left out)."""
  out = {}
  for module, defined in flag_values.flags_by_module_dict().items():
    if module.startswith(("absl.", "tensorflow.", "keras.")):
      continue
    for flag in defined:
      out[flag.name] = flag.value
  return out


def _path_fingerprint(path):
  """What a read path contributes: a file's size and sha256; a directory's files' digest; a
  checkpoint prefix (no such file) its files' digest; None when nothing is there."""
  if not path:
    return None
  path = str(path).rstrip("/")
  if fileio.exists(path) and not fileio.isdir(path):
    fp = fingerprint.file_fingerprint(path)
    return {"size": fp["size"], "sha256": fp["sha256"]}
  if fileio.isdir(path):
    walk = os.walk if not fileio.is_url(path) else fileio.walk
    files = sorted(fileio.join(d, f) for d, _, fs in walk(path) for f in fs
                   if fileio.TMP_MARK not in f)
    names = "\n".join(f[len(path):].lstrip("/") for f in files)
    return {"files": len(files), "sha256": fingerprint.files_digest(files),
            "names": hashlib.sha256(names.encode("utf-8")).hexdigest()}
  prefixed = fileio.glob(path + ".*")
  if prefixed:
    return {"files": len(prefixed), "sha256": fingerprint.files_digest(prefixed)}
  return None


def settings_from_flags(flag_values, resolved=None, model_config=None, data_files=None):
  """The run's effective settings: every project flag (NEUTRAL ones too, for the record),
  read paths replaced by their fingerprints, `resolved` {flag: value} (the recipe's optimizer
  values, the records' parameters) over the flags' own, the model config's contents, and
  `data_files` (the files training reads, when the script knows them) as one digest."""
  values = _project_flags(flag_values)
  paths = {}
  for name in PATH_FLAGS:
    if name in values:
      if values[name]:
        paths[name] = values[name] if "://" in values[name] else os.path.abspath(values[name])
      values[name] = _path_fingerprint(values[name])
  if paths:   # where the read files were, for the reader (run.json's "paths"), never compared
    values[PATHS_KEY] = paths
  for key, value in (resolved or {}).items():
    values[key] = value
  if model_config is not None:
    values["model_config"] = model_config.to_dict() if hasattr(model_config, "to_dict") \
        else dict(model_config)
  if data_files:
    values["train_data"] = {"files": len(data_files),
                            "sha256": fingerprint.files_digest(data_files)}
  return json.loads(json.dumps(values, default=str))   # JSON's own view (tuples as lists)


def _flat(settings, prefix=""):
  out = {}
  for key, value in settings.items():
    if isinstance(value, dict) and key == "model_config":
      out.update(_flat(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = value
  return out


def differences(recorded, current, neutral=()):
  """[(name, recorded value, current value)] of the result-changing settings that differ
  (NEUTRAL and the script's own `neutral` names left out)."""
  a, b = _flat(recorded), _flat(current)
  skip = NEUTRAL | set(neutral)
  return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
          if k.split(".")[0] not in skip and a.get(k) != b.get(k)]


def _show(value):
  if isinstance(value, dict) and "sha256" in value:
    return f"sha256 {value['sha256'][:12]}"
  if value is None:
    return "unset"
  return json.dumps(value) if not isinstance(value, str) else value


def _name(key):
  return key if key.startswith("model_config.") or key == "train_data" else f"--{key}"


def describe(diffs):
  return ", ".join(f"{_name(k)} {_show(a)} -> {_show(b)}" for k, a, b in diffs)


def _now():
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _is_legacy_run(model_dir, names):
  """A run directory of an earlier version (checkpoints or the optimizer record, no marker),
  or one whose every entry (`names`) is an output of this project (e.g. a feature cache)."""
  return any(name in names for name in (ckpt_lib.CHECKPOINT_DIR, "optimizer.json", "train",
                                         "best")) or \
      all(outputs.kind_of(fileio.join(model_dir, name)) for name in names)


def check_dir(model_dir, flag="model_dir"):
  """One line (ValueError) unless MODEL_DIR may hold this project's run: absent, empty, one of
  our runs (marker), or an earlier version's run directory. Writes nothing."""
  return outputs.check_dir(model_dir, flag, outputs.RUN,
                           earlier=lambda names: _is_legacy_run(model_dir, names))


def read(model_dir):
  """MODEL_DIR/run.json as a dict, or None. A damaged one is a one-line ValueError."""
  path = fileio.join(model_dir, RUN_FILE)
  if not fileio.exists(path):
    return None
  try:
    record = json.loads(fileio.read_text(path))
    if not isinstance(record, dict) or not isinstance(record.get("settings"), dict):
      raise ValueError("no settings")
  except ValueError as e:
    raise ValueError(f"{path}: not a run record of this project ({e}); move it away to adopt "
                     "the directory") from None
  return record


def start(model_dir, script, settings, allow_changes=False, write=True, log=print, neutral=()):
  """`check`, then the returned `commit()` at once (see the module docstring)."""
  return check(model_dir, script, settings, allow_changes, write, log, neutral)()


def check(model_dir, script, settings, allow_changes=False, write=True, log=print, neutral=()):
  """Compares SETTINGS with MODEL_DIR's run.json, writing nothing, and returns `commit`, which
  records them (the caller reads its data in between, so that a data error leaves nothing).

  Raises ValueError (one line) for a directory that is not a run of this project, or a rerun
  with other settings without `allow_changes`. `commit()` returns "new", "same", "changed" or
  "adopted"; with `write` False (a non-chief host) it writes nothing. `neutral`: the script's
  own settings that do not change its result (run_pretrain.py's --sp_model: only its
  export)."""
  state = check_dir(model_dir)
  settings = dict(settings)
  paths = settings.pop(PATHS_KEY, None) or {}
  record = read(model_dir) if state not in ("new", "empty") else None
  if record is None:
    def commit_new():
      if state not in ("new", "empty"):
        log(f"{model_dir}: a run directory without {RUN_FILE} (an earlier version's): "
            "recording the current settings")
      if write:
        outputs.claim_dir(model_dir, outputs.RUN)
        _write(model_dir, {"script": script, "created": _now(), "settings": settings,
                           PATHS_KEY: paths, "history": []})
      return "new" if state in ("new", "empty") else "adopted"
    return commit_new
  diffs = differences(record["settings"], settings, neutral)
  if not diffs:
    def commit_same():   # the same files, perhaps moved: their latest paths are recorded
      if write and paths and record.get(PATHS_KEY) != paths:
        _write(model_dir, dict(record, **{PATHS_KEY: paths}))
      return "same"
    return commit_same
  if not allow_changes:
    raise ValueError(f"--model_dir={model_dir} holds a run made with other settings: "
                     f"{describe(diffs)}; pass a new --model_dir, or --{ALLOW_FLAG} to "
                     "continue this run with the new values")

  def commit_changed():
    step = ckpt_lib.latest_step(model_dir) or 0
    log(f"continuing the run at step {step} with changed settings: {describe(diffs)} "
        f"(recorded in {fileio.join(model_dir, RUN_FILE)})")
    if write:
      history = list(record.get("history", []))
      history.append({"step": step, "time": _now(),
                      "changed": {k: [a, b] for k, a, b in diffs}})
      _write(model_dir, dict(record, settings=settings, history=history,
                             **{PATHS_KEY: paths or record.get(PATHS_KEY, {})}))
    return "changed"
  return commit_changed


def _write(model_dir, record):
  fileio.write_atomic(fileio.join(model_dir, RUN_FILE), json.dumps(record, indent=1) + "\n")
