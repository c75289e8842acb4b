"""MPNet's gap, checked against Hugging Face: transformers' MPNetForMaskedLM (PyTorch, float32)
trained on exactly the batches and steps of a finished quickstart's MPNet-architecture MLM run
(stage pretrain-mpnet-mlm: run_pretrain.py --objective=mpnet --mpnet_mode=mlm), from the same
initial weights, with the same loss and the same optimizer, set against our own replay of that
run. The quickstart's directory is only read.

  PYTHONPATH=. python tools/mpnet_hf_curve.py --output_dir=output/quickstart \\
      --out=/tmp/mpnet_hf_curve.json                      # every arm, --steps=train_steps
  PYTHONPATH=. python tools/mpnet_hf_curve.py --output_dir=output/quickstart \\
      --out=/tmp/exact.json --steps=0 --exact_steps=200 --no-null_arm --no-hf_init_arm

The arms, each a list of per-step training losses on the same per-step batches:
  replay        our model, stepped by the trainer's own step (training/stepper.py) from a task
                built from the stage's recorded command exactly as pretraining/runner.py builds
                it, seeded as training/trainer.py seeds it (the run's step-0 weights are not
                saved: they are rebuilt from --seed), fed the run's records in order, each
                step's 80/10/10 draw from task.step_seed(step) (pretraining/task.py). Its mean
                over each logged loop (the log prints the MEAN loss of the 50 steps of a host
                loop, training/trainer.py) is compared with the log, and its weights with the
                run's checkpoints: equal to float rounding = the same batches, the same draws,
                the same dropout masks.
  hf            MPNetForMaskedLM from the replay's step-0 weights (modeling/mpnet hf names),
                on the inputs the run's step built (captured from task.predict compiled with
                XLA as the step is: CapturedInputs): the corrupted tokens put back in position
                order, position ids pad_token_id + 1 + position passed explicitly (HF would
                count from its hard-coded padding_idx 1), the word embedding's row 1 left
                trainable (HF freezes it as padding_idx; it is our <s>), the cross entropy of
                the c predicted positions averaged over batch x c (ours: modeling/losses.lm_loss
                without a mask), tf.train.AdamOptimizer (TF1 bias correction, float32) after
                tf.clip_by_global_norm with the release's linear warmup + decay, written out in
                torch below; dropout from the config (torch's masks, not ours).
  exact         ours and hf with dropout 0 for --exact_steps steps: per-step differences.
  null          (--null_arm) ours again with other dropout masks: how far two runs that differ
                only in their dropout masks drift apart, the yardstick for replay - hf.
  hf_init       (--hf_init_arm) ours and hf from Hugging Face's own initialisation
                (MPNetForMaskedLM(config), torch.manual_seed(--seed)): what the run would give
                with independently drawn weights.
The replay equals the log only when this checkout computes what the run's did (the JSON
records git HEAD): rerun the stage after a change to MPNet's pretraining, or run the tool from
the run's commit. On the small preset (2000 steps, shared 2-core CPU) every arm takes ~22 min.
Held-out: every final model's masked-token loss on the first --heldout_batches batches of the
valid records, the draws of reproduction/diagnostics.py's held-out loss (seed of batch i: i).

--out gets one JSON object (written atomically): the flags, the logged curve, every arm's
per-step losses, gradient norms and curve at the logged steps, the comparisons (max / mean
absolute differences; over the last 500 steps the mean paired difference with its standard
error, naive and from 50-step blocks), the checkpoint and learning-rate checks, the held-out
losses, the groups of step-0 weights that are bit-identical, and the seconds per arm.
"""

import argparse
import dataclasses
import json
import math
import os
import re
import sys
import time

import numpy as np

STAGE = "pretrain-mpnet-mlm"
TIED = ("lm_head.decoder.weight", "lm_head.decoder.bias")   # the embeddings, lm_head.bias
PATH_FLAGS = ("record_dir", "model_config_path", "model_dir")


# ---- the run: its command, its log, its task -------------------------------------------------
def read_stage(output_dir, stage):
  """The stage's recorded command (stages/STAGE.json) as the flags after the script, with the
  paths moved under `output_dir` if the quickstart directory has moved since."""
  with open(os.path.join(output_dir, "stages", f"{stage}.json"), encoding="utf-8") as f:
    record = json.load(f)
  command = record["command"]
  script = next(i for i, a in enumerate(command) if a.endswith("run_pretrain.py"))
  args = command[script + 1:]
  values = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
  old_root = os.path.dirname(os.path.dirname(values["model_dir"].rstrip("/")))
  new_root = os.path.abspath(output_dir)
  out = []
  for a in args:
    name = a[2:].split("=", 1)[0]
    if name in PATH_FLAGS and "=" in a:
      value = a.split("=", 1)[1]
      if value.startswith(old_root):
        value = new_root + value[len(old_root):]
      a = f"--{name}={value}"
    out.append(a)
  return out, record


def logged_curve(log_path):
  """[(step, loss)] of run_pretrain.py's log: each the mean loss of the loop ending there."""
  pattern = re.compile(r"^step (\d+)/\d+ loss ([0-9.eE+-]+|nan|inf)")
  out = []
  with open(log_path, encoding="utf-8") as f:
    for line in f:
      match = pattern.match(line)
      if match:
        out.append((int(match.group(1)), float(match.group(2))))
  return out


def parse_run_flags(args):
  """absl FlagValues of run_pretrain.py's flags, parsed from `args` (the stage's command);
  a second call parses anew."""
  from absl import flags
  from modeling import flags as model_flags
  from pretraining import flags as pretrain_flags
  from training import flags as training_flags
  if "objective" not in flags.FLAGS:
    model_flags.define_model_flags(record_defaults=True)     # defines on absl's global FLAGS
    training_flags.define_training_flags("pretrain", train_steps=1000)
    pretrain_flags.define_pretrain_flags()
    for name in ("record_dir", "model_dir", "output_dir", "sp_model"):   # run_pretrain.py's
      flags.DEFINE_string(name, None, name)
    flags.DEFINE_bool("uncased", False, "uncased")
  else:
    flags.FLAGS.unparse_flags()
  flags.FLAGS(["run_pretrain.py"] + list(args))
  return flags.FLAGS


def build_task(f, dropout=None):
  """The PretrainTask of run_pretrain.py's flags `f`, as pretraining/runner.run builds it;
  `dropout` (not None) replaces both dropout rates of the MPNet config."""
  from modeling import families
  from modeling import flags as model_flags
  from data_utils import record_format
  from pretraining import objectives
  from pretraining.flags import RECORD_FLAGS
  from pretraining.task import PretrainConfig, PretrainTask
  from training import flags as training_flags
  objective = objectives.get(f.objective)
  family = families.get(objective.family)
  model_config = family.config_from_json(f.model_config_path)
  if dropout is not None:
    model_config = dataclasses.replace(model_config, hidden_dropout_prob=dropout,
                                       attention_probs_dropout_prob=dropout)
  resolved = record_format.resolve_training_params(
      f.record_dir, vocab_size=family.vocab_size(model_config),
      **{name: f[name].value for name in RECORD_FLAGS if f[name].present})
  record = {name: resolved.values[name] for name in RECORD_FLAGS}
  run_config = dataclasses.replace(model_flags.run_config_from_flags(f),
                                   reuse_len=record["reuse_len"], bi_data=record["bi_data"])
  config = PretrainConfig(
      record_dir=f.record_dir, **record, objective=f.objective, nsp_weight=f.nsp_weight,
      mpnet_mode=f.mpnet_mode, mpnet_permute=f.mpnet_permute, seed=f.seed,
      **training_flags.optimizer_kwargs(f), num_hosts=f.num_hosts or 1, verify_records="size")
  return PretrainTask(config, model_config, run_config)


def train_batches(task, steps):
  """The run's first `steps` batches (one replica, default strategy: the trainer's)."""
  import tensorflow as tf
  return task.dataset(tf.distribute.InputContext()).take(steps)


def valid_batches(task, count):
  from data_utils import pipeline
  c = task.config
  ds, _, _ = pipeline.pretrain_dataset(c.record_dir, c.seq_len, c.reuse_len, c.num_predict,
                                       c.bsz_per_host, False, split="valid", repeat=False,
                                       verify="size")
  return ds.take(count)


# ---- the batches in Hugging Face's layout ------------------------------------------------------
INPUT_KEYS = ("content_ids", "content_pos", "query_pos", "targets", "kind")


class CapturedInputs:
  """The MPNet inputs the run's own step builds: task.predict (the objective's predict:
  pretraining/mpnet.py, with whatever it does to the records' rows first) compiled with XLA as
  the trainer compiles it, its call of modeling/mpnet/pretrain.build_inputs recorded while it is
  traced. XLA matters: TensorFlow's stateless random ops draw other numbers under XLA than
  eagerly on CPU (tf.random.stateless_uniform([16, 19], [0, 0]) differs by up to 0.94, philox
  or auto_select alike), so an eager build_inputs would not draw the run's 80/10/10; and
  capturing, not re-deriving, keeps the comparison on the trainer's inputs if the objective
  changes how it lays out the rows.

  call(batch, step) -> {content_ids, content_pos, query_pos, targets, kind} as numpy."""

  def __init__(self, task, model, jit_compile=True):
    import tensorflow as tf
    from modeling.mpnet import pretrain as mpnet_pretrain

    def run(batch, step):
      captured = []
      original = mpnet_pretrain.build_inputs

      def recording(*args, **kwargs):
        out = original(*args, **kwargs)
        captured.append(out)
        return out
      mpnet_pretrain.build_inputs = recording
      try:
        _, target, _, _, _ = task.predict(model, batch, task.initial_state(), step,
                                          training=False)
      finally:
        mpnet_pretrain.build_inputs = original
      if len(captured) != 1:
        raise ValueError(f"task.predict called build_inputs {len(captured)} times, not once")
      out = {k: captured[0][k] for k in INPUT_KEYS}
      out["predicted_target"] = target
      return out
    self._run = tf.function(run, jit_compile=jit_compile)

  def __call__(self, batch, step):
    import tensorflow as tf
    out = {k: v.numpy() for k, v in self._run(batch, tf.constant(step, tf.int64)).items()}
    if not np.array_equal(out.pop("predicted_target"), out["targets"]):
      raise ValueError("the targets task.predict scores are not build_inputs' targets")
    return out


def hf_layout(inputs, pad_token_id, mode="mlm"):
  """Our --mpnet_mode=mlm inputs (CapturedInputs) as MPNetForMaskedLM sees them.

  Ours: the tokens permuted (predicted last, by rank), the c predicted ones replaced by their
  80/10/10 copies, absolute positions content_pos + pad_token_id + 1 and relative positions
  content_pos (modeling/mpnet/pretrain.py, MPNetPretrainModel.call). Attention is
  permutation-equivariant, so every token put back at its position gives HF the same
  computation with positions 0..L-1 (its relative bias uses 0..L-1).

  Returns numpy int64: input_ids [B, L] (copies at the predicted positions), position_ids
  [B, L] (pad_token_id + 1 + position, to be passed explicitly: HF's default counts from its
  hard-coded padding_idx 1), pred_pos [B, c] (the predicted positions, in our prediction
  order), targets [B, c], labels [B, L] (-100 except at pred_pos: HF's masked-LM labels),
  kind [B, c] (the 80/10/10 draw).
  """
  if mode != "mlm":
    raise ValueError(f"--mpnet_mode={mode}: MPNetForMaskedLM is one stream; only mlm compares")
  content = inputs["content_ids"].astype(np.int64)
  perm = inputs["content_pos"].astype(np.int64)
  if content.shape != perm.shape:
    raise ValueError(f"content ids {content.shape} and positions {perm.shape} differ: not mlm")
  ids = np.empty_like(content)
  np.put_along_axis(ids, perm, content, axis=1)
  length = ids.shape[1]
  pred = inputs["query_pos"].astype(np.int64)
  targets = inputs["targets"].astype(np.int64)
  labels = np.full_like(ids, -100)
  np.put_along_axis(labels, pred, targets, axis=1)
  positions = np.broadcast_to(np.arange(length, dtype=np.int64) + pad_token_id + 1, ids.shape)
  return {"input_ids": ids, "position_ids": np.ascontiguousarray(positions), "pred_pos": pred,
          "targets": targets, "labels": labels, "kind": inputs["kind"].astype(np.int64)}


def hf_batches(task, model, batches, jit_compile=True):
  """[hf_layout dict] of [(step, batch)] (the records' batches, as pipeline.expand gives them):
  what the run's step `step` fed its model, in HF's layout. jit_compile: as the step was
  compiled (--xla=full: True; --xla=off: False)."""
  capture = CapturedInputs(task, model, jit_compile)
  return [hf_layout(capture(batch, step), task.model_config.pad_token_id,
                    task.config.mpnet_mode) for step, batch in batches]


# ---- weights between the two layouts -----------------------------------------------------------
def hf_state(model, weights=None):
  """{HF state-dict name: float32 array} of our MPNetPretrainModel (weights: {reference name:
  array} in our layout, default the model's own), kernels transposed; the tied
  lm_head.decoder.bias is lm_head.bias."""
  out = {}
  for name, (var, transpose) in model.hf_variable_map().items():
    value = np.asarray(var.numpy() if weights is None else weights[name], np.float32)
    out[name] = np.ascontiguousarray(value.T if transpose else value)
  out["lm_head.decoder.bias"] = out["lm_head.bias"]
  return out


def our_weights(model, state):
  """The inverse of hf_state: {reference name: array in our layout} from an HF state dict."""
  out = {}
  for name, (_, transpose) in model.hf_variable_map().items():
    value = np.asarray(state[name].detach().cpu().numpy() if hasattr(state[name], "detach")
                       else state[name], np.float32)
    out[name] = np.ascontiguousarray(value.T if transpose else value)
  return out


def hf_config(model_config, dropout=None):
  import transformers
  data = dict(model_config.to_dict())
  if dropout is not None:
    data.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
  return transformers.MPNetConfig(**data)


def hf_model(model_config, state=None, dropout=None):
  """MPNetForMaskedLM of our config (float32), loaded with `state` (all keys) if given."""
  import torch
  import transformers
  model = transformers.MPNetForMaskedLM(hf_config(model_config, dropout)).float()
  if state is not None:
    missing, unexpected = model.load_state_dict(
        {k: torch.tensor(v) for k, v in state.items()}, strict=False)
    if missing or unexpected:
      raise ValueError(f"HF state dict: missing {missing}, unexpected {unexpected}")
  # HF's MPNetEmbeddings gives its word embedding padding_idx = 1 whatever the config's pad id,
  # and torch never updates that row through the lookup. Id 1 is this project's <s>
  # (data_utils/tokenization.py), which MPNet's pretraining rows may start with
  # (pretraining/mpnet.py), and our model trains it (as fairseq's MPNet trains its own <s>):
  # the row is left trainable here, as in ours (our pad id 5 has no frozen row either).
  model.mpnet.embeddings.word_embeddings.padding_idx = None
  emb = model.mpnet.embeddings.word_embeddings.weight
  if not (model.lm_head.decoder.weight is emb and model.lm_head.decoder.bias is model.lm_head.bias):
    raise ValueError("MPNetForMaskedLM's decoder is not tied to the embeddings and lm_head.bias")
  return model


def hf_loss(model, batch, full_logits=False):
  """Mean cross entropy of the predicted positions. full_logits: HF's own forward with labels
  (logits of all L positions); else the LM head on the c predicted positions only (the same
  number, a fraction of the work)."""
  import torch
  t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in batch.items() if k != "kind"}
  if full_logits:
    return model(input_ids=t["input_ids"], position_ids=t["position_ids"],
                 labels=t["labels"]).loss
  hidden = model.mpnet(input_ids=t["input_ids"], position_ids=t["position_ids"])[0]
  pred = t["pred_pos"][:, :, None].expand(-1, -1, hidden.shape[-1])
  logits = model.lm_head(torch.gather(hidden, 1, pred))
  return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           t["targets"].reshape(-1))


# ---- the optimizer, in torch ---------------------------------------------------------------
def lr_schedule(settings):
  """lr(step) of training/optimization.WarmupDecay in float32: warmup lr * step / warmup
  (the first update has lr 0), then linear (poly) or cosine decay to lr * min_lr_ratio at
  train_steps; `step` = updates done before this one."""
  f32 = np.float32
  peak, warm = f32(settings["learning_rate"]), settings["warmup_steps"]
  train, ratio = settings["train_steps"], settings["min_lr_ratio"]
  method = {"poly": "linear", "cos": "cosine"}.get(settings["decay_method"],
                                                   settings["decay_method"])

  def at(step):
    s = f32(step)
    if s < f32(warm):
      return f32(s / f32(max(warm, 1)) * peak)
    decay = f32(max(train - warm, 1))
    p = f32(min(f32(s - f32(warm)), decay) / decay)
    if method == "linear":
      end = f32(settings["learning_rate"] * ratio)
      return f32((peak - end) * (f32(1) - p) + end)
    return f32(peak * ((f32(1) - f32(ratio)) * (f32(0.5) * (f32(1) + f32(math.cos(math.pi * p))))
                       + f32(ratio)))
  return at


class TF1Adam:
  """tf.train.AdamOptimizer (the release's get_train_op with weight decay 0) after
  tf.clip_by_global_norm, in float32 torch: beta powers multiplied once per update,
  alpha = lr sqrt(1 - b2^t) / (1 - b1^t), m += (g - m)(1 - b1), v += (g^2 - v)(1 - b2),
  w -= m alpha / (sqrt(v) + eps). Tied parameters appear once (model.parameters())."""

  def __init__(self, params, beta1=0.9, beta2=0.999, epsilon=1e-6, clip=1.0):
    import torch
    self.torch = torch
    f32 = torch.float32
    self.params = [p for p in params if p.requires_grad]
    self.b1, self.b2 = torch.tensor(beta1, dtype=f32), torch.tensor(beta2, dtype=f32)
    self.eps, self.one = torch.tensor(epsilon, dtype=f32), torch.tensor(1.0, dtype=f32)
    self.clip = clip
    self.b1_power, self.b2_power = self.one.clone(), self.one.clone()
    self.m = [torch.zeros_like(p) for p in self.params]
    self.v = [torch.zeros_like(p) for p in self.params]

  def step(self, lr):
    """One update with the gradients in .grad; returns the global norm before clipping."""
    torch = self.torch
    with torch.no_grad():
      grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
      norm = torch.sqrt(torch.stack([(g * g).sum() for g in grads]).sum())
      if self.clip:
        clip = torch.tensor(self.clip, dtype=torch.float32)
        scale = clip * torch.minimum(self.one / norm, self.one / clip)
        grads = [g * scale for g in grads]
      self.b1_power = self.b1_power * self.b1
      self.b2_power = self.b2_power * self.b2
      lr = torch.tensor(lr, dtype=torch.float32)
      alpha = lr * torch.sqrt(self.one - self.b2_power) / (self.one - self.b1_power)
      for p, g, m, v in zip(self.params, grads, self.m, self.v):
        m.add_((g - m) * (self.one - self.b1))
        v.add_((g * g - v) * (self.one - self.b2))
        p.sub_((m * alpha) / (torch.sqrt(v) + self.eps))
    return float(norm)


def check_optimizer(settings):
  """The torch side implements the release's TF1 Adam only (what the quickstart pins)."""
  if settings["optimizer"] != "release" or settings["weight_decay"] or \
     settings["lr_layer_decay_rate"] != 1.0 or settings["grad_accumulation_steps"] != 1:
    raise ValueError(f"the run's optimizer is not the release's TF1 Adam without weight decay, "
                     f"layer decay or accumulation: {settings}")


# ---- the arms ----------------------------------------------------------------------------------
def curve(losses, ends):
  """[(end, mean of losses[start:end])] for the logged loop ends within len(losses)."""
  out, start = [], 0
  for end in ends:
    if end > len(losses):
      break
    out.append((end, float(np.mean(losses[start:end]))))
    start = end
  return out


def dropouts(model):
  return [model.encoder.dropout, model.encoder.attention_dropout]


def train_ours(task, steps, weights=None, dropout_shift=0, log=print, name="ours",
               checkpoints=None, lr_at=None):
  """Our trainer's step on the run's first `steps` batches. weights: {reference name: array}
  replacing the seeded step-0 weights; dropout_shift: added to the dropout generators' seeds
  (other masks). checkpoints: {step: prefix} to compare the weights with. Returns a dict."""
  import tensorflow as tf
  from modeling import checkpoint as ckpt_lib
  from training.stepper import Stepper
  stepper = Stepper(task)
  initial = stepper.weights()
  if weights is not None:
    stepper.load_weights(weights)
    initial = stepper.weights()
  if dropout_shift:
    for layer in dropouts(stepper.model):
      if layer.seed_generator is not None:
        state = layer.seed_generator.state
        state.assign(state + tf.cast(dropout_shift, state.dtype))
  losses, norms, lrs, ckpt_diff = [], [], [], {}
  start = time.time()
  for step, batch in enumerate(train_batches(task, steps)):
    out = stepper.step(batch)
    losses.append(out["loss"])
    norms.append(out["grad_norm"])
    lrs.append(out["learning_rate"])
    if checkpoints and step + 1 in checkpoints:
      ref = task.build_model()
      ref.ensure_built()
      ckpt_lib.read_checkpoint(tf.train.Checkpoint(**ckpt_lib.native_objects(ref)),
                               checkpoints[step + 1], partial=True)
      mine = stepper.weights()
      ckpt_diff[step + 1] = max(float(np.max(np.abs(v.numpy() - mine[k])))
                                for k, v in ref.reference_variables().items())
      log(f"{name}: weights at step {step + 1} vs {checkpoints[step + 1]}: max |diff| "
          f"{ckpt_diff[step + 1]:.3g}")
    if (step + 1) % 50 == 0 or step + 1 == steps:
      rate = (time.time() - start) / (step + 1)
      log(f"{name}: step {step + 1}/{steps} loss {np.mean(losses[-50:]):.4f} "
          f"({rate:.3f} s/step, ETA {rate * (steps - step - 1):.0f} s)")
  out = {"loss": losses, "grad_norm": norms, "learning_rate": lrs,
         "seconds": time.time() - start, "model": stepper.model, "initial": initial}
  if checkpoints:
    out["checkpoint_max_abs_diff"] = ckpt_diff
  if lr_at is not None:
    out["lr_max_abs_diff"] = float(max((abs(a - float(lr_at(i))) for i, a in enumerate(lrs)),
                                       default=0.0))
  return out


def train_hf(model, batches, settings, seed, log=print, name="hf", full_logits=False):
  """MPNetForMaskedLM on `batches` (hf_batch dicts) with TF1Adam and the run's schedule."""
  import torch
  torch.manual_seed(seed)
  model.train()
  opt = TF1Adam(model.parameters(), settings["adam_beta1"], settings["adam_beta2"],
                settings["adam_epsilon"], settings["clip"])
  lr_at = lr_schedule(settings)
  losses, norms, lrs = [], [], []
  start = time.time()
  for step, batch in enumerate(batches):
    loss = hf_loss(model, batch, full_logits)
    model.zero_grad(set_to_none=True)
    loss.backward()
    lr = lr_at(step)
    norms.append(opt.step(float(lr)))
    losses.append(float(loss.detach()))
    lrs.append(float(lr))
    if (step + 1) % 50 == 0 or step + 1 == len(batches):
      rate = (time.time() - start) / (step + 1)
      log(f"{name}: step {step + 1}/{len(batches)} loss {np.mean(losses[-50:]):.4f} "
          f"({rate:.3f} s/step, ETA {rate * (len(batches) - step - 1):.0f} s)")
  return {"loss": losses, "grad_norm": norms, "learning_rate": lrs,
          "seconds": time.time() - start, "model": model}


def heldout_ours(task, model, batches):
  """reproduction/diagnostics.py's held-out loss: batch i drawn with seed step_seed(i)."""
  import tensorflow as tf
  from modeling import losses

  @tf.function(jit_compile=True)
  def step(batch, i):
    logits, target, mask, _, _ = task.predict(model, batch, task.initial_state(), i,
                                              training=False)
    return losses.lm_loss(logits, target, mask)
  return float(np.mean([float(step(b, tf.constant(i, tf.int64))) for i, b in enumerate(batches)]))


def heldout_hf(model, batches):
  import torch
  model.eval()
  with torch.no_grad():
    return float(np.mean([float(hf_loss(model, b)) for b in batches]))


def compare(a, b, last=500, block=50):
  """Per-step a - b: max / mean |diff| over all steps; over the last `last` steps the means,
  the mean paired difference and its standard error (naive, and from `block`-step blocks)."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  n = min(len(a), len(b))
  a, b = a[:n], b[:n]
  d = a - b
  out = {"steps": n, "max_abs_diff": float(np.max(np.abs(d))) if n else None,
         "mean_abs_diff": float(np.mean(np.abs(d))) if n else None}
  k = min(last, n)
  if k >= 2 * block:
    tail = d[-k:]
    blocks = tail[len(tail) % block:].reshape(-1, block).mean(axis=1)
    out["last"] = {"steps": k, "mean_a": float(a[-k:].mean()), "mean_b": float(b[-k:].mean()),
                   "mean_diff": float(tail.mean()),
                   "se_naive": float(tail.std(ddof=1) / math.sqrt(k)),
                   "se_blocks": float(blocks.std(ddof=1) / math.sqrt(len(blocks))),
                   "sd_step_a": float(a[-k:].std(ddof=1)),
                   "sd_step_diff": float(tail.std(ddof=1))}
  return out


def identical_groups(weights):
  """Groups of step-0 weights (names) that are bit-identical (same shape, same values), and
  position embeddings equal to the first rows of the word embeddings. The decoder, which is the
  word embedding itself (tied), is left out."""
  groups, seen = [], set()
  names = sorted(k for k in weights if k not in TIED)
  for i, a in enumerate(names):
    if a in seen or np.asarray(weights[a]).ndim < 2:
      continue
    same = [b for b in names[i + 1:] if np.shape(weights[b]) == np.shape(weights[a])
            and np.array_equal(weights[a], weights[b])]
    if same:
      groups.append([a] + same)
      seen.update(same)
  word = weights.get("mpnet.embeddings.word_embeddings.weight")
  pos = weights.get("mpnet.embeddings.position_embeddings.weight")
  prefix = word is not None and pos is not None and len(pos) <= len(word) and \
      np.array_equal(word[:len(pos)], pos)
  return {"groups": groups, "position_embeddings_equal_word_rows": bool(prefix)}


def strip(arm, ends):
  """An arm's JSON: per-step lists and the curve at the logged steps."""
  out = {k: v for k, v in arm.items() if k not in ("model", "initial")}
  out["curve"] = curve(arm["loss"], ends)
  return out


def code_version():
  """The checkout this tool runs (git HEAD, and whether the library's files differ from it)."""
  import subprocess
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  try:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                          text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "modeling", "pretraining",
                            "training", "data_utils"], cwd=root, capture_output=True,
                           text=True, check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return None
  return {"head": head, "library_changes": dirty.splitlines()}


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n\n")[0].replace("\n", " "),
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
  parser.add_argument("--output_dir", required=True,
                      help="The finished quickstart's directory (read only): its "
                      f"stages/{STAGE}.json command, logs/{STAGE}.log, records, config and "
                      "checkpoints.")
  parser.add_argument("--out", required=True,
                      help="JSON file to write (atomically) with every number measured.")
  parser.add_argument("--stage", default=STAGE,
                      help="The stage whose run is replayed (an --objective=mpnet "
                      "--mpnet_mode=mlm run).")
  parser.add_argument("--steps", type=int, default=None,
                      help="Steps of the replay, hf, null and hf_init arms (default: the run's "
                      "--train_steps; 0: none of them). The learning-rate schedule is always "
                      "the run's.")
  parser.add_argument("--exact_steps", type=int, default=50,
                      help="Steps of the dropout-0 comparison of ours and hf (0: skip).")
  parser.add_argument("--null_arm", action=argparse.BooleanOptionalAction, default=True,
                      help="Also run ours with other dropout masks (the yardstick of dropout "
                      "noise for replay - hf).")
  parser.add_argument("--hf_init_arm", action=argparse.BooleanOptionalAction, default=True,
                      help="Also run ours and hf from Hugging Face's own initialisation.")
  parser.add_argument("--heldout_batches", type=int, default=40,
                      help="Valid batches of the held-out loss of every final model "
                      "(reproduction/diagnostics.py: 40; 0: skip).")
  parser.add_argument("--full_logits", action="store_true",
                      help="hf: HF's own forward with labels (logits of every position) "
                      "instead of the LM head on the predicted positions only (same loss, "
                      "slower).")
  parser.add_argument("--threads", type=int, default=1,
                      help="torch's intra-op threads (1 runs fastest on a shared 2-core CPU).")
  parser.add_argument("--seed", type=int, default=0,
                      help="torch's seed (hf dropout masks, the hf_init arm's weights).")
  args = parser.parse_args()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
  t_start = time.time()
  log = lambda message: print(f"[{time.time() - t_start:7.1f}s] {message}", flush=True)

  import torch
  from absl import logging as absl_logging
  from data_utils import fileio
  absl_logging.set_verbosity(absl_logging.WARNING)
  torch.set_num_threads(args.threads)

  run_args, record = read_stage(args.output_dir, args.stage)
  f = parse_run_flags(run_args)
  if f.objective != "mpnet" or f.mpnet_mode != "mlm":
    sys.exit(f"{args.stage}: --objective={f.objective} --mpnet_mode={f.mpnet_mode}; this tool "
             "compares the mlm mode of --objective=mpnet")
  task = build_task(f)
  settings = task.optimizer_settings()
  check_optimizer(settings)
  steps = f.train_steps if args.steps is None else args.steps
  lr_at = lr_schedule(settings)
  log_path = os.path.join(args.output_dir, "logs", f"{args.stage}.log")
  logged = logged_curve(log_path)
  ends = [s for s, _ in logged]
  model_dir = f.model_dir
  ckpts = {}
  ckpt_dir = os.path.join(model_dir, "ckpt")
  if os.path.isdir(ckpt_dir):
    for name in os.listdir(ckpt_dir):
      match = re.fullmatch(r"ckpt-(\d+)\.index", name)
      if match:
        ckpts[int(match.group(1))] = os.path.join(ckpt_dir, f"ckpt-{match.group(1)}")
  saved = {}
  recorded = os.path.join(model_dir, "optimizer.json")
  if os.path.exists(recorded):
    with open(recorded, encoding="utf-8") as fh:
      saved = {k: v for k, v in json.load(fh).items() if k != "description"}
  result = {"output_dir": os.path.abspath(args.output_dir), "stage": args.stage,
            "code": code_version(),
            "command": record["command"], "flags": vars(args), "steps": steps,
            "optimizer": settings,
            "optimizer_matches_run": (not saved) or all(settings.get(k) == v
                                                         for k, v in saved.items()),
            "logged": logged, "logged_loss_is": "the mean over each host loop's steps "
            "(training/trainer.py: --steps_per_loop steps; the log's step is the loop's end)",
            "arms": {}, "comparisons": {}, "heldout": {}, "seconds": {}}
  log(f"{args.stage}: {len(logged)} logged losses, checkpoints {sorted(ckpts)}, "
      f"optimizer {settings['optimizer']} lr {settings['learning_rate']} warmup "
      f"{settings['warmup_steps']} / {settings['train_steps']}")

  def save():
    fileio.write_atomic(args.out, json.dumps(result, indent=1) + "\n")

  # The run's step-0 weights, rebuilt as the trainer builds them (seed --seed).
  from training.stepper import Stepper
  initial = Stepper(task).weights()
  result["initial_identical"] = identical_groups(initial)
  log(f"step-0 weights: {len(result['initial_identical']['groups'])} groups of bit-identical "
      f"tensors; position embeddings = word embedding rows: "
      f"{result['initial_identical']['position_embeddings_equal_word_rows']}")
  template = task.build_model()
  template.ensure_built()
  state0 = hf_state(template, initial)

  # The batches in HF's layout, built once: the inputs the run's step built at each step.
  count = max(steps, args.exact_steps)
  t = time.time()
  train_hf_batches = hf_batches(task, template, enumerate(train_batches(task, count)))
  result["seconds"]["hf_batches"] = time.time() - t
  log(f"{len(train_hf_batches)} batches in HF's layout ({time.time() - t:.0f} s)")
  valid = list(valid_batches(task, args.heldout_batches)) if args.heldout_batches else []
  valid_hf_batches = hf_batches(task, template, enumerate(valid))
  # HF's labels path and the gathered path give the same loss (step 0, no dropout).
  check = hf_model(task.model_config, state0, dropout=0.0).train()
  with torch.no_grad():
    full = float(hf_loss(check, train_hf_batches[0], full_logits=True))
    gathered = float(hf_loss(check, train_hf_batches[0]))
  result["hf_labels_vs_gathered_loss"] = [full, gathered]
  log(f"HF step-0 loss: with labels {full:.7f}, predicted positions only {gathered:.7f}")
  del check

  # exact: dropout 0, ours and hf.
  if args.exact_steps:
    task0 = build_task(f, dropout=0.0)
    ours0 = train_ours(task0, args.exact_steps, weights=initial, log=log, name="exact ours")
    hf0 = train_hf(hf_model(task.model_config, state0, dropout=0.0),
                   train_hf_batches[:args.exact_steps], settings, args.seed, log, "exact hf",
                   args.full_logits)
    result["arms"]["exact_ours"] = strip(ours0, ends)
    result["arms"]["exact_hf"] = strip(hf0, ends)
    cmp = compare(ours0["loss"], hf0["loss"])
    cmp["rel_max_diff"] = float(np.max(np.abs(np.subtract(ours0["loss"], hf0["loss"])) /
                                       np.abs(hf0["loss"])))
    cmp["grad_norm_max_rel_diff"] = float(np.max(
        np.abs(np.subtract(ours0["grad_norm"], hf0["grad_norm"])) / np.abs(hf0["grad_norm"])))
    result["comparisons"]["exact_ours_vs_hf"] = cmp
    result["seconds"]["exact"] = ours0["seconds"] + hf0["seconds"]
    log(f"exact (dropout 0, {args.exact_steps} steps): max |ours - hf| {cmp['max_abs_diff']:.3g},"
        f" mean {cmp['mean_abs_diff']:.3g}; grad norms within {cmp['grad_norm_max_rel_diff']:.3g}"
        " (relative)")
    save()

  if steps:
    # replay: the run itself.
    replay = train_ours(task, steps, log=log, name="replay", checkpoints=ckpts, lr_at=lr_at)
    mismatch = {k: float(np.max(np.abs(replay["initial"][k] - initial[k]))) for k in initial}
    result["arms"]["replay"] = strip(replay, ends)
    replay_curve = dict(result["arms"]["replay"]["curve"])
    vs_log = [(s, v, replay_curve[s], replay_curve[s] - v) for s, v in logged if s in replay_curve]
    result["comparisons"]["replay_vs_log"] = {
        "points": vs_log, "max_abs_diff": max((abs(d) for *_, d in vs_log), default=None),
        "log_rounding": 5e-5}
    result["seconds"]["replay"] = replay["seconds"]
    log(f"replay vs log: max |diff| {result['comparisons']['replay_vs_log']['max_abs_diff']} "
        f"over {len(vs_log)} logged loops (the log rounds to 4 decimals); step-0 weights "
        f"{max(mismatch.values()):.3g} from the rebuilt ones; lr max |diff| "
        f"{replay['lr_max_abs_diff']:.3g}")
    save()

    hf = train_hf(hf_model(task.model_config, state0), train_hf_batches[:steps], settings,
                  args.seed, log, "hf", args.full_logits)
    result["arms"]["hf"] = strip(hf, ends)
    result["comparisons"]["replay_vs_hf"] = compare(replay["loss"], hf["loss"])
    result["seconds"]["hf"] = hf["seconds"]
    if valid_hf_batches:
      result["heldout"]["replay"] = heldout_ours(task, replay["model"], valid)
      result["heldout"]["hf"] = heldout_hf(hf["model"], valid_hf_batches)
      log(f"held-out: ours {result['heldout']['replay']:.4f}, hf {result['heldout']['hf']:.4f}")
    save()

    if args.null_arm:
      null = train_ours(task, steps, weights=initial, dropout_shift=1_000_003, log=log,
                        name="null (ours, other dropout masks)")
      result["arms"]["null"] = strip(null, ends)
      result["comparisons"]["replay_vs_null"] = compare(replay["loss"], null["loss"])
      result["seconds"]["null"] = null["seconds"]
      if valid:
        result["heldout"]["null"] = heldout_ours(task, null["model"], valid)
      save()

    if args.hf_init_arm:
      torch.manual_seed(args.seed)
      init_model = hf_model(task.model_config)
      init_state = {k: v.detach().clone() for k, v in init_model.state_dict().items()}
      weights = our_weights(template, init_state)
      result["hf_init_identical"] = identical_groups(weights)
      ours_i = train_ours(task, steps, weights=weights, log=log, name="hf_init ours")
      hf_i = train_hf(init_model, train_hf_batches[:steps], settings, args.seed, log,
                      "hf_init hf", args.full_logits)
      result["arms"]["hf_init_ours"] = strip(ours_i, ends)
      result["arms"]["hf_init_hf"] = strip(hf_i, ends)
      result["comparisons"]["hf_init_ours_vs_hf"] = compare(ours_i["loss"], hf_i["loss"])
      result["comparisons"]["replay_vs_hf_init_ours"] = compare(replay["loss"], ours_i["loss"])
      result["seconds"]["hf_init"] = ours_i["seconds"] + hf_i["seconds"]
      if valid:
        result["heldout"]["hf_init_ours"] = heldout_ours(task, ours_i["model"], valid)
        result["heldout"]["hf_init_hf"] = heldout_hf(hf_i["model"], valid_hf_batches)
      save()

  result["seconds"]["total"] = time.time() - t_start
  save()
  for name, c in result["comparisons"].items():
    if name == "replay_vs_log":
      continue
    line = f"{name}: max |diff| {c['max_abs_diff']:.4g}, mean |diff| {c['mean_abs_diff']:.4g}"
    if "last" in c:
      last = c["last"]
      line += (f"; last {last['steps']} steps: {last['mean_a']:.4f} vs {last['mean_b']:.4f}, "
               f"diff {last['mean_diff']:+.4f} (se {last['se_blocks']:.4f} blocks, "
               f"{last['se_naive']:.4f} naive)")
    log(line)
  if result["heldout"]:
    log("held-out: " + ", ".join(f"{k} {v:.4f}" for k, v in result["heldout"].items()))
  log(f"wrote {args.out} ({result['seconds']['total']:.0f} s)")


if __name__ == "__main__":
  main()
