"""Float16 mixed precision (--use_float16): Keras' mixed_float16 policy and dynamic loss scaling
around the task's optimizer.

float16 has 5 exponent bits: the smallest normal value is 6.1e-5 and the largest 65504, so
small gradients of the float16 activations round to zero (a loss of 0.7 over a batch already
gives ~1e-5 per logit) and large ones become inf. Loss scaling multiplies the loss by S before
the backward pass (the float16 gradients are S times larger, clear of the underflow), divides
the float32 weight gradients by S, and skips a step whose gradients are not finite. S is
dynamic (keras.optimizers.LossScaleOptimizer's rule): halved on every skipped step, doubled
after `GROWTH_STEPS` finite steps in a row. bfloat16 has float32's exponent and needs none of
this (--use_bfloat16; docs/memory.md).

`LossScaleOptimizer` is Keras' with four changes:
- the skip decision is taken over all replicas (an all-reduced count of the replicas whose
  gradients are not finite): Keras decides on each replica's gradients before the all-reduce
  (the MirroredStrategy path takes replica 0's), and the project's Adam all-reduces inside its
  update, so a replica that overflowed alone would put inf into every weight;
- it counts its skipped steps (`skipped_steps`, checkpointed with the scale and its counter);
- training/optimization.Adam gets the scaled gradients, the scale and the skip decision, and
  divides and selects inside its update (`_tf_apply`): Keras unscales before the update and
  applies it in a branch, copies of the gradients and the variables in device memory. The
  clipping, the layer scales and the update see the true gradients, Keras' bit for bit (the
  scale is a power of two; under XLA within float32 rounding: FMA contraction), and a
  skipped step writes back the same bits;
- everything else is Keras': a skipped step leaves the weights, the Adam slots, the beta
  powers and the inner optimizer's iterations (the learning-rate schedule, fairseq's bias correction) untouched.

The trainer calls `wrap` on the task's optimizer (a no-op unless the policy is mixed_float16),
`apply` for the update and the step's metrics, `checkpoint_objects` for its checkpoint and
`loop_metrics` for the log line and TensorBoard (float32 and bfloat16 runs: nothing changes).
"""

import keras
import tensorflow as tf

POLICY = "mixed_float16"
INITIAL_SCALE = 2.0 ** 15     # Keras' defaults; read when `wrap` runs (tests lower them)
GROWTH_STEPS = 2000


def use_float16(flag_values=None):
  """Sets the mixed_float16 policy (--use_float16): float16 compute, float32 weights. Warns
  (one line) where float16 does not pay: on a TPU (its matmul units are bfloat16's) and on a
  run without a GPU (CPUs have no fast float16 matmuls)."""
  keras.config.set_dtype_policy(POLICY)
  f = flag_values
  if f is None:
    return
  if f.tpu or f.distribution_strategy == "tpu":
    print("warning: --use_float16 on a TPU: TPUs compute in bfloat16, use --use_bfloat16 (no "
          "loss scaling needed)", flush=True)
  elif not tf.config.list_physical_devices("GPU"):
    print("warning: --use_float16 without a GPU: CPUs have no fast float16 matmuls, the step "
          "runs slower than float32 (--use_bfloat16 on CPUs with AMX / AVX512-BF16)",
          flush=True)


def active():
  """Whether the global dtype policy is mixed_float16 (the trainer then scales the loss)."""
  return keras.config.dtype_policy().name == POLICY


class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
  """keras.optimizers.LossScaleOptimizer with the skip decided over all replicas and the skipped
  steps counted (see the module docstring)."""

  def build(self, var_list):
    super().build(var_list)
    # aggregation "none" as Keras' dynamic_scale and step_counter: updated where they are
    self.skipped_steps = self.add_variable(shape=(), dtype="int", initializer="zeros",
                                           aggregation="none", name="skipped_steps")

  def check_finite(self, grads):
    """True when every gradient of every replica is finite (a scalar bool, the same on all
    replicas): the all-reduced gradient sum is finite exactly then."""
    finite = super().check_finite(grads)
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
      return finite
    bad = context.all_reduce(tf.distribute.ReduceOp.SUM,
                             tf.cast(tf.logical_not(finite), tf.float32))
    return tf.equal(bad, 0.0)

  def _tf_apply(self, grads, trainable_variables=None):
    """Keras' apply (skip on a non-finite gradient, unscale, apply, grow or shrink the scale)
    without its branches when the inner optimizer takes the scale and the decision itself
    (training/optimization.Adam's `loss_scale` and `apply_if`, set here before each apply):
    Keras divides every gradient before the update and applies it inside a tf.cond, which
    keeps a copy of the gradients and of each updated variable alive (bench/memory.py's plans
    show the difference). Under gradient accumulation Keras' path stays: the
    accumulated gradients must share one scale."""
    inner = self.inner_optimizer
    if not hasattr(inner, "apply_if") or inner.gradient_accumulation_steps:
      inner.loss_scale = inner.apply_if = None
      return super()._tf_apply(grads, trainable_variables)
    finite = self.check_finite(grads)           # the same on every replica
    inner.loss_scale = tf.convert_to_tensor(self.dynamic_scale)   # tensors: not tracked
    inner.apply_if = finite
    inner.apply(grads, trainable_variables=trainable_variables)
    tf.__internal__.distribute.interim.maybe_merge_call(
        self._update_scale, tf.distribute.get_strategy(), finite)

  def _update_scale(self, distribution, finite):
    """Keras' rule, as selects: a finite step counts towards growth (the scale doubles after
    dynamic_growth_steps of them), a skipped one halves the scale and resets the count."""
    finite = distribution.experimental_local_results(finite)[0]
    grow = tf.logical_and(finite, tf.equal(self.step_counter, self.dynamic_growth_steps - 1))
    counter = self.step_counter
    counter.assign(tf.where(finite & ~grow, counter + 1, tf.zeros_like(counter)))
    factor = tf.where(grow, 2.0, tf.where(finite, 1.0, 0.5))
    self.dynamic_scale.assign(self.dynamic_scale * tf.cast(factor, self.dynamic_scale.dtype))
    self.skipped_steps.assign_add(tf.cast(~finite, self.skipped_steps.dtype))

  def _stateful_handle_non_finite_grads(self):
    super()._stateful_handle_non_finite_grads()     # scale halved, growth counter reset
    self.skipped_steps.assign_add(1)


def wrap(optimizer):
  """`optimizer` inside a LossScaleOptimizer under the mixed_float16 policy; else as it is."""
  if not active() or isinstance(optimizer, LossScaleOptimizer):
    return optimizer
  return LossScaleOptimizer(optimizer, initial_scale=INITIAL_SCALE,
                            dynamic_growth_steps=GROWTH_STEPS, name="loss_scale")


def scaled(optimizer):
  return isinstance(optimizer, LossScaleOptimizer)


def gradient_norm(optimizer, grads):
  """The global norm of the true gradients, from `grads` of the scaled loss (float32 [])."""
  norm = tf.linalg.global_norm(grads)
  return norm / optimizer.dynamic_scale if scaled(optimizer) else norm


def apply(optimizer, grads, variables, metrics):
  """optimizer.apply_gradients; returns `metrics`, under loss scaling with `skipped_steps`
  (1.0 when this step was skipped, else 0.0) and `grad_norm` 0 on a skipped step (inf or NaN
  there: the loop's mean leaves it out, `loop_metrics`)."""
  if not scaled(optimizer):
    optimizer.apply_gradients(zip(grads, variables))
    return metrics
  before = tf.identity(optimizer.skipped_steps.value)
  optimizer.apply_gradients(zip(grads, variables))
  skipped = tf.cast(optimizer.skipped_steps.value - before, tf.float32)
  norm = tf.where(skipped > 0, tf.zeros_like(metrics["grad_norm"]), metrics["grad_norm"])
  return dict(metrics, grad_norm=norm, skipped_steps=skipped)


def checkpoint_objects(optimizer):
  """{checkpoint key: variable}: the task optimizer's variables as `optimizer.NNNN` (the keys of
  a run without loss scaling, so such a checkpoint's optimizer reads the same way), and the loss
  scale's state as `loss_scale.*` (a resumed run continues with the same scale)."""
  inner = optimizer.inner_optimizer if scaled(optimizer) else optimizer
  objects = {f"optimizer.{i:04d}": v for i, v in enumerate(inner.variables)}
  if scaled(optimizer):
    objects.update({"loss_scale.scale": optimizer.dynamic_scale,
                    "loss_scale.growth_counter": optimizer.step_counter,
                    "loss_scale.skipped_steps": optimizer.skipped_steps})
  return objects


def loop_metrics(optimizer, metrics, steps):
  """A host loop's metrics (means over its `steps` steps) for the log line and TensorBoard; under
  loss scaling: `skipped_steps` the loop's count, `skipped_total` the run's, `loss_scale` the
  current scale and `grad_norm` the mean over the steps applied (inf when all were skipped)."""
  if not scaled(optimizer):
    return metrics
  metrics = dict(metrics)
  skipped = int(round(float(metrics.get("skipped_steps", 0.0)) * steps))
  applied = steps - skipped
  norm = float(metrics["grad_norm"])
  metrics.update(grad_norm=norm * steps / applied if applied else float("inf"),
                 skipped_steps=skipped, skipped_total=int(optimizer.skipped_steps.numpy()))
  scale = float(optimizer.dynamic_scale.numpy())
  metrics["loss_scale"] = int(scale) if scale >= 1 and scale == int(scale) else scale
  return metrics
