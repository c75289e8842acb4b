"""training/loss_scale.LossScaleOptimizer's update (the scale and the skip decision passed into
training/optimization.Adam, divided and selected inside its update) against Keras' own
keras.optimizers.LossScaleOptimizer (unscale, then apply in a branch) around the same Adam:
the same bits after every step without XLA (within float32 rounding under it), over applied
steps, skipped steps and growths of the scale."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from training import loss_scale
from training.optimization import Adam

SHAPES = {"a": (3, 4), "b": (4,), "c": (2, 5)}
# scaled gradients per step: step 2 overflows (skipped), step 5 has a NaN (skipped)
BAD = {2: np.inf, 5: np.nan}


def _variables():
  rng = np.random.default_rng(1)
  return [keras.Variable(rng.normal(size=s).astype(np.float32), name=n)
          for n, s in SHAPES.items()]


def _grads(step, scale):
  """The gradients of the scaled loss at `step` (float32): true gradients of mixed sizes, some
  clipped, times the current scale; BAD steps put a non-finite value in one of them."""
  rng = np.random.default_rng(100 + step)
  grads = [(rng.normal(size=s) * 10.0 ** rng.integers(-6, 1)).astype(np.float32) * scale
           for s in SHAPES.values()]
  if step in BAD:
    grads[1][2] = BAD[step]
  return grads


def _optimizer(variables, rule):
  kwargs = dict(tf1_adam={}, adam_weight_decay=dict(weight_decay_rate=0.01),
                fairseq_adam=dict(semantics="fairseq", weight_decay_rate=0.01))[rule]
  return Adam(learning_rate=keras.optimizers.schedules.PolynomialDecay(1e-2, 20, 1e-3),
              clip_norm=0.5, grad_scales={variables[0].path: 0.25}, **kwargs)


def _run(ours, rule, jit):
  variables = _variables()
  inner = _optimizer(variables, rule)
  cls = loss_scale.LossScaleOptimizer if ours else keras.optimizers.LossScaleOptimizer
  opt = cls(inner, initial_scale=2.0 ** 10, dynamic_growth_steps=2)
  apply = tf.function(lambda grads: opt.apply(grads, variables), jit_compile=jit)
  history = []
  for step in range(8):
    scale = float(opt.dynamic_scale.numpy()) if opt.built else 2.0 ** 10
    apply([tf.constant(g) for g in _grads(step, scale)])
    history.append([v.numpy().tobytes() for v in variables + list(inner.variables)]
                   + [opt.dynamic_scale.numpy().tobytes(), opt.step_counter.numpy().tobytes()])
  return history, opt


@pytest.mark.parametrize("rule", ["tf1_adam", "adam_weight_decay", "fairseq_adam"])
@pytest.mark.parametrize("jit", [False, True])
def test_fused_update_equals_keras_loss_scale_optimizer(rule, jit):
  ours, opt = _run(True, rule, jit)
  keras_, _ = _run(False, rule, jit)
  assert opt.inner_optimizer.rule == rule
  for step, (a, b) in enumerate(zip(ours, keras_)):
    if not jit:      # the same float32 operations: the same bits
      assert a == b, f"step {step}: entry {next(i for i in range(len(a)) if a[i] != b[i])}"
      continue
    # XLA fuses the two orders differently (LLVM contracts products into FMAs where they meet):
    # within float32 rounding, and the scale's state exactly
    assert a[-2:] == b[-2:], step
    for x, y in zip(a[:-2], b[:-2]):
      x, y = (np.frombuffer(z, np.float32 if len(x) != 8 else np.int64) for z in (x, y))
      np.testing.assert_allclose(x, y, rtol=2e-6, atol=0, err_msg=f"step {step}")
  # the run went through what it is meant to: two skips, growths, the steps not skipped counted
  assert int(opt.skipped_steps.numpy()) == len(BAD)
  assert int(opt.inner_optimizer.iterations.numpy()) == 8 - len(BAD)
  assert float(opt.dynamic_scale.numpy()) == 2.0 ** 10 * 2 ** 3 / 2 ** 2   # 3 growths, 2 halvings
  assert ours[1] != ours[0] and ours[2][:3] == ours[1][:3]   # applied, then skipped (weights)
