"""The files of sentence-pair training (run_pairs.py): pairs to train on, pairs to retrieve,
sentence pairs with gold similarity scores. Formats and column handling are
finetuning/table_data.py's: .tsv (a header line, no quoting), .csv (a header row, RFC 4180
quoting) or .jsonl (one object per line), UTF-8; blank lines skipped.

  training file   columns anchor, positive and optionally negative (--anchor_column,
                  --positive_column, --negative_column): a text, its match, a hard negative;
  --dev_file      the same anchor / positive columns: query i's relevant text is positive i
                  (finetuning/retrieval_metrics.py scores every query against every positive);
  --sts_file      GLUE STS-B's layout: columns sentence1, sentence2, score (a real number), the
                  other columns ignored (GLUE's dev.tsv has ten).

Every error is one line naming the file (and line): a missing column (with the columns the file
has), a cell that is not a string or a score that is not a number, a file with no rows.
"""

import dataclasses
import math

from data_utils import layouts
from finetuning import table_data

STS_COLUMNS = ("sentence1", "sentence2", "score")


@dataclasses.dataclass(frozen=True)
class PairColumns:
  """The column names of a pairs file (flags in parentheses)."""
  anchor: str = "anchor"          # --anchor_column
  positive: str = "positive"      # --positive_column
  negative: str = None            # --negative_column (None: in-batch negatives only)


@dataclasses.dataclass
class Pairs:
  """A pairs file's texts, row k of each list from one line (`lines[k]`)."""
  anchors: list
  positives: list
  negatives: list = None          # None without a negative column
  lines: list = None

  def __len__(self):
    return len(self.anchors)


def _rows(path, names, flags):
  """(line, [value per name]) of table PATH, every name a string column; one-line errors."""
  header, records = table_data._records(path)          # noqa: SLF001 (the shared reader)
  if header is not None:
    for name, flag in zip(names, flags):
      if name not in header:
        raise ValueError(f"{path}: no column {name!r} ({flag}); its columns: "
                         f"{table_data._names(header)}")          # noqa: SLF001
  rows = []
  for line, record in records:
    values = []
    for name, flag in zip(names, flags):
      if name not in record:
        has = f"the header's {table_data._names(header)}" if header is not None else \
            f"keys: {table_data._names(record)}"                # noqa: SLF001
        raise ValueError(f"{path}:{line}: no {name!r} ({flag}); {has}")
      values.append(record[name])
    rows.append((line, values))
  if not rows:
    raise ValueError(f"{path}: no rows (an empty file, or a header alone)")
  return rows


def _text(path, line, name, value):
  if not isinstance(value, str):
    raise ValueError(f"{path}:{line}: {name!r} is not a string ({value!r})")
  return value


def read_pairs(path, columns, what="train_file"):
  """The Pairs of table PATH (`what`: the flag naming it, for the errors)."""
  table_data.file_format(path, what)
  names = [columns.anchor, columns.positive] + ([columns.negative] if columns.negative else [])
  flags = ["--anchor_column", "--positive_column", "--negative_column"][:len(names)]
  rows = _rows(path, names, flags)
  texts = [[_text(path, line, n, v) for n, v in zip(names, values)] for line, values in rows]
  return Pairs(anchors=[t[0] for t in texts], positives=[t[1] for t in texts],
               negatives=[t[2] for t in texts] if columns.negative else None,
               lines=[line for line, _ in rows])


def read_sts(path, what="sts_file"):
  """(sentences1, sentences2, scores) of an STS-B layout file: lists of str, str, float."""
  table_data.file_format(path, what)
  rows = _rows(path, STS_COLUMNS, [f"--{what}'s {c}" for c in STS_COLUMNS])
  first, second, scores = [], [], []
  for line, (a, b, score) in rows:
    first.append(_text(path, line, STS_COLUMNS[0], a))
    second.append(_text(path, line, STS_COLUMNS[1], b))
    try:
      value = float(score)
    except (TypeError, ValueError):
      value = math.nan
    if not math.isfinite(value):
      raise ValueError(f"{path}:{line}: score {score!r} is not a finite number")
    scores.append(value)
  return first, second, scores


def rows(tokenizer, texts, max_seq_length, model_type):
  """Texts -> the family's single-text rows at the fixed length (data_utils/layouts.py):
  input_ids int32 [N, max_seq_length], seg_ids int32 [N, max_seq_length], input_mask float32
  [N, max_seq_length] (1.0 on padding; XLNet left padded, MPNet right padded); a text too
  long keeps its first pieces."""
  return layouts.encode_texts(tokenizer, list(texts), None, max_seq_length, model_type)
