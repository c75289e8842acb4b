"""Entity-level precision, recall and F1 of token tags, as conlleval and seqeval count them.

An entity is (sentence, type, first word, last word + 1). A predicted entity is correct when the
gold has the same entity: same type, same first and same last word. Precision is correct /
predicted, recall correct / gold, F1 their harmonic mean; each is 0 where its denominator is 0
(as conlleval prints and seqeval returns). Micro (all types pooled) and per type, every type
that occurs in the gold or the predictions. Values are fractions (conlleval prints percent).

Two ways of reading tags into entities (`mode`):
  "conlleval" the CoNLL-2000 script's chunk rules (startOfChunk / endOfChunk), which are also
              seqeval's default mode: an entity starts at B-X, at an I-X after O or after another
              type (so an I- without B- is an entity: IOB1 reads right), and ends before O, B-,
              or a change of type. Adjacent entities of one type are told apart by B-.
  "strict"    seqeval's `mode="strict", scheme=IOB2`: an entity is exactly B-X followed by I-X
              of the same type; an I- tag that does not continue one is no entity (dropped).
On well-formed BIO both agree; they differ only where an entity starts with I-.

Tags are O, B-TYPE or I-TYPE (finetuning/conll.py's `split_tag`); anything else is a one-line
ValueError. Sentences are scored apart: an entity never runs from one sentence into the next.
Pure Python (no numpy): this runs in the evaluation loop of the tagging script and in tests.
"""

import dataclasses

from finetuning.conll import split_tag

MODES = ("conlleval", "strict")


def _parsed(tags, sentence):
  out = []
  for tag in tags:
    parsed = split_tag(tag)
    if parsed is None:
      raise ValueError(f"sentence {sentence}: tag {tag!r} is not O, B-TYPE or I-TYPE")
    out.append(parsed)
  return out


def _conlleval_entities(parsed):
  """(type, start, end) of one sentence by conlleval's rules. An entity is open from its start
  until a word ends it: O, B-, or another type (the end of the sentence ends it too)."""
  found = []
  start = None
  prev_type = None
  for i, (prefix, type_) in enumerate(parsed):
    if start is not None and (prefix != "I" or type_ != prev_type):
      found.append((prev_type, start, i))
      start = None
    if prefix == "B" or (prefix == "I" and start is None):
      start = i
    prev_type = type_ if start is not None else None
  if start is not None:
    found.append((prev_type, start, len(parsed)))
  return found


def _strict_entities(parsed):
  """(type, start, end) of one sentence, seqeval strict IOB2: B-X then I-X of the same type."""
  found = []
  i = 0
  while i < len(parsed):
    prefix, type_ = parsed[i]
    if prefix != "B":
      i += 1
      continue
    end = i + 1
    while end < len(parsed) and parsed[end] == ("I", type_):
      end += 1
    found.append((type_, i, end))
    i = end
  return found


def entities(tags, mode="conlleval", sentence=0):
  """The entities of one sentence's TAGS as a list of (type, start, end), end exclusive, in order.
  SENTENCE only names the sentence in errors."""
  if mode not in MODES:
    raise ValueError(f"unknown entity mode {mode!r}: expected one of {', '.join(MODES)}")
  parsed = _parsed(tags, sentence)
  return _conlleval_entities(parsed) if mode == "conlleval" else _strict_entities(parsed)


def _ratio(a, b):
  return a / b if b else 0.0


def _f1(p, r):
  return 2 * p * r / (p + r) if p + r else 0.0


@dataclasses.dataclass(frozen=True)
class Counts:
  """Entity counts of one type (or of all): correct, predicted, gold; and their scores."""
  correct: int = 0
  predicted: int = 0
  gold: int = 0

  @property
  def precision(self):
    return _ratio(self.correct, self.predicted)

  @property
  def recall(self):
    return _ratio(self.correct, self.gold)

  @property
  def f1(self):
    return _f1(self.precision, self.recall)

  def to_dict(self):
    return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
            "correct": self.correct, "predicted": self.predicted, "gold": self.gold}


@dataclasses.dataclass(frozen=True)
class EntityScores:
  """Micro counts (`overall`), per-type counts (`per_type`: type -> Counts, sorted by type) and
  the token accuracy (tags equal, as conlleval's first line prints; 0.0 without tokens)."""
  overall: Counts
  per_type: dict
  accuracy: float
  tokens: int

  @property
  def precision(self):
    return self.overall.precision

  @property
  def recall(self):
    return self.overall.recall

  @property
  def f1(self):
    return self.overall.f1

  def to_dict(self):
    """Plain numbers for a metrics file: overall, accuracy and one entry per type."""
    out = self.overall.to_dict()
    out["accuracy"] = self.accuracy
    out["tokens"] = self.tokens
    out["per_type"] = {t: c.to_dict() for t, c in self.per_type.items()}
    return out


def score(gold, predicted, mode="conlleval"):
  """EntityScores of PREDICTED against GOLD: each a sequence of sentences, each a sequence of
  tags; sentence i of both has the same length (else a one-line ValueError naming it)."""
  gold, predicted = list(gold), list(predicted)
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
  counts = {}      # type -> [correct, predicted, gold]
  tokens = equal = 0
  for n, (g, p) in enumerate(zip(gold, predicted)):
    g, p = list(g), list(p)
    if len(g) != len(p):
      raise ValueError(f"sentence {n}: {len(g)} gold tags but {len(p)} predicted")
    tokens += len(g)
    equal += sum(a == b for a, b in zip(g, p))
    gold_entities = set(entities(g, mode, n))
    pred_entities = set(entities(p, mode, n))
    for type_, _, _ in gold_entities:
      counts.setdefault(type_, [0, 0, 0])[2] += 1
    for type_, _, _ in pred_entities:
      counts.setdefault(type_, [0, 0, 0])[1] += 1
    for type_, _, _ in gold_entities & pred_entities:
      counts[type_][0] += 1
  per_type = {t: Counts(*counts[t]) for t in sorted(counts)}
  overall = Counts(*(sum(c[i] for c in counts.values()) for i in range(3)))
  return EntityScores(overall, per_type, _ratio(equal, tokens), tokens)


def format_report(scores):
  """conlleval's summary lines (percent, two decimals) for a log: the totals, then one line per
  type with its number of predicted entities, as the script prints them."""
  o = scores.overall
  lines = [f"processed {scores.tokens} tokens with {o.gold} phrases; found: {o.predicted} "
           f"phrases; correct: {o.correct}.",
           f"accuracy: {100 * scores.accuracy:6.2f}%; precision: {100 * o.precision:6.2f}%; "
           f"recall: {100 * o.recall:6.2f}%; FB1: {100 * o.f1:6.2f}"]
  for t, c in scores.per_type.items():
    lines.append(f"{t:>17}: precision: {100 * c.precision:6.2f}%; recall: {100 * c.recall:6.2f}%; "
                 f"FB1: {100 * c.f1:6.2f}  {c.predicted}")
  return "\n".join(lines)
