"""Peak memory of one fine-tuning step (issue #34): XLNet-Base and XLNet-Large, sequence
length 128 and 512, batch 1..N, float32 / bfloat16 / float16, with and without --recompute;
from it the largest batch that fits a 16 GB GPU, next to the release's table.

What one measurement is. Each configuration runs in a process of its own. It builds the
XLNet classifier and the release's Adam through training/stepper.Stepper (the trainer's own
step, compiled with XLA as run_classifier.py trains: forward, backward, clipping and the Adam
update in one computation), on rows of random tokens with uneven left padding, and runs steps.
XLA plans the memory of a compiled computation ahead of running it (buffer assignment): every
buffer the step reads, writes or keeps alive (weights, Adam's slots, the batch, gradients,
the activations kept for the backward pass, every temporary) gets an offset in one plan, and
its size is exact. The child dumps that plan (XLA_FLAGS --xla_dump_to, the step's module
only) and reads its "Total bytes used" (parameters, outputs and the preallocated temporary
block) and the temporary block alone: the step's memory on the device.

Why not the process's resident memory: measured here (2026-11-26, XLNet-Base, seq 128), the
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
(together CONTEXT_GB below), and the CPU's float normalisation, which may compute some
bfloat16 / float16 operations in float32 (so the low-precision rows are an upper bound).

Device estimate: the step's total, fitted as a + b * batch over the measured batches; the
largest batch with a + b * batch <= 16 GB - CONTEXT_GB.

  python bench/memory.py --out=bench/memory.json                  # the whole grid (hours)
  python bench/memory.py --sizes=base --seq=128 --batches=1,2     # one corner
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {   # the release's configs (xlnet_config.json of the released checkpoints)
    "base": dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072, n_token=32000),
    "large": dict(n_layer=24, d_model=1024, n_head=16, d_head=64, d_inner=4096, n_token=32000),
    "tiny": dict(n_layer=2, d_model=32, n_head=2, d_head=16, d_inner=64, n_token=1000),
}
POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
# The release's README ("Memory Issue with GPUs"): the largest fine-tuning batch on one 16 GB
# GPU, TensorFlow 1.13, float32: {(size, seq_len): batch}.
RELEASE = {("base", 64): 120, ("base", 128): 56, ("base", 256): 24, ("base", 512): 8,
           ("large", 64): 16, ("large", 128): 8, ("large", 256): 2, ("large", 512): 1}
DEVICE_GB, CONTEXT_GB = 16.0, 1.0
GIB = 2.0 ** 30


def xla_plan(dump_dir):
  """(total bytes, temporary bytes) of the newest training-step module XLA dumped in
  `dump_dir` (its buffer assignment: "Total bytes used" and the preallocated-temp block)."""
  import glob
  plans = sorted(glob.glob(os.path.join(dump_dir, "*full_step*-buffer-assignment.txt")),
                 key=os.path.getmtime)
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
  import glob
  for name in glob.glob(os.path.join(dump_dir, "*full_step*-buffer-assignment.txt")):
    with open(name, encoding="utf-8", errors="replace") as f:
      if "Total bytes used:" in f.read():
        return True
  return False


def child(size, seq, batch, precision, recompute, dump_dir):
  """One measurement (this process): the JSON result line. Prints "PARAMS n" before the
  first step, so a parent that only wants the plan can stop it once the plan is dumped."""
  import keras
  import numpy as np
  import tensorflow as tf
  keras.config.set_dtype_policy(POLICIES[precision])
  from finetuning.classifier_task import ClassifierConfig, ClassifierTask
  from modeling.run_config import RunConfig
  from modeling.xlnet.config import XLNetConfig
  from training.stepper import Stepper
  config = ClassifierConfig(task_name="sst-2", learning_rate=2e-5, train_steps=10,
                            warmup_steps=0, train_batch_size=batch, max_seq_length=seq)
  task = ClassifierTask(config, XLNetConfig(**SIZES[size]),
                        RunConfig(dropout=0.1, dropatt=0.1, recompute=recompute))
  stepper = Stepper(task)
  params = int(sum(np.prod(v.shape) for v in stepper.model.trainable_variables))
  print(f"PARAMS {params}", flush=True)
  rows = _rows(batch, seq, SIZES[size]["n_token"], np.random.default_rng(0))
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
  result = {"size": size, "seq": seq, "batch": batch, "precision": precision,
            "recompute": recompute, "params": params, "step_gib": total / GIB,
            "temp_gib": temp / GIB, "step_seconds": step_s, "compile_seconds": compile_s,
            "loss": out["loss"],
            # the process's own peak (Python, TensorFlow, the model, two steps): a cross-check
            # that the plan's total is what the step holds, not a device figure
            "rss_peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB}
  if gpu:
    result["gpu_peak_gib"] = tf.config.experimental.get_memory_info("GPU:0")["peak"] / GIB
  return result


def run_child(size, seq, batch, precision, recompute, run_steps=True, max_run_gib=None):
  """One configuration in a child process. The child is stopped as soon as XLA has planned
  the step (compilation) unless run_steps and the plan's total is within max_run_gib: the
  plan is all the memory figure needs, and a bfloat16 / float16 step on a CPU without those
  units, or a step near this machine's memory, would only cost time (step_seconds None)."""
  dump_dir = tempfile.mkdtemp(prefix="xla_plan_")
  cmd = [sys.executable, "-m", "bench.memory", "--child", f"{size},{seq},{batch},{precision},"
         f"{int(recompute)},{dump_dir}"]
  flags = f"--xla_dump_to={dump_dir} --xla_dump_hlo_module_re=.*full_step.*"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
             XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + flags).strip())
  config = {"size": size, "seq": seq, "batch": batch, "precision": precision,
            "recompute": recompute}
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
    return dict(config, error=(stderr.strip().splitlines() or ["failed"])[-1][:300])
  return json.loads(lines[-1][7:])


def fit(rows):
  """{(size, seq, precision, recompute): {"a_gib", "b_gib", "params", "max_batch"}} from the
  measured rows: the step's memory a + b * batch (least squares; one batch: a = 0), and the
  largest batch with a + b * batch within DEVICE_GB - CONTEXT_GB."""
  import numpy as np
  groups = {}
  for r in rows:
    if "error" not in r:
      groups.setdefault((r["size"], r["seq"], r["precision"], r["recompute"]), []).append(r)
  out = {}
  for key, rs in groups.items():
    x = np.array([r["batch"] for r in rs], float)
    y = np.array([r["step_gib"] for r in rs], float)
    if len(set(x)) >= 2:
      b, a = np.polyfit(x, y, 1)
    else:
      a, b = 0.0, float(y[0] / x[0])
    room = DEVICE_GB * 1e9 / GIB - CONTEXT_GB - a
    out[key] = {"a_gib": float(a), "b_gib": float(b), "params": rs[0]["params"],
                # None: the step's memory does not grow with the batch (below the noise)
                "max_batch": (int(room // b) if room > 0 else 0) if b > 0 else None}
  return out


def table(fits):
  """Markdown: one row per (size, seq), the largest batch per precision and recompute."""
  lines = ["| model, seq | release (fp32) | " + " | ".join(
      f"{p}{' + recompute' if rc else ''}" for p in POLICIES for rc in (False, True)) + " |",
      "|---" * (2 + 2 * len(POLICIES)) + "|"]
  for size, seq in sorted({(k[0], k[1]) for k in fits}):
    found = [fits.get((size, seq, p, rc), {}).get("max_batch") for p in POLICIES
             for rc in (False, True)]
    cells = ["-" if n is None else str(n) for n in found]
    lines.append(f"| {size}, {seq} | {RELEASE.get((size, seq), '-')} | " + " | ".join(cells)
                 + " |")
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "),
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog=__doc__.split("\n\n", 1)[1])
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
  parser.add_argument("--child", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    size, seq, batch, precision, recompute, dump_dir = args.child.split(",")
    print("RESULT " + json.dumps(child(size, int(seq), int(batch), precision,
                                       bool(int(recompute)), dump_dir)), flush=True)
    return
  split = lambda s: [x for x in s.split(",") if x]
  for name, values, allowed in (("--sizes", split(args.sizes), SIZES),
                                ("--precisions", split(args.precisions), POLICIES),
                                ("--recompute", split(args.recompute), ("off", "on"))):
    bad = [v for v in values if v not in allowed]
    if bad:
      sys.exit(f"bench/memory.py: {name}: {bad[0]!r} is not one of {', '.join(allowed)}")
  grid = [(size, int(seq), int(batch), precision, rc == "on")
          for size in split(args.sizes) for seq in split(args.seq)
          for precision in split(args.precisions) for rc in split(args.recompute)
          for batch in split(args.batches)]
  rows, start = [], time.time()
  for k, config in enumerate(grid):
    row = run_child(*config, run_steps=config[3] in split(args.run_steps),
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
  fits = fit(rows)
  text = table(fits)
  print(text)
  if args.out:
    from data_utils import fileio
    fileio.write_atomic(args.out, json.dumps(
        {"rows": rows, "fits": {",".join(map(str, k)): v for k, v in fits.items()},
         "table": text, "device_gb": DEVICE_GB, "context_gb": CONTEXT_GB}, indent=1) + "\n")


if __name__ == "__main__":
  main()
