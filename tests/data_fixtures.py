"""Tiny corpora and SentencePiece models built by the tests themselves."""

import os

from data_utils import corpus, tokenization


def make_corpus(directory, max_bytes=200_000):
  path = os.path.join(directory, "corpus.txt")
  if not os.path.exists(path):
    corpus.write_corpus(path, max_bytes=max_bytes)
  return path


def make_sp_model(directory, text_path, vocab_size=800, uncased=True):
  prefix = os.path.join(directory, f"sp{vocab_size}")
  if not os.path.exists(prefix + ".model"):
    tokenization.train_sentencepiece([text_path], prefix, vocab_size, lower=uncased)
  return prefix + ".model"
