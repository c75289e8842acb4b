"""Readable predictions files: JSON Lines, one object per example, shared by every task.

Layout (every fine-tuning task's `write_predictions` follows it): keys in this order: `id`,
the example's inputs (`text_a`/`text_b`; `question`/`context`; `article`/`question`/`options`),
`prediction`, `probabilities` (a {label: p} dict summing to 1; `score` for regression), and
`gold` when the split has labels. Each object is one line of UTF-8 (non-ASCII text written as
is, not as \\u escapes); numpy numbers are written as plain JSON numbers.

The file is published atomically (data_utils/fileio.py: a temporary name renamed when
complete), so a reader never sees half a file, and PATH may be local or a URL (gs://, ram://).
"""

import json
import math

import numpy as np

from data_utils import fileio


def plain(value):
  """VALUE with numpy scalars and arrays (nested in dicts, lists, tuples) as Python's own
  numbers and lists, which `json` writes; a non-finite float is refused (not valid JSON)."""
  if isinstance(value, dict):
    return {str(k): plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple, np.ndarray)):
    return [plain(v) for v in value]
  if isinstance(value, (bool, np.bool_)):
    return bool(value)
  if isinstance(value, (int, np.integer)):
    return int(value)
  if isinstance(value, (float, np.floating)):
    value = float(value)
    if not math.isfinite(value):
      raise ValueError(f"a prediction holds {value}, which JSON cannot hold")
    return value
  return value


def dumps(row):
  """One object as one line (no newline): keys in insertion order, non-ASCII kept."""
  return json.dumps(plain(row), ensure_ascii=False)


def write_jsonl(path, rows):
  """Writes ROWS (an iterable of dicts) to PATH as JSON Lines, atomically; returns PATH."""
  with fileio.atomic_write(path) as f:
    for row in rows:
      f.write(dumps(row) + "\n")
  return path


def read_jsonl(path):
  """The objects of a JSON Lines file, in order (blank lines skipped)."""
  return [json.loads(line) for line in fileio.read_text(path).splitlines() if line.strip()]


def probabilities(labels, probs_row):
  """{label: p} of one example: LABELS (names, in the model's output order) against
  PROBS_ROW `[num_labels]` (a softmax row), as Python floats."""
  probs_row = np.asarray(probs_row, np.float64).reshape(-1)
  if len(labels) != len(probs_row):
    raise ValueError(f"{len(labels)} labels for {len(probs_row)} probabilities")
  return {str(label): float(p) for label, p in zip(labels, probs_row)}

