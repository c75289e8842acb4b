"""Classification inputs, cached as TFRecords.

Rows are laid out per model type (data_utils/layouts.py: XLNet left padded with
<cls> last, MPNet `<s> A </s></s> B </s>` right padded); input_mask 1 on padding.
Features are cached under a name carrying the task, split, length, tokenizer,
model type and a stamp of the source file(s) (size and modification time), so an
edited data file is re-read; a cache that fails its size or CRC checks is rebuilt.

The cache directory (--cache_dir, default MODEL_DIR/features) is an output of kind
outputs.FEATURES: checked when the task is made (check_cache_dir: a file, or a folder of
somebody else's files, is refused in one line before any work) and marked when the first cache
file is written (claim_cache_dir). A directory an earlier version wrote (no marker, only files
named by `cache_name`) counts as ours.
"""

import hashlib
import re

import numpy as np
import tensorflow as tf

from data_utils import fileio
from data_utils import outputs
from data_utils import tfrecord
from data_utils import layouts

SEG_PAD = layouts.SEG_PAD
truncate_pair = layouts.truncate_pair


def encode(tokenizer, examples, max_seq_length, label_list, model_type="xlnet"):
  """Examples -> dict of numpy arrays [N, L] (+ label [N]), laid out for `model_type`."""
  out = layouts.encode_texts(tokenizer, [e.text_a for e in examples],
                             [e.text_b for e in examples], max_seq_length, model_type)
  if label_list:
    index = {l: i for i, l in enumerate(label_list)}
    out["label"] = np.array([index.get(e.label, -1) for e in examples], np.int32)
  else:
    out["label"] = np.array([e.label if e.label is not None else np.nan for e in examples],
                            np.float32)
  return out


def source_stamp(path):
  """8 hex digits from the size and modification time of `path` (a file, or every file
  under a directory); "none" if it does not exist (the reader then says so)."""
  if not fileio.exists(path):
    return "none"
  if fileio.isdir(path):
    files = sorted(fileio.join(d, f) for d, _, fs in fileio.walk(path) for f in fs)
  else:
    files = [path]
  key = "|".join(f"{f}:{fileio.size(f)}:{fileio.mtime_ns(f)}" for f in files)
  return hashlib.sha256(key.encode()).hexdigest()[:8]


def cache_name(task, split, max_seq_length, vocab_path, uncased, model_type="xlnet",
               source="none"):
  vocab_hash = hashlib.sha256(fileio.read_bytes(vocab_path)).hexdigest()[:10]
  return (f"{task}.{split}.len-{max_seq_length}.vocab-{vocab_hash}."
          f"{'uncased' if uncased else 'cased'}.{model_type}.src-{source}.tfrecord")


# cache_name's files, and fileio.atomic_write's temporary names of them
_CACHE_FILE = re.compile(r"^.+\.len-\d+\.vocab-[0-9a-f]{10}\.(cased|uncased)\.[A-Za-z0-9_]+"
                         r"\.src-(none|[0-9a-f]{8})\.tfrecord(\.tmp-[0-9]+-[0-9a-f]+)?$")


def is_cache_file(name):
  """Whether a file name is one `cache_name` gives (or its temporary name while written)."""
  return bool(_CACHE_FILE.match(name))


def is_earlier_cache(path):
  """Whether directory PATH, without the project's marker, is a feature cache of an earlier
  version: it holds files and every one of them is named by `cache_name`."""
  if outputs.read_marker(path) is not None or not fileio.isdir(path):
    return False
  names = fileio.listdir_light(path)
  return bool(names) and all(is_cache_file(n) for n in names)


def check_cache_dir(path, flag="cache_dir"):
  """ValueError (one line naming `flag` and PATH) unless PATH may hold the feature cache:
  absent, empty, marked as a feature cache, or an earlier version's cache (is_earlier_cache).
  Writes nothing."""
  return outputs.check_dir(path, flag, outputs.FEATURES,
                           earlier=lambda names: all(is_cache_file(n) for n in names))


def claim_cache_dir(path, flag="cache_dir"):
  """check_cache_dir again (the path may have changed since), then PATH created and marked as
  a feature cache; call before writing the first cache file."""
  check_cache_dir(path, flag)
  outputs.claim_dir(path, outputs.FEATURES)


def count_records(path, max_seq_length):
  """The number of feature records in cache file `path` (they all have one size)."""
  return fileio.size(path) // (16 + _layout(max_seq_length).record_bytes)


def check_cache(path, max_seq_length):
  """ValueError naming `path` unless it holds whole, intact feature records."""
  data = fileio.read_bytes(path)
  try:
    tfrecord.unframe(data, _layout(max_seq_length).record_bytes)
  except ValueError as e:
    raise ValueError(f"{path}: {e}") from None


def _layout(max_seq_length):
  return tfrecord.ExampleLayout({"input_ids": 4 * max_seq_length, "seg_ids": max_seq_length,
                                 "input_mask": max_seq_length, "label": 4})


def write_cache(path, features):
  """Writes the features (atomically) as fixed-size records."""
  n, length = features["input_ids"].shape
  label = features["label"]
  arrays = {"input_ids": features["input_ids"].astype("<i4").view(np.uint8),
            "seg_ids": features["seg_ids"].astype(np.uint8),
            "input_mask": features["input_mask"].astype(np.uint8),
            "label": label.astype("<i4" if label.dtype.kind == "i" else "<f4").view(
                np.uint8).reshape(n, 4)}
  fileio.write_atomic(path, tfrecord.frame(_layout(length).serialize(arrays)))


def parse(serialized, max_seq_length, regression):
  spec = {k: tf.io.FixedLenFeature([], tf.string)
          for k in ("input_ids", "seg_ids", "input_mask", "label")}
  raw = tf.io.parse_example(serialized, spec)
  length = max_seq_length
  out = {"input_ids": tf.reshape(tf.io.decode_raw(raw["input_ids"], tf.int32), [-1, length]),
         "seg_ids": tf.cast(tf.reshape(tf.io.decode_raw(raw["seg_ids"], tf.uint8), [-1, length]),
                            tf.int32),
         "input_mask": tf.cast(tf.reshape(tf.io.decode_raw(raw["input_mask"], tf.uint8),
                                          [-1, length]), tf.float32)}
  label = tf.io.decode_raw(raw["label"], tf.float32 if regression else tf.int32)
  out["label"] = tf.reshape(label, [-1])
  return out
