"""Model and run configurations.

`XLNetConfig` holds the architecture and reads/writes the released
`xlnet_config.json` (keys: n_layer, d_model, n_head, d_head, d_inner,
ff_activation, untie_r, n_token). `RunConfig` holds everything that may change
between runs of the same weights (dropout, memory, attention type, init).
"""

import dataclasses
import json

from data_utils import fileio

_ACTIVATIONS = ("gelu", "relu")
_ATTN_TYPES = ("bi", "uni")
_INITS = ("normal", "uniform")


@dataclasses.dataclass
class XLNetConfig:
  """Architecture of an XLNet model, with the release's key names.

  Attributes:
    n_layer: number of Transformer-XL layers.
    d_model: hidden size D.
    n_head: attention heads H.
    d_head: size of one head d (need not be D / H).
    d_inner: feed-forward inner size I.
    ff_activation: "gelu" (tanh approximation, as released) or "relu".
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
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
      raise ValueError(f"unknown XLNetConfig keys: {', '.join(unknown)}")
    return cls(**d)

  @classmethod
  def from_json(cls, path):
    """Reads a released `xlnet_config.json` (or one written by `to_json`)."""
    try:
      data = json.loads(fileio.read_text(path))
    except FileNotFoundError:
      raise FileNotFoundError(f"{path}: model config file not found") from None
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None
    try:
      return cls.from_dict(data)
    except (TypeError, ValueError) as e:
      raise ValueError(f"{path}: {e}") from None

  def to_dict(self):
    return dataclasses.asdict(self)

  def to_json(self, path=None):
    """Returns the JSON text; also writes it to `path` when given."""
    text = json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
    if path is not None:
      fileio.write_atomic(path, text)
    return text


@dataclasses.dataclass
class RunConfig:
  """Settings of one run that do not change the weights' shapes.

  Attributes:
    dropout: dropout on embeddings, attention output, FFN and final output.
    dropatt: dropout on attention probabilities.
    mem_len: tokens of memory cached per layer (0 = no memory returned).
    reuse_len: only the first `reuse_len` tokens of a segment are cached
      (0 = all of it).
    bi_data: first half of the batch uses forward relative positions, second
      half the negated ones (batch must be even).
    clamp_len: clip relative positions to [-clamp_len, clamp_len] (-1 = off).
    same_length: (uni only) every query sees the same number of keys.
    attn_type: "bi" (XLNet pretraining and fine-tuning) or "uni" (causal).
    init: "normal" or "uniform" initializer for new weights.
    init_range: half-width of the uniform initializer.
    init_std: standard deviation of the normal initializer.
  """
  dropout: float = 0.1
  dropatt: float = 0.1
  mem_len: int = 0
  reuse_len: int = 0
  bi_data: bool = False
  clamp_len: int = -1
  same_length: bool = False
  attn_type: str = "bi"
  init: str = "normal"
  init_range: float = 0.1
  init_std: float = 0.02

  def __post_init__(self):
    if self.attn_type not in _ATTN_TYPES:
      raise ValueError(f"RunConfig.attn_type must be one of {_ATTN_TYPES}, got {self.attn_type!r}")
    if self.init not in _INITS:
      raise ValueError(f"RunConfig.init must be one of {_INITS}, got {self.init!r}")
    for key in ("dropout", "dropatt"):
      if not 0.0 <= getattr(self, key) < 1.0:
        raise ValueError(f"RunConfig.{key} must be in [0, 1), got {getattr(self, key)}")
    if self.mem_len < 0 or self.reuse_len < 0:
      raise ValueError("RunConfig.mem_len and reuse_len must be >= 0")

  def initializer(self):
    import keras  # local: keep config importable without TensorFlow
    if self.init == "uniform":
      return keras.initializers.RandomUniform(-self.init_range, self.init_range)
    return keras.initializers.RandomNormal(stddev=self.init_std)

  @classmethod
  def from_dict(cls, d):
    return cls(**d)

  def to_dict(self):
    return dataclasses.asdict(self)


# The released model sizes.
BASE = dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072)
LARGE = dict(n_layer=24, d_model=1024, n_head=16, d_head=64, d_inner=4096)
