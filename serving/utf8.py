"""Request text at the door: bytes -> valid UTF-8, the same way in the graph and in Python.

A served request is raw bytes and may hold anything (invalid sequences, lone continuation
bytes, overlong forms, encoded surrogates, a multi-byte character cut at the end). Every
serving signature (serving/export.py) first passes each string input through `decode`, so the
tokenizers, the character offsets and the SQuAD answer all see one valid UTF-8 text: the bytes
decoded as Python's `bytes.decode("utf-8", errors="replace")` decodes them (each maximal
invalid subsequence -> one U+FFFD), re-encoded. No op here can fail on a row's content, so one
hostile row never fails the other rows of its batch.

`python_text` is the Python path's twin (serving/tasks.py): the text the graph works on, as a
Python str, for a request given as bytes or str.
"""

import tensorflow as tf

REPLACEMENT = 0xFFFD
# Python's str.isspace() code points all lie below U+3001 (checked in the tests).
SPACE_LIMIT = 0x3001
_IS_SPACE = [chr(c).isspace() for c in range(SPACE_LIMIT)]


def is_python_space(code_points):
  """int32 code points [...] -> bool [...]: Python's str.isspace() of each character (the
  graph's `str.split()`)."""
  table = tf.constant(_IS_SPACE)
  inside = code_points < SPACE_LIMIT
  return inside & tf.gather(table, tf.clip_by_value(code_points, 0, SPACE_LIMIT - 1))


def decode(texts):
  """tf.string [...] of any bytes -> the same strings as valid UTF-8 (U+FFFD replacement).

  Idempotent: valid UTF-8 comes back unchanged (NUL and other control characters included).
  """
  return tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                      replacement_char=REPLACEMENT)


def python_text(value):
  """What `decode` makes of a request value, as str.

  bytes are decoded with replacement; a str is taken as its UTF-8 bytes (a lone surrogate, which
  UTF-8 cannot hold, as the three bytes "surrogatepass" writes, which decode to three U+FFFD as
  they do in the graph).
  """
  if isinstance(value, str):
    try:
      value.encode("utf-8")
      return value
    except UnicodeEncodeError:
      value = value.encode("utf-8", "surrogatepass")
  return bytes(value).decode("utf-8", "replace")


def python_texts(values):
  """`python_text` of each value of a (nested) list or array; the same nesting, as lists (None
  stays None: no text)."""
  if values is None:
    return None
  if isinstance(values, (str, bytes)):
    return python_text(values)
  return [python_texts(v) for v in values]
