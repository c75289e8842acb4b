"""MPNet encoder (BERT-style, post-LN, learned absolute positions + one relative
position bucket bias shared by all layers), and its weights' Hugging Face names
(`hf_variable_map`; reading and writing the files is modeling/mpnet/hf.py).

Shapes: B batch, L tokens, D hidden, H heads, d = D / H.
Masks follow the project convention: input_mask 1 = padding (blocked).

`MPNetEncoder.layers_` is a list of `MPNetLayer`s; their sublayers keep the names
(`layer_{i}_q`, ...) and variable paths (`mpnet/layer_{i}_q/kernel`, the checkpoint keys
of modeling/checkpoint.native_objects) the encoder gave them before the class existed.
"""

import functools
import math

import keras
import tensorflow as tf

from modeling import ops
from modeling.mpnet.config import MPNetConfig
from modeling import dropout as dropout_lib
from modeling import initializers
from modeling import recompute as recompute_lib


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


class MPNetLayer(keras.layers.Layer):
  """One post-LN (BERT) layer of MPNetEncoder: self-attention, then the feed-forward network.

  Shapes: B batch, T query rows (the content stream's L, or the query stream's c),
  S keys (the content stream's L), D hidden, H heads, d = D / H, I intermediate.

  The encoder runs it through named methods, not `call`: in two-stream pretraining both
  streams attend the content stream's keys / values, projected once per layer:
    k, v = layer.keys_values(h)                                    # [B, H, S, d] each
    x = layer.post_attention(x, layer.attend(layer.queries(x), k, v, bias, blocked, ...), ...)
  The dropouts are passed in: the encoder's two are shared by all layers (one seed stream
  each, drawn in the order of the calls). `call` is the one-stream layer.
  """

  def __init__(self, config, index, kernel_initializer=None, **kwargs):
    kwargs.setdefault("name", f"layer_{index}")
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = MPNetConfig(**config)
    self.config = c = config
    self.index = index
    init = initializers.independent(kernel_initializer
                                    or keras.initializers.TruncatedNormal(stddev=0.02))
    dense = lambda units, name: keras.layers.Dense(units, kernel_initializer=init,
                                                   name=f"layer_{index}_{name}")
    ln = lambda name: keras.layers.LayerNormalization(epsilon=c.layer_norm_eps,
                                                      name=f"layer_{index}_{name}")
    self.q, self.k = dense(c.hidden_size, "q"), dense(c.hidden_size, "k")
    self.v, self.o = dense(c.hidden_size, "v"), dense(c.hidden_size, "o")
    self.attn_norm = ln("attention_LayerNorm")
    self.inter = dense(c.intermediate_size, "intermediate")
    self.out = dense(c.hidden_size, "output")
    self.out_norm = ln("output_LayerNorm")

  def build(self, input_shape=None):
    """Standalone: the variables are named `{self.name}/layer_{i}_q/kernel`, ..."""
    self.build_sublayers()

  def build_sublayers(self):
    """Builds the eight sublayers in the current name scope (MPNetEncoder.build calls this,
    not `build`, which would put this layer's name into its variables' paths)."""
    d = self.config.hidden_size
    for layer in (self.q, self.k, self.v, self.o, self.attn_norm, self.inter):
      layer.build((None, d))
    self.out.build((None, self.config.intermediate_size))
    self.out_norm.build((None, d))

  def _split_heads(self, x):
    """[B, T, D] -> [B, H, T, d]."""
    c = self.config
    shape = [tf.shape(x)[0], -1, c.num_attention_heads, c.hidden_size // c.num_attention_heads]
    return tf.transpose(tf.reshape(x, shape), [0, 2, 1, 3])

  def queries(self, x):
    """[B, T, D] -> queries [B, H, T, d]."""
    return self._split_heads(self.q(x))

  def keys_values(self, h):
    """[B, S, D] -> (keys, values), [B, H, S, d] each."""
    return self._split_heads(self.k(h)), self._split_heads(self.v(h))

  def scale(self, dtype):
    """1 / sqrt(d) as a `dtype` scalar (the encoder makes it once for all its layers)."""
    c = self.config
    return tf.cast(1.0 / math.sqrt(c.hidden_size // c.num_attention_heads), dtype)

  def attend(self, q, k, v, bias, blocked, attention_dropout, training=False, scale=None):
    """Attention context [B, T, D] = merged heads of dropout(softmax(q k^T / sqrt(d) + bias)) v.

    q [B, H, T, d]; k, v [B, H, S, d]; bias [B, H, T, S]; blocked: bool broadcastable to
    [B, H, T, S], True = blocked, or None; attention_dropout: a modeling/dropout.Dropout;
    scale: `self.scale(q.dtype)` if None.
    """
    c = self.config
    scale = self.scale(q.dtype) if scale is None else scale
    score = tf.matmul(q, k, transpose_b=True) * scale + bias
    keep = attention_dropout.keep_mask(tf.shape(score), score.dtype, training)
    ctx = ops.attention_values(score, v, blocked, keep)
    return tf.reshape(tf.transpose(ctx, [0, 2, 1, 3]), [tf.shape(ctx)[0], -1, c.hidden_size])

  def post_attention(self, x, context, dropout, training=False):
    """x [B, T, D] the layer's input, context [B, T, D] -> the layer's output [B, T, D]:
    x = LN(dropout(o(context)) + x); LN(dropout(out(act(inter(x)))) + x)."""
    x = self.attn_norm(dropout(self.o(context), training=training) + x)
    inner = _gelu(self.inter(x), self.config.hidden_act)
    return self.out_norm(dropout(self.out(inner), training=training) + x)

  def call(self, x, bias, blocked, *, dropout, attention_dropout, training=False):
    """One stream: x [B, L, D] attends itself; bias [B, H, L, L]; blocked as in `attend`
    (the dropouts by keyword: Keras takes only tensors positionally)."""
    k, v = self.keys_values(x)
    ctx = self.attend(self.queries(x), k, v, bias, blocked, attention_dropout, training)
    return self.post_attention(x, ctx, dropout, training)

  def get_config(self):
    config = super().get_config()
    config.update(config=self.config.to_dict(), index=self.index)
    return config


class MPNetEncoder(keras.layers.Layer):
  """MPNet's encoder: embeddings + LN, N post-LN layers, shared relative bias."""

  def __init__(self, config, recompute=False, **kwargs):
    """recompute: each layer recomputed in the backward pass (RunConfig.recompute; not a
    Hugging Face config key, so not in `config`)."""
    kwargs.setdefault("name", "mpnet")
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = MPNetConfig(**config)
    self.config = c = config
    self.recompute = recompute
    init = initializers.independent(keras.initializers.TruncatedNormal(stddev=0.02))
    self.embedding_norm = keras.layers.LayerNormalization(epsilon=c.layer_norm_eps,
                                                          name="embeddings_LayerNorm")
    self.layers_ = [MPNetLayer(c, i, kernel_initializer=init)
                    for i in range(c.num_hidden_layers)]
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
    self.embedding_norm.build((None, c.hidden_size))
    for layer in self.layers_:
      layer.build_sublayers()     # in this scope: paths mpnet/layer_{i}_q/kernel, ...
      layer.built = True

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
    stream g [B, c, D] that attends h's keys/values with its own bias and mask; each
    recomputed in the backward pass with `recompute` in training (modeling/recompute.py)."""
    drop, attn_drop = self.dropout, self.attention_dropout
    scale = self.layers_[0].scale(self.compute_dtype) if self.layers_ else None
    recompute = recompute_lib.active(self.recompute, training)

    def layer_step(layer, h, bias, g=None, bias_g=None):
      k, v = layer.keys_values(h)
      ctx = layer.attend(layer.queries(h), k, v, bias, blocked, attn_drop, training, scale)
      new_h = layer.post_attention(h, ctx, drop, training)
      if g is None:
        return new_h
      ctx_g = layer.attend(layer.queries(g), k, v, bias_g, blocked_g, attn_drop, training, scale)
      return new_h, layer.post_attention(g, ctx_g, drop, training)

    for layer in self.layers_:
      # bias and bias_g come from relative_attention_bias: passed in, so that they get gradients
      args = [h, bias] + ([] if g is None else [g, bias_g])
      out = recompute_lib.layer_call(functools.partial(layer_step, layer), args, layer,
                                     [drop, attn_drop], recompute)
      h, g = (out, None) if g is None else tuple(out)
    return h, g

  def two_stream(self, content_ids, content_pos, query_ids, query_pos, content_mask,
                 query_mask, training=False):
    """MPNet's pretraining forward (see modeling/mpnet/masks.py).

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
    config.update(config=self.config.to_dict(), recompute=self.recompute)
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
    dense = ((layer.q, "attention.attn.q"), (layer.k, "attention.attn.k"),
             (layer.v, "attention.attn.v"), (layer.o, "attention.attn.o"),
             (layer.inter, "intermediate.dense"), (layer.out, "output.dense"))
    for sub, hf in dense:
      out[f"{p}.{hf}.weight"] = (sub.kernel, True)
      out[f"{p}.{hf}.bias"] = (sub.bias, False)
    for sub, hf in ((layer.attn_norm, "attention.LayerNorm"), (layer.out_norm, "output.LayerNorm")):
      out[f"{p}.{hf}.weight"] = (sub.gamma, False)
      out[f"{p}.{hf}.bias"] = (sub.beta, False)
  return out


class ReferenceNames:
  """What every model of the family answers (modeling/families.py): its weights by reference
  name, the Hugging Face state-dict names of `hf_variable_map()` in this project's layout
  (kernels [in, out]), and its layer count."""

  def reference_variables(self):
    return {name: entry[0] for name, entry in self.hf_variable_map().items()}

  @property
  def num_layers(self):
    return self.config.num_hidden_layers
