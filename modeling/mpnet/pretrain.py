"""MPNet pretraining from the shared records: batch construction, LM head, model.

The records' targets are MPNet's predicted set (c tokens) and their stored
factorization ranks the order of the predictions; the non-predicted tokens come
first in position order (they all see each other, so their order is irrelevant).
The c predicted tokens are copied as mask tokens with BERT's 80/10/10 (seeded,
stateless). Modes: see modeling/mpnet/masks.py; permute=False keeps the
predictions in position order ("- permutation" of the ablation).
All shapes static; everything compiles with XLA.
"""

import keras
import tensorflow as tf

from modeling.mpnet import encoder as mpnet
from modeling.mpnet import masks as mpnet_masks
from modeling import initializers

MASK_ID = 6
MASKED, RANDOM, KEPT = 0, 1, 2     # BERT's 80/10/10: what an input copy of a prediction holds


def corruption(shape, seed, vocab_size):
  """BERT's 80/10/10 draw: (kind int32 [shape]: MASKED 80%, RANDOM 10%, KEPT 10%;
  random ids int32 [shape] in [9, vocab_size), past XLNet's special symbols). Stateless."""
  u = tf.random.stateless_uniform(shape, seed)
  kind = tf.where(u < 0.8, MASKED, tf.where(u < 0.9, RANDOM, KEPT))
  return kind, tf.random.stateless_uniform(shape, seed + 1, 9, vocab_size, tf.int32)


def bos_first(input_ids, is_masked, rank, bos_id):
  """Record rows in XLNet's layout -> MPNet's: <s> first, the last token dropped.

  The records hold [A <sep> B <sep> <cls>] (data_utils/writer.py; <sep> and <cls> are never
  targets); the MPNet release prepends the dictionary's <s> to every pretraining block, and
  every MPNet fine-tuning row starts with it (the classifier pools it). So the pretraining
  rows become [<s> A <sep> B <sep>]: same length, targets and ranks moved one right with their
  tokens, <s> never a target.

  Args: input_ids int [B, L]; is_masked bool [B, L]; rank int [B, L].
  Returns the three, shifted. Example (L = 5): [a, b, <sep>, <cls>, x] is not a record row;
  [a, b, <sep>, <sep>, <cls>] -> [<s>, a, b, <sep>, <sep>].
  """
  def shift(x, first):
    return tf.concat([tf.fill([tf.shape(x)[0], 1], tf.constant(first, x.dtype)), x[:, :-1]], 1)
  return shift(input_ids, bos_id), shift(is_masked, False), shift(rank, 0)


def build_inputs(input_ids, is_masked, rank, num_predict, seed, mode="mpnet", permute=True,
                 mask_id=MASK_ID, vocab_size=None, corrupt=True):
  """Records -> MPNet two-stream inputs.

  Args:
    input_ids: int [B, L]; is_masked: bool [B, L] with exactly num_predict per row;
    rank: int [B, L] factorization rank (only the order among targets matters).
    seed: int [2] stateless seed for the 80/10/10 draw.
    corrupt: False: every copy is <mask> (kind MASKED), no draw (scoring, not training).
  Returns dict: content_ids/content_pos [B, T], query_ids/query_pos [B, c],
    targets [B, c], and the static masks.
  """
  length = input_ids.shape[1]
  c = num_predict
  pos = tf.range(length)[None, :]
  order = tf.cast(rank, tf.int32) if permute else tf.broadcast_to(pos, tf.shape(input_ids))
  key = tf.where(is_masked, length + order * length + pos, pos)    # targets last, by order
  perm = tf.argsort(key, axis=1, stable=True)
  x_perm = tf.gather(input_ids, perm, batch_dims=1)
  tail = perm[:, length - c:]
  targets = tf.gather(input_ids, tail, batch_dims=1)
  if corrupt:
    kind, random_ids = corruption(tf.shape(targets), seed, vocab_size or 30000)
    copies = tf.where(kind == MASKED, mask_id, tf.where(kind == RANDOM, random_ids, targets))
  else:
    kind = tf.fill(tf.shape(targets), MASKED)
    copies = tf.fill(tf.shape(targets), tf.constant(mask_id, targets.dtype))
  content_mask, query_mask = mpnet_masks.mpnet_masks(length, c, mode)
  query_ids = copies
  if mode == "plm":   # XLNet's query stream: a mask and a position, never the token itself
    query_ids = tf.fill(tf.shape(copies), tf.constant(mask_id, copies.dtype))
  if mode == "mpnet":
    content_ids = tf.concat([x_perm, copies], axis=1)
    content_pos = tf.concat([perm, tail], axis=1)
  elif mode == "plm":
    content_ids, content_pos = x_perm, perm
  else:                                   # mlm: the copies replace the predicted tokens
    content_ids = tf.concat([x_perm[:, :length - c], copies], axis=1)
    content_pos = perm
  return {"content_ids": content_ids, "content_pos": content_pos, "query_ids": query_ids,
          "query_pos": tail, "targets": targets, "kind": kind,
          "content_mask": tf.constant(content_mask[None]),
          "query_mask": None if query_mask is None else tf.constant(query_mask[None])}


class MPNetLMHead(keras.layers.Layer):
  """dense -> GELU -> LayerNorm -> tied decoder + bias (HF's MPNetLMHead)."""

  def __init__(self, config, **kwargs):
    kwargs.setdefault("name", "lm_head")
    super().__init__(**kwargs)
    self.config = config
    self.dense = keras.layers.Dense(  # HF / fairseq: normal(0.02) for every Linear
        config.hidden_size, name="dense", kernel_initializer=initializers.independent(
            keras.initializers.TruncatedNormal(stddev=0.02)))
    self.norm = keras.layers.LayerNormalization(epsilon=config.layer_norm_eps, name="layer_norm")

  def build(self, input_shape=None):
    self.dense.build((None, self.config.hidden_size))
    self.norm.build((None, self.config.hidden_size))
    self.bias = self.add_weight(name="bias", shape=(self.config.vocab_size,), initializer="zeros")

  def call(self, x, embeddings):
    x = self.norm(tf.nn.gelu(self.dense(x), approximate=False))
    return tf.einsum("bcD,vD->bcv", x, tf.cast(embeddings, x.dtype)) + tf.cast(self.bias, x.dtype)


class MPNetPretrainModel(mpnet.ReferenceNames, keras.Model):
  """Encoder + LM head; call(inputs from build_inputs) -> logits [B, c, V]."""

  family = "mpnet"   # modeling/families.py
  hf_architecture = "MPNetForMaskedLM"

  def __init__(self, config, mode="mpnet", recompute=False, **kwargs):
    super().__init__(**kwargs)
    self.config, self.mode = config, mode
    self.encoder = mpnet.MPNetEncoder(config, recompute=recompute)   # RunConfig.recompute
    self.lm_head = MPNetLMHead(config)

  def ensure_built(self):
    if not self.built or not self.encoder.built:
      ids = tf.constant([[9, 10, 11, 12]])
      self(build_inputs(ids, tf.constant([[False, False, True, True]]), tf.constant([[0, 1, 2, 3]]),
                        2, tf.constant([0, 0]), mode=self.mode,
                        vocab_size=self.config.vocab_size))
    return self

  def call(self, inputs, training=False):
    c = inputs["query_ids"].shape[1]
    if self.mode == "mlm":
      offset = self.config.pad_token_id + 1
      hidden = self.encoder(inputs["content_ids"], position_ids=inputs["content_pos"] + offset,
                            relative_ids=inputs["content_pos"], training=training)[:, -c:]
    else:
      _, hidden = self.encoder.two_stream(
          inputs["content_ids"], inputs["content_pos"], inputs["query_ids"], inputs["query_pos"],
          inputs["content_mask"], inputs["query_mask"], training=training)
    return self.lm_head(hidden, self.encoder.word_embeddings)

  def hf_config_keys(self, labels=None):
    """The head's config.json keys: none (MPNetForMaskedLM's are the encoder's)."""
    del labels
    return {}

  def hf_variable_map(self):
    """Hugging Face MPNetForMaskedLM state-dict names (decoder tied to the embeddings)."""
    out = {f"mpnet.{k}": v for k, v in mpnet.hf_variable_map(self.encoder).items()}
    head = self.lm_head
    out.update({"lm_head.dense.weight": (head.dense.kernel, True),
                "lm_head.dense.bias": (head.dense.bias, False),
                "lm_head.layer_norm.weight": (head.norm.gamma, False),
                "lm_head.layer_norm.bias": (head.norm.beta, False),
                "lm_head.decoder.weight": (self.encoder.word_embeddings, False),
                "lm_head.bias": (head.bias, False)})
    return out
