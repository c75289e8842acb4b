"""MPNet's two-stream pretraining against a test-only transcription of the MPNet release
(microsoft/MPNet, a fairseq fork; commit 8b3055e5 of the files below).

Transcribed, for facts only (the code here is written anew, in float64):
- pretraining/fairseq/tasks/masked_permutation_lm.py, `MaskedDataset.collater`: the permuted
  input. `positions` is a permutation of 0..n-1 whose last pred_size entries are the
  predictions, in prediction order; src_tokens = x[perm] + masked + masked (one 80/10/10 draw,
  `mask_perm`, used twice), positions = perm + perm[tail] + perm[tail]; targets = x[perm][tail].
  (plm: x[perm] + <mask> * c, perm + perm[tail]; mlm: x[perm] with the tail replaced by masked.)
- pretraining/fairseq/models/masked_permutation_net.py: `encode_emb` (token + position
  embedding at positions + 2, then the embedding LayerNorm: RobertaEncoder passes
  encoder_normalize_before=True and the layers are post-LN), `encode_relative_emb` (the bias
  from the buckets of positions[key] - positions[query], over the content stream's positions;
  the query stream's bias is the last pred_size rows of the content stream's),
  `make_query_and_content_mask` (True = blocked), `encode_two_stream_attn` and
  `two_stream_self_attention` (keys and values from the content stream before the layer;
  q scaled by head_dim ** -0.5 after its projection; bias added, then -inf fill, softmax;
  post-LN residual blocks), `compute_mpnet` / `compute_plm` / `compute_mlm`.
- pretraining/fairseq/modules/transformer_sentence_encoder.py: `relative_position_bucket`
  (computed in float32, as torch's n.float() does, then truncated).
- pretraining/fairseq/modules/rel_multihead_attention.py: the packed in_proj_weight [3D, D]
  (q, k, v), out_proj. models/roberta/model.py: `RobertaLMHead` (dense, gelu, LayerNorm, the
  tied embedding, bias). fairseq's LayerNorm has eps 1e-5, and so has microsoft/mpnet-base's
  config.json; the configs here use 1e-5 on both sides.
- pretraining/fairseq/criterions/masked_permutation_criterion.py: the loss is the SUM of the
  NLL over the targets (ignore_index = pad); fairseq's trainer (trainer.py, train_step) then
  multiplies the gradients by 1 / sample_size, sample_size = targets.numel(). So the gradient
  is that of sum(NLL) / (B * c), which is what `release_loss` returns.

The reference's weights are the project model's, re-laid out under the release's state-dict
names (`release_params`); expected values all come from the reference. The reference is written
once against a numpy-like namespace: with numpy (float64) for the forward and the loss, and with
tf.experimental.numpy on float64 tensors for its gradients (the training test), so the same
transcription runs both ways. The project model runs in its own dtype, float32.

The training test runs two independent trajectories of plain SGD from the same weights: the
project's model with its own TF gradients (its written-out attention gradient included), and the
reference's float64 parameters with the reference's gradients; both see the same batches. Each
step compares the loss before the update and every gradient (re-laid out under the release's
names), and at the end the weights themselves (SGD, not Adam: Adam's normalisation would turn
rounding-level gradient noise on near-zero gradients into full-size steps).
"""

import math
import types

import numpy as np
import pytest
import tensorflow as tf
import tensorflow.experimental.numpy as tnp

from modeling import losses
from modeling.mpnet import encoder as mpnet
from modeling.mpnet import masks as mpnet_masks
from modeling.mpnet import pretrain as mpnet_pretrain
from pretraining import mpnet as mpnet_objective

try:
  from scipy.special import erf as _np_erf
except ImportError:     # pragma: no cover
  _np_erf = np.vectorize(math.erf)

PAD = 1                  # fairseq's padding_idx (the release's dictionary and the config here)
V, D, H, FFN, LAYERS = 60, 24, 3, 40, 2
B, N, C = 3, 20, 3       # C = round(0.15 * N), the release's pred_size rule


# ---- the release, transcribed ---------------------------------------------------------------

class _NumpyOps:
  xp = np
  erf = staticmethod(_np_erf)
  take = staticmethod(lambda table, ids: np.take(table, ids, axis=0))


class _TFOps:
  xp = tnp
  erf = staticmethod(tf.math.erf)
  take = staticmethod(lambda table, ids: tf.gather(table, ids))


def release_bucket(relative_position, num_buckets=32, max_distance=128):
  """transformer_sentence_encoder.relative_position_bucket: half the buckets per sign,
  exact below a quarter of them, then log-spaced in float32 and truncated."""
  n = -np.asarray(relative_position, np.int64)
  half = num_buckets // 2
  ret = (n < 0).astype(np.int64) * half
  n = np.abs(n)
  max_exact = half // 2
  with np.errstate(divide="ignore", invalid="ignore"):
    scaled = (np.log(n.astype(np.float32) / np.float32(max_exact))
              / np.float32(math.log(max_distance / max_exact)) * np.float32(half - max_exact))
    large = max_exact + np.where(n >= max_exact, scaled, 0).astype(np.int64)
  large = np.minimum(large, half - 1)
  return ret + np.where(n < max_exact, n, large)


def release_masks(n, c, kind="MPLM"):
  """make_query_and_content_mask(tensor, a=n, b=c): (query [c, K], content [K, K]),
  True = blocked; K = n + c (MPLM) or n (PLM). Keys: n - c non-predicted, c predicted
  (in order), and (MPLM) c mask copies."""
  upper = np.triu(np.ones([c, c]))               # 1 on and above the diagonal
  lower = np.tril(np.ones([c, c]))               # 1 on and below the diagonal
  parts = [np.ones([c, n - c]), 1 - upper] + ([] if kind == "PLM" else [upper])
  query = np.concatenate(parts, axis=1) == 0     # visible where 1
  rows = [np.zeros([n - c, c]), lower] + ([] if kind == "PLM" else [np.zeros([c, c])])
  predicted_cols = np.concatenate(rows, axis=0)  # which rows see which predicted content
  k = n if kind == "PLM" else n + c
  cols = [np.ones([k, n - c]), predicted_cols] + ([] if kind == "PLM" else [1 - predicted_cols])
  content = np.concatenate(cols, axis=1) == 0
  return query, content


def release_collate(x, perm, pred_size, masked, mode="mpnet", mask_idx=mpnet_pretrain.MASK_ID):
  """MaskedDataset.collater after its draws: x [B, n] tokens, perm [B, n] (predictions last,
  in order), masked [B, c] the 80/10/10 copies of the targets (mask_perm's output).
  Returns (src_tokens, positions, targets)."""
  x, perm, masked = (np.asarray(a) for a in (x, perm, masked))
  x_perm = np.take_along_axis(x, perm, axis=1)
  tail = perm[:, -pred_size:]
  targets = x_perm[:, -pred_size:]
  if mode == "mlm":
    return np.concatenate([x_perm[:, :-pred_size], masked], 1), perm, targets
  if mode == "plm":
    return (np.concatenate([x_perm, np.full_like(targets, mask_idx)], 1),
            np.concatenate([perm, tail], 1), targets)
  return (np.concatenate([x_perm, masked, masked], 1), np.concatenate([perm, tail, tail], 1),
          targets)


def _layer_norm(ops, x, g, b, eps=1e-5):
  xp = ops.xp
  mu = xp.mean(x, axis=-1, keepdims=True)
  var = xp.mean((x - mu) ** 2, axis=-1, keepdims=True)
  return (x - mu) / xp.sqrt(var + eps) * g + b


def _linear(ops, x, w, b):
  """torch's F.linear: w is [out, in]."""
  return ops.xp.einsum("bti,oi->bto", x, w) + b


def _gelu(ops, x):
  return 0.5 * x * (1.0 + ops.erf(x / math.sqrt(2.0)))


def _attention(ops, P, p, x, k, v, blocked, bias):
  """two_stream_self_attention's attn_fn for one stream: x [B, T, D]; k, v [B, H, S, d]."""
  xp = ops.xp
  w = P[p + "self_attn.in_proj_weight"]
  bq = P[p + "self_attn.in_proj_bias"]
  d = D // H
  q = (d ** -0.5) * _linear(ops, x, w[:D], bq[:D])
  q = xp.reshape(q, (q.shape[0], q.shape[1], H, d))
  scores = xp.einsum("bthd,bhsd->bhts", q, k) + bias
  if blocked is not None:
    scores = xp.where(blocked, -np.inf, scores)
  scores = scores - xp.max(scores, axis=-1, keepdims=True)
  probs = xp.exp(scores)
  probs = probs / xp.sum(probs, axis=-1, keepdims=True)
  out = xp.einsum("bhts,bhsd->bthd", probs, v)
  out = xp.reshape(out, (out.shape[0], out.shape[1], D))
  return _linear(ops, out, P[p + "self_attn.out_proj.weight"], P[p + "self_attn.out_proj.bias"])


def _post_attention(ops, P, p, attn, residual):
  """encode_two_stream_attn's reuse_fn (post-LN, no dropout)."""
  x = _layer_norm(ops, residual + attn, P[p + "self_attn_layer_norm.weight"],
                  P[p + "self_attn_layer_norm.bias"])
  h = _gelu(ops, _linear(ops, x, P[p + "fc1.weight"], P[p + "fc1.bias"]))
  h = _linear(ops, h, P[p + "fc2.weight"], P[p + "fc2.bias"])
  return _layer_norm(ops, x + h, P[p + "final_layer_norm.weight"],
                     P[p + "final_layer_norm.bias"])


def _keys_values(ops, P, p, c):
  xp = ops.xp
  w, b = P[p + "self_attn.in_proj_weight"], P[p + "self_attn.in_proj_bias"]
  d = D // H
  split = lambda t: xp.transpose(xp.reshape(t, (t.shape[0], t.shape[1], H, d)), (0, 2, 1, 3))
  return (split(_linear(ops, c, w[D:2 * D], b[D:2 * D])),
          split(_linear(ops, c, w[2 * D:], b[2 * D:])))


SE = "decoder.sentence_encoder."


def release_forward(P, src_tokens, positions, pred_size, mode="mpnet", ops=_NumpyOps,
                    key_padding=None):
  """compute_mpnet / compute_plm / compute_mlm: logits [B, pred_size, V] of the predictions.

  key_padding: optional bool [B, n + c] blocked content keys (not in the release's
  pretraining, which never blocks padding; unused by the tests against it)."""
  xp = ops.xp
  src_tokens, positions = np.asarray(src_tokens), np.asarray(positions)
  emb = (ops.take(P[SE + "embed_tokens.weight"], src_tokens)
         + ops.take(P[SE + "embed_positions.weight"], positions + 2))
  x = _layer_norm(ops, emb, P[SE + "emb_layer_norm.weight"], P[SE + "emb_layer_norm.bias"])
  table = P[SE + "relative_attention_bias.weight"]                       # [buckets, H]
  # encode_relative_emb: relative_attention_bias[bucket(key - query)] -> [B, H, Tq, Tk]
  gather_bias = lambda qp, kp: xp.transpose(
      ops.take(table, release_bucket(kp[:, None, :] - qp[:, :, None])), (0, 3, 1, 2))
  layers = [SE + f"layers.{i}." for i in range(LAYERS)]
  if mode == "mlm":
    bias = gather_bias(positions, positions)
    for p in layers:
      k, v = _keys_values(ops, P, p, x)
      x = _post_attention(ops, P, p, _attention(ops, P, p, x, k, v, None, bias), x)
    return release_lm_head(P, x[:, -pred_size:], ops)
  c, q = x[:, :-pred_size], x[:, -pred_size:]                            # split_tensor
  content_pos = positions[:, :-pred_size]
  c_bias = gather_bias(content_pos, content_pos)
  q_bias = c_bias[:, :, -pred_size:]                                     # the last rows
  n = c.shape[1] - (0 if mode == "plm" else pred_size)
  q_mask, c_mask = release_masks(n, pred_size, "PLM" if mode == "plm" else "MPLM")
  q_mask, c_mask = q_mask[None, None], c_mask[None, None]
  if key_padding is not None:
    q_mask = q_mask | key_padding[:, None, None, :]
    c_mask = c_mask | key_padding[:, None, None, :]
  for p in layers:
    k, v = _keys_values(ops, P, p, c)                                    # from c before the layer
    c, q = (_post_attention(ops, P, p, _attention(ops, P, p, c, k, v, c_mask, c_bias), c),
            _post_attention(ops, P, p, _attention(ops, P, p, q, k, v, q_mask, q_bias), q))
  return release_lm_head(P, q, ops)


def release_lm_head(P, x, ops=_NumpyOps):
  """RobertaLMHead: dense, gelu, LayerNorm, tied embedding + bias."""
  h = _gelu(ops, _linear(ops, x, P["decoder.lm_head.dense.weight"],
                         P["decoder.lm_head.dense.bias"]))
  h = _layer_norm(ops, h, P["decoder.lm_head.layer_norm.weight"],
                  P["decoder.lm_head.layer_norm.bias"])
  return ops.xp.einsum("bcd,vd->bcv", h, P[SE + "embed_tokens.weight"]) + P["decoder.lm_head.bias"]


def release_loss(logits, targets, ops=_NumpyOps, pad=PAD):
  """masked_permutation_criterion.compute_loss (sum of NLL, pad targets ignored), divided by
  sample_size = targets.numel() as fairseq's trainer divides the gradients."""
  xp = ops.xp
  z = logits - xp.max(logits, axis=-1, keepdims=True)
  logp = z - xp.log(xp.sum(xp.exp(z), axis=-1, keepdims=True))
  onehot = np.eye(logits.shape[-1])[np.asarray(targets)]
  keep = (np.asarray(targets) != pad).astype(np.float64)[..., None]
  return -xp.sum(logp * onehot * keep) / np.asarray(targets).size


# ---- the project's model and its weights under the release's names --------------------------

def _config():
  return mpnet.MPNetConfig(vocab_size=V, hidden_size=D, num_hidden_layers=LAYERS,
                           num_attention_heads=H, intermediate_size=FFN,
                           max_position_embeddings=N + 2 + 4, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, layer_norm_eps=1e-5,
                           pad_token_id=PAD)


def _model(mode="mpnet", seed=0):
  """The project's MPNetPretrainModel, every weight random (LayerNorm gains around 1) and
  large enough that attention is far from uniform and the relative bias matters."""
  model = mpnet_pretrain.MPNetPretrainModel(_config(), mode=mode).ensure_built()
  rng = np.random.default_rng(seed)
  for var in model.trainable_variables:
    path = var.path
    if "gamma" in path:
      value = 1.0 + 0.2 * rng.standard_normal(var.shape)
    elif "beta" in path or path.endswith("bias"):
      value = 0.2 * rng.standard_normal(var.shape)
    elif "relative_attention_bias" in path:
      value = 1.0 * rng.standard_normal(var.shape)
    elif "embeddings" in path:
      value = 0.5 * rng.standard_normal(var.shape)
    else:   # kernels [in, out]
      value = rng.standard_normal(var.shape) * 1.2 / math.sqrt(var.shape[0])
    var.assign(value.astype(np.float32))
  return model


def release_params(model, value=None):
  """{release state-dict name: float64 array} of the project's weights in torch's layout (or of
  `value(variable)`, e.g. the gradients, laid out the same way)."""
  enc, head = model.encoder, model.lm_head
  value = value or (lambda v: v.numpy())
  f = lambda v: np.asarray(value(v), np.float64)
  P = {SE + "embed_tokens.weight": f(enc.word_embeddings),
       SE + "embed_positions.weight": f(enc.position_embeddings),
       SE + "emb_layer_norm.weight": f(enc.embedding_norm.gamma),
       SE + "emb_layer_norm.bias": f(enc.embedding_norm.beta),
       SE + "relative_attention_bias.weight": f(enc.relative_attention_bias),
       "decoder.lm_head.dense.weight": f(head.dense.kernel).T,
       "decoder.lm_head.dense.bias": f(head.dense.bias),
       "decoder.lm_head.layer_norm.weight": f(head.norm.gamma),
       "decoder.lm_head.layer_norm.bias": f(head.norm.beta),
       "decoder.lm_head.bias": f(head.bias)}
  for i, layer in enumerate(enc.layers_):
    p = SE + f"layers.{i}."
    P[p + "self_attn.in_proj_weight"] = np.concatenate(
        [f(layer.q.kernel).T, f(layer.k.kernel).T, f(layer.v.kernel).T], axis=0)
    P[p + "self_attn.in_proj_bias"] = np.concatenate(
        [f(layer.q.bias), f(layer.k.bias), f(layer.v.bias)])
    P[p + "self_attn.out_proj.weight"] = f(layer.o.kernel).T
    P[p + "self_attn.out_proj.bias"] = f(layer.o.bias)
    P[p + "self_attn_layer_norm.weight"] = f(layer.attn_norm.gamma)
    P[p + "self_attn_layer_norm.bias"] = f(layer.attn_norm.beta)
    P[p + "fc1.weight"], P[p + "fc1.bias"] = f(layer.inter.kernel).T, f(layer.inter.bias)
    P[p + "fc2.weight"], P[p + "fc2.bias"] = f(layer.out.kernel).T, f(layer.out.bias)
    P[p + "final_layer_norm.weight"] = f(layer.out_norm.gamma)
    P[p + "final_layer_norm.bias"] = f(layer.out_norm.beta)
  # every weight mapped once (the decoder is tied to embed_tokens); in_proj packs three
  assert len(P) + 2 * len(enc.layers_) * 2 == len(model.trainable_variables)
  return P


def _records(seed, batch=B, length=N, c=C, cls_last=False):
  """The project's records: ids, is_masked (exactly c per row), rank (the prediction order).
  cls_last: the rows end in <cls> (3), never a target, as the record writer's rows do."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(9, V, [batch, length]).astype(np.int32)
  masked = np.zeros([batch, length], bool)
  for b in range(batch):
    masked[b, rng.choice(length - cls_last, c, replace=False)] = True
  if cls_last:
    ids[:, -1] = 3
  rank = np.stack([rng.permutation(length) for _ in range(batch)]).astype(np.int32)
  return ids, masked, rank


def _release_perm(masked, rank, rng):
  """A release permutation for these records: the non-predicted positions in a RANDOM order
  (the release's randperm; the project sorts them, which must not matter), then the predicted
  ones in increasing rank."""
  perms = []
  for m, r in zip(masked, rank):
    rest = rng.permutation(np.flatnonzero(~m))
    targets = np.flatnonzero(m)
    perms.append(np.concatenate([rest, targets[np.argsort(r[targets], kind="stable")]]))
  return np.stack(perms)


# ---- the permuted input, masks and buckets ---------------------------------------------------

def test_masks_equal_the_release_docstring_and_rule():
  """The pictures of make_query_and_content_mask's docstring (n = 7, c = 3; 1 = blocked),
  copied as exact arrays; then the rule for other sizes, both modes."""
  query_mpnet = [[0, 0, 0, 0, 1, 1, 1, 0, 0, 0],
                 [0, 0, 0, 0, 0, 1, 1, 1, 0, 0],
                 [0, 0, 0, 0, 0, 0, 1, 1, 1, 0]]
  content_mpnet = [[0, 0, 0, 0, 1, 1, 1, 0, 0, 0]] * 4 + [
      [0, 0, 0, 0, 0, 1, 1, 1, 0, 0],
      [0, 0, 0, 0, 0, 0, 1, 1, 1, 0],
      [0, 0, 0, 0, 0, 0, 0, 1, 1, 1]] + [[0, 0, 0, 0, 1, 1, 1, 0, 0, 0]] * 3
  query_plm = [[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0, 1]]
  content_plm = [[0, 0, 0, 0, 1, 1, 1]] * 4 + [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0, 1],
                                               [0, 0, 0, 0, 0, 0, 0]]
  q, c = release_masks(7, 3)
  np.testing.assert_array_equal(q.astype(int), query_mpnet)
  np.testing.assert_array_equal(c.astype(int), content_mpnet)
  q, c = release_masks(7, 3, "PLM")
  np.testing.assert_array_equal(q.astype(int), query_plm)
  np.testing.assert_array_equal(c.astype(int), content_plm)
  project_c, project_q = mpnet_masks.mpnet_masks(7, 3, "mpnet")
  np.testing.assert_array_equal(project_q.astype(int), query_mpnet)
  np.testing.assert_array_equal(project_c.astype(int), content_mpnet)
  project_c, project_q = mpnet_masks.mpnet_masks(7, 3, "plm")
  np.testing.assert_array_equal(project_q.astype(int), query_plm)
  np.testing.assert_array_equal(project_c.astype(int), content_plm)
  for n, c in ((5, 1), (12, 2), (20, 3), (40, 6)):
    for mode, kind in (("mpnet", "MPLM"), ("plm", "PLM")):
      project_c, project_q = mpnet_masks.mpnet_masks(n, c, mode)
      release_q, release_c = release_masks(n, c, kind)
      np.testing.assert_array_equal(project_c, release_c, err_msg=f"{mode} {n} {c}")
      np.testing.assert_array_equal(project_q, release_q, err_msg=f"{mode} {n} {c}")


def test_relative_buckets_equal_the_release():
  rel = np.arange(-300, 301)
  ours = mpnet.relative_position_bucket(tf.constant(rel)).numpy()
  expected = release_bucket(rel)
  np.testing.assert_array_equal(ours, expected)
  # spot values of the rule: exact below 8, log-spaced to 128, the sign in the upper half
  np.testing.assert_array_equal(release_bucket([0, -1, -7, -8, -15, -16, -127, -128, -300]),
                                [0, 1, 7, 8, 9, 10, 15, 15, 15])
  np.testing.assert_array_equal(release_bucket([1, 7, 8, 16, 300]), [17, 23, 24, 26, 31])


def test_permuted_input_layout_equals_the_release_collater():
  """One row by hand: n = 8, predictions at positions 6, 1, 4 (ranks 0, 1, 2)."""
  ids = np.array([[10, 11, 12, 13, 14, 15, 16, 17]], np.int32)
  masked = np.zeros([1, 8], bool)
  masked[0, [1, 4, 6]] = True
  rank = np.array([[5, 1, 7, 3, 2, 4, 0, 6]], np.int32)
  m = mpnet_pretrain.MASK_ID
  # the release: perm = (non-predicted, any order) + (6, 1, 4); here the project's order for
  # the non-predicted part, so that every array can be compared exactly
  perm = np.array([[0, 2, 3, 5, 7, 6, 1, 4]])
  expected_src = [[10, 12, 13, 15, 17, 16, 11, 14, m, m, m, m, m, m]]
  expected_pos = [[0, 2, 3, 5, 7, 6, 1, 4, 6, 1, 4, 6, 1, 4]]
  src, pos, targets = release_collate(ids, perm, 3, np.full([1, 3], m))
  np.testing.assert_array_equal(src, expected_src)
  np.testing.assert_array_equal(pos, expected_pos)
  np.testing.assert_array_equal(targets, [[16, 11, 14]])
  out = mpnet_pretrain.build_inputs(tf.constant(ids), tf.constant(masked), tf.constant(rank), 3,
                                    tf.constant([0, 0]), vocab_size=V, corrupt=False)
  got_src = np.concatenate([out["content_ids"], out["query_ids"]], 1)
  got_pos = np.concatenate([out["content_pos"], out["query_pos"]], 1)
  np.testing.assert_array_equal(got_src, expected_src)
  np.testing.assert_array_equal(got_pos, expected_pos)       # position compensation: 6 1 4
  np.testing.assert_array_equal(out["targets"], [[16, 11, 14]])
  for mode in ("plm", "mlm"):
    src, pos, targets = release_collate(ids, perm, 3, np.full([1, 3], m), mode)
    out = mpnet_pretrain.build_inputs(tf.constant(ids), tf.constant(masked), tf.constant(rank),
                                      3, tf.constant([0, 0]), mode=mode, vocab_size=V,
                                      corrupt=False)
    if mode == "plm":   # content x[perm] at perm; query <mask> at the predicted positions
      np.testing.assert_array_equal(src, [[10, 12, 13, 15, 17, 16, 11, 14, m, m, m]])
      np.testing.assert_array_equal(pos, [[0, 2, 3, 5, 7, 6, 1, 4, 6, 1, 4]])
      got_src = np.concatenate([out["content_ids"], out["query_ids"]], 1)
      got_pos = np.concatenate([out["content_pos"], out["query_pos"]], 1)
    else:               # one stream: the predicted tokens replaced by their copies
      np.testing.assert_array_equal(src, [[10, 12, 13, 15, 17, m, m, m]])
      np.testing.assert_array_equal(pos, [[0, 2, 3, 5, 7, 6, 1, 4]])
      got_src, got_pos = out["content_ids"], out["content_pos"]
    np.testing.assert_array_equal(got_src, src, err_msg=mode)
    np.testing.assert_array_equal(got_pos, pos, err_msg=mode)


def test_corrupted_copies_are_one_draw_used_twice():
  """mask_perm's copies feed both the content stream's mask copies and the query stream (the
  release concatenates the same `masked_tokens` twice), and follow the draw's kind."""
  ids, masked, rank = _records(3, batch=8, length=40, c=6)
  out = mpnet_pretrain.build_inputs(tf.constant(ids), tf.constant(masked), tf.constant(rank), 6,
                                    tf.constant([4, 9]), vocab_size=V)
  copies, kind, targets = (out[k].numpy() for k in ("query_ids", "kind", "targets"))
  np.testing.assert_array_equal(out["content_ids"].numpy()[:, 40:], copies)
  np.testing.assert_array_equal(out["content_pos"].numpy()[:, 40:], out["query_pos"].numpy())
  np.testing.assert_array_equal(copies[kind == mpnet_pretrain.MASKED], mpnet_pretrain.MASK_ID)
  np.testing.assert_array_equal(copies[kind == mpnet_pretrain.KEPT],
                                targets[kind == mpnet_pretrain.KEPT])
  random = copies[kind == mpnet_pretrain.RANDOM]
  assert ((random >= 9) & (random < V)).all()


# ---- forward and loss -------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["mpnet", "plm", "mlm"])
def test_forward_and_loss_equal_the_release(mode):
  model = _model(mode, seed=1)
  P = release_params(model)
  ids, masked, rank = _records(2)
  out = mpnet_pretrain.build_inputs(tf.constant(ids), tf.constant(masked), tf.constant(rank), C,
                                    tf.constant([3, 1]), mode=mode, vocab_size=V)
  logits = model(out, training=True).numpy()
  loss = float(losses.lm_loss(logits, out["targets"]))
  # the reference: its own permutation (random non-predicted order) and layout; the copies are
  # the project's 80/10/10 draw (an input, like the release's mask_perm draw)
  perm = _release_perm(masked, rank, np.random.default_rng(5))
  copies = (out["content_ids"].numpy()[:, -C:] if mode == "mlm"
            else out["query_ids"].numpy())    # plm: all <mask>, release_collate's own
  src, pos, targets = release_collate(ids, perm, C, copies, mode)
  expected = release_forward(P, src, pos, C, mode)
  np.testing.assert_array_equal(out["targets"], targets)
  assert np.abs(expected).max() > 1.0          # logits far from trivial
  diff = np.abs(logits - expected).max()
  assert diff < 2e-5, diff
  expected_loss = release_loss(expected, targets)
  assert abs(loss - expected_loss) < 2e-5 * max(1.0, expected_loss), (loss, expected_loss)
  print(mode, "max |logit diff|", diff, "loss", loss, expected_loss)


def test_query_stream_does_not_see_its_own_token_in_the_release_either():
  """A sanity check of the reference itself: changing a predicted token's content (its slot in
  x[perm]) changes no logit of its own prediction, but does change the later ones'."""
  model = _model("mpnet", seed=2)
  P = release_params(model)
  ids, masked, rank = _records(4)
  perm = _release_perm(masked, rank, np.random.default_rng(0))
  copies = np.full([B, C], mpnet_pretrain.MASK_ID)
  src, pos, _ = release_collate(ids, perm, C, copies)
  base = release_forward(P, src, pos, C)
  src2 = src.copy()
  src2[:, N - C] = (src2[:, N - C] - 9 + 1) % (V - 9) + 9      # the first prediction's token
  changed = release_forward(P, src2, pos, C)
  assert np.abs(changed[:, 0] - base[:, 0]).max() < 1e-12
  assert np.abs(changed[:, 1:] - base[:, 1:]).max() > 1e-3


def test_padded_scoring_rows_equal_the_release_on_each_row_alone():
  """The objective's batched scoring (`span_log_probs_many`: rows right-padded, padding blocked
  as keys) against the release's forward on each row alone, unpadded (the release's pretraining
  never pads inside a row's attention: with no padding there is nothing to block)."""
  model = _model("mpnet", seed=3)
  P = release_params(model)
  rng = np.random.default_rng(7)
  rows = []
  for length, start in ((14, 3), (20, 9), (11, 0)):   # XLNet-layout rows: <cls> (3) last
    rows.append(types.SimpleNamespace(input_ids=tuple(rng.integers(9, V, length - 1)) + (3,),
                                      start=start, end=start + C))
  task = types.SimpleNamespace(config=types.SimpleNamespace(mpnet_mode="mpnet"), vocab_size=V)
  got = mpnet_objective.MPNet().span_log_probs_many(task, model, rows)
  for row, logp in zip(rows, got):
    # as pretraining sees rows (bos_first): <s> (1) first, <cls> dropped, the span one right
    row = types.SimpleNamespace(input_ids=[1] + list(row.input_ids[:-1]), start=row.start + 1,
                                end=row.end + 1)
    n = len(row.input_ids)
    span = np.arange(row.start, row.end)
    perm = np.concatenate([np.delete(np.arange(n), span), span])[None]
    copies = np.full([1, C], mpnet_pretrain.MASK_ID)
    src, pos, targets = release_collate(np.array([row.input_ids]), perm, C, copies)
    logits = release_forward(P, src, pos, C)[0]
    z = logits - logits.max(-1, keepdims=True)
    ref = (z - np.log(np.exp(z).sum(-1, keepdims=True)))[np.arange(C), targets[0]]
    np.testing.assert_allclose(logp, ref, atol=2e-5, err_msg=f"row of length {n}")


# ---- training ---------------------------------------------------------------------------------

STEPS, LR = 4, 0.3


def test_sgd_steps_track_the_release():
  """Two independent SGD trajectories from the same weights on the same batches (the
  objective's own predict + lm_loss on the project's side; the reference's float64 forward,
  loss and gradients on the other). See the module docstring."""
  model = _model("mpnet", seed=4)
  P64 = {k: tf.Variable(v) for k, v in release_params(model).items()}
  objective = mpnet_objective.MPNet()
  task = types.SimpleNamespace(
      config=types.SimpleNamespace(num_predict=C, mpnet_mode="mpnet", mpnet_permute=True),
      vocab_size=V, step_seed=lambda step: tf.constant([11, step], tf.int64))
  rng = np.random.default_rng(9)
  ours, reference, grad_diffs, grad_scale = [], [], [], 0.0
  for step in range(STEPS):
    ids, masked, rank = _records(100 + step % 2, cls_last=True)   # two batches in turn
    batch = {"input_ids": tf.constant(ids), "is_masked": tf.constant(masked),
             "rank": tf.constant(rank)}
    # the release's block: <s> (1) prepended (fairseq's PrependTokenDataset); the record row's
    # <cls> has no place in it
    ids = np.concatenate([np.ones([B, 1], np.int32), ids[:, :-1]], 1)
    masked = np.concatenate([np.zeros([B, 1], bool), masked[:, :-1]], 1)
    rank = np.concatenate([np.zeros([B, 1], np.int32), rank[:, :-1]], 1)
    with tf.GradientTape() as tape:
      logits, target, target_mask, extra, _ = objective.predict(task, model, batch, None, step)
      loss = losses.lm_loss(logits, target, target_mask)
    grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]
    # the same step's 80/10/10 copies (the same stateless draw) for the reference
    copies = mpnet_pretrain.build_inputs(tf.constant(ids), tf.constant(masked),
                                         tf.constant(rank), C, task.step_seed(step),
                                         vocab_size=V)["query_ids"]
    perm = _release_perm(masked, rank, rng)
    np.testing.assert_array_equal(extra["query_pos"], perm[:, -C:])
    src, pos, targets = release_collate(ids, perm, C, copies.numpy())
    with tf.GradientTape() as tape:
      ref_loss = release_loss(release_forward(P64, src, pos, C, ops=_TFOps), targets, _TFOps)
    names = list(P64)
    ref_grads = {k: tf.convert_to_tensor(g)
                 for k, g in zip(names, tape.gradient(ref_loss, [P64[k] for k in names]))}
    ours.append(float(loss))
    reference.append(float(ref_loss))
    by_path = {v.path: g for v, g in zip(model.trainable_variables, grads)}
    ours_laid_out = release_params(model, lambda v: by_path[v.path].numpy())
    grad_diffs.append(max(np.abs(ours_laid_out[k] - ref_grads[k].numpy()).max() for k in names))
    grad_scale = max(grad_scale, max(np.abs(ref_grads[k].numpy()).max() for k in names))
    for var, g in zip(model.trainable_variables, grads):
      var.assign_sub(LR * g)
    for k in names:
      P64[k].assign_sub(LR * ref_grads[k])
  print("losses", ours, reference, "max |grad diff|", max(grad_diffs), "max |grad|", grad_scale)
  assert max(grad_diffs) < 1e-5 * max(1.0, grad_scale), (grad_diffs, grad_scale)
  np.testing.assert_allclose(ours, reference, atol=2e-5)
  # the steps do train: the two batches' losses, summed, went down when they came back
  assert reference[2] + reference[3] < reference[0] + reference[1] - 0.1, reference
  final = release_params(model)
  weight_diff = max(np.abs(final[k] - P64[k].numpy()).max() for k in final)
  print("max weight diff after", STEPS, "steps", weight_diff)
  assert weight_diff < 1e-4, weight_diff
