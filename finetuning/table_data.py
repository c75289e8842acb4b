"""Your own classification data (`--task_name=custom`) and raw files to predict (`--predict_file`).

A file is a table whose columns are named, in one of three formats chosen by its name's ending:
  .tsv    tab-separated, a header line naming the columns, one row per line, no quoting (as
          GLUE's files: a quote is an ordinary character);
  .csv    comma-separated, a header row, quoting as RFC 4180 ("a, b"; "" inside quotes);
  .jsonl  one JSON object per line; its keys are the columns.
UTF-8 (a leading BOM dropped); blank lines are skipped and counted.

Columns are named by flags (`Columns`): one text (`text`) or two (`--text_b_column`), the label
(`label`: a class name, or a real-valued target with --regression) and optionally an id (`id`:
used when the file has it, else the example's id is SPLIT-LINE, its first line in the file).
A training file must have the label column; a dev, test or predict file may lack it (it is then
unlabelled: predicted, not scored).

The label set is `--labels` in its given order, else the training file's labels sorted
(numerically when every label is an integer, so 2 comes before 10; else as strings); the run
records it (classifier_task.TASK_FILE) so that evaluation, prediction and the exports use the
same order later.

Every error is one line naming the file (and line): a missing column (with the columns the file
has), a label outside the label set, an empty file, fewer than 2 labels.
"""

import csv
import dataclasses
import functools
import hashlib
import json
import math
import re

from data_utils import fileio
from finetuning import classifier_data

FORMATS = {".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl"}
SPLITS = ("train", "dev", "test")
_INTEGER = re.compile(r"^[+-]?\d+$")


@dataclasses.dataclass(frozen=True)
class Columns:
  """The column names of a table (flags in parentheses)."""
  text_a: str = "text"          # --text_a_column
  text_b: str = None            # --text_b_column (None: one text)
  label: str = "label"          # --label_column
  id: str = "id"                # --id_column (used when the file has it)


def file_format(path, flag=None):
  """tsv, csv or jsonl from PATH's ending; else a one-line ValueError."""
  for ending, kind in FORMATS.items():
    if str(path).lower().endswith(ending):
      return kind
  where = f"--{flag}={path}" if flag else str(path)
  raise ValueError(f"{where}: unknown format: name the file .tsv, .csv or .jsonl")


def find_split_file(data_dir, split):
  """DATA_DIR/SPLIT.{tsv,csv,jsonl}, or None; two of them is an error (which one is meant?)."""
  found = [fileio.join(data_dir, split + ending) for ending in FORMATS
           if fileio.exists(fileio.join(data_dir, split + ending))]
  if len(found) > 1:
    raise ValueError(f"--data_dir={data_dir}: {' and '.join(map(fileio.basename, found))} "
                     f"both hold the {split} split: keep one, or name it with --{split}_file")
  return found[0] if found else None


def _records(path):
  """(header or None, iterator of (line, {column: value})) of a table file. A delimited row's
  missing trailing cells are absent from its dict."""
  if not fileio.exists(path) or fileio.isdir(path):
    raise FileNotFoundError(f"{path}: not found")
  kind = file_format(path)
  if kind == "jsonl":
    return None, _json_records(path)
  delimiter, quoting = ("\t", csv.QUOTE_NONE) if kind == "tsv" else (",", csv.QUOTE_MINIMAL)
  rows = classifier_data.delimited_rows(path, delimiter, quoting)
  first = next(rows, None)
  if first is None:
    raise ValueError(f"{path}: empty file (expected a header line naming the columns)")
  header = [c.strip() for c in first[1]]
  return header, ((line, dict(zip(header, row))) for line, row in rows
                  if row and any(c.strip() for c in row))


def _json_records(path):
  with fileio.open_text(path, encoding="utf-8-sig", errors="surrogateescape") as f:
    for line_no, line in enumerate(f, 1):
      bad = classifier_data.UNDECODED.search(line)
      if bad:
        raise ValueError(f"{path}:{line_no}: not UTF-8 (byte 0x{ord(bad.group()) - 0xdc00:02x}); "
                         "the file must be UTF-8")
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{line_no}: not valid JSON ({e.msg})") from None
      except (ValueError, RecursionError) as e:     # a number too long, nesting too deep
        reason = str(e).split(":")[0] if isinstance(e, ValueError) else "nested too deep"
        raise ValueError(f"{path}:{line_no}: not valid JSON ({reason})") from None
      if not isinstance(record, dict):
        raise ValueError(f"{path}:{line_no}: not a JSON object")
      yield line_no, record


def _names(columns):
  return ", ".join(repr(c) for c in columns) or "none"


def _check_header(path, header, columns, optional):
  """A one-line error for the first needed column HEADER lacks (naming the flag and the columns
  the file has)."""
  for flag, name in (("text_a_column", columns.text_a), ("text_b_column", columns.text_b),
                     ("label_column", columns.label)):
    if name is not None and name not in optional and name not in header:
      raise ValueError(f"{path}: no column {name!r} (--{flag}); its columns: {_names(header)}")


def _value(path, line, record, name, flag, header):
  if name not in record:
    has = f"the header's {_names(header)}" if header is not None else f"keys: {_names(record)}"
    raise ValueError(f"{path}:{line}: no {name!r} (--{flag}); {has}")
  return record[name]


def _text(path, line, record, name, flag, header):
  value = _value(path, line, record, name, flag, header)
  if not isinstance(value, str):
    raise ValueError(f"{path}:{line}: {name!r} is not a string ({json.dumps(value)})")
  return value


def _label(path, line, value, name, labels, regression):
  """A class label (str) or a target (float) from a cell, checked against LABELS (None: any)."""
  if regression:
    try:
      score = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
      score = math.nan
    if not math.isfinite(score):
      raise ValueError(f"{path}:{line}: target {value!r} in {name!r} is not a number")
    return score
  if isinstance(value, int) and not isinstance(value, bool):
    value = str(value)
  if not isinstance(value, str) or not value.strip():
    raise ValueError(f"{path}:{line}: label {json.dumps(value)} in {name!r} is not a class name "
                     "(a string or an integer)")
  value = value.strip()
  if labels is not None and value not in labels:
    raise ValueError(f"{path}:{line}: label {value!r} is not one of {list(labels)}")
  return value


def has_column(path, name):
  """Whether table PATH has column NAME (a JSON Lines file: its first object has the key)."""
  header, records = _records(path)
  if header is not None:
    return name in header
  first = next(records, None)
  return first is not None and name in first[1]


def read_table(path, split, columns, labels=None, regression=False, report=print):
  """The examples of table PATH (ids SPLIT-LINE unless it has the id column).

  LABELS: the allowed class labels (None: any; the training file when they are read from it).
  The label column is read when the file has it (then every row needs a label), and required
  for SPLIT "train"."""
  header, records = _records(path)
  first = None
  if header is None:                        # JSON Lines: the first object shows the columns
    first = next(records, None)
    if first is None:
      raise ValueError(f"{path}: empty file (no JSON objects)")
    present = list(first[1])
  else:
    present = header
  labelled = columns.label in present
  optional = {columns.label} if split != "train" else set()
  if header is not None:
    _check_header(path, header, columns, optional)
  elif not labelled and split == "train":
    raise ValueError(f"{path}:{first[0]}: no {columns.label!r} (--label_column); keys: "
                     f"{_names(present)}")
  with_ids = columns.id is not None and columns.id in present
  examples, seen, total = [], {}, 0
  for line, record in ([first] if first else []) + list(records):
    total += 1
    text_a = _text(path, line, record, columns.text_a, "text_a_column", header)
    text_b = (None if columns.text_b is None else
              _text(path, line, record, columns.text_b, "text_b_column", header))
    label = None
    if labelled:
      label = _label(path, line, _value(path, line, record, columns.label, "label_column",
                                        header), columns.label, labels, regression)
    guid = f"{split}-{line}"
    if with_ids:
      guid = str(_value(path, line, record, columns.id, "id_column", header))
      if guid in seen:
        raise ValueError(f"{path}:{line}: id {guid!r} repeats line {seen[guid]} "
                         f"(column {columns.id!r})")
      seen[guid] = line
    examples.append(classifier_data.Example(guid, text_a, text_b, label))
  if not examples:
    raise ValueError(f"{path}: no examples (a header, no rows)")
  report(f"{path}: used {len(examples):,} "
         f"{'rows' if len(examples) != 1 else 'row'}" + ("" if labelled else " (no labels)"))
  return examples


def sort_labels(labels):
  """The label order read from a file: numerically when every label is an integer, else as
  strings."""
  labels = set(labels)
  if all(_INTEGER.match(l) for l in labels):
    return tuple(sorted(labels, key=lambda l: (int(l), l)))
  return tuple(sorted(labels))


def parse_labels(text):
  """--labels=a,b,c as a tuple, checked: at least 2, no repeats, none empty."""
  labels = tuple(l.strip() for l in str(text).split(","))
  if any(not l for l in labels):
    raise ValueError(f"--labels={text}: an empty label (separate the labels with commas)")
  if len(set(labels)) != len(labels):
    raise ValueError(f"--labels={text}: a label is given twice")
  if len(labels) < 2:
    raise ValueError(f"--labels={text}: a classifier needs at least 2 labels")
  return labels


def labels_from_file(path, columns):
  """The training file's label set in sort_labels order; at least 2."""
  examples = read_table(path, "train", columns, report=lambda _: None)
  labels = sort_labels(e.label for e in examples)
  if len(labels) < 2:
    raise ValueError(f"{path}: {len(labels)} label in column {columns.label!r} "
                     f"({', '.join(map(repr, labels))}): a classifier needs at least 2 (a "
                     "real-valued target: --regression)")
  return labels


def _read_split(spec, split, path, report, columns):
  return read_table(path, split, columns, labels=spec.labels or None,
                    regression=spec.is_regression, report=report)


def custom_spec(files, columns, labels, regression=False):
  """The TaskSpec of your own data: FILES {split: path}, COLUMNS, LABELS (a tuple; () for
  regression). Its cache key changes with the label set, the columns and regression."""
  a_col = (columns.text_a, columns.text_b, columns.label)
  key = hashlib.sha256(json.dumps([list(labels), dataclasses.astuple(columns), regression])
                       .encode()).hexdigest()[:8]
  return classifier_data.TaskSpec(
      "custom", tuple(labels), dict(files), {split: a_col for split in (*SPLITS, "predict")},
      reader="table", key=f"custom-{key}",
      read=functools.partial(_read_split, columns=columns))


def define_column_flags(text_a_help, label_help, missing_id):
  """--text_a_column, --text_b_column, --label_column and --id_column, the columns of a table
  (run_classifier.py's --task_name=custom and --predict_file, predict.py's --input); each
  script says what the first text and the label are for it, and how an example without an id
  is named (`missing_id`, e.g. "SPLIT-LINE")."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  flags.DEFINE_string("text_a_column", "text", text_a_help)
  flags.DEFINE_string("text_b_column", None,
                      "Column of the second text of a pair task (unset: one text).")
  flags.DEFINE_string("label_column", "label", label_help)
  flags.DEFINE_string("id_column", "id",
                      f"Column of the example ids, used when a file has it (else {missing_id}: "
                      "its line in the file); ids must not repeat.")
