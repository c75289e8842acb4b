"""Peak memory of one training step: XLNet-Base and XLNet-Large, sequence
length 128 and 512, batch 1..N, float32 / bfloat16 / float16, with and without --recompute;
from it the largest batch that fits a 16 GB GPU, next to the release's table.

What one measurement is. Each configuration runs in a process of its own. It builds the
task's model and optimizer through training/stepper.Stepper (the trainer's own step,
compiled with XLA as the entry scripts train: forward, backward, clipping and the update in
one computation): the XLNet classifier with the release's Adam on rows of random tokens with
uneven left padding (--tasks=classifier, the release's fine-tuning table), or XLNet's PLM
pretraining with memory carried from step to step (--tasks=pretrain). The child is stopped
once XLA has planned the step, unless its precision is in --run_steps and the plan is within
--max_run_gib: then two steps run and the second is timed.
XLA plans the memory of a compiled computation ahead of running it (buffer assignment): every
buffer the step reads, writes or keeps alive (weights, Adam's slots, the batch, gradients,
the activations kept for the backward pass, every temporary) gets an offset in one plan, and
its size is exact. The child dumps that plan (XLA_FLAGS --xla_dump_to, the step's module
only) and reads its "Total bytes used" (parameters, outputs and the preallocated temporary
block) and the temporary block alone: the step's memory on the device.

Why not the process's resident memory: measured on a CPU (XLNet-Base, seq 128), the
peak resident memory of a warmed-up step exceeds the resident memory before it by under 0.01
GiB at batch 1 and 2, float32 with or without --recompute: TensorFlow keeps the step's
buffers allocated between calls, so the step's memory is already in the steady state and a
"peak above steady" reads zero. The step's peak is there in the plan. On a GPU the child also
records TensorFlow's device statistics (tf.config.experimental.get_memory_info's peak over
one step, `gpu_peak_gib`).

Why it stands for a GPU's memory: XLA builds the same computation for a CPU and a GPU and its
buffer assignment follows the same liveness: what is alive at the step's peak (saved
activations, gradients, the optimizer's inputs) is the same set of tensors. What differs:
fusion decisions (a few temporaries), cuBLAS / cuDNN workspaces and the CUDA context
(together CONTEXT_GB below), and the CPU compiler's upcasting of bfloat16 / float16
operations to float32 (CPU_UPCASTS): a low-precision step that is only planned is planned
with those passes off (recorded as "cpu_upcasts": false), as a GPU with those units plans
it; a step that runs needs them, and its plan is then an upper bound.

Device estimate: the step's total, taken as a + b * batch through the two largest batches
measured; the largest batch with a + b * batch <= 16 GB - CONTEXT_GB ("*" in the table:
beyond the batches measured). A rerun with the same --out resumes: measured rows are kept.

  python bench/memory.py --out=/tmp/memory.json                   # the whole grid (hours)
  python bench/memory.py --sizes=base --seq=128 --batches=1,2     # one corner
"""

import argparse
import glob
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from data_utils import fileio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {   # the release's configs (xlnet_config.json of the released checkpoints)
    "base": dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072, n_token=32000),
    "large": dict(n_layer=24, d_model=1024, n_head=16, d_head=64, d_inner=4096, n_token=32000),
    "tiny": dict(n_layer=2, d_model=32, n_head=2, d_head=16, d_inner=64, n_token=1000),
}
TASKS = ("classifier", "pretrain")
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
# The release's README ("Memory Issue with GPUs"): the largest fine-tuning batch on one 16 GB
# GPU, TensorFlow 1.13, float32: {(size, seq_len): batch}.
RELEASE = {("base", 64): 120, ("base", 128): 56, ("base", 256): 24, ("base", 512): 8,
           ("large", 64): 16, ("large", 128): 8, ("large", 256): 2, ("large", 512): 1}
DEVICE_GB, CONTEXT_GB = 16.0, 1.0
GIB = 2.0 ** 30
# XLA's CPU passes that compute bfloat16 / float16 operations in float32 (a CPU lacks kernels
# for them; a GPU with those units does not): off when a low-precision step is only planned,
# so its plan is the one a GPU would make (measured: XLNet-Base, 128, batch 4, bfloat16: 2.27
# GiB with them, 1.96 without; float32 2.14).
CPU_UPCASTS = ("float-normalization-bf16", "change-op-data-type")


def _plan_files(dump_dir):
  """The training step's buffer-assignment dumps in `dump_dir` (a local temporary directory)."""
  return glob.glob(os.path.join(dump_dir, "*full_step*-buffer-assignment.txt"))


def xla_plan(dump_dir):
  """(total bytes, temporary bytes) of the newest training-step module XLA dumped in
  `dump_dir` (its buffer assignment: "Total bytes used" and the preallocated-temp block)."""
  plans = sorted(_plan_files(dump_dir), key=os.path.getmtime)
  if not plans:
    raise ValueError(f"{dump_dir}: XLA dumped no buffer assignment of the training step")
  total = temp = None
  with open(plans[-1], encoding="utf-8") as f:
    for line in f:
      match = re.match(r"allocation \d+: size (\d+), preallocated-temp", line)
      if match:
        temp = (temp or 0) + int(match.group(1))
      match = re.match(r"Total bytes used: (\d+)", line)
      if match:
        total = int(match.group(1))
  if total is None:
    raise ValueError(f"{plans[-1]}: no 'Total bytes used' line")
  return total, temp or 0


def _rows(batch, seq, vocab, rng):
  """Classifier rows: random tokens, row r left padded by (r % 2) * seq // 4 positions."""
  import numpy as np
  ids = rng.integers(9, vocab, [batch, seq]).astype(np.int32)
  mask = np.zeros([batch, seq], np.float32)
  seg = np.zeros([batch, seq], np.int32)
  for r in range(1, batch, 2):
    pad = seq // 4
    ids[r, :pad], mask[r, :pad], seg[r, :pad] = 5, 1.0, 4
  seg[:, -1] = 2
  return {"input_ids": ids, "seg_ids": seg, "input_mask": mask,
          "label": np.arange(batch, dtype=np.int32) % 2}


def plan_written(dump_dir):
  """True once XLA has dumped the training step's buffer assignment (its total line)."""
  for name in _plan_files(dump_dir):
    with open(name, encoding="utf-8", errors="replace") as f:
      if "Total bytes used:" in f.read():
        return True
  return False


def _pretrain_rows(batch, seq, num_predict, vocab, rng):
  """PLM pretraining rows (data_utils/pipeline.expand's features): random tokens, a random
  visibility mask and num_predict one-hot target rows per example. Only shapes matter to the
  plan; the values keep the loss finite when the step runs."""
  import numpy as np
  ids = rng.integers(9, vocab, [batch, seq]).astype(np.int32)
  seg = np.zeros([batch, seq], np.int32)
  seg[:, seq // 2:] = 1
  seg[:, -1] = 2
  positions = np.argsort(rng.random([batch, seq]), axis=1)[:, :num_predict]
  mapping = np.zeros([batch, num_predict, seq], np.float32)
  np.put_along_axis(mapping, positions[:, :, None], 1.0, axis=2)
  is_target = mapping.sum(1)
  perm_mask = (rng.random([batch, seq, seq]) < 0.5).astype(np.float32) * is_target[:, None, :]
  return {"input_ids": ids, "seg_ids": seg, "input_mask": np.zeros([batch, seq], np.float32),
          "perm_mask": perm_mask, "target_mapping": mapping,
          "target": np.take_along_axis(ids, positions, 1),
          "target_mask": np.ones([batch, num_predict], np.float32),
          "input_k": np.ones([batch, seq], np.float32), "input_q": is_target,
          "label": np.zeros([batch], np.int32)}


def _task(kind, size, seq, batch, recompute):
  """The trainer task of one measurement: the classifier (the release's fine-tuning table)
  or XLNet's PLM pretraining with memory carried (the release's ratios: reuse_len seq / 2,
  mem_len 3 seq / 4, num_predict seq / 6: 256 / 384 / 85 at 512), and rows for it."""
  import numpy as np
  from modeling.run_config import RunConfig
  from modeling.xlnet.config import XLNetConfig
  rng = np.random.default_rng(0)
  model_config = XLNetConfig(**SIZES[size])
  if kind == "classifier":
    from finetuning.classifier_task import ClassifierConfig, ClassifierTask
    config = ClassifierConfig(task_name="sst-2", learning_rate=2e-5, train_steps=10,
                              warmup_steps=0, train_batch_size=batch, max_seq_length=seq)
    return (ClassifierTask(config, model_config,
                           RunConfig(dropout=0.1, dropatt=0.1, recompute=recompute)),
            _rows(batch, seq, model_config.n_token, rng))
  from pretraining.task import PretrainConfig, PretrainTask
  reuse, mem, predict = seq // 2, 3 * seq // 4, round(seq / 6)
  config = PretrainConfig(seq_len=seq, reuse_len=reuse, num_predict=predict,
                          bsz_per_host=batch, bi_data=False, learning_rate=1e-4,
                          train_steps=10, warmup_steps=0)
  run_config = RunConfig(dropout=0.1, dropatt=0.1, recompute=recompute, mem_len=mem,
                         reuse_len=reuse)
  return (PretrainTask(config, model_config, run_config),
          _pretrain_rows(batch, seq, predict, model_config.n_token, rng))


def child(kind, size, seq, batch, precision, recompute, dump_dir):
  """One measurement (this process): the JSON result line. Prints "PARAMS n" before the
  first step, so a parent that only wants the plan can stop it once the plan is dumped."""
  import keras
  import numpy as np
  import tensorflow as tf
  keras.config.set_dtype_policy(POLICIES[precision])
  from training.stepper import Stepper
  task, rows = _task(kind, size, seq, batch, recompute)
  stepper = Stepper(task)
  params = int(sum(np.prod(v.shape) for v in stepper.model.trainable_variables))
  print(f"PARAMS {params}", flush=True)
  t = time.perf_counter()
  stepper.step(rows)                       # compilation (the plan is dumped), Adam's slots
  compile_s = time.perf_counter() - t
  gpu = bool(tf.config.list_physical_devices("GPU"))
  if gpu:                                  # a GPU: also TensorFlow's own device statistics
    tf.config.experimental.reset_memory_stats("GPU:0")
  t = time.perf_counter()
  out = stepper.step(rows)
  step_s = time.perf_counter() - t
  total, temp = xla_plan(dump_dir)
  result = {"task": kind, "size": size, "seq": seq, "batch": batch, "precision": precision,
            "recompute": recompute, "params": params, "step_gib": total / GIB,
            "temp_gib": temp / GIB, "step_seconds": step_s, "compile_seconds": compile_s,
            "loss": out["loss"],
            # the process's own peak (Python, TensorFlow, the model, two steps): a cross-check
            # that the plan's total is what the step holds, not a device figure
            "rss_peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB}
  if gpu:
    result["gpu_peak_gib"] = tf.config.experimental.get_memory_info("GPU:0")["peak"] / GIB
  return result


def run_child(kind, size, seq, batch, precision, recompute, run_steps=True, max_run_gib=None):
  """One configuration in a child process. The child is stopped as soon as XLA has planned
  the step (compilation) unless run_steps and the plan's total is within max_run_gib: the
  plan is all the memory figure needs, and a bfloat16 / float16 step on a CPU without those
  units, or a step near this machine's memory, would only cost time (step_seconds None)."""
  dump_dir = tempfile.mkdtemp(prefix="xla_plan_")
  cmd = [sys.executable, "-m", "bench.memory", "--child",
         f"{kind},{size},{seq},{batch},{precision},{int(recompute)},{dump_dir}"]
  flags = f"--xla_dump_to={dump_dir} --xla_dump_hlo_module_re=.*full_step.*"
  plan_only = not run_steps
  if plan_only and precision != "float32":
    flags += " --xla_disable_hlo_passes=" + ",".join(CPU_UPCASTS)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
             XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + flags).strip())
  config = {"task": kind, "size": size, "seq": seq, "batch": batch, "precision": precision,
            "recompute": recompute, "cpu_upcasts": not plan_only or precision == "float32"}
  try:
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
      t = time.perf_counter()
      proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, cwd=ROOT, env=env)
      stopped = decided = False
      while proc.poll() is None:
        time.sleep(0.5)
        if not decided and plan_written(dump_dir):
          decided = True
          too_big = max_run_gib is not None and xla_plan(dump_dir)[0] / GIB > max_run_gib
          if not run_steps or too_big:
            proc.kill()
            stopped = True
            proc.wait()
      seconds = time.perf_counter() - t
      out.seek(0)
      err.seek(0)
      stdout, stderr = out.read(), err.read()
      if stopped:
        params = [l for l in stdout.splitlines() if l.startswith("PARAMS ")]
        total, temp = xla_plan(dump_dir)
        return dict(config, params=int(params[-1].split()[1]), step_gib=total / GIB,
                    temp_gib=temp / GIB, step_seconds=None, compile_seconds=seconds)
  finally:
    shutil.rmtree(dump_dir, ignore_errors=True)
  lines = [l for l in stdout.splitlines() if l.startswith("RESULT ")]
  if proc.returncode or not lines:
    if proc.returncode and proc.returncode < 0:    # SIGKILL: the kernel's OOM killer, mostly
      return dict(config, error=f"killed by signal {-proc.returncode} (out of memory?)")
    return dict(config, error=(stderr.strip().splitlines() or ["failed"])[-1][:300])
  return dict(json.loads(lines[-1][7:]), cpu_upcasts=config["cpu_upcasts"])


def fit(rows):
  """{(task, size, seq, precision, recompute): {"a_gib", "b_gib", "params", "max_batch",
  "measured_up_to"}} from the measured rows. The step's memory is taken as a + b * batch
  through the two largest batches measured (the per-example cost where the limit is; at small
  batches a fixed peak, e.g. the gradients', can hide the slope; one batch: a = 0), and the
  largest batch is the largest with a + b * batch within DEVICE_GB - CONTEXT_GB."""
  groups = {}
  for r in rows:
    if "error" not in r:
      key = (r.get("task", "classifier"), r["size"], r["seq"], r["precision"], r["recompute"])
      groups.setdefault(key, {})[r["batch"]] = r
  out = {}
  for key, by_batch in groups.items():
    batches = sorted(by_batch)
    if len(batches) >= 2:
      (x0, x1) = batches[-2:]
      y0, y1 = by_batch[x0]["step_gib"], by_batch[x1]["step_gib"]
      b = (y1 - y0) / (x1 - x0)
      a = y1 - b * x1
    else:
      a, b = 0.0, by_batch[batches[0]]["step_gib"] / batches[0]
    room = DEVICE_GB * 1e9 / GIB - CONTEXT_GB - a
    out[key] = {"a_gib": float(a), "b_gib": float(b), "params": by_batch[batches[0]]["params"],
                "measured_up_to": batches[-1],
                # None: the step's memory does not grow with the batch (below the noise)
                "max_batch": (int(room // b) if room > 0 else 0) if b > 1e-3 else None}
  return out


def _columns():
  return [(p, rc) for p in POLICIES for rc in (False, True)]


def _markdown(fits, cell, rc_label, release=None):
  """One row per (task, size, seq) of `fits`, a column per precision and recompute, each
  cell cell(fit or None); release: a column of the release's figure first."""
  head = ["task, model, seq"] + (["release (fp32)"] if release else []) + [
      f"{p}{rc_label if rc else ''}" for p, rc in _columns()]
  lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
  for kind, size, seq in sorted({k[:3] for k in fits}):
    first = [f"{kind}, {size}, {seq}"] + ([release(kind, size, seq)] if release else [])
    cells = [cell(fits.get((kind, size, seq, p, rc))) for p, rc in _columns()]
    lines.append("| " + " | ".join(first + cells) + " |")
  return "\n".join(lines)


def _batch_cell(f):
  if f is None:
    return "-"
  n, m = f["max_batch"], f["measured_up_to"]
  return f">={m}" if n is None or n > 2 * m else f"{n}*" if n > m else str(n)


def table(fits):
  """Markdown: one row per (task, size, seq), the largest batch in 16 GB per precision and
  recompute; "*": beyond the largest batch measured (extrapolated along the fit); ">=m": the
  fit says more than twice the largest batch m measured, which fits: no figure is given, as a
  fixed peak (the update's) can hide the per-example cost at small batches."""
  return _markdown(fits, _batch_cell, " + recompute", release=lambda kind, size, seq: str(
      RELEASE.get((size, seq), "-") if kind == "classifier" else "-"))


def cost_table(fits):
  """Markdown: what each flag contributes, the fixed GiB (a) and GiB per example (b) of the
  fit, per (task, size, seq) and precision / recompute."""
  return _markdown(fits, lambda f: "-" if f is None else
                   f"{f['a_gib']:.2f} + {f['b_gib']:.3f}/ex", " + rc")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "),
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog=__doc__.split("\n\n", 1)[1])
  parser.add_argument("--tasks", default="classifier",
                      help="Comma list of classifier (fine-tuning, the release's table) and "
                      "pretrain (XLNet PLM with memory carried).")
  parser.add_argument("--sizes", default="base,large", help="Comma list of base, large, tiny.")
  parser.add_argument("--seq", default="128,512", help="Comma list of sequence lengths.")
  parser.add_argument("--batches", default="1,2", help="Comma list of batch sizes measured "
                      "(two or more: the step memory is fitted as a + b * batch).")
  parser.add_argument("--precisions", default="float32,bfloat16,float16",
                      help=f"Comma list of {', '.join(POLICIES)}.")
  parser.add_argument("--recompute", default="off,on", help="Comma list of off, on.")
  parser.add_argument("--run_steps", default="float32",
                      help="Comma list of precisions whose steps are also run and timed "
                      "(two steps; the plan alone is read for the others: on a CPU without "
                      "bfloat16 / float16 units those steps are slow and add nothing to the "
                      "memory figure). Empty: plans only.")
  parser.add_argument("--max_run_gib", type=float, default=12.0,
                      help="Run a step only when its plan needs at most this many GiB "
                      "(half of this 24 GiB machine by default); larger ones are planned only.")
  parser.add_argument("--out", help="JSON file for every measurement, the fits and the table.")
  parser.add_argument("--merge", help="Comma list of --out files of earlier runs (e.g. run "
                      "side by side): their rows in one table, written to --out; nothing runs.")
  parser.add_argument("--child", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    kind, size, seq, batch, precision, recompute, dump_dir = args.child.split(",")
    print("RESULT " + json.dumps(child(kind, size, int(seq), int(batch), precision,
                                       bool(int(recompute)), dump_dir)), flush=True)
    return
  split = lambda s: [x for x in s.split(",") if x]
  if args.merge:
    rows = {}
    for path in split(args.merge):
      for r in json.loads(fileio.read_text(path))["rows"]:
        if "error" not in r:
          rows[_config(r)] = r
    print(save(args.out, list(rows.values())))
    return
  for name, values, allowed in (("--tasks", split(args.tasks), TASKS),
                                ("--sizes", split(args.sizes), SIZES),
                                ("--precisions", split(args.precisions), POLICIES),
                                ("--recompute", split(args.recompute), ("off", "on"))):
    bad = [v for v in values if v not in allowed]
    if bad:
      sys.exit(f"bench/memory.py: {name}: {bad[0]!r} is not one of {', '.join(allowed)}")
  grid = [(kind, size, int(seq), int(batch), precision, rc == "on")
          for kind in split(args.tasks) for size in split(args.sizes) for seq in split(args.seq)
          for precision in split(args.precisions) for rc in split(args.recompute)
          for batch in split(args.batches)]
  rows, start = [], time.time()
  if args.out and fileio.exists(args.out):       # a rerun resumes: measured rows are kept
    rows = [r for r in json.loads(fileio.read_text(args.out))["rows"] if "error" not in r]
    measured = {_config(r) for r in rows}
    grid = [c for c in grid if c not in measured]
    print(f"{args.out}: {len(rows)} rows measured before, {len(grid)} to go", flush=True)
  for k, config in enumerate(grid):
    row = run_child(*config, run_steps=config[4] in split(args.run_steps),
                    max_run_gib=args.max_run_gib)
    rows.append(row)
    done = time.time() - start
    if "error" in row:
      what = row["error"]
    else:
      what = f"step {row['step_gib']:.2f} GiB (temporaries {row['temp_gib']:.2f}), " + (
          f"{row['step_seconds']:.1f} s/step" if row["step_seconds"] is not None
          else f"planned only in {row['compile_seconds']:.0f} s")
    eta = done / (k + 1) * (len(grid) - k - 1)
    print(f"[{k + 1}/{len(grid)}] {config}: {what} (ETA {eta:.0f} s)", flush=True)
    save(args.out, rows)
  print(save(args.out, rows))


def _config(row):
  return (row.get("task", "classifier"), row["size"], row["seq"], row["batch"],
          row["precision"], row["recompute"])


def save(out, rows):
  """The tables of `rows`; with `out`, everything written there (atomically)."""
  fits = fit(rows)
  text = table(fits) + "\n\nGiB: fixed + per example (the fit)\n\n" + cost_table(fits)
  if out:
    fileio.write_atomic(out, json.dumps(
        {"rows": rows, "fits": {",".join(map(str, k)): v for k, v in fits.items()},
         "table": text, "device_gb": DEVICE_GB, "context_gb": CONTEXT_GB}, indent=1) + "\n")
  return text


if __name__ == "__main__":
  main()
