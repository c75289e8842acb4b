"""Entity scores (finetuning/entity_metrics.py) on crafted tag sequences, by hand and against
transcriptions of seqeval (default and strict IOB2) and of conlleval (tests/reference_seqeval.py),
then on many seeded random sequences against the same references."""

import random

import pytest

from finetuning import conll
from finetuning import entity_metrics as em
from tests import reference_seqeval as ref


def counts(scores):
  """{type: (correct, predicted, gold)} of an EntityScores, the references' shape."""
  return {t: (c.correct, c.predicted, c.gold) for t, c in scores.per_type.items()}


def check_against_references(gold, pred):
  """Both modes equal their references: counts per type, micro and per-type P/R/F1."""
  for mode, references in (("conlleval", (ref.seqeval_default_counts, ref.conlleval_counts)),
                           ("strict", (ref.seqeval_strict_counts,))):
    got = em.score(gold, pred, mode)
    for reference in references:
      want = reference(gold, pred)
      assert counts(got) == want, (mode, reference.__name__, gold, pred)
      (p, r, f), per_type = ref.scores(want)
      assert (got.precision, got.recall, got.f1) == pytest.approx((p, r, f), abs=1e-12)
      for t, c in got.per_type.items():
        assert (c.precision, c.recall, c.f1) == pytest.approx(per_type[t], abs=1e-12)


def test_entities_by_hand():
  e = em.entities
  assert e(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 2), ("LOC", 3, 4)]
  # an I- without B- starts an entity (conlleval, seqeval default) or is none (strict)
  assert e(["O", "I-PER", "I-PER"]) == [("PER", 1, 3)]
  assert e(["O", "I-PER", "I-PER"], "strict") == []
  # adjacent entities of one type are split by B-
  assert e(["B-PER", "B-PER"]) == [("PER", 0, 1), ("PER", 1, 2)]
  assert e(["B-PER", "I-PER", "B-PER"]) == [("PER", 0, 2), ("PER", 2, 3)]
  assert e(["B-PER", "I-PER", "B-PER"], "strict") == [("PER", 0, 2), ("PER", 2, 3)]
  # a type change inside an I- run ends one entity and (conlleval only) starts another
  assert e(["I-PER", "I-LOC"]) == [("PER", 0, 1), ("LOC", 1, 2)]
  assert e(["I-PER", "I-LOC"], "strict") == []
  assert e(["B-PER", "I-LOC", "I-LOC"]) == [("PER", 0, 1), ("LOC", 1, 3)]
  assert e(["B-PER", "I-LOC", "I-LOC"], "strict") == [("PER", 0, 1)]
  # entities at the sentence's start and end; a type with hyphens
  assert e(["B-A-B", "O", "B-PER", "I-PER"]) == [("A-B", 0, 1), ("PER", 2, 4)]
  assert e([]) == [] and e(["O", "O"]) == []


def test_i_without_b_default_and_strict_differ():
  gold = [["B-PER", "I-PER", "O"]]
  pred = [["I-PER", "I-PER", "O"]]
  default, strict = em.score(gold, pred), em.score(gold, pred, "strict")
  assert counts(default) == {"PER": (1, 1, 1)} and default.f1 == 1.0
  assert counts(strict) == {"PER": (0, 0, 1)}
  assert (strict.precision, strict.recall, strict.f1) == (0.0, 0.0, 0.0)
  check_against_references(gold, pred)


def test_adjacent_entities_of_one_type():
  gold = [["B-PER", "B-PER", "O"], ["B-PER", "I-PER", "B-PER"]]
  pred = [["B-PER", "I-PER", "O"], ["B-PER", "I-PER", "I-PER"]]
  s = em.score(gold, pred)
  # gold: 2 + 2 entities; predicted: 1 + 1, none equal to a gold one
  assert counts(s) == {"PER": (0, 2, 4)} and s.f1 == 0.0
  check_against_references(gold, pred)


def test_type_change_inside_i_run():
  gold = [["I-PER", "I-LOC", "O"]]
  pred = [["B-PER", "B-LOC", "O"]]
  assert counts(em.score(gold, pred)) == {"LOC": (1, 1, 1), "PER": (1, 1, 1)}
  assert counts(em.score(gold, pred, "strict")) == {"LOC": (0, 1, 0), "PER": (0, 1, 0)}
  check_against_references(gold, pred)


def test_entities_never_cross_sentences():
  # sentence 1 ends inside a PER, sentence 2 starts with I-PER: two entities, not one
  gold = [["O", "B-PER"], ["I-PER", "O"]]
  pred = [["O", "B-PER"], ["B-PER", "O"]]
  s = em.score(gold, pred)
  assert counts(s) == {"PER": (2, 2, 2)} and s.f1 == 1.0
  assert counts(em.score(gold, pred, "strict")) == {"PER": (1, 2, 1)}
  check_against_references(gold, pred)


def test_per_type_numbers_by_hand():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
  pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
  s = em.score(gold, pred)
  assert list(s.per_type) == ["LOC", "ORG", "PER"]
  loc, org, per = s.per_type["LOC"], s.per_type["ORG"], s.per_type["PER"]
  assert (loc.precision, loc.recall, loc.f1) == (0.0, 0.0, 0.0)
  assert (org.precision, org.recall, org.f1) == pytest.approx((0.5, 1.0, 2 / 3))
  assert (per.precision, per.recall, per.f1) == (1.0, 1.0, 1.0)
  # micro: 2 correct of 3 predicted, 3 gold
  assert (s.precision, s.recall, s.f1) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
  assert s.accuracy == pytest.approx(5 / 6) and s.tokens == 6
  d = s.to_dict()
  assert d["per_type"]["ORG"]["predicted"] == 2 and d["f1"] == pytest.approx(2 / 3)
  report = em.format_report(s).splitlines()
  assert report[0] == "processed 6 tokens with 3 phrases; found: 3 phrases; correct: 2."
  assert report[1] == "accuracy:  83.33%; precision:  66.67%; recall:  66.67%; FB1:  66.67"
  assert report[3] == "              ORG: precision:  50.00%; recall: 100.00%; FB1:  66.67  2"
  check_against_references(gold, pred)


def test_empty_predictions_and_no_entities():
  gold = [["B-PER", "I-PER"], ["O"]]
  s = em.score(gold, [["O", "O"], ["O"]])
  assert counts(s) == {"PER": (0, 0, 1)} and (s.precision, s.recall, s.f1) == (0, 0, 0)
  none = em.score([["O"], []], [["O"], []])
  assert none.per_type == {} and none.f1 == 0.0 and none.tokens == 1
  assert em.score([], []).accuracy == 0.0
  check_against_references(gold, [["O", "O"], ["O"]])


def test_iob1_and_bio_give_the_same_entities():
  # CoNLL-2003's original scheme: I- everywhere, B- only between adjacent entities of one type
  iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG", "B-ORG", "I-ORG"]
  bio = ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG", "B-ORG", "I-ORG"]
  assert conll.iob1_to_bio(iob1) == bio
  assert conll.iob1_to_bio(bio) == bio
  assert em.entities(iob1) == em.entities(bio) == em.entities(bio, "strict")
  pred_iob1 = ["I-PER", "I-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-ORG", "I-ORG"]
  a = em.score([iob1], [pred_iob1])
  b = em.score([bio], [conll.iob1_to_bio(pred_iob1)])
  assert counts(a) == counts(b) == {"LOC": (0, 1, 1), "ORG": (1, 1, 2), "PER": (0, 1, 2)}
  check_against_references([iob1], [pred_iob1])


def test_refusals():
  with pytest.raises(ValueError, match=r"^sentence 1: tag 'B_PER' is not O, B-TYPE or I-TYPE$"):
    em.score([["O"], ["B_PER"]], [["O"], ["O"]])
  with pytest.raises(ValueError, match=r"^sentence 1: 2 gold tags but 1 predicted$"):
    em.score([["O"], ["O", "O"]], [["O"], ["O"]])
  with pytest.raises(ValueError, match=r"^2 gold sentences but 1 predicted$"):
    em.score([["O"], ["O"]], [["O"]])
  with pytest.raises(ValueError, match="unknown entity mode 'lenient'"):
    em.entities(["O"], "lenient")
  for bad in ("B-", "I", "b-PER", "S-PER", "B-PER X"):
    with pytest.raises(ValueError, match="is not O, B-TYPE or I-TYPE"):
      em.entities([bad])


TAGS = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-A-B", "I-A-B"]


def random_sentences(rng, n):
  return [[rng.choice(TAGS) for _ in range(rng.randint(0, 9))] for _ in range(n)]


def test_random_sequences_against_references():
  rng = random.Random(1234)
  for _ in range(400):
    gold = random_sentences(rng, rng.randint(1, 5))
    # predictions: half the time a perturbed gold (many correct entities), else independent
    if rng.random() < 0.5:
      pred = [[t if rng.random() < 0.8 else rng.choice(TAGS) for t in s] for s in gold]
    else:
      pred = [[rng.choice(TAGS) for _ in s] for s in gold]
    check_against_references(gold, pred)
    # IOB1 reading of the same tags: conversion keeps conlleval's entities
    assert counts(em.score(gold, pred)) == counts(
        em.score([conll.iob1_to_bio(s) for s in gold], [conll.iob1_to_bio(s) for s in pred]))


CRAFTED = [  # (gold, predicted): the cases conlleval and seqeval's modes tell apart
    ([["B-PER", "I-PER", "O"]], [["I-PER", "I-PER", "O"]]),          # I- without B-
    ([["B-PER", "B-PER", "O"]], [["B-PER", "I-PER", "O"]]),          # adjacent, one type
    ([["O", "B-LOC", "I-LOC"]], [["O", "B-LOC", "I-LOC"]]),          # at the sentence's end
    ([["I-ORG", "I-ORG", "O", "I-PER"]], [["B-ORG", "I-ORG", "O", "B-PER"]]),   # IOB1 vs BIO
    ([["B-PER", "I-LOC", "I-LOC"], ["O"]], [["B-PER", "I-PER", "I-LOC"], ["B-MISC"]]),
]


@pytest.mark.parametrize("mode", ["conlleval", "strict"])
def test_scores_equal_the_seqeval_library(mode):
  """The released seqeval (1.2.2) itself: its default mode is conlleval's, `mode="strict",
  scheme=IOB2` the strict one; micro precision / recall / F1 and per-type F1."""
  from tests.reference_libs import require
  require("seqeval")
  from seqeval import metrics
  from seqeval.scheme import IOB2
  kwargs = {"mode": "strict", "scheme": IOB2} if mode == "strict" else {}
  rng = random.Random(99)
  cases = list(CRAFTED)
  for _ in range(150):
    gold = [s for s in random_sentences(rng, rng.randint(1, 5)) if s]
    if gold:
      cases.append((gold, [[t if rng.random() < 0.7 else rng.choice(TAGS) for t in s]
                           for s in gold]))
  for gold, pred in cases:
    got = em.score(gold, pred, mode)
    want = (metrics.precision_score(gold, pred, zero_division=0, **kwargs),
            metrics.recall_score(gold, pred, zero_division=0, **kwargs),
            metrics.f1_score(gold, pred, zero_division=0, **kwargs))
    assert (got.precision, got.recall, got.f1) == pytest.approx(want, abs=1e-12), (gold, pred)
    report = metrics.classification_report(gold, pred, output_dict=True, zero_division=0,
                                           **kwargs)
    for t, c in got.per_type.items():
      if c.gold:       # seqeval reports the gold types
        assert c.f1 == pytest.approx(report[t]["f1-score"], abs=1e-12), (t, gold, pred)
