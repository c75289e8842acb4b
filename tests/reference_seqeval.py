"""References for the entity scores, transcribed line by line from their sources (not from
finetuning/entity_metrics.py, which they check). Three of them:

1. seqeval's default mode: `get_entities`, `start_of_chunk`, `end_of_chunk` of seqeval 1.2.2,
   repository chakki-works/seqeval, path seqeval/metrics/sequence_labeling.py, and its
   per-type counting (`extract_tp_actual_correct` there: sets of (type, start, end) over the
   sentences joined with an "O" between them, as `get_entities` does for nested lists).
2. seqeval's strict mode with scheme IOB2: classes `Token`, `IOB2`, `Tokens`, `Entities` of
   seqeval/scheme.py (same repository and version), and the counting of
   seqeval/metrics/v1.py (`extract_tp_actual_correct`: per type, sets of entities with their
   sentence id).
3. conlleval, the CoNLL-2000 perl script (version 2004-01-26, by Erik Tjong Kim Sang): its
   streaming loop over (gold, guessed) tags with `$inCorrect`, `endOfChunk`, `startOfChunk`,
   a blank line read as a boundary token with both tags O, and the final `if ($inCorrect)`.
   Counted differently from 1 (on the fly, no entity sets), so it checks that equality of
   sets is conlleval's notion of a correct chunk.

seqeval itself is not installable from requirements-dev.txt on this project's machines (its
setup needs setuptools_scm's vcs_versioning at metadata time), so the tests compare with these
transcriptions. numpy, warnings and the E/S/U/L prefixes of other schemes are left out: the
project's tags are O, B-X and I-X.

Each returns {type: (correct, predicted, gold)} over all sentences.
"""

import enum


# --- 1. seqeval default (sequence_labeling.py) ----------------------------------------------

def seqeval_end_of_chunk(prev_tag, tag, prev_type, type_):
  chunk_end = False
  if prev_tag == "E":
    chunk_end = True
  if prev_tag == "S":
    chunk_end = True
  if prev_tag == "B" and tag == "B":
    chunk_end = True
  if prev_tag == "B" and tag == "S":
    chunk_end = True
  if prev_tag == "B" and tag == "O":
    chunk_end = True
  if prev_tag == "I" and tag == "B":
    chunk_end = True
  if prev_tag == "I" and tag == "S":
    chunk_end = True
  if prev_tag == "I" and tag == "O":
    chunk_end = True
  if prev_tag != "O" and prev_tag != "." and prev_type != type_:
    chunk_end = True
  return chunk_end


def seqeval_start_of_chunk(prev_tag, tag, prev_type, type_):
  chunk_start = False
  if tag == "B":
    chunk_start = True
  if tag == "S":
    chunk_start = True
  if prev_tag == "E" and tag == "E":
    chunk_start = True
  if prev_tag == "E" and tag == "I":
    chunk_start = True
  if prev_tag == "S" and tag == "E":
    chunk_start = True
  if prev_tag == "S" and tag == "I":
    chunk_start = True
  if prev_tag == "O" and tag == "E":
    chunk_start = True
  if prev_tag == "O" and tag == "I":
    chunk_start = True
  if tag != "O" and tag != "." and prev_type != type_:
    chunk_start = True
  return chunk_start


def seqeval_get_entities(seq):
  """[(type, start, end inclusive)] of a list of tags or a list of sentences (joined by "O")."""
  if any(isinstance(s, list) for s in seq):
    seq = [item for sublist in seq for item in sublist + ["O"]]
  prev_tag = "O"
  prev_type = ""
  begin_offset = 0
  chunks = []
  for i, chunk in enumerate(seq + ["O"]):
    tag = chunk[0]
    type_ = chunk[1:].split("-", maxsplit=1)[-1] or "_"
    if seqeval_end_of_chunk(prev_tag, tag, prev_type, type_):
      chunks.append((prev_type, begin_offset, i - 1))
    if seqeval_start_of_chunk(prev_tag, tag, prev_type, type_):
      begin_offset = i
    prev_tag = tag
    prev_type = type_
  return chunks


def seqeval_default_counts(y_true, y_pred):
  y_true = [list(s) for s in y_true]
  y_pred = [list(s) for s in y_pred]
  entities_true, entities_pred = {}, {}
  for type_name, start, end in seqeval_get_entities(y_true):
    entities_true.setdefault(type_name, set()).add((start, end))
  for type_name, start, end in seqeval_get_entities(y_pred):
    entities_pred.setdefault(type_name, set()).add((start, end))
  target_names = sorted(set(entities_true) | set(entities_pred))
  out = {}
  for type_name in target_names:
    t = entities_true.get(type_name, set())
    p = entities_pred.get(type_name, set())
    out[type_name] = (len(t & p), len(p), len(t))
  return out


# --- 2. seqeval strict, IOB2 (scheme.py) ----------------------------------------------------

class Prefix(enum.Flag):
  I = enum.auto()  # noqa: E741
  O = enum.auto()  # noqa: E741
  B = enum.auto()
  ANY = I | O | B


class Tag(enum.Flag):
  SAME = enum.auto()
  DIFF = enum.auto()
  ANY = SAME | DIFF


class IOB2:
  """seqeval.scheme.Token with IOB2's patterns (suffix=False, delimiter="-")."""
  allowed_prefix = Prefix.I | Prefix.O | Prefix.B
  start_patterns = {(Prefix.ANY, Prefix.B, Tag.ANY)}
  inside_patterns = {(Prefix.B, Prefix.I, Tag.SAME), (Prefix.I, Prefix.I, Tag.SAME)}
  end_patterns = {
      (Prefix.I, Prefix.O, Tag.ANY),
      (Prefix.I, Prefix.I, Tag.DIFF),
      (Prefix.I, Prefix.B, Tag.ANY),
      (Prefix.B, Prefix.O, Tag.ANY),
      (Prefix.B, Prefix.I, Tag.DIFF),
      (Prefix.B, Prefix.B, Tag.ANY),
  }

  def __init__(self, token):
    self.token = token
    self.prefix = Prefix[token[0]]
    self.tag = token[1:].strip("-") or "_"

  def is_valid(self):
    if self.prefix not in self.allowed_prefix:
      raise ValueError(f"invalid prefix of {self.token}")
    return True

  def is_start(self, prev):
    return self.check_patterns(prev, self.start_patterns)

  def is_inside(self, prev):
    return self.check_patterns(prev, self.inside_patterns)

  def is_end(self, prev):
    return self.check_patterns(prev, self.end_patterns)

  def check_tag(self, prev, cond):
    if cond == Tag.ANY:
      return True
    if prev.tag == self.tag and cond == Tag.SAME:
      return True
    if prev.tag != self.tag and cond == Tag.DIFF:
      return True
    return False

  def check_patterns(self, prev, patterns):
    for prev_prefix, current_prefix, tag_cond in patterns:
      if (prev.prefix in prev_prefix and self.prefix in current_prefix
          and self.check_tag(prev, tag_cond)):
        return True
    return False


def strict_tokens_entities(tokens, sent_id):
  """seqeval.scheme.Tokens(tokens, IOB2, sent_id=sent_id).entities as (sent_id, tag, start, end)."""
  outside_token = IOB2("O")
  toks = [IOB2(t) for t in tokens]
  extended_tokens = toks + [outside_token]

  def _forward(start, prev):
    for i, token in enumerate(extended_tokens[start:], start):
      if token.is_inside(prev):
        prev = token
      else:
        return i
    return len(toks) - 1

  def _is_end(i):
    token = extended_tokens[i]
    prev = extended_tokens[i - 1]
    return token.is_end(prev)

  i = 0
  entities = []
  prev = outside_token
  while i < len(extended_tokens):
    token = extended_tokens[i]
    token.is_valid()
    if token.is_start(prev):
      end = _forward(start=i + 1, prev=token)
      if _is_end(end):
        entities.append((sent_id, token.tag, i, end))
      i = end
    else:
      i += 1
    prev = extended_tokens[i - 1]
  return entities


def seqeval_strict_counts(y_true, y_pred):
  ent_true = [e for n, s in enumerate(y_true) for e in strict_tokens_entities(list(s), n)]
  ent_pred = [e for n, s in enumerate(y_pred) for e in strict_tokens_entities(list(s), n)]
  target_names = sorted({e[1] for e in ent_true} | {e[1] for e in ent_pred})
  out = {}
  for type_name in target_names:
    t = {e for e in ent_true if e[1] == type_name}
    p = {e for e in ent_pred if e[1] == type_name}
    out[type_name] = (len(t & p), len(p), len(t))
  return out


# --- 3. conlleval (perl) ---------------------------------------------------------------------

def conlleval_end_of_chunk(prev_tag, tag, prev_type, type_):
  chunk_end = False
  if prev_tag == "B" and tag == "B":
    chunk_end = True
  if prev_tag == "B" and tag == "O":
    chunk_end = True
  if prev_tag == "I" and tag == "B":
    chunk_end = True
  if prev_tag == "I" and tag == "O":
    chunk_end = True
  if prev_tag == "E" and tag == "E":
    chunk_end = True
  if prev_tag == "E" and tag == "I":
    chunk_end = True
  if prev_tag == "E" and tag == "O":
    chunk_end = True
  if prev_tag != "O" and prev_tag != "." and prev_type != type_:
    chunk_end = True
  if prev_tag == "]":
    chunk_end = True
  if prev_tag == "[":
    chunk_end = True
  return chunk_end


def conlleval_start_of_chunk(prev_tag, tag, prev_type, type_):
  chunk_start = False
  if prev_tag == "B" and tag == "B":
    chunk_start = True
  if prev_tag == "I" and tag == "B":
    chunk_start = True
  if prev_tag == "O" and tag == "B":
    chunk_start = True
  if prev_tag == "O" and tag == "I":
    chunk_start = True
  if prev_tag == "E" and tag == "E":
    chunk_start = True
  if prev_tag == "E" and tag == "I":
    chunk_start = True
  if prev_tag == "O" and tag == "E":
    chunk_start = True
  if tag != "O" and tag != "." and prev_type != type_:
    chunk_start = True
  if tag == "[":
    chunk_start = True
  if tag == "]":
    chunk_start = True
  return chunk_start


def _split(tag):
  # perl: /^([^-]*)-(.*)$/ -> ($1, $2), else (tag, "")
  if "-" in tag:
    head, rest = tag.split("-", 1)
    return head, rest
  return tag, ""


def conlleval_counts_of_lines(lines):
  """conlleval over (gold, guessed) pairs, None for a blank line (a boundary: both tags O)."""
  correct_chunk, found_correct, found_guessed = {}, {}, {}
  in_correct = False
  last_correct, last_correct_type = "O", ""
  last_guessed, last_guessed_type = "O", ""
  for pair in list(lines):
    gold, guess = ("O", "O") if pair is None else pair
    guessed, guessed_type = _split(guess)
    correct, correct_type = _split(gold)
    if pair is None:
      guessed = "O"
    end_c = conlleval_end_of_chunk(last_correct, correct, last_correct_type, correct_type)
    end_g = conlleval_end_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type)
    if in_correct:
      if end_c and end_g and last_guessed_type == last_correct_type:
        in_correct = False
        correct_chunk[last_correct_type] = correct_chunk.get(last_correct_type, 0) + 1
      elif end_c != end_g or guessed_type != correct_type:
        in_correct = False
    start_c = conlleval_start_of_chunk(last_correct, correct, last_correct_type, correct_type)
    start_g = conlleval_start_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type)
    if start_c and start_g and guessed_type == correct_type:
      in_correct = True
    if start_c:
      found_correct[correct_type] = found_correct.get(correct_type, 0) + 1
    if start_g:
      found_guessed[guessed_type] = found_guessed.get(guessed_type, 0) + 1
    last_guessed, last_correct = guessed, correct
    last_guessed_type, last_correct_type = guessed_type, correct_type
  if in_correct:
    correct_chunk[last_correct_type] = correct_chunk.get(last_correct_type, 0) + 1
  types = sorted(set(found_correct) | set(found_guessed))
  return {t: (correct_chunk.get(t, 0), found_guessed.get(t, 0), found_correct.get(t, 0))
          for t in types}


def conlleval_counts(y_true, y_pred):
  """conlleval on sentences written one token per line, a blank line after each sentence."""
  lines = []
  for g, p in zip(y_true, y_pred):
    lines.extend(zip(g, p))
    lines.append(None)
  return conlleval_counts_of_lines(lines)


def scores(counts):
  """(precision, recall, f1) micro and {type: (p, r, f1)} from {type: (correct, pred, gold)}
  as conlleval computes them (0 where a denominator is 0), as fractions."""
  def prf(c, p, g):
    precision = c / p if p > 0 else 0.0
    recall = c / g if g > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f1
  total = [sum(v[i] for v in counts.values()) for i in range(3)]
  return prf(*total), {t: prf(*v) for t, v in counts.items()}
