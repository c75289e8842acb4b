"""Every model config is checked at the start of every path, both families alike: unknown keys,
ranges, the other family's file, positions against the longest row, the pad id against the
tokenizer; each a one-line ValueError naming the file and the key."""

import json
import types

import pytest

from modeling import families
from modeling import flags as model_flags
from modeling.mpnet.config import MPNetConfig
from modeling.xlnet.config import XLNetConfig

MPNET = dict(model_type="mpnet", vocab_size=40, hidden_size=16, num_hidden_layers=2,
             num_attention_heads=2, intermediate_size=32, max_position_embeddings=40,
             pad_token_id=5)
XLNET = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=40)


def _write(tmp_path, data, name="config.json"):
  path = tmp_path / name
  path.write_text(json.dumps(data))
  return str(path)


def _one_line(excinfo, *needles):
  message = str(excinfo.value)
  assert "\n" not in message, message
  for needle in needles:
    assert needle in message, message
  return message


def test_mpnet_unknown_key_is_named_with_the_file(tmp_path):
  """A typo (`num_hidden_layer`) used to be ignored: a 12-layer default model was built."""
  path = _write(tmp_path, dict(MPNET, num_hidden_layer=2))
  with pytest.raises(ValueError) as e:
    families.get("mpnet").config_from_json(path)
  _one_line(e, path, "num_hidden_layer", "did you mean num_hidden_layers?")


def test_mpnet_release_and_export_keys_are_accepted(tmp_path):
  """transformers' own keys (architectures, dtype, id2label, ...) are not MPNet's architecture:
  a released config.json and this project's export load."""
  release = dict(MPNET, architectures=["MPNetForMaskedLM"], bos_token_id=0, eos_token_id=2,
                 initializer_range=0.02, layer_norm_eps=1e-5, transformers_version="4.0",
                 dtype="float32", position_embeddings_shift=5, num_labels=2,
                 id2label={"0": "a", "1": "b"}, label2id={"a": 0, "b": 1})
  config = families.get("mpnet").config_from_json(_write(tmp_path, release))
  assert (config.num_hidden_layers, config.pad_token_id) == (2, 5)


@pytest.mark.parametrize("key,value,needle", [
    ("num_attention_heads", 3, "not a multiple of num_attention_heads"),
    ("hidden_size", 0, "hidden_size must be a positive integer"),
    ("num_hidden_layers", 1.5, "num_hidden_layers must be a positive integer"),
    ("hidden_dropout_prob", 1.0, "hidden_dropout_prob must be in [0, 1)"),
    ("attention_probs_dropout_prob", -0.1, "attention_probs_dropout_prob must be in [0, 1)"),
    ("hidden_act", "swish", "hidden_act must be one of"),    # used to run as relu
    ("pad_token_id", 40, "pad_token_id must be an id in [0, vocab_size=40)"),
    ("layer_norm_eps", 0, "layer_norm_eps must be positive"),
])
def test_mpnet_ranges(tmp_path, key, value, needle):
  path = _write(tmp_path, dict(MPNET, **{key: value}))
  with pytest.raises(ValueError) as e:
    families.get("mpnet").config_from_json(path)
  _one_line(e, path, needle)


@pytest.mark.parametrize("data,family,needle", [
    (XLNET, "mpnet", "looks like an XLNet config"),
    (dict(model_type="xlnet", vocab_size=40, d_model=16, n_layer=2, n_head=2, d_inner=32),
     "mpnet", "--model_type=xlnet"),
    (MPNET, "xlnet", "--model_type=mpnet"),
    ({k: v for k, v in MPNET.items() if k != "model_type"}, "xlnet",
     "looks like an MPNet config"),
    (dict(XLNET, n_layers=2), "xlnet", "n_layers (did you mean n_layer?)"),
    (dict(model_type="xlnet", vocab_size=40, d_model=16, n_layer=2, n_head=2, d_inner=32,
          n_heads=2), "xlnet", "n_heads (did you mean n_head?)"),
])
def test_the_other_familys_file_and_typos(tmp_path, data, family, needle):
  path = _write(tmp_path, data)
  with pytest.raises(ValueError) as e:
    families.get(family).config_from_json(path)
  _one_line(e, path, needle)


def test_fine_tuning_positions_against_max_seq_length(tmp_path):
  """max_position_embeddings below max_seq_length + pad + 1 (Hugging Face's numbering) is
  refused when the scripts read the config (under XLA the lookup clamped silently)."""
  path = _write(tmp_path, dict(MPNET, max_position_embeddings=37))
  flags = types.SimpleNamespace(model_config_path=path, model_type="mpnet", max_seq_length=32)
  with pytest.raises(ValueError) as e:
    model_flags.model_config_from_flags(flags)
  _one_line(e, path, "max_position_embeddings=37", "--max_seq_length=32", "38 positions")
  flags.max_seq_length = 31              # 31 + 5 + 1 = 37
  assert model_flags.model_config_from_flags(flags).max_position_embeddings == 37
  xlnet = types.SimpleNamespace(model_config_path=_write(tmp_path, XLNET, "x.json"),
                                model_type="xlnet", max_seq_length=4096)   # relative positions
  assert model_flags.model_config_from_flags(xlnet) == XLNetConfig(**XLNET)


def _pretrain_task(model_config, seq_len=16, record_dir="records-not-read"):
  from modeling.run_config import RunConfig
  from pretraining.task import PretrainConfig, PretrainTask
  config = PretrainConfig(record_dir=record_dir, seq_len=seq_len, reuse_len=8, num_predict=4,
                          bsz_per_host=2, objective="mpnet", bi_data=False)
  return PretrainTask(config, model_config, RunConfig())


def test_mpnet_pretraining_pad_and_positions_before_any_record_is_read():
  """Records are SentencePiece (<pad> = 5): the default pad_token_id=1 (<s>) used to pretrain,
  and fine-tuning then numbered every position differently."""
  with pytest.raises(ValueError) as e:
    _pretrain_task(MPNetConfig.from_dict(dict(MPNET, pad_token_id=1)))
  _one_line(e, "pad_token_id=1", "pads with id 5", '"pad_token_id": 5')
  with pytest.raises(ValueError) as e:
    _pretrain_task(MPNetConfig.from_dict(dict(MPNET, max_position_embeddings=21)))
  _one_line(e, "max_position_embeddings=21", "--seq_len=16", "22 positions")


def test_pad_id_against_the_tokenizer():
  family = families.get("mpnet")
  config = MPNetConfig.from_dict(MPNET)
  family.check_rows(config, 16, pad_id=5, vocab_size=40)
  with pytest.raises(ValueError, match=r"^pad_token_id=5 but the tokenizer pads with id 1"):
    family.check_rows(config, 16, pad_id=1)
  with pytest.raises(ValueError, match=r"vocab_size=40 but the tokenizer has 41 tokens"):
    family.check_rows(config, 16, vocab_size=41)
  with pytest.raises(ValueError, match=r"n_token=40 but the tokenizer has 41 tokens"):
    families.get("xlnet").check_rows(XLNetConfig(**XLNET), 16, vocab_size=41)
