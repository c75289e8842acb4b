"""MPNet weights in and out of the Hugging Face layout (transformers' MPNet* classes): the
encoder's names are `encoder.hf_variable_map` (modeling/mpnet/encoder.py), each task model adds
its head's (`model.hf_variable_map()`); this module reads and writes the files.
"""

import numpy as np
import tensorflow as tf

from modeling import hf_io
from modeling.mpnet.encoder import hf_variable_map


def architecture(model):
  """The transformers class an export of `model` loads into (the model's `hf_architecture`);
  ValueError (one line) when its layout has none."""
  if model.hf_architecture is None:
    raise ValueError(f"--export_hf_dir: {model.hf_missing}")
  return model.hf_architecture


def export_hf(model, path, log=print, labels=None):
  """Writes `model` to directory `path` in the Hugging Face layout (config.json +
  model.safetensors, atomically), loadable by its `architecture` class. Returns `path`."""
  arch = architecture(model)
  model.ensure_built()
  extra = hf_io.classifier_keys(model.n_class, model.regression, labels) \
      if hasattr(model, "n_class") else {}
  save_hf_weights(model.hf_variable_map(), model.config, path, arch, **extra)
  log(f"exported {arch} (Hugging Face layout) to {path}")
  return path


def load_hf_weights(encoder, model_dir):
  """Loads HF MPNet weights (prefix `mpnet.` tolerated) into `encoder`; returns unused names."""
  weights = hf_io.read_weights(model_dir)
  weights = {k[len("mpnet."):] if k.startswith("mpnet.") else k: v for k, v in weights.items()}
  if not encoder.built:
    encoder(tf.zeros([1, 2], tf.int32))
  mapping = hf_variable_map(encoder)
  missing = [k for k in mapping if k not in weights]
  if missing:
    raise ValueError(f"{model_dir}: missing {len(missing)} weights: {', '.join(missing[:5])}")
  for name, (var, transpose) in mapping.items():
    value = np.asarray(weights[name], np.float32)
    value = value.T if transpose else value
    if tuple(value.shape) != tuple(var.shape):
      raise ValueError(f"{model_dir}: {name} has shape {list(value.shape)}, "
                       f"the model {list(var.shape)}")
    var.assign(value)
  return sorted(set(weights) - set(mapping))


def save_hf_weights(variable_map, config, model_dir, architecture="MPNetModel", **extra):
  """Writes `config.json` + `model.safetensors` in the Hugging Face layout (atomically).

  variable_map: {state-dict name: (variable, transpose?)}, e.g. hf_variable_map(encoder)
  with names prefixed as the architecture expects; extra: more config.json keys
  (num_labels, ...). Hugging Face's MPNet classes and load_hf_weights read the result.
  """
  tensors = {}
  for name, (var, transpose) in variable_map.items():
    value = np.asarray(var.numpy(), np.float32)
    tensors[name] = value.T if transpose else value
  data = dict(config.to_dict(), model_type="mpnet", architectures=[architecture],
              bos_token_id=0, eos_token_id=2, **extra)
  return hf_io.write_model_dir(model_dir, tensors, data)
