"""`RunConfig`: the settings of one run that do not change the weights' shapes (dropout, memory,
attention type, init, recomputation), shared by the model families (XLNet reads all of it; MPNet's
task models keep their dropout in their own config, as Hugging Face does, and take `recompute`
from here as a constructor argument: modeling/families.py, pretraining/mpnet.py).
"""

import dataclasses

_ATTN_TYPES = ("bi", "uni")
_INITS = ("normal", "uniform")


@dataclasses.dataclass
class RunConfig:
  """Settings of one run that do not change the weights' shapes.

  Attributes:
    dropout: dropout on embeddings, attention output, FFN and final output.
    dropatt: dropout on attention probabilities.
    mem_len: tokens of memory cached per layer (0 = no memory returned).
    reuse_len: only the first `reuse_len` tokens of a segment are cached
      (0 = all of it; None, unset: all of it for a model, the records' value for a
      pretraining task, which refuses a set value other than its records').
    bi_data: first half of the batch uses forward relative positions, second
      half the negated ones (batch must be even). None (unset) is False for a model and
      the records' value for a pretraining task (a set value must be the records').
    clamp_len: clip relative positions to [-clamp_len, clamp_len] (-1 = off).
    same_length: (uni only) every query sees the same number of keys.
    attn_type: "bi" (XLNet pretraining and fine-tuning) or "uni" (causal).
    init: "normal" or "uniform" initializer for new weights.
    init_range: half-width of the uniform initializer.
    init_std: standard deviation of the normal initializer.
    recompute: recompute each layer's activations in the backward pass instead of keeping
      them (modeling/recompute.py): less memory, one more forward per layer; same gradients.
  """
  dropout: float = 0.1
  dropatt: float = 0.1
  mem_len: int = 0
  reuse_len: int = None
  bi_data: bool = None
  clamp_len: int = -1
  same_length: bool = False
  attn_type: str = "bi"
  init: str = "normal"
  init_range: float = 0.1
  init_std: float = 0.02
  recompute: bool = False

  def __post_init__(self):
    if self.attn_type not in _ATTN_TYPES:
      raise ValueError(f"RunConfig.attn_type must be one of {_ATTN_TYPES}, got {self.attn_type!r}")
    if self.init not in _INITS:
      raise ValueError(f"RunConfig.init must be one of {_INITS}, got {self.init!r}")
    for key in ("dropout", "dropatt"):
      if not 0.0 <= getattr(self, key) < 1.0:
        raise ValueError(f"RunConfig.{key} must be in [0, 1), got {getattr(self, key)}")
    if self.mem_len < 0 or (self.reuse_len or 0) < 0:
      raise ValueError("RunConfig.mem_len and reuse_len must be >= 0")

  def initializer(self):
    import keras  # local: keep config importable without TensorFlow
    from modeling import initializers
    if self.init == "uniform":
      return initializers.independent(
          keras.initializers.RandomUniform(-self.init_range, self.init_range))
    return initializers.independent(keras.initializers.RandomNormal(stddev=self.init_std))

  @classmethod
  def from_dict(cls, d):
    return cls(**d)

  def to_dict(self):
    return dataclasses.asdict(self)
