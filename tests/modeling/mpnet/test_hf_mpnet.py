"""Hugging Face export of MPNet models with this project's SentencePiece vocabulary (pad 5).

transformers' MPNet numbers positions as if id 1 were padding (padding_idx = 1, hard-coded);
this project numbers them from the config's pad id (5 for its SentencePiece models, where id 1
is <s>). modeling/mpnet/hf.py rolls the exported position table by the pad id so that HF, with
its default position ids, gives the project's outputs on the project's MPNet rows
(data_utils/layouts.py), and writes the vocabulary's special ids into config.json.

python -m pytest tests/modeling/mpnet/test_hf_mpnet.py -q
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from data_utils import layouts
from finetuning import race
from modeling import families
from modeling.mpnet import encoder as mpnet
from modeling.mpnet import hf as mpnet_hf
from modeling.mpnet import models as mpnet_models
from modeling.mpnet import pretrain as mpnet_pretrain
from tests.reference_libs import require

torch = require("torch")
transformers = require("transformers")

PAD = 5          # data_utils/tokenization.py: <s> = 1, </s> = 2, <pad> = 5
QUIET = dict(log=lambda _: None)


def _config(vocab, pad=PAD, positions=40):
  return mpnet.MPNetConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=64,
                           max_position_embeddings=positions, pad_token_id=pad,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _randomized(model, seed=0):
  """Every weight random (position rows all distinct, non-trivial LayerNorms and heads)."""
  model.ensure_built()
  rng = np.random.default_rng(seed)
  for v in model.weights:
    v.assign(rng.normal(0, 0.2, v.shape).astype(np.float32))
  return model


def _pair_rows(tok, max_len=32):
  """The classifier's rows: a pair and a single text, uneven right padding with 5."""
  rows = layouts.encode_texts(tok, ["The cat sat on the mat <s> today.", "A dog barked."],
                              ["It was <pad> warm.", None], max_len, "mpnet")
  return rows["input_ids"], rows["input_mask"]


def _squad_rows(tok, max_len=32):
  """SQuAD windows `<s> q </s></s> doc </s>` (data_utils/layouts.py), right padded."""
  ids = np.full([2, max_len], PAD, np.int32)
  for b, (doc, query) in enumerate([("Anna Keller founded the cafe in 2000.", "Who founded it?"),
                                    ("It rained.", "When?")]):
    tokens = layouts.rows("mpnet").squad_window(tok, list(tok.encode_lines([doc])[0]),
                                                list(tok.encode_lines([query])[0]))[0]
    ids[b, :len(tokens)] = tokens
  return ids, (ids == PAD).astype(np.float32)


def _race_rows(tok, max_len=32):
  """RACE's rows [1, 4, L] (finetuning/race.py, pairs of context and question+option)."""
  items = [("middle", "Tom has two cats and a small red dog.", "Tom has _ .",
            ["cats", "two big dogs", "no pets at all", "a fish"], 0)]
  rows = race.encode(tok, items, max_len, model_type="mpnet")
  return rows["input_ids"], rows["input_mask"]


def _hf(arch, path):
  return getattr(transformers, arch).from_pretrained(path).eval()


def _run(hf, ids, mask, **kw):
  """HF's forward with its DEFAULT position ids: input ids and attention mask only."""
  with torch.no_grad():
    return hf(torch.tensor(ids).long(), attention_mask=torch.tensor(1 - mask).long(), **kw)


def test_hugging_face_positions_are_ours_minus_the_pad_id_on_every_mpnet_row(tok):
  """Why rolling the table by the pad id is exact: on the project's MPNet rows (<s> = 1 first,
  right padded, id 1 nowhere else: SentencePiece never makes a control symbol from text, not
  even from a literal "<s>") HF's position of every real token is the project's minus 5."""
  hf_positions = transformers.models.mpnet.modeling_mpnet.create_position_ids_from_input_ids
  for ids, mask in (_pair_rows(tok), _squad_rows(tok), _race_rows(tok)):
    ids, mask = ids.reshape(-1, ids.shape[-1]), mask.reshape(-1, mask.shape[-1])
    real = mask == 0
    assert (ids[:, 0] == 1).all() and (ids[:, 1:] != 1).all() and not real.all()
    ours = mpnet.position_ids_from_input_ids(tf.constant(ids), PAD).numpy()
    theirs = hf_positions(torch.tensor(ids).long(), 1).numpy()
    np.testing.assert_array_equal(theirs[real], ours[real] - PAD)


def test_sentencepiece_classifier_export_gives_our_outputs_in_hugging_face(tok, tmp_path):
  """A pad-5 MPNetClassifier exported by --export_hf_dir's code: transformers' MPNetModel and
  MPNetForSequenceClassification, called as users call them (ids + attention mask), give our
  hidden states at the real tokens and our logits, on pair / single rows and SQuAD windows."""
  model = _randomized(mpnet_models.MPNetClassifier(_config(tok.vocab_size), n_class=3))
  families.export_hf(model, str(tmp_path), labels=("a", "b", "c"), **QUIET)
  cls = _hf("MPNetForSequenceClassification", str(tmp_path))
  base = _hf("MPNetModel", str(tmp_path))       # the encoder alone, as SQuAD users would
  for ids, mask in (_pair_rows(tok), _squad_rows(tok)):
    real = mask == 0
    ours = model.encoder(ids, input_mask=mask).numpy()
    for hf in (cls, base):
      out = _run(hf, ids, mask, output_hidden_states=True)
      theirs = out.hidden_states[-1].numpy()
      np.testing.assert_allclose(theirs[real], ours[real], rtol=1e-5, atol=1e-5)
    logits = model({"input_ids": ids, "input_mask": mask}).numpy()
    np.testing.assert_allclose(_run(cls, ids, mask).logits.numpy(), logits, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_sentencepiece_race_and_masked_lm_exports_give_our_outputs(tok, tmp_path):
  """The same for RACE's MPNetForMultipleChoice ([B, 4, L] rows) and the pretraining model's
  MPNetForMaskedLM (its logits at the real tokens of the classifier's rows)."""
  race_model = _randomized(mpnet_models.MPNetRaceModel(_config(tok.vocab_size)), seed=1)
  families.export_hf(race_model, str(tmp_path / "race"), **QUIET)
  ids, mask = _race_rows(tok)
  want = race_model({"input_ids": ids, "input_mask": mask}).numpy()
  got = _run(_hf("MPNetForMultipleChoice", str(tmp_path / "race")), ids, mask).logits.numpy()
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

  lm = _randomized(mpnet_pretrain.MPNetPretrainModel(_config(tok.vocab_size)), seed=2)
  families.export_hf(lm, str(tmp_path / "lm"), **QUIET)
  ids, mask = _pair_rows(tok)
  want = lm.lm_head(lm.encoder(ids, input_mask=mask), lm.encoder.word_embeddings).numpy()
  got = _run(_hf("MPNetForMaskedLM", str(tmp_path / "lm")), ids, mask).logits.numpy()
  real = mask == 0
  np.testing.assert_allclose(got[real], want[real], rtol=1e-5, atol=1e-5)


def test_special_ids_and_table_in_config(tmp_path):
  """config.json holds the vocabulary's special ids: SentencePiece (pad 5) <s> 1, </s> 2, the
  table rolled by 5 (a permutation, recorded); MPNet's WordPiece (pad 1) <s> 0, </s> 2, the
  table as it is."""
  for pad, bos, shift in ((PAD, 1, 5), (1, 0, None)):
    model = _randomized(mpnet_models.MPNetClassifier(_config(50, pad=pad), n_class=2))
    out = tmp_path / f"pad{pad}"
    mpnet_hf.export_hf(model, str(out), **QUIET)
    data = json.loads((out / "config.json").read_text())
    assert (data["bos_token_id"], data["eos_token_id"], data["pad_token_id"]) == (bos, 2, pad)
    assert data.get("position_embeddings_shift") == shift
    assert data["max_position_embeddings"] == 40
    hf = _hf("MPNetModel", str(out))
    assert (hf.config.bos_token_id, hf.config.eos_token_id, hf.config.pad_token_id) == (bos, 2, pad)
    table = model.encoder.position_embeddings.numpy()
    written = hf.embeddings.position_embeddings.weight.detach().numpy()
    np.testing.assert_array_equal(written, np.roll(table, -(shift or 0), axis=0))


def test_export_then_load_is_the_same_model(tok, tmp_path):
  """The quickstart's path: the pretraining export (save_hf_weights) is fine-tuning's
  --init_checkpoint (load_hf_weights), which rolls the table back: the same weights exactly."""
  lm = _randomized(mpnet_pretrain.MPNetPretrainModel(_config(tok.vocab_size)), seed=3)
  mpnet_hf.save_hf_weights(lm.hf_variable_map(), lm.config, str(tmp_path), "MPNetForMaskedLM")
  encoder = mpnet.MPNetEncoder(mpnet.MPNetConfig.from_json(str(tmp_path / "config.json")))
  unused = mpnet_hf.load_hf_weights(encoder, str(tmp_path))
  assert unused and all(name.startswith("lm_head.") for name in unused)
  for mine, theirs in zip(lm.encoder.weights, encoder.weights):
    np.testing.assert_array_equal(mine.numpy(), theirs.numpy(), err_msg=mine.name)
  ids, mask = _pair_rows(tok)
  np.testing.assert_array_equal(encoder(ids, input_mask=mask).numpy(),
                                lm.encoder(ids, input_mask=mask).numpy())


@pytest.mark.parametrize("pad", [0, 3])
def test_a_pad_id_without_an_exact_export_is_refused(tmp_path, pad):
  """A pad id of neither vocabulary: <s>'s id, and so HF's positions, are unknown. One line,
  before training (families.hf_architecture, what the scripts call first) and at export time;
  nothing written."""
  model = mpnet_models.MPNetClassifier(_config(50, pad=pad), n_class=2)
  with pytest.raises(ValueError) as e:
    families.hf_architecture(model)
  msg = str(e.value)
  assert "\n" not in msg and msg.startswith(f"--export_hf_dir: pad_token_id={pad} ")
  assert "id 1 were padding" in msg
  with pytest.raises(ValueError, match=f"^--export_hf_dir: pad_token_id={pad} "):
    families.export_hf(model, str(tmp_path / "x"), **QUIET)
  lm = mpnet_pretrain.MPNetPretrainModel(_config(50, pad=pad)).ensure_built()
  with pytest.raises(ValueError, match=f"^pad_token_id={pad} "):
    mpnet_hf.save_hf_weights(lm.hf_variable_map(), lm.config, str(tmp_path / "y"),
                             "MPNetForMaskedLM")
  assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
