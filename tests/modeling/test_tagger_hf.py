"""The token tagger (modeling/heads.TokenTagger under families.with_head) against transformers'
XLNetForTokenClassification / MPNetForTokenClassification, for both families:

1. a tiny transformers tagger with random weights, saved, loaded into ours through the family's
   `initialize` (what --init_checkpoint runs) gives HF's logits on the tagging rows
   (finetuning/tagging_features.encode_words) of uneven sentences, at every real token;
2. ours, randomised and written by `families.export_hf` (what --export_hf_dir runs), loads into
   transformers' class with no missing or unexpected keys and gives our logits.

python -m pytest tests/modeling/test_tagger_hf.py -q
"""

import numpy as np
import pytest

from data_utils import layouts
from finetuning import tagging_features
from modeling import families
from modeling.mpnet.config import MPNetConfig
from modeling.run_config import RunConfig
from tests import hf_dirs
from tests.reference_libs import require

torch = require("torch")
transformers = require("transformers")

LABELS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
SENTENCES = [["A", "much", "longer", "sentence,", "with", "many", "more", "words", "than"],
             ["Mid", "text", "\x07", "x"], ["yes"]]
TOL = 1e-5
QUIET = lambda line: None


def _tagger(family, config):
  spec = {"type": "token_tagger", "n_class": len(LABELS), "labels": list(LABELS)}
  return families.get(family).with_head(config, RunConfig(dropout=0.0, dropatt=0.0),
                                        spec).ensure_built()


def _rows(tok, family, max_len=16):
  """The tagging rows of SENTENCES (uneven padding on the family's side)."""
  rows = [r for words in SENTENCES
          for r in tagging_features.encode_words(tok, words, max_len, family)]
  batch = {k: np.stack([r[k] for r in rows]) for k in ("input_ids", "seg_ids", "input_mask")}
  assert len(set(batch["input_mask"].sum(1).tolist())) == len(rows)    # all lengths differ
  return batch


def _hf_logits(hf, rows, family):
  """transformers' logits on our rows (attention_mask 1 on real tokens; XLNet's segments)."""
  kwargs = {"attention_mask": torch.tensor(1.0 - rows["input_mask"])}
  if family == "xlnet":
    kwargs["token_type_ids"] = torch.tensor(rows["seg_ids"]).long()
  with torch.no_grad():
    return hf(torch.tensor(rows["input_ids"]).long(), **kwargs).logits.numpy()


def _randomized(model, seed):
  rng = np.random.default_rng(seed)
  for v in model.weights:
    v.assign(rng.normal(0, 0.2, v.shape).astype(np.float32))
  return model


@pytest.fixture(scope="module")
def hf_models(tmp_path_factory):
  """{family: (transformers' tagger, its directory, our tokenizer)}."""
  d = tmp_path_factory.mktemp("tagger_hf")
  sp = hf_dirs.train_sp_model(d)
  xlnet = hf_dirs.xlnet_dir(d / "xlnet", sp, "XLNetForTokenClassification", labels=LABELS)
  mpnet = hf_dirs.mpnet_dir(d / "mpnet", "MPNetForTokenClassification", labels=LABELS)
  sp_tok = layouts.make_tokenizer("xlnet", sp_model=sp, uncased=True)
  return {"xlnet": (xlnet, d / "xlnet", sp_tok), "mpnet-sp": (None, None, sp_tok),
          "mpnet": (mpnet, d / "mpnet", layouts.make_tokenizer(
              "mpnet", vocab_file=str(d / "mpnet" / "vocab.txt")))}


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_a_hugging_face_tagger_loaded_into_ours_gives_its_logits(hf_models, family):
  hf, path, tok = hf_models[family]
  config = families.get(family).config_from_json(str(path / "config.json"))
  ours = _tagger(family, config)
  families.get(family).initialize(ours, str(path), QUIET)
  np.testing.assert_array_equal(ours.head.classifier.kernel.numpy(),
                                hf.classifier.weight.detach().numpy().T)
  rows = _rows(tok, family)
  real = rows["input_mask"] == 0
  got = ours(rows).numpy()
  np.testing.assert_allclose(got[real], _hf_logits(hf, rows, family)[real], rtol=TOL, atol=TOL)


@pytest.mark.parametrize("family", ["xlnet", "mpnet", "mpnet-sp"])
def test_our_tagger_exported_loads_into_hugging_face_with_our_logits(hf_models, family,
                                                                     tmp_path):
  """mpnet-sp: an MPNet tagger on this project's SentencePiece rows (pad 5, <s> 1), whose
  export rolls the position table (modeling/mpnet/hf.py): every real token's logits match."""
  _, path, tok = hf_models[family]
  if family == "mpnet-sp":
    family = "mpnet"
    config = MPNetConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2,
                         num_attention_heads=2, intermediate_size=32,
                         max_position_embeddings=40, pad_token_id=5, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
  else:
    config = families.get(family).config_from_json(str(path / "config.json"))
  ours = _randomized(_tagger(family, config), seed=7)
  out = tmp_path / "export"
  families.export_hf(ours, str(out), QUIET)
  cls = getattr(transformers, families.hf_architecture(ours))
  hf, info = cls.from_pretrained(str(out), output_loading_info=True)
  hf.eval()
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  assert [hf.config.id2label[k] for k in range(len(LABELS))] == list(LABELS)
  rows = _rows(tok, family)
  real = rows["input_mask"] == 0
  np.testing.assert_allclose(_hf_logits(hf, rows, family)[real], ours(rows).numpy()[real],
                             rtol=TOL, atol=TOL)
