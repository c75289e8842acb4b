"""Preprocessing benchmark (../shared/reference/results-and-benchmarks.md).

Input: ~9 MB of English text (Python's stdlib docstrings, repeated to size), one
sentence per line, blank lines between documents; a 4k-piece SentencePiece
model trained on it; seq_len 256, reuse_len 128, batch 8, num_predict 43, bi_data.
Reports, in one run: SentencePiece encoding alone (tokens/s, one core), the
whole writer end to end with 1 and 2 workers (input tokens/s), and bytes per
stored record and per sequence position.

  python bench/preprocess.py [--work_dir /tmp/xlnet_bench] [--mb 9]
"""

import argparse
import glob
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from data_utils import corpus, record_format, tokenization, writer  # noqa: E402

PARAMS = record_format.RecordParams(seq_len=256, reuse_len=128, perm_size=128, num_predict=43,
                                    bsz_per_host=8, bi_data=True, uncased=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--work_dir", default="/tmp/xlnet_bench")
  parser.add_argument("--mb", type=float, default=9.0, help="input size in MB")
  parser.add_argument("--shard_mb", type=float, default=0.5)
  parser.add_argument("--workers", default="1,2")
  parser.add_argument("--repeats", type=int, default=3, help="best of N runs per setting")
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
  for workers in [int(w) for w in args.workers.split(",")]:
    out = os.path.join(args.work_dir, f"records_w{workers}")
    def run():
      shutil.rmtree(out, ignore_errors=True)
      t = time.perf_counter()
      writer.create(text, sp, out, PARAMS, num_workers=workers,
                    shard_bytes=int(args.shard_mb * 1e6), progress=lambda m: None)
      return time.perf_counter() - t
    results[f"end_to_end_{workers}_workers_tokens_per_s"] = n_tokens / best(run)
  infos = [json.load(open(p)) for p in glob.glob(os.path.join(out, "record_info-*.json"))]
  records = sum(i["num_records"] for i in infos)
  data_bytes = sum(i["bytes"] for i in infos)
  results.update(records=records, bytes_per_record=data_bytes / records,
                 bytes_per_position=data_bytes / records / PARAMS.seq_len)
  one = results["end_to_end_1_workers_tokens_per_s"]
  results["end_to_end_vs_spm_encode"] = one / results["spm_encode_tokens_per_s"]
  if "end_to_end_2_workers_tokens_per_s" in results:
    results["speedup_2_workers"] = results["end_to_end_2_workers_tokens_per_s"] / one
  for key, value in results.items():
    print(f"{key:45s} {value:,.3f}" if isinstance(value, float) else f"{key:45s} {value:,}")


if __name__ == "__main__":
  main()
