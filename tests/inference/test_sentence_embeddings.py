"""Sentence embeddings through the Python API equal sentence-transformers' on the same tiny
Hugging Face directories (an XLNet, left padded; an MPNet, right padded): `SentenceTransformer`
of (Transformer(dir), Pooling(mode), Normalize()) `.encode` against `inference.from_pretrained(dir)
.embed(texts, mode)`, for mean / first ("cls") / last ("lasttoken") pooling, texts of uneven
lengths (one piece; unknown words), to 1e-5. The XLNet directory's segment weights are made
large, so that rows read in two segments (the classifier's) would not pass."""

import numpy as np
import pytest

pytestmark = pytest.mark.slow   # builds and runs tiny HF models on both sides

import inference
from modeling import pooling
from tests import hf_dirs
from tests.hf_dirs import TEXTS
from tests.reference_libs import require

torch = require("torch")
require("transformers")
require("sentence_transformers")
from sentence_transformers import SentenceTransformer  # noqa: E402
from sentence_transformers.sentence_transformer import modules as st_modules  # noqa: E402

TOL = 1e-5
HIDDEN = 16                     # the tiny directories' d_model / hidden_size
# uneven lengths, a text of one word, words the vocabularies do not hold
SENTENCES = TEXTS + ["Unknown zebra words here", "Mid length text"]
CUT = 8                         # a max_length that cuts the longest texts


@pytest.fixture(scope="module")
def directories(tmp_path_factory):
  root = tmp_path_factory.mktemp("hf")
  sp_model = hf_dirs.train_sp_model(tmp_path_factory.mktemp("sp"))
  xlnet = hf_dirs.xlnet_dir(root / "xlnet", sp_model, "XLNetModel")
  with torch.no_grad():       # a trained model's segment term, not a random init's 0.02
    for layer in xlnet.layer:
      layer.rel_attn.seg_embed.mul_(50.0)
      layer.rel_attn.r_s_bias.add_(1.0)
  xlnet.save_pretrained(str(root / "xlnet"), safe_serialization=True)
  hf_dirs.mpnet_dir(root / "mpnet", "MPNetModel")
  # batch_size 2: the call's rows, padded to its longest, run two at a time
  return {family: (str(root / family), inference.from_pretrained(str(root / family),
                                                                  batch_size=2, log=None))
          for family in ("xlnet", "mpnet")}


def _reference(directory, mode, max_seq_length=None):
  transformer = st_modules.Transformer(directory, max_seq_length=max_seq_length)
  return SentenceTransformer(modules=[transformer, st_modules.Pooling(HIDDEN, mode),
                                      st_modules.Normalize()], device="cpu")


def _close(ours, reference, what):
  err = float(np.max(np.abs(np.asarray(ours, np.float64) - np.asarray(reference, np.float64))))
  assert err < TOL, f"{what}: max difference {err:.3g}"


def _ours(model, mode, max_length=None):
  return model.embed(SENTENCES, mode, max_length=max_length), \
      model.encode(SENTENCES, max_length=max_length)


def _same_tokens(reference, out, family):
  """sentence-transformers' ids on its real tokens are ours, in the same place at each row's
  end (XLNet) or start (MPNet)."""
  features = reference.preprocess(SENTENCES)
  ids, real = features["input_ids"].numpy(), features["attention_mask"].numpy() == 1
  ours_real = out["input_mask"] == 0
  assert [list(r[m]) for r, m in zip(ids, real)] == \
      [list(r[m]) for r, m in zip(out["input_ids"], ours_real)], family
  padded_left = family == "xlnet"
  for m in (real, ours_real):
    assert (m[:, -1] if padded_left else m[:, 0]).all(), family
  assert len(set(ours_real.sum(1))) >= 4 and ours_real.sum(1).min() <= 3


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_embeddings_equal_sentence_transformers(directories, family):
  directory, model = directories[family]
  tokens_checked = False
  for mode, st_mode in pooling.ST_MODES.items():
    reference = _reference(directory, st_mode)
    expected = reference.encode(SENTENCES, batch_size=2, convert_to_numpy=True)
    got, out = _ours(model, mode)
    if not tokens_checked:
      _same_tokens(reference, out, family)
      tokens_checked = True
    assert got.shape == (len(SENTENCES), HIDDEN)
    _close(got, expected, f"{family} {mode} ({st_mode})")
    _close(np.linalg.norm(got, axis=1), np.ones(len(SENTENCES)), "unit length")
  # the three modes read different tokens: a test of each is a test of its own
  means, firsts, lasts = (_ours(model, m)[0] for m in pooling.MODES)
  assert min(np.abs(means - firsts).max(), np.abs(firsts - lasts).max()) > 1e-3


def test_xlnet_embeddings_need_one_segment(directories):
  """The classifier's rows (<cls> in segment 2) pooled give other vectors than
  sentence-transformers' on these weights: what embed's one-segment rows avoid."""
  directory, model = directories["xlnet"]
  expected = _reference(directory, "mean").encode(SENTENCES, batch_size=2,
                                                  convert_to_numpy=True)
  out = model.encode(SENTENCES)
  two_segments = pooling.embed(out["token_states"], out["input_mask"], "mean").numpy()
  assert np.abs(two_segments - expected).max() > 20 * TOL
  _close(model.embed(SENTENCES), expected, "xlnet mean, one segment")


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_cut_texts_equal_sentence_transformers_at_the_same_max_length(directories, family):
  """Texts longer than the row: sentence-transformers' max_seq_length=8 is our max_length=8
  (special tokens counted by both, the text's end cut)."""
  directory, model = directories[family]
  for mode, st_mode in (("mean", "mean"), ("last", "lasttoken")):
    expected = _reference(directory, st_mode, max_seq_length=CUT).encode(
        SENTENCES, batch_size=2, convert_to_numpy=True)
    got, out = _ours(model, mode, max_length=CUT)
    assert out["input_ids"].shape[1] == CUT and (out["input_mask"] == 0).sum(1).max() == CUT
    _close(got, expected, f"{family} {mode}, rows cut to {CUT}")


def test_texts_longer_than_the_model_at_its_default_length(directories):
  """Our default length is what the position table holds (MPNet: max_position_embeddings - pad
  id - 1 = 38 here). sentence-transformers caps a tokenizer without model_max_length at
  max_position_embeddings (40), which overflows the table (positions start after the pad id),
  so it is given our length; then both cut a long text alike."""
  directory, model = directories["mpnet"]
  long_text = " ".join(["a much longer sentence with many more words"] * 6)
  expected = _reference(directory, "mean", max_seq_length=model.max_length).encode(
      [long_text, "x"], convert_to_numpy=True)
  out = model.encode([long_text, "x"])
  assert out["input_ids"].shape[1] == model.max_length == 38
  _close(model.embed([long_text, "x"]), expected, "a text cut to the model's length")
