"""Checkpoints, for every family: files checked and read with one-line errors (`resolve`,
`check_files`, `read_checkpoint`, `reader`, `read_errors`), native TF2 checkpoints keyed by
variable path, a fine-tuning run's best/ (`read_best`), `LoadReport`. The release's TF1
name-based format is XLNet's: modeling/xlnet/release_checkpoint.py.
"""

import contextlib
import dataclasses
import json
import re

import tensorflow as tf

from data_utils import fileio


@dataclasses.dataclass
class LoadReport:
  loaded: list
  fresh: list      # model variables absent from the checkpoint (kept as initialised)
  unused: list     # checkpoint variables the model has no place for

  def summary(self):
    return (f"loaded {len(self.loaded)} variables; {len(self.fresh)} initialised fresh"
            + (f" ({', '.join(self.fresh[:4])}{', ...' if len(self.fresh) > 4 else ''})"
               if self.fresh else "")
            + f"; {len(self.unused)} in the checkpoint unused")


# A training run's checkpoints: MODEL_DIR/ckpt/ckpt-STEP.*, named in MODEL_DIR/ckpt/checkpoint
# (training/trainer.py's tf.train.CheckpointManager).
CHECKPOINT_DIR = "ckpt"


def latest_step(model_dir):
  """The step of MODEL_DIR's latest published checkpoint (ckpt/ckpt-STEP), or None."""
  path = tf.train.latest_checkpoint(fileio.join(model_dir, CHECKPOINT_DIR))
  try:
    return int(path.rsplit("-", 1)[1]) if path else None
  except (IndexError, ValueError):
    return None


# A fine-tuning run's best/ (written by training/best.py): best.json names its checkpoint.
BEST_POINTER = "best.json"
BEST_LEGACY_CHECKPOINT = "ckpt"       # the older layout: best/ckpt.* + best.json


def read_best(best_dir):
  """(record, checkpoint prefix) of the published best in `best_dir`, or (None, None).
  The record is best.json's content: "step", the metrics, "checkpoint" (relative to
  best_dir; absent in the old layout, whose checkpoint is best/ckpt)."""
  path = fileio.join(best_dir, BEST_POINTER)
  if not fileio.exists(path):
    return None, None
  try:
    record = json.loads(fileio.read_text(path))
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise ValueError(f"{path}: not the best checkpoint's record ({e})") from None
  if not isinstance(record, dict) or not isinstance(record.get("checkpoint", ""), str):
    raise ValueError(f"{path}: not the best checkpoint's record")
  return record, fileio.join(best_dir, record.get("checkpoint", BEST_LEGACY_CHECKPOINT))


def _metrics(record, shown=3):
  """"accuracy 0.8100, f1 0.7900": the first `shown` numeric metrics of a best.json record."""
  values = [(k, v) for k, v in record.items() if k not in ("step", "checkpoint")
            and isinstance(v, (int, float)) and not isinstance(v, bool)]
  return ", ".join(f"{k} {v:.4f}" for k, v in values[:shown])


def run_checkpoint(run_dir):
  """(checkpoint prefix, one-line description) of a training run's directory (MODEL_DIR of
  run_pretrain.py or a fine-tuning script): the checkpoint its best/ names ("best/ (step 400,
  accuracy 0.8100)"), else the last one in ckpt/ ("ckpt/ckpt-400, the last checkpoint (no
  best/)"); None when `run_dir` is not a directory holding either."""
  if not fileio.isdir(run_dir):
    return None
  record, prefix = read_best(fileio.join(run_dir, "best"))
  if prefix is not None:
    metrics = _metrics(record)
    return prefix, (f"best/ (step {record.get('step')}" + (f", {metrics}" if metrics else "")
                    + ")")
  latest = tf.train.latest_checkpoint(fileio.join(run_dir, CHECKPOINT_DIR))
  if latest is None:
    return None
  return latest, f"{CHECKPOINT_DIR}/{fileio.basename(latest)}, the last checkpoint (no best/)"


def resolve(path):
  """A checkpoint prefix from a prefix, a directory (a fine-tuning run's best/: the checkpoint
  its best.json names; a run's MODEL_DIR: run_checkpoint; else its `checkpoint` state file's
  latest) or a `checkpoint` state file; its files checked (check_files)."""
  if fileio.isdir(path) and fileio.exists(fileio.join(path, BEST_POINTER)):
    path = read_best(path)[1]
  elif fileio.isdir(path):
    run = run_checkpoint(path)
    latest = run[0] if run else tf.train.latest_checkpoint(path)
    if latest is None:
      raise FileNotFoundError(f"{path}: directory holds no checkpoint (no best/{BEST_POINTER}, "
                              f"no {CHECKPOINT_DIR}/ of a run, no `checkpoint` state file)")
    path = latest
  elif not fileio.exists(path + ".index"):
    raise FileNotFoundError(f"{path}: no checkpoint ({path}.index not found)")
  check_files(path)
  return path


def check_files(prefix, hint=""):
  """Raises FileNotFoundError naming the first missing file of the checkpoint `prefix`: its
  .index or a data shard (`prefix.data-00000-of-00001`, ...). Cheap: no data is read."""
  hint = f"; {hint}" if hint else ""
  if not fileio.exists(prefix + ".index"):
    raise FileNotFoundError(f"{prefix}.index: not found{hint}")
  shards = fileio.glob(f"{prefix}.data-*-of-*")
  counts = {int(name.rsplit("-of-", 1)[1]) for name in shards}
  expected = [f"{prefix}.data-{k:05d}-of-{n:05d}" for n in sorted(counts) or [1]
              for k in range(n)]
  missing = sorted(set(expected) - set(shards))
  if missing:
    raise FileNotFoundError(f"{missing[0]}: not found, but {fileio.basename(prefix)}.index is "
                            f"there (an incomplete copy?){hint}")


def _tf_reason(error):
  """The first line of a TensorFlow error, without its {{function_node ...}} and [Op:...]."""
  text = getattr(error, "message", None) or str(error)
  text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text.strip().splitlines()[0])
  return re.sub(r"\s*\[Op:[^\]]*\].*$", "", text).strip()


@contextlib.contextmanager
def read_errors(prefix, hint=""):
  """TensorFlow's errors while reading checkpoint `prefix` (DataLossError: checksum; IndexError:
  data shorter than the index says; OpError: not an sstable, a missing file, ...) become one
  ValueError line naming the file."""
  try:
    yield
  except (tf.errors.OpError, IndexError) as e:
    reason = _tf_reason(e)
    shards = fileio.glob(f"{prefix}.data-*-of-*")
    if any(k in reason for k in ("sstable", "block checksum", ".index")) or not shards:
      name = f"{prefix}.index"
    else:
      name = shards[0] if len(shards) == 1 else f"{prefix}.data-*"
    if isinstance(e, IndexError):
      reason += ": shorter than its .index says (truncated?)"
    raise ValueError(f"{name}: checkpoint unreadable ({reason}){'; ' + hint if hint else ''}"
                     ) from None


def read_checkpoint(checkpoint, prefix, others=None, partial=False):
  """`checkpoint.read(prefix)` (a tf.train.Checkpoint) with its files checked first and
  TensorFlow's read errors turned into one line naming the file. `others` (a resumed run:
  its manager's checkpoints) makes the line say which older one to fall back to. Unless
  `partial`, every object of `checkpoint` must be in the file. Returns the load status."""
  hint = ""
  if others is not None:
    older = [p for p in others if p != prefix]
    hint = (f"delete {prefix}.* to resume from {fileio.basename(older[-1])}" if older else
            f"delete {fileio.dirname(prefix)} to start afresh")
  check_files(prefix, hint)
  with read_errors(prefix, hint):
    status = checkpoint.read(prefix)
  if partial:
    status.expect_partial()
    return status
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise ValueError(f"{prefix}: checkpoint does not fit the model (another config?): "
                     f"{str(e).splitlines()[0][:200]}") from None
  return status


def reader(prefix):
  # The reader itself, not tf.train.load_checkpoint: that first asks gfile whether the prefix is
  # a directory, which TF's ram:// answers True for `x.ckpt` beside `x.ckpt.index`.
  with read_errors(prefix):
    return tf.compat.v1.train.NewCheckpointReader(prefix)


def native_objects(model):
  """{stable key: variable} for tf.train.Checkpoint, keyed by each variable's
  Keras path without the model's own (auto-numbered) name."""
  model.ensure_built()
  objects = {}
  for var in model.weights:
    key = var.path.split("/", 1)[-1].replace("/", ".")
    if key in objects:
      raise ValueError(f"two variables share the checkpoint key {key!r}")
    objects[key] = var
  return objects


def save_native_checkpoint(model, path):
  """Object-based TF2 checkpoint of the model's variables; returns its prefix."""
  return tf.train.Checkpoint(**native_objects(model)).write(path)


# The trainer's own entries of its checkpoints beside the model's variables (training/trainer.py)
TRAINING_ENTRIES = ("step", "state", "save_counter", "optimizer.", "loss_scale.", "rng.")
_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"


def load_native_by_key(model, path, require_all=False):
  """Restores the variables of `model` a native checkpoint (this project's: a training run's
  ckpt/ or best/, save_native_checkpoint) holds under the same keys (native_objects), so the
  encoder of a pretraining run initialises a fine-tuning model and back. Every variable of
  `model.encoder` must be there (its mask_emb excepted), and all of the model's with
  `require_all`; a variable of another shape is an error (ValueError naming the file, nothing
  assigned). Returns a LoadReport (fresh: the model's variables the file lacks; unused: the
  file's model variables this model has no place for; the trainer's entries not counted)."""
  prefix = resolve(path)
  objects = native_objects(model)
  shapes = {k[:-len(_VALUE)].replace("..", "."): v     # the file escapes "." in keys as ".."
            for k, v in reader(prefix).get_variable_to_shape_map().items()
            if k.endswith(_VALUE) and "/" not in k[:-len(_VALUE)]}
  encoder = {id(v) for v in getattr(model, "encoder", model).weights}
  missing = [k for k, v in objects.items() if k not in shapes and (
      require_all or (id(v) in encoder and not k.endswith("mask_emb")))]
  misshaped = [f"{k} (checkpoint {list(shapes[k])}, model {list(v.shape)})"
               for k, v in objects.items() if k in shapes and tuple(shapes[k]) != tuple(v.shape)]
  problems = ([f"missing {len(missing)}: {', '.join(missing[:6])}"
               + (", ..." if len(missing) > 6 else "")] if missing else []) + (
      [f"wrong shape: {'; '.join(misshaped[:6])}"] if misshaped else [])
  if problems:
    raise ValueError(f"{prefix}: checkpoint does not fit the model: " + " | ".join(problems))
  present = {k: v for k, v in objects.items() if k in shapes}
  read_checkpoint(tf.train.Checkpoint(**present), prefix).expect_partial()
  return LoadReport(loaded=sorted(present), fresh=sorted(set(objects) - set(present)),
                    unused=sorted(k for k in shapes if k not in objects
                                  and not k.startswith(TRAINING_ENTRIES)))


def load_native_checkpoint(model, path):
  """Restores a `save_native_checkpoint` file; every variable must be there."""
  return read_checkpoint(tf.train.Checkpoint(**native_objects(model)), resolve(path))
