"""Start-up benchmark: how long whole commands take to reach their first training step, to
finish, and to export, with XLA's persistent compilation cache cold and warm, next to the code
before the cache (another checkout) and to Hugging Face's PyTorch XLNet in eager mode.

Runs (each a subprocess, the command a user types; data built here in a temporary directory):
  tiny      run_classifier.py, 2 layers, d_model 32, seq 64, batch 8, 20 steps, --export_dir
  base      run_classifier.py, XLNet-Base sizes (12 layers, d_model 768, 12 heads of 64,
            d_inner 3072, n_token 32000), random weights, seq 128, --base_batch rows,
            --base_steps steps, --export_dir
  pretrain  run_pretrain.py, 2 layers, d_model 16, seq 32, batch 4, 20 steps (it exports its
            model at the end)
Every run trains with --steps_per_loop=1 into a fresh model_dir and checkpoints once, at its
last step; the classifier runs then evaluate their dev split (100 rows), as run_classifier.py
does at every checkpoint when the data has one, and export the best checkpoint.

Arms of a run:
  cold      this checkout, XLNET_COMPILE_CACHE = a fresh empty directory
  warm      this checkout, the same directory again (filled by `cold`)
  forked    as warm, the command run by `python -m data_utils.warm_start --connect` in a server
            that imported TensorFlow before the clock started (data_utils/warm_start.py: the
            quickstart's stages, a sweep's runs); its peak RSS is not the run's (not shown)
  previous  --previous_repo's checkout (code without the cache: its runs compile every time)
  hf        (tiny, base) transformers' XLNetForSequenceClassification, PyTorch eager on the
            CPU, the same sizes, batch and sequence length, random weights, AdamW, as many
            steps as ours
Within one repeat the arms run back to back, so ratios compare runs of one sitting.

What is timed, from the parent (the clock starts just before the child is started, so Python's
and TensorFlow's imports count):
  first step  the arrival of the first line "step N/T loss ..." (the trainer's step line,
              training/progress.py; printed after the first step with --steps_per_loop=1),
              or the HF child's line after its first optimizer step
  whole run   the child's exit
  export      from the switch to the best checkpoint ("using the best checkpoint ...",
              run_classifier.py), else from the last step or "saved" line, to the line that
              announces the finished export ("exported ...")
  first loop  the trainer's own figure for its first host loop ("N s for 1 step, with compile":
              tracing, XLA's compile or the cache's load, and the step), part of first step
  peak RSS    the child's maximum resident set (wait4's rusage; includes its children)
The child runs with PYTHONUNBUFFERED=1, so lines arrive as they are printed.

  python bench/startup.py --previous_repo=/tmp/prev                 # everything
  python bench/startup.py --runs=tiny,pretrain --previous_repo=/tmp/prev --repeats=3
(create the other checkout with `git worktree add /tmp/prev COMMIT`).
"""

import argparse
import datetime
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# as `python bench/startup.py`, this directory would come first on sys.path, where a benchmark's
# name could hide one of the project's packages (bench/serving.py hides `serving`)
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
  sys.path[0] = ROOT
STEP_LINE = re.compile(r"^step (\d+)/(\d+) loss (\S+)")     # reproduction/scheduler.py's
EXPORTED = re.compile(r"^exported ")
FIRST_LOOP = re.compile(r"([\d.]+)s for \d+ steps?, with compile")   # the trainer's own figure
NATIVE_ERROR = re.compile(r"^E\d{4} ")                     # TensorFlow's C++ error lines
HF_STEP = re.compile(r"^hf step (\d+)/(\d+) loss (\S+)")
RUNS = ("tiny", "base", "pretrain")
BASE = dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072, n_token=32000)
TINY = dict(n_layer=2, d_model=32, n_head=4, d_head=8, d_inner=64)
TINY_PRETRAIN = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32)
PT_SEQ, PT_REUSE, PT_NP, PT_BSZ = 32, 16, 5, 4
FILLER = ("the film was long and the story went on with many scenes of people talking about "
          "their day while music played softly in the background").split()

HF_CHILD = r"""
import sys, time
import torch
from transformers import XLNetConfig, XLNetForSequenceClassification
n_token, n_layer, d_model, n_head, d_inner, batch, seq, steps = map(int, sys.argv[1:9])
torch.manual_seed(0)
config = XLNetConfig(vocab_size=n_token, d_model=d_model, n_layer=n_layer, n_head=n_head,
                     d_inner=d_inner, num_labels=2)
model = XLNetForSequenceClassification(config)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0)
g = torch.Generator().manual_seed(0)
for step in range(1, steps + 1):
  ids = torch.randint(10, n_token, (batch, seq), generator=g)
  mask = torch.ones(batch, seq)
  labels = torch.randint(0, 2, (batch,), generator=g)
  out = model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids),
              labels=labels)
  out.loss.backward()
  torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
  opt.step()
  opt.zero_grad()
  print(f"hf step {step}/{steps} loss {out.loss.item():.4f}", flush=True)
"""


# ---- data -----------------------------------------------------------------------------------
def _sentence(rng, label):
  words = rng.sample(FILLER, 8)
  words.insert(rng.randrange(9), rng.choice(["excellent", "wonderful"] if label else
                                            ["terrible", "awful"]))
  return " ".join(words)


def build_data(work):
  """A toy SST-2 layout with its SentencePiece model, model configs, and tiny pretraining
  records; returns their paths."""
  from data_utils import corpus, record_format, tokenization, writer
  paths = {}
  d = os.path.join(work, "sst2")
  os.makedirs(d, exist_ok=True)
  rng = random.Random(0)
  for split, n in (("train", 400), ("dev", 100)):
    rows = [(_sentence(rng, l), l) for l in [rng.randrange(2) for _ in range(n)]]
    with open(os.path.join(d, f"{split}.tsv"), "w") as f:
      f.write("sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in rows))
  text = os.path.join(work, "sst2_text.txt")
  with open(os.path.join(d, "train.tsv")) as src, open(text, "w") as f:
    f.write(src.read().replace("\t", " "))
  paths["sst2"] = d
  paths["sst2_sp"] = tokenization.train_sentencepiece([text], os.path.join(work, "sst2_sp"), 120,
                                                      lower=True)
  vocab = tokenization.Tokenizer(paths["sst2_sp"], lower=True).vocab_size
  configs = {"tiny": dict(TINY, n_token=vocab), "base": BASE}
  # pretraining: a small corpus of stdlib docstrings, its own 800-piece model, records
  text = os.path.join(work, "corpus.txt")
  corpus.write_corpus(text, max_bytes=100_000)
  sp = tokenization.train_sentencepiece([text], os.path.join(work, "pt_sp"), 800, lower=True)
  params = record_format.RecordParams(seq_len=PT_SEQ, reuse_len=PT_REUSE, perm_size=PT_REUSE,
                                      num_predict=PT_NP, bsz_per_host=PT_BSZ, num_core_per_host=1,
                                      bi_data=False, uncased=True)
  paths["records"] = os.path.join(work, "records")
  writer.create(text, sp, paths["records"], params, shard_bytes=10**9, progress=lambda m: None)
  configs["pretrain"] = dict(TINY_PRETRAIN, n_token=tokenization.Tokenizer(sp, lower=True)
                             .vocab_size)
  for name, config in configs.items():
    paths[f"{name}_config"] = os.path.join(work, f"{name}_config.json")
    paths[f"{name}_sizes"] = config
    with open(paths[f"{name}_config"], "w") as f:
      json.dump(config, f)
  return paths


# ---- commands -------------------------------------------------------------------------------
def shape(run, args):
  """(batch, seq_len, steps) of a run."""
  return {"tiny": (8, 64, 20), "base": (args.base_batch, 128, args.base_steps),
          "pretrain": (PT_BSZ, PT_SEQ, 20)}[run]


def command(run, repo, paths, model_dir, args):
  batch, seq, steps = shape(run, args)
  common = [f"--model_config_path={paths[run + '_config']}", f"--model_dir={model_dir}",
            f"--train_steps={steps}", "--steps_per_loop=1", f"--save_every={steps}"]
  if run == "pretrain":
    return [sys.executable, os.path.join(repo, "run_pretrain.py"), *common,
            f"--record_dir={paths['records']}", f"--bsz_per_host={batch}", f"--seq_len={seq}",
            f"--reuse_len={PT_REUSE}", f"--num_predict={PT_NP}", f"--mem_len={PT_REUSE}"]
  return [sys.executable, os.path.join(repo, "run_classifier.py"), *common, "--task_name=sst-2",
          f"--data_dir={paths['sst2']}", f"--sp_model={paths['sst2_sp']}", "--uncased",
          f"--max_seq_length={seq}", f"--train_batch_size={batch}", "--learning_rate=1e-4",
          "--do_train", f"--export_dir={model_dir}/export"]


def hf_command(run, paths, args):
  batch, seq, steps = shape(run, args)
  s = paths[run + "_sizes"]
  return [sys.executable, "-c", HF_CHILD, *map(str, (
      s["n_token"], s["n_layer"], s["d_model"], s["n_head"], s["d_inner"], batch, seq, steps))]


# ---- one measurement ------------------------------------------------------------------------
def measure(cmd, cwd, env, timeout, step_line, log_path):
  """Runs `cmd`; returns {first_step_s, whole_s, export_s, peak_rss_mb, ok, tail}; its output,
  each line with its time since the start, goes to `log_path`."""
  lines = []                                # (seconds since start, line)
  t0 = time.monotonic()
  proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1,
                          start_new_session=True)

  def read():
    for line in proc.stdout:
      lines.append((time.monotonic() - t0, line.rstrip("\n")))
  reader = threading.Thread(target=read, daemon=True)
  reader.start()
  timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
  timer.start()
  _, status, usage = os.wait4(proc.pid, 0)
  whole = time.monotonic() - t0
  timer.cancel()
  proc.returncode = os.waitstatus_to_exitcode(status)
  reader.join(60)
  with open(log_path, "w") as f:
    f.write(" ".join(cmd) + "\n" + "".join(f"{t:8.2f} {l}\n" for t, l in lines))
  first = next(((t, l) for t, l in lines if step_line.match(l)), (None, ""))
  loop = FIRST_LOOP.search(first[1])
  export = None
  for i, (t, l) in enumerate(lines):
    if EXPORTED.match(l):
      # the export starts at the switch to the best checkpoint (run_classifier.py), else after
      # the last step or checkpoint line
      start = [t_ for t_, l_ in lines[:i] if l_.startswith("using the best")] or [
          t_ for t_, l_ in lines[:i] if STEP_LINE.match(l_) or l_.startswith("saved ")]
      export = t - start[-1] if start else None
      break
  return {"ok": proc.returncode == 0, "returncode": proc.returncode,
          "first_step_s": first[0], "whole_s": whole, "export_s": export,
          "first_loop_s": float(loop.group(1)) if loop else None,
          "peak_rss_mb": usage.ru_maxrss / 1024.0,
          "cache": next((l.split(":", 1)[1].strip() for _, l in lines
                         if l.strip().startswith("XLA programs:")), None),
          "native_errors": sum(1 for _, l in lines if NATIVE_ERROR.match(l)),
          "tail": [l for _, l in lines[-8:]] if proc.returncode else []}


def child_env(cache):
  env = {k: v for k, v in os.environ.items() if k not in ("XLNET_COMPILE_CACHE", "TF_XLA_FLAGS")}
  env["PYTHONUNBUFFERED"] = "1"
  env["XLNET_COMPILE_CACHE"] = cache
  return env


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=__doc__[__doc__.index("Runs ("):])
  p.add_argument("--runs", default=",".join(RUNS), help="comma-separated of " + ", ".join(RUNS))
  p.add_argument("--previous_repo", help="a checkout of the code before the change (its runs: "
                 "'previous'); none: that arm is left out")
  p.add_argument("--no_hf", action="store_true", help="leave out the Hugging Face eager arm")
  p.add_argument("--repeats", type=int, default=1, help="measurements of each arm (min/median)")
  p.add_argument("--base_batch", type=int, default=8, help="rows per step of the base run")
  p.add_argument("--base_steps", type=int, default=3, help="steps of the base run")
  p.add_argument("--timeout", type=float, default=3600, help="hang guard per run, seconds")
  p.add_argument("--work_dir", help="keep the data, caches and logs (each child's output, "
                 "timed) in a new directory under this one (default: a temporary directory, "
                 "removed at the end)")
  p.add_argument("--out", default=os.path.join(
      ROOT, "bench", f"startup-{datetime.date.today().isoformat()}.json"), help="JSON results")
  args = p.parse_args(argv)
  runs = [r.strip() for r in args.runs.split(",") if r.strip()]
  bad = [r for r in runs if r not in RUNS]
  if bad:
    p.error(f"--runs: {bad[0]!r} is not one of {', '.join(RUNS)}")
  if args.previous_repo and not os.path.isfile(os.path.join(args.previous_repo,
                                                            "run_classifier.py")):
    p.error(f"--previous_repo={args.previous_repo}: no run_classifier.py there")
  if args.work_dir:
    os.makedirs(args.work_dir, exist_ok=True)
  # a directory of this invocation's own, so caches start empty and model dirs fresh even in a
  # --work_dir used before
  work = tempfile.mkdtemp(prefix="startup-bench-", dir=args.work_dir)
  try:
    results = bench(runs, args, work)
  finally:
    if not args.work_dir:
      shutil.rmtree(work, ignore_errors=True)
  with open(args.out, "w") as f:
    json.dump(results, f, indent=1)
  print(table(results))
  print(f"\n(JSON: {args.out})")


def bench(runs, args, work):
  from data_utils import warm_start   # pylint: disable=import-outside-toplevel
  with warm_start.Launcher(child_env("off")) as launcher:
    return _bench(runs, args, work, launcher.address())


def _bench(runs, args, work, server):
  print(f"building data in {work} ...", file=sys.stderr)
  paths = build_data(os.path.join(work, "data"))
  samples = []                                   # one dict per measurement
  logs = os.path.join(work, "logs")
  os.makedirs(logs, exist_ok=True)
  n = 0
  for repeat in range(args.repeats):
    for run in runs:
      arms = []
      if args.previous_repo:
        arms.append(("previous", os.path.abspath(args.previous_repo), "off"))
      cache = os.path.join(work, f"cache-{run}-{repeat}")
      arms += [("cold", ROOT, cache), ("warm", ROOT, cache), ("forked", ROOT, cache)]
      for arm, repo, cache_dir in arms:
        n += 1
        model_dir = os.path.join(work, f"m{n}-{run}-{arm}")
        cmd = command(run, repo, paths, model_dir, args)
        if arm == "forked":
          cmd = [sys.executable, "-m", "data_utils.warm_start", "--connect", server, "--",
                 *cmd[1:]]
        r = measure(cmd, repo, child_env(cache_dir), args.timeout, STEP_LINE,
                    os.path.join(logs, f"{n:02d}-{run}-{arm}.log"))
        if arm == "forked":
          r["peak_rss_mb"] = None          # wait4 sees the client, not the forked run
        samples.append(dict(run=run, arm=arm, repeat=repeat, **r))
        _progress(samples[-1])
        shutil.rmtree(model_dir, ignore_errors=True)
      if run != "pretrain" and not args.no_hf:
        n += 1
        r = measure(hf_command(run, paths, args), work, child_env("off"), args.timeout, HF_STEP,
                    os.path.join(logs, f"{n:02d}-{run}-hf.log"))
        samples.append(dict(run=run, arm="hf", repeat=repeat, **r))
        _progress(samples[-1])
  return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "machine": _machine(), "argv": sys.argv, "root": ROOT,
          "previous_repo": args.previous_repo, "commits": _commits(args),
          "shapes": {r: dict(zip(("batch", "seq_len", "steps"), shape(r, args))) for r in runs},
          "sizes": {r: paths[r + "_sizes"] for r in runs},
          "logs": logs if args.work_dir else None,
          "samples": samples, "summary": summarize(samples)}


def _progress(s):
  f = lambda v: "-" if v is None else f"{v:.1f}"
  print(f"  {s['run']:8s} {s['arm']:8s} first step {f(s['first_step_s'])} s, whole "
        f"{f(s['whole_s'])} s, export {f(s['export_s'])} s, peak RSS {f(s['peak_rss_mb'])} MB"
        + ("" if s["ok"] else f"  FAILED ({s['returncode']}): {' | '.join(s['tail'][-3:])}"),
        file=sys.stderr, flush=True)


def _machine():
  import platform
  model = ""
  try:
    with open("/proc/cpuinfo") as f:
      model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
  except OSError:
    pass
  return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
          "load_avg": os.getloadavg()}


def _commits(args):
  def head(repo):
    r = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True,
                       text=True)
    dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "-uno"],
                           capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + ("+uncommitted" if dirty else "")
  out = {"ours": head(ROOT)}
  if args.previous_repo:
    out["previous"] = head(args.previous_repo)
  return out


# ---- summary --------------------------------------------------------------------------------
KEYS = ("first_step_s", "first_loop_s", "whole_s", "export_s", "peak_rss_mb")


def summarize(samples):
  """{run: {arm: {key: {min, median, n}}, "ratios": {...}}} over the successful samples;
  ratios are of medians."""
  out = {}
  for run in dict.fromkeys(s["run"] for s in samples):
    arms = {}
    for arm in dict.fromkeys(s["arm"] for s in samples if s["run"] == run):
      ok = [s for s in samples if s["run"] == run and s["arm"] == arm and s["ok"]]
      arms[arm] = {k: _stats([s[k] for s in ok if s[k] is not None]) for k in KEYS}
      arms[arm]["failed"] = sum(1 for s in samples if s["run"] == run and s["arm"] == arm
                                and not s["ok"])
    med = lambda arm, key: (arms.get(arm, {}).get(key) or {}).get("median")
    ratios = {}
    for a, b in (("cold", "previous"), ("warm", "previous"), ("warm", "cold"), ("cold", "hf"),
                 ("warm", "hf"), ("previous", "hf"), ("forked", "warm"), ("forked", "hf")):
      for key in ("first_step_s", "whole_s", "export_s"):
        if key == "export_s" and "hf" in (a, b):
          continue
        x, y = med(a, key), med(b, key)
        if x is not None and y and y >= 1.0:     # a ratio to milliseconds says nothing
          ratios[f"{a}/{b} {key[:-2]}"] = round(x / y, 3)
    out[run] = {"arms": arms, "ratios": ratios}
  return out


def _stats(values):
  if not values:
    return None
  return {"min": round(min(values), 2), "median": round(statistics.median(values), 2),
          "n": len(values)}


def table(results):
  summary = results["summary"]
  shapes = results["shapes"]
  lines = [f"{results['date']}, {results['machine']['cpu']} ({results['machine']['cores']} "
           f"cores), ours {results['commits'].get('ours')}, previous "
           f"{results['commits'].get('previous', '-')}; min / median of "
           f"{max((s['repeat'] for s in results['samples']), default=0) + 1} repeat(s)", "",
           "| run | cache | code | start -> first step s | of which first loop s | whole run s | "
           "export s | peak RSS MB |", "|---|---|---|---|---|---|---|---|"]
  code = {"cold": ("cold", "ours"), "warm": ("warm", "ours"), "previous": ("none", "previous"),
          "forked": ("warm", "ours, forked (warm_start)"), "hf": ("-", "HF PyTorch eager")}

  def cell(stats, digits=1):
    if not stats:
      return "-"
    if stats["n"] == 1 or stats["min"] == stats["median"]:
      return f"{stats['median']:.{digits}f}"
    return f"{stats['min']:.{digits}f} / {stats['median']:.{digits}f}"
  for run, s in summary.items():
    sh = shapes[run]
    label = f"{run} (batch {sh['batch']}, seq {sh['seq_len']}, {sh['steps']} steps)"
    for arm in ("previous", "cold", "warm", "forked", "hf"):
      if arm not in s["arms"]:
        continue
      a = s["arms"][arm]
      failed = f" ({a['failed']} failed)" if a["failed"] else ""
      lines.append(f"| {label} | {code[arm][0]} | {code[arm][1]}{failed} | "
                   f"{cell(a['first_step_s'])} | {cell(a['first_loop_s'])} | {cell(a['whole_s'])} | "
                   f"{cell(a['export_s'])} | "
                   f"{cell(a['peak_rss_mb'], 0)} |")
  lines += ["", "| run | ratio (of medians) | value |", "|---|---|---|"]
  for run, s in summary.items():
    for name, value in s["ratios"].items():
      lines.append(f"| {run} | {name} | {value:.2f} |")
  notes = sorted({(x["run"], x["arm"], re.sub(r" \(/.*\)$", "", x["cache"] or "-"),
                   x["native_errors"]) for x in results["samples"]
                  if x["cache"] or x["native_errors"]})
  if notes:
    lines += ["", "Compile cache as the runs reported it (their summary's 'XLA programs'), and "
              "TensorFlow C++ error lines (E....) in their output:"]
    lines += [f"- {run} {arm}: {cache}; {errors} C++ error line(s)"
              for run, arm, cache, errors in notes]
  return "\n".join(lines)


if __name__ == "__main__":
  main()
