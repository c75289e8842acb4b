"""Token tagging on raw text, the Python path: texts -> each whitespace word's tag and the entity
spans, with character offsets into the text.

What the tagging SavedModel (serving/tagging_graph.py) computes in its graph, written with the
task's own code, so the export's self-check has an independent answer to compare with:

- a text (str, or bytes decoded as a served request is: serving/utf8.py) is cut into its
  whitespace words (the runs of characters that are not `str.isspace`, i.e. `text.split()`),
  each with its character offsets;
- the words go through tagging_features.encode_words (each word tokenized alone, consecutive
  windows of whole words, one row each: a text longer than a row is tagged in full) and the
  model; a word's tag is the argmax of its first piece (tagging_features.word_predictions; a
  word of no piece is O);
- `spans` turns the tags into entities by conlleval's rules (entity_metrics.entities,
  "conlleval": an I-X without a B-X before it starts an entity; B-X B-X are two) and each entity
  into (type, start, end): the characters from its first word's start to its last word's end,
  end exclusive, so `text[start:end]` is its words with their original spacing.

`export_tagger` writes the SavedModel on raw text (serving/tagging_graph.py), published only
when it agrees with this path (`served_outputs`: the same answers laid out as its outputs).
"""

import dataclasses

import numpy as np

from finetuning import conll, entity_metrics, tagging_features
from serving import export, tagging_graph
from serving import tasks as serving_tasks
from serving import utf8


@dataclasses.dataclass(frozen=True)
class TaggedText:
  """One text's answer: `spans` [(type, start, end)], `tags` (one per word), `words`
  [(start, end)] (each word's character offsets), `text` (as decoded)."""
  text: str
  words: list
  tags: list
  spans: list


def words_with_offsets(text):
  """The words of `text` (`text.split()`) as (start, end) character offsets, end exclusive."""
  out, start = [], None
  for i, ch in enumerate(text):
    if ch.isspace():
      if start is not None:
        out.append((start, i))
        start = None
    elif start is None:
      start = i
  if start is not None:
    out.append((start, len(text)))
  return out


def spans(tags, word_offsets):
  """Entities of one text as (type, start, end) character offsets, end exclusive, in order.

  Args:
    tags: one tag per word (O, B-TYPE, I-TYPE; "" counts as O).
    word_offsets: (start, end) of each word.
  """
  if len(tags) != len(word_offsets):
    raise ValueError(f"{len(tags)} tags for {len(word_offsets)} words")
  found = entity_metrics.entities([t or "O" for t in tags], mode="conlleval")
  return [(kind, word_offsets[first][0], word_offsets[end - 1][1]) for kind, first, end in found]


def predict_spans(model, tokenizer, model_type, max_seq_length, labels, texts):
  """Raw texts -> one TaggedText each (module docstring).

  Args:
    model: a token-tagging model: {"input_ids", "seg_ids", "input_mask"} [R, L] -> logits
      [R, L, C].
    tokenizer: the task's tokenizer (SentencePiece Tokenizer or WordPiece).
    model_type: "xlnet" or "mpnet".
    labels: the C tag strings, in the model's class order.
    texts: str or bytes each.
  """
  texts = [utf8.python_text(t) for t in texts]
  offsets = [words_with_offsets(t) for t in texts]
  rows, index = [], []
  for n, (text, words) in enumerate(zip(texts, offsets)):
    for row in tagging_features.encode_words(tokenizer, [text[s:e] for s, e in words],
                                             max_seq_length, model_type):
      rows.append(row)
      index.append((n, row["word_start"], row["first_piece"]))
  if rows:
    logits = serving_tasks.forward(model, {k: np.stack([r[k] for r in rows])
                                           for k in ("input_ids", "seg_ids", "input_mask")})
  else:
    logits = np.zeros([0, max_seq_length, len(labels)])
  tags = tagging_features.word_predictions(logits, index, [len(w) for w in offsets],
                                           list(labels))
  return [TaggedText(text, words, t, spans(t, words))
          for text, words, t in zip(texts, offsets, tags)]


def served_outputs(model, tokenizer, model_type, max_seq_length, labels, texts, max_entities,
                   max_words):
  """predict_spans laid out as the tagging SavedModel's outputs (serving/tagging_graph.py):
  entity_type / start / end [N, max_entities] ("" / -1 padding), count [N], tags
  [N, max_words] ("" padding), truncated [N]."""
  tagged = predict_spans(model, tokenizer, model_type, max_seq_length, labels, texts)
  n = len(tagged)
  kind = np.full([n, max_entities], "", object)
  start = np.full([n, max_entities], -1, np.int64)
  end = np.full([n, max_entities], -1, np.int64)
  tags = np.full([n, max_words], "", object)
  for k, t in enumerate(tagged):
    for e, (name, s, stop) in enumerate(t.spans[:max_entities]):
      kind[k, e], start[k, e], end[k, e] = name, s, stop
    tags[k, :min(len(t.tags), max_words)] = t.tags[:max_words]
  return {"entity_type": kind, "start": start, "end": end,
          "count": np.array([min(len(t.spans), max_entities) for t in tagged]),
          "tags": tags,
          "truncated": np.array([len(t.spans) > max_entities or len(t.tags) > max_words
                                 for t in tagged])}


def export_tagger(model, tokenizer, model_type, max_seq_length, labels, export_dir, log=print,
                  max_entities=tagging_graph.MAX_ENTITIES, max_words=tagging_graph.MAX_WORDS,
                  padding=None, xla=False):
  """Writes the tagging SavedModel (serving/tagging_graph.tagger_module: `text` [N] ->
  entity_type, start, end, count, tags, truncated) at `export_dir` through export.save, which
  publishes it only when, reloaded, it gives `served_outputs` on tagging_graph.PROBES (invalid
  UTF-8, accents, CJK, odd spaces, an empty text, a text of several windows). padding, xla: as
  export.classifier_module. Returns export_dir."""
  labels = conll.label_list(labels=labels)
  module = tagging_graph.tagger_module(model, tokenizer, model_type, max_seq_length, labels,
                                       max_entities, max_words, padding, xla)
  texts = list(tagging_graph.PROBES)
  expected = served_outputs(model, tokenizer, model_type, max_seq_length, labels, texts,
                            max_entities, max_words)
  return export.save(module, export_dir, {"text": np.array(texts, object)}, expected, log=log)
