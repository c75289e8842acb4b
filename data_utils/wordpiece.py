"""In-graph WordPiece tokenization and input packing for released MPNet weights.

Released MPNet checkpoints (e.g. `microsoft/mpnet-base`) come with a BERT-style
WordPiece `vocab.txt` (one piece per line, id = line number) that starts with
the fairseq symbols `<s> <pad> </s> <unk>`, keeps BERT's `[UNK]` etc. and ends
with `<mask>`. This module reproduces Hugging Face's `MPNetTokenizer` with
TensorFlow ops only, so the same tokenizer runs in tf.data, in a tf.function and
in an exported serving signature.

- `WordPieceTokenizer`: text -> ids through `tensorflow_text.BertTokenizer`,
  with its normalisation replaced by Hugging Face's `BertNormalizer` (see
  `_HFBasicTokenizer`); `pack` goes from strings to model inputs.
- `pack_pair`: ids -> `<s> A </s>` or `<s> A </s></s> B </s>`, right-padded to
  a fixed length, with Hugging Face's "longest_first" truncation.

Truncation. `MPNetTokenizer` is backed by the `tokenizers` library (the only
implementation in transformers 5; the default "fast" one in 4.x), whose
longest_first rule is closed-form: with `budget = max_len - specials`, nothing
is cut when `len_a + len_b <= budget`; otherwise the shorter sequence keeps
`min(len_short, budget // 2)` tokens and the longer one the rest (on a tie A
counts as the shorter one), always cutting from the end. So on an odd budget
the extra token goes to the longer sequence, to B on a tie. The pure-Python
`truncate_sequences` of HF's slow tokenizers differs in one case: when
`len_a <= len_b`, both are cut and the budget is odd, it gives the extra token
to A. We match what `MPNetTokenizer` returns.

Special-token strings in the text (`<mask>`, `<s>`, `</s>`, `<pad>` and the
unknown token, case-sensitive) map to their ids, as in Hugging Face, so a
fill-mask query can be written "Paris is the <mask> of France.".

Mask convention: `input_mask` holds 1.0 on padding (1 = blocked), as everywhere
in this project. Shapes: N texts, L = max_len.
"""

import collections
import functools
import re

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from data_utils import fileio

# Hugging Face's WordPiece model treats words longer than this (in characters) as unknown.
MAX_CHARS_PER_WORD = 100
_ENCODE_BATCH = 1024
# BertNormalizer(clean_text=True): NUL, U+FFFD and "other" characters (Cc except \t\n\r, Cf,
# Co) are removed, every whitespace character becomes a space.
_REMOVE_REGEX = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\x{fffd}\p{Cf}\p{Co}]"
_SPACE_REGEX = r"[\t\n\r\p{Z}]"
# BERT's word splitting (tf-text's BasicTokenizer patterns): runs of whitespace are dropped;
# ASCII and Unicode punctuation and each CJK ideograph become words of their own.
_PUNCT_CJK_REGEX = "|".join([
    r"[!-/]", r"[:-@]", r"[\[-`]", r"[{-~]", r"[\p{P}]",
    r"[\x{4E00}-\x{9FFF}]", r"[\x{3400}-\x{4DBF}]", r"[\x{20000}-\x{2A6DF}]",
    r"[\x{2A700}-\x{2B73F}]", r"[\x{2B740}-\x{2B81F}]", r"[\x{2B820}-\x{2CEAF}]",
    r"[\x{F900}-\x{FAFF}]", r"[\x{2F800}-\x{2FA1F}]"])
_DELIM_REGEX = r"\s+|" + _PUNCT_CJK_REGEX
# Python's str.isspace characters (= the Unicode `\s` of Python's re; all below U+3001).
_PY_SPACES = [c for c in range(0x3001) if chr(c).isspace()]


class _HFBasicTokenizer(tf_text.Tokenizer):
  """The word-splitting stage of `tensorflow_text.BertTokenizer`, done the Hugging Face way.

  Plugged in through BertTokenizer's `basic_tokenizer_class`, so BertTokenizer
  runs it and then its WordPiece stage. Like HF: special-token strings in the
  raw text (`special_tokens`, matched case-sensitively) become words of their
  own, looked up whole by the WordPiece stage; the rest is normalised like HF's
  `BertNormalizer` and split like BERT (`_DELIM_REGEX`). tf-text's own stage
  differs: it lower-cases by NFKC case folding (it turns "ß" into "ss", "ﬁ"
  into "fi"), splits only on ASCII whitespace and turns control characters
  into spaces, where HF removes control characters, maps every Unicode space
  to " " and, uncased, strips accents (NFD, then drops category Mn) and
  lower-cases code point by code point. Words longer than 100 characters
  become `unknown_token`, as in HF's WordPiece model.
  """

  def __init__(self, lower_case=False, keep_whitespace=False, normalization_form=None,
               preserve_unused_token=False, unknown_token="[UNK]", special_tokens=()):
    super().__init__()
    if keep_whitespace or normalization_form or preserve_unused_token:
      raise ValueError("_HFBasicTokenizer: only lower_case is supported")
    self._lower_case = lower_case
    self._unknown_token = unknown_token
    self._special_tokens = list(special_tokens)
    self._special_regex = "|".join(re.escape(tok) for tok in special_tokens)

  def _normalize(self, text):
    """HF's BertNormalizer on tf.string [S]."""
    text = tf.strings.regex_replace(text, _REMOVE_REGEX, "")
    text = tf.strings.regex_replace(text, _SPACE_REGEX, " ")
    if self._lower_case:
      text = tf_text.normalize_utf8(text, "NFD")
      text = tf.strings.regex_replace(text, r"\p{Mn}", "")
      # HF lower-cases each code point alone; ICU would write a word-final capital sigma as "ς"
      text = tf.strings.regex_replace(text, "\u03a3", "\u03c3")
      text = tf.strings.lower(text, encoding="utf-8")
    return text

  def tokenize(self, text_input):
    """Raw text -> words.

    Args:
      text_input: tf.string [N].

    Returns:
      tf.string RaggedTensor [N, (words)].
    """
    if not self._special_tokens:
      return self._split_words(self._normalize(text_input))
    segments = tf_text.regex_split(text_input, self._special_regex, self._special_regex)
    raw = segments.flat_values                                   # [S]
    special = tf.reduce_any(raw[:, None] == tf.constant(self._special_tokens)[None, :], axis=1)
    # a special segment is split as the one word "s", then that word is put back verbatim
    words = self._split_words(tf.where(special, "s", self._normalize(raw)))   # [S, (words)]
    row = words.value_rowids()
    words = words.with_flat_values(
        tf.where(tf.gather(special, row), tf.gather(raw, row), words.flat_values))
    return segments.with_flat_values(words).merge_dims(1, 2)

  def _split_words(self, text):
    """Normalised tf.string [S] -> words [S, (words)]; over-long words -> the unknown token."""
    words = tf_text.regex_split(text, _DELIM_REGEX, _PUNCT_CJK_REGEX)
    too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD
    return words.with_flat_values(tf.where(too_long, self._unknown_token, words.flat_values))


def _longest_first(len_a, len_b, budget):
  """Hugging Face `tokenizers`' longest_first truncation lengths.

  Args:
    len_a: int32 [N], tokens in A.
    len_b: int32 [N], tokens in B.
    budget: python int, tokens allowed for A and B together.

  Returns:
    (keep_a, keep_b), int32 [N] each.
  """
  fits = len_a + len_b <= budget
  a_is_short = len_a <= len_b                    # a tie counts A as the shorter one
  keep_short = tf.minimum(tf.where(a_is_short, len_a, len_b), budget // 2)
  keep_a = tf.where(a_is_short, keep_short, budget - keep_short)
  keep_b = tf.where(a_is_short, budget - keep_short, keep_short)
  return tf.where(fits, len_a, keep_a), tf.where(fits, len_b, keep_b)


def _as_ragged(ids, name):
  """A [N, (len)] RaggedTensor of int ids (a dense [N, len] tensor is accepted too)."""
  if not isinstance(ids, tf.RaggedTensor):
    ids = tf.RaggedTensor.from_tensor(tf.convert_to_tensor(ids))
  if ids.ragged_rank != 1 or ids.flat_values.shape.rank != 1:
    raise ValueError(f"{name}: want a [N, (len)] RaggedTensor, got shape {ids.shape}")
  return ids


def gather_rows(ids, start, pos, pad_id):
  """out[n, p] = ids[n, p - start[n]] (clipped; the caller masks what is outside the row).

  Args:
    ids: RaggedTensor [N, (len)].
    start: int32 [N], output position of each row's first token.
    pos: int32 [1, L], output positions.
    pad_id: python int, appended so the gather never indexes an empty tensor.

  Returns:
    int32 [N, L].
  """
  values = tf.concat([tf.cast(ids.values, tf.int32), [pad_id]], 0)
  row_start = tf.cast(ids.row_splits[:-1], tf.int32)
  index = row_start[:, None] + pos - start[:, None]
  return tf.gather(values, tf.clip_by_value(index, 0, tf.shape(values)[0] - 1))


def pack_pair(ids_a, ids_b, max_len, bos_id, eos_id, pad_id):
  """Packs id sequences like Hugging Face's MPNetTokenizer, in-graph.

  Single: `<s> A </s>`; pair: `<s> A </s></s> B </s>`; then right padding with
  `pad_id` to `max_len`. Too-long inputs are cut with HF's "longest_first" rule
  (module docstring). Dense ops on the ragged components only, so it works in
  tf.data, tf.function and XLA (jit_compile) alike.

  Args:
    ids_a: int32/int64 RaggedTensor [N, (len_a)], first sequences (no specials).
    ids_b: int32/int64 RaggedTensor [N, (len_b)] second sequences, or None.
    max_len: python int L, at least 2 (single) or 4 (pair).
    bos_id: `<s>` id (HF's cls token).
    eos_id: `</s>` id (HF's sep token).
    pad_id: `<pad>` id.

  Returns:
    dict: input_ids int32 [N, L]; input_mask float32 [N, L], 1.0 on padding.

  Raises:
    ValueError: max_len leaves no room for the special tokens (HF would then
      return the input uncut, at a length other than max_len).
  """
  specials = 2 if ids_b is None else 4
  if max_len < specials:
    raise ValueError(f"max_len={max_len}: need at least {specials} for the special tokens")
  budget = max_len - specials
  ids_a = _as_ragged(ids_a, "ids_a")
  len_a = tf.cast(ids_a.row_lengths(), tf.int32)
  if ids_b is None:
    keep_a = tf.minimum(len_a, budget)
  else:
    ids_b = _as_ragged(ids_b, "ids_b")
    keep_a, keep_b = _longest_first(len_a, tf.cast(ids_b.row_lengths(), tf.int32), budget)
  pos = tf.range(max_len, dtype=tf.int32)[None, :]
  end_a = (1 + keep_a)[:, None]                 # first position after A
  out = tf.where(pos == 0, bos_id, pad_id)
  out = tf.where((pos >= 1) & (pos < end_a), gather_rows(ids_a, tf.ones_like(len_a), pos, pad_id),
                 out)
  if ids_b is None:
    out = tf.where(pos == end_a, eos_id, out)
    length = end_a + 1
  else:
    start_b = end_a + 2
    end_b = start_b + keep_b[:, None]
    out = tf.where((pos == end_a) | (pos == end_a + 1) | (pos == end_b), eos_id, out)
    out = tf.where((pos >= start_b) & (pos < end_b),
                   gather_rows(ids_b, start_b[:, 0], pos, pad_id), out)
    length = end_b + 1
  return {"input_ids": tf.ensure_shape(out, [None, max_len]),
          "input_mask": tf.ensure_shape(tf.cast(pos >= length, tf.float32), [None, max_len])}


def _read_vocab(vocab_file):
  """vocab.txt -> list of pieces (id = line number), HF's `load_vocab` reading."""
  if not fileio.exists(vocab_file) or fileio.isdir(vocab_file):
    raise ValueError(f"{vocab_file}: vocab file not found")
  try:
    with fileio.open_text(vocab_file) as f:
      pieces = [line.rstrip("\n") for line in f]
  except UnicodeDecodeError as e:
    raise ValueError(f"{vocab_file}: not a UTF-8 vocab.txt ({e})") from None
  duplicated = [p for p, count in collections.Counter(pieces).items() if count > 1]
  if duplicated:
    raise ValueError(f"{vocab_file}: pieces on more than one line: {duplicated[:5]}")
  return pieces


class WordPieceTokenizer(tf.Module):
  """Hugging Face's MPNetTokenizer as TensorFlow ops (a tf.Module, so it can be exported).

  Attributes:
    vocab_file: the vocab.txt path.
    lower_case: whether text is lower-cased and accents stripped (uncased models).
    vocab_size: number of lines of vocab.txt.
    bos_id, eos_id, pad_id, mask_id, unk_id: ids of `<s>`, `</s>`, `<pad>`,
      `<mask>`, and `[UNK]` (or `<unk>` when the vocab has no `[UNK]`).
    unk_token: the unknown token's string.
  """

  def __init__(self, vocab_file, lower_case=True):
    super().__init__(name="wordpiece_tokenizer")
    pieces = _read_vocab(vocab_file)
    index = {p: i for i, p in enumerate(pieces)}
    self.unk_token = "[UNK]" if "[UNK]" in index else "<unk>"
    missing = [tok for tok in ("<s>", "</s>", "<pad>", "<mask>", self.unk_token)
               if tok not in index]
    if missing:
      raise ValueError(f"{vocab_file}: special tokens missing from the vocab: "
                       f"{', '.join(missing)} (want <s> </s> <pad> <mask> and [UNK] or <unk>)")
    self.vocab_file, self.lower_case = vocab_file, lower_case
    self.vocab_size = len(pieces)
    self.bos_id, self.eos_id, self.pad_id = index["<s>"], index["</s>"], index["<pad>"]
    self.mask_id, self.unk_id = index["<mask>"], index[self.unk_token]
    self._table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(pieces), tf.range(len(pieces), dtype=tf.int64)),
        num_oov_buckets=1)
    self._bert = tf_text.BertTokenizer(
        self._table, suffix_indicator="##",
        max_bytes_per_word=4 * MAX_CHARS_PER_WORD,  # the HF limit is in characters (above)
        token_out_type=tf.int64, unknown_token=self.unk_token, lower_case=lower_case,
        basic_tokenizer_class=functools.partial(
            _HFBasicTokenizer, unknown_token=self.unk_token,
            special_tokens=["<s>", "<pad>", "</s>", self.unk_token, "<mask>"]))
    self._encode_fn = None

  def tokenize(self, texts):
    """Texts -> word-piece ids (no special tokens); in-graph.

    Bytes that are not valid UTF-8 are first decoded to U+FFFD (one per maximal invalid
    subsequence, as Python's `bytes.decode("utf-8", "replace")`), so the ids are those of that
    Python text: the normalisation then removes U+FFFD, as HF's BertNormalizer does. (Applied to
    its raw bytes, RE2 would not see the invalid bytes as U+FFFD and they would survive as
    pieces.) On valid UTF-8 the decoding changes nothing.

    Args:
      texts: tf.string [N], any bytes.

    Returns:
      int32 RaggedTensor [N, (pieces)].
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank != 1:
      raise ValueError(f"tokenize: want texts of shape [N], got {texts.shape}")
    texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                         replacement_char=0xFFFD)
    pieces = self._bert.tokenize(texts)           # [N, (words), (pieces)]
    return tf.cast(pieces.merge_dims(1, 2), tf.int32)

  def tokenize_words_with_offsets(self, texts):
    """Texts -> (ids, starts, ends), exactly `squad_features.words_with_offsets`; in-graph.

    BERT's SQuAD recipe: each run of non-whitespace characters (Python's Unicode `\\S+`, i.e.
    not `str.isspace`; RE2's `\\s` would be ASCII only) is tokenized alone, and each of its
    pieces spans the whole word. Offsets are characters (code points) of the original text;
    bytes that are not valid UTF-8 count as the U+FFFD that replaces them.

    Args:
      texts: tf.string [N].

    Returns:
      (ids, starts, ends): int32 RaggedTensors [N, (pieces)].
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank != 1:
      raise ValueError(f"tokenize_words_with_offsets: want texts of shape [N], got {texts.shape}")
    chars = tf.strings.unicode_decode(texts, "UTF-8", errors="replace", replacement_char=0xFFFD)
    cps, row = chars.flat_values, tf.cast(chars.value_rowids(), tf.int32)
    index = tf.range(tf.size(cps))
    local = index - tf.gather(tf.cast(chars.row_splits, tf.int32), row)
    word_char = ~tf.reduce_any(cps[:, None] == tf.constant(_PY_SPACES)[None, :], axis=1)
    prev = tf.maximum(index - 1, 0)
    first = word_char & ((local == 0) | ~tf.gather(word_char, prev))
    word_of = tf.boolean_mask(tf.cumsum(tf.cast(first, tf.int32)) - 1, word_char)
    n_words = tf.reduce_sum(tf.cast(first, tf.int32))
    words = tf.strings.unicode_encode(tf.RaggedTensor.from_value_rowids(
        tf.boolean_mask(cps, word_char), word_of, nrows=n_words), "UTF-8")      # [W]
    word_local = tf.boolean_mask(local, word_char)
    word_start = tf.math.unsorted_segment_min(word_local, word_of, n_words)
    word_end = tf.math.unsorted_segment_max(word_local, word_of, n_words) + 1
    word_row = tf.boolean_mask(row, first)
    pieces = self.tokenize(words)                                            # [W, (pieces)]
    piece_word = tf.cast(pieces.value_rowids(), tf.int32)
    splits = tf.concat([[0], tf.cumsum(tf.math.unsorted_segment_sum(
        tf.cast(pieces.row_lengths(), tf.int64), word_row, tf.shape(texts)[0]))], 0)
    return tuple(tf.RaggedTensor.from_row_splits(x, splits, validate=False) for x in (
        pieces.flat_values, tf.gather(word_start, piece_word), tf.gather(word_end, piece_word)))

  def encode_lines(self, lines):
    """Many python strings -> lists of ids, in batches of eager calls (None -> []).

    Args:
      lines: list of str (or None).

    Returns:
      list of lists of int, one per line.
    """
    if self._encode_fn is None:
      self._encode_fn = tf.function(
          self.tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    out = []
    for start in range(0, len(lines), _ENCODE_BATCH):
      batch = ["" if line is None else line for line in lines[start:start + _ENCODE_BATCH]]
      ids = self._encode_fn(tf.constant(batch, tf.string))
      values, splits = ids.values.numpy(), ids.row_splits.numpy()
      out.extend(row.tolist() for row in np.split(values, splits[1:-1]))
    return out

  def encode(self, text):
    return self.encode_lines([text])[0]

  def pack(self, texts_a, texts_b=None, max_len=128):
    """Strings -> MPNet inputs (`pack_pair` of `tokenize`); in-graph, for training and serving.

    Args:
      texts_a: tf.string [N].
      texts_b: tf.string [N] or None (single sentences).
      max_len: python int L.

    Returns:
      dict: input_ids int32 [N, L]; input_mask float32 [N, L], 1.0 on padding.
    """
    ids_b = None if texts_b is None else self.tokenize(texts_b)
    return pack_pair(self.tokenize(texts_a), ids_b, max_len, self.bos_id, self.eos_id,
                     self.pad_id)
