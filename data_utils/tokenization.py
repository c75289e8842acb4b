"""SentencePiece tokenization with the XLNet release's normalisation and special ids.

- `preprocess_text`: the release's normalisation (whitespace, quotes, accents, case).
- `Tokenizer`: loads any SentencePiece model (a released `spiece.model` too),
  checks the special symbols sit at the XLNet ids, and encodes many lines at
  once in C++, applying the release's digit-comma split (`▁2000,` ->
  `▁2000` `,`) only to the rare pieces that need it.
- `train_sentencepiece`: a new model with the XLNet symbols at the XLNet ids.
"""

import io
import itertools
import os
import re
import string
import unicodedata

import numpy as np
import sentencepiece as spm

from data_utils import fileio

SPIECE_UNDERLINE = "\u2581"
SPECIAL_SYMBOLS = {"<unk>": 0, "<s>": 1, "</s>": 2, "<cls>": 3, "<sep>": 4, "<pad>": 5,
                   "<mask>": 6, "<eod>": 7, "<eop>": 8}
UNK_ID, BOS_ID, CLS_ID, SEP_ID, PAD_ID = 0, 1, 3, 4, 5
MASK_ID, EOD_ID, EOP_ID = 6, 7, 8
# The release's word-start rule: a piece starting with "▁" or "<", or a single
# ASCII punctuation character, begins a word.
_PUNCTUATION = set(string.punctuation)
_ODD_SPACE = "\t\r\x0b\x0c\x1c\x1d\x1e\x1f"
_SURROGATE = re.compile("[\ud800-\udfff]")
_SPACES = re.compile(" {2,}")
_SPACES_BYTES = re.compile(b" {2,}")


def _sorted_unique(x):
  """np.unique of a non-decreasing array (np.unique's first call imports numpy.ma, a visible
  part of a writer process's start-up)."""
  return x[np.concatenate([[True], x[1:] != x[:-1]])] if len(x) else x


def _lines_with(block, positions):
  """(line index, start, end) of each line of BLOCK ("\n"-separated) holding one of the sorted
  byte POSITIONS, in order: by find/count around each line for a few positions, by one pass
  over the line breaks for many."""
  if len(positions) > 256:
    breaks = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.append(breaks, len(block))
    return [(k, starts[k], ends[k]) for k in
            _sorted_unique(np.searchsorted(breaks, positions)).tolist()]
  lines, k, counted, end = [], 0, 0, -1
  for pos in positions.tolist():
    if pos < end:                      # in the line just found
      continue
    start = block.rfind(b"\n", 0, pos) + 1
    end = block.find(b"\n", pos)
    end = len(block) if end < 0 else end
    k += block.count(b"\n", counted, start)
    counted = start
    lines.append((k, start, end))
  return lines


def _byte_table(lower):
  """bytes.translate table: ASCII whitespace other than " " and "\n" -> " ", A-Z -> a-z if LOWER
  (bytes >= 0x80 are left alone: their lines are normalised one by one)."""
  table = bytearray(range(256))
  for ch in _ODD_SPACE:
    table[ord(ch)] = ord(" ")
  if lower:
    table[ord("A"):ord("Z") + 1] = bytes(range(ord("a"), ord("z") + 1))
  return bytes(table)


_BYTE_TABLES = {False: _byte_table(False), True: _byte_table(True)}


def preprocess_text(text, lower=False, remove_space=True, keep_accents=False):
  """The release's `preprocess_text`."""
  if remove_space:
    text = " ".join(text.strip().split())
  text = text.replace("``", '"').replace("''", '"')
  if not keep_accents and not text.isascii():
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
  if lower:
    text = text.lower()
  return text


def read_model_bytes(path):
  """The bytes of a SentencePiece model at a local path or any tf.io.gfile URL.

  Local paths are read without TensorFlow (`fileio.read_bytes_light`: the writer's worker
  processes stay light); a missing file is FileNotFoundError naming it.
  """
  try:
    return fileio.read_bytes_light(path)
  except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
    raise FileNotFoundError(f"{path}: SentencePiece model not found") from None
  except Exception as e:     # noqa: BLE001 (tf.errors.* on URLs: one line naming the file)
    if "NotFound" in type(e).__name__:
      raise FileNotFoundError(f"{path}: SentencePiece model not found") from None
    raise


def is_start_piece(piece):
  return piece.startswith(SPIECE_UNDERLINE) or piece.startswith("<") or piece in _PUNCTUATION


class Tokenizer:
  """A SentencePiece model used the release's way.

  Attributes:
    vocab_size: number of pieces.
    start_piece: bool [V], True for pieces that begin a word.
  """

  def __init__(self, model_path, lower=False, keep_accents=False):
    self.model_path = model_path
    self.sp = spm.SentencePieceProcessor()
    proto = read_model_bytes(model_path)
    try:
      self.sp.LoadFromSerializedProto(proto)
    except (OSError, RuntimeError) as e:
      raise ValueError(f"{model_path}: not a SentencePiece model ({e})") from None
    self.lower, self.keep_accents = lower, keep_accents
    self.vocab_size = self.sp.GetPieceSize()
    # The ids MPNet-style layouts use (data_utils/wordpiece.py has the same attributes).
    self.bos_id, self.eos_id = SPECIAL_SYMBOLS["<s>"], SPECIAL_SYMBOLS["</s>"]
    self.pad_id, self.mask_id = PAD_ID, MASK_ID
    wrong = [f"{sym} (id {self.sp.PieceToId(sym)}, want {want})"
             for sym, want in SPECIAL_SYMBOLS.items()
             if want >= self.vocab_size or self.sp.IdToPiece(want) != sym]
    if wrong:
      raise ValueError(f"{model_path}: special symbols not at the XLNet ids: {', '.join(wrong)}; "
                       "train one with data_utils/train_tokenizer.py")
    pieces = [self.sp.IdToPiece(i) for i in range(self.vocab_size)]
    self.start_piece = np.array([is_start_piece(p) for p in pieces], bool)
    self._needs_split = np.array(
        [len(p) > 1 and p[-1] == "," and p[-2].isdigit() for p in pieces], bool)
    self._split_ids = {}           # id of such a piece -> the ids of its split (filled lazily)
    # Whether the model's own normaliser removes extra spaces (remove_extra_whitespaces, on in
    # every model we train and in the release's): then encoding need not collapse them first.
    probe = ["a  b", "a b", "  a", "a", "a  ", "a"]
    got = self.sp.Encode(probe)
    self._model_collapses_spaces = got[0::2] == got[1::2]

  def split_digit_comma(self, piece):
    """The release's rule for a piece like `▁2000,`: [pieces of "2000"] + [","]."""
    return self._split_digit_commas([piece])[0]

  def _split_digit_commas(self, pieces):
    """`split_digit_comma` of each of PIECES, with one batch encode."""
    if not pieces:
      return []
    subs = self.sp.Encode([p[:-1].replace(SPIECE_UNDERLINE, "") for p in pieces], out_type=str)
    out = []
    for piece, sub in zip(pieces, subs):
      if piece[0] != SPIECE_UNDERLINE and sub and sub[0][0] == SPIECE_UNDERLINE:
        if len(sub[0]) == 1:
          sub = sub[1:]
        else:
          sub[0] = sub[0][1:]
      out.append(sub + [piece[-1]])
    return out

  def _fix_digit_comma(self, text):
    """The release's `encode_pieces` rule for one line; returns ids."""
    return self._fix_digit_commas([text])[0]

  def _fix_digit_commas(self, texts):
    """`_fix_digit_comma` of each of TEXTS (str), with two batch encodes."""
    if not texts:
      return []
    lines = self.sp.Encode(texts, out_type=str)
    needs = sorted({p for line in lines for p in line
                    if len(p) > 1 and p[-1] == "," and p[-2].isdigit()})
    split = dict(zip(needs, self._split_digit_commas(needs)))
    to_id = self.sp.PieceToId
    out = []
    for line in lines:
      ids = []
      for piece in line:
        if piece in split:
          ids.extend(map(to_id, split[piece]))
        else:
          ids.append(to_id(piece))
      out.append(ids)
    return out

  def _fix_digit_comma_ids(self, texts, ids, fix):
    """`_fix_digit_commas` of the lines FIX of TEXTS, whose ids IDS already holds.

    A line without <unk> has the vocabulary's pieces (piece k = IdToPiece(id k)), so the rule
    applies id by id: each id whose piece ends in digit + comma is replaced by its split's ids
    (cached per id), without encoding the line again. Lines with <unk> (whose pieces carry the
    unknown text itself) go through `_fix_digit_commas`."""
    slow = [k for k in fix if UNK_ID in ids[k]]
    out = dict(zip(slow, self._fix_digit_commas([
        texts[k].decode("utf-8") if isinstance(texts[k], bytes) else texts[k] for k in slow])))
    cache, needs = self._split_ids, self._needs_split
    missing = sorted({i for k in fix if k not in out for i in ids[k] if needs[i]} - cache.keys())
    if missing:
      to_id = self.sp.PieceToId
      subs = self._split_digit_commas([self.sp.IdToPiece(i) for i in missing])
      cache.update((i, [to_id(p) for p in sub]) for i, sub in zip(missing, subs))
    for k in fix:
      if k not in out:
        line = []
        for i in ids[k]:
          if needs[i]:
            line.extend(cache[i])
          else:
            line.append(i)
        out[k] = line
    return [out[k] for k in fix]

  def normalize_lines(self, lines, collapse=True):
    """`preprocess_text` on many lines: ASCII lines in bulk (same result, faster).

    A text may hold line breaks (a RACE article, a quoted CSV field): they are spaces, as in
    `preprocess_text`, and never split the text. Lone surrogates (from JSON escapes such as
    "\\ud800"; SentencePiece cannot take them) become U+FFFD. `collapse=False` leaves runs of
    spaces inside ASCII lines (for a model that removes them itself: the same ids).
    """
    joined = "\n".join(lines)
    if joined.count("\n") != len(lines) - 1:     # a text holds a line break
      lines = [line.replace("\n", " ") for line in lines]
      joined = "\n".join(lines)
    for ch in _ODD_SPACE:                      # ASCII whitespace other than " " and "\n"
      if ch in joined:
        joined = joined.replace(ch, " ")
    if collapse and "  " in joined:
      joined = _SPACES.sub(" ", joined)
    joined = joined.replace("``", '"').replace("''", '"')
    if self.lower:
      joined = joined.lower()
    texts = [line.strip() for line in joined.split("\n")]
    for k, line in enumerate(lines):
      if not line.isascii():
        texts[k] = preprocess_text(_SURROGATE.sub("\ufffd", line), lower=self.lower,
                                   keep_accents=self.keep_accents)
    return texts

  def encode_lines(self, lines):
    """Normalises and encodes many lines; returns a list of id lists."""
    return self._encode(lines)[0]

  def encode_flat(self, lines):
    """`encode_lines` as (int32 [total] ids of all lines in order, int64 [lines] lengths)."""
    return self._encode(lines)[1:]

  def _encode(self, lines):
    texts = self.normalize_lines(lines, collapse=not self._model_collapses_spaces)
    return self._encode_texts(texts)

  def _encode_texts(self, texts):
    """Normalised texts (str, or ASCII bytes) -> (id lists, int32 flat ids, int64 lengths)."""
    ids = self.sp.Encode(texts, out_type=int)
    lengths = np.fromiter(map(len, ids), np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), np.int32, count=int(lengths.sum()))
    needs = np.flatnonzero(self._needs_split[flat])
    if len(needs):      # a few lines: their new ids spliced into the flat array
      ends = np.cumsum(lengths)
      parts, done = [], 0
      fix = _sorted_unique(np.searchsorted(ends, needs, "right"))
      fixed = self._fix_digit_comma_ids(texts, ids, fix)
      for k, new_ids in zip(fix, fixed):
        ids[k] = new_ids
        parts += [flat[done:ends[k] - lengths[k]], np.array(ids[k], np.int32)]
        done = ends[k]
        lengths[k] = len(ids[k])
      flat = np.concatenate(parts + [flat[done:]])
    return ids, flat, lengths

  def encode_block(self, block):
    """Many lines at once, given as ONE bytes object: the lines joined by "\n", UTF-8 (lone
    surrogates as "surrogatepass" writes them).

    Returns (int32 [total] ids, int64 [lines] lengths, bool [lines] blank): the ids and lengths
    of `encode_flat(block.decode().split("\n"))`, and which lines are all whitespace
    (`not line.strip()`). The release's normalisation runs on the whole block's bytes (one
    translate for odd spaces and case, one split per quote pair, one split into lines); only the
    lines holding non-ASCII bytes go through `preprocess_text` one by one.
    """
    text = block.translate(_BYTE_TABLES[bool(self.lower)])
    collapse = not self._model_collapses_spaces
    if collapse and b"  " in text:
      text = _SPACES_BYTES.sub(b" ", text)
    for pair in (b"``", b"''"):
      if pair in text:
        text = b'"'.join(text.split(pair))
    texts = text.split(b"\n")
    if collapse:         # (a model that removes extra spaces drops leading and trailing ones too)
      texts = list(map(bytes.strip, texts))
    non_ascii = {}       # line index -> whether the line is all whitespace
    if not block.isascii():
      for k, start, end in _lines_with(block, np.flatnonzero(np.frombuffer(block, np.uint8)
                                                             >= 0x80)):
        line = block[start:end].decode("utf-8", "surrogatepass")
        non_ascii[k] = not line.strip()
        texts[k] = preprocess_text(_SURROGATE.sub("\ufffd", line), lower=self.lower,
                                   keep_accents=self.keep_accents)
    _, flat, lengths = self._encode_texts(texts)
    # An all-whitespace ASCII line encodes to nothing (stripped above, or by the model), so only
    # the lines without ids need the check.
    blank = lengths == 0
    for k in np.flatnonzero(blank).tolist():
      if texts[k].strip():
        blank[k] = False
    for k, is_blank in non_ascii.items():
      blank[k] = is_blank
    return flat, lengths, blank

  def encode(self, text):
    return self.encode_lines([text])[0]

  def id_to_piece(self, i):
    return self.sp.IdToPiece(int(i))

  def decode(self, ids):
    return self.sp.DecodeIds([int(i) for i in ids])


def train_sentencepiece(input_files, model_prefix, vocab_size, lower=False,
                        character_coverage=0.99995, input_sentence_size=10_000_000, seed=0,
                        num_threads=1, sidecar=None):
  """Trains a unigram model with the XLNet special symbols at the XLNet ids.

  Like the release: `<cls> <sep> <pad> <mask> <eod>` are control symbols (ids
  3-7), `<eop>` a user-defined symbol (id 8). Text is normalised with
  `preprocess_text` first (uncased when `lower`). Inputs and `model_prefix` may be local
  paths (read and written without TensorFlow) or tf.io.gfile URLs: the text is streamed to
  SentencePiece and the model handed back in memory, so nothing is staged on the local disk and
  a failed training writes nothing. Writes (`write_sentencepiece`) `model_prefix.vocab` and
  `.model`, each atomically, the model last, and returns the model path. SentencePiece stops
  at the pieces the text holds (hard_vocab_limit off): the model may have fewer than
  `vocab_size` (the caller compares).
  """
  proto = train_sentencepiece_proto(input_files, vocab_size, lower, character_coverage,
                                    input_sentence_size, seed, num_threads)
  return write_sentencepiece(proto, model_prefix, sidecar)


def train_sentencepiece_proto(input_files, vocab_size, lower=False, character_coverage=0.99995,
                              input_sentence_size=10_000_000, seed=0, num_threads=1):
  """`train_sentencepiece`'s model as bytes, written nowhere."""
  def sentences():
    for path in input_files:
      with fileio.open_text_light(path, errors="replace") as f:
        for line in f:
          line = preprocess_text(line, lower=lower)
          if line:
            yield line

  model = io.BytesIO()
  spm.set_random_generator_seed(seed)
  spm.SentencePieceTrainer.Train(
      sentence_iterator=sentences(), model_writer=model, vocab_size=vocab_size,
      model_type="unigram", character_coverage=character_coverage,
      unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
      control_symbols="<cls>,<sep>,<pad>,<mask>,<eod>", user_defined_symbols="<eop>",
      input_sentence_size=input_sentence_size, shuffle_input_sentence=True,
      seed_sentencepiece_size=1_000_000, num_threads=num_threads,
      minloglevel=2, hard_vocab_limit=False)
  return model.getvalue()


def piece_count(proto):
  """Pieces in a SentencePiece model given as bytes."""
  return spm.SentencePieceProcessor(model_proto=proto).GetPieceSize()


def write_sentencepiece(proto, model_prefix, sidecar=None):
  """Writes a model's bytes as `model_prefix.model` and its pieces and scores as `.vocab` (as
  SentencePiece's own trainer prints them); `sidecar` (str), if given, as `model_prefix.json`
  first, so that a model on disk always has its sidecar. Each file atomically, the model last.
  Returns the model path."""
  sp = spm.SentencePieceProcessor(model_proto=proto)
  vocab = "".join(f"{sp.IdToPiece(i)}\t{_score(sp.GetScore(i))}\n"
                  for i in range(sp.GetPieceSize()))
  fileio.makedirs_light(fileio.dirname(model_prefix))
  if sidecar is not None:
    fileio.write_atomic_light(model_prefix + ".json", sidecar.encode("utf-8"))
  fileio.write_atomic_light(model_prefix + ".vocab", vocab.encode("utf-8"))
  fileio.write_atomic_light(model_prefix + ".model", proto)
  return model_prefix + ".model"


def _score(x):
  """A score as SentencePiece's own .vocab file prints it (C++ ostream: 6 significant digits)."""
  return f"{x:.6g}"
