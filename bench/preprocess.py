"""Preprocessing benchmark (../shared/reference/results-and-benchmarks.md).

Input: ~9 MB of English text (Python's stdlib docstrings, repeated to size), one
sentence per line, blank lines between documents; a 4k-piece SentencePiece
model trained on it; seq_len 256, reuse_len 128, batch 8, num_predict 43, bi_data.
Reports, in one run: SentencePiece encoding alone (tokens/s, one core), the
whole writer end to end with 1 and 2 workers (input tokens/s), each run's speed
as a fraction of an encode run just before it (median over the repeats), with
--script the same for create_pretrain_data.py as a whole process, and bytes per
stored record and per sequence position.

  taskset -c 0 python bench/preprocess.py --workers 1 --script [--work_dir /tmp/xlnet_bench]
"""

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from data_utils import corpus, record_format, tokenization, writer  # noqa: E402

PARAMS = record_format.RecordParams(seq_len=256, reuse_len=128, perm_size=128, num_predict=43,
                                    bsz_per_host=8, bi_data=True, uncased=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--work_dir", default="/tmp/xlnet_bench")
  parser.add_argument("--mb", type=float, default=9.0, help="input size in MB")
  parser.add_argument("--shard_mb", type=float, default=0.5)
  parser.add_argument("--workers", default="1,2")
  parser.add_argument("--repeats", type=int, default=3, help="runs per setting (best rate, "
                      "median ratio)")
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

  best = lambda f: min(f() for _ in range(args.repeats))
  def encode_only():
    t = time.perf_counter()
    tok.sp.Encode(lines, out_type=int)
    return time.perf_counter() - t
  def full_tokenizer():
    t = time.perf_counter()
    tok.encode_lines(lines)
    return time.perf_counter() - t
  n_tokens = sum(map(len, tok.encode_lines(lines)))
  results = {"input_bytes": os.path.getsize(text), "tokens": n_tokens,
             "spm_encode_tokens_per_s": n_tokens / best(encode_only),
             "tokenizer_with_normalisation_tokens_per_s": n_tokens / best(full_tokenizer)}
  # The machine may be shared: each end-to-end run is paired with an encode run just before it,
  # and the ratio of the pair is what is compared (median over the repeats).
  for workers in [int(w) for w in args.workers.split(",")]:
    out = os.path.join(args.work_dir, f"records_w{workers}")
    def run():
      shutil.rmtree(out, ignore_errors=True)
      t = time.perf_counter()
      writer.create(text, sp, out, PARAMS, num_workers=workers,
                    shard_bytes=int(args.shard_mb * 1e6), progress=lambda m: None)
      return time.perf_counter() - t
    pairs = [(encode_only(), run()) for _ in range(args.repeats)]
    results[f"end_to_end_{workers}_workers_tokens_per_s"] = n_tokens / min(r for _, r in pairs)
    results[f"end_to_end_{workers}_workers_vs_spm_encode_median"] = statistics.median(
        e / r for e, r in pairs)
  if args.script:
    out = os.path.join(args.work_dir, "records_script")
    command = [sys.executable, os.path.join(ROOT, "data_utils", "create_pretrain_data.py"),
               f"--input_glob={text}", f"--sp_model={sp}", f"--output_dir={out}",
               f"--seq_len={PARAMS.seq_len}", f"--reuse_len={PARAMS.reuse_len}",
               f"--perm_size={PARAMS.perm_size}", f"--num_predict={PARAMS.num_predict}",
               f"--bsz_per_host={PARAMS.bsz_per_host}", "--bi_data", "--uncased",
               f"--shard_mb={args.shard_mb * 1e6 / (1 << 20)}", "--num_workers=1"]
    def script():
      shutil.rmtree(out, ignore_errors=True)
      t = time.perf_counter()
      subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
      return time.perf_counter() - t
    pairs = [(encode_only(), script()) for _ in range(args.repeats)]
    results["script_process_1_worker_tokens_per_s"] = n_tokens / min(r for _, r in pairs)
    results["script_process_vs_spm_encode_median"] = statistics.median(e / r for e, r in pairs)
  infos = [json.load(open(p)) for p in glob.glob(os.path.join(out, "record_info-*.json"))]
  records = sum(i["num_records"] for i in infos)
  data_bytes = sum(i["bytes"] for i in infos)
  results.update(records=records, bytes_per_record=data_bytes / records,
                 bytes_per_position=data_bytes / records / PARAMS.seq_len)
  one = results.get("end_to_end_1_workers_tokens_per_s")
  if one and "end_to_end_2_workers_tokens_per_s" in results:
    results["speedup_2_workers"] = results["end_to_end_2_workers_tokens_per_s"] / one
  for key, value in results.items():
    print(f"{key:45s} {value:,.3f}" if isinstance(value, float) else f"{key:45s} {value:,}")


if __name__ == "__main__":
  main()
