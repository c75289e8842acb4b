"""Independent reference for parity tests: release-named random weights, written
as a TF1 checkpoint, and the same weights in Hugging Face's PyTorch XLNet.

The name mapping here is written from the HF state-dict names and the release
names in ../shared/reference/xlnet.md, not from modeling/xlnet/release_names.py.
"""

import numpy as np
import tensorflow as tf

T = "model/transformer"


def random_release_weights(n_layer, d_model, n_head, d_head, d_inner, n_token, untie_r=True,
                           seed=0, heads=()):
  """{release name: float32 array} with non-trivial values everywhere."""
  rng = np.random.default_rng(seed)
  w = {}
  r = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)
  w[f"{T}/word_embedding/lookup_table"] = r(n_token, d_model)
  w[f"{T}/mask_emb/mask_emb"] = r(1, 1, d_model)
  bias_shape = (n_layer, n_head, d_head) if untie_r else (n_head, d_head)
  for b in ("r_w_bias", "r_r_bias", "r_s_bias"):
    w[f"{T}/{b}"] = r(*bias_shape)
  w[f"{T}/seg_embed"] = r(n_layer, 2, n_head, d_head)
  for i in range(n_layer):
    p = f"{T}/layer_{i}"
    for n in "qkvro":
      w[f"{p}/rel_attn/{n}/kernel"] = r(d_model, n_head, d_head)
    for ln in ("rel_attn/LayerNorm", "ff/LayerNorm"):
      w[f"{p}/{ln}/gamma"] = 1 + r(d_model)
      w[f"{p}/{ln}/beta"] = r(d_model)
    w[f"{p}/ff/layer_1/kernel"] = r(d_model, d_inner)
    w[f"{p}/ff/layer_1/bias"] = r(d_inner)
    w[f"{p}/ff/layer_2/kernel"] = r(d_inner, d_model)
    w[f"{p}/ff/layer_2/bias"] = r(d_model)
  w["model/lm_loss/bias"] = r(n_token)
  for scope, shape in heads:
    if shape is None:  # LayerNorm
      w[f"{scope}/gamma"] = 1 + r(d_model)
      w[f"{scope}/beta"] = r(d_model)
    else:
      w[f"{scope}/kernel"] = r(*shape)
      if not scope.endswith("answer_class/dense_1"):
        w[f"{scope}/bias"] = r(shape[-1])
  return w


def write_tf1_checkpoint(weights, prefix):
  names = sorted(weights)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(weights[n]) for n in names])
  return prefix


def hf_state_dict(weights, n_layer, untie_r=True, task=None):
  """Maps release names to a Hugging Face XLNet state dict (torch tensors)."""
  import torch
  t = lambda a: torch.tensor(np.ascontiguousarray(a))
  sd = {"transformer.word_embedding.weight": t(weights[f"{T}/word_embedding/lookup_table"]),
        "transformer.mask_emb": t(weights[f"{T}/mask_emb/mask_emb"])}
  for i in range(n_layer):
    p, h = f"{T}/layer_{i}", f"transformer.layer.{i}"
    for n in "qkvro":
      sd[f"{h}.rel_attn.{n}"] = t(weights[f"{p}/rel_attn/{n}/kernel"])
    for b in ("r_w_bias", "r_r_bias", "r_s_bias"):
      v = weights[f"{T}/{b}"]
      sd[f"{h}.rel_attn.{b}"] = t(v[i] if untie_r else v)
    sd[f"{h}.rel_attn.seg_embed"] = t(weights[f"{T}/seg_embed"][i])
    for ln, hn in (("rel_attn/LayerNorm", "rel_attn.layer_norm"), ("ff/LayerNorm", "ff.layer_norm")):
      sd[f"{h}.{hn}.weight"] = t(weights[f"{p}/{ln}/gamma"])
      sd[f"{h}.{hn}.bias"] = t(weights[f"{p}/{ln}/beta"])
    for l in ("layer_1", "layer_2"):
      sd[f"{h}.ff.{l}.weight"] = t(weights[f"{p}/ff/{l}/kernel"].T)
      sd[f"{h}.ff.{l}.bias"] = t(weights[f"{p}/ff/{l}/bias"])

  def dense(hf, tf1, bias=True):
    sd[f"{hf}.weight"] = t(weights[f"{tf1}/kernel"].T)
    if bias:
      sd[f"{hf}.bias"] = t(weights[f"{tf1}/bias"])

  if task == "lm":
    sd["lm_loss.weight"] = sd["transformer.word_embedding.weight"]
    sd["lm_loss.bias"] = t(weights["model/lm_loss/bias"])
  elif task is not None and task.startswith("classification"):
    dense("sequence_summary.summary", "model/sequnece_summary/summary")
    dense("logits_proj", f"model/{task}/logit")
  elif task == "squad":
    dense("start_logits.dense", "start_logits/dense")
    dense("end_logits.dense_0", "end_logits/dense_0")
    sd["end_logits.LayerNorm.weight"] = t(weights["end_logits/LayerNorm/gamma"])
    sd["end_logits.LayerNorm.bias"] = t(weights["end_logits/LayerNorm/beta"])
    dense("end_logits.dense_1", "end_logits/dense_1")
    dense("answer_class.dense_0", "answer_class/dense_0")
    dense("answer_class.dense_1", "answer_class/dense_1", bias=False)
  return sd


def hf_config(n_layer, d_model, n_head, d_inner, n_token, **kw):
  from transformers import XLNetConfig
  kw.setdefault("ff_activation", "gelu_new")  # HF's "gelu" is the erf form; the release's is tanh
  return XLNetConfig(vocab_size=n_token, d_model=d_model, n_layer=n_layer, n_head=n_head,
                     d_inner=d_inner, dropout=0.0, layer_norm_eps=1e-12,
                     summary_last_dropout=0.0, **kw)


def hf_model(cls, config, state_dict):
  model = cls(config)
  missing, unexpected = model.load_state_dict(state_dict, strict=False)
  missing = [m for m in missing if m != "lm_loss.weight"]
  assert not missing and not unexpected, (missing, unexpected)
  return model.eval()


def rel_err(ours, ref):
  ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
  return float(np.max(np.abs(ours - ref)) / max(np.max(np.abs(ref)), 1e-30))


# random_permutation_masks(rng, batch, seq_len, num_predict, pad_rows=1): moved to the
# installed package (bench/pretrain_step.py uses it and must run without the tests package);
# re-exported here for the tests that import it from this module.
from pretraining.random_inputs import random_permutation_masks  # noqa: E402,F401
