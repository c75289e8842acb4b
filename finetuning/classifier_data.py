"""Classification datasets in their official file layouts.

GLUE (TSV): CoLA, SST-2, MRPC, STS-B (regression), QQP, MNLI (matched and
mismatched dev/test), QNLI, RTE, WNLI, AX (diagnostic, predicted with an MNLI
model). Text classification: IMDB (aclImdb directory layout), Yelp-2, Yelp-5,
DBpedia, AG News, Amazon-2, Amazon-5 (the CSV layouts of Zhang et al. 2015).

Every reader returns a list of Example; a malformed line is an error naming the
file and line, a label outside the task's label set too.
"""

import csv
import dataclasses
import glob
import os

csv.field_size_limit(1 << 30)


@dataclasses.dataclass
class Example:
  guid: str
  text_a: str
  text_b: str = None
  label: object = None      # str class label, float for regression, None for test sets


@dataclasses.dataclass
class TaskSpec:
  name: str
  labels: tuple             # () for regression
  files: dict               # split -> file name (GLUE) or pattern
  columns: dict             # split -> (a column, b column or None, label column or None)
  header: object = True     # True/False, or the set of splits whose file has a header
  submission: dict = None   # split -> GLUE submission file name
  reader: str = "tsv"

  @property
  def is_regression(self):
    return not self.labels


_NLI3 = ("contradiction", "entailment", "neutral")
_NLI2 = ("entailment", "not_entailment")
GLUE = {
    "cola": TaskSpec("cola", ("0", "1"), {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
                     {"train": (3, None, 1), "dev": (3, None, 1), "test": (1, None, None)},
                     header={"test"}, submission={"test": "CoLA.tsv"}),
    "sst-2": TaskSpec("sst-2", ("0", "1"), {"train": "train.tsv", "dev": "dev.tsv",
                                            "test": "test.tsv"},
                      {"train": (0, None, 1), "dev": (0, None, 1), "test": (1, None, None)},
                      submission={"test": "SST-2.tsv"}),
    "mrpc": TaskSpec("mrpc", ("0", "1"), {"train": "train.tsv", "dev": "dev.tsv",
                                          "test": "test.tsv"},
                     {"train": (3, 4, 0), "dev": (3, 4, 0), "test": (3, 4, None)},
                     submission={"test": "MRPC.tsv"}),
    "sts-b": TaskSpec("sts-b", (), {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
                      {"train": (7, 8, 9), "dev": (7, 8, 9), "test": (7, 8, None)},
                      submission={"test": "STS-B.tsv"}),
    "qqp": TaskSpec("qqp", ("0", "1"), {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
                    {"train": (3, 4, 5), "dev": (3, 4, 5), "test": (1, 2, None)},
                    submission={"test": "QQP.tsv"}),
    "mnli": TaskSpec("mnli", _NLI3, {"train": "train.tsv", "dev": "dev_matched.tsv",
                                     "dev_mismatched": "dev_mismatched.tsv",
                                     "test": "test_matched.tsv",
                                     "test_mismatched": "test_mismatched.tsv"},
                     {"train": (8, 9, -1), "dev": (8, 9, -1), "dev_mismatched": (8, 9, -1),
                      "test": (8, 9, None), "test_mismatched": (8, 9, None)},
                     submission={"test": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"}),
    "qnli": TaskSpec("qnli", _NLI2, {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
                     {"train": (1, 2, 3), "dev": (1, 2, 3), "test": (1, 2, None)},
                     submission={"test": "QNLI.tsv"}),
    "rte": TaskSpec("rte", _NLI2, {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
                    {"train": (1, 2, 3), "dev": (1, 2, 3), "test": (1, 2, None)},
                    submission={"test": "RTE.tsv"}),
    "wnli": TaskSpec("wnli", ("0", "1"), {"train": "train.tsv", "dev": "dev.tsv",
                                          "test": "test.tsv"},
                     {"train": (1, 2, 3), "dev": (1, 2, 3), "test": (1, 2, None)},
                     submission={"test": "WNLI.tsv"}),
    "ax": TaskSpec("ax", _NLI3, {"test": "diagnostic.tsv"}, {"test": (1, 2, None)},
                   submission={"test": "AX.tsv"}),
}

# label, then text columns (joined with a space), per Zhang et al.'s CSVs
TEXT = {
    "yelp-2": TaskSpec("yelp-2", ("1", "2"), {"train": "train.csv", "test": "test.csv"},
                       {"train": ((1,), None, 0), "test": ((1,), None, 0)}, False, None, "csv"),
    "yelp-5": TaskSpec("yelp-5", ("1", "2", "3", "4", "5"),
                       {"train": "train.csv", "test": "test.csv"},
                       {"train": ((1,), None, 0), "test": ((1,), None, 0)}, False, None, "csv"),
    "amazon-2": TaskSpec("amazon-2", ("1", "2"), {"train": "train.csv", "test": "test.csv"},
                         {"train": ((1, 2), None, 0), "test": ((1, 2), None, 0)}, False, None,
                         "csv"),
    "amazon-5": TaskSpec("amazon-5", ("1", "2", "3", "4", "5"),
                         {"train": "train.csv", "test": "test.csv"},
                         {"train": ((1, 2), None, 0), "test": ((1, 2), None, 0)}, False, None,
                         "csv"),
    "dbpedia": TaskSpec("dbpedia", tuple(str(i) for i in range(1, 15)),
                        {"train": "train.csv", "test": "test.csv"},
                        {"train": ((1, 2), None, 0), "test": ((1, 2), None, 0)}, False, None,
                        "csv"),
    "ag-news": TaskSpec("ag-news", ("1", "2", "3", "4"), {"train": "train.csv", "test": "test.csv"},
                        {"train": ((1, 2), None, 0), "test": ((1, 2), None, 0)}, False, None,
                        "csv"),
    "imdb": TaskSpec("imdb", ("neg", "pos"), {"train": "train", "test": "test"}, {}, False, None,
                     "imdb"),
}
# The CSV layouts ship train and test only; a dev.csv in the same layout (a held-out part of
# train, say) serves --eval_split=dev for choosing settings without touching test.
for _spec in TEXT.values():
  if _spec.reader == "csv":
    _spec.files["dev"], _spec.columns["dev"] = "dev.csv", _spec.columns["train"]
TASKS = {**GLUE, **TEXT}


def get_task(name):
  key = name.lower()
  if key not in TASKS:
    raise ValueError(f"--task_name={name!r} is not one of {', '.join(sorted(TASKS))}")
  return TASKS[key]


def _rows(path, delimiter, quoting):
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: not found")
  with open(path, encoding="utf-8", newline="") as f:
    for line_no, row in enumerate(csv.reader(f, delimiter=delimiter, quoting=quoting), 1):
      yield line_no, row


def _column(row, col, path, line_no):
  try:
    return row[col]
  except IndexError:
    raise ValueError(f"{path}:{line_no}: expected at least {abs(col) + (col >= 0)} columns, "
                     f"found {len(row)}") from None


def _check_label(spec, label, path, line_no):
  if spec.is_regression:
    try:
      return float(label)
    except ValueError:
      raise ValueError(f"{path}:{line_no}: score {label!r} is not a number") from None
  if label not in spec.labels:
    raise ValueError(f"{path}:{line_no}: label {label!r} is not one of {list(spec.labels)}")
  return label


def read_split(spec, data_dir, split):
  """The examples of one split ("train", "dev", "test", ...)."""
  if split not in spec.files:
    raise ValueError(f"task {spec.name} has no {split} split (has {', '.join(spec.files)})")
  path = os.path.join(data_dir, spec.files[split])
  if spec.reader == "imdb":
    return _read_imdb(spec, path)
  a_col, b_col, label_col = spec.columns[split]
  delimiter, quoting = ("\t", csv.QUOTE_NONE) if spec.reader == "tsv" else (",", csv.QUOTE_MINIMAL)
  has_header = spec.header if isinstance(spec.header, bool) else split in spec.header
  examples = []
  for line_no, row in _rows(path, delimiter, quoting):
    if has_header and line_no == 1:
      continue
    if not row or all(not c.strip() for c in row):
      continue
    if isinstance(a_col, tuple):
      text_a = " ".join(_column(row, c, path, line_no) for c in a_col)
    else:
      text_a = _column(row, a_col, path, line_no)
    text_b = None if b_col is None else _column(row, b_col, path, line_no)
    label = None
    if label_col is not None:
      label = _check_label(spec, _column(row, label_col, path, line_no).strip(), path, line_no)
    guid = row[0] if split.startswith("test") and has_header else f"{split}-{line_no}"
    examples.append(Example(guid, text_a, text_b, label))
  if not examples:
    raise ValueError(f"{path}: no examples")
  return examples


def _read_imdb(spec, split_dir):
  examples = []
  for label in spec.labels:
    files = sorted(glob.glob(os.path.join(split_dir, label, "*.txt")))
    for path in files:
      with open(path, encoding="utf-8") as f:
        text = f.read().replace("<br />", " ")
      examples.append(Example(os.path.basename(path), text, None, label))
  if not examples:
    raise FileNotFoundError(f"{split_dir}: no {'/'.join(spec.labels)}/*.txt files (aclImdb layout)")
  return examples
