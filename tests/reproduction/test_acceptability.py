"""The acceptability set (reproduction/tasks.py, GLUE CoLA layout, issue #33): official layout
read back by run_classifier's reader, each split's sentences from its own documents only,
damaged sentences that differ from their source by one swap or one replaced word, balanced
labels, same seed same bytes."""

import collections
import re

import numpy as np

from finetuning import classifier_data
from reproduction import tasks

WORDS = ("parser reads tokens from the stream and returns each value with its position in "
         "the buffer while the writer flushes every pending record before closing files").split()


def _docs(tag, n, rng):
  """n documents of 3 sentences, words drawn from WORDS plus a per-split word (so no sentence
  can appear in two splits)."""
  docs = []
  for k in range(n):
    sentences = tuple(" ".join([f"{tag.title()}word", *rng.choice(WORDS, rng.integers(7, 14))])
                      + "." for _ in range(3))
    docs.append(tasks.Document(f"pkg{k}.mod", f"name{k}", sentences))
  return docs


def _splits():
  rng = np.random.default_rng(0)
  return {split: _docs(split, 12, rng) for split in tasks.SPLITS}


def _differs_by_one_swap_or_word(damaged, source):
  a, b = damaged.split(), source.split()
  if len(a) != len(b):
    return False
  diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
  if len(diff) == 1:
    return True
  return len(diff) == 2 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]


def test_cola_layout_read_back_and_sources(tmp_path):
  splits = _splits()
  counts = tasks.write_acceptability(splits, str(tmp_path), seed=3, n_train=20, n_eval=10)
  assert counts == {"train": {"0": 10, "1": 10}, "dev": {"0": 5, "1": 5},
                    "test": {"0": 5, "1": 5}}
  spec = classifier_data.GLUE["cola"]
  for split in ("train", "dev"):
    lines = (tmp_path / f"{split}.tsv").read_text().splitlines()
    fields = [line.split("\t") for line in lines]
    assert all(len(f) == 4 and f[1] in "01" and f[2] == ("*" if f[1] == "0" else "")
               for f in fields)
    examples = classifier_data.read_split(spec, str(tmp_path), split, report=lambda _: None)
    assert [(e.text_a, e.label) for e in examples] == [(f[3], f[1]) for f in fields]
    own = {s for d in splits[split] for s in d.sentences}
    own_words = {w.lower() for s in own for w in re.findall(r"[A-Za-z]+", s)}
    for source, label, _, sentence in fields:
      doc = splits[split][int(source[len("doc"):])]
      if label == "1":                   # a real sentence of this split's document
        assert sentence in doc.sentences
      else:                              # one of them, damaged, and no longer any real one
        assert sentence not in own
        assert any(_differs_by_one_swap_or_word(sentence, s) for s in doc.sentences)
      # this split's words only (a replacement may take another case)
      assert {w.lower() for w in re.findall(r"[A-Za-z]+", sentence)} <= own_words
  test = (tmp_path / "test.tsv").read_text().splitlines()
  labels = (tmp_path / "test-labels.tsv").read_text().splitlines()
  assert test[0] == "index\tsentence" and labels[0] == "index\tlabel"
  assert [line.split("\t")[0] for line in test[1:]] == [line.split("\t")[0] for line in labels[1:]]
  assert collections.Counter(line.split("\t")[1] for line in labels[1:]) == {"0": 5, "1": 5}
  examples = classifier_data.read_split(spec, str(tmp_path), "test", report=lambda _: None)
  test_words = {w.lower() for d in splits["test"] for s in d.sentences
                for w in re.findall(r"[A-Za-z]+", s)}
  assert len(examples) == 10
  assert all({w.lower() for w in re.findall(r"[A-Za-z]+", e.text_a)} <= test_words
             for e in examples)


def test_no_surface_rule_tells_damaged_sentences_from_real_ones(tmp_path):
  # a capital first and a full stop last, and the same first and last words as the source:
  # otherwise "starts with a capital and ends with '.'" scores the set without any language
  splits = _splits()
  tasks.write_acceptability(splits, str(tmp_path), seed=3, n_train=20, n_eval=10)
  rows = [line.split("\t") for line in (tmp_path / "train.tsv").read_text().splitlines()]
  damaged = [(source, sentence) for source, label, _, sentence in rows if label == "0"]
  assert len(damaged) == 10
  for source, sentence in damaged:
    assert sentence[0].isupper() and sentence.endswith("."), sentence
    doc = splits["train"][int(source[len("doc"):])]
    assert any(_differs_by_one_swap_or_word(sentence, s) and s.split()[0] == sentence.split()[0]
               and s.split()[-1] == sentence.split()[-1] for s in doc.sentences), sentence
  rng = np.random.default_rng(1)
  for _ in range(50):    # a replacement takes the case of the word it replaces
    out = tasks.damage("Keep the Value as read.", rng, ["Alpha", "beta"]).split()
    assert out[0] == "Keep" and out[-1] == "read."
    assert sum(w[0].isupper() for w in out[1:-1]) == 1, out


def test_same_seed_same_bytes_and_other_seeds_differ(tmp_path):
  splits = _splits()
  for name, seed in (("a", 1), ("b", 1), ("c", 2)):
    tasks.write_acceptability(splits, str(tmp_path / name), seed=seed, n_train=20, n_eval=10)
  read = lambda d: [(tmp_path / d / f).read_bytes() for f in ("train.tsv", "dev.tsv", "test.tsv",
                                                              "test-labels.tsv")]
  assert read("a") == read("b") and read("a") != read("c")


def test_damage_keeps_spacing_and_changes_the_sentence():
  rng = np.random.default_rng(5)
  sentence = "Return  the value,\tas read."
  for _ in range(50):
    out = tasks.damage(sentence, rng, ["alpha", "beta"])
    assert out != sentence and _differs_by_one_swap_or_word(out, sentence)
    assert [len(g) for g in re.findall(r"\s+", out)] == [2, 1, 1, 1]


def test_minimal_pairs_blank_the_difference_between_a_sentence_and_its_damaged_copy(tmp_path):
  splits = _splits()
  counts = tasks.write_minimal_pairs(splits, str(tmp_path / "pairs"), 0, 20)
  assert counts == {"dev": 20, "test": 20}
  import json
  for split in ("dev", "test"):
    pairs = json.loads((tmp_path / "pairs" / f"{split}.json").read_text())
    sources = {s for d in splits[split] for s in d.sentences}
    labels = collections.Counter(p["label"] for p in pairs)
    assert set(labels) == {0, 1}                         # the real words' slot varies
    for p in pairs:
      assert p["question"].count("_") == 1
      real = p["question"].replace("_", p["options"][p["label"]])
      fake = p["question"].replace("_", p["options"][1 - p["label"]])
      assert real in sources                              # the real option restores a source
      assert fake not in sources and _differs_by_one_swap_or_word(fake, real)
      # the blank covers exactly the changed words: first and last words of the options differ
      a, b = p["options"][0].split(), p["options"][1].split()
      assert a[0] != b[0] and a[-1] != b[-1] and len(a) == len(b)
      if len(a) > 1:                                      # a swap: the blank spans both words
        assert a[0] == b[-1] and a[-1] == b[0] and a[1:-1] == b[1:-1]
    # about half the damage is a swap of two different words: the blank spans from one to the
    # other (a blank over the first changed word alone would leave the second in the text)
    assert sum(len(p["options"][0].split()) > 1 for p in pairs) >= 3
  again = tasks.write_minimal_pairs(splits, str(tmp_path / "again"), 0, 20)
  assert again == counts and all(
      (tmp_path / "pairs" / f).read_bytes() == (tmp_path / "again" / f).read_bytes()
      for f in ("dev.json", "test.json"))
