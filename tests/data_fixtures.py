"""Tiny corpora and SentencePiece models built by the tests themselves."""

import os

from data_utils import corpus, tokenization


def make_corpus(directory, max_bytes=200_000):
  path = os.path.join(directory, "corpus.txt")
  if not os.path.exists(path):
    corpus.write_corpus(path, max_bytes=max_bytes)
  return path


def make_digit_comma_model(directory, text, vocab_size, digit_comma_pieces):
  """A small unigram model with the XLNet specials that holds DIGIT_COMMA_PIECES (e.g. "▁2000,"),
  so the release's digit-comma split has work to do; trained on TEXT. Returns the model path."""
  import sentencepiece as spm  # noqa: PLC0415
  text_path = os.path.join(directory, "t.txt")
  with open(text_path, "w", encoding="utf-8") as f:
    f.write(text)
  prefix = os.path.join(directory, "dc")
  spm.SentencePieceTrainer.Train(
      input=text_path, model_prefix=prefix, vocab_size=vocab_size, model_type="unigram",
      unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
      control_symbols=["<cls>", "<sep>", "<pad>", "<mask>", "<eod>"],
      user_defined_symbols=["<eop>"] + list(digit_comma_pieces), minloglevel=2,
      hard_vocab_limit=False)
  return prefix + ".model"


def make_sp_model(directory, text_path, vocab_size=800, uncased=True):
  prefix = os.path.join(directory, f"sp{vocab_size}")
  if not os.path.exists(prefix + ".model"):
    tokenization.train_sentencepiece([text_path], prefix, vocab_size, lower=uncased)
  return prefix + ".model"
