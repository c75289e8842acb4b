"""MPNet's architecture: the Hugging Face `config.json` keys (`MPNetConfig`), checked as
XLNet's are (modeling/xlnet/config.py): an unknown key (a typo such as `num_hidden_layer` would
otherwise leave a 12-layer default in place), a value out of range, or a file of the other
family is a one-line ValueError naming the file and the key.

Keys transformers writes into every config.json (architectures, dtype, id2label, ...) are
accepted and ignored (`HF_COMMON_KEYS`); MPNet's own are the dataclass fields.
"""

import dataclasses
import difflib

from data_utils import fileio

ACTIVATIONS = ("gelu", "gelu_new", "gelu_tanh", "relu")   # modeling/mpnet/encoder._gelu's
# Keys of transformers' PretrainedConfig (and this project's export) that say nothing about
# MPNet's architecture: read and ignored.
HF_COMMON_KEYS = frozenset((
    "_name_or_path", "architectures", "model_type", "transformers_version", "dtype",
    "torch_dtype", "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id",
    "initializer_range", "id2label", "label2id", "num_labels", "problem_type",
    "finetuning_task", "tie_word_embeddings", "output_attentions", "output_hidden_states",
    "return_dict", "is_encoder_decoder", "is_decoder", "add_cross_attention",
    "chunk_size_feed_forward", "use_cache", "gradient_checkpointing", "torchscript",
    "pruned_heads", "tokenizer_class", "prefix", "task_specific_params", "classifier_dropout",
    "position_embeddings_shift"))
# Keys that only an XLNet config has (release or Hugging Face layout).
XLNET_KEYS = frozenset(("n_layer", "d_model", "n_head", "d_head", "d_inner", "ff_activation",
                        "untie_r", "n_token", "mem_len", "reuse_len", "clamp_len", "attn_type",
                        "bi_data", "same_length", "summary_type", "summary_use_proj"))


@dataclasses.dataclass
class MPNetConfig:
  """Hugging Face `config.json` keys of MPNet (validated on construction)."""
  vocab_size: int = 30527
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 514
  relative_attention_num_buckets: int = 32
  layer_norm_eps: float = 1e-12
  pad_token_id: int = 1

  def __post_init__(self):
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "max_position_embeddings",
                "relative_attention_num_buckets"):
      value = getattr(self, key)
      if not _is_int(value) or value <= 0:
        raise ValueError(f"MPNetConfig.{key} must be a positive integer, got {value!r}")
    if self.hidden_size % self.num_attention_heads:
      raise ValueError(f"MPNetConfig.hidden_size {self.hidden_size} is not a multiple of "
                       f"num_attention_heads {self.num_attention_heads}")
    if self.hidden_act not in ACTIVATIONS:
      raise ValueError(f"MPNetConfig.hidden_act must be one of {', '.join(ACTIVATIONS)}, "
                       f"got {self.hidden_act!r}")
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
      value = getattr(self, key)
      if not _is_number(value) or not 0 <= value < 1:
        raise ValueError(f"MPNetConfig.{key} must be in [0, 1), got {value!r}")
    if not _is_number(self.layer_norm_eps) or self.layer_norm_eps <= 0:
      raise ValueError(f"MPNetConfig.layer_norm_eps must be positive, got "
                       f"{self.layer_norm_eps!r}")
    if not _is_int(self.pad_token_id) or not 0 <= self.pad_token_id < self.vocab_size:
      raise ValueError(f"MPNetConfig.pad_token_id must be an id in [0, vocab_size="
                       f"{self.vocab_size}), got {self.pad_token_id!r}")
    if self.pad_token_id + 1 >= self.max_position_embeddings:
      raise ValueError(f"MPNetConfig.max_position_embeddings={self.max_position_embeddings} "
                       f"leaves no position for a token (positions start at pad_token_id + 1 "
                       f"= {self.pad_token_id + 1})")

  def positions_needed(self, seq_len):
    """Rows of the position table a row of `seq_len` tokens reads: positions are numbered
    pad + 1, ..., pad + seq_len (Hugging Face's / fairseq's numbering)."""
    return seq_len + self.pad_token_id + 1

  def check_seq_len(self, seq_len, flag="--max_seq_length", source=None):
    """ValueError (one line) when rows of `seq_len` tokens need more positions than the table
    holds (under XLA the lookup would clamp silently; without it, it crashes)."""
    need = self.positions_needed(seq_len)
    if need > self.max_position_embeddings:
      where = f"{source}: " if source else ""
      raise ValueError(
          f"{where}max_position_embeddings={self.max_position_embeddings} is too small for "
          f"{flag}={seq_len}: rows need {need} positions (seq_len + pad_token_id "
          f"{self.pad_token_id} + 1); raise it to {need} or shorten the rows")

  @classmethod
  def from_dict(cls, data, source="config"):
    """From a config.json dict; ValueError (one line, without `source`) for a file of the other
    family, an unknown key or a value out of range."""
    if not isinstance(data, dict):
      raise ValueError("not a JSON object")
    model_type = data.get("model_type", "mpnet")
    if model_type != "mpnet":
      raise ValueError(f"a Hugging Face {model_type!r} config, not MPNet"
                       + ("; pass --model_type=xlnet" if model_type == "xlnet" else ""))
    xlnet = sorted(set(data) & XLNET_KEYS)
    if xlnet:
      raise ValueError(f"looks like an XLNet config ({', '.join(xlnet[:4])}), not MPNet's "
                       "config.json: pass --model_type=xlnet, or an MPNet config")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known - HF_COMMON_KEYS)
    if unknown:
      hints = [f"{k} (did you mean {m[0]}?)" if (m := difflib.get_close_matches(
          k, sorted(known), n=1)) else k for k in unknown]
      raise ValueError(f"unknown MPNet config key{'s' if len(unknown) > 1 else ''}: "
                       f"{', '.join(hints)}")
    return cls(**{k: v for k, v in data.items() if k in known})

  @classmethod
  def from_json(cls, path):
    """Reads a Hugging Face MPNet config.json (a release's or one this project wrote)."""
    data = fileio.read_json(path, "model config file")
    try:
      return cls.from_dict(data)
    except (TypeError, ValueError) as e:
      raise ValueError(f"{path}: {e}") from None

  def to_dict(self):
    return dataclasses.asdict(self)


def _is_int(value):
  return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
  return isinstance(value, (int, float)) and not isinstance(value, bool)
