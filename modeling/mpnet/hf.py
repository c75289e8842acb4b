"""MPNet weights in and out of the Hugging Face layout (transformers' MPNet* classes): the
encoder's names are `encoder.hf_variable_map` (modeling/mpnet/encoder.py), each task model adds
its head's (`model.hf_variable_map()`); this module reads and writes the files.

Positions. transformers' MPNetEmbeddings numbers tokens with padding_idx = 1 hard-coded, whatever
the config's pad_token_id: position = cumsum(ids != 1) * (ids != 1) + 1. This project numbers
them from its config's pad id P (encoder.position_ids_from_input_ids): P + 1, P + 2, ... on the
tokens, P on padding. The two agree for MPNet's WordPiece vocabulary (P = 1). For this project's
SentencePiece models (P = 5, <s> = 1) they do not: on the project's MPNet rows (data_utils/
layouts.py: `<s> A </s>[</s> B </s>]` right padded, for the classifier, RACE and SQuAD alike;
<s> is a SentencePiece control symbol, never produced from text, so id 1 occurs only at index
0) HF gives index 0 (<s>, id 1) position 1 and index i >= 1 position i + 1, where the project
gives index i position i + P + 1: HF's position is the project's minus P on every real token.
So the export writes the position table rolled by -P (HF row p = the project's row p + P; the
project's padding row P lands on HF's unused row 0, its unused rows 0..P-1 at the end), a
permutation: same shape, recorded in config.json as `position_embeddings_shift` = P, which
`load_hf_weights` undoes. HF then gives the project's outputs with its default position ids on
every real token of those rows (padding tokens' own outputs differ, as they are masked out).
Positions past the project's limit (L + P + 1 <= max_position_embeddings, layouts.check_vocab)
hold untrained rows in HF, as in the project.
"""

import numpy as np
import tensorflow as tf

from modeling import hf_io
from modeling.mpnet.encoder import hf_variable_map

HF_PADDING_IDX = 1    # transformers' MPNetEmbeddings.padding_idx (not read from the config)
POSITION_TABLE = "embeddings.position_embeddings.weight"
SHIFT_KEY = "position_embeddings_shift"   # config.json: the roll of the position table
# The vocabularies this project's MPNet models use, told apart by the config's pad_token_id
# (an export is handed the model, not its tokenizer): {pad id: (<s> id, </s> id, position roll)}
VOCABULARIES = {
    1: (0, 2, 0),     # MPNet's released WordPiece vocab.txt (fairseq: <s> 0, <pad> 1, </s> 2)
    5: (1, 2, 5),     # SentencePiece with XLNet's symbols (data_utils/tokenization.py)
}


def special_tokens(config):
  """(config.json's special ids {bos_token_id, eos_token_id, pad_token_id}, position roll) of
  an export of a model with MPNet config `config`.

  The export does not see the tokenizer, so the ids come from the config's pad_token_id
  convention (VOCABULARIES): pad 1 = MPNet's WordPiece vocabulary (<s> 0, </s> 2), pad 5 = this
  project's SentencePiece models (<s> 1, </s> 2). Any other pad id: ValueError (one line), as
  the <s> id, and so Hugging Face's positions (module docstring), would be a guess.
  """
  pad = config.pad_token_id
  if pad not in VOCABULARIES:
    raise ValueError(
        f"pad_token_id={pad} is neither MPNet's WordPiece vocabulary's (1) nor this project's "
        f"SentencePiece models' (5): the ids of <s> / </s> are unknown, and Hugging Face's MPNet "
        f"numbers positions as if id {HF_PADDING_IDX} were padding, so its outputs could not be "
        f"made this model's")
  bos, eos, shift = VOCABULARIES[pad]
  return dict(bos_token_id=bos, eos_token_id=eos, pad_token_id=pad), shift


def architecture(model):
  """The transformers class an export of `model` loads into (the model's `hf_architecture`);
  ValueError (one line) when its layout has none or its pad id has no exact export
  (`special_tokens`). Needs no weights: the scripts call it before training."""
  if model.hf_architecture is None:
    raise ValueError(f"--export_hf_dir: {model.hf_missing}")
  try:
    special_tokens(model.config)
  except ValueError as e:
    raise ValueError(f"--export_hf_dir: {e}") from None
  return model.hf_architecture


def export_hf(model, path, log=print, labels=None):
  """Writes `model` to directory `path` in the Hugging Face layout (config.json +
  model.safetensors, atomically), loadable by its `architecture` class, whose outputs on the
  project's rows with HF's default position ids are the model's (module docstring). Returns
  `path`."""
  arch = architecture(model)
  model.ensure_built()
  save_hf_weights(model.hf_variable_map(), model.config, path, arch,
                  **model.hf_config_keys(labels))
  log(f"exported {arch} (Hugging Face layout) to {path}")
  return path


def load_hf_weights(encoder, model_dir):
  """Loads HF MPNet weights (prefix `mpnet.` tolerated) into `encoder`; returns unused names.
  A position table this module rolled (config.json `position_embeddings_shift`) is rolled
  back, so export then load gives the exported model's weights exactly."""
  weights = hf_io.read_weights(model_dir)
  weights = {k[len("mpnet."):] if k.startswith("mpnet.") else k: v for k, v in weights.items()}
  shift = hf_io.read_config(model_dir).get(SHIFT_KEY, 0)
  if not isinstance(shift, int) or isinstance(shift, bool):
    raise ValueError(f"{model_dir}/config.json: {SHIFT_KEY}={shift!r} is not an integer")
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
    if name == POSITION_TABLE and shift:
      value = np.roll(value, shift, axis=0)
    var.assign(value)
  return sorted(set(weights) - set(mapping))


def save_hf_weights(variable_map, config, model_dir, architecture="MPNetModel", **extra):
  """Writes `config.json` + `model.safetensors` in the Hugging Face layout (atomically).

  variable_map: {state-dict name: (variable, transpose?)}, e.g. hf_variable_map(encoder)
  with names prefixed as the architecture expects; extra: more config.json keys
  (num_labels, ...). Hugging Face's MPNet classes and load_hf_weights read the result.
  The special ids and the position table follow `special_tokens` (ValueError, one line, for
  a pad id it cannot export exactly); pad 1 is written as the weights are.
  """
  ids, shift = special_tokens(config)
  tensors, rolled = {}, False
  for name, (var, transpose) in variable_map.items():
    value = np.asarray(var.numpy(), np.float32)
    value = value.T if transpose else value
    if shift and name in (POSITION_TABLE, f"mpnet.{POSITION_TABLE}"):
      value, rolled = np.roll(value, -shift, axis=0), True
    tensors[name] = value
  data = dict(config.to_dict(), model_type="mpnet", architectures=[architecture], **ids,
              **({SHIFT_KEY: shift} if rolled else {}), **extra)
  return hf_io.write_model_dir(model_dir, tensors, data)
