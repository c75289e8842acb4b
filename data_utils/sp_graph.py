"""SentencePiece tokenization with the XLNet release's normalisation, in TensorFlow ops only.

`SentencePieceGraphTokenizer` gives the ids of `tokenization.Tokenizer.encode_lines` and the
character offsets of `squad_features.tokenize_with_offsets`, as a `tf.Module` that runs in
tf.data, a tf.function and an exported SavedModel (a loader needs only `import tensorflow,
tensorflow_text`).

The model file. `model_asset` is a `tf.saved_model.Asset` of the model file, so an export holds
it as `assets/<its file name>` (e.g. `assets/spiece.model`). The ids come from
`tensorflow_text.SentencepieceTokenizer`, whose `SentencepieceOp` takes the model's bytes as a
graph ATTRIBUTE only (fixed when the graph is built; no op input can feed it from a file), so
the exported graph also carries the same bytes and that copy is the one applied; the asset is
the model file for anyone reading the export (Python's sentencepiece, a re-export).

How the release's `preprocess_text` is done in-graph, on each text's code points (each keeps the
index of the original character it came from, as `squad_features.normalize_with_offsets`):

1. Whitespace: Python's `str.isspace` characters (\\t-\\r, \\x1c-\\x1f, space, \\x85, \\xa0,
   U+1680, U+2000-U+200A, U+2028/9, U+202F, U+205F, U+3000) are dropped; a single " " goes
   before a kept character that follows whitespace and some earlier kept character (= strip
   and collapse; the space's origin is the last whitespace character before it).
2. Quotes: "``" and "''" -> '"', left to right (a run of n backticks gives n // 2 quotes and,
   n odd, a backtick). A pair is two adjacent characters of the original text either way.
3. Unless keep_accents: each character -> NFKD minus the characters with
   `unicodedata.combining != 0` (a table of the ~18k code points it changes, from Python's
   `unicodedata` at construction). Per character is exact: NFKD decomposes character by
   character, and canonical reordering only moves combining characters, which are dropped.
4. Lower (uncased): each character -> `str.lower` of it (table, ~1.4k code points; "İ" -> "i̇"),
   and U+03A3 -> "ς" where Python's Final_Sigma rule holds (previous non-case-ignorable
   character cased, next one not), else "σ". Cased / case-ignorable are read off Python's own
   `str.lower` at construction, so they are the running Python's Unicode version.

Then SentencePiece, then the release's digit-comma split: an id whose piece ends in digit +
comma (`▁2000,`) is replaced by the ids of its split (`▁2000` `,`), precomputed per id.

Known divergences from the Python path (the normalisation and the split are exact; the
normalised text and origins equal `squad_features.normalize_with_offsets`,
tests/data_utils/test_sp_graph.py):
- SentencePiece score ties. The unigram Viterbi can meet exact score ties ("000" as `0` `00`
  or `00` `0`: same pieces' text, same total score). The `sentencepiece` Python package 0.2.1,
  which requirements.txt pins, breaks them as tensorflow_text's SentencePiece does (0 of
  5,000 test lines differ); 0.2.3 breaks them otherwise (~2% of digit-heavy adversarial lines,
  3 of 1234 docstring paragraphs). With another version the ids can differ on such ties.
- An `<unk>` piece keeps id 0 (the Python path would split an unknown piece that ends in a
  digit + ","; that needs "," itself unknown to the model).
"""

import functools
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from data_utils import tokenization

_SIGMA, _SMALL_SIGMA, _FINAL_SIGMA = 0x3A3, 0x3C3, 0x3C2
_SPACE_BIT, _IGNORABLE_BIT, _CASED_BIT = 1, 2, 4
_BACKTICK, _QUOTE, _DOUBLE_QUOTE = ord("`"), ord("'"), ord('"')


@functools.lru_cache(maxsize=None)
def _unicode_tables():
  """Python's per-character facts, from the running interpreter (once per process).

  Returns:
    dict: `nfkd` {cp: [cps]} NFKD minus combining characters, for the non-ASCII code points it
    changes; `lower` {cp: [cps]} `str.lower` for the code points it changes (U+03A3 left out);
    `props` {cp: bits} _SPACE_BIT (str.isspace), _IGNORABLE_BIT (case-ignorable for the
    final-sigma rule), _CASED_BIT (cased and not case-ignorable).
  """
  # unassigned (Cn) and private-use (Co) code points have Unicode's default properties: no
  # decomposition, no case mapping, not space, neither cased nor case-ignorable; skipping them
  # (most of the code space) leaves every table as it is
  chars = [c for c in map(chr, range(0x110000))
           if unicodedata.category(c) not in ("Cn", "Co", "Cs")]
  nfkd, lower, props = {}, {}, {}
  for c in chars:
    if not c.isascii():
      d = "".join(x for x in unicodedata.normalize("NFKD", c) if not unicodedata.combining(x))
      if d != c:
        nfkd[ord(c)] = [ord(x) for x in d]
    low = c.lower()
    if low != c and c != "\u03a3":
      lower[ord(c)] = [ord(x) for x in low]
    if c.isspace():
      props[ord(c)] = props.get(ord(c), 0) | _SPACE_BIT
    # Python's rule for U+03A3: final when the previous non-case-ignorable character is cased
    # and the next one is not. "cΣ" is final iff c is cased and not ignorable; otherwise "AcΣ"
    # is final iff c is skipped, i.e. case-ignorable.
    if (c + "\u03a3").lower()[-1] == "\u03c2":
      props[ord(c)] = props.get(ord(c), 0) | _CASED_BIT
    elif ("A" + c + "\u03a3").lower()[-1] == "\u03c2":
      props[ord(c)] = props.get(ord(c), 0) | _IGNORABLE_BIT
  return {"nfkd": nfkd, "lower": lower, "props": props}


def _int_table(mapping, default):
  """{int: int} -> StaticHashTable int64 -> int64."""
  keys = np.fromiter(mapping.keys(), np.int64, len(mapping))
  values = np.fromiter(mapping.values(), np.int64, len(mapping))
  return tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(keys, values), default)


class _CharMap(tf.Module):
  """A code point -> code point sequence map (identity where not listed), as a lookup table.

  Attributes:
    table: StaticHashTable cp -> entry index (-1 = identity).
    offsets, lengths: int32 [E], each entry's slice of `values`.
    values: int32 [sum(lengths)] (one 0 appended so the gather never reads an empty tensor).
  """

  def __init__(self, mapping):
    super().__init__()
    keys = sorted(mapping)
    lengths = [len(mapping[k]) for k in keys]
    self.table = _int_table(dict(zip(keys, range(len(keys)))), -1)
    self.lengths = tf.constant(np.array(lengths + [1], np.int32))
    self.offsets = tf.constant(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    self.values = tf.constant(np.array([v for k in keys for v in mapping[k]] + [0], np.int32))

  def apply(self, cps, origin, splits, replace=None):
    """Maps each code point of flat rows.

    Args:
      cps: int32 [T] code points (rows given by `splits`).
      origin: int32 [T] original character index of each.
      splits: int64 [N + 1] row splits.
      replace: optional (bool [T], int32 [T]): where True, the code point becomes this one
        instead (applied to the code points the table leaves alone).

    Returns:
      (cps int32 [T'], origin int32 [T'], splits int64 [N + 1]).
    """
    entry = tf.cast(self.table.lookup(tf.cast(cps, tf.int64)), tf.int32)
    listed = entry >= 0
    entry = tf.maximum(entry, 0)
    counts = tf.where(listed, tf.gather(self.lengths, entry), 1)
    src, k = _expand(counts)
    out = tf.gather(self.values, tf.gather(tf.gather(self.offsets, entry), src) + k)
    same = tf.gather(cps, src)
    if replace is not None:
      same = tf.where(tf.gather(replace[0], src), tf.gather(replace[1], src), same)
    out = tf.where(tf.gather(listed, src), out, same)
    return out, tf.gather(origin, src), _new_splits(counts, splits)


def _expand(counts):
  """Element i repeated counts[i] times, for int32 counts >= 0: tf.repeat(tf.range(n), counts)
  found by searching the running sums (a few ops to trace, where tf.repeat's general form makes
  some fifty).

  Args:
    counts: int32 [n].

  Returns:
    (source index int32 [sum(counts)], index within its copies int32 [sum(counts)]).
  """
  ends = tf.cumsum(counts)
  position = tf.range(tf.reduce_sum(counts))
  src = tf.searchsorted(ends, position, side="right")
  return src, position - tf.gather(ends - counts, src)


def _new_splits(counts, splits):
  """Row splits after element i became counts[i] elements."""
  ends = tf.concat([[0], tf.cumsum(tf.cast(counts, tf.int64))], 0)
  return tf.gather(ends, splits)


def _last_at_or_before(flag):
  """For each i, the largest j <= i with flag[j], or -1 (flat, rows ignored).

  Args:
    flag: bool [T].

  Returns:
    int32 [T].
  """
  where = tf.concat([[-1], tf.cast(tf.reshape(tf.where(flag), [-1]), tf.int32)], 0)
  return tf.gather(where, tf.cumsum(tf.cast(flag, tf.int32)))


def _first_at_or_after(flag):
  """For each i, the smallest j >= i with flag[j], or T (flat, rows ignored).

  Args:
    flag: bool [T].

  Returns:
    int32 [T].
  """
  n = tf.size(flag)
  return n - 1 - tf.reverse(_last_at_or_before(tf.reverse(flag, [0])), [0])


def _row_bounds(splits):
  """(row start int32 [T], row end int32 [T]) of each flat element."""
  splits = tf.cast(splits, tf.int32)
  lengths = splits[1:] - splits[:-1]
  row, _ = _expand(lengths)
  start = tf.gather(splits[:-1], row)
  return start, start + tf.gather(lengths, row)


def _utf8_length(cps):
  """Bytes of each code point in UTF-8: int32 [T]."""
  return 1 + tf.cast(cps >= 0x80, tf.int32) + tf.cast(cps >= 0x800, tf.int32) + tf.cast(
      cps >= 0x10000, tf.int32)


class SentencePieceGraphTokenizer(tf.Module):
  """`tokenization.Tokenizer` (the release's normalisation, SentencePiece, digit-comma split)
  as TensorFlow ops: a tf.Module whose tables and SentencePiece asset go into a SavedModel.

  Texts are UTF-8 bytes; bytes that are not valid UTF-8 (a served request's) become U+FFFD as
  Python's `bytes.decode("utf-8", errors="replace")` makes them (one per maximal invalid
  subsequence), never an error; offsets count the characters of that decoded text.

  Attributes:
    model_path: the SentencePiece model's path (the asset's source).
    lower, keep_accents: the normalisation's settings (`tokenization.preprocess_text`).
    vocab_size: number of pieces.
    bos_id, eos_id, pad_id, mask_id: ids of `<s>`, `</s>`, `<pad>`, `<mask>`.
  """

  def __init__(self, model_path=None, lower=False, keep_accents=False, *, _tokenizer=None):
    """Reads the model (`tokenization.read_model_bytes` via `tokenization.Tokenizer`, which
    checks the XLNet special ids) and builds the tables (about 1 s the first time in a process).

    Args:
      model_path: a SentencePiece model, local path or tf.io.gfile URL.
      lower: lower-case (uncased models).
      keep_accents: skip NFKD and the removal of combining characters.
    """
    super().__init__(name="sentencepiece_graph_tokenizer")
    tok = _tokenizer or tokenization.Tokenizer(model_path, lower=lower, keep_accents=keep_accents)
    self.model_path, self.lower, self.keep_accents = tok.model_path, tok.lower, tok.keep_accents
    self.vocab_size = tok.vocab_size
    self.bos_id, self.eos_id, self.pad_id, self.mask_id = (tok.bos_id, tok.eos_id, tok.pad_id,
                                                           tok.mask_id)
    # tensorflow_text's SentencepieceOp takes the model only as an attribute (bytes fixed when
    # the graph is built), so the op carries the model itself; the asset is the same file, for
    # whoever loads the export (see the module docstring).
    self.model_asset = tf.saved_model.Asset(self.model_path)
    self._sp = tf_text.SentencepieceTokenizer(
        model=tokenization.read_model_bytes(self.model_path), out_type=tf.int32)
    tables = _unicode_tables()
    self._props = _int_table(tables["props"], 0)
    self._nfkd = None if self.keep_accents else _CharMap(tables["nfkd"])
    self._lower = _CharMap(tables["lower"]) if self.lower else None
    self._build_digit_comma(tok)

  @classmethod
  def from_tokenizer(cls, tokenizer):
    """The in-graph twin of a `tokenization.Tokenizer` (same model, lower, keep_accents)."""
    return cls(_tokenizer=tokenizer)

  def _build_digit_comma(self, tok):
    """Per id: the ids that replace it (its digit-comma split, else itself), each sub-piece's
    width in characters and its character offset inside the piece."""
    needs = np.flatnonzero(tok._needs_split).tolist()      # noqa: SLF001 (the Tokenizer's rule)
    pieces = [tok.id_to_piece(i) for i in needs]
    splits = dict(zip(needs, (tok.split_digit_comma(p) for p in pieces)))
    ids, widths, offsets, lengths = [], [], [], []
    underline, surface_len = np.zeros(self.vocab_size, bool), np.zeros(self.vocab_size, np.int32)
    for i in range(self.vocab_size):
      if i in splits:
        subs = splits[i]
        piece = tok.id_to_piece(i)
        underline[i] = piece[0] == tokenization.SPIECE_UNDERLINE
        surface_len[i] = len(piece)
        w = [len(s.replace(tokenization.SPIECE_UNDERLINE, "")) for s in subs]
        ids += [tok.sp.PieceToId(s) for s in subs]
        widths += w
        offsets += np.cumsum([0] + w[:-1]).tolist()
        lengths.append(len(subs))
      else:
        ids.append(i)
        widths.append(0)
        offsets.append(0)
        lengths.append(1)
    self.digit_comma_ids = tf.constant(np.array(needs, np.int32).reshape([-1]))
    self._split = tf.constant(np.isin(np.arange(self.vocab_size), needs))
    self._rep_ids = tf.constant(np.array(ids, np.int32))
    self._rep_width = tf.constant(np.array(widths, np.int32))
    self._rep_offset = tf.constant(np.array(offsets, np.int32))
    self._rep_len = tf.constant(np.array(lengths, np.int32))
    self._rep_start = tf.constant(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32))
    self._underline = tf.constant(underline)
    self._surface_len = tf.constant(surface_len)

  # ---- normalisation ------------------------------------------------------------------------
  def normalize(self, texts):
    """The release's `preprocess_text`, keeping each character's origin.

    Args:
      texts: tf.string [N] (invalid UTF-8 -> U+FFFD).

    Returns:
      (normalised tf.string [N], origin int32 RaggedTensor [N, (normalised chars)]: index of
      the original character each one comes from, as `squad_features.normalize_with_offsets`).
    """
    cps, origin, splits, _ = self._normalize(self._check(texts))
    return (tf.strings.unicode_encode(tf.RaggedTensor.from_row_splits(cps, splits), "UTF-8"),
            tf.RaggedTensor.from_row_splits(origin, splits))

  def _check(self, texts):
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank != 1:
      raise ValueError(f"sp_graph: want texts of shape [N], got {texts.shape}")
    return texts

  def _bits(self, cps, bit):
    return tf.bitwise.bitwise_and(tf.cast(self._props.lookup(tf.cast(cps, tf.int64)), tf.int32),
                                  bit) != 0

  def _normalize(self, texts):
    """tf.string [N] -> (cps int32 [T], origin int32 [T], row splits int64 [N + 1], original
    length in characters int32 [N]), the rows' code points flattened."""
    decoded = tf.strings.unicode_decode(texts, "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)
    cps, splits = decoded.flat_values, decoded.row_splits
    row_start, _ = _row_bounds(splits)
    origin = tf.range(tf.size(cps)) - row_start
    lengths = tf.cast(decoded.row_lengths(), tf.int32)
    # 1. whitespace: strip, and one " " for each run between kept characters.
    space = self._bits(cps, _SPACE_BIT)
    last_kept = _last_at_or_before(~space)
    before = tf.maximum(tf.range(tf.size(cps)) - 1, 0)
    space_before = (~space & (origin > 0) & tf.gather(space, before)
                    & (tf.gather(last_kept, before) >= row_start))
    counts = tf.where(space, 0, 1 + tf.cast(space_before, tf.int32))
    src, k = _expand(counts)
    inserted = (k == 0) & tf.gather(space_before, src)
    cps = tf.where(inserted, 32, tf.gather(cps, src))
    origin = tf.gather(origin, src) - tf.cast(inserted, tf.int32)
    splits = _new_splits(counts, splits)
    # 2. "``" and "''" -> '"', left to right within each run of the same character.
    cps, origin, splits = self._quotes(cps, origin, splits)
    # 3. NFKD minus combining characters; 4. lower case with the final-sigma rule.
    if self._nfkd is not None:
      cps, origin, splits = self._nfkd.apply(cps, origin, splits)
    if self._lower is not None:
      cps, origin, splits = self._lower.apply(cps, origin, splits, self._sigma(cps, splits))
    return cps, origin, splits, lengths

  def _quotes(self, cps, origin, splits):
    row_start, row_end = _row_bounds(splits)
    i = tf.range(tf.size(cps))
    prev = tf.gather(cps, tf.maximum(i - 1, 0))
    nxt = tf.gather(cps, tf.minimum(i + 1, tf.maximum(tf.size(cps) - 1, 0)))
    run_start = _last_at_or_before((i == row_start) | (cps != prev))
    quote = (cps == _BACKTICK) | (cps == _QUOTE)
    even = tf.math.floormod(i - run_start, 2) == 0
    pair = quote & even & (i + 1 < row_end) & (nxt == cps)
    keep = ~(quote & ~even)
    cps = tf.where(pair, _DOUBLE_QUOTE, cps)
    return (tf.boolean_mask(cps, keep), tf.boolean_mask(origin, keep),
            _new_splits(tf.cast(keep, tf.int32), splits))

  def _sigma(self, cps, splits):
    """(bool [T] where U+03A3, int32 [T] its lower case: "ς" under Python's Final_Sigma rule
    (previous non-case-ignorable character cased, next one not), else "σ")."""
    row_start, row_end = _row_bounds(splits)
    i = tf.range(tf.size(cps))
    last = tf.maximum(tf.size(cps) - 1, 0)
    counted = ~self._bits(cps, _IGNORABLE_BIT)
    cased = self._bits(cps, _CASED_BIT)
    prev = tf.gather(_last_at_or_before(counted), tf.maximum(i - 1, 0))
    prev_cased = (i > row_start) & (prev >= row_start) & tf.gather(cased, tf.maximum(prev, 0))
    nxt = tf.gather(_first_at_or_after(counted), tf.minimum(i + 1, last))
    next_cased = (i + 1 < row_end) & (nxt < row_end) & tf.gather(cased, tf.minimum(nxt, last))
    sigma = cps == _SIGMA
    return sigma, tf.where(prev_cased & ~next_cased, _FINAL_SIGMA, _SMALL_SIGMA)

  # ---- tokenization -------------------------------------------------------------------------
  def tokenize(self, texts):
    """Texts -> ids, `tokenization.Tokenizer.encode_lines` (but for score ties: module docstring).

    Args:
      texts: tf.string [N] (invalid UTF-8 -> U+FFFD).

    Returns:
      int32 RaggedTensor [N, (pieces)].
    """
    cps, _, splits, _ = self._normalize(self._check(texts))
    ids = self._sp.tokenize(
        tf.strings.unicode_encode(tf.RaggedTensor.from_row_splits(cps, splits), "UTF-8"))
    counts = tf.gather(self._rep_len, ids.flat_values)
    src, k = _expand(counts)
    out = tf.gather(self._rep_ids, tf.gather(tf.gather(self._rep_start, ids.flat_values), src) + k)
    return tf.RaggedTensor.from_row_splits(out, _new_splits(counts, ids.row_splits),
                                           validate=False)

  def tokenize_with_offsets(self, texts):
    """Texts -> (ids, starts, ends), `squad_features.tokenize_with_offsets`; in-graph.

    Each piece's span [start, end) is in characters (code points) of the ORIGINAL text (of its
    U+FFFD-decoded form when it is not valid UTF-8). SentencePiece's byte offsets into the
    normalised text are mapped to normalised characters, then to their origins; the pieces of a
    digit-comma split share their piece's span character by character, as in Python.

    Args:
      texts: tf.string [N].

    Returns:
      (ids, starts, ends): int32 RaggedTensors [N, (pieces)].
    """
    cps, origin, splits, lengths = self._normalize(self._check(texts))
    norm = tf.strings.unicode_encode(tf.RaggedTensor.from_row_splits(cps, splits), "UTF-8")
    ids, begin, end = self._sp.tokenize_with_offsets(norm)
    piece_row = tf.cast(ids.value_rowids(), tf.int32)
    # bytes -> normalised characters, per row (b == the row's byte length -> its char count n)
    nbytes = _utf8_length(cps)
    char_byte = tf.cumsum(tf.cast(nbytes, tf.int64), exclusive=True)            # [T]
    byte_ends = tf.concat([[0], tf.cumsum(tf.cast(nbytes, tf.int64))], 0)
    row_byte = tf.gather(byte_ends, splits)                                   # [N + 1]
    row_start = tf.cast(tf.gather(splits, piece_row), tf.int32)
    n = tf.gather(tf.cast(splits[1:] - splits[:-1], tf.int32), piece_row)
    row_bytes = tf.gather(row_byte[1:] - row_byte[:-1], piece_row)
    base = tf.gather(row_byte[:-1], piece_row)

    def to_char(b):
      b = tf.cast(b.flat_values, tf.int64)
      flat = tf.cast(tf.searchsorted(char_byte, base + b, side="right"), tf.int32) - 1
      return tf.where(b >= row_bytes, n, flat - row_start)

    b, e = to_char(begin), to_char(end)
    # origin with each row's text length appended (Python's origin + [len(text)])
    ext = tf.concat([tf.RaggedTensor.from_row_splits(origin, splits),
                     tf.expand_dims(lengths, 1)], axis=1)
    ext_values, ext_start = ext.flat_values, tf.cast(ext.row_splits[:-1], tf.int32)

    def origin_at(row, count, k):        # Python's origin[k] on a list of count + 1 items
      k = tf.where(k < 0, k + count + 1, k)
      return tf.gather(ext_values, tf.gather(ext_start, row) + k)

    piece = ids.flat_values
    counts = tf.gather(self._rep_len, piece)
    src, k = _expand(counts)
    rep = tf.gather(tf.gather(self._rep_start, piece), src) + k
    out_ids = tf.gather(self._rep_ids, rep)
    row, n, b, e, piece = [tf.gather(x, src) for x in (piece_row, n, b, e, piece)]
    # a piece as it is: [origin[b], origin[e - 1] + 1); zero width (e <= b) at origin[min(b, n)]
    start = origin_at(row, n, tf.minimum(b, n))
    end = tf.where(e <= b, start, origin_at(row, n, tf.maximum(e - 1, 0)) + 1)
    # a digit-comma split: sub-pieces over consecutive characters from b (+1 past a "▁" that
    # covers a character of its own)
    pos = b + tf.cast(tf.gather(self._underline, piece)
                      & (e - b > tf.gather(self._surface_len, piece) - 1), tf.int32)
    pos += tf.gather(self._rep_offset, rep)
    width = tf.gather(self._rep_width, rep)
    sub_start = origin_at(row, n, tf.minimum(pos, n - 1))
    sub_end = tf.where(width > 0, origin_at(row, n, tf.minimum(pos + width, n) - 1) + 1,
                       sub_start)
    split = tf.gather(self._split, piece)
    start, end = tf.where(split, sub_start, start), tf.where(split, sub_end, end)
    out_splits = _new_splits(counts, ids.row_splits)
    return tuple(tf.RaggedTensor.from_row_splits(x, out_splits, validate=False)
                 for x in (out_ids, start, end))

  def encode_lines(self, lines, batch_size=1024):
    """Python strings -> lists of ids through `tokenize` (tests, checks): list of lists of int."""
    if getattr(self, "_encode_fn", None) is None:
      self._encode_fn = tf.function(self.tokenize,
                                    input_signature=[tf.TensorSpec([None], tf.string)])
    out = []
    for first in range(0, len(lines), batch_size):
      ids = self._encode_fn(tf.constant(list(lines[first:first + batch_size]), tf.string))
      values, splits = ids.values.numpy(), ids.row_splits.numpy()
      out.extend(row.tolist() for row in np.split(values, splits[1:-1]))
    return out
