"""configs/: the papers' model sizes and the quickstart's, as files this project reads.

Each file must load through the family's reader (modeling/families.py: the same checks as
--model_config_path) and hold the published sizes. The expected numbers are transcribed from
the papers and releases, never read from this project's code:
- XLNet (arXiv 1906.08237 and the release's xlnet_config.json files): Base 12 layers, d_model
  768, 12 heads of 64, d_inner 3072; Large 24 layers, 1024, 16 heads of 64, 4096; SentencePiece
  vocabulary 32000; 116,750,336 and 360,300,800 parameters (counting mask_emb and the LM bias).
- MPNet (arXiv 2004.09297, microsoft/mpnet-base's config.json): 12 layers, hidden 768, 12
  heads, FFN 3072, vocabulary 30527, pad id 1, 514 positions, 32 relative buckets, LayerNorm
  epsilon 1e-5.
Parameter counts are also taken from Hugging Face's PyTorch models built from the same files
(on torch's meta device: no memory), an implementation independent of this one.
"""

import json
import os

import pytest

from modeling import families
from reproduction.pipeline import Pipeline
from reproduction.presets import PRESETS

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")

# (file, family, layers, hidden, heads, inner, vocab): the published sizes
PUBLISHED = [
    ("xlnet-base.json", "xlnet", 12, 768, 12, 3072, 32000),
    ("xlnet-large.json", "xlnet", 24, 1024, 16, 4096, 32000),
    ("mpnet-base.json", "mpnet", 12, 768, 12, 3072, 30527),
]
XLNET_PARAMS = {"xlnet-base.json": 116_750_336, "xlnet-large.json": 360_300_800}


def _sizes(family, config):
  """(layers, hidden, heads, inner, vocab) of a loaded config, by the family's own key names."""
  if family == "xlnet":
    return config.n_layer, config.d_model, config.n_head, config.d_inner, config.n_token
  return (config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
          config.intermediate_size, config.vocab_size)


def _load(name, family):
  return families.get(family).config_from_json(os.path.join(CONFIGS, name))


@pytest.mark.parametrize("name,family,layers,hidden,heads,inner,vocab", PUBLISHED)
def test_published_sizes(name, family, layers, hidden, heads, inner, vocab):
  config = _load(name, family)
  assert _sizes(family, config) == (layers, hidden, heads, inner, vocab)
  if family == "xlnet":
    assert config.d_head == 64 and config.untie_r and config.ff_activation == "gelu"
  else:
    assert (config.pad_token_id, config.max_position_embeddings,
            config.relative_attention_num_buckets, config.layer_norm_eps) == (1, 514, 32, 1e-5)


def _xlnet_params_by_names(n_layer, d_model, n_head, d_head, d_inner, n_token):
  """The release checkpoint's variables (the reference's names table), summed by hand:
  word_embedding [V, D], mask_emb [1, 1, D], per layer q/k/v/r/o [D, H, d], two LayerNorms,
  ff layer_1 [D, I] + [I], layer_2 [I, D] + [D]; r_w/r_r/r_s_bias [L, H, d] and seg_embed
  [L, 2, H, d]; lm_loss/bias [V]."""
  per_layer = (5 * d_model * n_head * d_head + 2 * 2 * d_model + d_model * d_inner + d_inner
               + d_inner * d_model + d_model)
  return (n_token * d_model + d_model + n_layer * per_layer + 5 * n_layer * n_head * d_head
          + n_token)


@pytest.mark.parametrize("name", sorted(XLNET_PARAMS))
def test_xlnet_parameter_count_published(name):
  c = _load(name, "xlnet")
  assert _xlnet_params_by_names(c.n_layer, c.d_model, c.n_head, c.d_head, c.d_inner,
                                c.n_token) == XLNET_PARAMS[name]


def _meta_count(model_fn):
  torch = pytest.importorskip("torch")
  with torch.device("meta"):
    model = model_fn()
  return sum(p.numel() for p in model.parameters())   # tied weights counted once


@pytest.mark.parametrize("name", sorted(XLNET_PARAMS))
def test_xlnet_parameter_count_hugging_face(name):
  from tests.reference_libs import require
  transformers = require("transformers")
  require("torch")
  c = _load(name, "xlnet")
  hf = transformers.XLNetConfig(vocab_size=c.n_token, d_model=c.d_model, n_layer=c.n_layer,
                                n_head=c.n_head, d_inner=c.d_inner, ff_activation="gelu_new")
  # XLNetLMHeadModel: the base model + the LM bias (its output matrix is the tied embedding)
  assert _meta_count(lambda: transformers.XLNetLMHeadModel(hf)) == XLNET_PARAMS[name]


def test_mpnet_base_parameter_count_hugging_face():
  from tests.reference_libs import require
  transformers = require("transformers")
  require("torch")
  with open(os.path.join(CONFIGS, "mpnet-base.json"), encoding="utf-8") as f:
    hf = transformers.MPNetConfig(**json.load(f))
  # by hand: embeddings V*D + positions 514*D + LayerNorm 2D; 12 layers of q/k/v/o (D*D + D)
  # each, 2 LayerNorms, FFN D*I + I + I*D + D; the shared relative bias 32 x heads; pooler D*D+D
  d, i, v = 768, 3072, 30527
  by_hand = (v * d + 514 * d + 2 * d + 12 * (4 * (d * d + d) + 4 * d + d * i + i + i * d + d)
             + 32 * 12 + d * d + d)
  assert by_hand == 109_486_464
  assert _meta_count(lambda: transformers.MPNetModel(hf)) == by_hand


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_quickstart_sizes(preset, tmp_path):
  """configs/{xlnet,mpnet}-PRESET.json hold the sizes the quickstart's preset trains (what it
  writes to OUTPUT_DIR/models/), and load as the scripts load them."""
  p = PRESETS[preset]
  xlnet = _load(f"xlnet-{preset}.json", "xlnet")
  mpnet = _load(f"mpnet-{preset}.json", "mpnet")
  want = (p.n_layer, p.d_model, p.n_head, p.d_inner, p.vocab_size)
  assert _sizes("xlnet", xlnet) == want and _sizes("mpnet", mpnet) == want
  assert xlnet.d_head * xlnet.n_head == p.d_model
  assert mpnet.pad_token_id == 5            # this project's SentencePiece <pad>
  assert (mpnet.max_position_embeddings
          == Pipeline(p, str(tmp_path)).mpnet_max_positions)
  families.get("mpnet").check_rows(mpnet, seq_len=max(p.seq_len, p.cls_seq_len, p.qa_seq_len),
                                   pad_id=5, vocab_size=p.vocab_size)


def test_every_config_file_is_tested():
  names = {n for n in os.listdir(CONFIGS) if n.endswith(".json")}
  tested = {n for n, *_ in PUBLISHED} | {f"{f}-{p}.json" for f in ("xlnet", "mpnet")
                                         for p in ("tiny", "small")}
  assert names == tested
