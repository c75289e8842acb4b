"""XLNet's architecture: `XLNetConfig` reads/writes the released `xlnet_config.json` (keys:
n_layer, d_model, n_head, d_head, d_inner, ff_activation, untie_r, n_token). What may change
between runs of the same weights (dropout, memory, attention type, init) is
modeling/run_config.py's `RunConfig`.
"""

import dataclasses
import difflib
import json

from data_utils import fileio

_ACTIVATIONS = ("gelu", "gelu_erf", "relu")
# Hugging Face XLNet's ff_activation -> ours (HF's "gelu" is the erf form, the release's the tanh
# approximation, which HF calls "gelu_new"), and ours -> HF's for export.
HF_ACTIVATIONS = {"gelu": "gelu_erf", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                  "relu": "relu"}
TO_HF_ACTIVATIONS = {"gelu": "gelu_new", "gelu_erf": "gelu", "relu": "relu"}
# transformers' XLNetConfig defaults for the keys we read (used when config.json omits one).
_HF_DEFAULTS = dict(vocab_size=32000, d_model=1024, n_layer=24, n_head=16, d_inner=4096,
                    ff_activation="gelu", layer_norm_eps=1e-12)
# Every key transformers' XLNetConfig writes (and this project's export adds): any other key of
# a Hugging Face XLNet config.json is a typo or another model's, refused.
HF_KEYS = frozenset((
    "_name_or_path", "architectures", "attn_type", "bi_data", "bos_token_id",
    "chunk_size_feed_forward", "clamp_len", "d_head", "d_inner", "d_model", "dropout", "dtype",
    "torch_dtype", "end_n_top", "eos_token_id", "ff_activation", "id2label", "initializer_range",
    "is_encoder_decoder", "label2id", "layer_norm_eps", "mem_len", "model_type", "n_head",
    "n_layer", "output_attentions", "output_hidden_states", "pad_token_id", "problem_type",
    "return_dict", "reuse_len", "same_length", "start_n_top", "summary_activation",
    "summary_last_dropout", "summary_type", "summary_use_proj", "tie_word_embeddings",
    "transformers_version", "use_mems_eval", "use_mems_train", "vocab_size", "num_labels",
    "untie_r", "finetuning_task", "sep_token_id", "cls_token_id", "use_cache", "task_specific_params",
    "tokenizer_class", "prefix", "is_decoder", "add_cross_attention", "torchscript",
    "pruned_heads", "gradient_checkpointing"))
# Keys only an MPNet (BERT-style) config has: such a file given as XLNet's is named as MPNet's.
MPNET_KEYS = frozenset(("hidden_size", "num_hidden_layers", "num_attention_heads",
                        "intermediate_size", "max_position_embeddings",
                        "relative_attention_num_buckets", "hidden_act",
                        "position_embeddings_shift"))


def _family_hint(keys):
  """ValueError when `keys` are an MPNet config's (the other family's file)."""
  mpnet = sorted(set(keys) & MPNET_KEYS)
  if mpnet:
    raise ValueError(f"looks like an MPNet config ({', '.join(mpnet[:4])}), not XLNet's: pass "
                     "--model_type=mpnet (or --objective=mpnet), or an XLNet config")


def _unknown(keys, known):
  """'name (did you mean ...?)' for each key of `keys` not in `known`."""
  return [f"{k} (did you mean {m[0]}?)" if (m := difflib.get_close_matches(k, sorted(known), n=1))
          else k for k in sorted(set(keys) - set(known))]


@dataclasses.dataclass
class XLNetConfig:
  """Architecture of an XLNet model, with the release's key names.

  Attributes:
    n_layer: number of Transformer-XL layers.
    d_model: hidden size D.
    n_head: attention heads H.
    d_head: size of one head d (need not be D / H).
    d_inner: feed-forward inner size I.
    ff_activation: "gelu" (tanh approximation, as released), "gelu_erf" (the exact
      erf form: Hugging Face's "gelu") or "relu".
    untie_r: per-layer relative biases ([n_layer, H, d]) instead of shared.
    n_token: vocabulary size V.
  """
  n_layer: int
  d_model: int
  n_head: int
  d_head: int
  d_inner: int
  ff_activation: str = "gelu"
  untie_r: bool = True
  n_token: int = 32000

  def __post_init__(self):
    for key in ("n_layer", "d_model", "n_head", "d_head", "d_inner", "n_token"):
      value = getattr(self, key)
      if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"XLNetConfig.{key} must be a positive integer, got {value!r}")
    if self.ff_activation not in _ACTIVATIONS:
      raise ValueError(f"XLNetConfig.ff_activation must be one of {_ACTIVATIONS}, "
                       f"got {self.ff_activation!r}")
    if self.d_model % 2:
      raise ValueError(f"XLNetConfig.d_model must be even (sin/cos halves), got {self.d_model}")

  @classmethod
  def from_dict(cls, d):
    if not isinstance(d, dict):
      raise ValueError("not a JSON object")
    _family_hint(d)
    unknown = _unknown(d, {f.name for f in dataclasses.fields(cls)})
    if unknown:
      raise ValueError(f"unknown XLNetConfig keys: {', '.join(unknown)}")
    return cls(**d)

  @classmethod
  def from_hf_dict(cls, d):
    """From a Hugging Face XLNet `config.json` dict: vocab_size -> n_token, d_head =
    d_model // n_head, ff_activation by HF_ACTIVATIONS, untie_r True (HF's XLNet always holds
    per-layer relative biases, whatever its untie_r says)."""
    if d.get("model_type", "xlnet") != "xlnet":
      raise ValueError(f"a Hugging Face {d['model_type']!r} config, not XLNet"
                       + ("; pass --model_type=mpnet" if d["model_type"] == "mpnet" else ""))
    _family_hint(d)
    unknown = _unknown(d, HF_KEYS)
    if unknown:
      raise ValueError(f"unknown Hugging Face XLNet config keys: {', '.join(unknown)}")
    d = {**_HF_DEFAULTS, **d}
    if d["ff_activation"] not in HF_ACTIVATIONS:
      raise ValueError(f"ff_activation {d['ff_activation']!r} is not supported "
                       f"(one of {', '.join(HF_ACTIVATIONS)})")
    if abs(float(d["layer_norm_eps"]) - 1e-12) > 1e-15:
      raise ValueError(f"layer_norm_eps {d['layer_norm_eps']} is not supported (only 1e-12)")
    n_head, d_model = d["n_head"], d["d_model"]
    if not isinstance(n_head, int) or n_head <= 0 or d_model % n_head:
      raise ValueError(f"d_model {d_model} is not a multiple of n_head {n_head}")
    if d.get("d_head") not in (None, d_model // n_head):
      raise ValueError(f"d_head {d['d_head']} is not d_model // n_head = {d_model // n_head}")
    return cls(n_layer=d["n_layer"], d_model=d_model, n_head=n_head, d_head=d_model // n_head,
               d_inner=d["d_inner"], ff_activation=HF_ACTIVATIONS[d["ff_activation"]],
               untie_r=True, n_token=d["vocab_size"])

  @staticmethod
  def is_hf_dict(d):
    """A Hugging Face config.json (model_type or vocab_size), not a release-style one."""
    return isinstance(d, dict) and ("model_type" in d or "vocab_size" in d)

  @classmethod
  def from_json(cls, path):
    """Reads a released `xlnet_config.json` (or one written by `to_json`), or a Hugging Face
    XLNet `config.json` (see from_hf_dict)."""
    data = fileio.read_json(path, "model config file")
    try:
      return cls.from_hf_dict(data) if cls.is_hf_dict(data) else cls.from_dict(data)
    except (TypeError, ValueError, KeyError) as e:
      raise ValueError(f"{path}: {e}") from None

  def to_dict(self):
    return dataclasses.asdict(self)

  def to_json(self, path=None):
    """Returns the JSON text; also writes it to `path` when given."""
    text = json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
    if path is not None:
      fileio.write_atomic(path, text)
    return text


# The released model sizes.
BASE = dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072)
LARGE = dict(n_layer=24, d_model=1024, n_head=16, d_head=64, d_inner=4096)
