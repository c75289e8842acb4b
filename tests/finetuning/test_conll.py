"""CoNLL-layout files (finetuning/conll.py): reading (-DOCSTART-, 2 and 4 columns, blank lines,
IOB1), refusals naming file and line, the predictions writer read back and scored (by our
scorer and by the conlleval transcription in tests/reference_seqeval.py reading the written
lines), a ram:// round trip, and the label set."""

import pytest

from data_utils import fileio
from finetuning import conll
from finetuning import entity_metrics as em
from tests import reference_seqeval as ref

# CoNLL-2003's own layout: 4 columns, -DOCSTART- lines, several blank lines, no final blank line.
FOUR = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O


Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O"""


def write(path, text, binary=False):
  fileio.write_atomic(str(path), text if binary else text.encode("utf-8"))
  return str(path)


def test_four_columns_docstart_and_blank_lines(tmp_path):
  s = conll.read_conll(write(tmp_path / "train.txt", FOUR))
  assert [x.words for x in s] == [("EU", "rejects", "German", "call"), ("Peter", "Blackburn"),
                                  ("BRUSSELS", "1996-08-22")]
  assert [x.tags for x in s] == [("B-ORG", "O", "B-MISC", "O"), ("B-PER", "I-PER"), ("B-LOC", "O")]
  assert [x.lines for x in s] == [(3, 4, 5, 6), (9, 10), (14, 15)]
  assert [x.document for x in s] == [0, 0, 1]
  # another column as the tag (the chunk tags), and the same file ending in blank lines
  chunks = conll.read_conll(write(tmp_path / "t2.txt", FOUR + "\n\n\n"), tag_column=2)
  assert [x.tags for x in chunks] == [("B-NP", "B-VP", "B-NP", "I-NP"), ("B-NP", "I-NP"),
                                      ("B-NP", "I-NP")]


def test_two_columns_tabs_crlf_bom_and_no_docstart(tmp_path):
  text = "\ufeffJohn\tB-PER\r\nlives\tO\r\n \t \r\nin O\r\nParis\tB-LOC"
  s = conll.read_conll(write(tmp_path / "a.tsv", text))
  assert [(x.words, x.tags, x.lines, x.document) for x in s] == [
      (("John", "lives"), ("B-PER", "O"), (1, 2), 0), (("in", "Paris"), ("O", "B-LOC"), (4, 5), 0)]


def test_iob1_file_read_converted_and_scored(tmp_path):
  # CoNLL-2003's original scheme: I- starts entities; B- only splits adjacent ones of one type
  text = "A I-PER\nB I-PER\nC B-PER\nD O\nE I-LOC\n\nF I-ORG\nG I-MISC\n"
  path = write(tmp_path / "iob1.txt", text)
  as_bio = conll.read_conll(path)
  converted = conll.read_conll(path, scheme="iob1")
  assert [x.tags for x in converted] == [("B-PER", "I-PER", "B-PER", "O", "B-LOC"),
                                         ("B-ORG", "B-MISC")]
  assert conll.bio_violations(as_bio) == 4 and conll.bio_violations(converted) == 0
  # the same entities either way (conlleval reads IOB1), strict only on the converted tags
  gold_iob1, gold_bio = [x.tags for x in as_bio], [x.tags for x in converted]
  pred = [("B-PER", "I-PER", "O", "O", "B-LOC"), ("B-ORG", "O")]
  want = {"LOC": (1, 1, 1), "MISC": (0, 0, 1), "ORG": (1, 1, 1), "PER": (1, 1, 2)}
  for gold in (gold_iob1, gold_bio):
    assert {t: (c.correct, c.predicted, c.gold)
            for t, c in em.score(gold, pred).per_type.items()} == want
  assert ref.seqeval_strict_counts(gold_bio, pred) == want


@pytest.mark.parametrize("text, kwargs, message", [
    ("a O\nb\n", {}, r"line 2: one column \('b'\): expected the word and its tag"),
    ("a x O\nb O\n", {}, "line 2: 2 columns where line 1 has 3"),
    ("a O\n\nb X-PER\n", {}, r"line 3: tag 'X-PER' is not O, B-TYPE or I-TYPE"),
    ("a B-\n", {}, r"line 1: tag 'B-' is not O, B-TYPE or I-TYPE"),
    ("a O\n", {"tag_column": 0}, "line 1: tag column 0 is not a tag column of a line of 2"),
    ("a O\n", {"tag_column": 2}, "line 1: tag column 2 is not a tag column"),
    ("a O\nb O\nc O\n\nd O\n", {"max_words": 2}, "line 1: sentence of 3 words, more than the "
                                                 "limit of 2"),
    ("-DOCSTART- O\n\n\n", {}, "no sentences"),
    ("", {}, "no sentences"),
    ("a O\n", {"scheme": "iob2"}, "unknown tag scheme 'iob2'"),
])
def test_refusals_name_file_and_line(tmp_path, text, kwargs, message):
  path = write(tmp_path / "bad.txt", text)
  with pytest.raises(ValueError, match=message) as e:
    conll.read_conll(path, **kwargs)
  msg = str(e.value)
  assert msg.startswith(path + ": ") and "\n" not in msg


def test_refusals_bad_bytes_and_missing_file(tmp_path):
  path = write(tmp_path / "latin1.txt", b"a O\n\xe9t\xe9 O\n", binary=True)
  with pytest.raises(ValueError, match=r": line 2: not valid utf-8"):
    conll.read_conll(path)
  assert conll.read_conll(path, encoding="latin-1")[0].words == ("a", "\xe9t\xe9")
  with pytest.raises(FileNotFoundError, match="missing.txt: not found"):
    conll.read_conll(str(tmp_path / "missing.txt"))


def conlleval_reading(text):
  """The written file as conlleval reads it: the last two columns as (gold, guessed), a blank
  line as a boundary; -DOCSTART- lines (O O) are ordinary tokens to it."""
  return [None if not line.strip() else tuple(line.split()[-2:]) for line in text.splitlines()]


def test_writer_output_read_back_and_scored(tmp_path):
  path = write(tmp_path / "test.txt", FOUR + "\n")
  sentences = conll.read_conll(path)
  pred = [["B-ORG", "O", "O", "O"], ["I-PER", "I-PER"], ["B-LOC", "B-LOC"]]
  out = str(tmp_path / "out" / "predictions.txt")
  conll.write_predictions(path, out, pred)
  text = fileio.read_text(out)
  lines = text.split("\n")
  assert lines[:4] == ["-DOCSTART- -X- -X- O O", "", "EU NNP B-NP B-ORG B-ORG",
                       "rejects VBZ B-VP O O"]
  assert lines[6:9] == ["", "", "Peter NNP B-NP B-PER I-PER"]
  assert text.endswith("1996-08-22 CD I-NP O B-LOC\n")
  assert fileio.listdir(str(tmp_path / "out")) == ["predictions.txt"]    # no temporary left
  gold_tags = [s.tags for s in sentences]
  for mode in em.MODES:
    back_pred = [s.tags for s in conll.read_conll(out, tag_column=-1)]
    back_gold = [s.tags for s in conll.read_conll(out, tag_column=-2)]
    assert back_gold == gold_tags and back_pred == [tuple(p) for p in pred]
    assert em.score(back_gold, back_pred, mode) == em.score(gold_tags, pred, mode)
  # conlleval reading the file itself counts what we count
  want = ref.conlleval_counts_of_lines(conlleval_reading(text))
  got = em.score(gold_tags, pred)
  assert {t: (c.correct, c.predicted, c.gold) for t, c in got.per_type.items()} == want
  assert want == {"LOC": (1, 2, 1), "MISC": (0, 0, 1), "ORG": (1, 1, 1), "PER": (1, 1, 1)}


def test_writer_keeps_tabs_and_refuses_mismatches(tmp_path):
  path = write(tmp_path / "in.tsv", "a\tB-X\nb\tO\n\nc\tO\n")
  want = "a\tB-X\tO\nb\tO\tO\n\nc\tO\tB-Y\n"
  assert conll.format_predictions(path, [["O", "O"], ["B-Y"]]) == want
  with pytest.raises(ValueError, match=r"in.tsv: 2 sentences but 1 predicted$"):
    conll.format_predictions(path, [["O", "O"]])
  with pytest.raises(ValueError, match=r"in.tsv: line 4: sentence of 1 words but 2 predicted"):
    conll.format_predictions(path, [["O", "O"], ["O", "O"]])
  with pytest.raises(ValueError, match=r"in.tsv: line 2: predicted tag 'Z' is not O"):
    conll.format_predictions(path, [["O", "Z"], ["O"]])
  with pytest.raises(ValueError, match="would overwrite its input"):
    conll.write_predictions(path, path, [["O", "O"], ["O"]])
  assert fileio.read_text(path) == "a\tB-X\nb\tO\n\nc\tO\n"


def test_ram_round_trip():
  src = "ram://conll_test/data/dev.txt"
  write(src, "-DOCSTART- O\n\nJohn B-PER\nSmith I-PER\n\nParis B-LOC\n")
  sentences = conll.read_conll(src)
  assert [s.tags for s in sentences] == [("B-PER", "I-PER"), ("B-LOC",)]
  out = "ram://conll_test/predictions/dev.txt"
  conll.write_predictions(src, out, [["B-PER", "B-PER"], ["B-LOC"]])
  assert fileio.read_text(out) == ("-DOCSTART- O O\n\nJohn B-PER B-PER\nSmith I-PER B-PER\n\n"
                                   "Paris B-LOC B-LOC\n")
  back = conll.read_conll(out)
  assert [s.tags for s in back] == [("B-PER", "B-PER"), ("B-LOC",)]
  assert fileio.listdir("ram://conll_test/predictions") == ["dev.txt"]


def test_label_list_and_check_labels(tmp_path):
  path = write(tmp_path / "train.txt", FOUR)
  sentences = conll.read_conll(path)
  assert conll.label_list(sentences) == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER"]
  given = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG"]
  assert conll.label_list(sentences, labels=given) == given       # order kept
  with pytest.raises(ValueError, match="^labels given twice: B-PER$"):
    conll.label_list(labels=["O", "B-PER", "B-PER"])
  with pytest.raises(ValueError, match="lack O$"):
    conll.label_list(labels=["B-PER", "I-PER"])
  with pytest.raises(ValueError, match="label 'PER' is not O, B-TYPE or I-TYPE"):
    conll.label_list(labels=["O", "PER"])
  conll.check_labels(path, sentences, conll.label_list(sentences))
  with pytest.raises(ValueError, match=r"train.txt: line 5: tag 'B-MISC' is not in the label set"):
    conll.check_labels(path, sentences, given + ["B-LOC"])
