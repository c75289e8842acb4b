"""SQuAD in the serving graph: doc-stride windows and best-answer extraction as TF ops.

The same windows as finetuning/squad_features.make_features (inference rows) and the same
best answer as finetuning/squad.extract_answers, written with TensorFlow ops on ragged ids so
they run inside a SavedModel signature with an unknown number of questions:

  query_ids [N, (q)], doc_ids [N, (n)] --make_windows--> rows [W, L] + per-window infos [W]
  rows --XLNetSquadModel / MPNetSquadModel--> beam outputs [W, ...]
  beam outputs + infos + piece character offsets [N, (n)] + contexts [N] --extract_best-->
      answer, start, end, score, no_answer_probability [N]

Shapes: N questions, W windows (all questions' windows, grouped by question in order), L =
max_seq_length, S = start_n_top, E = end_n_top, C candidates (valid (window, start, end)
triples of the beam, in the order extract_answers visits them).
"""

import tensorflow as tf

from data_utils.tokenization import CLS_ID, SEP_ID
from data_utils import layouts
from serving import utf8

MODEL_INPUTS = layouts.MODEL_INPUTS     # a window holds every model input
WINDOW_INFOS = ("example_index", "span_start", "length", "doc_offset")

def window_counts(doc_lengths, max_doc, doc_stride):
  """Windows per question: 1 if the paragraph fits, else 1 + ceil((n - max_doc) / stride).

  make_features' loop starts windows at 0, stride, 2 stride, ... and stops at the first one
  reaching the end (k stride + max_doc >= n); check_window_flags guarantees
  max_doc >= doc_stride, so every later window holds at least one piece.

  Args:
    doc_lengths: int32 [N] paragraph pieces.
    max_doc: int32 [N] paragraph pieces a window can hold.
    doc_stride: python int.

  Returns:
    int32 [N], at least 1.
  """
  over = tf.maximum(doc_lengths - max_doc, 0)
  return 1 + (over + doc_stride - 1) // doc_stride


def _pieces(flat_ids, starts, lengths):
  """flat_ids [T], starts / lengths int32 [W] -> int32 [W, (lengths)] slices of flat_ids."""
  return tf.gather(flat_ids, tf.ragged.range(starts, starts + lengths))


def _columns(values, rows):
  """The int32 ids `values` as a ragged [rows, (len(values))] block."""
  return tf.RaggedTensor.from_tensor(tf.tile(tf.constant([values], tf.int32), [rows, 1]))


def _xlnet_window(doc, query, rows, pos, length, length_, q, q_, total, bos_id, eos_id, pad_id):
  """`doc <sep> query <sep> <cls>` (layouts.XLNetRows.squad_window in the graph): (ragged
  tokens [W, (t)], pad id, cls_index [W], doc_offset [W], seg [W, L], answerable [W, L]).
  length_, q_, total: [W, 1]. (The ops are made in the order the graph had before the
  registry, so exports stay byte-identical.)"""
  del q, bos_id, eos_id, pad_id
  tokens = tf.concat([doc, _columns([SEP_ID], rows), query, _columns([SEP_ID, CLS_ID], rows)],
                     axis=1)
  pad, cls_index, doc_offset = 0, total[:, 0] - 1, tf.zeros_like(length)
  seg = tf.where(pos <= length_, 0, tf.where(pos <= length_ + q_ + 1, 1, 2))
  seg = tf.where(pos < total, seg, layouts.SQUAD_SEG_PAD)
  answerable = (pos < length_) | (pos == total - 1)
  return tokens, pad, cls_index, doc_offset, seg, answerable


def _mpnet_window(doc, query, rows, pos, length, length_, q, q_, total, bos_id, eos_id, pad_id):
  """`<s> query </s></s> doc </s>` (layouts.MPNetRows.squad_window in the graph)."""
  del q_, total
  tokens = tf.concat([_columns([bos_id], rows), query, _columns([eos_id, eos_id], rows), doc,
                      _columns([eos_id], rows)], axis=1)
  pad, cls_index, doc_offset = pad_id, tf.zeros_like(length), q + 3
  seg = tf.zeros_like(pos + length_)
  answerable = (pos == 0) | ((pos >= doc_offset[:, None]) & (pos < doc_offset[:, None] + length_))
  return tokens, pad, cls_index, doc_offset, seg, answerable


# each family's window rows in the graph, by --model_type (the Python twins: layouts.ROWS)
WINDOW_ROWS = {"xlnet": _xlnet_window, "mpnet": _mpnet_window}


def make_windows(query_ids, doc_ids, max_seq_length, doc_stride, max_query_length,
                 model_type="xlnet", bos_id=None, eos_id=None, pad_id=None):
  """Doc-stride windows of every question: make_features' inference rows and infos.

  xlnet: `doc <sep> query <sep> <cls>`, right padded with id 0 and segment 3; segments doc and
  first <sep> 0, query and second <sep> 1, <cls> 2; p_mask 0 on doc pieces and <cls>.
  mpnet: `<s> query </s></s> doc </s>`, right padded with pad_id, segments 0; p_mask 0 on <s>
  and doc pieces. Both: input_mask 1.0 on padding. bos_id / eos_id / pad_id are MPNet's
  (the tokenizer's); XLNet uses the release's <sep>/<cls> and pads with 0, as make_features.

  Args:
    query_ids: int RaggedTensor [N, (q)] question pieces (cut to max_query_length here).
    doc_ids: int RaggedTensor [N, (n)] paragraph pieces.
    max_seq_length, doc_stride, max_query_length: python ints (checked by
      layouts.check_window_flags).
    model_type: "xlnet" or "mpnet".
    bos_id, eos_id, pad_id: python ints, mpnet only.

  Returns:
    dict: input_ids, seg_ids int32 [W, L], input_mask, p_mask float32 [W, L], cls_index
    int32 [W] (MODEL_INPUTS), and example_index, span_start, length, doc_offset int32 [W]
    (WINDOW_INFOS: the question of each window, its first paragraph piece, its paragraph
    pieces and the row position of its first paragraph piece).
  """
  layouts.check_window_flags(max_seq_length, doc_stride, max_query_length, model_type)
  specials = layouts.SQUAD_SPECIAL_TOKENS[model_type]
  query_ids = tf.cast(query_ids, tf.int32).with_row_splits_dtype(tf.int32)
  doc_ids = tf.cast(doc_ids, tf.int32).with_row_splits_dtype(tf.int32)
  q_len = tf.minimum(query_ids.row_lengths(), max_query_length)          # [N]
  n_len = doc_ids.row_lengths()                                          # [N]
  max_doc = max_seq_length - q_len - specials                            # [N] >= doc_stride
  counts = window_counts(n_len, max_doc, doc_stride)                     # [N]
  example = tf.repeat(tf.range(tf.shape(counts)[0]), counts)             # [W]
  rows = tf.shape(example)[0]
  first_window = tf.cumsum(counts, exclusive=True)
  span_start = (tf.range(rows) - tf.gather(first_window, example)) * doc_stride
  length = tf.minimum(tf.gather(n_len, example) - span_start, tf.gather(max_doc, example))
  q = tf.gather(q_len, example)                                          # [W]
  doc = _pieces(doc_ids.flat_values, tf.gather(doc_ids.row_starts(), example) + span_start,
                length)
  query = _pieces(query_ids.flat_values, tf.gather(query_ids.row_starts(), example), q)
  pos = tf.range(max_seq_length)[None, :]                                # [1, L]
  length_, q_ = length[:, None], q[:, None]                              # [W, 1]
  total = length_ + q_ + specials                                        # [W, 1] real tokens
  tokens, pad, cls_index, doc_offset, seg, answerable = WINDOW_ROWS[model_type](
      doc, query, rows, pos, length, length_, q, q_, total, bos_id, eos_id, pad_id)
  return {
      "input_ids": tokens.to_tensor(default_value=pad, shape=[None, max_seq_length]),
      "seg_ids": seg,
      "input_mask": tf.cast(pos >= total, tf.float32),
      "p_mask": 1.0 - tf.cast(answerable, tf.float32),
      "cls_index": cls_index,
      "example_index": example, "span_start": span_start, "length": length,
      "doc_offset": doc_offset,
  }


def code_points(contexts):
  """tf.string [N] -> int32 code points [N, (chars)], int32 row splits; bytes that are not valid
  UTF-8 count as the U+FFFD that replaces them (Python's errors="replace")."""
  return tf.strings.unicode_decode(contexts, "UTF-8", errors="replace", replacement_char=0xFFFD
                                   ).with_row_splits_dtype(tf.int32)


def span_texts(contexts, example, start, stop):
  """contexts[example][start:stop] in code points (as code_points counts them), as valid UTF-8.

  Args:
    contexts: tf.string [N].
    example: int32 [C] the context of each span.
    start, stop: int32 [C] code-point offsets, 0 <= start <= stop <= its length, or -1, -1.

  Returns:
    tf.string [C] ("" for -1, -1). Gathers only in-range positions: no row can fail the batch.
  """
  chars = code_points(contexts)
  row = tf.gather(chars.row_starts(), example)
  row_len = tf.gather(chars.row_lengths(), example)
  a = tf.clip_by_value(start, 0, row_len)
  b = tf.clip_by_value(stop, a, row_len)
  return tf.strings.unicode_encode(
      tf.gather(chars.flat_values, tf.ragged.range(row + a, row + b)), "UTF-8")


def strip_spans(contexts, example, begin, end):
  """Python's `context[begin:end].strip()` as character spans, for many spans at once.

  Args:
    contexts: tf.string [N] (UTF-8; invalid bytes count as U+FFFD, see code_points).
    example: int32 [C] the context of each span.
    begin, end: int32 [C] code-point offsets (clipped to the context like a Python slice;
      negative values count as 0, unlike Python, and do not occur for piece offsets).

  Returns:
    (start, stop): int32 [C] code-point offsets of the stripped text in its context, end
    exclusive; -1, -1 where the stripped text is empty.
  """
  chars = code_points(contexts)
  text = tf.logical_not(utf8.is_python_space(chars.flat_values))                # [T]
  total = tf.size(text)
  before = tf.concat([[0], tf.cumsum(tf.cast(text, tf.int32))], 0)         # [T + 1]
  text_at = tf.concat([tf.cast(tf.where(text)[:, 0], tf.int32), [total]], 0)   # [K + 1]
  row = tf.gather(chars.row_starts(), example)
  row_len = tf.gather(chars.row_lengths(), example)
  a = row + tf.clip_by_value(begin, 0, row_len)                            # flat positions
  b = row + tf.clip_by_value(end, 0, row_len)
  first = tf.gather(text_at, tf.gather(before, a))       # first non-space at or after a
  last = tf.gather(text_at, tf.maximum(tf.gather(before, b) - 1, 0))   # last non-space < b
  found = first < b
  return tf.where(found, first - row, -1), tf.where(found, last + 1 - row, -1)


def _candidates(outputs, windows, start_n_top, end_n_top, max_answer_length):
  """Valid beam entries, flattened in extract_answers' order (window, start, end).

  Returns:
    (example int32 [C], first and last piece of each candidate int32 [C] (paragraph piece
    indices of its question), score float32 [C]).
  """
  info = {k: tf.cast(windows[k], tf.int32)[:, None, None] for k in WINDOW_INFOS}
  shape = [-1, start_n_top, end_n_top]
  s = tf.cast(outputs["start_top_index"], tf.int32)[:, :, None] - info["doc_offset"]
  e = tf.reshape(tf.cast(outputs["end_top_index"], tf.int32), shape) - info["doc_offset"]
  s = s + tf.zeros_like(e)                                                 # [W, S, E]
  valid = ((s >= 0) & (s < info["length"]) & (e < info["length"]) & (e >= s)
           & (e - s + 1 <= max_answer_length))
  score = (tf.cast(outputs["start_top_log_probs"], tf.float32)[:, :, None]
           + tf.reshape(tf.cast(outputs["end_top_log_probs"], tf.float32), shape))
  mask = tf.reshape(valid, [-1])
  pick = lambda x: tf.boolean_mask(tf.reshape(x + tf.zeros_like(e), [-1]), mask)
  return (pick(info["example_index"]), pick(info["span_start"] + s),
          pick(info["span_start"] + e), tf.boolean_mask(tf.reshape(score, [-1]), mask))


def choose(example, key, score, num_examples):
  """extract_answers' choice: per question the best score; among equal best scores the text
  that appeared first (dict insertion order under a stable sort), and of that text its first
  candidate reaching the score (the dict keeps the first maximum).

  Args:
    example: int32 [C] question of each candidate, candidates in visiting order.
    key: tf.string [C] candidate texts (equal keys = the same text of the same question).
    score: float32 [C].
    num_examples: int32 scalar N.

  Returns:
    int32 [N]: index of the chosen candidate, C where a question has none.
  """
  count = tf.size(example)
  _, text_id = tf.unique(key)           # numbered in order of first appearance
  best = tf.math.unsorted_segment_max(score, example, num_examples)
  top = score >= tf.gather(best, example)
  big = tf.int64.max
  rank = (tf.cast(text_id, tf.int64) * tf.cast(count, tf.int64)
          + tf.range(tf.cast(count, tf.int64)))                # (text order, position)
  winner = tf.math.unsorted_segment_min(tf.where(top, rank, big), example, num_examples)
  return tf.where(winner < big,
                  tf.cast(winner % tf.cast(tf.maximum(count, 1), tf.int64), tf.int32), count)


def extract_best(outputs, windows, doc_starts, doc_ends, contexts, start_n_top, end_n_top,
                 max_answer_length):
  """The best answer of each question from the beams of its windows (extract_answers' pick).

  Candidates: every beam entry (s, e) with s, e inside its window's paragraph part, e >= s,
  e - s + 1 <= max_answer_length; text context[doc_starts[s]:doc_ends[e]].strip(), score the
  start + end log-probabilities. The best-scoring text wins; equal scores go to the text that
  appeared first (window, start beam, end beam order), so the answer is predictions.json's and
  start/end are the nbest_predictions.json top entry's.

  Args:
    outputs: the SQuAD model's inference outputs on make_windows' rows: start_top_log_probs,
      start_top_index [W, S], end_top_log_probs, end_top_index [W, S * E] (start-major),
      cls_logits [W].
    windows: make_windows' dict (WINDOW_INFOS are used).
    doc_starts, doc_ends: int RaggedTensor [N, (n)] code-point span [start, end) of each
      paragraph piece in its context (squad_features.tokenize_with_offsets /
      words_with_offsets).
    contexts: tf.string [N] the paragraphs (serving decodes them at the door; bytes that are
      not valid UTF-8 count as U+FFFD here too, and the answer is then valid UTF-8).
    start_n_top, end_n_top, max_answer_length: python ints.

  Returns:
    dict of [N]: answer tf.string ("" when no candidate is valid or the best text strips to
    nothing), start / end int32 code-point offsets of the answer in its context, end
    exclusive (-1 / -1 for ""), score float32 (the best's log-probability sum; 0.0 when no
    candidate, as nbest_predictions.json's log_score), no_answer_probability float32
    (sigmoid of the smallest cls_logits of the question's windows = sigmoid(null_odds)).
  """
  num_examples = tf.shape(contexts)[0]
  example, first, last, score = _candidates(outputs, windows, start_n_top, end_n_top,
                                            max_answer_length)
  flat = lambda r: tf.cast(r.flat_values, tf.int32)
  piece0 = tf.gather(tf.cast(doc_starts.row_starts(), tf.int32), example)
  begin = tf.gather(flat(doc_starts), piece0 + first)
  end = tf.gather(flat(doc_ends), piece0 + last)
  start, stop = strip_spans(contexts, example, begin, end)
  text = span_texts(contexts, example, start, stop)
  key = tf.strings.join([tf.strings.as_string(example), text], separator="\x00")
  chosen = choose(example, key, score, num_examples)
  pad = lambda x, value: tf.gather(tf.concat([x, [value]], 0), chosen)
  null = tf.math.unsorted_segment_min(tf.cast(outputs["cls_logits"], tf.float32),
                                      tf.cast(windows["example_index"], tf.int32), num_examples)
  return {"answer": pad(text, ""), "start": pad(start, -1), "end": pad(stop, -1),
          "score": pad(score, 0.0), "no_answer_probability": tf.sigmoid(null)}
