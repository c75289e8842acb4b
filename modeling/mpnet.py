"""MPNet encoder (BERT-style, post-LN, learned absolute positions + one relative
position bucket bias shared by all layers), and loading of Hugging Face weights.

Shapes: B batch, L tokens, D hidden, H heads, d = D / H.
Masks follow the project convention: input_mask 1 = padding (blocked).
"""

import dataclasses
import json
import math

import keras
import numpy as np
import tensorflow as tf

from data_utils import fileio
from modeling import hf_io
from modeling import ops
from modeling.layers import dropout as dropout_lib


@dataclasses.dataclass
class MPNetConfig:
  """Hugging Face `config.json` keys of MPNet."""
  vocab_size: int = 30527
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 514
  relative_attention_num_buckets: int = 32
  layer_norm_eps: float = 1e-12
  pad_token_id: int = 1

  @classmethod
  def from_json(cls, path):
    data = json.loads(fileio.read_text(path))
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in known})

  def to_dict(self):
    return dataclasses.asdict(self)


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
  """T5/MPNet buckets: half the buckets per direction, exact below num_buckets/4,
  log-spaced up to max_distance. relative_position = key - query."""
  n = -tf.cast(relative_position, tf.int32)
  half = num_buckets // 2
  ret = tf.cast(n < 0, tf.int32) * half
  n = tf.abs(n)
  max_exact = half // 2
  large = max_exact + tf.cast(
      tf.math.log(tf.cast(tf.maximum(n, 1), tf.float32) / max_exact)
      / math.log(max_distance / max_exact) * (half - max_exact), tf.int32)
  large = tf.minimum(large, half - 1)
  return ret + tf.where(n < max_exact, n, large)


def position_ids_from_input_ids(input_ids, pad_id=1):
  """fairseq's make_positions: pad_id + 1, pad_id + 2, ... for real tokens, pad_id on padding."""
  mask = tf.cast(tf.not_equal(input_ids, pad_id), tf.int32)
  return tf.cumsum(mask, axis=1) * mask + pad_id


def _gelu(x, kind):
  if kind == "gelu":
    return tf.nn.gelu(x, approximate=False)
  if kind in ("gelu_new", "gelu_tanh"):
    return ops.gelu(x)
  return tf.nn.relu(x)


class MPNetEncoder(keras.layers.Layer):
  """MPNet's encoder: embeddings + LN, N post-LN layers, shared relative bias."""

  def __init__(self, config, **kwargs):
    kwargs.setdefault("name", "mpnet")
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = MPNetConfig(**config)
    self.config = c = config
    init = keras.initializers.TruncatedNormal(stddev=0.02)
    dense = lambda units, name: keras.layers.Dense(units, kernel_initializer=init, name=name)
    ln = lambda name: keras.layers.LayerNormalization(epsilon=c.layer_norm_eps, name=name)
    self.embedding_norm = ln("embeddings_LayerNorm")
    self.layers_ = []
    for i in range(c.num_hidden_layers):
      self.layers_.append({
          "q": dense(c.hidden_size, f"layer_{i}_q"), "k": dense(c.hidden_size, f"layer_{i}_k"),
          "v": dense(c.hidden_size, f"layer_{i}_v"), "o": dense(c.hidden_size, f"layer_{i}_o"),
          "attn_norm": ln(f"layer_{i}_attention_LayerNorm"),
          "inter": dense(c.intermediate_size, f"layer_{i}_intermediate"),
          "out": dense(c.hidden_size, f"layer_{i}_output"),
          "out_norm": ln(f"layer_{i}_output_LayerNorm")})
    self.dropout = dropout_lib.Dropout(c.hidden_dropout_prob)
    self.attention_dropout = dropout_lib.Dropout(c.attention_probs_dropout_prob)
    self._init = init

  def build(self, input_shape=None):
    c = self.config
    self.word_embeddings = self.add_weight(name="word_embeddings",
                                           shape=(c.vocab_size, c.hidden_size),
                                           initializer=self._init)
    self.position_embeddings = self.add_weight(name="position_embeddings",
                                               shape=(c.max_position_embeddings, c.hidden_size),
                                               initializer=self._init)
    self.relative_attention_bias = self.add_weight(
        name="relative_attention_bias", shape=(c.relative_attention_num_buckets,
                                               c.num_attention_heads), initializer=self._init)
    d = c.hidden_size
    self.embedding_norm.build((None, d))
    for layer in self.layers_:
      for name in ("q", "k", "v", "o"):
        layer[name].build((None, d))
      layer["attn_norm"].build((None, d))
      layer["inter"].build((None, d))
      layer["out"].build((None, c.intermediate_size))
      layer["out_norm"].build((None, d))

  def position_bias(self, position_ids):
    """[B, H, L, L] bias from the buckets of (key position - query position)."""
    return self._bias(position_ids, position_ids)

  def call(self, input_ids, input_mask=None, position_ids=None, relative_ids=None,
           attention_mask=None, training=False):
    """Runs the encoder.

    Args:
      input_ids: int [B, L].
      input_mask: [B, L] 1 on padding (keys nobody may see), or None.
      position_ids: int [B, L] absolute position ids (default: fairseq's, from pad id).
      relative_ids: int [B, L] positions the relative bias uses (default: 0..L-1,
        as HF's fine-tuning encoder; pretraining passes the permuted positions).
      attention_mask: bool [B, L, L] True = blocked (two-stream pretraining), or None.
    Returns:
      [B, L, D] last hidden states.
    """
    c = self.config
    dtype = self.compute_dtype
    input_ids = tf.convert_to_tensor(input_ids)
    if position_ids is None:
      position_ids = position_ids_from_input_ids(input_ids, c.pad_token_id)
    if relative_ids is None:
      relative_ids = tf.broadcast_to(tf.range(tf.shape(input_ids)[1])[None], tf.shape(input_ids))
    h = (tf.gather(tf.cast(self.word_embeddings, dtype), input_ids) +
         tf.gather(tf.cast(self.position_embeddings, dtype), position_ids))
    h = self.dropout(self.embedding_norm(h), training=training)
    bias = self.position_bias(relative_ids)
    blocked = None
    if input_mask is not None:
      blocked = (tf.cast(input_mask, tf.float32) > 0)[:, None, None, :]
    if attention_mask is not None:
      extra = tf.cast(attention_mask, tf.bool)[:, None]
      blocked = extra if blocked is None else tf.logical_or(blocked, extra)
    return self._run_layers(h, bias, blocked, training)[0]

  def _run_layers(self, h, bias, blocked, training, g=None, bias_g=None, blocked_g=None):
    """The N layers over the content stream h [B, T, D] and, optionally, a query
    stream g [B, c, D] that attends h's keys/values with its own bias and mask."""
    c = self.config
    dtype = self.compute_dtype
    heads, d_head = c.num_attention_heads, c.hidden_size // c.num_attention_heads
    split = lambda x: tf.transpose(tf.reshape(x, [tf.shape(x)[0], -1, heads, d_head]), [0, 2, 1, 3])
    merge = lambda x: tf.reshape(tf.transpose(x, [0, 2, 1, 3]), [tf.shape(x)[0], -1, c.hidden_size])
    scale = tf.cast(1.0 / math.sqrt(d_head), dtype)

    def attend(q, k, v, b, mask):
      score = tf.matmul(q, k, transpose_b=True) * scale + b
      keep = self.attention_dropout.keep_mask(tf.shape(score), score.dtype, training)
      return merge(ops.attention_values(score, v, mask, keep))

    def finish(layer, x, ctx):
      x = layer["attn_norm"](self.dropout(layer["o"](ctx), training=training) + x)
      inner = _gelu(layer["inter"](x), c.hidden_act)
      return layer["out_norm"](self.dropout(layer["out"](inner), training=training) + x)

    for layer in self.layers_:
      k, v = split(layer["k"](h)), split(layer["v"](h))
      new_h = finish(layer, h, attend(split(layer["q"](h)), k, v, bias, blocked))
      if g is not None:
        g = finish(layer, g, attend(split(layer["q"](g)), k, v, bias_g, blocked_g))
      h = new_h
    return h, g

  def two_stream(self, content_ids, content_pos, query_ids, query_pos, content_mask,
                 query_mask, training=False):
    """MPNet's pretraining forward (see modeling/mpnet_masks.py).

    Args:
      content_ids, content_pos: int [B, T] tokens and positions of the content
        stream (permuted tokens, then the mask copies in "mpnet" mode).
      query_ids, query_pos: int [B, c] the query stream (mask copies).
      content_mask [B or 1, T, T], query_mask [B or 1, c, T]: True = blocked.
    Returns:
      (content [B, T, D], query [B, c, D]). The relative bias uses the
      positions, not the indices.
    """
    if not self.built:
      self(tf.zeros([1, 2], tf.int32))
    dtype = self.compute_dtype
    embed = lambda ids, pos: self.dropout(self.embedding_norm(
        tf.gather(tf.cast(self.word_embeddings, dtype), ids) +
        tf.gather(tf.cast(self.position_embeddings, dtype), pos)), training=training)
    # absolute position ids are offset by pad_id + 1, as fairseq's
    offset = self.config.pad_token_id + 1
    h = embed(content_ids, content_pos + offset)
    g = embed(query_ids, query_pos + offset)
    bias = self._bias(content_pos, content_pos)
    bias_g = self._bias(query_pos, content_pos)
    return self._run_layers(h, bias, tf.cast(content_mask, tf.bool)[:, None], training, g, bias_g,
                        tf.cast(query_mask, tf.bool)[:, None])

  def _bias(self, query_pos, key_pos):
    rel = key_pos[:, None, :] - query_pos[:, :, None]
    buckets = relative_position_bucket(rel, self.config.relative_attention_num_buckets)
    bias = tf.gather(tf.cast(self.relative_attention_bias, self.compute_dtype), buckets)
    return tf.transpose(bias, [0, 3, 1, 2])

  def get_config(self):
    config = super().get_config()
    config.update(config=self.config.to_dict())
    return config


def hf_variable_map(encoder):
  """{Hugging Face state-dict name: (variable, transpose?)}."""
  out = {"embeddings.word_embeddings.weight": (encoder.word_embeddings, False),
         "embeddings.position_embeddings.weight": (encoder.position_embeddings, False),
         "embeddings.LayerNorm.weight": (encoder.embedding_norm.gamma, False),
         "embeddings.LayerNorm.bias": (encoder.embedding_norm.beta, False),
         "encoder.relative_attention_bias.weight": (encoder.relative_attention_bias, False)}
  for i, layer in enumerate(encoder.layers_):
    p = f"encoder.layer.{i}"
    names = {"q": "attention.attn.q", "k": "attention.attn.k", "v": "attention.attn.v",
             "o": "attention.attn.o", "inter": "intermediate.dense", "out": "output.dense"}
    for key, hf in names.items():
      out[f"{p}.{hf}.weight"] = (layer[key].kernel, True)
      out[f"{p}.{hf}.bias"] = (layer[key].bias, False)
    for key, hf in (("attn_norm", "attention.LayerNorm"), ("out_norm", "output.LayerNorm")):
      out[f"{p}.{hf}.weight"] = (layer[key].gamma, False)
      out[f"{p}.{hf}.bias"] = (layer[key].beta, False)
  return out


def load_hf_weights(encoder, model_dir):
  """Loads HF MPNet weights (prefix `mpnet.` tolerated) into `encoder`; returns unused names."""
  weights = hf_io.read_weights(model_dir)
  weights = {k[len("mpnet."):] if k.startswith("mpnet.") else k: v for k, v in weights.items()}
  if not encoder.built:
    encoder(tf.zeros([1, 2], tf.int32))
  mapping = hf_variable_map(encoder)
  missing = [k for k in mapping if k not in weights]
  if missing:
    raise ValueError(f"{model_dir}: missing {len(missing)} weights: {', '.join(missing[:5])}")
  for name, (var, transpose) in mapping.items():
    value = np.asarray(weights[name], np.float32)
    value = value.T if transpose else value
    if tuple(value.shape) != tuple(var.shape):
      raise ValueError(f"{model_dir}: {name} has shape {list(value.shape)}, "
                       f"the model {list(var.shape)}")
    var.assign(value)
  return sorted(set(weights) - set(mapping))


def save_hf_weights(variable_map, config, model_dir, architecture="MPNetModel", **extra):
  """Writes `config.json` + `model.safetensors` in the Hugging Face layout (atomically).

  variable_map: {state-dict name: (variable, transpose?)}, e.g. hf_variable_map(encoder)
  with names prefixed as the architecture expects; extra: more config.json keys
  (num_labels, ...). Hugging Face's MPNet classes and load_hf_weights read the result.
  """
  tensors = {}
  for name, (var, transpose) in variable_map.items():
    value = np.asarray(var.numpy(), np.float32)
    tensors[name] = value.T if transpose else value
  data = dict(config.to_dict(), model_type="mpnet", architectures=[architecture],
              bos_token_id=0, eos_token_id=2, **extra)
  return hf_io.write_model_dir(model_dir, tensors, data)
