"""In-graph SentencePiece (data_utils/sp_graph.py) and WordPiece word offsets equal the Python
path: ids = Tokenizer.encode_lines, offsets = squad_features.tokenize_with_offsets /
words_with_offsets; a saved module loads in a process that imports only TensorFlow."""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from data_utils import sp_graph, tokenization, wordpiece
from finetuning import squad_features
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


class _TfTextSp:
  """Python sentencepiece's interface over tensorflow_text's SentencePiece (ids, offsets)."""

  def __init__(self, tok):
    import tensorflow_text as tf_text  # noqa: PLC0415
    with open(tok.model_path, "rb") as f:
      self._sp = tf_text.SentencepieceTokenizer(model=f.read())
    self._tok, self._cache = tok, {}

  def Encode(self, texts):  # noqa: N802 (sentencepiece's name)
    return self._sp.tokenize(tf.constant(texts, tf.string)).to_list() if texts else []

  def prefetch(self, texts):
    """Encodes TEXTS (normalised) in one call for the `encode` calls that follow."""
    if texts:
      ids, begin, end = self._sp.tokenize_with_offsets(tf.constant(texts, tf.string))
      for text, *row in zip(texts, ids.to_list(), begin.to_list(), end.to_list()):
        self._cache[text] = row

  def encode(self, text, return_type="proto"):
    del return_type
    if text not in self._cache:
      self.prefetch([text])
    pieces = [type("Piece", (), {"id": i, "begin": b, "end": e, "piece": self._tok.id_to_piece(i)})
              for i, b, e in zip(*self._cache[text])]
    return type("Proto", (), {"pieces": pieces})

  def PieceToId(self, piece):  # noqa: N802
    return self._tok.sp.PieceToId(piece)


_SHIMS = {}


def _with_tf_text_sp(tok):
  if id(tok) not in _SHIMS:
    _SHIMS[id(tok)] = tok, _WithTfTextSp(tok)
  return _SHIMS[id(tok)][1]


class _WithTfTextSp:
  """The Python Tokenizer's normalisation and digit-comma rule around tensorflow_text's
  SentencePiece: what the graph must give exactly (see `_check_ties`)."""

  def __init__(self, tok):
    self.tok, self.sp = tok, _TfTextSp(tok)
    self.lower, self.keep_accents = tok.lower, tok.keep_accents
    self.split_digit_comma = tok.split_digit_comma

  def encode_lines(self, lines):
    texts = [squad_features.normalize_with_offsets(t, self.lower, self.keep_accents)[0]
             for t in lines]
    ids = self.sp.Encode(texts)
    return [sum(([self.tok.sp.PieceToId(p) for p in self.tok.split_digit_comma(
        self.tok.id_to_piece(i))] if self.tok._needs_split[i] else [i] for i in row), [])  # noqa: SLF001
            for row in ids]


def _check_ties(tok, lines, got, want):
  """Lines where the graph's ids differ from Tokenizer.encode_lines: the two SentencePiece builds
  break an exact score tie of the Viterbi differently (same normalised text, same pieces' text,
  same total score). Returns how many lines."""
  bad = [k for k in range(len(lines)) if got[k] != want[k]]
  for k in bad:
    norm = squad_features.normalize_with_offsets(lines[k], tok.lower, tok.keep_accents)[0]
    ours, theirs = _with_tf_text_sp(tok).sp.Encode([norm])[0], tok.sp.Encode(norm)
    assert ours != theirs, (lines[k], got[k], want[k])
    assert sum(map(tok.sp.GetScore, ours)) == pytest.approx(sum(map(tok.sp.GetScore, theirs)),
                                                            abs=1e-3), lines[k]
    assert "".join(map(tok.id_to_piece, ours)) == "".join(map(tok.id_to_piece, theirs))
  return len(bad)


def test_ids_equal_encode_lines(pairs, corpus_lines):
  rng = random.Random(0)
  lines = _varied_lines(rng, corpus_lines, 2500)
  split_lines = 0
  for (name, lower), (tok, graph_tok) in pairs.items():
    want = tok.encode_lines(lines)
    got = graph_tok.encode_lines(lines)
    exact = _with_tf_text_sp(tok).encode_lines(lines)
    bad = [k for k in range(len(lines)) if got[k] != exact[k]]
    assert not bad, (name, lower, lines[bad[0]], got[bad[0]], exact[bad[0]])
    ties = _check_ties(tok, lines, got, want)
    print(f"{name} lower={lower}: {len(lines)} lines, {ties} differ from encode_lines by a "
          "SentencePiece score tie")
    assert ties <= len(lines) // 20
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
  got = graph_tok.encode_lines(lines)
  assert got == _with_tf_text_sp(tok).encode_lines(lines)
  assert _check_ties(tok, lines, got, tok.encode_lines(lines)) <= 2
  with pytest.raises(FileNotFoundError, match="nope.model: SentencePiece model not found"):
    sp_graph.SentencePieceGraphTokenizer(text_and_sp[1] + "/nope.model")


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
  """got (ids, starts, ends) per text == squad_features.tokenize_with_offsets around
  tensorflow_text's SentencePiece exactly, and == the Python path's but on score ties."""
  shim, ties = _with_tf_text_sp(tok), 0
  shim.sp.prefetch([squad_features.normalize_with_offsets(t, tok.lower, tok.keep_accents)[0]
                    for t in texts])
  for text, have in zip(texts, got):
    assert have == tuple(map(list, squad_features.tokenize_with_offsets(shim, text))), text
    if have != tuple(map(list, squad_features.tokenize_with_offsets(tok, text))):
      ties += _check_ties(tok, [text], [have[0]], [tok.encode(text)]) or 1
  return ties


def test_invalid_utf8_is_replaced(pairs):
  raw = [b"ok \xff\xfe bad", b"\xed\xa0\x80 surrogate", b"cut \xe2\x82", b"\xc0\xaf 2000,",
         "Σ".encode() + b"\x80"]
  for (name, lower), (tok, graph_tok) in pairs.items():
    texts = [b.decode("utf-8", "replace") for b in raw]
    assert graph_tok.encode_lines(raw) == _with_tf_text_sp(tok).encode_lines(texts)
    ids, starts, ends = _offsets_fn(graph_tok)(tf.constant(raw))
    _check_offsets(tok, texts, list(zip(_rows(ids), _rows(starts), _rows(ends))))


_TEXT = st.lists(st.one_of(st.characters(), st.sampled_from(
    list(" \t\n\xa0\u3000``''\"Σσς,0123456789²³ÅİﬁΑΩ<>\u0301\u0345·.") + ["<eop>", "2000,"])),
    max_size=30).map("".join)


@fuzz_helpers.fuzz_settings(120, deadline_ms=None)
@given(st.lists(_TEXT, min_size=1, max_size=6))
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
  out = subprocess.run([sys.executable, "-c", _LOADER, export, json.dumps(texts)],
                       capture_output=True, text=True, cwd=str(tmp_path), check=False,
                       env={**os.environ, "PYTHONPATH": ""})
  assert out.returncode == 0, out.stderr[-2000:]
  ids, starts, ends = json.loads(out.stdout.strip().splitlines()[-1])
  assert ids == tok.encode_lines(texts)
  assert list(zip(ids, starts, ends)) == [
      tuple(map(list, squad_features.tokenize_with_offsets(tok, t))) for t in texts]
  piece = tok.sp.PieceToId("▁2000,")                          # the split ran in the export
  assert piece in tok.sp.Encode(tok.normalize_lines(texts[:1])[0]) and piece not in ids[0]
