"""`from_pretrained(path)`: any model this project reads, with its tokenizer and config, ready
for raw text (inference/model.py). What each kind of path holds: inference/sources.py.
"""

import numpy as np

from data_utils import fileio, layouts
from modeling import checkpoint, families, hf_io
from modeling.run_config import RunConfig
from inference.saved_model import is_saved_model, load as load_saved_model
from inference.sources import describe
from inference.model import Model

DEFAULT_MAX_LENGTH = 512     # XLNet (relative positions: no table to outgrow)
OVERRIDES = ("sp_model", "vocab_file", "uncased", "max_length", "model_type")


def from_pretrained(path, batch_size=32, log=print, **overrides):
  """Loads the model at PATH (local or a tf.io.gfile URL such as gs://; nothing is downloaded).

  PATH: a fine-tuning run directory (run.json; best/, else its last checkpoint), a pretraining
  run directory or its export/, a Hugging Face XLNet or MPNet directory (config.json +
  model.safetensors / pytorch_model.bin; *ForSequenceClassification heads with their
  id2label, base and pretraining models as encoders), or a released TF1 XLNet checkpoint
  directory (xlnet_config.json + xlnet_model.ckpt.* + spiece.model).

  Keyword overrides: sp_model= / vocab_file= (the tokenizer, when the path's is not found or
  another is wanted), uncased=, max_length= (tokens per row; default: a fine-tuning run's
  --max_seq_length, MPNet's position table, else 512), model_type= ("xlnet" | "mpnet").
  batch_size: rows per forward pass. log: called once with one line saying what was loaded
  (None: silent).

  A pretraining encoder SavedModel (MODEL_DIR/export/saved_model) is wrapped too, for
  `encode` (inference/saved_model.py); a task SavedModel names no label set and is refused.

  Returns an inference.Model. Raises FileNotFoundError / ValueError with one line naming the
  path for anything it cannot read.
  """
  unknown = sorted(set(overrides) - set(OVERRIDES))
  if unknown:
    raise TypeError(f"from_pretrained: unknown argument(s) {', '.join(unknown)} (one of "
                    f"{', '.join(OVERRIDES)})")
  if int(batch_size) < 1:
    raise ValueError(f"batch_size={batch_size}: must be at least 1")
  if fileio.isdir(path) and is_saved_model(path):
    return _saved_model(path, batch_size, log, overrides)
  found = describe(path, overrides)
  family = families.get(found.family)
  tokenizer = layouts.make_tokenizer(found.family, *_tokenizer_args(found.tokenizer))
  keras_model = _build(found, family)
  max_length = found.max_length or _default_max_length(keras_model.config)
  layouts.check_vocab(keras_model.config, tokenizer, max_length)
  _load_weights(keras_model, found, family)
  model = Model(keras_model, tokenizer, found.family, labels=found.labels,
                regression=found.regression, has_head=found.head == "classifier",
                head=found.head,
                max_length=max_length, batch_size=batch_size, source=str(path),
                kind=found.kind, step=found.step)
  if log:
    log(describe_loaded(model, found))
  return model


def _saved_model(path, batch_size, log, overrides):
  """The pretraining encoder SavedModel (inference/saved_model.py); its tokenizer and rows are
  in its graph, so no override applies."""
  given = sorted(k for k, v in overrides.items() if v is not None)
  if given:
    raise ValueError(f"{path}: a SavedModel carries its tokenizer and row length; "
                     f"{', '.join(given)} cannot apply")
  model = load_saved_model(str(path).rstrip("/"), batch_size)
  if log:
    log(f"inference: loaded xlnet encoder from {path} ({model.kind}): rows of "
        f"{model.max_length} tokens, tokenizer in the graph")
  return model


def describe_loaded(model, found):
  """The one line from_pretrained logs."""
  head = ("regression head" if model.regression else
          f"classifier over {len(model.labels)} labels ({_labels(model.labels)})") \
      if model.has_head else \
      f"tagger over {len(model.labels)} labels ({_labels(model.labels)})" \
      if found.head == "tagger" else \
      f"sentence embedder ({found.head_spec['mode']} pooling)" if found.head == "embedder" \
      else "encoder"
  step = f" at step {found.step}" if found.step is not None else ""
  case = ", uncased" if found.tokenizer.uncased else ""
  return (f"inference: loaded {found.family} {head} from {model.source} ({found.kind}): "
          f"weights {found.weights}{step}; tokenizer {found.tokenizer.path}{case}; rows of up "
          f"to {model.max_length} tokens")


def _labels(labels, shown=6):
  return ", ".join(labels[:shown]) + (", ..." if len(labels) > shown else "")


def _tokenizer_args(source):
  from modeling import tokenizer_files
  if source.kind == tokenizer_files.WORDPIECE:
    return None, source.path, True
  return source.path, None, source.uncased


def _default_max_length(config):
  """MPNet: what its position table holds (positions start after the pad id); XLNet: 512."""
  positions = getattr(config, "max_position_embeddings", None)
  if positions:
    return int(positions) - int(config.pad_token_id) - 1
  return DEFAULT_MAX_LENGTH


def _build(found, family):
  config = found.config if isinstance(found.config, dict) else \
      family.config_from_json(found.config).to_dict()
  run_config = RunConfig(dropout=0.0, dropatt=0.0, **found.run_settings)
  if found.head_spec:
    model = family.with_head(config, run_config, found.head_spec)
  elif found.task_model == "race":
    model = family.race_model(config, run_config, found.summary_type, found.use_proj)
  elif found.task_model == "squad":
    model = family.squad_model(config, run_config, *found.squad_top)
  else:
    model = family.classifier(config, run_config, n_class=max(len(found.labels), 1) if found.head else 2,
                              task_name="task", regression=found.regression,
                              summary_type=found.summary_type, use_proj=found.use_proj)
  return model.ensure_built()


def _load_weights(model, found, family):
  if found.native:       # a fine-tuning run's own checkpoint of this very task model
    checkpoint.load_native_checkpoint(model, found.weights)
    return
  family.initialize(model, found.weights, log=lambda line: None)
  if found.head == "classifier" and hasattr(model, "hf_heads"):
    _load_hf_heads(model, found.weights)


def _load_hf_heads(model, model_dir):
  """The head of a Hugging Face *ForSequenceClassification file into a task model that names
  its head's Hugging Face layers (`hf_heads()`: {name: Dense}); its family's loader reads only
  the encoder."""
  weights = hf_io.read_weights(model_dir)
  for name, layer in model.hf_heads().items():
    for attr, key, transpose in (("kernel", f"{name}.weight", True),
                                 ("bias", f"{name}.bias", False)):
      if attr == "bias" and not layer.use_bias:
        continue
      if key not in weights:
        raise ValueError(f"{hf_io.weights_file(model_dir)}: no {key}")
      value = np.asarray(weights[key], np.float32)
      value = value.T if transpose else value
      var = getattr(layer, attr)
      if tuple(value.shape) != tuple(var.shape):
        raise ValueError(f"{hf_io.weights_file(model_dir)}: {key} has shape "
                         f"{list(value.shape)}, the model {list(var.shape)}")
      var.assign(value)
