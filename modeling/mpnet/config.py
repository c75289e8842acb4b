"""MPNet's architecture: the Hugging Face `config.json` keys (`MPNetConfig`), read and written
as Hugging Face does (unknown keys ignored)."""

import dataclasses
import json

from data_utils import fileio


@dataclasses.dataclass
class MPNetConfig:
  """Hugging Face `config.json` keys of MPNet."""
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

  @classmethod
  def from_json(cls, path):
    data = json.loads(fileio.read_text(path))
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in known})

  def to_dict(self):
    return dataclasses.asdict(self)
