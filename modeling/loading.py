"""Weights into a model from whatever a user names: a release (TF1-named) checkpoint, a native
TF2 one, a training run's directory or its best/, or a Hugging Face directory. It sits above the
readers it chooses between (modeling/checkpoint.py, modeling/xlnet/hf.py, modeling/mpnet/hf.py),
so none of them imports another to dispatch.
"""

from modeling import checkpoint, hf_io
from modeling.xlnet import hf as hf_xlnet
from modeling.mpnet import hf as mpnet_hf
from modeling.xlnet import release_checkpoint


def load_checkpoint(model, path, require_all=False):
  """Loads a release TF1 checkpoint, a native TF2 one (by variable key:
  checkpoint.load_native_by_key), a training run's directory (its best/, else its last
  checkpoint: checkpoint.run_checkpoint) or a Hugging Face XLNet directory
  (modeling/xlnet/hf.py), detected from the files; returns a one-line summary, which for a run
  directory starts with the checkpoint chosen ("best/ (step 400, accuracy 0.8100): ...")."""
  run = None if hf_io.is_model_dir(path) else checkpoint.run_checkpoint(path)
  if run is not None:
    prefix, where = run
    return f"{where}: {load_checkpoint(model, prefix, require_all)}"
  if hf_io.is_model_dir(path):
    return hf_xlnet.load_hf(model, path, require_all).summary()
  if release_checkpoint.is_tf1_checkpoint(path):
    return release_checkpoint.load_tf1_checkpoint(model, path, require_all).summary()
  report = checkpoint.load_native_by_key(model, path, require_all)
  return f"native TF2 checkpoint {checkpoint.resolve(path)}: {report.summary()}"


def initialize_mpnet(model, path, log=print):
  """Fine-tuning init of an MPNet task model: a Hugging Face MPNet directory (config.json +
  model.safetensors, e.g. run_pretrain.py --objective=mpnet's export) fills the encoder;
  anything else is read as a checkpoint of this project (load_checkpoint)."""
  model.ensure_built()
  if hf_io.is_model_dir(path):
    unused = mpnet_hf.load_hf_weights(model.encoder, path)
    head = _load_mpnet_head(model, path) if unused else ""
    if head:
      unused = [name for name in unused if name.split(".")[0] not in model.hf_heads()
                and not name.startswith(tuple(f"{h}." for h in model.hf_heads()))]
    log(f"init from {path}: MPNet encoder{head} loaded ({len(unused)} other weights not used)")
    return
  log(f"init from {path}: {load_checkpoint(model, path)}")


def _load_mpnet_head(model, path):
  """The head of a Hugging Face file of the model's own class (config.json's architectures)
  when every weight of it is there with the model's shape: " and head", else "" (the head
  stays as initialised, as when fine-tuning starts from another head)."""
  import numpy as np
  if (hf_io.read_config(path).get("architectures") or [None])[0] != model.hf_architecture:
    return ""
  weights, pending = hf_io.read_weights(path), []
  for name, layer in model.hf_heads().items():
    for var, key, transpose in ((layer.kernel, f"{name}.weight", True),
                                *(((layer.bias, f"{name}.bias", False),) if layer.use_bias
                                  else ())):
      value = weights.get(key)
      value = None if value is None else np.asarray(value, np.float32)
      value = value.T if transpose and value is not None else value
      if value is None or tuple(value.shape) != tuple(var.shape):
        return ""
      pending.append((var, value))
  for var, value in pending:
    var.assign(value)
  return " and head" if pending else ""
