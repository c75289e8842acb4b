"""The release's TF1 name-based checkpoints, read and written: a TF1 checkpoint maps release
names (modeling/xlnet/release_names.py; a model's `tf1_variables()`) to arrays; we read it with
TensorFlow's checkpoint reader and write it with the SaveV2 op, the same on-disk format the
original `tf.train.Saver` reads. Hugging Face XLNet weights load through `assign_named` too
(modeling/xlnet/hf.py).
"""

import contextlib

import numpy as np
import tensorflow as tf

from data_utils import fileio
from modeling import checkpoint
from modeling.xlnet import release_names

_TF1_PROBE = f"{release_names.ENCODER_SCOPE}/word_embedding/lookup_table"


def is_tf1_checkpoint(path):
  return checkpoint.reader(checkpoint.resolve(path)).has_tensor(_TF1_PROBE)


def load_tf1_checkpoint(model, path, require_all=False):
  """Loads a release-named checkpoint into `model` (built if needed).

  Encoder variables must all be present (mask_emb may be missing); heads and
  the LM bias may be missing unless `require_all`, and are then left as
  initialised (the report lists them). Any mis-shaped variable is an error.
  Raises ValueError naming the file and the offending variables.
  """
  path = checkpoint.resolve(path)
  model.ensure_built()
  reader = checkpoint.reader(path)
  shapes = reader.get_variable_to_shape_map()
  report = assign_named(model, shapes, reader.get_tensor, path, require_all,
                        reading=lambda: checkpoint.read_errors(path))
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
      n.startswith(release_names.ENCODER_SCOPE + "/")
      and n not in release_names.OPTIONAL_ENCODER_NAMES)]
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
  return checkpoint.LoadReport(loaded=present, fresh=missing, unused=unused)


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
