"""--export_st_dir: a sentence embedder (a family's encoder under modeling/heads.SentencePooler,
built by `families.get(model_type).with_head`) in the layout sentence-transformers loads,
`SentenceTransformer(path)`:

  config.json + model.safetensors   transformers' XLNetModel / MPNetModel (families.export_hf:
                                    the pooler has no weights, so the bare encoder's names)
  tokenizer files                   the model's tokenizer (modeling/tokenizer_files.py)
  modules.json                      Transformer (at the root), Pooling (1_Pooling), Normalize
                                    (2_Normalize)
  sentence_bert_config.json         {"max_seq_length": --max_seq_length, "do_lower_case": false}
  1_Pooling/config.json             word_embedding_dimension and the pooling_mode_* switches
                                    (mean -> mean_tokens, first -> cls_token, last -> lasttoken)
  2_Normalize/config.json           {} (the module has no settings; only when the pooler
                                    normalises)

This is the layout sentence-transformers has written since version 2 (module types
`sentence_transformers.models.*`); later versions read it too. Its pooling is the model's
(modeling/pooling.py: sentence-transformers' "cls" and "lasttoken" read the first and last real
token, so both padding sides pool alike), so SentenceTransformer(path).encode gives the
embeddings of this project's model.
"""

import json

from data_utils import fileio
from data_utils import outputs
from modeling import families
from modeling import pooling

MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize",
     "type": "sentence_transformers.models.Normalize"},
]
POOLING_KEYS = {"mean": "pooling_mode_mean_tokens", "first": "pooling_mode_cls_token",
                "last": "pooling_mode_lasttoken"}
ALL_POOLING_KEYS = ("pooling_mode_cls_token", "pooling_mode_mean_tokens",
                    "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                    "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


def check_dir(path, flag="export_st_dir"):
  """PATH follows the output rule (data_utils/outputs.py): absent, empty or an earlier export of
  this kind; else a one-line ValueError naming FLAG. Call before any work."""
  outputs.check_dir(path, flag, outputs.HF)


def pooling_config(mode, hidden):
  config = {"word_embedding_dimension": int(hidden)}
  config.update({key: key == POOLING_KEYS[pooling.check_mode(mode)] for key in ALL_POOLING_KEYS})
  config["include_prompt"] = True
  return config


def pooler(model):
  """The SentencePooler head of `model`; a one-line ValueError for a model of another head."""
  head = getattr(model, "head", None)
  if getattr(head, "head_type", None) != "sentence_pooler":
    raise ValueError(f"--export_st_dir: {type(model).__name__} is not a sentence embedder (a "
                     "family's model with the sentence_pooler head)")
  return head


def export(model, path, tokenizer, max_seq_length, log=print):
  """Writes `model` (a family's encoder under the sentence_pooler head: its mode and
  normalisation, its config's hidden size) and its tokenizer (a modeling/tokenizer_files.Source;
  required: sentence-transformers tokenizes) to directory PATH. Returns PATH."""
  head = pooler(model)
  if tokenizer is None:
    raise ValueError("--export_st_dir needs the model's tokenizer (--sp_model / --vocab_file)")
  check_dir(path)
  families.export_hf(model, path, log, tokenizer=tokenizer)
  config = model.config
  hidden = getattr(config, "d_model", None) or config.hidden_size
  modules = MODULES if head.normalize else MODULES[:2]
  files = {"modules.json": modules,
           "sentence_bert_config.json": {"max_seq_length": int(max_seq_length),
                                         "do_lower_case": False},
           "1_Pooling/config.json": pooling_config(head.mode, hidden)}
  if head.normalize:
    files["2_Normalize/config.json"] = {}
  for name, data in files.items():
    fileio.write_atomic(fileio.join(path, name), json.dumps(data, indent=2) + "\n")
  log(f"exported a sentence-transformers model ({head.mode} pooling"
      f"{', normalized' if head.normalize else ''}, {max_seq_length} tokens) to {path}")
  return path
