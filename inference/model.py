"""A loaded model on raw text: `encode`, `embed`, `logits`, `predict` (what `inference.from_pretrained`
returns; docs/python-api.md documents it for users).

Rows are this project's (data_utils/layouts.py), the ones fine-tuning and the SavedModels use:
  xlnet   `A <sep> [B <sep>] <cls>`, LEFT padded (id 0, segment 4): <cls> is the last column;
  mpnet   `<s> A </s>[</s> B </s>]`, RIGHT padded with the tokenizer's pad id: <s> is column 0.
The mask is the project's one convention: `input_mask` [batch, seq] float32, 1.0 on padding and
0.0 on tokens. Texts too long for `max_length` are cut as fine-tuning cuts them (the end of a
single text; a pair as its family's truncation rule).

Texts may be str or bytes: each is read as the SavedModels read a request (serving/utf8.py:
invalid UTF-8 -> U+FFFD), then tokenized by the model's own tokenizer.
"""

import numpy as np
import tensorflow as tf

from data_utils import layouts
from finetuning import tag_spans
from modeling import families
from modeling import pooling as pooling_lib
from serving import tasks as serving_tasks
from serving import utf8


def _as_list(texts, name):
  if isinstance(texts, (str, bytes)):
    return [texts]
  if texts is None:
    raise ValueError(f"{name}: expected a list of texts, got None")
  return list(texts)


class Model:
  """A model with its tokenizer and rows. Attributes: `family` ("xlnet" | "mpnet"), `labels`
  (class names in the order of the logits; () without a classification head or for
  regression), `regression`, `has_head` (logits / predict available), `max_length` (tokens per
  row, special tokens included), `batch_size` (rows per forward pass), `tokenizer` (the Python
  tokenizer), `keras_model` (the Keras task model; its `.encoder` is the encoder), `source`
  (the path loaded), `kind` and `step` (what and which step was loaded), `head` (None,
  "classifier", "tagger" for `tag`, "embedder": a run_pairs.py model, whose pooling `embed`
  uses by default)."""

  def __init__(self, keras_model, tokenizer, family, labels=(), regression=False,
               has_head=False, max_length=512, batch_size=32, source=None, kind=None,
               step=None, head=None):
    self.keras_model, self.tokenizer, self.family = keras_model, tokenizer, family
    self.head = head
    self.labels, self.regression, self.has_head = tuple(labels), regression, has_head
    self.max_length, self.batch_size = int(max_length), int(batch_size)
    self.source, self.kind, self.step = source, kind, step
    self._rows = layouts.rows(family)
    encode_rows = families.get(family).encode_rows
    encoder = keras_model.encoder
    self._encode_fn = tf.function(
        lambda ids, seg, mask: encode_rows(encoder, ids, seg, mask), reduce_retracing=True)
    self._logits_fn = tf.function(lambda rows: keras_model(rows, training=False),
                                  reduce_retracing=True)

  # ---- rows ---------------------------------------------------------------------------------
  def rows(self, texts, texts_b=None, max_length=None):
    """Texts -> the model's rows: dict `input_ids` int32 [batch, seq], `seg_ids` int32
    [batch, seq], `input_mask` float32 [batch, seq] (1.0 on padding), with seq the longest row
    of these texts (at most `max_length`, default the model's)."""
    texts = utf8.python_texts(_as_list(texts, "texts"))
    if texts_b is not None:
      texts_b = utf8.python_texts(_as_list(texts_b, "texts_b"))
      if len(texts_b) != len(texts):
        raise ValueError(f"texts_b: {len(texts_b)} texts for {len(texts)} texts")
    max_length = int(max_length or self.max_length)
    need = layouts.special_count(self.family, texts_b is not None)
    if max_length <= need:
      raise ValueError(f"max_length={max_length}: a row needs more than its {need} special "
                       "tokens")
    rows = layouts.encode_texts(self.tokenizer, texts, texts_b, max_length, self.family)
    return self._trim(rows)

  def _trim(self, rows):
    """Columns that are padding in every row dropped (the left ones for left-padded rows)."""
    if not len(rows["input_mask"]):
      return rows
    longest = max(1, int((rows["input_mask"] == 0).sum(1).max()))
    keep = slice(-longest, None) if self._rows.left_padded else slice(0, longest)
    return {k: np.ascontiguousarray(v[:, keep]) for k, v in rows.items()}

  def _batches(self, rows):
    n = len(rows["input_ids"])
    for start in range(0, n, self.batch_size):
      yield {k: v[start:start + self.batch_size] for k, v in rows.items()}

  # ---- outputs --------------------------------------------------------------------------------
  def encode(self, texts, texts_b=None, max_length=None):
    """The encoder's outputs on raw text.

    Args:
      texts: a list of str (or bytes), or one str; texts_b: None, or the second text of each
        row (a pair); max_length: tokens per row (default: the model's).

    Returns:
      dict of numpy arrays, seq being the longest row of this call:
        token_states float32 [batch, seq, hidden]: the last layer (XLNet: the content stream);
          padding positions hold whatever the model computes there: mask them out;
        pooled float32 [batch, hidden]: the family's summary token, the one its classifier
          reads (XLNet: the last column, <cls>; MPNet: the first, <s>), before any head;
        input_mask float32 [batch, seq]: 1.0 on padding, 0.0 on tokens (XLNet pads on the
          left, MPNet on the right);
        input_ids int32 [batch, seq]: the rows' token ids.
    """
    rows = self.rows(texts, texts_b, max_length)
    states, pooled = [], []
    for batch in self._batches(rows):
      h, p = self._encode_fn(tf.constant(batch["input_ids"]), tf.constant(batch["seg_ids"]),
                             tf.constant(batch["input_mask"]))
      states.append(np.asarray(h, np.float32))
      pooled.append(np.asarray(p, np.float32))
    hidden = self.hidden_size
    seq = rows["input_ids"].shape[1]
    return {"token_states": np.concatenate(states) if states else np.zeros([0, seq, hidden],
                                                                             np.float32),
            "pooled": np.concatenate(pooled) if pooled else np.zeros([0, hidden], np.float32),
            "input_mask": rows["input_mask"], "input_ids": rows["input_ids"]}

  def embed(self, texts, pooling=None, normalize=True, max_length=None):
    """Sentence embeddings: the last layer pooled over each text's real tokens, as a
    SentenceTransformer of (Transformer, Pooling, Normalize) on the same weights computes them
    (modeling/pooling.py), from rows in one segment (layouts.one_segment, what
    sentence-transformers feeds XLNet).

    Args:
      texts: a list of str (or bytes), or one str; pooling: "mean", "first" or "last" (the
        first / last real token on either padding side; default: a run_pairs.py model's own,
        else "mean"); normalize: L2-normalise;
        max_length: tokens per row (default: the model's).

    Returns:
      float32 [batch, hidden].
    """
    if pooling is None:
      pooling = getattr(getattr(self.keras_model, "head", None), "mode", None) or "mean"
    pooling_lib.check_mode(pooling)
    rows = layouts.one_segment(self.rows(texts, None, max_length))
    out = []
    for batch in self._batches(rows):
      h, _ = self._encode_fn(tf.constant(batch["input_ids"]), tf.constant(batch["seg_ids"]),
                             tf.constant(batch["input_mask"]))
      out.append(np.asarray(pooling_lib.embed(h, tf.constant(batch["input_mask"]), pooling,
                                              normalize), np.float32))
    return np.concatenate(out) if out else np.zeros([0, self.hidden_size], np.float32)

  def tag(self, texts):
    """Entities in raw text, with a token tagger (a run_tagger.py run, a *ForTokenClassification
    directory): one dict per text, {"text": the text as read, "entities": [{"type", "start",
    "end", "text"}] (character offsets, end exclusive), "tags": one per whitespace word}. Words
    are tagged by their first piece; a text longer than `max_length` window by window
    (finetuning/tag_spans.py, what the tagging SavedModel computes)."""
    if self.head != "tagger":
      raise ValueError(f"tag: {self.source} holds no token tagger ({self.kind})")
    texts, out = _as_list(texts, "texts"), []
    for start in range(0, len(texts), self.batch_size):     # batch_size texts a forward pass
      for t in tag_spans.predict_spans(self.keras_model, self.tokenizer, self.family,
                                       self.max_length, self.labels,
                                       texts[start:start + self.batch_size]):
        out.append({"text": t.text, "tags": list(t.tags),
                    "entities": [{"type": k, "start": a, "end": b, "text": t.text[a:b]}
                                 for k, a, b in t.spans]})
    return out

  @property
  def hidden_size(self):
    config = self.keras_model.config
    return int(getattr(config, "d_model", None) or config.hidden_size)

  def _check_head(self, method):
    if not self.has_head:
      raise ValueError(f"{method}: {self.source} holds no classification head ({self.kind}); "
                       "use encode(), or load a fine-tuned classifier")

  def logits(self, texts, texts_b=None, max_length=None):
    """The classification head's outputs: float32 [batch, num_labels] (in `labels`' order),
    or [batch] scores for a regression model. Each batch of `batch_size` rows is padded to its
    own longest row (padding is masked: the outputs do not depend on it)."""
    self._check_head("logits")
    texts = _as_list(texts, "texts")
    if texts_b is not None:
      texts_b = _as_list(texts_b, "texts_b")
      if len(texts_b) != len(texts):
        raise ValueError(f"texts_b: {len(texts_b)} texts for {len(texts)} texts")
    out = []
    for start in range(0, len(texts), self.batch_size):
      part_b = None if texts_b is None else texts_b[start:start + self.batch_size]
      rows = self.rows(texts[start:start + self.batch_size], part_b, max_length)
      out.append(np.asarray(self._logits_fn({k: tf.constant(v) for k, v in rows.items()}),
                            np.float32))
    if not out:
      return np.zeros([0] if self.regression else [0, len(self.labels)], np.float32)
    return np.concatenate(out)

  def predict(self, texts, texts_b=None, max_length=None):
    """One dict per text: {"label": the most probable class, "probabilities": {label: p}}
    (softmax of the logits, summing to 1), or {"score": value} for a regression model."""
    logits = self.logits(texts, texts_b, max_length)
    if self.regression:
      return [{"score": float(v)} for v in logits]
    probs = serving_tasks.softmax(logits.astype(np.float64))
    return [{"label": self.labels[int(np.argmax(row))],
             "probabilities": {label: float(p) for label, p in zip(self.labels, row)}}
            for row in probs]

  def __repr__(self):
    head = ("regression" if self.regression else f"{len(self.labels)} labels") \
        if self.has_head else "encoder"
    return f"<inference.Model {self.family} {head} from {self.source}>"
