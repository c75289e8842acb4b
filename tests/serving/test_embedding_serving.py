"""The embedding SavedModel (serving/embedding_graph.py, PairsTask.export) on raw text equals
the Python path (data_utils/layouts rows at the fixed length -> the model) to 1e-5, and, on
valid text, sentence-transformers' (Transformer, Pooling, Normalize) on the same tiny Hugging
Face directory (its own tokenizer and torch model): XLNet (left padded) and MPNet (right
padded), mean and first pooling, each padding of the batch (longest, buckets, max); texts with
invalid UTF-8 bytes, accents, CJK, an empty string and one longer than max_seq_length."""

import numpy as np
import pytest

pytestmark = pytest.mark.slow     # a SavedModel export per case

import tensorflow as tf

from finetuning.pairs_task import PairsConfig, PairsTask
from modeling import families
from modeling import pooling
from modeling.run_config import RunConfig
from serving import embedding_graph
from serving import utf8
from tests import hf_dirs
from tests.reference_libs import require

require("torch")
require("sentence_transformers")
from sentence_transformers import SentenceTransformer  # noqa: E402
from sentence_transformers.sentence_transformer import modules as st_modules  # noqa: E402

TOL = 1e-5
HIDDEN = 16
MAX_LEN = 16
LONG = "a much longer sentence with many more words than the others " * 4   # > MAX_LEN pieces
VALID = hf_dirs.TEXTS + ["Café Müller à l'Élysée", "東京は日本の首都です。 Tokyo!", "", LONG,
                         "the second text"]
INVALID = [b"caf\xc3 and \xff yes \xe6\x9d", b"\xed\xa0\x80 x \xc0\xaf"]


@pytest.fixture(scope="module")
def setups(tmp_path_factory):
  root = tmp_path_factory.mktemp("hf")
  sp_model = hf_dirs.train_sp_model(tmp_path_factory.mktemp("sp"))
  hf_dirs.xlnet_dir(root / "xlnet", sp_model, "XLNetModel")
  hf_dirs.mpnet_dir(root / "mpnet", "MPNetModel")
  return {"xlnet": (str(root / "xlnet"), dict(sp_model=sp_model, uncased=True)),
          "mpnet": (str(root / "mpnet"), dict(vocab_file=str(root / "mpnet" / "vocab.txt")))}


def _task(setups, family, mode):
  directory, tokenizer = setups[family]
  config = families.get(family).config_from_json(f"{directory}/config.json")
  task = PairsTask(PairsConfig(model_type=family, max_seq_length=MAX_LEN, pooling=mode,
                               **tokenizer), config, RunConfig(dropout=0.0, dropatt=0.0),
                   directory)
  model = task.build_model().ensure_built()
  task.initialize(model, log=lambda _: None)
  return task, model


def _reference(directory, mode):
  transformer = st_modules.Transformer(directory, max_seq_length=MAX_LEN)
  return SentenceTransformer(modules=[transformer, st_modules.Pooling(HIDDEN, mode),
                                      st_modules.Normalize()], device="cpu").eval()


def _max_diff(a, b):
  return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


@pytest.mark.parametrize("family,mode,padding", [
    ("xlnet", "mean", "longest"), ("xlnet", "first", "max"),
    ("mpnet", "mean", "buckets"), ("mpnet", "first", "longest")])
def test_served_embeddings_equal_the_python_path(setups, tmp_path, family, mode, padding):
  task, model = _task(setups, family, mode)
  export_dir = str(tmp_path / "export")
  task.export(model, export_dir, log=lambda _: None, padding=padding)
  serve = tf.saved_model.load(export_dir).signatures["serving_default"]
  texts = VALID + INVALID
  got = serve(sentence=tf.constant(np.array(texts, object)))["embedding"].numpy()
  assert got.shape == (len(texts), HIDDEN) and got.dtype == np.float32
  # the Python path on the same bytes (decoded as the door decodes them)
  expected = task.encode(model, utf8.python_texts(texts))
  assert _max_diff(got, expected) < TOL
  assert _max_diff(np.linalg.norm(got, axis=1), np.ones(len(texts))) < TOL
  # each row alone (padded to its own length) is the same vector
  for k in (VALID.index(""), VALID.index(LONG), len(VALID)):
    alone = serve(sentence=tf.constant(np.array(texts[k:k + 1], object)))["embedding"]
    assert _max_diff(alone.numpy()[0], expected[k]) < TOL, texts[k]
  # invalid bytes are their replacement-decoded text
  decoded = [t.decode("utf-8", "replace") for t in INVALID]
  again = serve(sentence=tf.constant(decoded))["embedding"].numpy()
  assert _max_diff(again, got[len(VALID):]) < TOL
  assert "\ufffd" in decoded[0] and _max_diff(got[len(VALID)], got[len(VALID) + 1]) > 1e-3
  # the long text is cut: the same vector as its first pieces followed by more words
  longer = serve(sentence=tf.constant([LONG + " and even more words"]))["embedding"].numpy()
  assert _max_diff(longer[0], got[VALID.index(LONG)]) < TOL
  # an independent reference on the valid texts: sentence-transformers on the HF directory
  reference = _reference(setups[family][0], pooling.ST_MODES[mode])
  st = reference.encode(VALID, batch_size=3, convert_to_numpy=True)
  assert _max_diff(got[:len(VALID)], st) < TOL

