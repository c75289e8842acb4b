"""Hugging Face weight files, read and written without torch (shared by XLNet and MPNet).

A Hugging Face model directory holds `config.json` and the weights as `model.safetensors` or a
zip-format `pytorch_model.bin` (read by modeling/torch_pickle.py; only the legacy pre-zip
format needs torch). Arrays are numpy, keyed by state-dict name.
"""

import json

from data_utils import fileio

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def weights_file(model_dir):
  """The weights file of `model_dir` (safetensors first), or None."""
  for name in WEIGHT_FILES:
    path = fileio.join(model_dir, name)
    if fileio.exists(path) and not fileio.isdir(path):
      return path
  return None


def is_model_dir(path):
  """A directory holding a Hugging Face weights file."""
  return fileio.isdir(path) and weights_file(path) is not None


def read_weights(model_dir):
  """{state-dict name: numpy array} of `model.safetensors` or `pytorch_model.bin`."""
  path = weights_file(model_dir)
  if path is None:
    raise FileNotFoundError(f"{model_dir}: no model.safetensors or pytorch_model.bin")
  if path.endswith(".safetensors"):
    from safetensors.numpy import load
    try:
      return load(fileio.read_bytes(path))
    except Exception as e:   # safetensors raises its own SafetensorError on a bad header
      raise ValueError(f"{path}: not a readable safetensors file ({e})") from None
  from modeling import torch_pickle
  return torch_pickle.load_state_dict(path)


def read_config(model_dir):
  """The `config.json` dict of `model_dir`, or {} when there is none."""
  path = fileio.join(model_dir, "config.json")
  if not fileio.exists(path):
    return {}
  try:
    data = json.loads(fileio.read_text(path))
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None
  if not isinstance(data, dict):
    raise ValueError(f"{path}: not a JSON object")
  return data


def write_model_dir(model_dir, tensors, config):
  """Publishes `model.safetensors` (tensors: {name: numpy array}, written float32 and
  contiguous) then `config.json` (dict) in `model_dir`, each atomically."""
  import numpy as np
  from safetensors.numpy import save
  tensors = {k: np.ascontiguousarray(np.asarray(v, np.float32)) for k, v in tensors.items()}
  fileio.makedirs(model_dir)
  fileio.write_atomic(fileio.join(model_dir, "model.safetensors"),
                      save(tensors, metadata={"format": "pt"}))
  fileio.write_atomic(fileio.join(model_dir, "config.json"),
                      json.dumps(config, indent=2, sort_keys=True) + "\n")
  return model_dir


def config_labels(config):
  """The class names of a head's config.json dict (`classifier_keys`' inverse): id2label in id
  order (keys as strings or ints), `LABEL_i` where it names none; num_labels of them, else as
  many as id2label holds, else 2."""
  id2label = config.get("id2label") or {}
  n = int(config.get("num_labels") or len(id2label) or 2)
  return [str(id2label.get(str(i), id2label.get(i, f"LABEL_{i}"))) for i in range(n)]


def classifier_keys(n_class, regression, labels=None):
  """config.json's num_labels / id2label / label2id / problem_type of a sequence classifier
  (`labels`: class names, used when there is one per class)."""
  n = 1 if regression else n_class
  names = list(labels) if labels and len(labels) == n and not regression else \
      [f"LABEL_{i}" for i in range(n)]
  return dict(num_labels=n, id2label={str(i): str(v) for i, v in enumerate(names)},
              label2id={str(v): i for i, v in enumerate(names)},
              problem_type="regression" if regression else "single_label_classification")
