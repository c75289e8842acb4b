"""Our side of tools/mpnet_hf_curve.py: a finished quickstart stage's recorded command, its
log and its task, rebuilt as pretraining/runner.py builds them, and our trainer's step replayed
on the run's batches (train_ours); the comparisons of two per-step loss curves.
The run's directory is only read, through data_utils/fileio (local paths or URLs).
"""

import dataclasses
import json
import math
import os
import re
import time

import numpy as np

from data_utils import fileio

TIED = ("lm_head.decoder.weight", "lm_head.decoder.bias")   # the embeddings, lm_head.bias
PATH_FLAGS = ("record_dir", "model_config_path", "model_dir")

# ---- the run: its command, its log, its task -------------------------------------------------
def read_stage(output_dir, stage):
  """The stage's recorded command (stages/STAGE.json) as the flags after the script, with the
  paths moved under `output_dir` if the quickstart directory has moved since."""
  record = json.loads(fileio.read_text(fileio.join(output_dir, "stages", f"{stage}.json")))
  command = record["command"]
  script = next(i for i, a in enumerate(command) if a.endswith("run_pretrain.py"))
  args = command[script + 1:]
  values = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
  old_root = fileio.dirname(fileio.dirname(values["model_dir"].rstrip("/")))
  new_root = output_dir.rstrip("/") if fileio.is_url(output_dir) else os.path.abspath(output_dir)
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
  with fileio.open_text(log_path) as f:
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


# ---- our arm, and comparing arms ----------------------------------------------------------------------------------
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
