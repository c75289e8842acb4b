"""Heads: summaries against a numpy transcription of the release, RACE layout,
SQuAD training vs inference consistency."""

import numpy as np
import tensorflow as tf

from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.sequence_summary import SequenceSummary
from modeling.xlnet.models import XLNetRaceModel, XLNetSquadModel

TINY = XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=50)
RUN = RunConfig(dropout=0.0, dropatt=0.0)


def _layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def test_summary_types_against_numpy():
  rng = np.random.default_rng(0)
  hidden = rng.standard_normal([3, 5, 16]).astype(np.float32)
  input_mask = np.array([[0] * 5, [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], np.float32)
  for kind in ("last", "first", "mean", "attn"):
    layer = SequenceSummary(kind, use_proj=True, n_head=2, d_head=8)
    out = layer(tf.constant(hidden), tf.constant(input_mask)).numpy()
    if kind == "attn":  # release: abs_attn(summary_bias, hidden, hidden), LN(no residual)
      q = np.einsum("D,Dnd->nd", layer.summary_bias.numpy(), layer.q_kernel.numpy())
      k = np.einsum("blD,Dnd->blnd", hidden, layer.k_kernel.numpy())
      v = np.einsum("blD,Dnd->blnd", hidden, layer.v_kernel.numpy())
      score = np.einsum("nd,blnd->bnl", q, k) / np.sqrt(8) - 1e30 * input_mask[:, None]
      prob = np.exp(score - score.max(-1, keepdims=True))
      prob /= prob.sum(-1, keepdims=True)
      vec = np.einsum("bnl,blnd->bnd", prob, v)
      pooled = _layer_norm(np.einsum("bnd,Dnd->bD", vec, layer.o_kernel.numpy()),
                           layer.layer_norm.gamma.numpy(), layer.layer_norm.beta.numpy())
    else:
      pooled = {"last": hidden[:, -1], "first": hidden[:, 0], "mean": hidden.mean(1)}[kind]
    expected = np.tanh(pooled @ layer.proj.kernel.numpy() + layer.proj.bias.numpy())
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6, err_msg=kind)


def test_race_scores_each_choice_like_a_single_sequence():
  model = XLNetRaceModel(TINY, RUN).ensure_built()
  rng = np.random.default_rng(1)
  batch, n_choice, seq_len = 3, 4, 7
  ids = rng.integers(9, 50, [batch, n_choice, seq_len]).astype(np.int32)
  seg = np.zeros_like(ids)
  seg[..., 4:] = 1
  mask = np.zeros(ids.shape, np.float32)
  mask[1, 2, :3] = 1  # uneven left padding
  logits = model({"input_ids": ids, "seg_ids": seg, "input_mask": mask}).numpy()
  assert logits.shape == (batch, n_choice)
  for b in range(batch):
    for c in range(n_choice):
      one = {"input_ids": ids[b:b + 1, c], "seg_ids": seg[b:b + 1, c],
             "input_mask": mask[b:b + 1, c]}
      hidden = model.encode(one)["content_output"]
      score = model.head(model.summary(hidden, one["input_mask"])).numpy()[0, 0]
      np.testing.assert_allclose(logits[b, c], score, rtol=1e-5, atol=1e-6)


def test_squad_training_path_agrees_with_the_beam():
  model = XLNetSquadModel(TINY, RUN, start_n_top=3, end_n_top=2).ensure_built()
  rng = np.random.default_rng(2)
  inputs = model.dummy_inputs(batch=3, seq_len=9)
  inputs["input_ids"] = tf.constant(rng.integers(9, 50, [3, 9]).astype(np.int32))
  inputs["p_mask"] = tf.constant([[0.0] * 8 + [0.0], [0.0] * 5 + [1.0] * 4,
                                  [1.0, 0, 0, 0, 0, 0, 0, 1, 0]])
  beam = model(inputs)
  inputs["start_positions"] = beam["start_top_index"][:, 0]
  train = model(inputs)
  start_top = tf.gather(train["start_log_probs"], beam["start_top_index"], batch_dims=1)
  np.testing.assert_allclose(start_top, beam["start_top_log_probs"], rtol=1e-5)
  end_top = tf.gather(train["end_log_probs"], beam["end_top_index"][:, :2], batch_dims=1)
  np.testing.assert_allclose(end_top, beam["end_top_log_probs"][:, :2], rtol=1e-5)
  np.testing.assert_allclose(train["cls_logits"], beam["cls_logits"], rtol=1e-6)
  # masked positions are never proposed
  p_mask = inputs["p_mask"].numpy()
  for b in range(3):
    assert not p_mask[b, beam["start_top_index"].numpy()[b]].any()
