"""Preprocessing benchmark (../shared/reference/results-and-benchmarks.md).

Input: ~9 MB of English text (Python's stdlib docstrings, repeated to size), one
sentence per line, blank lines between documents; a 4k-piece SentencePiece
model trained on it; seq_len 256, reuse_len 128, batch 8, num_predict 43, bi_data.
Reports, in one run: SentencePiece encoding alone (tokens/s, one core), the
whole writer end to end with 1 and 2 workers (input tokens/s), the same writer on Apache Beam's
in-process direct runner (data_utils/beam_writer.py; skipped with a note when apache_beam is not
installed, or with --no-beam), each run's speed
as a fraction of the encode runs just before and after it (median over the repeats), with
--script the same for create_pretrain_data.py as a whole process, and bytes per
stored record and per sequence position.

Every timed run is measured twice: in CPU time (user + system of this process and of the
children it waited for: the worker pool, or the create_pretrain_data.py process, by
getrusage(RUSAGE_CHILDREN)) and in wall time. Per-core rates and the `_cpu` ratios come from
CPU time, which on a shared machine does not count the time the neighbours held the core; the
`_wall` figures are reported too (on an idle core the two agree).

  taskset -c 0 python bench/preprocess.py --workers 1 --script [--work_dir /tmp/xlnet_bench]
"""

import argparse
import glob
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

from data_utils import corpus, record_format, tokenization, writer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PARAMS = record_format.RecordParams(seq_len=256, reuse_len=128, perm_size=128, num_predict=43,
                                    bsz_per_host=8, bi_data=True, uncased=True)


def _cpu_seconds():
  """User + system CPU time of this process and of its waited-for children."""
  own = resource.getrusage(resource.RUSAGE_SELF)
  kids = resource.getrusage(resource.RUSAGE_CHILDREN)
  return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def timed(func, *args, **kwargs):
  """Runs func; returns (CPU seconds, wall seconds)."""
  cpu, wall = _cpu_seconds(), time.perf_counter()
  func(*args, **kwargs)
  return _cpu_seconds() - cpu, time.perf_counter() - wall


def paired(encode, run, repeats):
  """Runs encode, then `repeats` times (run, encode); pairs each run with the mean of the encode
  runs just before and just after it: [((encode cpu, encode wall), (run cpu, run wall))]."""
  encodes, runs = [encode()], []
  for _ in range(repeats):
    runs.append(run())
    encodes.append(encode())
  return [(tuple((a + b) / 2 for a, b in zip(before, after)), r)
          for before, after, r in zip(encodes, encodes[1:], runs)]


def report(results, name, n_tokens, pairs):
  """PAIRS: [((encode cpu, encode wall), (run cpu, run wall))] -> rates (best run) and the
  median of the paired ratios, in CPU and in wall time."""
  for k, kind in enumerate(("cpu", "wall")):
    results[f"{name}_tokens_per_s_{kind}"] = n_tokens / min(r[k] for _, r in pairs)
    ratios = [e[k] / r[k] for e, r in pairs]
    results[f"{name}_vs_spm_encode_median_{kind}"] = statistics.median(ratios)
    results[f"{name}_vs_spm_encode_all_{kind}"] = " ".join(f"{x:.3f}" for x in ratios)
    results[f"{name}_vs_spm_encode_of_best_runs_{kind}"] = (min(e[k] for e, _ in pairs) /
                                                           min(r[k] for _, r in pairs))


def _beam_row(results, args, text, sp, n_tokens, encode_only):
  """The writer end to end on Beam's in-process direct runner (one process, one bundle at a
  time): what the pipeline costs next to the local runner's rows."""
  try:
    from data_utils import beam_writer  # noqa: PLC0415 (optional: the [beam] extra)
  except ImportError:
    beam_writer = None
  if beam_writer is None or beam_writer.beam is None:
    print("end_to_end_beam_direct_runner: skipped (apache_beam is not installed: "
          "pip install -e '.[beam]')")
    return
  out = os.path.join(args.work_dir, "records_beam")
  def run():
    shutil.rmtree(out, ignore_errors=True)
    return timed(beam_writer.create, text, sp, out, PARAMS, runner="DirectRunner",
                 shard_bytes=int(args.shard_mb * 1e6), progress=lambda m: None)
  report(results, "end_to_end_beam_direct_runner", n_tokens,
         paired(encode_only, run, args.repeats))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--work_dir", default="/tmp/xlnet_bench")
  parser.add_argument("--mb", type=float, default=9.0, help="input size in MB")
  parser.add_argument("--shard_mb", type=float, default=0.5)
  parser.add_argument("--workers", default="1,2")
  parser.add_argument("--repeats", type=int, default=3, help="runs per setting (best rate, "
                      "median ratio)")
  parser.add_argument("--beam", action=argparse.BooleanOptionalAction, default=True,
                      help="also time the writer on Beam's DirectRunner (needs apache_beam)")
  parser.add_argument("--script", action="store_true", help="also time data_utils/"
                      "create_pretrain_data.py as a whole process (start-up included)")
  args = parser.parse_args()
  os.makedirs(args.work_dir, exist_ok=True)
  text = os.path.join(args.work_dir, "input.txt")
  size = int(args.mb * 1e6)
  if not os.path.exists(text) or abs(os.path.getsize(text) - size) > size * 0.1:
    corpus.write_corpus(text, max_bytes=size, repeat_to=size)
  sp = os.path.join(args.work_dir, "sp4k.model")
  if not os.path.exists(sp):
    tokenization.train_sentencepiece([text], sp[:-6], 4000, lower=True)
  tok = tokenization.Tokenizer(sp, lower=True)
  with open(text, encoding="utf-8") as f:
    lines = [l for l in f.read().split("\n") if l.strip()]

  n_tokens = sum(map(len, tok.encode_lines(lines)))
  results = {"input_bytes": os.path.getsize(text), "tokens": n_tokens}
  encode_only = lambda: timed(tok.sp.Encode, lines, out_type=int)
  full_tokenizer = lambda: timed(tok.encode_lines, lines)
  for name, func in (("spm_encode", encode_only),
                     ("tokenizer_with_normalisation", full_tokenizer)):
    runs = [func() for _ in range(args.repeats)]
    results[f"{name}_tokens_per_s_cpu"] = n_tokens / min(c for c, _ in runs)
    results[f"{name}_tokens_per_s_wall"] = n_tokens / min(w for _, w in runs)
  # The machine may be shared: each end-to-end run is paired with the encode runs just before
  # and just after it (their mean), and the ratio of the pair is what is compared (median over
  # the repeats), in CPU and in wall time.
  for workers in [int(w) for w in args.workers.split(",")]:
    out = os.path.join(args.work_dir, f"records_w{workers}")
    def run():
      shutil.rmtree(out, ignore_errors=True)
      return timed(writer.create, text, sp, out, PARAMS, num_workers=workers,
                   shard_bytes=int(args.shard_mb * 1e6), progress=lambda m: None)
    report(results, f"end_to_end_{workers}_workers", n_tokens, paired(encode_only, run, args.repeats))
  if args.beam:
    _beam_row(results, args, text, sp, n_tokens, encode_only)
  if args.script:
    out = os.path.join(args.work_dir, "records_script")
    command = [sys.executable, os.path.join(ROOT, "data_utils", "create_pretrain_data.py"),
               f"--input_glob={text}", f"--sp_model={sp}", f"--output_dir={out}",
               f"--seq_len={PARAMS.seq_len}", f"--reuse_len={PARAMS.reuse_len}",
               f"--perm_size={PARAMS.perm_size}", f"--num_predict={PARAMS.num_predict}",
               f"--bsz_per_host={PARAMS.bsz_per_host}", "--bi_data", "--uncased",
               f"--shard_mb={args.shard_mb * 1e6 / (1 << 20)}", "--num_workers=1"]
    # Bytecode caching on for the child, as in any installed or once-run checkout (a harness
    # may set PYTHONDONTWRITEBYTECODE: then every process compiles data_utils and absl again);
    # the cache lives in work_dir, and one untimed run fills it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(args.work_dir, "pycache")
    def script():
      shutil.rmtree(out, ignore_errors=True)
      return timed(subprocess.run, command, check=True, stdout=subprocess.DEVNULL, env=env)
    script()
    report(results, "script_process_1_worker", n_tokens, paired(encode_only, script, args.repeats))
  infos = [json.load(open(p)) for p in glob.glob(os.path.join(out, "record_info-*.json"))]
  records = sum(i["num_records"] for i in infos)
  data_bytes = sum(i["bytes"] for i in infos)
  results.update(records=records, bytes_per_record=data_bytes / records,
                 bytes_per_position=data_bytes / records / PARAMS.seq_len)
  one = results.get("end_to_end_1_workers_tokens_per_s_wall")
  if one and "end_to_end_2_workers_tokens_per_s_wall" in results:
    results["speedup_2_workers_wall"] = results["end_to_end_2_workers_tokens_per_s_wall"] / one
  if one and "end_to_end_beam_direct_runner_tokens_per_s_wall" in results:
    results["beam_direct_runner_vs_1_worker_wall"] = (
        results["end_to_end_beam_direct_runner_tokens_per_s_wall"] / one)
  for key, value in results.items():
    print(f"{key:52s} {value:,.3f}" if isinstance(value, float) else
          f"{key:52s} {value:,}" if isinstance(value, int) else f"{key:52s} {value}")


if __name__ == "__main__":
  main()
