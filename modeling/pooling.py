"""Sentence embeddings from token states: masked pooling and L2 normalisation, as
sentence-transformers' `Pooling` and `Normalize` modules compute them, for rows padded on either
side (XLNet's rows are left padded, MPNet's right padded: data_utils/layouts.py).

Modes, with sentence-transformers' name for each (`ST_MODES`):
  "mean"   the mean of the token states over the row's real tokens ("mean");
  "first"  the row's first REAL token ("cls"): MPNet's <s> at column 0; on a left-padded XLNet
           row the first piece of the text, not column 0 (which is padding);
  "last"   the row's last REAL token ("lasttoken"): XLNet's <cls> (the last column); on a
           right-padded MPNet row its final </s>, not column seq - 1.
sentence-transformers' "cls" is the first position its attention mask marks real (an argmax of
the mask), not column 0, so "first" equals it on both padding sides; so does "last".

A row with no real token (never made by layouts.py: every row holds its special tokens) pools
as sentence-transformers pools it: zeros for "mean" and "last", column 0 for "first".

The mask is the project's one convention: `input_mask` 1.0 on padding, 0.0 on tokens.
Pure TF functions: static shapes, no Python per row, usable under XLA and in SavedModels.
"""

import tensorflow as tf

MODES = ("mean", "first", "last")
ST_MODES = {"mean": "mean", "first": "cls", "last": "lasttoken"}
NORMALIZE_EPSILON = 1e-12       # torch.nn.functional.normalize's default
_MEAN_FLOOR = 1e-9              # sentence-transformers' clamp of the token count


def check_mode(mode):
  """Raises ValueError (one line) unless `mode` is one of MODES."""
  if mode not in MODES:
    raise ValueError(f"pooling mode {mode!r}: expected one of {', '.join(MODES)}")
  return mode


def pool(token_states, input_mask, mode="mean"):
  """One vector per row from its token states.

  Args:
    token_states: float [batch, seq, hidden], the encoder's last layer.
    input_mask: [batch, seq], 1 on padding, 0 on tokens (any numeric or bool dtype).
    mode: "mean" | "first" | "last" (the module docstring says what each reads).

  Returns:
    [batch, hidden] in token_states' dtype ("mean" sums in float32 for half-precision states).
  """
  check_mode(mode)
  token_states = tf.convert_to_tensor(token_states)
  dtype = token_states.dtype
  real = 1.0 - tf.cast(input_mask, tf.float32)                         # [batch, seq]
  if mode == "mean":
    states = tf.cast(token_states, tf.float32)
    total = tf.reduce_sum(states * real[:, :, None], axis=1)           # [batch, hidden]
    count = tf.maximum(tf.reduce_sum(real, axis=1, keepdims=True), _MEAN_FLOOR)
    return tf.cast(total / count, dtype)
  seq = tf.shape(token_states)[1]
  positions = tf.range(seq)[None, :]                                   # [1, seq]
  is_real = real > 0.5
  if mode == "first":
    first = tf.reduce_min(tf.where(is_real, positions, seq), axis=1)   # seq when none is real
    index = tf.where(first < seq, first, 0)
    return tf.gather(token_states, index[:, None], batch_dims=1)[:, 0]
  last = tf.reduce_max(tf.where(is_real, positions, -1), axis=1)       # -1 when none is real
  picked = tf.gather(token_states, tf.maximum(last, 0)[:, None], batch_dims=1)[:, 0]
  return picked * tf.cast(last >= 0, dtype)[:, None]


def normalize(x, epsilon=NORMALIZE_EPSILON):
  """L2 normalisation along the last axis as torch.nn.functional.normalize(x, p=2, dim=-1):
  x / max(||x||, epsilon), so a zero vector stays zero (its gradient is finite: 1 / epsilon).

  Args:
    x: float [..., dim]. Returns the same shape and dtype (computed in float32).
  """
  x = tf.convert_to_tensor(x)
  wide = tf.cast(x, tf.float32)       # half precision: epsilon ** 2 would underflow to 0
  squared = tf.reduce_sum(tf.square(wide), axis=-1, keepdims=True)
  # sqrt(max(s, eps^2)) == max(sqrt(s), eps), without sqrt's infinite gradient at 0
  return tf.cast(wide / tf.sqrt(tf.maximum(squared, float(epsilon) ** 2)), x.dtype)


def embed(token_states, input_mask, mode="mean", normalized=True):
  """pool() then, when `normalized`, normalize(): the sentence embedding of a
  SentenceTransformer built as (Transformer, Pooling(mode), Normalize).

  Args:
    token_states: float [batch, seq, hidden]; input_mask: [batch, seq], 1 on padding.
  Returns:
    [batch, hidden].
  """
  pooled = pool(token_states, input_mask, mode)
  return normalize(pooled) if normalized else pooled
