"""inference.from_pretrained on Hugging Face directories and a released-style XLNet checkpoint,
against transformers' PyTorch models on the same ids: token states, the pooled token and the
classifier's logits (uneven lengths, pairs, both families), to 1e-5."""

import os

import numpy as np
import pytest

import inference
from data_utils import tokenization
from tests import hf_dirs
from tests.reference_libs import require

torch = require("torch")
transformers = require("transformers")

TOL = 1e-5
TEXTS, TEXTS_B = hf_dirs.TEXTS, hf_dirs.TEXTS_B
_xlnet_dir, _mpnet_dir = hf_dirs.xlnet_dir, hf_dirs.mpnet_dir


@pytest.fixture(scope="module")
def sp_model(tmp_path_factory):
  return hf_dirs.train_sp_model(tmp_path_factory.mktemp("sp"))


def _torch(array, dtype=None):
  return torch.tensor(np.asarray(array), dtype=dtype)


def _real(mask):
  return mask == 0


def _close(ours, reference, what):
  err = float(np.max(np.abs(np.asarray(ours, np.float64) - np.asarray(reference, np.float64))))
  assert err < TOL, f"{what}: max difference {err:.3g}"


def _xlnet_torch(model, rows):
  base = model.transformer if hasattr(model, "transformer") else model
  with torch.no_grad():
    kwargs = dict(input_ids=_torch(rows["input_ids"], torch.long),
                  token_type_ids=_torch(rows["seg_ids"], torch.long),
                  attention_mask=_torch(1.0 - rows["input_mask"], torch.float32))
    hidden = base(**kwargs).last_hidden_state.numpy()
    logits = model(**kwargs).logits.numpy() if base is not model else None
  return hidden, logits


def test_xlnet_classifier_directory_equals_transformers(tmp_path, sp_model):
  reference = _xlnet_dir(tmp_path, sp_model, "XLNetForSequenceClassification")
  lines = []
  model = inference.from_pretrained(str(tmp_path), batch_size=3, log=lines.append)
  assert len(lines) == 1 and "xlnet classifier over 3 labels (neg, neutral, pos)" in lines[0] \
      and "Hugging Face directory (XLNetForSequenceClassification)" in lines[0], lines
  for pair in (False, True):
    _check_xlnet_classifier(model, reference, sp_model, pair)


def _check_xlnet_classifier(model, reference, sp_model, pair):
  texts_b = TEXTS_B if pair else None
  out = model.encode(TEXTS, texts_b)
  rows = {k: out[k] for k in ("input_ids", "input_mask")}
  # the rows as layouts.py documents them: left padded, <cls> (id 3) last, lengths uneven
  tok = tokenization.Tokenizer(sp_model, lower=True)
  lengths = [len(a) + 2 + (len(b) + 1 if pair else 0) for a, b in zip(
      tok.encode_lines(TEXTS), tok.encode_lines(TEXTS_B))]
  assert list(_real(rows["input_mask"]).sum(1)) == lengths and len(set(lengths)) == 4
  assert out["input_ids"].shape[1] == max(lengths) and (out["input_ids"][:, -1] == 3).all()
  assert (rows["input_mask"][:, 0] == 1).sum() == 3       # only the longest row starts at 0
  seg = model.rows(TEXTS, texts_b)["seg_ids"]
  hidden, _ = _xlnet_torch(reference, dict(rows, seg_ids=seg))
  real = _real(rows["input_mask"])
  _close(out["token_states"][real], hidden[real], "token_states")
  _close(out["pooled"], hidden[:, -1], "pooled (<cls>, the last column)")
  # logits: each batch of 3 padded to its own longest row; the reference at the call's length
  _, logits = _xlnet_torch(reference, dict(rows, seg_ids=seg))
  _close(model.logits(TEXTS, texts_b), logits, "logits")
  predicted = model.predict(TEXTS, texts_b)
  probs = np.exp(logits - logits.max(1, keepdims=True))
  probs /= probs.sum(1, keepdims=True)
  for row, p, lg in zip(predicted, probs, logits):
    assert row["label"] == ("neg", "neutral", "pos")[int(np.argmax(lg))]
    _close(list(row["probabilities"].values()), p, "probabilities")
    assert list(row["probabilities"]) == ["neg", "neutral", "pos"]


@pytest.mark.slow
def test_xlnet_release_checkpoint_directory_equals_transformers(tmp_path, sp_model):
  """A released-style TF1 checkpoint directory (xlnet_config.json + xlnet_model.ckpt.* +
  spiece.model), made from a transformers XLNetModel's weights: an encoder."""
  from modeling.run_config import RunConfig
  from modeling.xlnet import release_checkpoint
  from modeling import loading
  from modeling.xlnet.config import XLNetConfig
  from modeling.xlnet.models import XLNetPretrainModel
  hf_dir, release = tmp_path / "hf", tmp_path / "release"
  reference = _xlnet_dir(hf_dir, sp_model, "XLNetModel")
  config = XLNetConfig.from_json(str(hf_dir / "config.json"))
  ours = XLNetPretrainModel(config, RunConfig(dropout=0.0, dropatt=0.0))
  loading.load_checkpoint(ours, str(hf_dir))
  release.mkdir()
  config.to_json(str(release / "xlnet_config.json"))
  release_checkpoint.save_tf1_checkpoint(ours, str(release / "xlnet_model.ckpt"))
  (release / "spiece.model").write_bytes(open(sp_model, "rb").read())
  lines = []
  model = inference.from_pretrained(str(release), uncased=True, log=lines.append)
  assert "released XLNet checkpoint" in lines[0] and "xlnet encoder" in lines[0]
  assert not model.has_head
  out = model.encode(TEXTS)
  hidden, _ = _xlnet_torch(reference, model.rows(TEXTS))
  real = _real(out["input_mask"])
  _close(out["token_states"][real], hidden[real], "token_states")
  _close(out["pooled"], hidden[:, -1], "pooled")
  with pytest.raises(ValueError, match="holds no classification head"):
    model.predict(TEXTS)
  # the same encoder exported as the pretraining SavedModel (raw strings in), wrapped
  from serving import tasks as serving_tasks
  serving_tasks.export_encoder(ours, tokenization.Tokenizer(sp_model, lower=True), 32,
                               str(tmp_path / "saved_model"), log=lambda line: None)
  lines = []
  served = inference.from_pretrained(str(tmp_path / "saved_model"), log=lines.append)
  assert "pretraining encoder SavedModel" in lines[0] and served.max_length == 32
  got = served.encode(TEXTS)
  rows = model.rows(TEXTS, max_length=32)
  np.testing.assert_array_equal(got["input_ids"], rows["input_ids"])
  np.testing.assert_array_equal(got["input_mask"], rows["input_mask"])
  hidden, _ = _xlnet_torch(reference, rows)
  real = _real(rows["input_mask"])
  _close(got["token_states"][real], hidden[real], "SavedModel token_states")
  _close(got["pooled"], hidden[:, -1], "SavedModel pooled")
  with pytest.raises(ValueError, match="holds no classification head"):
    served.logits(TEXTS)


def _mpnet_torch(model, rows):
  base = model.mpnet if hasattr(model, "mpnet") else model
  with torch.no_grad():
    kwargs = dict(input_ids=_torch(rows["input_ids"], torch.long),
                  attention_mask=_torch(1.0 - rows["input_mask"], torch.long))
    hidden = base(**kwargs).last_hidden_state.numpy()
    logits = model(**kwargs).logits.numpy() if base is not model else None
  return hidden, logits


def test_mpnet_classifier_directory_equals_transformers(tmp_path):
  reference = _mpnet_dir(tmp_path / "hf", "MPNetForSequenceClassification")
  model = inference.from_pretrained(str(tmp_path / "hf"), batch_size=2, log=None)
  assert model.family == "mpnet" and model.labels == ("no", "yes")
  assert model.max_length == 40 - 1 - 1        # positions start after the pad id
  for pair in (False, True):
    _check_mpnet_classifier(model, reference, pair)
  # bytes are read as the SavedModels read a request: invalid UTF-8 -> U+FFFD
  bad = b"short one \xff\xfe text"
  np.testing.assert_array_equal(model.rows([bad])["input_ids"],
                                model.rows([bad.decode("utf-8", "replace")])["input_ids"])


def _check_mpnet_classifier(model, reference, pair):
  texts_b = TEXTS_B if pair else None
  out = model.encode(TEXTS, texts_b)
  real = _real(out["input_mask"])
  # right padded, <s> (id 0) first, lengths uneven
  assert (out["input_ids"][:, 0] == 0).all() and (out["input_mask"][:, 0] == 0).all()
  assert len(set(real.sum(1))) == 4 and (out["input_mask"][:, -1] == 1).sum() == 3
  hidden, logits = _mpnet_torch(reference, out)
  _close(out["token_states"][real], hidden[real], "token_states")
  _close(out["pooled"], hidden[:, 0], "pooled (<s>, the first column)")
  _close(model.logits(TEXTS, texts_b), logits, "logits")
  assert [p["label"] for p in model.predict(TEXTS, texts_b)] == \
      [("no", "yes")[i] for i in logits.argmax(1)]


def test_mpnet_base_directory_is_an_encoder(tmp_path):
  reference = _mpnet_dir(tmp_path / "hf", "MPNetModel")
  model = inference.from_pretrained(str(tmp_path / "hf"), log=None)
  assert not model.has_head
  out = model.encode(TEXTS[:2], max_length=8)       # the long text cut to 8 tokens
  assert out["input_ids"].shape == (2, 8) and out["input_ids"][1, -1] == 2   # </s> kept last
  hidden, _ = _mpnet_torch(reference, out)
  real = _real(out["input_mask"])
  _close(out["token_states"][real], hidden[real], "token_states")
  with pytest.raises(ValueError, match="holds no classification head"):
    model.logits(TEXTS)
  # the same directory at a URL (ram:// in tests, gs:// for users)
  from data_utils import fileio
  url = f"ram://inference-{os.getpid()}/mpnet-base"
  for name in os.listdir(tmp_path / "hf"):
    fileio.write_atomic(fileio.join(url, name), (tmp_path / "hf" / name).read_bytes())
  remote = inference.from_pretrained(url, log=None).encode(TEXTS[:2], max_length=8)
  np.testing.assert_array_equal(remote["token_states"], out["token_states"])


def test_mpnet_regression_directory_gives_scores(tmp_path):
  reference = _mpnet_dir(tmp_path / "hf", "MPNetForSequenceClassification", labels=("score",),
                         problem_type="regression")
  model = inference.from_pretrained(str(tmp_path / "hf"), log=None)
  assert model.regression and model.labels == ()
  _, logits = _mpnet_torch(reference, model.rows(TEXTS))
  scores = [p["score"] for p in model.predict(TEXTS)]
  _close(scores, logits[:, 0], "scores")
  assert model.logits(TEXTS).shape == (4,)


def test_paths_it_cannot_read_are_one_line(tmp_path):
  (tmp_path / "empty").mkdir()
  for path, message in ((tmp_path / "missing", "not found"),
                        (tmp_path / "empty", "not a model directory this project reads")):
    with pytest.raises((ValueError, FileNotFoundError)) as e:
      inference.from_pretrained(str(path), log=None)
    assert str(path) in str(e.value) and message in str(e.value) and "\n" not in str(e.value)
  hf = tmp_path / "hf"
  _mpnet_dir(hf, "MPNetModel")
  os.remove(hf / "vocab.txt")
  with pytest.raises(ValueError, match="no tokenizer .*pass sp_model=PATH"):
    inference.from_pretrained(str(hf), log=None)
  with pytest.raises(TypeError, match="unknown argument"):
    inference.from_pretrained(str(hf), vocab=1)
