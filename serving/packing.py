"""In-graph row packing for the serving signatures: token ids -> model inputs.

The same rows as the Python feature code (data_utils/layouts.py, classifier_features.encode,
race.encode), built with TensorFlow ops on ragged ids so they run inside a SavedModel:

xlnet: `A <sep> [B <sep>] <cls>`, LEFT padded (id 0, segment 4, input_mask 1.0), segment ids
  A = 0, B = 1, <cls> = 2. Too-long pairs are cut the release's way, one token at a time from
  the longer text (B on a tie), whose closed form is `xlnet_keep_lengths`.
mpnet: `<s> A </s>` / `<s> A </s></s> B </s>`, right padded (data_utils/wordpiece.pack_pair:
  Hugging Face's longest_first rule); segment ids 0.

Shapes: N rows, L = max_len; ids are int RaggedTensors [N, (len)].

Rows are built at L, then `trim_padding` cuts the batch to its longest row (or to the smallest
of a few lengths chosen at export, for XLA): padding is masked out of attention and positions
are relative (XLNet) or counted from the first token (MPNet, right padded), so the model's
outputs on the rows' tokens do not change (up to float rounding), and most of the work of a
batch of short texts is not spent on padding.
"""

import tensorflow as tf

from data_utils.tokenization import CLS_ID, SEP_ID
from data_utils import wordpiece
from data_utils import layouts
from data_utils.layouts import SEG_PAD


def xlnet_keep_lengths(len_a, len_b, budget):
  """How many tokens of A and B the release's pair truncation keeps.

  The release pops the last token of the longer text (B on a tie) until
  len_a + len_b <= budget. Closed form: with excess = len_a + len_b - budget > 0, when the
  longer text is longer by at least the excess only it is cut; otherwise both end at half the
  budget, A taking the odd token (the tie rule cuts B first).

  Args:
    len_a: int32 [N].
    len_b: int32 [N].
    budget: python int or int32 scalar, tokens allowed for A and B together (>= 0).

  Returns:
    (keep_a, keep_b): int32 [N] each.
  """
  excess = len_a + len_b - budget
  half_a, half_b = budget - budget // 2, budget // 2
  keep_a = tf.where(len_a - len_b >= excess, len_a - excess, half_a)
  keep_b = tf.where(len_b - len_a >= excess, len_b - excess, half_b)
  keep_a = tf.where(len_b - len_a >= excess, len_a, keep_a)
  keep_b = tf.where(len_a - len_b >= excess, len_b, keep_b)
  fits = excess <= 0
  return tf.where(fits, len_a, keep_a), tf.where(fits, len_b, keep_b)


def _ragged(ids):
  ids = ids if isinstance(ids, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(ids)
  return tf.cast(ids, tf.int32)


def take_first(ids, keep):
  """Row n keeps its first keep[n] ids. ids [N, (len)], keep int32 [N] -> [N, (keep)]."""
  ids = _ragged(ids)
  position = tf.ragged.range(tf.cast(ids.row_lengths(), tf.int32))
  return tf.ragged.boolean_mask(ids, position < tf.expand_dims(keep, 1))


def take_last(ids, keep):
  """Row n keeps its last keep[n] ids (all if shorter). ids [N, (len)] -> [N, (<= keep)]."""
  ids = _ragged(ids)
  length = tf.cast(ids.row_lengths(), tf.int32)
  position = tf.ragged.range(length)
  return tf.ragged.boolean_mask(ids, position >= tf.expand_dims(length - keep, 1))


def pack_xlnet(ids_a, ids_b, max_len, truncate=True):
  """XLNet rows (module docstring) from ragged ids.

  Built densely, as wordpiece.pack_pair: each row is A, <sep>, [B, <sep>,] <cls> ending at
  column L - 1, and each piece is written where it falls with one gather, not with ragged
  slices, concatenations and a ragged-to-dense copy (far fewer ops to trace).

  Args:
    ids_a: int RaggedTensor [N, (len_a)], first texts (no special tokens).
    ids_b: int RaggedTensor [N, (len_b)], second texts, or None (single texts).
    max_len: python int L.
    truncate: cut A (single) or the pair to fit; False when the caller already did (the rows
      must then fit in L).

  Returns:
    dict: input_ids int32 [N, L], seg_ids int32 [N, L], input_mask float32 [N, L] (1.0 on
    padding).
  """
  ids_a = _ragged(ids_a)
  len_a = tf.cast(ids_a.row_lengths(), tf.int32)
  specials = 2 if ids_b is None else 3
  budget = max_len - specials
  if budget < 0:
    raise ValueError(f"max_len={max_len}: need at least {specials} for the special tokens")
  one = tf.ones_like(len_a)
  if ids_b is None:
    keep_a = tf.minimum(len_a, budget) if truncate else len_a
    pieces = [(ids_a, keep_a, 0), (SEP_ID, one, 0), (CLS_ID, one, 2)]
  else:
    ids_b = _ragged(ids_b)
    len_b = tf.cast(ids_b.row_lengths(), tf.int32)
    keep_a, keep_b = (xlnet_keep_lengths(len_a, len_b, budget) if truncate
                      else (len_a, len_b))
    pieces = [(ids_a, keep_a, 0), (SEP_ID, one, 0), (ids_b, keep_b, 1), (SEP_ID, one, 1),
              (CLS_ID, one, 2)]
  position = tf.range(max_len)[None, :]                                      # [1, L]
  start = max_len - tf.add_n([length for _, length, _ in pieces])            # [N], left padded
  ids = tf.zeros_like(position + start[:, None])
  segs = tf.fill(tf.shape(ids), SEG_PAD)
  padding = position < start[:, None]
  for piece, length, segment in pieces:
    inside = (position >= start[:, None]) & (position < (start + length)[:, None])
    ids = tf.where(inside, piece if isinstance(piece, int) else
                   wordpiece.gather_rows(piece, start, position, 0), ids)
    segs = tf.where(inside, segment, segs)
    start += length
  return {"input_ids": tf.ensure_shape(ids, [None, max_len]),
          "seg_ids": tf.ensure_shape(segs, [None, max_len]),
          "input_mask": tf.ensure_shape(tf.cast(padding, tf.float32), [None, max_len])}


def pack_mpnet(tokenizer, ids_a, ids_b, max_len):
  """MPNet rows (module docstring) from ragged ids, the tokenizer's <s> </s> <pad> ids."""
  rows = wordpiece.pack_pair(_ragged(ids_a), None if ids_b is None else _ragged(ids_b),
                             max_len, tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id)
  rows["seg_ids"] = tf.zeros_like(rows["input_ids"])
  return rows


# the in-graph twin of each family's data_utils/layouts.py rows, by --model_type
GRAPH_PACKERS = {
    "xlnet": lambda tokenizer, ids_a, ids_b, max_len, truncate: pack_xlnet(ids_a, ids_b, max_len,
                                                                           truncate),
    "mpnet": lambda tokenizer, ids_a, ids_b, max_len, truncate: pack_mpnet(tokenizer, ids_a,
                                                                           ids_b, max_len),
}


def pack_rows(model_type, tokenizer, ids_a, ids_b, max_len, truncate=True):
  """Rows for `model_type` ("xlnet" or "mpnet"; the tokenizer gives MPNet's special ids).

  Returns dict input_ids, seg_ids, input_mask, each [N, L] (see pack_xlnet).
  """
  layouts.rows(model_type)                      # a one-line error for an unknown family
  return GRAPH_PACKERS[model_type](tokenizer, ids_a, ids_b, max_len, truncate)


def race_rows(model_type, tokenizer, context_ids, qa_ids, max_len, max_qa_length):
  """RACE rows as race.encode builds them: question+option keeps its last
  min(max_qa_length, budget) tokens, the article its first budget - len(qa).

  Args:
    context_ids: int RaggedTensor [R, (len)], the article of each row.
    qa_ids: int RaggedTensor [R, (len)], question+option of each row.

  Returns:
    dict input_ids, seg_ids, input_mask, each [R, L].
  """
  specials = layouts.special_count(model_type, pair=True)
  budget = max_len - specials
  if budget < 1 or max_qa_length < 1:
    raise ValueError(f"max_seq_length={max_len} / max_qa_length={max_qa_length} leave no room "
                     "for the question and option")
  qa = take_last(qa_ids, tf.fill([tf.shape(qa_ids.row_lengths())[0]], min(max_qa_length, budget)))
  qa_len = tf.cast(qa.row_lengths(), tf.int32)
  context = take_first(context_ids, tf.maximum(budget - qa_len, 0))
  return pack_rows(model_type, tokenizer, context, qa, max_len, truncate=False)


# the [N, L] inputs trim_padding cuts (input_mask: 1.0 on padding, as everywhere)
PER_POSITION = ("input_ids", "seg_ids", "input_mask", "p_mask")
PADDINGS = ("longest", "buckets", "max")


def length_buckets(max_len, smallest=16):
  """The lengths a batch is padded to with padding="buckets": powers of two from `smallest`
  below max_len, then max_len (128 -> 16, 32, 64, 128): at most log2(L / 16) + 1 shapes for
  XLA to compile per batch size, and a batch pads to less than twice its longest row."""
  buckets, n = [], smallest
  while n < max_len:
    buckets.append(n)
    n *= 2
  return tuple(buckets) + (max_len,)


def trim_padding(rows, max_len, left, padding="longest"):
  """Rows padded to max_len -> padded to the batch's longest row.

  Args:
    rows: dict of model inputs; those in PER_POSITION are [N, L] (input_mask 1.0 on padding),
      others (cls_index [N]) are kept as they are.
    max_len: python int L.
    left: True when the rows are left padded (XLNet classifier, RACE), False when right padded
      (MPNet, SQuAD windows).
    padding: "longest" (the longest row's length, at least 1), "buckets" (the smallest of
      length_buckets(L) that holds the longest row) or "max" (L: nothing cut).

  Returns:
    the same dict, PER_POSITION inputs [N, T] with T <= L: the last T columns (left padded)
    or the first T.
  """
  if padding not in PADDINGS:
    raise ValueError(f"padding={padding!r}: want one of {', '.join(PADDINGS)}")
  if padding == "max":
    return rows
  tokens = tf.reduce_sum(tf.cast(rows["input_mask"] < 0.5, tf.int32), axis=1)   # [N]
  longest = tf.reduce_max(tf.concat([tokens, [1]], 0))                          # >= 1
  if padding == "buckets":
    buckets = tf.constant(length_buckets(max_len), tf.int32)
    longest = tf.gather(buckets, tf.searchsorted(buckets, [longest])[0])
  cut = (lambda v: v[:, max_len - longest:]) if left else (lambda v: v[:, :longest])
  return {k: cut(v) if k in PER_POSITION else v for k, v in rows.items()}
