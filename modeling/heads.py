"""Task heads written once, over any family's encoder.

A head is a Keras layer that reads the encoder's last token states and the row's mask, and
knows nothing of the family that made them:

  head(hidden [B, L, D], input_mask [B, L] (1.0 on padding), training) -> its outputs

Each family hosts any head in one generic task model (modeling/xlnet/models.XLNetWithHead,
modeling/mpnet/models.MPNetWithHead), built by `families.get(model_type).with_head(
model_config, run_config, spec)`. The family supplies what it owns: the encoder, the kernel
initializer, the rate of the head's dropout (as Hugging Face's class of that family applies
it), the checkpoint names of the head's layers and the Hugging Face prefix. The head declares
what is its own:

  hf_suffix           the transformers class is the family's prefix + this ("XLNet" +
                      "ForTokenClassification"); "Model" for a head without weights (the bare
                      encoder, what sentence-transformers' Transformer module loads)
  hf_layers()         {Hugging Face module name: Dense}, names at the state dict's top level
  hf_config(labels)   extra config.json keys (num_labels, id2label, ...)

A head is described by a plain dict, its spec (`{"type": "token_tagger", "n_class": 9}`):
what a task model's get_config stores and what `build` turns back into the layer.
Adding a head: a class here (or anywhere) registered with `@register("name")`.
"""

import keras
import tensorflow as tf

from modeling import dropout as dropout_lib
from modeling import hf_io
from modeling import pooling

HEADS = {}


def register(name):
  """Class decorator: `name` becomes a spec type that `build` knows."""
  def add(cls):
    HEADS[name] = cls
    cls.head_type = name
    return cls
  return add


def build(spec, kernel_initializer=None, dropout=0.0):
  """The head layer of `spec` ({"type": name, **arguments}); the family's initializer and
  dropout rate are given by its host model. ValueError (one line) for an unknown type."""
  spec = dict(spec)
  kind = spec.pop("type", None)
  if kind not in HEADS:
    raise ValueError(f"head type {kind!r}: expected one of {', '.join(sorted(HEADS))}")
  # named by its type, never uniquified ("token_tagger_1"): checkpoints key weights by path
  return HEADS[kind](kernel_initializer=kernel_initializer, dropout=dropout, name=kind, **spec)


class Head(keras.layers.Layer):
  """Base of the heads: the family-neutral contract (module docstring)."""
  hf_suffix = "Model"

  def __init__(self, kernel_initializer=None, dropout=0.0, **kwargs):
    super().__init__(**kwargs)
    self.kernel_initializer = kernel_initializer or "glorot_uniform"
    self.dropout_rate = dropout

  def spec(self):
    """The dict `build` rebuilds this head from (the family's settings excluded)."""
    return {"type": self.head_type}

  def hf_layers(self):
    return {}

  def hf_config(self, labels=None):
    del labels
    return {}

  def _dense(self, units, name):
    return keras.layers.Dense(units, kernel_initializer=self.kernel_initializer, name=name)


@register("token_tagger")
class TokenTagger(Head):
  """A label per token: dropout, then a dense layer over every position, as transformers'
  XLNetForTokenClassification / MPNetForTokenClassification (module `classifier`).

  Returns logits [B, L, n_class]; padding positions get logits too (the task masks them).
  `labels`: the class names, written to an export's config.json as id2label.
  """
  hf_suffix = "ForTokenClassification"

  def __init__(self, n_class, labels=None, kernel_initializer=None, dropout=0.0, **kwargs):
    super().__init__(kernel_initializer, dropout, **kwargs)
    self.n_class, self.labels = int(n_class), list(labels) if labels else None
    self.drop = dropout_lib.Dropout(dropout)
    self.classifier = self._dense(self.n_class, "classifier")

  def call(self, hidden, input_mask=None, training=False):
    del input_mask
    return self.classifier(self.drop(hidden, training=training))

  def spec(self):
    return {**super().spec(), "n_class": self.n_class,
            **({"labels": self.labels} if self.labels else {})}

  def hf_layers(self):
    return {"classifier": self.classifier}

  def hf_config(self, labels=None):
    keys = hf_io.classifier_keys(self.n_class, False, labels or self.labels)
    keys.pop("problem_type")
    return keys


@register("sentence_pooler")
class SentencePooler(Head):
  """A vector per row: the token states pooled over the row's real tokens (mean, first or
  last; modeling/pooling.py, either padding side) and, when `normalize`, L2-normalised, as a
  SentenceTransformer of (Transformer, Pooling, Normalize). No weights: it exports as the
  bare encoder. Returns [B, D]."""

  def __init__(self, mode="mean", normalize=True, kernel_initializer=None, dropout=0.0,
               **kwargs):
    super().__init__(kernel_initializer, dropout, **kwargs)
    self.mode, self.normalize = pooling.check_mode(mode), bool(normalize)

  def call(self, hidden, input_mask=None, training=False):
    del training
    if input_mask is None:
      input_mask = tf.zeros(tf.shape(hidden)[:2], hidden.dtype)
    return pooling.embed(hidden, input_mask, self.mode, self.normalize)

  def spec(self):
    return {**super().spec(), "mode": self.mode, "normalize": self.normalize}
