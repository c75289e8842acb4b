"""The XLNet encoder: embeddings, relative encodings, masks, memory, N blocks.

Shape glossary: see `modeling/ops.py`. Mask convention: 1 / True = blocked.
"""

import keras
import tensorflow as tf

from modeling import ops
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.block import XLNetBlock
from modeling import dropout as dropout_lib
from modeling import recompute as recompute_lib


class XLNetEncoder(keras.layers.Layer):
  """Transformer-XL backbone with XLNet's two-stream attention.

  Variables (release names under `model/transformer/`): word_embedding [V, D],
  mask_emb [1, 1, D], r_w_bias / r_r_bias / r_s_bias [N, H, d] (untie_r) or
  [H, d], seg_embed [N, 2, H, d], and `layer_{l}` blocks.
  """

  def __init__(self, config, run_config=None, **kwargs):
    kwargs.setdefault("name", "transformer")
    super().__init__(**kwargs)
    if isinstance(config, dict):
      config = XLNetConfig.from_dict(config)
    if isinstance(run_config, dict):
      run_config = RunConfig.from_dict(run_config)
    self.config = config
    self.run_config = run_config or RunConfig()
    self.initializer = self.run_config.initializer()
    c, r = self.config, self.run_config
    self.blocks = [
        XLNetBlock(c.n_head, c.d_head, c.d_inner, activation=c.ff_activation,
                   dropout=r.dropout, dropatt=r.dropatt,
                   kernel_initializer=self.initializer, name=f"layer_{i}")
        for i in range(c.n_layer)]
    self.embedding_dropout = dropout_lib.Dropout(r.dropout)
    self.output_dropout = dropout_lib.Dropout(r.dropout)

  def build(self, input_shape=None):
    c = self.config
    add = lambda name, shape: self.add_weight(name=name, shape=shape,
                                              initializer=self.initializer)
    self.word_embedding = add("word_embedding", (c.n_token, c.d_model))
    self.mask_emb = add("mask_emb", (1, 1, c.d_model))
    bias_shape = (c.n_layer, c.n_head, c.d_head) if c.untie_r else (c.n_head, c.d_head)
    self.r_w_bias = add("r_w_bias", bias_shape)
    self.r_r_bias = add("r_r_bias", bias_shape)
    self.r_s_bias = add("r_s_bias", bias_shape)
    self.seg_embed = add("seg_embed", (c.n_layer, 2, c.n_head, c.d_head))
    for block in self.blocks:
      block.build((None, None, c.d_model))

  def call(self, input_ids, seg_ids=None, input_mask=None, perm_mask=None,
           target_mapping=None, mems=None, training=False):
    """Runs the encoder on one segment.

    Args:
      input_ids: int [B, L] token ids.
      seg_ids: int [B, L] segment ids (only equality matters), or None.
      input_mask: [B, L] 1 for padding, or None.
      perm_mask: [B, L, L] 1 where query i may not see token j, or None.
      target_mapping: [B, P, L] one-hot rows (all-zero rows = padding targets);
        turns the query stream on.
      mems: [N, B, M, D] memory from the previous segment (or a list of N
        [B, M, D]), or None.
    Returns:
      dict with
        "content_output": [B, L, D] last content stream (after dropout),
        "query_output": [B, P, D] last query stream (only with target_mapping),
        "new_mems": [N, B, min(mem_len, M + L'), D] (only when mem_len > 0).
    """
    c, r = self.config, self.run_config
    dtype = self.compute_dtype
    input_ids = tf.convert_to_tensor(input_ids)
    batch, qlen = tf.shape(input_ids)[0], input_ids.shape[1] or tf.shape(input_ids)[1]
    if mems is not None and not isinstance(mems, (list, tuple)):
      mems = tf.unstack(mems, num=c.n_layer, axis=0)
    mlen = 0 if mems is None else (mems[0].shape[1] if mems[0].shape[1] is not None
                                   else tf.shape(mems[0])[1])
    klen = mlen + qlen
    if r.bi_data and input_ids.shape[0] is not None and input_ids.shape[0] % 2:
      raise ValueError(f"bi_data needs an even batch size, got {input_ids.shape[0]}")

    content_mask, query_mask = ops.attention_masks(
        qlen, mlen, input_mask, perm_mask, r.attn_type, r.same_length)
    seg_diff = None if seg_ids is None else ops.segment_matrix(seg_ids, mlen)

    table = tf.cast(self.word_embedding, dtype)
    h = self.embedding_dropout(tf.gather(table, input_ids), training=training)
    g = positions = valid = query_seg_diff = None
    if target_mapping is not None:
      positions, valid = ops.target_positions(target_mapping)
      num_predict = target_mapping.shape[1] or tf.shape(target_mapping)[1]
      g = tf.tile(tf.cast(self.mask_emb, dtype), [batch, num_predict, 1])
      g = self.embedding_dropout(g, training=training)
      if query_mask is not None:
        query_mask = tf.gather(
            tf.broadcast_to(query_mask, [batch, qlen, klen]), positions, batch_dims=1)
      if seg_diff is not None:
        query_seg_diff = tf.gather(seg_diff, positions, batch_dims=1)

    pos_emb = ops.relative_positional_encoding(
        qlen, klen, c.d_model, r.attn_type, r.bi_data, r.clamp_len, dtype)
    pos_emb = self.embedding_dropout(pos_emb, training=training)

    new_mems = []
    for i, block in enumerate(self.blocks):
      mem_i = None if mems is None else mems[i]
      if r.mem_len:
        new_mems.append(ops.cache_memory(h, mem_i, r.mem_len, r.reuse_len))
      if c.untie_r:
        biases = (self.r_w_bias[i], self.r_r_bias[i], self.r_s_bias[i])
      else:
        biases = (self.r_w_bias, self.r_r_bias, self.r_s_bias)
      h, g = run_block(block, h, g, mem_i, pos_emb, biases, self.seg_embed[i],
                       dict(seg_diff=seg_diff, content_mask=content_mask,
                            query_mask=query_mask, query_seg_diff=query_seg_diff,
                            target_pos=positions, target_valid=valid, training=training),
                       recompute_lib.active(r.recompute, training))

    outputs = {"content_output": self.output_dropout(h, training=training)}
    if g is not None:
      outputs["query_output"] = self.output_dropout(g, training=training)
    if new_mems:
      outputs["new_mems"] = tf.stack(new_mems, axis=0)
    return outputs

  def embedding_table(self):
    """The word embedding [V, D], for the tied LM head."""
    return self.word_embedding

  def get_config(self):
    config = super().get_config()
    config.update(config=self.config.to_dict(), run_config=self.run_config.to_dict())
    return config


def run_block(block, h, g, mems, pos_emb, biases, seg_embed, kwargs, recompute):
  """One XLNetBlock on both streams, recomputed in the backward pass when `recompute`.

  h [B, L, D], g [B, P, D] or None, mems [B, M, D] or None, pos_emb [1 or 2, R, D], biases
  three [H, d], seg_embed [2, H, d]: the tensors gradients flow through (passed in, see
  modeling/recompute.py); kwargs: the block's other arguments (masks, target positions,
  training), which need none. Returns (h [B, L, D], g [B, P, D] or None).
  """
  has_g, has_mems = g is not None, mems is not None

  def forward(h, pos_emb, r_w_bias, r_r_bias, r_s_bias, seg_embed, *rest):
    rest = list(rest)
    g = rest.pop(0) if has_g else None
    mems = rest.pop(0) if has_mems else None
    h, g = block(h, pos_emb, r_w_bias, r_r_bias, r_s_bias, seg_embed, mems=mems, g=g, **kwargs)
    return (h, g) if has_g else h

  args = [h, pos_emb, *biases, seg_embed] + ([g] if has_g else []) + ([mems] if has_mems else [])
  dropouts = recompute_lib.dropouts_of(block) if recompute else []
  out = recompute_lib.layer_call(forward, args, block, dropouts, recompute)
  return tuple(out) if has_g else (out, None)
