"""The trainer's own step (training/stepper.py: the task's loss, XLA-compiled, the task's
recipe) against independent optimizers fed a twin model's gradients, several steps each:
tf.compat.v1.train.AdamOptimizer (the release, weight_decay 0), a NumPy transcription of the
release's AdamWeightDecayOptimizer (weight_decay > 0, untie_r on and off), the release's
layer-wise gradient scaling, and fairseq's Adam for MPNet. Also: the recipes each script and
family resolve to, and a run stopped after k steps and resumed lands on the same bytes.

Batches have uneven padding (three rows, left padded as XLNet's classifier rows); dropout is
off; learning rates cross the warmup and the decay; clipping acts on some steps only.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

from finetuning.classifier_task import ClassifierConfig, ClassifierTask
from modeling.mpnet import encoder as mpnet
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from training import recipes
from pretraining.task import PretrainConfig, PretrainTask
from training.stepper import Stepper
from tests.reference_libs import require

STEPS, WARM = 8, 3
NO_DROPOUT = RunConfig(dropout=0.0, dropatt=0.0)


def _xlnet_config(untie_r=True):
  return XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=40,
                     untie_r=untie_r)


def _batches(seed, pad_id=5, left=True, vocab=40):
  """Two classifier batches of three rows with 0, 3 and 6 padding positions, taken in turn."""
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(2):
    ids = rng.integers(9, vocab, [3, 12]).astype(np.int32)
    mask = np.zeros([3, 12], np.float32)
    seg = np.zeros([3, 12], np.int32)
    for row, pad in enumerate((0, 3, 6)):
      cols = slice(0, pad) if left else slice(12 - pad, 12)
      ids[row, cols], mask[row, cols], seg[row, cols] = pad_id, 1.0, 4
      seg[row, 12 - 1 if left else 12 - pad - 1] = 2          # <cls>
    out.append({"input_ids": ids, "seg_ids": seg, "input_mask": mask,
                "label": rng.integers(0, 2, [3]).astype(np.int32)})
  return [out[k % 2] for k in range(STEPS)]


def _schedule(lr, steps=STEPS, warm=WARM):
  """The release's learning rate of step k: lr k / warm, then linear decay to 0."""
  return [lr * k / warm if k < warm else lr * (1 - (k - warm) / (steps - warm))
          for k in range(steps)]


def _twin_gradients(task, weights, batches_and_weights):
  """A second model of the task, loaded with `weights`, gives the loss and gradients of each
  batch (eager, no trainer); the reference optimizers below update its weights."""
  model = task.build_model()
  model.ensure_built()
  named = _named(model)
  for name, value in weights.items():
    named[name].assign(value)

  names = list(named)

  @tf.function
  def loss_and_grads(batch):
    with tf.GradientTape() as tape:
      logits = tf.cast(model(batch, training=True), tf.float32)
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=batch["label"], logits=logits))
    grads = tape.gradient(loss, [named[n] for n in names])
    return loss, [tf.convert_to_tensor(g) if g is not None else None for g in grads]

  def step(batch):
    loss, grads = loss_and_grads(batch)
    return float(loss), dict(zip(names, grads))
  return named, step


def _named(model):
  return model.reference_variables()


def _run_ours(task, batches, xla="off"):
  """The trainer's step on each batch. xla="off" by default: the twin's gradients then come from
  the same TensorFlow kernels, so what differs is the optimizer alone (with lr 0.02 on weights
  of std 0.02, the different roundings of an XLA-compiled step grow to ~1e-5 in 8 steps; the
  first test checks that the compiled step follows the same trajectory to that level)."""
  stepper = Stepper(task, xla=xla)
  initial = stepper.weights()
  outs = [stepper.step(b) for b in batches]
  return stepper, initial, outs


def _clip(grads, clip):
  names = [n for n, g in grads.items() if g is not None]
  if not clip:
    return {n: grads[n] for n in names}, None
  clipped, norm = tf.clip_by_global_norm([grads[n] for n in names], clip)
  return dict(zip(names, clipped)), float(norm)


def _assert_weights(ours, ref, rtol, floor=1e-7):
  """Relative difference of every tensor below rtol; `floor` (per element, absolute) for the
  tensors whose gradient is rounding noise around zero (MPNet's key biases: a softmax does not
  depend on them), which stay near zero in both runs."""
  for name, value in ref.items():
    diff = np.linalg.norm(ours[name] - value)
    assert diff < rtol * np.linalg.norm(value) + floor * np.sqrt(value.size), (
        f"{name}: relative difference {diff / max(np.linalg.norm(value), 1e-30):.2e}, "
        f"largest value {np.abs(value).max():.2e}")


def _classifier(lr, model_type="xlnet", untie_r=True, **opt):
  opt.setdefault("warmup_steps", WARM)
  config = ClassifierConfig(task_name="sst-2", model_type=model_type, learning_rate=lr,
                            train_steps=STEPS, **opt)
  if model_type == "mpnet":
    model_config = mpnet.MPNetConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=20, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, pad_token_id=1)
  else:
    model_config = _xlnet_config(untie_r)
  return ClassifierTask(config, model_config, NO_DROPOUT)


def _tf1_reference(task, initial, batches, lr, eps, clip, layer_rate=None):
  """The twin's gradients, clipped by tf.clip_by_global_norm, (with layer_rate) the release's
  layer loop: gradients of model/transformer/layer_<l>/ times rate^(n_layer - 1 - l), then
  tf.compat.v1.train.AdamOptimizer. Returns (losses, norms, final weights)."""
  named, grad_fn = _twin_gradients(task, initial, batches)
  ref_vars = {n: v.value for n, v in named.items()}
  rate = tf.Variable(0.0)
  tf1 = tf.compat.v1.train.AdamOptimizer(learning_rate=lambda: rate, epsilon=eps)
  losses, norms = [], []
  for batch, value in zip(batches, _schedule(lr)):
    loss, grads = grad_fn(batch)
    clipped, norm = _clip(grads, clip)
    for n in clipped if layer_rate else ():
      layer = re.search(r"model/transformer/layer_(\d+?)/", n)
      if layer:
        clipped[n] = clipped[n] * layer_rate ** (2 - 1 - int(layer.group(1)))
    rate.assign(value)
    tf1.apply_gradients([(clipped[n], ref_vars[n]) for n in clipped])
    losses.append(loss)
    norms.append(norm)
  return losses, norms, {n: v.numpy() for n, v in ref_vars.items()}


@pytest.mark.slow
def test_release_default_step_is_tf1_adam_on_clipped_gradients():
  """run_classifier.py's default recipe (the release: weight_decay 0, so
  tf.train.AdamOptimizer, eps 1e-8) through the trainer's compiled step."""
  task = _classifier(lr=0.02, clip=0.5)
  assert task.optimizer_settings()["adam_epsilon"] == 1e-8
  batches = _batches(0)
  stepper, initial, outs = _run_ours(task, batches)
  ref_losses, norms, ref = _tf1_reference(task, initial, batches, 0.02, eps=1e-8, clip=0.5)
  assert min(norms) < 0.5 < max(norms)            # clipping acts on some steps, not all
  np.testing.assert_allclose([o["loss"] for o in outs], ref_losses, rtol=2e-6)
  np.testing.assert_allclose([o["grad_norm"] for o in outs], norms, rtol=2e-6)
  np.testing.assert_allclose([o["learning_rate"] for o in outs], _schedule(0.02), rtol=1e-6)
  assert ref_losses[-1] < ref_losses[0] - 0.1
  _assert_weights(stepper.weights(), ref, 1e-6)
  _, _, compiled = _run_ours(_classifier(lr=0.02, clip=0.5), batches, xla="full")
  np.testing.assert_allclose([o["loss"] for o in compiled], ref_losses, rtol=2e-5)


def _decays(name):
  """The release's AdamWeightDecayOptimizer rule (get_train_op's lists)."""
  if any(re.search(r, name) for r in ("r_s_bias", "r_r_bias", "r_w_bias")):
    return True
  return not any(re.search(r, name) for r in ("LayerNorm", "layer_norm", "bias"))


@pytest.mark.parametrize("untie_r", [True, False])
@pytest.mark.slow
def test_release_weight_decay_step_is_adam_weight_decay_optimizer(untie_r):
  """weight_decay > 0 with the release's optimizer: AdamWeightDecayOptimizer, no bias
  correction, r_w/r_r/r_s_bias decayed (per layer with untie_r, shared without)."""
  task = _classifier(lr=0.02, untie_r=untie_r, weight_decay=0.05, adam_epsilon=1e-6)
  batches = _batches(1)
  stepper, initial, outs = _run_ours(task, batches)
  named, grad_fn = _twin_gradients(task, initial, batches)
  assert named["model/transformer/r_w_bias"].shape.rank == (3 if untie_r else 2)
  f = np.float32
  p = {n: v.numpy() for n, v in named.items()}
  m = {n: np.zeros_like(x) for n, x in p.items()}
  v = {n: np.zeros_like(x) for n, x in p.items()}
  ref_losses = []
  for batch, lr in zip(batches, _schedule(0.02)):
    loss, grads = grad_fn(batch)
    clipped, _ = _clip(grads, 1.0)
    for n, g in clipped.items():
      g = g.numpy()
      m[n] = f(0.9) * m[n] + f(1.0 - 0.9) * g
      v[n] = f(0.999) * v[n] + f(1.0 - 0.999) * np.square(g)
      update = m[n] / (np.sqrt(v[n]) + f(1e-6))
      if _decays(n):
        update = update + f(0.05) * p[n]
      p[n] = p[n] - f(lr) * update
      named[n].assign(p[n])
    ref_losses.append(loss)
  np.testing.assert_allclose([o["loss"] for o in outs], ref_losses, rtol=2e-6)
  _assert_weights(stepper.weights(), p, 1e-6)
  assert _decays("model/transformer/r_s_bias") and not _decays("model/lm_loss/bias")


@pytest.mark.slow
def test_release_layer_decay_through_the_trainer():
  """lr_layer_decay_rate with the release's method: only layer_<l> gradients scaled, after
  clipping; TF1's Adam."""
  task = _classifier(lr=0.02, lr_layer_decay_rate=0.5, adam_epsilon=1e-6)
  assert task.optimizer_settings()["layer_decay_method"] == "release"
  batches = _batches(2)
  stepper, initial, _ = _run_ours(task, batches)
  _, _, ref = _tf1_reference(task, initial, batches, 0.02, eps=1e-6, clip=1.0, layer_rate=0.5)
  _assert_weights(stepper.weights(), ref, 1e-6)


@pytest.mark.slow
def test_mpnet_default_step_is_fairseq_adam():
  """--model_type=mpnet's recipe: fairseq's Adam, betas (0.9, 0.98), eps 1e-6, no clipping,
  weight decay 0.1 on every weight (GLUE), warmup 6% of the steps."""
  torch = require("torch")
  task = _classifier(lr=0.01, model_type="mpnet", warmup_steps=None)
  settings = task.optimizer_settings()
  assert (settings["optimizer"], settings["adam_beta2"], settings["weight_decay"],
          settings["clip"], settings["warmup_steps"]) == ("fairseq", 0.98, 0.1, 0.0, 0)
  task.config.warmup_steps = WARM
  batches = _batches(3, pad_id=1, left=False)
  for b in batches:
    b["seg_ids"][:] = 0
  stepper, initial, outs = _run_ours(task, batches)
  named, grad_fn = _twin_gradients(task, initial, batches)
  p = {n: torch.tensor(v.numpy()) for n, v in named.items()}
  m = {n: torch.zeros_like(x) for n, x in p.items()}
  v = {n: torch.zeros_like(x) for n, x in p.items()}
  ref_losses = []
  for t, (batch, lr) in enumerate(zip(batches, _schedule(0.01)), start=1):
    loss, grads = grad_fn(batch)
    for n, g in grads.items():   # fairseq.optim.adam.Adam.step, written out
      if g is None:
        continue
      g = torch.tensor(g.numpy())
      m[n].mul_(0.9).add_(g, alpha=1 - 0.9)
      v[n].mul_(0.98).addcmul_(g, g, value=1 - 0.98)
      denom = v[n].sqrt().add_(1e-6)
      p[n].add_(p[n], alpha=-0.1 * lr)
      p[n].addcdiv_(m[n], denom, value=-lr * np.sqrt(1 - 0.98 ** t) / (1 - 0.9 ** t))
      named[n].assign(p[n].numpy())
    ref_losses.append(loss)
  np.testing.assert_allclose([o["loss"] for o in outs], ref_losses, rtol=2e-6)
  assert ref_losses[-1] < ref_losses[0] - 0.1
  _assert_weights(stepper.weights(), {n: x.numpy() for n, x in p.items()}, 1e-6)


def test_recipes_per_script_and_family():
  """Unset settings come from the release's scripts (XLNet) or MPNet's fairseq scripts; the
  paper's tables on --recipe=paper; a setting given explicitly wins."""
  cfg = lambda **kw: ClassifierConfig(task_name="sst-2", train_steps=1000, **kw)
  get = lambda family, script, **kw: recipes.resolve(cfg(**kw), family, script)
  assert get("xlnet", "classifier")["adam_epsilon"] == 1e-8
  squad = get("xlnet", "squad")
  assert (squad["adam_epsilon"], squad["lr_layer_decay_rate"], squad["layer_decay_method"],
          squad["weight_decay"], squad["warmup_steps"]) == (1e-6, 0.75, "release", 0.0, 1000)
  assert get("xlnet", "race")["adam_epsilon"] == 1e-6
  assert get("xlnet", "pretrain")["min_lr_ratio"] == 0.001
  paper = get("xlnet", "squad", recipe="paper")
  assert (paper["weight_decay"], paper["adam_epsilon"], paper["layer_decay_method"]) == (
      0.01, 1e-6, "paper")
  assert get("xlnet", "pretrain", recipe="paper")["warmup_steps"] == 80   # 40K of 500K
  mp = get("mpnet", "classifier")
  assert (mp["optimizer"], mp["adam_beta2"], mp["weight_decay"], mp["warmup_steps"]) == (
      "fairseq", 0.98, 0.1, 60)
  assert get("mpnet", "squad")["weight_decay"] == 0.01
  assert get("mpnet", "pretrain")["weight_decay"] == 0.01
  assert get("xlnet", "classifier", adam_epsilon=1e-6, optimizer="fairseq")["optimizer"] == (
      "fairseq")
  with pytest.raises(ValueError, match="recipe"):
    get("xlnet", "classifier", recipe="bert")


def _pretrain_batch(rng, vocab=40, rows=2, length=8, num_predict=3):
  """PLM rows: random order over random targets (release mask convention)."""
  ids = rng.integers(9, vocab, [rows, length]).astype(np.int32)
  perm = np.zeros([rows, length, length], np.float32)
  mapping = np.zeros([rows, num_predict, length], np.float32)
  target_mask = np.zeros([rows, num_predict], np.float32)
  target = np.zeros([rows, num_predict], np.int32)
  input_q = np.zeros([rows, length], np.float32)
  for r in range(rows):
    count = num_predict - r                       # uneven: fewer real targets in row 1
    pos = np.sort(rng.choice(length, count, replace=False))
    rank = np.full(length, -1)
    rank[pos] = rng.permutation(count)
    for i in range(length):
      for j in range(length):                     # blocked: j is a target not before i
        perm[r, i, j] = rank[j] >= 0 and (rank[i] < 0 or rank[j] >= rank[i])
    mapping[r, np.arange(count), pos] = 1
    target_mask[r, :count] = 1
    target[r, :count] = ids[r, pos]
    input_q[r, pos] = 1
  seg = np.zeros([rows, length], np.int32)
  seg[:, length // 2:] = 1
  return {"input_ids": ids, "input_k": ids, "seg_ids": seg,
          "input_mask": np.zeros([rows, length], np.float32), "perm_mask": perm,
          "target_mapping": mapping, "target": target, "target_mask": target_mask,
          "input_q": input_q, "label": np.zeros([rows], np.int32)}


@pytest.mark.slow
def test_resumed_run_lands_on_the_same_bytes(tmp_path):
  """PLM with memory and dropout: 6 steps in one go, and 3 steps + checkpoint + a new Stepper
  resuming + 3 steps, give byte-identical weights and memory (xla="off": three compilations
  of the full step would take a minute; tests/training/test_deterministic.py covers every --xla mode
  through the scripts)."""
  XLA = "off"
  def task():
    return PretrainTask(
        PretrainConfig(seq_len=8, reuse_len=4, num_predict=3, bsz_per_host=2, bi_data=False,
                       learning_rate=0.01, train_steps=6, warmup_steps=2),
        _xlnet_config(), RunConfig(dropout=0.1, dropatt=0.1, mem_len=4, reuse_len=4))
  rng = np.random.default_rng(0)
  batches = [_pretrain_batch(rng) for _ in range(6)]
  whole = Stepper(task(), xla=XLA)
  losses = [whole.step(b)["loss"] for b in batches]
  first = Stepper(task(), model_dir=str(tmp_path), xla=XLA)
  for b in batches[:3]:
    first.step(b)
  first.save()
  resumed = Stepper(task(), model_dir=str(tmp_path), xla=XLA)
  assert resumed.resumed and resumed.step_count == 3
  rest = [resumed.step(b)["loss"] for b in batches[3:]]
  assert rest == losses[3:]
  assert whole.state.any() and whole.state.tobytes() == resumed.state.tobytes()
  for name, value in whole.weights().items():
    assert value.tobytes() == resumed.weights()[name].tobytes(), name


@pytest.mark.slow
def test_stepper_drives_squad_and_race_from_their_configs():
  """Any task trains from in-memory batches, built from its config alone (no data, no
  tokenizer files): SQuAD (run_squad.py's recipe: layer decay 0.75, release method) and RACE."""
  from finetuning.race import RaceTask
  from finetuning.squad import SquadConfig, SquadTask
  rng = np.random.default_rng(4)
  squad = SquadTask(SquadConfig(train_steps=3, warmup_steps=1, learning_rate=1e-2),
                    _xlnet_config(), NO_DROPOUT)
  assert squad.optimizer_settings()["lr_layer_decay_rate"] == 0.75
  ids = rng.integers(9, 40, [2, 10]).astype(np.int32)
  p_mask = np.zeros([2, 10], np.float32)
  p_mask[:, 6:9] = 1
  squad_batch = {"input_ids": ids, "seg_ids": (p_mask > 0).astype(np.int32),
                 "input_mask": np.zeros([2, 10], np.float32), "p_mask": p_mask,
                 "cls_index": np.full([2], 9, np.int32),
                 "start_positions": np.array([1, 9], np.int32),
                 "end_positions": np.array([3, 9], np.int32),
                 "is_impossible": np.array([0.0, 1.0], np.float32)}
  race = RaceTask(ClassifierConfig(task_name="race", train_steps=3, warmup_steps=1,
                                   learning_rate=1e-2), _xlnet_config(), NO_DROPOUT)
  race_batch = {"input_ids": rng.integers(9, 40, [2, 4, 10]).astype(np.int32),
                "seg_ids": np.zeros([2, 4, 10], np.int32),
                "input_mask": np.zeros([2, 4, 10], np.float32),
                "label": np.array([1, 3], np.int32)}
  for task, batch in ((squad, squad_batch), (race, race_batch)):
    stepper = Stepper(task, xla="off")
    before = stepper.weights()
    outs = [stepper.step(batch) for _ in range(3)]
    np.testing.assert_allclose([o["learning_rate"] for o in outs], [0.0, 0.01, 0.005], rtol=1e-6)
    assert outs[2]["loss"] < outs[0]["loss"]
    moved = [n for n, v in stepper.weights().items() if not np.array_equal(v, before[n])]
    assert "model/transformer/layer_0/ff/layer_1/kernel" in moved
