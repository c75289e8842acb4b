"""Zero-shot cloze: a pretrained model, with no fine-tuning, picks the option it finds most
probable at the blank of a RACE-format question: a measure of what pretraining taught that
involves no fine-tuning learning rate.

Each (question, option) is one row in the records' layout, `A <sep> B <sep> <cls>` with
segments 0 / 1 / 2 (data_utils/record_format.py): A = the article's last tokens that fit,
B = the question with the option written into its "_" (left part, option, right part, each
tokenized on its own, so the option's tokens are exactly the span). The objective scores the
span as it predicts its targets (`Objective.span_log_probs`: plm left to right through the query
stream after the rest; mlm all <mask> through the content stream; mpnet as MPNet's predicted
set). An option's score is the sum of its tokens' log-probabilities ("sum") or their mean
("mean": long options are not penalised for their length); which one a report uses is chosen
on dev.

Shapes: L tokens of a row (at most seq_len), P tokens of the option.
"""

import dataclasses
import math
import re

import numpy as np

from data_utils.tokenization import CLS_ID, SEP_ID

SCORINGS = ("sum", "mean")


@dataclasses.dataclass(frozen=True)
class Row:
  input_ids: tuple      # [L]
  seg_ids: tuple        # [L]: 0 article and its <sep>, 1 question and its <sep>, 2 <cls>
  start: int            # the option's tokens are input_ids[start:end]
  end: int


def cloze_row(tokenizer, article, question, option, seq_len):
  """The Row of one option. A question too long for seq_len keeps the words nearest the blank
  (its left part's last tokens, its right part's first, half the room each, the rest to the
  other side); the article gets what room is left. ValueError if the question has no "_", the
  option no token, or the option alone does not fit."""
  if "_" not in question:
    raise ValueError(f"a cloze question needs a blank '_': {question!r}")
  left, right = question.split("_", 1)
  left_ids, option_ids, right_ids = (list(tokenizer.encode(t)) if t.strip() else []
                                     for t in (left, option, right))
  if not option_ids:
    raise ValueError(f"the option {option!r} has no token")
  context_room = seq_len - 3 - len(option_ids)
  if context_room < 0:
    raise ValueError(f"the option {option!r} takes {len(option_ids)} tokens: with <sep> <sep> "
                     f"<cls> more than seq_len {seq_len}")
  keep_left = min(len(left_ids), max(context_room // 2, context_room - len(right_ids)))
  keep_right = min(len(right_ids), context_room - keep_left)
  left_ids = left_ids[len(left_ids) - keep_left:]
  right_ids = right_ids[:keep_right]
  b = left_ids + option_ids + right_ids
  room = seq_len - len(b) - 3
  a = list(tokenizer.encode(article))[-room:] if room else []
  ids = a + [SEP_ID] + b + [SEP_ID, CLS_ID]
  seg = [0] * (len(a) + 1) + [1] * (len(b) + 1) + [2]
  start = len(a) + 1 + len(left_ids)
  return Row(tuple(ids), tuple(seg), start, start + len(option_ids))


def _scores(log_probs):
  """{scoring: score} of one option's token log-probabilities."""
  logp = np.asarray(log_probs, np.float64)
  return {"sum": float(logp.sum()), "mean": float(logp.mean())}


def accuracy(scores, labels):
  """{"accuracy", "n", "se" (binomial standard error), "chance"} of picking the best-scored
  option (scores [N, C]; ties go to the first option) against labels [N]."""
  scores = np.asarray(scores, np.float64)
  n, c = scores.shape
  acc = float((scores.argmax(-1) == np.asarray(labels)).mean()) if n else float("nan")
  return {"accuracy": acc, "n": n, "chance": 1.0 / c,
          "se": math.sqrt(acc * (1 - acc) / n) if n else float("nan")}


class _Cached:
  """A tokenizer's `encode`, remembered per text."""

  def __init__(self, tokenizer):
    self.tokenizer, self.ids = tokenizer, {}

  def encode(self, text):
    if text not in self.ids:
      self.ids[text] = list(self.tokenizer.encode(text))
    return self.ids[text]


def evaluate(objective, task, model, tokenizer, items, seq_len):
  """items [(level, article, question, [options], label)] (finetuning/race.read_split) ->
  {scoring: accuracy(...)}."""
  tokenizer = _Cached(tokenizer)          # each article is encoded once, not once per option
  rows = [cloze_row(tokenizer, article, question, option, seq_len)
          for _, article, question, options, _ in items for option in options]
  scores = [_scores(lp) for lp in objective.span_log_probs_many(task, model, rows)]
  labels = [item[4] for item in items]
  return {name: accuracy(np.reshape([s[name] for s in scores], [len(items), -1]), labels)
          for name in SCORINGS}


# ---- whole sentences: pseudo-log-likelihood ---------------------------------------------------
def word_rows(tokenizer, sentence, seq_len):
  """[Row] of one sentence, one per whitespace word: the word is the span, the rest of the
  sentence its context (the rows of a pseudo-log-likelihood, Salazar et al. 2020, a word at a
  time). ValueError for a sentence holding "_" (cloze_row's blank)."""
  if "_" in sentence:
    raise ValueError(f"a sentence scored word by word cannot hold '_': {sentence!r}")
  return [cloze_row(tokenizer, "", sentence[:a] + "_" + sentence[b:], sentence[a:b], seq_len)
          for a, b in (m.span() for m in re.finditer(r"\S+", sentence))]


def scorable(tokenizer, sentence, seq_len):
  """Whether word_rows can build the sentence's rows (no "_", every word fits seq_len)."""
  try:
    word_rows(tokenizer, sentence, seq_len)
  except ValueError:
    return False
  return True


def sentence_scores(objective, task, model, tokenizer, sentences, seq_len):
  """(pll [N], token ids [[...]] of each sentence): each sentence's pseudo-log-likelihood, the
  sum over its words of their tokens' log-probabilities given the rest of the sentence (the
  objective predicts a word as it predicts a cloze option), and the tokens scored. The rows go
  to the objective sorted by length, so that its batches pad little."""
  tokenizer = _Cached(tokenizer)
  rows, owner = [], []
  for k, sentence in enumerate(sentences):
    for row in word_rows(tokenizer, sentence, seq_len):
      rows.append(row)
      owner.append(k)
  order = sorted(range(len(rows)), key=lambda i: (len(rows[i].input_ids),
                                                   rows[i].end - rows[i].start))
  log_probs = [None] * len(rows)
  for i, lp in zip(order, objective.span_log_probs_many(task, model, [rows[i] for i in order])):
    log_probs[i] = lp
  pll, ids = np.zeros(len(sentences)), [[] for _ in sentences]
  for i, k in enumerate(owner):
    pll[k] += float(np.sum(log_probs[i], dtype=np.float64))
    ids[k] += rows[i].input_ids[rows[i].start:rows[i].end]
  return pll, ids
