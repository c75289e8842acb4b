"""In-graph SentencePiece (data_utils/sp_graph.py) and WordPiece word offsets equal the Python
path exactly: ids = Tokenizer.encode_lines, offsets = squad_features.tokenize_with_offsets /
words_with_offsets; a saved module loads in a process that imports only TensorFlow.

Exact equality needs SentencePiece to break Viterbi score ties the same way on both sides:
requirements.txt pins the Python package to 0.2.1, which does as tensorflow-text's does; 0.2.3
breaks them differently (`000` as `0 00` or `00 0`), on about 2% of digit-heavy lines."""

import json
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from data_utils import sp_graph, tokenization, wordpiece
from finetuning import squad_features
from tests import warm
from tests import data_fixtures, fuzz_helpers

# Fragments the generated lines are made of: every normalisation step has work to do.
FRAGMENTS = [
    "Café", "naïve", "Élysée", "Ångström", "Ñandú", "crème brûlée", "Dvořák", "Łódź",      # accents
    "東京は日本の首都です。", "北京", "中文字符", "한국어 텍스트", "훈민정음", "ｶﾀｶﾅ",             # CJK, Hangul
    "ΟΔΟΣ", "ΣΑΣ", "ΑΣ'", "Σ.", "ΌΣΟΣ ΣΊΣΥΦΟΣ", "ΑΣ\u0301Σ", "σΣ", "ΑΣ·Β", "ϹΑϹ",             # sigma
    "😀", "👍🏽", "🇫🇷", "👩‍👩‍👧",                                                              # emoji
    "``", "''", "'''", "`````", "``quoted''", "'a'", "` `", "＇'", "“curly”",                 # quotes
    "1,000", "2000,", "３,", "in 2000, we", "1,5", "00,", "5,", "²,", "٣,", "1,2,3,", "10,000,",  # digits
    "\t", "  ", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\x85", "\xa0", "\u2003", "\u2028",     # spaces
    "\u3000", "\u200b", "\u202f", "\u1680",
    "ﬁ", "²", "½", "ℌ", "ﬀ", "Ⅻ", "㎏", "¨", "ǅ", "İ", "ß", "ẞ", "Ǆ", "ŉ", "Ａ", "\u0301",   # NFKD
    "<sep>", "<eop>", "<eod>", "<unk>", "<s>", "</s>", "<cls>", "<pad>", "<mask>", "x<eop>y",
    "\ufffd", "\x00", "\x7f", "¿¡«»—–…", "a\u0308", "e\u0301\u0301",
]
DIGIT_COMMA_PIECES = ["▁2000,", "▁1,", "5,", "00,", "▁10,"]


def _varied_lines(rng, corpus_lines, n):
  """Corpus lines, fragments and mixtures of both, empty and all-space lines, one long line."""
  lines = ["", " ", "   \t ", "\u3000\xa0", "\n", "a\nb", "x" * 3000,
           " ".join(corpus_lines[:400])]
  while len(lines) < n:
    kind = rng.random()
    if kind < 0.35:
      lines.append(rng.choice(corpus_lines))
    elif kind < 0.7:
      lines.append("".join(rng.choice(FRAGMENTS + [" ", " ", "a", "B", "2"])
                           for _ in range(rng.randint(1, 12))))
    else:
      words = rng.choice(corpus_lines).split(" ")
      for _ in range(rng.randint(1, 4)):
        words.insert(rng.randint(0, len(words)), rng.choice(FRAGMENTS))
      lines.append(rng.choice([" ", "", "\t"]).join(words))
  return lines


@pytest.fixture(scope="module")
def corpus_lines(text_and_sp):
  with open(text_and_sp[0], encoding="utf-8") as f:
    return [line for line in f.read().split("\n") if line.strip()]


@pytest.fixture(scope="module")
def digit_comma_model(tmp_path_factory, corpus_lines):
  text = "\n".join(corpus_lines[:600]) + "\n" + "in 2000, we left 1, 5, and 00, then 10, 2\n" * 50
  return data_fixtures.make_digit_comma_model(str(tmp_path_factory.mktemp("dc")), text, 400,
                                              DIGIT_COMMA_PIECES)


@pytest.fixture(scope="module")
def pairs(text_and_sp, digit_comma_model):
  """{(model, lower): (Python Tokenizer, SentencePieceGraphTokenizer)}."""
  out = {}
  for name, path in (("sp800", text_and_sp[1]), ("digit_comma", digit_comma_model)):
    for lower in (False, True):
      tok = tokenization.Tokenizer(path, lower=lower)
      out[name, lower] = tok, sp_graph.SentencePieceGraphTokenizer.from_tokenizer(tok)
  return out


def _offsets_fn(graph_tok):
  return tf.function(graph_tok.tokenize_with_offsets,
                     input_signature=[tf.TensorSpec([None], tf.string)])


def _rows(ragged):
  values, splits = ragged.values.numpy(), ragged.row_splits.numpy()
  return [row.tolist() for row in np.split(values, splits[1:-1])]


@pytest.mark.slow
def test_ids_equal_encode_lines(pairs, corpus_lines):
  rng = random.Random(0)
  lines = _varied_lines(rng, corpus_lines, 2500)
  split_lines = 0
  for (name, lower), (tok, graph_tok) in pairs.items():
    want = tok.encode_lines(lines)
    got = graph_tok.encode_lines(lines)
    bad = [k for k in range(len(lines)) if got[k] != want[k]]
    assert not bad, (name, lower, len(bad), lines[bad[0]], got[bad[0]], want[bad[0]])
    if name == "digit_comma":
      raw = tok.sp.Encode(tok.normalize_lines(lines))
      fired = sum(r != w for r, w in zip(raw, want))
      print(f"  the digit-comma split changed {fired} lines")
      assert fired > 100, (lower, fired)          # the split had work to do
      split_lines += fired
      norm, origin = graph_tok.normalize(tf.constant(lines))
      assert [(n.decode("utf-8"), o) for n, o in zip(norm.numpy().tolist(), origin.to_list())] \
          == [squad_features.normalize_with_offsets(t, lower) for t in lines]
  assert split_lines > 200
  assert pairs["sp800", True][1].vocab_size == 800
  g = pairs["sp800", True][1]
  assert (g.bos_id, g.eos_id, g.pad_id, g.mask_id, g.lower) == (1, 2, 5, 6, True)


def test_keep_accents_and_model_path(text_and_sp):
  tok = tokenization.Tokenizer(text_and_sp[1], lower=True, keep_accents=True)
  graph_tok = sp_graph.SentencePieceGraphTokenizer(text_and_sp[1], lower=True, keep_accents=True)
  lines = ["Café İstanbul ÅΣ ﬁ ½", "e\u0301 a\u0308Σ", "ΟΔΟΣ"] + FRAGMENTS
  assert graph_tok.encode_lines(lines) == tok.encode_lines(lines)
  with pytest.raises(FileNotFoundError, match="nope.model: SentencePiece model not found"):
    sp_graph.SentencePieceGraphTokenizer(text_and_sp[1] + "/nope.model")


@pytest.mark.slow
def test_offsets_equal_tokenize_with_offsets(pairs, corpus_lines):
  rng = random.Random(1)
  contexts = [" ".join(_varied_lines(rng, corpus_lines, 12)[8:]) for _ in range(120)]
  contexts += FRAGMENTS + ["Café Müller, founded in 2000, sold 1,000 ``pastries''   to the Élysée.",
                           "  ΟΔΟΣ ΑΣ  ", ""]
  for (name, lower), (tok, graph_tok) in pairs.items():
    ids, starts, ends = _offsets_fn(graph_tok)(tf.constant(contexts))
    got = list(zip(_rows(ids), _rows(starts), _rows(ends)))
    _check_offsets(tok, contexts, got)


def _check_offsets(tok, texts, got):
  """got (ids, starts, ends) per text == squad_features.tokenize_with_offsets's."""
  for text, have in zip(texts, got):
    assert have == tuple(map(list, squad_features.tokenize_with_offsets(tok, text))), text


@pytest.mark.slow
def test_invalid_utf8_is_replaced(pairs):
  raw = [b"ok \xff\xfe bad", b"\xed\xa0\x80 surrogate", b"cut \xe2\x82", b"\xc0\xaf 2000,",
         "Σ".encode() + b"\x80"]
  for (name, lower), (tok, graph_tok) in pairs.items():
    texts = [b.decode("utf-8", "replace") for b in raw]
    assert graph_tok.encode_lines(raw) == tok.encode_lines(texts)
    ids, starts, ends = _offsets_fn(graph_tok)(tf.constant(raw))
    _check_offsets(tok, texts, list(zip(_rows(ids), _rows(starts), _rows(ends))))


_TEXT = st.lists(st.one_of(st.characters(), st.sampled_from(
    list(" \t\n\xa0\u3000``''\"Σσς,0123456789²³ÅİﬁΑΩ<>\u0301\u0345·.") + ["<eop>", "2000,"])),
    max_size=30).map("".join)


@fuzz_helpers.fuzz_settings(120)
@given(st.lists(_TEXT, min_size=1, max_size=6))
@pytest.mark.slow
def test_property_any_unicode(pairs, texts):
  for lower in (False, True):
    tok, graph_tok = pairs["digit_comma", lower]
    ids, starts, ends = _cached_offsets(graph_tok)(tf.constant(texts))
    _check_offsets(tok, texts, list(zip(_rows(ids), _rows(starts), _rows(ends))))
    norm, origin = graph_tok.normalize(tf.constant(texts))
    assert [(n.decode("utf-8"), o) for n, o in zip(norm.numpy().tolist(), origin.to_list())] == [
        squad_features.normalize_with_offsets(t, lower) for t in texts]


_FNS = {}


def _cached_offsets(graph_tok):
  if id(graph_tok) not in _FNS:
    _FNS[id(graph_tok)] = _offsets_fn(graph_tok)
  return _FNS[id(graph_tok)]


# ---- WordPiece word offsets -------------------------------------------------------------------
@pytest.fixture(scope="module")
def wordpiece_tok(tmp_path_factory):
  words = ("the a of to and in is it café naive hello world new york city play run token "
           "model text word piece un able ing paris france σ ς").split()
  pieces = (["<s>", "<pad>", "</s>", "<unk>", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + words + list("bcdefghjklmnopqrstuvwxyz")
            + ["##s", "##ed", "##ing", "##er", "##ly", "##able", "北", "京", "<mask>"])
  path = tmp_path_factory.mktemp("wp") / "vocab.txt"
  path.write_text("".join(p + "\n" for p in dict.fromkeys(pieces)), encoding="utf-8")
  return wordpiece.WordPieceTokenizer(str(path))


def test_wordpiece_word_offsets(wordpiece_tok, corpus_lines):
  rng = random.Random(2)
  texts = _varied_lines(rng, corpus_lines, 300) + FRAGMENTS + ["a\x1cb\x1fc\x85d\u2029e f"]
  fn = tf.function(wordpiece_tok.tokenize_words_with_offsets,
                   input_signature=[tf.TensorSpec([None], tf.string)])
  ids, starts, ends = fn(tf.constant(texts))
  got = list(zip(_rows(ids), _rows(starts), _rows(ends)))
  for text, have in zip(texts, got):
    assert have == tuple(map(list, squad_features.words_with_offsets(wordpiece_tok, text))), text
  empty = fn(tf.constant([], tf.string))
  assert empty[0].shape[0] == 0


# ---- SavedModel --------------------------------------------------------------------------------
_LOADER = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the SentencePiece ops)
assert not any(m.split(".")[0] in ("data_utils", "finetuning", "tests") for m in sys.modules)
loaded = tf.saved_model.load(sys.argv[1])
texts = tf.constant(json.loads(sys.argv[2]))
ids = loaded.tokenize(texts)
_, starts, ends = loaded.offsets(texts)
print(json.dumps([ids.to_list(), starts.to_list(), ends.to_list()]))
"""


@pytest.mark.slow
def test_saved_model_in_a_fresh_process(pairs, tmp_path):
  tok, graph_tok = pairs["digit_comma", True]
  module = tf.Module()
  module.tokenizer = graph_tok
  spec = [tf.TensorSpec([None], tf.string)]
  module.tokenize = tf.function(graph_tok.tokenize, input_signature=spec)
  module.offsets = tf.function(graph_tok.tokenize_with_offsets, input_signature=spec)
  export = str(tmp_path / "export")
  tf.saved_model.save(module, export)
  asset = os.path.join(export, "assets", os.path.basename(tok.model_path))
  with open(asset, "rb") as a, open(tok.model_path, "rb") as b:
    assert a.read() == b.read()
  texts = ["Café Müller, founded in 2000, sold 1,000 ``pastries''.", "ΟΔΟΣ ﬁ ½ 東京", "", "  "]
  out = warm.run([sys.executable, "-c", _LOADER, export, json.dumps(texts)],
                       capture_output=True, text=True, cwd=str(tmp_path), check=False,
                       env={**os.environ, "PYTHONPATH": ""})
  assert out.returncode == 0, out.stderr[-2000:]
  ids, starts, ends = json.loads(out.stdout.strip().splitlines()[-1])
  assert ids == tok.encode_lines(texts)
  assert list(zip(ids, starts, ends)) == [
      tuple(map(list, squad_features.tokenize_with_offsets(tok, t))) for t in texts]
  piece = tok.sp.PieceToId("▁2000,")                          # the split ran in the export
  assert piece in tok.sp.Encode(tok.normalize_lines(texts[:1])[0]) and piece not in ids[0]
