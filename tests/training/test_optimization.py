"""The optimizer semantics against independent references, several steps each:

- the release's schedule against TF1's own tf.compat.v1.train.polynomial_decay / cosine_decay;
- "release", weight_decay 0 against tf.compat.v1.train.AdamOptimizer (TF 2.21 still ships it)
  fed the same clipped gradients;
- "release", weight_decay > 0 against a NumPy float32 transcription of the release's
  AdamWeightDecayOptimizer (model_utils.py), its decay rule written out here from the release's
  lists (r_*_bias always decayed; LayerNorm / layer_norm / bias excluded);
- the release's layer-wise decay (clipped gradients of model/transformer/layer_<l>/ scaled)
  against that scaling written out here, then TF1's AdamOptimizer;
- "fairseq" against a torch transcription of fairseq's Adam (fairseq/optim/adam.py).
Gradient sequences have norms above and below the clipping threshold, so clipping acts on some
steps and not others; warmup and decay are both crossed.
"""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.models import XLNetClassifier
from training import optimization
from tests.reference_libs import require

STEPS, WARM, LR = 8, 3, 0.05


def _schedule_values(peak=LR, steps=STEPS, warm=WARM, min_ratio=0.0):
  """The release's learning rate per step (get_train_op), through TF1's own decay function."""
  out = []
  for k in range(steps):
    if k < warm:
      out.append(np.float32(k) / np.float32(warm) * np.float32(peak))
    else:
      out.append(float(tf.compat.v1.train.polynomial_decay(
          peak, global_step=k - warm, decay_steps=steps - warm,
          end_learning_rate=peak * min_ratio)()))
  return np.array(out, np.float32)


def test_schedule_equals_tf1_poly_and_cosine():
  ours = optimization.WarmupDecay(LR, STEPS, WARM, "poly", min_lr_ratio=0.1)
  np.testing.assert_allclose([float(ours(k)) for k in range(STEPS + 3)],
                             np.r_[_schedule_values(min_ratio=0.1), [LR * 0.1] * 3], rtol=1e-7)
  cos = optimization.WarmupDecay(2.0, 110, warmup_steps=10, decay="cos", min_lr_ratio=0.2)
  ref = [float(tf.compat.v1.train.cosine_decay(2.0, global_step=k - 10, decay_steps=100,
                                                 alpha=0.2)()) for k in (10, 35, 60, 110, 150)]
  np.testing.assert_allclose([float(cos(k)) for k in (10, 35, 60, 110, 150)], ref, rtol=1e-7)
  assert float(cos(0)) == 0.0 and float(cos(5)) == pytest.approx(1.0)   # warmup from 0
  with pytest.raises(ValueError, match="decay_method"):
    optimization.WarmupDecay(1.0, 10, decay="step")


# ---- a small problem: named variables and a gradient sequence --------------------------------
NAMES = {   # reference (release) names of the test variables
    "kernel": "model/transformer/layer_1/ff/layer_1/kernel",
    "ln": "model/transformer/layer_0/rel_attn/LayerNorm/gamma",
    "bias": "model/transformer/layer_0/ff/layer_2/bias",
    "r_w_bias": "model/transformer/r_w_bias",
    "r_s_bias": "model/transformer/r_s_bias",
    "seg": "model/transformer/seg_embed",
    "head": "model/lm_loss/bias",
}
SHAPES = {"kernel": (3, 2), "ln": (4,), "bias": (2,), "r_w_bias": (2, 2, 3),
          "r_s_bias": (2, 3), "seg": (2, 2, 3), "head": (5,)}


def _problem(seed=0):
  rng = np.random.default_rng(seed)
  init = {k: rng.normal(0, 0.5, s).astype(np.float32) for k, s in SHAPES.items()}
  grads = []
  for step in range(STEPS):
    # global norms alternate around 1: clipping at 1.0 acts on some steps only; tiny entries
    # make epsilon matter
    scale = (0.15, 2.5)[step % 2] / np.sqrt(sum(np.prod(s) for s in SHAPES.values()))
    g = {k: (rng.normal(0, 1, s) * scale).astype(np.float32) for k, s in SHAPES.items()}
    g["head"][0] = 1e-9
    grads.append(g)
  return init, grads


def _ours(init, grads, clip=1.0, **kwargs):
  variables = {k: keras.Variable(v, name=k) for k, v in init.items()}
  opt = optimization.Adam(
      learning_rate=optimization.WarmupDecay(LR, STEPS, WARM), clip_norm=clip,
      names={v.path: NAMES[k] for k, v in variables.items()}, **kwargs)
  keys = sorted(variables)
  for g in grads:
    opt.apply_gradients([(tf.constant(g[k]), variables[k]) for k in keys])
  return {k: v.numpy() for k, v in variables.items()}, opt


def _clipped(grads, clip=1.0):
  """tf.clip_by_global_norm, as the release calls it, step by step; and whether it acted."""
  out, acted = [], []
  for g in grads:
    keys = sorted(g)
    clipped, norm = tf.clip_by_global_norm([tf.constant(g[k]) for k in keys], clip)
    out.append({k: c.numpy() for k, c in zip(keys, clipped)})
    acted.append(float(norm) > clip)
  return out, acted


def _tf1_adam(init, grads, eps, b1=0.9, b2=0.999):
  """tf.compat.v1.train.AdamOptimizer on the given (already clipped/scaled) gradients."""
  variables = {k: tf.Variable(v) for k, v in init.items()}
  lr = tf.Variable(0.0)
  opt = tf.compat.v1.train.AdamOptimizer(learning_rate=lambda: lr, beta1=b1, beta2=b2,
                                         epsilon=eps)
  for g, value in zip(grads, _schedule_values()):
    lr.assign(value)
    opt.apply_gradients([(tf.constant(g[k]), variables[k]) for k in sorted(g)])
  return {k: v.numpy() for k, v in variables.items()}


def _assert_close(ours, ref, rtol):
  for k in ref:
    err = np.linalg.norm(ours[k] - ref[k]) / np.linalg.norm(ref[k])
    assert err < rtol, f"{k}: relative difference {err:.2e}"


def test_release_semantics_without_weight_decay_is_tf1_adam():
  init, grads = _problem()
  clipped, acted = _clipped(grads)
  assert any(acted) and not all(acted)
  ours, opt = _ours(init, grads, semantics="release", weight_decay_rate=0.0, epsilon=1e-6)
  assert opt.rule == "tf1_adam"
  ref = _tf1_adam(init, clipped, eps=1e-6)
  _assert_close(ours, ref, 1e-7)          # the same float32 operations: measured 0
  moved = min(np.linalg.norm(ref[k] - init[k]) / np.linalg.norm(init[k]) for k in ref)
  assert moved > 1e-3                     # the comparison is not of weights that did not move


def _release_decays(name):
  """model_utils.AdamWeightDecayOptimizer._do_use_weight_decay with get_train_op's lists."""
  if any(re.search(r, name) for r in ("r_s_bias", "r_r_bias", "r_w_bias")):
    return True
  return not any(re.search(r, name) for r in ("LayerNorm", "layer_norm", "bias"))


def _release_adamw_np(init, grads, lrs, wd, b1=0.9, b2=0.999, eps=1e-6, lr_mult=None):
  """The release's AdamWeightDecayOptimizer.apply_gradients in NumPy float32: constants as
  Python floats (1.0 - beta computed in double), then float32."""
  f = np.float32
  p = {k: v.copy() for k, v in init.items()}
  m = {k: np.zeros_like(v) for k, v in init.items()}
  v = {k: np.zeros_like(x) for k, x in init.items()}
  for g, lr in zip(grads, lrs):
    for k in p:
      m[k] = f(b1) * m[k] + f(1.0 - b1) * g[k]
      v[k] = f(b2) * v[k] + f(1.0 - b2) * np.square(g[k])
      update = m[k] / (np.sqrt(v[k]) + f(eps))
      if _release_decays(NAMES[k]):
        update = update + f(wd) * p[k]
      p[k] = p[k] - f(lr) * update
  return p


def test_release_semantics_with_weight_decay_is_adam_weight_decay_optimizer():
  init, grads = _problem(1)
  clipped, _ = _clipped(grads)
  ours, opt = _ours(init, grads, semantics="release", weight_decay_rate=0.3, epsilon=1e-6)
  assert opt.rule == "adam_weight_decay"
  ref = _release_adamw_np(init, clipped, _schedule_values(), wd=0.3)
  # measured 0; 1 - beta computed in float32 instead of Python's double is 3e-7 off here
  _assert_close(ours, ref, 1e-7)
  # the r_*_bias variables are decayed (the release's include list beats "bias")
  no_decay = _release_adamw_np(init, clipped, _schedule_values(), wd=0.0)
  for k in ("r_w_bias", "r_s_bias", "kernel", "seg"):
    assert np.linalg.norm(ref[k] - no_decay[k]) > 1e-4, k
  for k in ("ln", "bias", "head"):
    np.testing.assert_array_equal(ref[k], no_decay[k])


def test_release_layer_decay_scales_clipped_layer_gradients_only():
  """get_train_op with lr_layer_decay_rate: after clipping, the gradient of each variable
  under model/transformer/layer_<l>/ is multiplied by rate^(n_layer - 1 - l); n_layer is
  counted from the names; every other variable keeps its gradient. Then TF1's Adam."""
  config = XLNetConfig(n_layer=3, d_model=16, n_head=2, d_head=8, d_inner=16, n_token=30)
  keras.utils.set_random_seed(0)
  model = XLNetClassifier(config, RunConfig(), n_class=2).ensure_built()
  names = {id(v): n for n, v in model.tf1_variables().items()}
  variables = model.trainable_variables
  init = [v.numpy() for v in variables]
  rng = np.random.default_rng(3)
  grads = [[(rng.normal(0, 1, v.shape) * (0.01, 0.3)[s % 2]).astype(np.float32)
            for v in variables] for s in range(STEPS)]
  opt = optimization.build_optimizer(model, LR, STEPS, WARM, adam_epsilon=1e-6, clip=1.0,
                                     lr_layer_decay_rate=0.5, layer_decay_method="release")
  for g in grads:
    opt.apply_gradients(zip([tf.constant(x) for x in g], variables))
  ours = [v.numpy() for v in variables]

  # reference: the release's loop, written out
  n_layer = 1 + max(int(m.group(1)) for m in (
      re.search(r"model/transformer/layer_(\d+?)/", names[id(v)]) for v in variables) if m)
  assert n_layer == 3
  ref_vars = [tf.Variable(x) for x in init]
  lr = tf.Variable(0.0)
  tf1 = tf.compat.v1.train.AdamOptimizer(learning_rate=lambda: lr, epsilon=1e-6)
  scaled_any = False
  for g, value in zip(grads, _schedule_values()):
    clipped, _ = tf.clip_by_global_norm([tf.constant(x) for x in g], 1.0)
    clipped = list(clipped)
    for i, v in enumerate(variables):
      for layer in range(n_layer):
        if f"model/transformer/layer_{layer}/" in names[id(v)]:
          clipped[i] *= 0.5 ** (n_layer - 1 - layer)
          scaled_any |= layer < n_layer - 1
          break
    lr.assign(value)
    tf1.apply_gradients(zip(clipped, ref_vars))
  assert scaled_any
  for v, a, b in zip(variables, ours, ref_vars):
    err = np.linalg.norm(a - b.numpy()) / np.linalg.norm(b.numpy())
    assert err < 1e-6, f"{names[id(v)]}: {err:.2e}"
  # embeddings and the stacked biases are untouched by the release's rule
  scales = optimization.release_layer_grad_scales(model, 0.5)
  by_name = {names[id(v)]: scales.get(v.path) for v in variables}
  assert by_name["model/transformer/word_embedding/lookup_table"] is None
  assert by_name["model/transformer/r_w_bias"] is None
  assert by_name["model/transformer/layer_0/rel_attn/q/kernel"] == 0.25
  assert by_name["model/transformer/layer_2/ff/layer_1/kernel"] == 1.0


def test_paper_layer_decay_is_per_layer_learning_rates():
  """The paper's text: layer l of N learns at rate^(N-1-l), embeddings at rate^N, each slice of
  the stacked biases at its layer's rate, heads at 1."""
  config = XLNetConfig(n_layer=3, d_model=16, n_head=2, d_head=8, d_inner=16, n_token=30)
  model = XLNetClassifier(config, RunConfig(), n_class=2).ensure_built()
  mult = optimization.layer_decay_multipliers(model, 0.5)
  by_name = {path.split("/", 1)[1]: value for path, value in mult.items()}
  assert by_name["transformer/layer_2/rel_attn/q_kernel"] == 1.0
  assert by_name["transformer/layer_1/ff/layer_1/kernel"] == 0.5
  assert by_name["transformer/layer_0/rel_attn/LayerNorm/gamma"] == 0.25
  assert by_name["transformer/word_embedding"] == 0.125
  np.testing.assert_array_equal(by_name["transformer/r_w_bias"].ravel(), [0.25, 0.5, 1.0])
  assert not any("sequnece_summary" in p or "logit" in p for p in by_name)  # heads: full rate
  assert optimization.layer_decay_multipliers(model, 1.0) == {}
  opt = optimization.build_optimizer(model, 1.0, 10, lr_layer_decay_rate=0.5,
                                     layer_decay_method="paper")
  assert opt.lr_multipliers and not opt.grad_scales


def _fairseq_adam_torch(init, grads, lrs, wd, b1=0.9, b2=0.98, eps=1e-6):
  """fairseq.optim.adam.Adam.step written out in torch (float32 parameters)."""
  torch = require("torch")
  p = {k: torch.tensor(v) for k, v in init.items()}
  m = {k: torch.zeros_like(x) for k, x in p.items()}
  v = {k: torch.zeros_like(x) for k, x in p.items()}
  for t, (g, lr) in enumerate(zip(grads, lrs), start=1):
    lr = float(lr)
    for k in p:
      grad = torch.tensor(g[k])
      m[k].mul_(b1).add_(grad, alpha=1 - b1)
      v[k].mul_(b2).addcmul_(grad, grad, value=1 - b2)
      denom = v[k].sqrt().add_(eps)
      step_size = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
      if wd:
        p[k].add_(p[k], alpha=-wd * lr)
      p[k].addcdiv_(m[k], denom, value=-step_size)
  return {k: x.numpy() for k, x in p.items()}


def test_fairseq_semantics_is_fairseq_adam():
  init, grads = _problem(2)
  ours, opt = _ours(init, grads, clip=None, semantics="fairseq", weight_decay_rate=0.1,
                    beta_2=0.98, epsilon=1e-6)
  assert opt.rule == "fairseq_adam"
  ref = _fairseq_adam_torch(init, grads, _schedule_values(), wd=0.1)
  _assert_close(ours, ref, 1e-6)
  # fairseq decays every weight, LayerNorm and biases included
  no_decay = _fairseq_adam_torch(init, grads, _schedule_values(), wd=0.0)
  for k in ref:
    assert np.linalg.norm(ref[k] - no_decay[k]) > 1e-5, k


def test_clipping_counts_repeated_embedding_rows_once():
  """A gather's gradient repeats rows (one per lookup); the global norm is that of the summed
  (dense) gradient, as on TPU and in PyTorch. Before the fix the norm summed the squares of
  the repeats: here sqrt(3 * 0.5**2) = 0.87 < 1, so nothing was clipped, while the true norm is
  1.5 and the step must be scaled by 1 / 1.5."""
  table = keras.Variable(np.zeros([4, 1], np.float32), name="table")
  other = keras.Variable(np.zeros([1], np.float32), name="other")
  with tf.GradientTape() as tape:
    loss = 0.5 * tf.reduce_sum(tf.gather(table, [2, 2, 2]))
  grad = tape.gradient(loss, table)
  assert isinstance(grad, tf.IndexedSlices)
  dense = optimization.dense_gradients([grad, None])
  np.testing.assert_allclose(dense[0].numpy(), [[0.0], [0.0], [1.5], [0.0]])
  assert dense[1] is None
  opt = optimization.Adam(learning_rate=0.1, clip_norm=1.0, epsilon=0.0)
  opt.apply_gradients([(grad, table), (tf.zeros([1]), other)])
  # the first moment holds (1 - beta1) x the clipped gradient: 0.1 * 1.5 / 1.5
  m = opt._m[opt._get_variable_index(table)].numpy()
  np.testing.assert_allclose(m[2], [0.1], rtol=1e-6)


def test_gradient_accumulation_updates_every_n_steps_with_the_mean():
  def run(accumulate, grads_seq):
    var = keras.Variable(np.array([1.0, 2.0], np.float32), name="kernel")
    opt = optimization.Adam(learning_rate=0.1, gradient_accumulation_steps=accumulate)
    values = []
    for g in grads_seq:
      opt.apply_gradients([(tf.constant(g), var)])
      values.append(var.numpy().copy())
    return values
  acc = run(2, [[0.2, -0.4], [0.6, 0.0], [0.2, 0.2], [0.0, 0.2]])
  np.testing.assert_array_equal(acc[0], [1.0, 2.0])               # no update yet
  single = run(None, [[0.4, -0.2], [0.1, 0.2]])                     # the means, one by one
  np.testing.assert_allclose(acc[1], single[0], rtol=1e-6)
  np.testing.assert_allclose(acc[3], single[1], rtol=1e-6)        # bias correction at t = 2


@pytest.mark.parametrize("semantics,decay", [("release", 0.0), ("release", 0.1),
                                             ("fairseq", 0.1)])
def test_update_has_no_float64(semantics, decay):
  """TPUs have no float64: the update (schedule, clipping, every rule) is float32 throughout."""
  var = keras.Variable(np.ones(3, np.float32), name="kernel")
  opt = optimization.Adam(learning_rate=optimization.WarmupDecay(0.1, 10, 2),
                          semantics=semantics, weight_decay_rate=decay, clip_norm=1.0)
  opt.build([var])
  step = tf.function(lambda g: opt.apply_gradients([(g, var)]))
  graph = step.get_concrete_function(tf.TensorSpec([3], tf.float32)).graph

  def dtypes(g):
    out = {t.dtype for op in g.get_operations() for t in op.outputs}
    for f in g._functions.values():        # bodies of nested functions and conds
      out |= dtypes(f.graph) if hasattr(f, "graph") else set()
    return out
  found = dtypes(graph)
  assert tf.float32 in found and tf.float64 not in found


@pytest.mark.parametrize("semantics,decay,shared", [("release", 0.0, 1), ("release", 0.1, 0),
                                                    ("fairseq", 0.1, 1)])
def test_scalars_every_update_reads_are_made_once(semantics, decay, shared):
  """The settings, 1 - beta and the bias correction are made once per update, not once per
  variable (the trace of a large model's update was mostly copies of them): with N variables
  the update has N square roots of v, plus one of the bias correction where the rule has it."""
  variables = [keras.Variable(np.ones(k + 2, np.float32), name=f"w{k}") for k in range(5)]
  opt = optimization.Adam(learning_rate=0.1, semantics=semantics, weight_decay_rate=decay)
  opt.build(variables)
  step = tf.function(lambda gs: opt.apply_gradients(zip(gs, variables)))
  graph = step.get_concrete_function([tf.TensorSpec(v.shape, tf.float32)
                                      for v in variables]).graph
  ops = [op.type for op in graph.get_operations()]
  assert ops.count("Sqrt") == len(variables) + shared, ops
