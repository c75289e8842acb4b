"""Token tagging (named entities) in the serving graph: raw text -> entity spans with character
offsets, the same as the Python path (finetuning/tag_spans.py) on the same bytes.

`tagger_module` builds the serving module; finetuning/tag_spans.export_tagger publishes it
through serving/export.save, checked against the Python path on PROBES (the export lives with
the task, above serving in the import layers, as every task's export does).

The signature `serving_default` takes `text` tf.string [N] and returns:

  entity_type  tf.string [N, E]  each entity's type ("PER" for B-PER / I-PER), "" padding
  start, end   int32 [N, E]      its character offsets in the text (code points of the text as
                                 decoded at the door, end exclusive), -1 padding
  count        int32 [N]         entities returned for the text (<= E), in text order
  tags         tf.string [N, W]  the tag of each whitespace word (the k-th of Python's
                                 `text.split()`), "" padding
  truncated    bool [N]          the text had more than E entities or more than W words: the
                                 first E entities / W tags are returned (every word is tagged,
                                 the cut is only in the output)

E (max_entities) and W (max_words) are fixed at export, so every request gets the same shapes
(TF Serving's dense outputs; a text alone and in a batch give the same answer).

The steps, each the Python path's (finetuning/tagging_features.py has the rules):
1. decode at the door (serving/utf8.py: invalid UTF-8 -> U+FFFD);
2. words: maximal runs of characters that are not Python `str.isspace` (so `text.split()`),
   with their character offsets;
3. each word tokenized alone by the family's in-graph tokenizer (export.graph_tokenizer);
4. rows: a text's words go in consecutive windows of whole words, each window a row of the
   family's layout (`tagging_features.windows`: a new window when the next word does not fit
   max_seq_length minus the 2 special tokens; a word longer than a row alone, cut to the row;
   words of no piece join the current window). A text longer than a row is therefore tagged
   in full, window by window, exactly as training and evaluation read it;
5. a word's tag: the argmax of its first piece's logits (no piece: "O");
6. entities by conlleval's rules (finetuning/entity_metrics.py, mode "conlleval"): an entity
   starts at B-X, or at I-X whose previous word's tag is not B-X / I-X; it runs over the
   following I-X and ends before the next word that is not I-X. Its span runs from its first
   word's first character to its last word's end, the original spacing between included.
"""

import re

import numpy as np
import tensorflow as tf

from data_utils import layouts
from serving import export, packing, utf8

PREFIX_CODES = {"O": 0, "B": 1, "I": 2}
MAX_ENTITIES = 64
MAX_WORDS = 256


def split_words(texts):
  """Whitespace words of each text, with character offsets (Python's `str.split()` words).

  Args:
    texts: tf.string [N], valid UTF-8 (decoded at the door).

  Returns:
    (words tf.string [V], row int32 [V] (the text of each word), start int32 [V], end int32 [V]
    (character offsets in its text, end exclusive)); V words of all texts, in text order.
  """
  chars = tf.strings.unicode_decode(texts, "UTF-8", errors="replace", replacement_char=0xFFFD)
  cps, row = chars.flat_values, tf.cast(chars.value_rowids(), tf.int32)
  index = tf.range(tf.size(cps))
  local = index - tf.gather(tf.cast(chars.row_splits, tf.int32), row)
  word_char = ~utf8.is_python_space(cps)
  prev_word_char = tf.gather(word_char, tf.maximum(index - 1, 0))
  first = word_char & ((local == 0) | ~prev_word_char)
  n_words = tf.reduce_sum(tf.cast(first, tf.int32))
  word_of = tf.boolean_mask(tf.cumsum(tf.cast(first, tf.int32)) - 1, word_char)
  words = tf.strings.unicode_encode(tf.RaggedTensor.from_value_rowids(
      tf.boolean_mask(cps, word_char), word_of, nrows=n_words), "UTF-8")
  word_local = tf.boolean_mask(local, word_char)
  start = tf.math.unsorted_segment_min(word_local, word_of, n_words)
  end = tf.math.unsorted_segment_max(word_local, word_of, n_words) + 1
  return words, tf.boolean_mask(row, first), start, end


def window_index(piece_counts, first_of_text, budget):
  """`tagging_features.windows` in the graph: the window (row of its text) of each word.

  Args:
    piece_counts: int32 [V], pieces of each word.
    first_of_text: bool [V], the word is its text's first.
    budget: python int, pieces a row holds.

  Returns:
    int32 [V], 0 for each text's first window.
  """
  def step(state, x):
    win, used = state
    n, first = x
    new = (used > 0) & (used + n > budget)
    return (tf.where(first, 0, tf.where(new, win + 1, win)),
            tf.where(first | new, n, used + n))

  zero = tf.constant(0, tf.int32)
  win, _ = tf.scan(step, (piece_counts, first_of_text), initializer=(zero, zero))
  return win


def label_codes(labels):
  """(prefix code [C + 1] (O 0, B 1, I 2), type index [C + 1], type names) of the labels, the
  extra last class being the "O" of a word with no piece. Each label is O, B-TYPE or I-TYPE
  (the tags finetuning/conll.py reads; ValueError naming the first that is not)."""
  parsed = []
  for label in labels:
    tag = re.fullmatch(r"([BI])-(\S+)", label)
    if label != "O" and tag is None:
      raise ValueError(f"label {label!r} is not O, B-TYPE or I-TYPE")
    parsed.append(tag.groups() if tag else ("O", ""))
  parsed.append(("O", ""))
  types = sorted({t for p, t in parsed if p != "O"})
  index = {t: k for k, t in enumerate(types)}
  return (np.array([PREFIX_CODES[p] for p, _ in parsed], np.int32),
          np.array([index.get(t, -1) for _, t in parsed], np.int32), types)


def entities(prefix, kind, row, n_texts):
  """conlleval's entities (module docstring, step 6) of words in text order.

  Args:
    prefix: int32 [V] (O 0, B 1, I 2), kind: int32 [V] type index, row: int32 [V] text of
      each word (sorted).
    n_texts: int32 scalar N.

  Returns:
    (first word, last word + 1, type index): int32 RaggedTensors [N, (entities)] of word
    indices into the V words.
  """
  index = tf.range(tf.size(prefix))
  prev = tf.maximum(index - 1, 0)
  same_text = (index > 0) & (tf.gather(row, prev) == row)
  cont = ((prefix == 2) & same_text & (tf.gather(prefix, prev) > 0)
          & (tf.gather(kind, prev) == kind))
  start = (prefix > 0) & ~cont
  inside = start | cont
  n_entities = tf.reduce_sum(tf.cast(start, tf.int32))
  entity_of = tf.boolean_mask(tf.cumsum(tf.cast(start, tf.int32)) - 1, inside)
  last = tf.math.unsorted_segment_max(tf.boolean_mask(index, inside), entity_of, n_entities)
  first_word = tf.boolean_mask(index, start)
  rows = tf.boolean_mask(row, start)
  ragged = lambda x: tf.RaggedTensor.from_value_rowids(x, rows, nrows=n_texts)
  return ragged(first_word), ragged(last + 1), ragged(tf.boolean_mask(kind, start))


def tagger_module(model, tokenizer, model_type, max_seq_length, labels,
                  max_entities=MAX_ENTITIES, max_words=MAX_WORDS, padding=None, xla=False):
  """`text` [N] -> entity_type, start, end, count, tags, truncated (module docstring).

  Args:
    model: a token-tagging model (families.get(model_type).with_head(..., {"type":
      "token_tagger", ...})): {"input_ids", "seg_ids", "input_mask"} [R, T] -> logits
      [R, T, C].
    tokenizer: the Python tokenizer the task used (SentencePiece Tokenizer or WordPiece).
    labels: the C tag strings (O, B-TYPE, I-TYPE), in the model's class order.
    max_entities, max_words: E and W of the outputs.
    padding, xla: as export.classifier_module.
  """
  tok = export.graph_tokenizer(tokenizer)
  budget = max_seq_length - layouts.special_count(model_type, False)
  if budget < 1:
    raise ValueError(f"--max_seq_length={max_seq_length}: no room for a piece in a "
                     f"{model_type} row")
  left = layouts.rows(model_type).left_padded
  padding, call = export.check_padding(padding, xla), export.model_call(model, xla)
  prefix_of, kind_of, types = label_codes(labels)
  prefix_of, kind_of = tf.constant(prefix_of), tf.constant(kind_of)
  tag_names = tf.constant(list(labels) + ["O"])
  type_names = tf.constant(types or [""])
  no_piece = len(labels)

  def serve(text):
    n_texts = tf.shape(text)[0]
    words, word_row, word_start, word_end = split_words(text)
    pieces = tok.tokenize(words)                                           # [V, (p)]
    counts = tf.cast(pieces.row_lengths(), tf.int32)
    index = tf.range(tf.size(word_row))
    first_of_text = (index == 0) | (tf.gather(word_row, tf.maximum(index - 1, 0)) != word_row)
    win = window_index(counts, first_of_text, budget)
    # rows: the windows of all texts in order; row_of_word is sorted
    windows_per_text = tf.math.unsorted_segment_max(win + 1, word_row, n_texts)
    windows_per_text = tf.maximum(windows_per_text, 0)
    first_row = tf.cumsum(windows_per_text, exclusive=True)
    n_rows = tf.reduce_sum(windows_per_text)
    row_of_word = tf.gather(first_row, word_row) + win
    row_ids = tf.RaggedTensor.from_value_rowids(pieces, tf.cast(row_of_word, tf.int64),
                                               nrows=tf.cast(n_rows, tf.int64))
    row_ids = row_ids.merge_dims(1, 2)                                     # [R, (pieces)]
    rows = packing.pack_rows(model_type, tok, row_ids, None, max_seq_length)
    rows = packing.trim_padding(rows, max_seq_length, left, padding)
    width = tf.shape(rows["input_ids"])[1]
    # each word's first piece: its place in the row's pieces, then the row's column
    before = tf.cumsum(counts, exclusive=True)
    row_before = tf.math.unsorted_segment_min(before, row_of_word, n_rows)       # [R]
    place = before - tf.gather(row_before, row_of_word)
    row_len = tf.minimum(tf.cast(row_ids.row_lengths(), tf.int32), budget)
    if left:      # `A <sep> <cls>` at the right end of the trimmed row
      column = width - 2 - tf.gather(row_len, row_of_word) + place
    else:         # `<s> A </s>`
      column = 1 + place
    has_piece = counts > 0
    column = tf.where(has_piece, column, 0)
    logits = tf.cast(call(rows), tf.float32)                               # [R, T, C]
    word_logits = tf.gather_nd(logits, tf.stack([row_of_word, column], 1))
    tag = tf.where(has_piece, tf.cast(tf.argmax(word_logits, -1), tf.int32), no_piece)
    first, last, kind = entities(tf.gather(prefix_of, tag), tf.gather(kind_of, tag), word_row,
                                 n_texts)
    shape = [None, max_entities]
    start = tf.gather(word_start, first)
    end = tf.gather(word_end, last - 1)
    n_entities = tf.cast(first.row_lengths(), tf.int32)
    n_words = tf.math.bincount(word_row, minlength=n_texts, maxlength=n_texts)
    tags = tf.RaggedTensor.from_value_rowids(tf.gather(tag_names, tag), word_row, nrows=n_texts)
    return {"entity_type": tf.gather(type_names, kind).to_tensor("", shape=shape),
            "start": start.to_tensor(-1, shape=shape),
            "end": end.to_tensor(-1, shape=shape),
            "count": tf.minimum(n_entities, max_entities),
            "tags": tags.to_tensor("", shape=[None, max_words]),
            "truncated": (n_entities > max_entities) | (n_words > max_words)}

  return export._Serving(model, tok, serve, [export._strings("text")], "tagger")  # noqa: SLF001


# The export's self-check inputs (finetuning/tag_spans.export_tagger): the shared probes,
# entity-ish text, invalid UTF-8, and a text longer than any row (several windows).
PROBES = tuple(export.PROBE_TEXTS) + (
    "John Smith   flew from New York\tto Paris ,  then Zürich.",
    b"Caf\xc3 M\xfcller \xe2\x82 in S\xc3\xa3o Paulo",
    " ".join(export.PROBE_TEXTS) * 3)
