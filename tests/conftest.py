import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def text_and_sp(tmp_path_factory):
  """(corpus path, SentencePiece model path): ~200 KB of stdlib docstrings, 800 pieces."""
  from tests import data_fixtures
  directory = str(tmp_path_factory.mktemp("text"))
  text = data_fixtures.make_corpus(directory)
  return text, data_fixtures.make_sp_model(directory, text)


@pytest.fixture(scope="session")
def tok(text_and_sp):
  """The uncased Tokenizer of `text_and_sp`'s SentencePiece model (800 pieces)."""
  from data_utils.tokenization import Tokenizer
  return Tokenizer(text_and_sp[1], lower=True)
