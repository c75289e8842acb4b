"""Checkpoints: the release's TF1 name-based format (read and write) and native TF2.

A TF1 checkpoint maps release names (see checkpoint_names.py) to arrays; we
read it with `tf.train.load_checkpoint` and write it with the SaveV2 op, the
same on-disk format the original `tf.train.Saver` reads.
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf

from modeling import checkpoint_names

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


def resolve(path):
  """A checkpoint prefix from a prefix, a directory or a `checkpoint` state file."""
  if os.path.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise FileNotFoundError(f"{path}: directory holds no checkpoint")
    return latest
  if not tf.io.gfile.exists(path + ".index"):
    raise FileNotFoundError(f"{path}: no checkpoint ({path}.index not found)")
  return path


def is_tf1_checkpoint(path):
  reader = tf.train.load_checkpoint(resolve(path))
  return reader.has_tensor(_TF1_PROBE)


def load_tf1_checkpoint(model, path, require_all=False):
  """Loads a release-named checkpoint into `model` (built if needed).

  Encoder variables must all be present (mask_emb may be missing); heads and
  the LM bias may be missing unless `require_all`, and are then left as
  initialised (the report lists them). Any mis-shaped variable is an error.
  Raises ValueError naming the file and the offending variables.
  """
  path = resolve(path)
  model.ensure_built()
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  variables = model.tf1_variables()
  missing, misshaped, present = [], [], []
  for name, var in variables.items():
    if name not in shapes:
      missing.append(name)
    elif tuple(shapes[name]) != tuple(var.shape):
      misshaped.append(f"{name} (checkpoint {list(shapes[name])}, model {list(var.shape)})")
    else:
      present.append(name)
  required = [n for n in missing if require_all or (
      n.startswith(checkpoint_names.ENCODER_SCOPE + "/")
      and n not in checkpoint_names.OPTIONAL_ENCODER_NAMES)]
  problems = []
  if required:
    problems.append(f"missing {len(required)}: {', '.join(required[:6])}"
                    + (", ..." if len(required) > 6 else ""))
  if misshaped:
    hint = " (untie_r or the config differs?)" if any("_bias" in m for m in misshaped) else ""
    problems.append(f"wrong shape: {'; '.join(misshaped[:6])}{hint}")
  if problems:
    raise ValueError(f"{path}: checkpoint does not fit the model: " + " | ".join(problems))
  for name in present:
    var = variables[name]
    var.assign(np.asarray(reader.get_tensor(name)).astype(var.dtype))
  unused = sorted(set(shapes) - set(variables) - {"global_step"})
  unused = [n for n in unused if not _is_optimizer_slot(n)]
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
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  tmp = f"{path}.tmp-{os.getpid()}"
  tf.raw_ops.SaveV2(prefix=tmp, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=tensors)
  for suffix in (".data-00000-of-00001", ".index"):
    os.replace(tmp + suffix, path + suffix)
  state = os.path.join(directory, "checkpoint")
  base = os.path.basename(path)
  with open(state + ".tmp", "w") as f:
    f.write(f'model_checkpoint_path: "{base}"\nall_model_checkpoint_paths: "{base}"\n')
  os.replace(state + ".tmp", state)
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
  status = tf.train.Checkpoint(**native_objects(model)).read(resolve(path))
  status.assert_existing_objects_matched()
  return status


def load_checkpoint(model, path, require_all=False):
  """Loads either format, detected from the file; returns a one-line summary."""
  if is_tf1_checkpoint(path):
    return load_tf1_checkpoint(model, path, require_all).summary()
  load_native_checkpoint(model, path)
  return f"restored native TF2 checkpoint {resolve(path)}"
