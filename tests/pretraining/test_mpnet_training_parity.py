"""Training-time parity with Hugging Face's PyTorch MPNet: the same initial weights, the same
masked-LM batches (uneven padding) and the same update rule give the same losses step by step,
so our encoder, LM head, gradients and optimizer train as the reference does (the report's
question "does MPNet learn slower because of a defect?" rests on this)."""

import numpy as np

from tests.reference_libs import require

torch = require("torch")
transformers = require("transformers")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from modeling.mpnet import encoder as mpnet  # noqa: E402
from modeling.mpnet import hf as mpnet_hf
from modeling.mpnet import pretrain as mpnet_pretrain
from training import optimization  # noqa: E402

STEPS, LR, WARM, PAD, MASK = 12, 1e-2, 3, 1, 4


def _batches(rng, vocab, batch=3, length=10, lengths=(10, 7, 5)):
  """MLM batches: rows of different lengths right-padded, 2-3 targets per row, 80/10/10; two
  batches taken in turn, so the model can learn them and the losses move."""
  out = []
  for _ in range(2):
    ids = np.full([batch, length], PAD)
    labels = np.full([batch, length], -100)
    for b, n in enumerate(lengths):
      ids[b, :n] = rng.integers(5, vocab, n)
      pos = rng.choice(n, 2 + b % 2, replace=False)
      labels[b, pos] = ids[b, pos]
      u = rng.random(len(pos))
      ids[b, pos[u < 0.8]] = MASK
      ids[b, pos[(u >= 0.8) & (u < 0.9)]] = rng.integers(5, vocab)
    out.append((ids, labels))
  return [out[k % 2] for k in range(STEPS)]


def _ours(model, batches):
  # MPNet's recipe (fairseq's Adam, betas (0.9, 0.98), eps 1e-6, weight decay 0.01), with
  # clipping on: the test found a clipping defect once
  opt = optimization.build_optimizer(model, LR, STEPS, WARM, optimizer="fairseq",
                                     adam_beta2=0.98, adam_epsilon=1e-6, weight_decay=0.01,
                                     clip=1.0)
  losses = []
  for ids, labels in batches:
    with tf.GradientTape() as tape:
      hidden = model.encoder(ids, input_mask=(ids == PAD).astype(np.float32), training=True)
      logits = model.lm_head(hidden, model.encoder.word_embeddings)
      keep = tf.cast(labels >= 0, tf.float32)
      ce = tf.nn.sparse_softmax_cross_entropy_with_logits(np.maximum(labels, 0), logits)
      loss = tf.reduce_sum(ce * keep) / tf.reduce_sum(keep)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    losses.append(float(loss))
  return losses


def _reference(hf, batches):
  """Hugging Face's model, updated by fairseq's Adam written out here (bias-corrected step
  size, epsilon on the uncorrected sqrt(v), decay w -= lr wd w on every weight), global-norm
  clipping at 1, linear warmup then linear decay."""
  params = [p for p in hf.parameters() if p.requires_grad]
  m = [torch.zeros_like(p) for p in params]
  v = [torch.zeros_like(p) for p in params]
  losses = []
  for step, (ids, labels) in enumerate(batches):
    lr = LR * step / WARM if step < WARM else LR * (1 - (step - WARM) / (STEPS - WARM))
    out = hf(input_ids=torch.tensor(ids), attention_mask=torch.tensor(ids != PAD).long(),
             labels=torch.tensor(labels))
    hf.zero_grad()
    out.loss.backward()
    norm = float(torch.sqrt(sum((p.grad ** 2).sum() for p in params)))
    t = step + 1
    with torch.no_grad():
      for p, mm, vv in zip(params, m, v):
        g = p.grad * min(1.0, 1.0 / norm)
        mm.mul_(0.9).add_(g, alpha=0.1)
        vv.mul_(0.98).addcmul_(g, g, value=1 - 0.98)
        p.add_(p, alpha=-0.01 * lr)
        p.addcdiv_(mm, vv.sqrt().add_(1e-6), value=-lr * (1 - 0.98 ** t) ** 0.5 / (1 - 0.9 ** t))
    losses.append(float(out.loss.detach()))
  return losses


def test_mlm_training_follows_hugging_face_step_by_step(tmp_path):
  config = mpnet.MPNetConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=64,
                             max_position_embeddings=16, hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0, pad_token_id=PAD)
  keras.utils.set_random_seed(0)
  model = mpnet_pretrain.MPNetPretrainModel(config, mode="mlm").ensure_built()
  mpnet_hf.save_hf_weights(model.hf_variable_map(), config, str(tmp_path), "MPNetForMaskedLM")
  hf = transformers.MPNetForMaskedLM.from_pretrained(str(tmp_path)).train()
  batches = _batches(np.random.default_rng(0), config.vocab_size)
  ours, ref = _ours(model, batches), _reference(hf, batches)
  assert ref[-1] < ref[0] - 1.0          # the run learns: the comparison is not of a flat line
  np.testing.assert_allclose(ours, ref, rtol=0, atol=5e-5)
