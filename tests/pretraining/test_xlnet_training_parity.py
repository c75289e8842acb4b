"""XLNet's PLM training against Hugging Face's PyTorch XLNet, step by step (issue #30).

Ours: the trainer's own step (training/stepper.py `Stepper` around `PretrainTask`, record_dir
None), so the loss (`PretrainTask.loss`), the XLA-compiled forward/backward, the release's
optimizer (`tf.train.AdamOptimizer` semantics, global-norm clipping, warmup + linear decay)
and the memory carried from step to step are the ones run_pretrain.py trains with.

Reference: `transformers.XLNetLMHeadModel` (float32, train mode, dropout 0) given the same
release-named random weights (tests/reference.py), the same batches (perm_mask,
target_mapping, labels = targets with -100 at padding targets) and the memory it returned at
the previous step (zeros at the first step, as the release's training scripts start), updated
by the release's optimizer written out here in torch: global-norm clipping at CLIP, then TF1's
Adam (lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), w -= lr_t m / (sqrt(v) + eps), epsilon on the
uncorrected sqrt(v)), learning rate lr k / warmup for step k < warmup, then linear to 0 at
train_steps.

The batches are built here from a random factorization order per row by the release's
`_local_perm` rules (data_utils/pipeline.py is not used): [reuse] [A] <sep> [B] <sep> <cls>;
non-targets are seen by all and see no target nor <sep>/<cls>; a target sees non-targets and
the targets / <sep> / <cls> earlier in its half's order, never itself; the reuse half sees
nothing of the new half, the new half all of the reuse half. Rows differ in their tokens,
A/B split, order and number of real targets (trailing zero rows of target_mapping).

Measured (seed 0, bi_data False / True; in brackets the worst over seeds 1-3), and asserted:
  loss per step                   rel. 5.3e-7 / 4.0e-7   [8.2e-7]   rtol 2e-6
  gradient norm before clipping   rel. 6.2e-7 / 6.2e-7   [2.1e-6]   rtol 5e-6
  learning rate                   rel. 1.7e-7 (abs 2e-9: ours is float32)   rtol 3e-7
  memory after the last step      max|diff|/max|ref| 2.8e-6 / 1.4e-6 [2.7e-6]   1e-5
  final weights, |diff| / |ref|   2.1e-6 / 1.5e-6 [3.7e-6]   1e-5
    except rel_attn/r/kernel      1.0e-5 / 1.7e-5 [1.5e-5]   5e-5
The r kernels' excess is float32 rounding, not a difference: the rows that multiply the
slowest sinusoids (cos of ~1e-4 x position, constant across positions to 1e-5, which the
softmax ignores) get gradients of 1e-7..1e-5 of which float32 rounding is a visible part, and
Adam's m / (sqrt(v) + eps) turns them into updates of size lr whatever their magnitude. The
float32 reference itself is 9e-6 away from the same reference run in float64 on that weight
(step-0 gradients of ours and of HF float32 are equally far from float64's, median 3e-7).
Not vacuous: clipping is active on 7 steps and off on one (norms 3.3 ... 0.90), the loss of
batch 0 falls 4.12 -> 3.87 -> 3.14 over its three visits, every weight moved by >= 7% of its
norm (asserted > 1%). Breaking the reference fails it (bi_data False, max loss rel. diff):
no bias correction 0.52 (6e-2 at step 2, after the first update with lr > 0); zero memory
fed at every step 1.8e-2 (from step 1); no clipping 1.9e-2 (4e-3 at step 2); the schedule
one step ahead: learning rates off by 2.5e-2, losses by 0.12 from step 1.
"""

import numpy as np
import pytest

from tests.reference_libs import require

torch = require("torch")
transformers = require("transformers")

from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig  # noqa: E402
from tests import reference as ref  # noqa: E402
from pretraining.task import PretrainConfig, PretrainTask  # noqa: E402
from training.stepper import Stepper  # noqa: E402

SIZE = dict(n_layer=2, d_model=24, n_head=2, d_head=12, d_inner=40, n_token=40)
B, L, R, M, P = 4, 16, 8, 12, 5       # rows, tokens, reuse_len, mem_len, num_predict
STEPS, WARM, LR, CLIP, EPS = 8, 2, 5e-2, 1.0, 1e-6
B1, B2 = 0.9, 0.999
SEP, CLS = 4, 3                       # the XLNet vocabulary's <sep> and <cls>
T = ref.T


def _row(rng):
  """One row's tokens, segment ids and <sep>/<cls> positions: [reuse] [A] <sep> [B] <sep> <cls>."""
  ids = rng.integers(9, SIZE["n_token"], L)
  a_len = int(rng.integers(1, L - R - 3))            # new half: A <sep> B <sep> <cls>
  ids[R + a_len], ids[L - 2], ids[L - 1] = SEP, SEP, CLS
  seg = np.zeros(L, np.int32)
  seg[R + a_len + 1:] = 1
  seg[L - 1] = 2
  func = (ids == SEP) | (ids == CLS)
  return ids, seg, func


def _local_perm(is_target, func, rank):
  """perm_mask [n, n] of one half (1 = i may not see j), the release's _local_perm: rank is
  the factorization order of the half's positions."""
  masked_or_func = is_target | func
  rev = np.where(masked_or_func, rank, -1)           # non-targets come first, seen by all
  self_rev = np.where(is_target, rev, rev + 1)       # a target does not see itself
  return (self_rev[:, None] <= rev[None, :]) & masked_or_func[None, :]


def _batch(rng, n_real):
  ids = np.zeros([B, L], np.int32)
  seg = np.zeros([B, L], np.int32)
  perm = np.zeros([B, L, L], np.float32)
  mapping = np.zeros([B, P, L], np.float32)
  target = np.zeros([B, P], np.int32)
  target_mask = np.zeros([B, P], np.float32)
  input_q = np.zeros([B, L], np.float32)
  for b in range(B):
    ids[b], seg[b], func = _row(rng)
    targets = np.sort(rng.choice(np.flatnonzero(~func), n_real[b], replace=False))
    is_target = np.zeros(L, bool)
    is_target[targets] = True
    rank = np.concatenate([rng.permutation(R), rng.permutation(L - R)])
    reuse, new = slice(0, R), slice(R, L)
    perm[b, reuse, reuse] = _local_perm(is_target[reuse], func[reuse], rank[reuse])
    perm[b, new, new] = _local_perm(is_target[new], func[new], rank[new])
    perm[b, reuse, new] = 1.0                        # the reuse half never sees the new half
    mapping[b, np.arange(len(targets)), targets] = 1.0
    target[b, :len(targets)] = ids[b, targets]
    target_mask[b, :len(targets)] = 1.0
    input_q[b, targets] = 1.0
    assert all(perm[b, t, t] == 1 for t in targets)  # a target never sees itself
  return {"input_ids": ids, "input_k": ids.copy(), "seg_ids": seg,
          "input_mask": np.zeros([B, L], np.float32), "perm_mask": perm,
          "target_mapping": mapping, "target": target, "target_mask": target_mask,
          "input_q": input_q, "label": np.zeros([B], np.int32)}


def _batches(seed=0):
  rng = np.random.default_rng(seed)
  real_targets = np.array([P, P - 1, P - 2, P - 1])     # per row; rotated between batches
  distinct = [_batch(rng, np.roll(real_targets, -k)) for k in range(3)]
  return [distinct[k % 3] for k in range(STEPS)]


def _schedule(k):
  return LR * k / WARM if k < WARM else LR * (1.0 - (k - WARM) / (STEPS - WARM))


def _ours(weights, batches, bi_data):
  task = PretrainTask(
      PretrainConfig(record_dir=None, seq_len=L, reuse_len=R, num_predict=P, bsz_per_host=B,
                     bi_data=bi_data, objective="plm", learning_rate=LR, train_steps=STEPS,
                     warmup_steps=WARM, min_lr_ratio=0.0, optimizer="release",
                     weight_decay=0.0, adam_epsilon=EPS, adam_beta1=B1, adam_beta2=B2,
                     clip=CLIP),
      XLNetConfig(**SIZE, untie_r=True, ff_activation="gelu"),
      RunConfig(dropout=0.0, dropatt=0.0, mem_len=M, reuse_len=R))
  stepper = Stepper(task)
  assert sorted(stepper.weights()) == sorted(weights)
  # every trainable variable has a release name (nothing trained that the release lacks)
  assert len(stepper.model.trainable_variables) == len(weights)
  stepper.load_weights(weights)
  outs = [stepper.step(batch) for batch in batches]
  return outs, stepper.weights(), stepper.state


def _hf_to_release(hf):
  """HF parameters -> {release name: array} (inverse of reference.hf_state_dict)."""
  sd = {k: v.detach().numpy() for k, v in hf.state_dict().items()}
  n = SIZE["n_layer"]
  w = {f"{T}/word_embedding/lookup_table": sd["transformer.word_embedding.weight"],
       f"{T}/mask_emb/mask_emb": sd["transformer.mask_emb"],
       "model/lm_loss/bias": sd["lm_loss.bias"]}
  for b in ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed"):
    w[f"{T}/{b}"] = np.stack([sd[f"transformer.layer.{i}.rel_attn.{b}"] for i in range(n)])
  for i in range(n):
    p, h = f"{T}/layer_{i}", f"transformer.layer.{i}"
    for x in "qkvro":
      w[f"{p}/rel_attn/{x}/kernel"] = sd[f"{h}.rel_attn.{x}"]
    for ln, hn in (("rel_attn/LayerNorm", "rel_attn.layer_norm"),
                   ("ff/LayerNorm", "ff.layer_norm")):
      w[f"{p}/{ln}/gamma"] = sd[f"{h}.{hn}.weight"]
      w[f"{p}/{ln}/beta"] = sd[f"{h}.{hn}.bias"]
    for x in ("layer_1", "layer_2"):
      w[f"{p}/ff/{x}/kernel"] = sd[f"{h}.ff.{x}.weight"].T
      w[f"{p}/ff/{x}/bias"] = sd[f"{h}.ff.{x}.bias"]
  return w


def _reference(weights, batches, bi_data):
  size = {k: v for k, v in SIZE.items() if k != "d_head"}
  config = ref.hf_config(**size, untie_r=True, mem_len=M, reuse_len=R, bi_data=bi_data,
                         attn_type="bi", clamp_len=-1, same_length=False)
  assert config.d_head == SIZE["d_head"] and config.ff_activation == "gelu_new"
  hf = ref.hf_model(transformers.XLNetLMHeadModel, config,
                    ref.hf_state_dict(weights, SIZE["n_layer"], True, "lm")).float().train()
  # The LM head is tied to the word embedding (one parameter, gradient of both uses), as ours.
  assert hf.lm_loss.weight is hf.transformer.word_embedding.weight
  round_trip = _hf_to_release(hf)
  assert sorted(round_trip) == sorted(weights)
  assert all(np.array_equal(round_trip[k], weights[k]) for k in weights)
  params = [p for p in hf.parameters() if p.requires_grad]   # tied weight listed once
  assert sum(p.numel() for p in params) == sum(v.size for v in weights.values())
  m = [torch.zeros_like(p) for p in params]
  v = [torch.zeros_like(p) for p in params]
  mems = [torch.zeros(M, B, SIZE["d_model"]) for _ in range(SIZE["n_layer"])]
  tt = lambda a: torch.tensor(np.asarray(a))
  losses, norms, lrs = [], [], []
  for k, batch in enumerate(batches):
    labels = np.where(batch["target_mask"] > 0, batch["target"], -100)
    out = hf(input_ids=tt(batch["input_ids"]).long(), token_type_ids=tt(batch["seg_ids"]).long(),
             input_mask=tt(batch["input_mask"]), perm_mask=tt(batch["perm_mask"]),
             target_mapping=tt(batch["target_mapping"]), labels=tt(labels).long(), mems=mems,
             use_mems=True)
    hf.zero_grad(set_to_none=True)
    out.loss.backward()
    assert all(p.grad is not None for p in params)           # mask_emb: via the query stream
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params)).item()
    lr, t = _schedule(k), k + 1
    lr_t = lr * np.sqrt(1.0 - B2 ** t) / (1.0 - B1 ** t)
    with torch.no_grad():
      for p, mm, vv in zip(params, m, v):
        g = p.grad * (CLIP / max(norm, CLIP))
        mm.mul_(B1).add_(g, alpha=1.0 - B1)
        vv.mul_(B2).addcmul_(g, g, value=1.0 - B2)
        p.sub_(lr_t * mm / (vv.sqrt() + EPS))
    mems = list(out.mems)                                     # detached by HF's cache_mem
    losses.append(out.loss.item())
    norms.append(norm)
    lrs.append(lr)
  final_mems = np.stack([mm.numpy().transpose(1, 0, 2) for mm in mems])
  return losses, norms, lrs, _hf_to_release(hf), final_mems


def _rel(a, b):
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("bi_data", [False, True])
@pytest.mark.slow
def test_plm_training_follows_hugging_face_step_by_step(bi_data):
  weights = ref.random_release_weights(**SIZE, untie_r=True, seed=0)
  batches = _batches()
  outs, our_weights, our_mems = _ours(weights, batches, bi_data)
  losses, norms, lrs, hf_weights, hf_mems = _reference(weights, batches, bi_data)
  losses, norms, lrs = np.array(losses), np.array(norms), np.array(lrs)
  our_loss, our_norm, our_lr = (np.array([o[k] for o in outs])
                                for k in ("loss", "grad_norm", "learning_rate"))
  w_diff = {k: _rel(our_weights[k], hf_weights[k]) for k in weights}
  print(f"bi_data={bi_data}: loss {np.max(np.abs(our_loss / losses - 1)):.1e}, "
        f"grad norm {np.max(np.abs(our_norm / norms - 1)):.1e}, "
        f"lr {np.max(np.abs(our_lr - lrs)):.1e}, memory {ref.rel_err(our_mems, hf_mems):.1e}, "
        f"weights {max(w_diff.values()):.1e} ({max(w_diff, key=w_diff.get)})")

  # Not vacuous: the run learns (batch 0 at steps 0, 3, 6), clipping is on and off, weights move.
  assert losses[6] < losses[3] < losses[0] and losses[6] < losses[0] - 0.5
  assert (norms > CLIP).any() and (norms < CLIP).any()
  assert min(_rel(hf_weights[k], weights[k]) for k in weights) > 1e-2

  np.testing.assert_allclose(our_lr, lrs, rtol=3e-7, atol=0)
  np.testing.assert_allclose(our_loss, losses, rtol=2e-6, atol=0)
  np.testing.assert_allclose(our_norm, norms, rtol=5e-6, atol=0)
  assert our_mems.shape == hf_mems.shape == (SIZE["n_layer"], B, M, SIZE["d_model"])
  assert ref.rel_err(our_mems, hf_mems) < 1e-5
  # The relative-position kernels' rows that multiply the slowest sinusoids get gradients of
  # ~1e-7 made mostly of float32 rounding, which Adam's normalisation turns into updates of
  # size lr: there the float32 reference itself is ~1e-5 away from a float64 run.
  for name, diff in w_diff.items():
    assert diff < (5e-5 if name.endswith("/rel_attn/r/kernel") else 1e-5), (name, diff)
