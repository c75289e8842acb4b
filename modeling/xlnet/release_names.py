"""The release's TF1 variable names, mapped to our Keras variables (one place).

Each function returns {release name (no ":0"): keras variable}; the list of
names is in ../shared/reference/xlnet.md and ARCHITECTURE.md.
"""

ENCODER_SCOPE = "model/transformer"
# Names a checkpoint may lack without being wrong: fine-tuned checkpoints drop
# mask_emb, and every head is absent from a pretrained checkpoint.
OPTIONAL_ENCODER_NAMES = (f"{ENCODER_SCOPE}/mask_emb/mask_emb",)


def dense(layer, scope):
  out = {f"{scope}/kernel": layer.kernel}
  if layer.use_bias:
    out[f"{scope}/bias"] = layer.bias
  return out


def layer_norm(layer, scope):
  return {f"{scope}/gamma": layer.gamma, f"{scope}/beta": layer.beta}


def encoder(enc, scope=ENCODER_SCOPE):
  out = {
      f"{scope}/word_embedding/lookup_table": enc.word_embedding,
      f"{scope}/mask_emb/mask_emb": enc.mask_emb,
      f"{scope}/r_w_bias": enc.r_w_bias,
      f"{scope}/r_r_bias": enc.r_r_bias,
      f"{scope}/r_s_bias": enc.r_s_bias,
      f"{scope}/seg_embed": enc.seg_embed,
  }
  for i, block in enumerate(enc.blocks):
    attn, ff, prefix = block.rel_attn, block.ff, f"{scope}/layer_{i}"
    for n in ("q", "k", "v", "r", "o"):
      out[f"{prefix}/rel_attn/{n}/kernel"] = getattr(attn, f"{n}_kernel")
    out.update(layer_norm(attn.layer_norm, f"{prefix}/rel_attn/LayerNorm"))
    out.update(dense(ff.layer_1, f"{prefix}/ff/layer_1"))
    out.update(dense(ff.layer_2, f"{prefix}/ff/layer_2"))
    out.update(layer_norm(ff.layer_norm, f"{prefix}/ff/LayerNorm"))
  return out


def lm_head(head, scope="model/lm_loss"):
  return {f"{scope}/bias": head.bias}


def summary(layer, scope="model/sequnece_summary"):
  out = {}
  if layer.summary_type == "attn":
    out[f"{scope}/summary_bias"] = layer.summary_bias
    for n in ("q", "k", "v", "o"):
      out[f"{scope}/abs_attn/{n}/kernel"] = getattr(layer, f"{n}_kernel")
    out.update(layer_norm(layer.layer_norm, f"{scope}/abs_attn/LayerNorm"))
  if layer.proj is not None:
    out.update(dense(layer.proj, f"{scope}/summary"))
  return out


def squad_head(head):
  return {**dense(head.start_dense, "start_logits/dense"),
          **dense(head.end_dense_0, "end_logits/dense_0"),
          **layer_norm(head.end_layer_norm, "end_logits/LayerNorm"),
          **dense(head.end_dense_1, "end_logits/dense_1"),
          **dense(head.answer_dense_0, "answer_class/dense_0"),
          **dense(head.answer_dense_1, "answer_class/dense_1")}
