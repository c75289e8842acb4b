"""Token-tagging files in CoNLL-2003's layout: reading, IOB1 -> BIO, writing predictions, labels.

A file holds one word per line, its columns separated by spaces or tabs: the word first and its
tag in `tag_column` (default the last), e.g. CoNLL-2003's `word POS chunk NER` or a plain
`word tag`. Every word line of a file has the same number of columns (a missing column is
caught at its line, not as a shifted tag). Blank lines (any number, spaces and tabs count as
blank) end a sentence; a line whose word is `-DOCSTART-` starts a document and is no word (its
other columns may be anything, or absent). The last sentence needs no blank line after it.
Lines end in \\n, \\r\\n or \\r; a leading UTF-8 BOM is dropped.

Tags are `O`, `B-TYPE` or `I-TYPE` (TYPE any non-empty text without spaces), in one of two
schemes that differ only in where B- appears:
  bio  (IOB2)  every entity starts with B-; what Hugging Face's datasets and most taggers use.
  iob1         an entity starts with I-; B- only starts an entity right after another entity
               of the same type. CoNLL-2003's original files are IOB1.
`read_conll(..., scheme="iob1")` converts to BIO as it reads (`iob1_to_bio`), so everything
after the reader sees BIO. Entity scores are equal either way (conlleval reads both:
finetuning/entity_metrics.py), so the conversion changes the labels a model learns, not the
entities.

Predictions are written in conlleval's layout (`write_predictions`): each input line with the
predicted tag appended as one more column (`word ... gold pred`), blank lines and -DOCSTART-
lines kept in place (a -DOCSTART- line gets `O`: with CoNLL-2003's `-DOCSTART- -X- -X- O` every
line then has the same column count, as conlleval requires), the file published atomically
(data_utils/fileio.py). `conlleval < file` and `read_conll(file)` (tag_column -1 for the
prediction, -2 for the gold) both read it back.

Every error is one line naming the file and line: a word line of one column, a column count
unlike the file's first word line, a tag that is not O / B-TYPE / I-TYPE, bytes that are not
valid in the encoding, a sentence longer than `max_words`, a file without sentences.
"""

import dataclasses
import re

from data_utils import fileio

DOCSTART = "-DOCSTART-"
OUTSIDE = "O"
SCHEMES = ("bio", "iob1")
_SEPARATOR = re.compile(r"[ \t]+")
_TAG = re.compile(r"^([BI])-(\S+)$")


@dataclasses.dataclass(frozen=True)
class Sentence:
  """One sentence of a file: its words, their tags (BIO after reading), and where it came from.

  `lines` are the 1-based line numbers of the words in the file (for errors and for writing
  predictions beside them); `document` counts the -DOCSTART- lines before the sentence (0 when
  the file has none)."""
  words: tuple
  tags: tuple
  lines: tuple
  document: int = 0


def split_tag(tag):
  """(prefix, type) of a tag: ("O", "") for O, ("B", "PER") for B-PER; None when TAG is
  neither O nor B-TYPE / I-TYPE."""
  if tag == OUTSIDE:
    return OUTSIDE, ""
  m = _TAG.match(tag)
  return (m.group(1), m.group(2)) if m else None


def iob1_to_bio(tags):
  """TAGS (one sentence, IOB1) in BIO: an I-X that starts an entity (after O, at the start, or
  after another type) becomes B-X; everything else is kept. Already-BIO tags come back
  unchanged, so converting twice is harmless."""
  out = []
  prev_type = None
  for tag in tags:
    prefix, type_ = split_tag(tag) or (None, None)
    if prefix is None:
      raise ValueError(f"tag {tag!r} is not O, B-TYPE or I-TYPE")
    if prefix == "I" and type_ != prev_type:
      tag = "B-" + type_
    out.append(tag)
    prev_type = type_ if prefix != OUTSIDE else None
  return out


def bio_violations(sentences):
  """How many entities start with I- (after O, at a sentence start, or after another type):
  none in a well-formed BIO file, many in an IOB1 file read as BIO. A script can say "this
  looks like IOB1" instead of training on the wrong scheme."""
  n = 0
  for s in sentences:
    n += sum(a != b for a, b in zip(s.tags, iob1_to_bio(s.tags)))
  return n


def _lines(path, encoding):
  """(1-based line number, text) of PATH, decoded line by line so that a bad byte is reported
  at its line."""
  data = fileio.read_bytes(path)
  if data.startswith(b"\xef\xbb\xbf") and encoding.replace("-", "").lower() in ("utf8", "utf8sig"):
    data = data[3:]
  for number, raw in enumerate(data.splitlines(), 1):
    try:
      yield number, raw.decode(encoding)
    except UnicodeDecodeError as e:
      raise ValueError(f"{path}: line {number}: not valid {encoding} ({e.reason} at byte "
                       f"{e.start})") from None


def _rows(path, tag_column, encoding):
  """Iterator of (line number, columns or None for a blank line, is_docstart), checked: every
  word line has at least 2 columns, as many as the first word line, and a tag at tag_column."""
  width = first = None
  for number, text in _lines(path, encoding):
    text = text.strip(" \t")
    if not text:
      yield number, None, False
      continue
    columns = _SEPARATOR.split(text)
    if columns[0] == DOCSTART:
      yield number, columns, True
      continue
    where = f"{path}: line {number}"
    if len(columns) < 2:
      raise ValueError(f"{where}: one column ({text!r}): expected the word and its tag "
                       "separated by spaces or tabs")
    if width is None:
      width, first = len(columns), number
      if not -width <= tag_column < width or tag_column % width == 0:
        raise ValueError(f"{where}: tag column {tag_column} is not a tag column of a line of "
                         f"{width} columns (the word is column 0)")
    elif len(columns) != width:
      raise ValueError(f"{where}: {len(columns)} columns where line {first} has {width}")
    yield number, columns, False


def read_conll(path, tag_column=-1, scheme="bio", max_words=None, encoding="utf-8"):
  """The sentences (list of `Sentence`) of the CoNLL-layout file PATH (local or URL), tags in BIO.

  tag_column: the tags' column (0 is the word; negative counts from the end; default the last).
  scheme: "bio" keeps the tags as written; "iob1" converts each sentence with `iob1_to_bio`.
  max_words: refuse a sentence of more words (None: no limit), naming its first line."""
  if scheme not in SCHEMES:
    raise ValueError(f"{path}: unknown tag scheme {scheme!r}: expected one of {', '.join(SCHEMES)}")
  if not fileio.exists(path) or fileio.isdir(path):
    raise FileNotFoundError(f"{path}: not found")
  sentences, words, tags, lines, document = [], [], [], [], 0

  def close():
    if words:
      if max_words is not None and len(words) > max_words:
        raise ValueError(f"{path}: line {lines[0]}: sentence of {len(words)} words, more than "
                         f"the limit of {max_words}")
      out = iob1_to_bio(tags) if scheme == "iob1" else tags
      sentences.append(Sentence(tuple(words), tuple(out), tuple(lines), document))
    words.clear(), tags.clear(), lines.clear()

  seen_docstart = False
  for number, columns, docstart in _rows(path, tag_column, encoding):
    if columns is None or docstart:
      close()
      if docstart:
        document += seen_docstart    # the first -DOCSTART- opens document 0
        seen_docstart = True
      continue
    tag = columns[tag_column]
    if split_tag(tag) is None:
      raise ValueError(f"{path}: line {number}: tag {tag!r} is not O, B-TYPE or I-TYPE")
    words.append(columns[0])
    tags.append(tag)
    lines.append(number)
  close()
  if not sentences:
    raise ValueError(f"{path}: no sentences (expected lines of `word ... tag`, sentences "
                     "separated by blank lines)")
  return sentences


def format_predictions(path, predictions, tag_column=-1, encoding="utf-8"):
  """The text `write_predictions` writes: PATH's lines, each word line with its predicted tag
  appended (a tab when the line has one, else a space), -DOCSTART- lines with `O`, blank lines
  empty. PREDICTIONS: one tag sequence per sentence of `read_conll(PATH)`, in order."""
  sentences = read_conll(path, tag_column=tag_column, encoding=encoding)
  predictions = [list(p) for p in predictions]
  if len(predictions) != len(sentences):
    raise ValueError(f"{path}: {len(sentences)} sentences but {len(predictions)} predicted")
  by_line = {}
  for s, tags in zip(sentences, predictions):
    if len(tags) != len(s.words):
      raise ValueError(f"{path}: line {s.lines[0]}: sentence of {len(s.words)} words but "
                       f"{len(tags)} predicted tags")
    for line, tag in zip(s.lines, tags):
      if split_tag(tag) is None:
        raise ValueError(f"{path}: line {line}: predicted tag {tag!r} is not O, B-TYPE or I-TYPE")
      by_line[line] = tag
  out = []
  for number, text in _lines(path, encoding):
    text = text.strip(" \t")
    if not text:
      out.append("")
      continue
    tag = by_line.get(number, OUTSIDE)      # only -DOCSTART- lines are not in by_line
    out.append(text + ("\t" if "\t" in text else " ") + tag)
  return "\n".join(out) + "\n"


def write_predictions(path, output_path, predictions, tag_column=-1, encoding="utf-8"):
  """Write `format_predictions(PATH, PREDICTIONS)` to OUTPUT_PATH atomically (whole or not at
  all). OUTPUT_PATH must not be PATH (the input is never overwritten)."""
  if str(output_path) == str(path):
    raise ValueError(f"{output_path}: the predictions file would overwrite its input")
  text = format_predictions(path, predictions, tag_column=tag_column, encoding=encoding)
  fileio.write_atomic(output_path, text.encode(encoding))


def label_list(sentences=None, labels=None):
  """The label set, a list of tags: LABELS in their given order when given (so that it can
  match a checkpoint's id2label), else the tags of SENTENCES sorted, O first. Either way every
  label is O / B-TYPE / I-TYPE, none twice, and O is one of them."""
  if labels is None:
    if sentences is None:
      raise ValueError("label_list: give the training sentences or the labels")
    seen = {t for s in sentences for t in s.tags}
    labels = [OUTSIDE] + sorted(seen - {OUTSIDE})
  labels = list(labels)
  for label in labels:
    if split_tag(label) is None:
      raise ValueError(f"label {label!r} is not O, B-TYPE or I-TYPE")
  if len(set(labels)) != len(labels):
    twice = sorted({x for x in labels if labels.count(x) > 1})
    raise ValueError(f"labels given twice: {', '.join(twice)}")
  if OUTSIDE not in labels:
    raise ValueError(f"the labels {', '.join(labels)} lack {OUTSIDE}")
  return labels


def check_labels(path, sentences, labels):
  """Refuse (one line naming PATH and the line) a tag of SENTENCES outside LABELS: a dev or
  test file with a type the training file never had."""
  known = set(labels)
  for s in sentences:
    for line, tag in zip(s.lines, s.tags):
      if tag not in known:
        raise ValueError(f"{path}: line {line}: tag {tag!r} is not in the label set "
                         f"({', '.join(labels)})")
