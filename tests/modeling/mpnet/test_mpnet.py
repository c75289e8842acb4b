"""MPNet encoder: exact buckets, and equality with Hugging Face's MPNetModel."""

import numpy as np
import pytest
import tensorflow as tf

from modeling.mpnet import encoder as mpnet
from modeling.mpnet import hf as mpnet_hf
from tests.reference_libs import require

torch = require("torch")
transformers = require("transformers")


def test_relative_position_bucket_exact():
  rel = tf.constant([[-200, -128, -20, -8, -7, -1, 0, 1, 7, 8, 20, 128, 200]])
  got = mpnet.relative_position_bucket(rel, 32, 128).numpy()[0]
  # key before query (negative) -> buckets 0..15; key after -> 16..31; exact below 8;
  # above, 8 + floor(log(n / 8) / log(16) * 8): n = 20 -> 8 + floor(2.64) = 10; >= 128 -> 15
  np.testing.assert_array_equal(got, [15, 15, 10, 8, 7, 1, 0, 17, 23, 24, 26, 31, 31])
  ref = transformers.models.mpnet.modeling_mpnet.MPNetEncoder.relative_position_bucket(
      torch.arange(-300, 301))
  np.testing.assert_array_equal(
      mpnet.relative_position_bucket(tf.range(-300, 301)).numpy(), ref.numpy())


def test_position_ids_follow_fairseq():
  ids = tf.constant([[0, 5, 6, 2, 1, 1], [0, 7, 2, 1, 1, 1]])
  np.testing.assert_array_equal(mpnet.position_ids_from_input_ids(ids, 1),
                                [[2, 3, 4, 5, 1, 1], [2, 3, 4, 1, 1, 1]])


def test_matches_hugging_face_from_safetensors(tmp_path):
  config = transformers.MPNetConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2,
                                    num_attention_heads=4, intermediate_size=48,
                                    max_position_embeddings=40, hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0)
  torch.manual_seed(0)
  hf = transformers.MPNetModel(config).eval()
  with torch.no_grad():                       # non-trivial LayerNorms and relative bias
    for name, p in hf.named_parameters():
      p.add_(torch.randn_like(p) * 0.05)
  hf.save_pretrained(tmp_path, safe_serialization=True)
  ours = mpnet.MPNetEncoder(mpnet.MPNetConfig.from_json(tmp_path / "config.json"))
  unused = mpnet_hf.load_hf_weights(ours, str(tmp_path))
  assert unused == ["pooler.dense.bias", "pooler.dense.weight"]
  rng = np.random.default_rng(0)
  ids = rng.integers(3, 60, [3, 30]).astype(np.int32)
  ids[:, 0] = 0
  for b, n in enumerate([30, 22, 9]):        # right padding with pad id 1, uneven
    ids[b, n - 1] = 2
    ids[b, n:] = 1
  mask = (ids != 1).astype(np.int64)
  with torch.no_grad():
    ref = hf(input_ids=torch.tensor(ids).long(), attention_mask=torch.tensor(mask)).last_hidden_state
  got = ours(ids, input_mask=(ids == 1).astype(np.float32)).numpy()
  real = mask.astype(bool)
  ref = ref.numpy()
  err = np.max(np.abs(got[real] - ref[real])) / np.max(np.abs(ref[real]))
  assert err < 1e-5
  compiled = tf.function(lambda x, m: ours(x, input_mask=m), jit_compile=True)
  np.testing.assert_allclose(compiled(ids, (ids == 1).astype(np.float32)).numpy()[real], got[real],
                             rtol=1e-4, atol=1e-5)


def _two_stream_inputs(rng, n=8, c=3, batch=2):
  from modeling.mpnet.masks import mpnet_masks, position_ids
  perm = np.stack([rng.permutation(n) for _ in range(batch)])
  tokens = rng.integers(5, 60, [batch, n])
  x_perm = np.take_along_axis(tokens, perm, 1)
  content_pos = np.stack([position_ids(p, c)[0] for p in perm])
  query_pos = perm[:, n - c:]
  mask_ids = np.full([batch, c], 4)
  content_mask, query_mask = mpnet_masks(n, c, "mpnet")
  return (np.concatenate([x_perm, mask_ids], 1), content_pos, mask_ids, query_pos,
          content_mask[None], query_mask[None])


def test_two_stream_sees_only_what_the_masks_allow():
  config = mpnet.MPNetConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=32,
                             max_position_embeddings=20, hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0)
  enc = mpnet.MPNetEncoder(config)
  rng = np.random.default_rng(0)
  ids, cpos, qids, qpos, cmask, qmask = _two_stream_inputs(rng)
  h, g = enc.two_stream(ids, cpos, qids, qpos, cmask, qmask)
  changed = ids.copy()
  changed[:, 6] = (changed[:, 6] + 7) % 55 + 5      # predicted content P1 (n - c = 5)
  h2, g2 = enc.two_stream(changed, cpos, qids, qpos, cmask, qmask)
  g, g2, h, h2 = g.numpy(), g2.numpy(), h.numpy(), h2.numpy()
  np.testing.assert_allclose(g2[:, :2], g[:, :2], atol=1e-6)   # queries 0, 1 cannot see P1
  assert np.abs(g2[:, 2] - g[:, 2]).max() > 1e-4               # query 2 does
  np.testing.assert_allclose(h2[:, :5], h[:, :5], atol=1e-6)   # non-predicted rows cannot
  np.testing.assert_allclose(h2[:, 8:], h[:, 8:], atol=1e-6)   # nor the mask copies
  # with nothing blocked and no query stream it is the plain encoder on those positions
  full, _ = enc.two_stream(ids[:, :8], cpos[:, :8], qids, qpos, np.zeros([1, 8, 8], bool),
                           np.zeros([1, 3, 8], bool))
  plain = enc(ids[:, :8], position_ids=cpos[:, :8] + 2, relative_ids=cpos[:, :8])
  np.testing.assert_allclose(full.numpy(), plain.numpy(), atol=1e-5)


def test_pretraining_export_is_a_hugging_face_masked_lm(tmp_path):
  """save_hf_weights of the pretraining model loads as MPNetForMaskedLM with equal logits."""
  torch = require("torch")
  transformers = require("transformers")
  from modeling.mpnet import pretrain as mpnet_pretrain
  config = mpnet.MPNetConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=32,
                             max_position_embeddings=40)
  model = mpnet_pretrain.MPNetPretrainModel(config).ensure_built()
  rng = np.random.default_rng(0)
  for v in model.lm_head.weights:
    v.assign(rng.normal(0, 0.1, v.shape).astype(np.float32))
  mpnet_hf.save_hf_weights(model.hf_variable_map(), config, str(tmp_path), "MPNetForMaskedLM")
  hf = transformers.MPNetForMaskedLM.from_pretrained(str(tmp_path)).eval()
  ids = np.array([[0, 9, 10, 11, 2, 1], [0, 12, 13, 2, 1, 1]])
  with torch.no_grad():
    want = hf(torch.tensor(ids), attention_mask=torch.tensor(ids != 1).long()).logits.numpy()
  hidden = model.encoder(ids, input_mask=(ids == 1).astype(np.float32))
  got = model.lm_head(hidden, model.encoder.word_embeddings).numpy()
  np.testing.assert_allclose(got[ids != 1], want[ids != 1], rtol=1e-5, atol=1e-5)


def test_pytorch_bin_is_read_without_torch(tmp_path):
  """A pytorch_model.bin written by Hugging Face loads through modeling/torch_pickle.py (no torch
  import) with the same arrays as torch.load, and the encoder then equals HF's MPNetModel."""
  torch = require("torch")
  transformers = require("transformers")
  from modeling import torch_pickle
  config = transformers.MPNetConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2,
                                    num_attention_heads=2, intermediate_size=32,
                                    max_position_embeddings=30)
  torch.manual_seed(0)
  hf = transformers.MPNetModel(config).eval()
  hf.embeddings.word_embeddings.weight.data[3, :4] = torch.tensor([1.5, -2.0, 0.25, 7.0])
  state = hf.state_dict()
  torch.save(state, tmp_path / "pytorch_model.bin")
  ours = torch_pickle.load_state_dict(str(tmp_path / "pytorch_model.bin"))
  assert set(ours) == set(state)
  for k, v in state.items():
    np.testing.assert_array_equal(ours[k], v.numpy(), err_msg=k)
  transposed = {k: v.t().contiguous() if v.dim() == 2 else v for k, v in state.items()}
  torch.save(transposed, tmp_path / "t.bin")          # non-trivial strides survive too
  back = torch_pickle.load_state_dict(str(tmp_path / "t.bin"))
  np.testing.assert_array_equal(back["encoder.layer.0.attention.attn.q.weight"],
                                state["encoder.layer.0.attention.attn.q.weight"].t().numpy())
  hf.config.to_json_file(str(tmp_path / "config.json"))
  encoder = mpnet.MPNetEncoder(mpnet.MPNetConfig.from_json(str(tmp_path / "config.json")))
  mpnet_hf.load_hf_weights(encoder, str(tmp_path))
  ids = np.array([[0, 5, 6, 7, 2], [0, 8, 2, 1, 1]])
  with torch.no_grad():
    want = hf(torch.tensor(ids), attention_mask=torch.tensor(ids != 1).long())[0].numpy()
  got = encoder(ids, input_mask=(ids == 1).astype(np.float32)).numpy()
  np.testing.assert_allclose(got[ids != 1], want[ids != 1], rtol=1e-5, atol=1e-5)
  with pytest.raises(ValueError, match="not a zip-format"):
    (tmp_path / "bad.bin").write_bytes(b"not a zip")
    torch_pickle.load_state_dict(str(tmp_path / "bad.bin"))
