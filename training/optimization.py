"""Optimizer and learning-rate schedule shared by pretraining and fine-tuning.

Every choice here is named after the code it reproduces (docs/fine-tuning.md, "Optimizer semantics and recipes"):

- `WarmupDecay`: the release's schedule (`model_utils.get_train_op`): lr * step / warmup while
  step < warmup (the first update has lr 0), then poly (power 1, "linear") or cosine decay
  from lr to lr * min_lr_ratio at train_steps, in TF1's arithmetic.
- `Adam`, `semantics=`:
    "release"  the XLNet release's `get_train_op`: `tf.train.AdamOptimizer` when
               weight_decay == 0 (bias-corrected in TF1's form: lr_t = lr sqrt(1 - b2^t) /
               (1 - b1^t), w -= lr_t m / (sqrt(v) + eps)), its `AdamWeightDecayOptimizer` when
               weight_decay > 0 (no bias correction; w -= lr (m / (sqrt(v) + eps) + wd w); decay
               skipped for names matching LayerNorm / layer_norm / bias, except r_w_bias,
               r_r_bias and r_s_bias, which are always decayed);
    "fairseq"  fairseq's `Adam` (MPNet's release): the same bias-corrected step as TF1
               (epsilon on the uncorrected sqrt(v)), decoupled decay w -= lr wd w on every
               variable, applied before the step.
  Global-norm clipping of the summed gradients (before any layer scaling), gradient
  accumulation.
- Layer-wise decay, two algorithms (`build_optimizer(layer_decay_method=)`):
    "release"  the release's code: the CLIPPED gradients of `model/transformer/layer_<l>/`
               variables are multiplied by rate^(n_layer - 1 - l); nothing else changes (Adam
               cancels most of the scale, not all: epsilon). `release_layer_grad_scales`.
    "paper"    the paper's text (appendix): per-layer learning rates; the embeddings learn at
               rate^n_layer and each layer's slice of the stacked biases at its layer's rate.
               `layer_decay_multipliers`.
- `dense_gradients`: embedding gradients as dense tensors, so norms count repeated rows once.

Variables are matched by their reference names (`reference_names`: the release's TF1 names for
XLNet, the Hugging Face names for MPNet), so every rule reads as in the code it reproduces.
"""

import math
import re
import types

import keras
import numpy as np
import tensorflow as tf

SEMANTICS = ("release", "fairseq")
LAYER_DECAY_METHODS = ("release", "paper")
DECAY_METHODS = {"linear": "linear", "poly": "linear", "cosine": "cosine", "cos": "cosine"}
# The release's AdamWeightDecayOptimizer (model_utils.py): exclude_from_weight_decay as passed by
# get_train_op, and its include_in_weight_decay default, which wins.
RELEASE_EXCLUDE_FROM_DECAY = ("LayerNorm", "layer_norm", "bias")
RELEASE_INCLUDE_IN_DECAY = ("r_s_bias", "r_r_bias", "r_w_bias")
# A layer's variables: the release's regex, and Hugging Face's MPNet names.
_LAYER = re.compile(r"(?:model/transformer/layer_|\.layer\.)(\d+)[/.]")


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


def _host_variables(values, prefix):
  """{name: non-trainable variable} holding host-computed float32 values, made outside any
  graph. Their holder keeps them out of checkpoints: a run's settings come from its flags,
  never from the checkpoint it resumes."""
  with tf.init_scope():
    return {k: tf.Variable(v, trainable=False, name=f"{prefix}_{k}") for k, v in values.items()}


class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
  """lr(step): linear warmup over warmup_steps, then linear ("poly") or cosine decay.

  The arithmetic is TF1's (tf.train.polynomial_decay with power 1, tf.train.cosine_decay with
  alpha = min_lr_ratio), so the float32 values equal the release's.

  The settings enter the step as tensors, not as constants of the program, so runs that differ
  only in them (a sweep over learning rate, lengths, warmup) compile the same program: float32
  values computed on the host (`host_values`) held in non-trainable variables, which no
  checkpoint names. They are the values the program folded its constants into when the
  settings were constants: graph rewriting (Grappler, as in TF1's own graphs) and XLA turn a
  division by a constant into a multiplication by its float32 reciprocal, and step / warmup *
  peak into step * (1/warmup * peak); `end` is peak * min_lr_ratio in double, rounded once.
  So every value equals TF1's graph (tests/training/test_sweep_one_program.py), in XLA and
  outside it alike. The decay method stays part of the program.
  """

  def __init__(self, peak, train_steps, warmup_steps=0, decay="linear", min_lr_ratio=0.0):
    if decay not in DECAY_METHODS:
      raise ValueError(f"--decay_method must be linear (poly) or cosine (cos), got {decay!r}")
    self.peak, self.train_steps, self.warmup_steps = peak, train_steps, warmup_steps
    self.decay, self.min_lr_ratio = DECAY_METHODS[decay], min_lr_ratio
    self.tensors = _host_variables(self.host_values(), "lr_schedule")

  def host_values(self):
    """{name: float32 value} of the settings as the step reads them."""
    f32 = np.float32
    decay_steps = f32(max(self.train_steps - self.warmup_steps, 1))
    return dict(peak=f32(self.peak), warmup=f32(self.warmup_steps),
                warmup_rate=f32(1) / f32(max(self.warmup_steps, 1)) * f32(self.peak),
                decay_steps=decay_steps, inv_decay_steps=f32(1) / decay_steps,
                end=f32(self.peak * self.min_lr_ratio), alpha=f32(self.min_lr_ratio))

  def __call__(self, step):
    t = self.tensors
    step = tf.cast(step, tf.float32)
    peak, warmup, decay_steps = t["peak"], t["warmup"], t["decay_steps"]
    warm = step * t["warmup_rate"]
    p = tf.minimum(step - warmup, decay_steps) * t["inv_decay_steps"]
    if self.decay == "linear":
      end = t["end"]
      decayed = (peak - end) * (1.0 - p) + end
    else:
      alpha = t["alpha"]
      decayed = peak * ((1.0 - alpha) * (0.5 * (1.0 + tf.cos(math.pi * p))) + alpha)
    return tf.where(step < warmup, warm, decayed)

  def get_config(self):
    return dict(peak=self.peak, train_steps=self.train_steps, warmup_steps=self.warmup_steps,
                decay=self.decay, min_lr_ratio=self.min_lr_ratio)


def reference_names(model):
  """{variable path: reference name}: the model's `reference_variables()` (XLNet: the release's
  TF1 names; MPNet: the Hugging Face state-dict names); a variable it does not name keeps its
  path (as every variable of a model of no family)."""
  names = {}
  for name, var in getattr(model, "reference_variables", dict)().items():
    names.setdefault(var.path, name)
  return {v.path: names.get(v.path, v.path) for v in model.trainable_variables}


def release_layer_grad_scales(model, decay_rate):
  """{variable path: scale} of the release's layer-wise decay: the clipped gradient of a
  variable of layer l (its name holds `model/transformer/layer_<l>/`; MPNet: `.layer.<l>.`)
  is multiplied by decay_rate ** (n_layer - 1 - l), n_layer counted from the names as the
  release does; every other variable is left alone. {} when decay_rate == 1."""
  if decay_rate == 1.0:
    return {}
  layers = {}
  for path, name in reference_names(model).items():
    match = _LAYER.search(name)
    if match:
      layers[path] = int(match.group(1))
  n = max(layers.values(), default=-1) + 1
  return {path: decay_rate ** (n - 1 - l) for path, l in layers.items()}


def layer_decay_multipliers(model, decay_rate):
  """{variable path: learning-rate multiplier}: the paper's per-layer learning rates.

  Layer l of N gets decay_rate ** (N - 1 - l); the embeddings (and mask_emb)
  decay_rate ** N; the stacked per-layer biases [N, ...] a per-slice multiplier;
  heads 1. Returns {} when decay_rate == 1.
  """
  if decay_rate == 1.0:
    return {}
  n = model.num_layers
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


def release_decays(name):
  """Whether the release's AdamWeightDecayOptimizer decays the variable called `name`."""
  if any(re.search(p, name) for p in RELEASE_INCLUDE_IN_DECAY):
    return True
  return not any(re.search(p, name) for p in RELEASE_EXCLUDE_FROM_DECAY)


def _log(beta):
  return math.log(beta) if beta > 0 else -math.inf       # beta 0: 1 - 0^t = -expm1(-inf) = 1


class Adam(keras.optimizers.Optimizer):
  """Adam as the release (`semantics="release"`) or fairseq (`"fairseq"`) apply it; see the
  module docstring for the update rules, which are written in the same float32 arithmetic.

  names: {variable path: reference name} for the decay rules (default: the path).
  grad_scales: {variable path: scale} applied to the clipped gradients (release layer decay).
  lr_multipliers: {variable path: multiplier (scalar or per-slice array)} (paper layer decay).
  clip_norm: global-norm clipping of the gradients summed over replicas (None = off).

  With weight decay (the release's AdamWeightDecayOptimizer) and under fairseq semantics, the
  settings (betas, epsilon, weight decay) enter the update as float32 variables holding the
  values its constants had, so a sweep over them compiles one program (`_c`); the rule and the
  semantics stay part of the program, and so do tf1_adam's settings.

  Under float16 loss scaling (training/loss_scale.py) two tensors come with the gradients:
  `loss_scale`, the scale they carry (divided out inside the update), and `apply_if`, whether
  the step is applied: every variable (weights, slots, beta powers, iterations) is written as
  where(apply_if, new, old), the same bits as a skipped or an applied update, and no branch
  keeps a copy of the gradients or the weights alive (XLA fuses the select into the update).
  """

  def __init__(self, learning_rate=1e-4, semantics="release", weight_decay_rate=0.0,
               beta_1=0.9, beta_2=0.999, epsilon=1e-8, clip_norm=None, names=None,
               grad_scales=None, lr_multipliers=None, name="adam", **kwargs):
    if semantics not in SEMANTICS:
      raise ValueError(f"--optimizer must be one of {', '.join(SEMANTICS)}, got {semantics!r}")
    super().__init__(learning_rate=learning_rate, name=name, **kwargs)
    self.semantics, self.weight_decay_rate = semantics, weight_decay_rate
    self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
    self._constants = self.settings()
    # In a plain object: the optimizer tracks dicts of variables it holds (checkpoints would
    # name them); tf1_adam reads constants (see _c). `shared`: during an update, the scalars
    # every variable's update reads ({(name, dtype, device): tensor}, _once).
    self._tensors = types.SimpleNamespace(variables=None if self.rule == "tf1_adam" else
                                          _host_variables(self.host_values(), "adam"),
                                          shared=None)
    self.clip_norm = clip_norm
    self.names = dict(names or {})
    self.grad_scales = dict(grad_scales or {})
    self.lr_multipliers = dict(lr_multipliers or {})
    # Set by training/loss_scale.LossScaleOptimizer before each apply (None otherwise):
    self.loss_scale = None    # the scale the gradients carry (float32 [])
    self.apply_if = None      # whether this update happens (bool []); else nothing changes

  def settings(self):
    """{name: value (Python float)} of the constants the update rules use: 1 - beta computed
    in Python's double (the release's decay rule and fairseq), log(beta) for fairseq's bias
    correction."""
    return dict(beta_1=self.beta_1, beta_2=self.beta_2, one_minus_beta_1=1.0 - self.beta_1,
                one_minus_beta_2=1.0 - self.beta_2, log_beta_1=_log(self.beta_1),
                log_beta_2=_log(self.beta_2), epsilon=self.epsilon,
                weight_decay_rate=self.weight_decay_rate)

  def host_values(self):
    """{name: float32 value} of the settings as a float32 update reads them (each rounded
    once, as the constants were)."""
    return {k: np.float32(v) for k, v in self.settings().items()}

  def _c(self, name, dtype):
    """Setting `name` as the update reads it: in float32 its variable (a tensor of the program,
    not a constant, so a sweep over it compiles once), except under tf1_adam; otherwise the
    constant. tf1_adam keeps its constants: XLA compiles its update with them into other
    float32 roundings than with tensors (the last bits of the weights move within a few steps),
    and its compiled step keeps the roundings it was compared with TF1's AdamOptimizer in; the
    two other rules give the same bits either way."""
    if dtype == tf.float32 and self._tensors.variables is not None:
      return self._tensors.variables[name]
    return tf.constant(self._constants[name], dtype)

  @property
  def rule(self):
    """The update rule in use: tf1_adam, adam_weight_decay or fairseq_adam."""
    if self.semantics == "fairseq":
      return "fairseq_adam"
    return "adam_weight_decay" if self.weight_decay_rate > 0 else "tf1_adam"

  def build(self, var_list):
    if self.built:
      return
    super().build(var_list)
    self._m = [self.add_variable_from_reference(v, "m") for v in var_list]
    self._v = [self.add_variable_from_reference(v, "v") for v in var_list]
    # beta^(t-1), multiplied by beta once per update as TF1's AdamOptimizer keeps its
    # beta1_power / beta2_power (the same float32 roundings as the release's accumulators)
    self._beta_powers = [self.add_variable((), initializer="ones", name=f"beta_{i}_power")
                         for i in (1, 2)]
    # Indexed by position: under tf.distribute update_step sees per-device variables.
    self._mult = [self.lr_multipliers.get(v.path) for v in var_list]
    self._scale = [self.grad_scales.get(v.path) for v in var_list]
    self._decay = [self.decays(v) for v in var_list]

  def decays(self, variable):
    """Whether weight decay applies to this (Keras) variable."""
    if not self.weight_decay_rate:
      return False
    if self.semantics == "fairseq":
      return True                     # fairseq decays every parameter
    return release_decays(self.names.get(variable.path, variable.path))

  def apply(self, grads, trainable_variables=None):
    super().apply(grads, trainable_variables)
    if self.apply_if is not None:    # Keras counts every call; a skipped one is taken back
      self.iterations.assign_sub(tf.cast(tf.logical_not(self.apply_if), self.iterations.dtype))

  def _put(self, variable, value):
    """variable := value, or under `apply_if` where(apply_if, value, variable); returns what
    was written. The weight's update reads the slots as written (the same values when the
    step is applied): reading the old slots after writing them would make XLA copy them."""
    if self.apply_if is not None:
      value = tf.where(self.apply_if, value, variable)
    self.assign(variable, value)
    return value

  def _put_sub(self, variable, delta):
    """variable -= delta; under `apply_if` through _put (without it, the same assign_sub op as
    before loss scaling existed, so the float32 step's graph does not change)."""
    if self.apply_if is None:
      self.assign_sub(variable, delta)
    else:
      self._put(variable, variable - delta)

  def _backend_update_step(self, grads, trainable_variables, learning_rate):
    variables = [v.value if isinstance(v, keras.Variable) else v for v in trainable_variables]
    grads_and_vars = self._all_reduce_sum_gradients(list(zip(grads, variables)))
    grads, variables = zip(*grads_and_vars)
    grads = dense_gradients(grads)
    scale = self.loss_scale     # set by training/loss_scale.py: `grads` are those of loss * scale
    if self.clip_norm:   # Keras' own global_clipnorm clips each replica's share instead
      norm = tf.linalg.global_norm(grads)
      grads, _ = tf.clip_by_global_norm(grads, self.clip_norm,
                                        use_norm=norm if scale is None else norm / scale)
    if scale is not None:
      # Unscaled here, in the same elementwise ops as the clipping and the update (one fusion,
      # no copy of the gradients). scale is a power of two, so (g c) / s == (g / s) c: the
      # update is Keras' (unscale, then clip) without its copy.
      grads = [g if g is None else g / scale for g in grads]
    if self.grad_scales:
      index = [self._get_variable_index(v) for v in trainable_variables]
      grads = [g if g is None or self._scale[i] is None else g * self._scale[i]
               for g, i in zip(grads, index)]
    tf.__internal__.distribute.interim.maybe_merge_call(
        self._distributed_tf_update_step, self._distribution_strategy,
        list(zip(grads, variables)), learning_rate)

  def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
    self._tensors.shared = {}
    try:
      super()._distributed_tf_update_step(distribution, grads_and_vars, learning_rate)
    finally:
      self._tensors.shared = None
    for power, beta in zip(self._beta_powers, ("beta_1", "beta_2")):
      distribution.extended.update(
          power.value, lambda p, b=beta: self._put(p, p * self._c(b, p.dtype)), group=False)

  def _once(self, name, variable, make):
    """make(): a scalar every variable's update reads alike (a setting, 1 - beta, a bias
    correction, the learning rate), made once per update and device instead of once per
    variable. The same ops on the same values, so the same bits (XLA and Grappler merged the
    copies anyway); only the trace, which made hundreds of them, is shorter."""
    shared = self._tensors.shared
    if shared is None:
      return make()
    key = (name, getattr(variable, "device", ""))
    if key not in shared:
      shared[key] = make()
    return shared[key]

  def update_step(self, gradient, variable, learning_rate):
    f32 = variable.dtype
    index = self._get_variable_index(variable)
    once = lambda name, make: self._once((name, f32), variable, make)
    c = lambda name: once(name, lambda: self._c(name, f32))
    lr = once("lr", lambda: tf.cast(learning_rate, f32))
    if self._mult[index] is not None:
      lr = lr * tf.constant(self._mult[index], f32)
    g = tf.cast(tf.convert_to_tensor(gradient), f32)
    m, v = self._m[index], self._v[index]
    eps = c("epsilon")
    if self.rule == "adam_weight_decay":
      # model_utils.AdamWeightDecayOptimizer: 1 - beta in Python (double), then float32.
      new_m = c("beta_1") * m + c("one_minus_beta_1") * g
      new_v = c("beta_2") * v + c("one_minus_beta_2") * (g * g)
      new_m, new_v = self._put(m, new_m), self._put(v, new_v)
      update = new_m / (tf.sqrt(new_v) + eps)
      if self._decay[index]:
        update += c("weight_decay_rate") * variable
      self._put_sub(variable, lr * update)
      return
    if self.rule == "tf1_adam":
      # TF1's ApplyAdam kernel, float32 throughout: m += (g - m)(1 - b1), v += (g² - v)(1 - b2),
      # w -= m alpha / (sqrt(v) + eps), alpha = lr sqrt(1 - b2^t) / (1 - b1^t).
      one = once("one", lambda: tf.constant(1.0, f32))
      b1, b2 = c("beta_1"), c("beta_2")
      root = once("sqrt(1 - b2^t)", lambda: tf.sqrt(one - self._beta_powers[1] * b2))
      alpha = lr * root / once("1 - b1^t", lambda: one - self._beta_powers[0] * b1)
      new_m = m + (g - m) * once("1 - b1", lambda: one - b1)
      new_v = v + (g * g - v) * once("1 - b2", lambda: one - b2)
      new_m, new_v = self._put(m, new_m), self._put(v, new_v)
      self._put_sub(variable, (new_m * alpha) / (tf.sqrt(new_v) + eps))
      return
    # fairseq.optim.adam.Adam: moments with 1 - beta from Python, step size lr sqrt(1 - b2^t) /
    # (1 - b1^t) (fairseq: in double; here 1 - b^t = -expm1(t log b) keeps float32 within 2e-7
    # of it without float64, which TPUs lack), decay w -= lr wd w before the step
    # w -= step_size m / (sqrt(v) + eps).
    new_m = m * c("beta_1") + c("one_minus_beta_1") * g
    new_v = v * c("beta_2") + c("one_minus_beta_2") * g * g
    t = once("t", lambda: tf.cast(self.iterations + 1, f32))
    correction1 = once("1 - b1^t", lambda: -tf.math.expm1(t * c("log_beta_1")))
    root = once("sqrt(1 - b2^t)", lambda: tf.sqrt(-tf.math.expm1(t * c("log_beta_2"))))
    step_size = lr * root / correction1
    new_m, new_v = self._put(m, new_m), self._put(v, new_v)
    w = variable
    if self._decay[index]:
      w = w - (lr * c("weight_decay_rate")) * w
    self._put(variable, w - step_size * (new_m / (tf.sqrt(new_v) + eps)))

  def get_config(self):
    config = super().get_config()
    config.update(semantics=self.semantics, weight_decay_rate=self.weight_decay_rate,
                  beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon,
                  clip_norm=self.clip_norm)
    return config


def build_optimizer(model, learning_rate, train_steps, warmup_steps=0, decay_method="linear",
                    min_lr_ratio=0.0, weight_decay=0.0, adam_epsilon=1e-8, adam_beta1=0.9,
                    adam_beta2=0.999, clip=1.0, lr_layer_decay_rate=1.0,
                    layer_decay_method="release", optimizer="release",
                    grad_accumulation_steps=1):
  """The optimizer every task uses, from resolved settings (training/recipes.py)."""
  if layer_decay_method not in LAYER_DECAY_METHODS:
    raise ValueError(f"--layer_decay_method must be one of {', '.join(LAYER_DECAY_METHODS)}, "
                     f"got {layer_decay_method!r}")
  schedule = WarmupDecay(learning_rate, train_steps, warmup_steps, decay_method, min_lr_ratio)
  paper = layer_decay_method == "paper"
  return Adam(
      learning_rate=schedule, semantics=optimizer, weight_decay_rate=weight_decay,
      beta_1=adam_beta1, beta_2=adam_beta2, epsilon=adam_epsilon,
      clip_norm=clip if clip > 0 else None, names=reference_names(model),
      grad_scales=None if paper else release_layer_grad_scales(model, lr_layer_decay_rate),
      lr_multipliers=layer_decay_multipliers(model, lr_layer_decay_rate) if paper else None,
      gradient_accumulation_steps=grad_accumulation_steps if grad_accumulation_steps > 1 else None)


def describe(settings):
  """One line naming the update rule and its settings (before " | ") and the schedule (after),
  for logs and reports."""
  s = settings
  if s["optimizer"] == "fairseq":
    rule = "fairseq Adam (bias-corrected, decoupled decay on every weight)"
  elif s["weight_decay"] > 0:
    rule = "release AdamWeightDecayOptimizer (no bias correction)"
  else:
    rule = "release tf.train.AdamOptimizer (TF1 bias correction)"
  text = (f"{rule}, betas ({s['adam_beta1']:g}, {s['adam_beta2']:g}), eps "
          f"{s['adam_epsilon']:g}, weight decay {s['weight_decay']:g}, clip {s['clip']:g}")
  if s["lr_layer_decay_rate"] != 1.0:
    how = ("per-layer learning rates (paper)" if s["layer_decay_method"] == "paper"
           else "clipped layer gradients scaled (release)")
    text += f", layer decay {s['lr_layer_decay_rate']:g}: {how}"
  return (text + f" | lr {s['learning_rate']:g}, warmup {s['warmup_steps']}, "
          f"{DECAY_METHODS[s['decay_method']]} decay to {s['min_lr_ratio']:g} x lr at step "
          f"{s['train_steps']}; unset settings from recipe {s.get('recipe', '?')}")
