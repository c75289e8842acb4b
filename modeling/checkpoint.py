"""Checkpoints: the release's TF1 name-based format (read and write) and native TF2.

A TF1 checkpoint maps release names (see checkpoint_names.py) to arrays; we
read it with `tf.train.load_checkpoint` and write it with the SaveV2 op, the
same on-disk format the original `tf.train.Saver` reads.
"""

import contextlib
import dataclasses
import json
import re

import numpy as np
import tensorflow as tf

from data_utils import fileio
from modeling.xlnet import release_names as checkpoint_names

_TF1_PROBE = f"{checkpoint_names.ENCODER_SCOPE}/word_embedding/lookup_table"


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


# A fine-tuning run's best/ (written by training/best.py): best.json names its checkpoint.
BEST_POINTER = "best.json"
BEST_LEGACY_CHECKPOINT = "ckpt"       # the layout before issue #31: best/ckpt.* + best.json


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


def resolve(path):
  """A checkpoint prefix from a prefix, a directory (a fine-tuning run's best/: the checkpoint
  its best.json names) or a `checkpoint` state file; its files checked (check_files)."""
  if fileio.isdir(path) and fileio.exists(fileio.join(path, BEST_POINTER)):
    path = read_best(path)[1]
  elif fileio.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise FileNotFoundError(f"{path}: directory holds no checkpoint")
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
def _read_errors(prefix, hint=""):
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
  with _read_errors(prefix, hint):
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


def _reader(prefix):
  # The reader itself, not tf.train.load_checkpoint: that first asks gfile whether the prefix is
  # a directory, which TF's ram:// answers True for `x.ckpt` beside `x.ckpt.index`.
  with _read_errors(prefix):
    return tf.compat.v1.train.NewCheckpointReader(prefix)


def is_tf1_checkpoint(path):
  return _reader(resolve(path)).has_tensor(_TF1_PROBE)


def load_tf1_checkpoint(model, path, require_all=False):
  """Loads a release-named checkpoint into `model` (built if needed).

  Encoder variables must all be present (mask_emb may be missing); heads and
  the LM bias may be missing unless `require_all`, and are then left as
  initialised (the report lists them). Any mis-shaped variable is an error.
  Raises ValueError naming the file and the offending variables.
  """
  path = resolve(path)
  model.ensure_built()
  reader = _reader(path)
  shapes = reader.get_variable_to_shape_map()
  report = assign_named(model, shapes, reader.get_tensor, path, require_all,
                        reading=lambda: _read_errors(path))
  report.unused = [n for n in report.unused if n != "global_step" and not _is_optimizer_slot(n)]
  return report


def assign_named(model, shapes, read, source, require_all=False, reading=None,
                 label=lambda name: name):
  """Assigns arrays named as the release to `model.tf1_variables()` (the model built).

  Args:
    shapes: {release name: shape} of what the source holds.
    read: release name -> array.
    source: the file (or directory) named in errors.
    require_all: every variable must be there, heads included (else only the encoder's,
      mask_emb excepted).
    reading: a context manager factory around the reads (turns read errors into lines).
    label: release name -> the name shown in errors (the source's own naming).
  Returns a LoadReport; raises ValueError naming `source` when required variables are missing
  or any is mis-shaped (nothing is assigned then).
  """
  variables = model.tf1_variables()
  missing, misshaped, present = [], [], []
  for name, var in variables.items():
    if name not in shapes:
      missing.append(name)
    elif tuple(shapes[name]) != tuple(var.shape):
      misshaped.append(f"{label(name)} (checkpoint {list(shapes[name])}, "
                       f"model {list(var.shape)})")
    else:
      present.append(name)
  required = [n for n in missing if require_all or (
      n.startswith(checkpoint_names.ENCODER_SCOPE + "/")
      and n not in checkpoint_names.OPTIONAL_ENCODER_NAMES)]
  problems = []
  if required:
    problems.append(f"missing {len(required)}: {', '.join(label(n) for n in required[:6])}"
                    + (", ..." if len(required) > 6 else ""))
  if misshaped:
    hint = " (untie_r or the config differs?)" if any("_bias" in m for m in misshaped) else ""
    problems.append(f"wrong shape: {'; '.join(misshaped[:6])}{hint}")
  if problems:
    raise ValueError(f"{source}: checkpoint does not fit the model: " + " | ".join(problems))
  with (reading() if reading else contextlib.nullcontext()):   # a bad file raises here
    for name in present:
      var = variables[name]
      var.assign(np.asarray(read(name)).astype(var.dtype))
  unused = sorted(set(shapes) - set(variables))
  return LoadReport(loaded=present, fresh=missing, unused=unused)


def _is_optimizer_slot(name):
  return name.endswith(("/adam_m", "/adam_v", "/Adam", "/Adam_1")) or name.startswith("beta")


def save_tf1_checkpoint(model, path, global_step=None):
  """Writes `model` under the release's names at prefix `path` (atomic rename).

  Also writes the `checkpoint` state file beside it, so TF1 code finds it with
  `tf.train.latest_checkpoint`. Returns `path`.
  """
  model.ensure_built()
  variables = model.tf1_variables()
  names = sorted(variables)
  tensors = [tf.convert_to_tensor(variables[n].value) for n in names]
  if global_step is not None:
    names.append("global_step")
    tensors.append(tf.constant(global_step, tf.int64))
  directory = fileio.dirname(path)
  fileio.makedirs(directory)
  tmp = fileio.tmp_name(path)
  tf.raw_ops.SaveV2(prefix=tmp, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=tensors)
  for suffix in (".data-00000-of-00001", ".index"):
    fileio.rename(tmp + suffix, path + suffix)
  base = fileio.basename(path)
  fileio.write_atomic(fileio.join(directory, "checkpoint"),
                      f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')
  return path


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


def load_native_checkpoint(model, path):
  """Restores a `save_native_checkpoint` file; every variable must be there."""
  return read_checkpoint(tf.train.Checkpoint(**native_objects(model)), resolve(path))
