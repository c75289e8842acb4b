"""Tokenizer: the release's normalisation, the XLNet ids, training, errors."""

import random

import numpy as np
import pytest
import sentencepiece as spm

from data_utils import tokenization as tk
from tests import data_fixtures


def test_preprocess_text_release_rules():
  assert tk.preprocess_text("  Hello \t  ``World''  ") == 'Hello "World"'
  assert tk.preprocess_text("Café naïve", lower=True) == "cafe naive"
  assert tk.preprocess_text("Café", keep_accents=True) == "Café"
  assert tk.preprocess_text("ﬁne") == "fine"  # NFKD compatibility decomposition


def test_bulk_normalisation_equals_per_line(text_and_sp):
  _, model = text_and_sp
  rng = random.Random(0)
  alphabet = list("abcXYZ  \t``''é,.09") + ["\u00a0", "ﬁ", "\u2009"]
  lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(500)]
  for lower in (False, True):
    tok = tk.Tokenizer(model, lower=lower)
    assert tok.normalize_lines(lines) == [tk.preprocess_text(l, lower=lower) for l in lines]


def test_special_symbols_at_xlnet_ids(text_and_sp):
  _, model = text_and_sp
  tok = tk.Tokenizer(model, lower=True)
  assert [tok.id_to_piece(i) for i in range(9)] == list(tk.SPECIAL_SYMBOLS)
  ids = tok.encode("The <eop> marks a paragraph.")
  assert tk.EOP_ID in ids                      # user-defined: matched in text
  assert tk.SEP_ID not in tok.encode("a <sep> b")  # control: never produced by text
  assert tok.start_piece[tk.CLS_ID] and tok.start_piece[tok.sp.PieceToId(".")]


def test_training_is_deterministic(tmp_path, text_and_sp):
  text, _ = text_and_sp
  a = tk.train_sentencepiece([text], str(tmp_path / "m"), 300)
  first = open(a, "rb").read()
  b = tk.train_sentencepiece([text], str(tmp_path / "m"), 300)
  assert open(b, "rb").read() == first


def test_digit_comma_split_matches_the_release_rule(tmp_path):
  # A model that has the piece "▁2000," (and so needs the release's split).
  tok = tk.Tokenizer(data_fixtures.make_digit_comma_model(
      str(tmp_path), "in 2000, we left.\nby 2000, they came.\n" * 200
      + "we 2000 left, x, y\n" * 50, 40, ["▁2000,"]))
  raw = tok.sp.EncodeAsPieces("in 2000, we")
  assert "▁2000," in raw
  pieces = [tok.id_to_piece(i) for i in tok.encode("in 2000, we")]
  assert "▁2000," not in pieces
  # release: re-encode "2000" alone, keep the leading "▁" (piece began with it), then ","
  assert pieces == ["▁", "i", "n"] + tok.sp.EncodeAsPieces("2000") + [",", "▁", "w", "e"]


def test_bad_models_are_one_line_errors(tmp_path, text_and_sp):
  text, _ = text_and_sp
  prefix = str(tmp_path / "plain")
  spm.SentencePieceTrainer.Train(input=text, model_prefix=prefix, vocab_size=200,
                                 minloglevel=2)
  with pytest.raises(ValueError, match=r"plain.model: special symbols not at the XLNet ids: "
                                       r"<cls> \(id 0, want 3\)"):
    tk.Tokenizer(prefix + ".model")
  with pytest.raises(FileNotFoundError, match="nope.model"):
    tk.Tokenizer(str(tmp_path / "nope.model"))
  (tmp_path / "junk.model").write_bytes(b"not a model")
  with pytest.raises(ValueError, match="junk.model: not a SentencePiece model"):
    tk.Tokenizer(str(tmp_path / "junk.model"))
