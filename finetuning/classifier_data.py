"""Classification datasets in their official file layouts.

GLUE (TSV): CoLA, SST-2, MRPC, STS-B (regression), QQP, MNLI (matched and
mismatched dev/test), QNLI, RTE, WNLI, AX (diagnostic, predicted with an MNLI
model). Text classification: IMDB (aclImdb directory layout), Yelp-2, Yelp-5,
DBpedia, AG News, Amazon-2, Amazon-5 (the CSV layouts of Zhang et al. 2015).

Every reader returns a list of Example and prints one summary line (what it used and
what it skipped, and why). A malformed line is an error naming the file and line, a
label outside the task's label set too; read_split says which lines are skipped instead.
"""

import csv
import dataclasses
import math
import re

from data_utils import fileio

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
  reader: str = "tsv"       # tsv | csv | imdb | table (your own data: finetuning/table_data.py)
  key: str = None           # the feature cache's name for the task (default: name)
  read: object = None       # read(spec, split, path, report) -> examples, else by `reader`

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


class _Lines:
  """A file's lines, keeping those of the row being parsed (to check its quotes)."""

  def __init__(self, f):
    self.f, self.current = f, []

  def __iter__(self):
    return self

  def __next__(self):
    line = next(self.f)
    self.current.append(line)
    return line


UNDECODED = re.compile("[\udc80-\udcff]")   # bytes that were not UTF-8 (surrogateescape)


def _quote_open(text, delimiter):
  """True when `text` (a row's lines) ends inside a quoted field, by the csv dialect's rules: a
  quote opens a field only at its start, "" inside one is a quote, a lone quote closes it (what
  follows joins the field); a quote inside an unquoted field is a character. (csv itself, not
  strict, returns such a field as if closed: a file cut inside its last field read silently.)"""
  state = "start"
  for c in text:
    if state == "quoted":
      state = "closing" if c == '"' else "quoted"
    elif state == "start" and c == '"' or state == "closing" and c == '"':
      state = "quoted"
    elif c == delimiter or c in "\r\n":
      state = "start"
    else:
      state = "field"
  return state == "quoted"


def delimited_rows(path, delimiter, quoting):
  """Yields (first line of the row, row) of a delimited UTF-8 file (a leading BOM dropped).

  A row holding bytes that are not UTF-8 is an error naming its line; so is a quoted field
  still open at the end of the file (a stray quote that swallowed every line after it).
  """
  if not fileio.exists(path) or fileio.isdir(path):
    raise FileNotFoundError(f"{path}: not found")
  with fileio.open_text(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
    lines = _Lines(f)
    reader = csv.reader(lines, delimiter=delimiter, quoting=quoting)
    start, row_lines = 1, []
    while True:
      lines.current = []
      try:
        row = next(reader)
      except StopIteration:
        break
      except csv.Error as e:
        raise ValueError(f"{path}:{start}: {e}") from None
      row_lines = lines.current
      bad = UNDECODED.search("\t".join(row))
      if bad:
        raise ValueError(f"{path}:{start}: not UTF-8 (byte 0x{ord(bad.group()) - 0xdc00:02x}); "
                         "the file must be UTF-8")
      yield start, row
      start = reader.line_num + 1
    if quoting != csv.QUOTE_NONE and _quote_open("".join(row_lines), delimiter):
      raise ValueError(f"{path}:{start - len(row_lines)}: a quoted field opened in this row "
                       "runs to the end of the file (a stray quote?)")


def _check_label(spec, label, path, line_no):
  if spec.is_regression:
    try:
      score = float(label)
    except ValueError:
      score = math.nan
    if not math.isfinite(score):
      raise ValueError(f"{path}:{line_no}: score {label!r} is not a number")
    return score
  if label not in spec.labels:
    raise ValueError(f"{path}:{line_no}: label {label!r} is not one of {list(spec.labels)}")
  return label


def _count(n, unit):
  return f"{n:,} {unit if n == 1 else unit + 's'}"


def split_path(spec, data_dir, split):
  """The file (or, for IMDB, the directory) a split is read from."""
  if split not in spec.files:
    raise ValueError(f"task {spec.name} has no {split} split (has {', '.join(spec.files)})")
  if spec.reader == "table":      # your own data: the files are named in full
    return spec.files[split]
  return fileio.join(data_dir, spec.files[split])


def read_split(spec, data_dir, split, report=print):
  """The examples of one split ("train", "dev", "test", ...); reports one summary line.

  Errors (one line, naming the file and line): a missing file, bytes that are not UTF-8, a
  label outside the task's labels (or a score that is not a finite number), no examples.
  Blank lines are skipped. A GLUE train/dev line with too few columns is skipped too, as the
  release does (official files have some: "there are some incomplete lines in QNLI"); in a
  GLUE test file it is an error (the submission needs every index), and so in the CSV
  layouts, which are regular. `report` gets the summary: lines used, skipped and why.
  """
  path = split_path(spec, data_dir, split)
  if spec.reader == "imdb":
    return _read_imdb(spec, path, report)
  if spec.read is not None:       # your own data (finetuning/table_data.py)
    return spec.read(spec, split, path, report)
  a_col, b_col, label_col = spec.columns[split]
  tsv = spec.reader == "tsv"
  delimiter, quoting = ("\t", csv.QUOTE_NONE) if tsv else (",", csv.QUOTE_MINIMAL)
  has_header = spec.header if isinstance(spec.header, bool) else split in spec.header
  skip_short = tsv and not split.startswith("test")
  unit = "line" if tsv else "row"
  cols = [c for c in (*(a_col if isinstance(a_col, tuple) else (a_col,)), b_col, label_col)
          if c is not None]
  needed = max(c + 1 if c >= 0 else -c for c in cols)
  examples, total, blank, short, first_short = [], 0, 0, 0, None
  for k, (line_no, row) in enumerate(delimited_rows(path, delimiter, quoting)):
    if has_header and k == 0:
      continue
    total += 1
    if not row or all(not c.strip() for c in row):
      blank += 1
      continue
    if len(row) < needed:
      if not skip_short:
        raise ValueError(f"{path}:{line_no}: expected at least {needed} columns, found {len(row)}")
      short += 1
      first_short = first_short or f"first: {unit} {line_no} has {len(row)} of {needed}"
      continue
    text_a = " ".join(row[c] for c in a_col) if isinstance(a_col, tuple) else row[a_col]
    text_b = None if b_col is None else row[b_col]
    label = (None if label_col is None
             else _check_label(spec, row[label_col].strip(), path, line_no))
    guid = row[0] if split.startswith("test") and has_header else f"{split}-{line_no}"
    examples.append(Example(guid, text_a, text_b, label))
  reasons = []
  if short:
    reasons.append(f"{short:,} with too few columns ({first_short})")
  if blank:
    reasons.append(f"{blank:,} blank")
  skipped = f"skipped {blank + short:,}: {', '.join(reasons)}" if reasons else ""
  if not examples:
    raise ValueError(f"{path}: no examples" + (f" ({_count(total, unit)}, {skipped})"
                                               if skipped else ""))
  report(f"{path}: used {len(examples):,} of {_count(total, unit)}"
         + (f"; {skipped}" if skipped else ""))
  return examples


def _read_imdb(spec, split_dir, report=print):
  examples, counts = [], []
  for label in spec.labels:
    files = fileio.glob(fileio.join(split_dir, label, "*.txt"))
    for path in files:
      try:
        data = fileio.read_bytes(path)
        text = data.decode("utf-8-sig")
      except OSError as e:
        raise ValueError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
      except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})"
                         ) from None
      examples.append(Example(fileio.basename(path), text.replace("<br />", " "), None, label))
    counts.append(f"{len(files):,} {label}")
  if not examples:
    raise FileNotFoundError(f"{split_dir}: no {'/'.join(spec.labels)}/*.txt files (aclImdb layout)")
  report(f"{split_dir}: used {len(examples):,} files ({', '.join(counts)})")
  return examples
