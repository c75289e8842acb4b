"""Numbers against an independent implementation (Hugging Face's PyTorch XLNet)
given the same weights, loaded here from a release-named TF1 checkpoint."""

import numpy as np
import pytest
import tensorflow as tf

from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.models import XLNetClassifier, XLNetPretrainModel, XLNetSquadModel
from modeling.xlnet import release_checkpoint
from tests import reference as ref
from tests.reference_libs import require

torch = require("torch")
transformers = require("transformers")

SIZE = dict(n_layer=2, d_model=32, n_head=4, d_head=8, d_inner=48, n_token=97)
TOL = 1e-5


def _setup(tmp_path, untie_r=True, heads=(), seed=0, activation="gelu"):
  weights = ref.random_release_weights(**SIZE, untie_r=untie_r, seed=seed, heads=heads)
  prefix = ref.write_tf1_checkpoint(weights, str(tmp_path / "model.ckpt"))
  config = XLNetConfig(**SIZE, untie_r=untie_r, ff_activation=activation)
  return weights, prefix, config


def _hf(cls, weights, untie_r, task, **kw):
  size = {k: v for k, v in SIZE.items() if k != "d_head"}
  config = ref.hf_config(**size, untie_r=untie_r, **kw)
  if kw.get("ff_activation") == "relu":
    assert config.ff_activation == "relu"
  return ref.hf_model(cls, config, ref.hf_state_dict(weights, SIZE["n_layer"], untie_r, task))


@pytest.mark.parametrize("untie_r,bi_data,clamp_len", [(True, True, -1), (False, True, 3),
                                                      (True, False, -1)])
def test_pretrain_two_stream_matches_hf(tmp_path, untie_r, bi_data, clamp_len):
  weights, prefix, config = _setup(tmp_path, untie_r)
  batch, seq_len, mlen, num_predict, mem_len, reuse_len = 4, 10, 6, 4, 7, 5
  run = RunConfig(dropout=0.0, dropatt=0.0, mem_len=mem_len, reuse_len=reuse_len,
                  bi_data=bi_data, clamp_len=clamp_len)
  model = XLNetPretrainModel(config, run)
  report = release_checkpoint.load_tf1_checkpoint(model, prefix, require_all=True)
  assert not report.fresh and not report.unused

  rng = np.random.default_rng(1)
  ids = rng.integers(0, SIZE["n_token"], [batch, seq_len]).astype(np.int32)
  seg = np.zeros([batch, seq_len], np.int32)
  seg[:, 5:] = 1
  seg[:, -1] = 2  # <cls>
  input_mask = np.zeros([batch, seq_len], np.float32)
  input_mask[1, :3] = 1.0  # uneven padding in one row
  perm_mask, mapping = ref.random_permutation_masks(rng, batch, seq_len, num_predict)
  mems = (rng.standard_normal([SIZE["n_layer"], batch, mlen, SIZE["d_model"]]) * 0.5
          ).astype(np.float32)

  ours = model({"input_ids": ids, "seg_ids": seg, "input_mask": input_mask,
                "perm_mask": perm_mask, "target_mapping": mapping}, mems=mems)

  hf = _hf(transformers.XLNetLMHeadModel, weights, untie_r, "lm", bi_data=bi_data,
           clamp_len=clamp_len, mem_len=mem_len, reuse_len=reuse_len)
  tt = lambda a: torch.tensor(a)
  with torch.no_grad():
    out = hf(input_ids=tt(ids).long(), token_type_ids=tt(seg).long(), input_mask=tt(input_mask),
             perm_mask=tt(perm_mask), target_mapping=tt(mapping),
             mems=[tt(m.transpose(1, 0, 2)) for m in mems], use_mems=True,
             output_hidden_states=True)
  hf_g = out.hidden_states[-1].numpy()  # last g-stream output, before LM head
  assert ours["hidden"].shape == (batch, num_predict, SIZE["d_model"])
  assert ref.rel_err(ours["hidden"], hf_g) < TOL
  assert ref.rel_err(ours["logits"], out.logits.numpy()) < TOL
  hf_mems = np.stack([m.numpy().transpose(1, 0, 2) for m in out.mems])
  assert ours["new_mems"].shape == hf_mems.shape == (SIZE["n_layer"], batch, mem_len,
                                                     SIZE["d_model"])
  assert ref.rel_err(ours["new_mems"], hf_mems) < TOL


@pytest.mark.parametrize("same_length,activation", [(False, "gelu"), (True, "relu")])
def test_uni_content_stream_with_memory_matches_hf(tmp_path, same_length, activation):
  # HF's "uni" path breaks when a data mask is added (an in-place broadcast),
  # so the causal mask is checked alone here; the data masks are covered above.
  weights, prefix, config = _setup(tmp_path, seed=4, activation=activation)
  batch, seq_len, mlen = 2, 7, 5
  run = RunConfig(dropout=0.0, dropatt=0.0, mem_len=6, attn_type="uni",
                  same_length=same_length)
  model = XLNetPretrainModel(config, run)
  release_checkpoint.load_tf1_checkpoint(model, prefix)
  rng = np.random.default_rng(5)
  ids = rng.integers(0, SIZE["n_token"], [batch, seq_len]).astype(np.int32)
  seg = rng.integers(0, 2, [batch, seq_len]).astype(np.int32)
  mems = rng.standard_normal([SIZE["n_layer"], batch, mlen, SIZE["d_model"]]).astype(np.float32)
  ours = model({"input_ids": ids, "seg_ids": seg}, mems=mems)
  hf = _hf(transformers.XLNetLMHeadModel, weights, True, "lm", attn_type="uni", mem_len=6,
           same_length=same_length, **({"ff_activation": "relu"} if activation == "relu" else {}))
  with torch.no_grad():
    out = hf(input_ids=torch.tensor(ids).long(), token_type_ids=torch.tensor(seg).long(),
             mems=[torch.tensor(m.transpose(1, 0, 2)) for m in mems], use_mems=True)
  assert ref.rel_err(ours["logits"], out.logits.numpy()) < TOL
  hf_mems = np.stack([m.numpy().transpose(1, 0, 2) for m in out.mems])
  assert ref.rel_err(ours["new_mems"], hf_mems) < TOL


def test_classifier_last_left_padding_matches_hf(tmp_path):
  d = SIZE["d_model"]
  heads = [("model/sequnece_summary/summary", (d, d)),
           ("model/classification_sst-2/logit", (d, 3))]
  weights, prefix, config = _setup(tmp_path, heads=heads)
  model = XLNetClassifier(config, RunConfig(dropout=0.0, dropatt=0.0), n_class=3,
                          task_name="sst-2")
  release_checkpoint.load_tf1_checkpoint(model, prefix, require_all=True)
  rng = np.random.default_rng(2)
  batch, seq_len = 3, 9
  ids = rng.integers(9, SIZE["n_token"], [batch, seq_len]).astype(np.int32)
  seg = np.zeros([batch, seq_len], np.int32)
  input_mask = np.zeros([batch, seq_len], np.float32)
  for b, n_pad in enumerate([0, 3, 5]):  # LEFT padding, <cls> last
    ids[b, :n_pad] = 5
    seg[b, :n_pad] = 4
    input_mask[b, :n_pad] = 1.0
    seg[b, n_pad + 2:] = 1
  ids[:, -1], seg[:, -1] = 3, 2
  ours = model({"input_ids": ids, "seg_ids": seg, "input_mask": input_mask})
  hf = _hf(transformers.XLNetForSequenceClassification, weights, True,
           "classification_sst-2", num_labels=3, summary_type="last", summary_use_proj=True,
           summary_activation="tanh")
  with torch.no_grad():
    logits = hf(input_ids=torch.tensor(ids).long(), token_type_ids=torch.tensor(seg).long(),
                input_mask=torch.tensor(input_mask)).logits.numpy()
  assert ours.shape == (batch, 3)
  assert ref.rel_err(ours, logits) < TOL


def test_squad_inference_matches_hf(tmp_path):
  d = SIZE["d_model"]
  heads = [("start_logits/dense", (d, 1)), ("end_logits/dense_0", (2 * d, d)),
           ("end_logits/LayerNorm", None), ("end_logits/dense_1", (d, 1)),
           ("answer_class/dense_0", (2 * d, d)), ("answer_class/dense_1", (d, 1))]
  weights, prefix, config = _setup(tmp_path, heads=heads)
  model = XLNetSquadModel(config, RunConfig(dropout=0.0, dropatt=0.0), start_n_top=3,
                          end_n_top=2)
  release_checkpoint.load_tf1_checkpoint(model, prefix, require_all=True)
  rng = np.random.default_rng(3)
  batch, seq_len = 3, 12
  ids = rng.integers(9, SIZE["n_token"], [batch, seq_len]).astype(np.int32)
  seg = np.zeros([batch, seq_len], np.int32)
  p_mask = np.zeros([batch, seq_len], np.float32)
  input_mask = np.zeros([batch, seq_len], np.float32)
  cls_index = np.zeros([batch], np.int32)
  for b, n_real in enumerate([12, 10, 8]):  # paragraph, sep, question, sep, cls, right pad
    seg[b, 6:n_real] = 1
    ids[b, n_real - 1], seg[b, n_real - 1], cls_index[b] = 3, 2, n_real - 1
    p_mask[b, 6:n_real - 1] = 1.0
    ids[b, n_real:], seg[b, n_real:] = 5, 3
    p_mask[b, n_real:] = input_mask[b, n_real:] = 1.0
  ours = model({"input_ids": ids, "seg_ids": seg, "input_mask": input_mask, "p_mask": p_mask,
                "cls_index": cls_index})
  hf = _hf(transformers.XLNetForQuestionAnswering, weights, True, "squad", start_n_top=3,
           end_n_top=2)
  with torch.no_grad():
    out = hf(input_ids=torch.tensor(ids).long(), token_type_ids=torch.tensor(seg).long(),
             input_mask=torch.tensor(input_mask), p_mask=torch.tensor(p_mask),
             cls_index=torch.tensor(cls_index).long())
  # HF returns probabilities (not log-probabilities) and lays the beam out
  # [end, start]; the release returns log-probabilities laid out [start, end].
  to_release = lambda a: a.reshape(batch, 2, 3).transpose(0, 2, 1).reshape(batch, 6)
  np.testing.assert_array_equal(ours["start_top_index"], out.start_top_index.numpy())
  np.testing.assert_array_equal(ours["end_top_index"], to_release(out.end_top_index.numpy()))
  assert ref.rel_err(ours["start_top_log_probs"], np.log(out.start_top_log_probs.numpy())) < TOL
  assert ref.rel_err(ours["end_top_log_probs"],
                     np.log(to_release(out.end_top_log_probs.numpy()))) < TOL
  assert ref.rel_err(ours["cls_logits"], out.cls_logits.numpy()) < TOL
