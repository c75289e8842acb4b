"""Optimizer and learning-rate schedule shared by pretraining and fine-tuning.

- `WarmupDecay`: linear warmup to the peak, then linear or cosine decay to
  peak * min_lr_ratio at train_steps.
- `AdamWeightDecay`: the release's Adam with decoupled weight decay (no bias
  correction unless asked; LayerNorm and every `*bias*` variable, r_w/r_r/r_s
  biases included, excluded from decay), global-norm clipping, gradient
  accumulation, and per-variable learning-rate multipliers, used for layer-wise
  learning-rate decay as real learning rates (the release scaled gradients,
  which Adam cancels).
- `layer_decay_multipliers`: XLNet depth of every variable -> multiplier.
- `dense_gradients`: embedding gradients as dense tensors, so norms count repeated rows once.
"""

import math
import re

import keras
import numpy as np
import tensorflow as tf


def dense_gradients(grads):
  """Gradients with every tf.IndexedSlices (the gradient of a gather: embeddings) made dense.

  A gather's gradient lists one row per looked-up index, repeats included (a position id
  appears once per batch row). tf.linalg.global_norm and tf.clip_by_global_norm square those
  rows before summing them, so their "norm" is not the gradient's: it misses every cross term
  of a repeated index. Summing the repeats first gives the true global norm, the one the
  release computed on TPU (one-hot embedding matmuls, dense gradients) and PyTorch computes.
  The optimizer's update is dense anyway (update_step converts), so nothing is lost.
  """
  return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]


class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
  """lr(step): linear warmup over warmup_steps, then linear/cosine decay."""

  def __init__(self, peak, train_steps, warmup_steps=0, decay="linear", min_lr_ratio=0.0):
    if decay not in ("linear", "cosine"):
      raise ValueError(f"--decay_method must be linear or cosine, got {decay!r}")
    self.peak, self.train_steps, self.warmup_steps = peak, train_steps, warmup_steps
    self.decay, self.min_lr_ratio = decay, min_lr_ratio

  def __call__(self, step):
    step = tf.cast(step, tf.float32)
    warm = self.peak * step / max(self.warmup_steps, 1)
    span = max(self.train_steps - self.warmup_steps, 1)
    progress = tf.clip_by_value((step - self.warmup_steps) / span, 0.0, 1.0)
    if self.decay == "linear":
      shape = 1.0 - progress
    else:
      shape = 0.5 * (1.0 + tf.cos(math.pi * progress))
    decayed = self.peak * (self.min_lr_ratio + (1.0 - self.min_lr_ratio) * shape)
    return tf.where(step < self.warmup_steps, warm, decayed)

  def get_config(self):
    return dict(peak=self.peak, train_steps=self.train_steps, warmup_steps=self.warmup_steps,
                decay=self.decay, min_lr_ratio=self.min_lr_ratio)


def layer_decay_multipliers(model, decay_rate):
  """{variable path: multiplier} for layer-wise learning-rate decay.

  Layer l of N gets decay_rate ** (N - 1 - l); the embeddings (and mask_emb)
  decay_rate ** N; the stacked per-layer biases [N, ...] a per-slice multiplier;
  heads 1. Returns {} when decay_rate == 1.
  """
  if decay_rate == 1.0:
    return {}
  n = getattr(model.config, "n_layer", None) or model.config.num_hidden_layers   # XLNet, MPNet
  out = {}
  for var in model.trainable_variables:
    path = var.path
    layer = re.search(r"/layer_(\d+)[/_]", path)
    name = path.rsplit("/", 1)[-1]
    if layer:
      out[path] = decay_rate ** (n - 1 - int(layer.group(1)))
    elif re.match(r"(.*/)?mpnet/", path):   # MPNet embeddings and shared relative bias
      out[path] = decay_rate ** n
    elif "/transformer/" in path or path.startswith("transformer/"):
      if name in ("word_embedding", "mask_emb"):
        out[path] = decay_rate ** n
      elif var.shape.rank and var.shape[0] == n and name in (
          "r_w_bias", "r_r_bias", "r_s_bias", "seg_embed"):
        per_layer = decay_rate ** (n - 1 - np.arange(n))
        out[path] = per_layer.reshape([n] + [1] * (len(var.shape) - 1)).astype(np.float32)
      else:
        out[path] = decay_rate ** n
  return out


class AdamWeightDecay(keras.optimizers.Optimizer):
  """Adam with decoupled weight decay, as the XLNet/BERT release.

  update = m / (sqrt(v) + epsilon) [+ weight_decay * w];  w -= lr * mult * update
  with bias-corrected m, v only when bias_correction (fairseq/MPNet style).
  """

  def __init__(self, learning_rate=1e-4, weight_decay_rate=0.0, beta_1=0.9, beta_2=0.999,
               epsilon=1e-6, bias_correction=False,
               exclude_from_decay=("LayerNorm", "layer_norm", "bias", "gamma", "beta"),
               lr_multipliers=None, clip_norm=None, name="adam_weight_decay", **kwargs):
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    # Global-norm clipping of the summed gradients (Keras' own global_clipnorm
    # clips each replica's share before the all-reduce).
    self.clip_norm = clip_norm
    self.weight_decay_rate = weight_decay_rate
    self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
    self.bias_correction = bias_correction
    self.exclude_from_decay = tuple(exclude_from_decay)
    self.lr_multipliers = dict(lr_multipliers or {})
    self._decay_pattern = re.compile("|".join(re.escape(e) for e in self.exclude_from_decay))

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    self._m = [self.add_variable_from_reference(v, "m") for v in var_list]
    self._v = [self.add_variable_from_reference(v, "v") for v in var_list]
    # Indexed by position: under tf.distribute update_step sees per-device variables.
    self._mult = [self.lr_multipliers.get(v.path) for v in var_list]
    self._decay = [self.decays(v) for v in var_list]

  def _backend_update_step(self, grads, trainable_variables, learning_rate):
    variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
    grads_and_vars = self._all_reduce_sum_gradients(list(zip(grads, variables)))
    if self.clip_norm:
      grads, variables = zip(*grads_and_vars)
      grads, _ = tf.clip_by_global_norm(dense_gradients(grads), self.clip_norm)
      grads_and_vars = list(zip(grads, variables))
    tf.__internal__.distribute.interim.maybe_merge_call(
        self._distributed_tf_update_step, self._distribution_strategy, grads_and_vars,
        learning_rate)

  def decays(self, variable):
    """Whether weight decay applies to this (Keras) variable."""
    return self.weight_decay_rate > 0 and not self._decay_pattern.search(variable.path)

  def update_step(self, gradient, variable, learning_rate):
    dtype = variable.dtype
    index = self._get_variable_index(variable)
    lr = tf.cast(learning_rate, dtype)
    if self._mult[index] is not None:
      lr = lr * tf.constant(self._mult[index], dtype)
    g = tf.cast(tf.convert_to_tensor(gradient), dtype)
    m, v = self._m[index], self._v[index]
    b1, b2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
    new_m = b1 * m + (1 - b1) * g
    new_v = b2 * v + (1 - b2) * tf.square(g)
    self.assign(m, new_m)
    self.assign(v, new_v)
    if self.bias_correction:
      t = tf.cast(self.iterations + 1, dtype)
      new_m = new_m / (1 - tf.pow(b1, t))
      new_v = new_v / (1 - tf.pow(b2, t))
    update = new_m / (tf.sqrt(new_v) + tf.cast(self.epsilon, dtype))
    if self._decay[index]:
      update += tf.cast(self.weight_decay_rate, dtype) * variable
    self.assign_sub(variable, lr * update)

  def get_config(self):
    config = super().get_config()
    config.update(weight_decay_rate=self.weight_decay_rate, beta_1=self.beta_1,
                  beta_2=self.beta_2, epsilon=self.epsilon,
                  bias_correction=self.bias_correction, clip_norm=self.clip_norm,
                  exclude_from_decay=self.exclude_from_decay)
    return config


def build_optimizer(model, learning_rate, train_steps, warmup_steps=0, decay_method="linear",
                    min_lr_ratio=0.0, weight_decay=0.0, adam_epsilon=1e-6, clip=1.0,
                    lr_layer_decay_rate=1.0, grad_accumulation_steps=1):
  """The optimizer every task uses, from the common flags."""
  schedule = WarmupDecay(learning_rate, train_steps, warmup_steps, decay_method, min_lr_ratio)
  return AdamWeightDecay(
      learning_rate=schedule, weight_decay_rate=weight_decay, epsilon=adam_epsilon,
      clip_norm=clip if clip > 0 else None,
      gradient_accumulation_steps=grad_accumulation_steps if grad_accumulation_steps > 1 else None,
      lr_multipliers=layer_decay_multipliers(model, lr_layer_decay_rate))
