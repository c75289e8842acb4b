"""Input pipeline benchmark: pretraining examples per host CPU core; cores per accelerator.

At XLNet-Large's data settings (seq_len 512, reuse_len 256, num_predict 85, perm_size 256,
bi_data, 32 lanes), on records written here from the local corpus (Python's stdlib docstrings
repeated to --mb, data_utils/corpus.py) with a SentencePiece model trained on it
(data_utils/train_tokenizer.py) by data_utils/create_pretrain_data.py, one run measures:

  ours_expand    data_utils/pipeline.pretrain_dataset(expand_records=True): records parsed and
                 expanded on the CPU into the model's dense inputs (perm_mask [B, 512, 512],
                 target_mapping [B, 85, 512], ...). What the trainer uses (pretraining/task.py
                 calls it with the default, expand_records=True).
  ours_compact   the same with expand_records=False: parsed only (ids, stored permutation ranks,
                 target bits), for a step that expands inside the compiled computation.
  model_garden   Model Garden's XLNetPretrainDataLoader (tf-models-official, not a project
                 dependency: taken from --mg_path), its online sampling of targets and
                 permutation (word spans, permutation_size 256) on records of its own format
                 written by its create_xlnet_pretraining_data from the same corpus and model.
                 Skipped, with one line naming the pip command, when it cannot be imported.

Every row runs with tf.data's private thread pool and TensorFlow's intra/inter-op pools set to
--threads (default 1), so the per-core rate is honest; it is reported in CPU time (user +
system of this process: on a shared machine the time a neighbour held the core is not counted)
and in wall time. Each row is timed over --examples examples (ours_compact, far cheaper, over
COMPACT_FACTOR times as many) after warm-up, --rounds times in rotated order; figures are
medians over the rounds, ratios medians of the per-round ratios.

Then, from published figures (sources in bench/README.md), what one accelerator consumes at
this size and the host cores it needs per row = consumption / examples per core-second.

  python bench/input_pipeline.py [--quick] [--work_dir /tmp/xlnet_input_pipeline_bench]
"""

import argparse
import gc
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ_LEN, REUSE_LEN, NUM_PREDICT, PERM_SIZE, MEM_LEN = 512, 256, 85, 256, 384
BY = "bench/input_pipeline.py"
MG_PIP = ("pip install --no-deps --target {} tf-models-official==2.20.0 tf-keras==2.21.0 "
          "gin-config tensorflow-datasets etils toml promise tensorflow-metadata immutabledict")
ROWS = ("ours_expand", "ours_compact", "model_garden")
COMPACT_FACTOR = 16     # ours_compact times this many times --examples


# ---- published consumption ----------------------------------------------------------------------
def train_flops_bert_large(seq=SEQ_LEN, predictions=80, layers=24, d=1024, inner=4096,
                           vocab=30522):
  """BERT-Large training FLOPs per example by count (a multiply-add is 2; backward = 2x
  forward): projections, attention over `seq` keys, FFN, MLM head on `predictions` rows."""
  layer = 8 * seq * d * d + 4 * seq * d * inner + 4 * seq * seq * d
  head = 2 * predictions * (d * d + d * vocab)
  return 3 * (layers * layer + head)


def train_flops_xlnet_large(seq=SEQ_LEN, mem=MEM_LEN, predictions=NUM_PREDICT, layers=24,
                            d=1024, inner=4096, vocab=32000):
  """XLNet-Large two-stream PLM training FLOPs per example by count, as the release computes
  the step: k/v over memory + segment (klen), relative positions over klen + seq (rlen), the
  query stream's attention scattered to all `seq` query positions and gathered back
  (target_mapping einsums), its projections and FFN on the `predictions` rows, LM head."""
  klen, rlen = seq + mem, seq + mem + seq
  attention = 2 * seq * klen * d * 2 + 2 * seq * rlen * d          # ac + attn @ v, bd
  content = (2 * seq * d * d + 4 * klen * d * d + 2 * rlen * d * d + 2 * seq * d * d +
             attention + 4 * seq * d * inner)
  query = (4 * predictions * d * d + 4 * predictions * seq * d + attention +
           4 * predictions * d * inner)
  return 3 * (layers * (content + query) + 2 * predictions * d * vocab)


def consumption():
  """[(accelerator, examples/s at XLNet-Large seq 512, how it was derived)]."""
  paper = 8192 * 500_000 / (5.5 * 86400)           # examples/s of the whole 512-chip run
  xlnet, bert = train_flops_xlnet_large(), train_flops_bert_large()
  a100_bert = 210.0                                # BERT-Large seq 512, 1x A100 80GB, AMP
  h100_over_a100 = 989.4 / 312.0                   # dense bf16/fp16 tensor peaks
  h100 = a100_bert * h100_over_a100 * bert / xlnet
  tpu_core_util = paper / 1024 * xlnet / 61.5e12
  return [
      ("TPU v3 core (paper)", paper / 1024,
       f"8192 x 500K / 5.5 days / (512 chips x 2 cores); {xlnet / 1e12:.2f} TFLOP per example "
       f"= {tpu_core_util:.0%} of a core's 61.5 TFLOP/s"),
      ("TPU v3 chip (paper)", paper / 512, "the same per chip"),
      ("H100 SXM (estimate)", h100,
       f"BERT-Large 210 seq/s on one A100 x {h100_over_a100:.2f} (H100/A100 peak) x "
       f"{bert / 1e12:.2f} / {xlnet / 1e12:.2f} TFLOP per example (BERT-Large / XLNet-Large)")]


# ---- data ---------------------------------------------------------------------------------------
def _run(command, what):
  """Runs a project script with this checkout first on its path; one-line error on failure."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
             PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
  proc = subprocess.run([sys.executable, *command], env=env, capture_output=True, text=True)
  if proc.returncode:
    last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
    sys.exit(f"input_pipeline.py: {what} failed: {last}")
  return proc.stdout


def prepare(work, mb, vocab, lanes, seed):
  """Corpus, SentencePiece model and our records in `work` (each reused when complete);
  returns (text, sp_model, record_dir)."""
  from data_utils import corpus
  tag = f"{mb:g}mb"
  text = os.path.join(work, f"input-{tag}.txt")
  if not os.path.exists(text):
    corpus.write_corpus(text, max_bytes=int(mb * 1e6), repeat_to=int(mb * 1e6))
  prefix = os.path.join(work, f"spiece-{tag}-{vocab}-seed{seed}")
  _run([os.path.join(ROOT, "data_utils", "train_tokenizer.py"), f"--input_glob={text}",
        f"--model_prefix={prefix}", f"--vocab_size={vocab}", "--uncased", f"--seed={seed}"],
       "data_utils/train_tokenizer.py")
  script = os.path.join(ROOT, "data_utils", "create_pretrain_data.py")
  # the writer's lane flag: --num_lanes, formerly --bsz_per_host (kept as an alias)
  lane_flag = "num_lanes" if "--num_lanes" in _run([script, "--helpfull"], "--helpfull") \
      else "bsz_per_host"
  records = os.path.join(work, f"records-{tag}-{vocab}-seed{seed}-lanes{lanes}")
  _run([script, f"--input_glob={text}", f"--sp_model={prefix}.model", f"--output_dir={records}",
        f"--seq_len={SEQ_LEN}", f"--reuse_len={REUSE_LEN}", f"--perm_size={PERM_SIZE}",
        f"--num_predict={NUM_PREDICT}", f"--{lane_flag}={lanes}", "--bi_data", "--uncased",
        f"--seed={seed}"], "data_utils/create_pretrain_data.py")
  return text, prefix + ".model", records


def import_model_garden(mg_path):
  """Model Garden's loader and writer modules, or None (one line says why and what to run)."""
  if mg_path and os.path.isdir(mg_path) and mg_path not in sys.path:
    sys.path.append(mg_path)     # after the project's packages: it adds, never replaces
  try:
    from official.nlp.data import create_xlnet_pretraining_data, pretrain_dataloader
    from official.nlp.tools import tokenization
  except ImportError as e:
    print(f"model_garden: skipped (Model Garden's XLNetPretrainDataLoader not importable from "
          f"--mg_path={mg_path}: {e}); install it with: "
          f"{MG_PIP.format(mg_path or '/tmp/mg_lib')}")
    return None
  return create_xlnet_pretraining_data, pretrain_dataloader, tokenization


def prepare_model_garden(mg, work, text, sp_model, lanes, seed):
  """Records in Model Garden's format (its create_xlnet_pretraining_data.create_tfrecords, one
  replica per host, the same lanes), written into a temporary directory renamed when complete;
  returns the file pattern."""
  writer, _, tokenization = mg
  final = os.path.join(work, f"mg_{os.path.basename(sp_model)[:-len('.model')]}-lanes{lanes}")
  if not os.path.isdir(final):
    from absl import logging
    logging.set_verbosity(logging.WARNING)
    import numpy as np
    np.random.seed(seed)       # its script seeds numpy (file and document order), random the cuts
    random.seed(seed)
    tmp = tempfile.mkdtemp(prefix=os.path.basename(final) + ".tmp-", dir=work)
    try:
      writer.create_tfrecords(
          tokenizer=tokenization.FullSentencePieceTokenizer(sp_model), input_file_or_files=text,
          use_eod_token=True, do_lower_case=True, per_host_batch_size=lanes, seq_length=SEQ_LEN,
          reuse_length=REUSE_LEN, bi_data=True, num_cores_per_host=1, save_dir=tmp)
      os.replace(tmp, final)
    finally:
      shutil.rmtree(tmp, ignore_errors=True)     # gone once renamed; a failed write's leftovers
  return os.path.join(final, "*.tfrecord")


# ---- timing -------------------------------------------------------------------------------------
def _cpu_seconds():
  own = resource.getrusage(resource.RUSAGE_SELF)
  return own.ru_utime + own.ru_stime


def time_rows(makers, examples, rounds, warmup):
  """({row: [(examples, cpu s, wall s)] per round}, {row: bytes per example of an element}):
  each round builds each row's dataset (order rotated), draws `warmup` untimed batches, then
  times whole batches up to `examples[row]`."""
  names, timings, sizes = list(makers), {name: [] for name in makers}, {}
  for r in range(rounds):
    for name in names[r % len(names):] + names[:r % len(names)]:
      ds = makers[name]()
      it = iter(ds)
      for _ in range(warmup):
        batch = next(it)
      rows = int(next(iter(batch.values())).shape[0])
      sizes[name] = sum(t.shape.num_elements() * t.dtype.size for t in batch.values()) / rows
      steps = max(1, -(-examples[name] // rows))
      cpu, wall = _cpu_seconds(), time.perf_counter()
      for _ in range(steps):
        next(it)
      timings[name].append((steps * rows, _cpu_seconds() - cpu, time.perf_counter() - wall))
      del it, ds, batch        # its background threads stop before the next row is timed
      gc.collect()
  return timings, sizes


def summarise(timings, sizes):
  """Per row: median examples per CPU second and per wall second, bytes per example handed to
  the step; ratios between rows as the median of the per-round ratios (CPU time)."""
  out = {}
  for name, runs in timings.items():
    out[name] = {"examples_per_cpu_s": statistics.median(n / c for n, c, _ in runs),
                 "bytes_per_example": sizes[name],
                 "examples_per_wall_s": statistics.median(n / w for n, _, w in runs),
                 "cpu_over_wall": statistics.median(c / w for _, c, w in runs),
                 "rounds_examples_cpu_wall": runs}
  if "ours_expand" in timings and "model_garden" in timings:
    out["ours_expand_vs_model_garden_cpu"] = statistics.median(
        (n / c) / (m / d) for (n, c, _), (m, d, _) in zip(timings["ours_expand"],
                                                          timings["model_garden"]))
  return out


# ---- output -------------------------------------------------------------------------------------
def check_out(path):
  """--out may be new, or a JSON this bench wrote; anything else is refused before any work."""
  if os.path.isdir(path):
    sys.exit(f"input_pipeline.py: --out={path}: is a directory; pass a file name")
  if os.path.exists(path):
    try:
      with open(path, encoding="utf-8") as f:
        ours = json.load(f).get("by") == BY
    except (OSError, ValueError, AttributeError):
      ours = False
    if not ours:
      sys.exit(f"input_pipeline.py: --out={path}: exists and was not written by {BY}; pass "
               "another path (nothing was written)")


def table(results, accelerators):
  """The printed table: one line per measured row, then cores needed per accelerator."""
  lines = [f"{'row':14s} {'ex/s per core (CPU)':>20s} {'ex/s (wall)':>12s} {'CPU/wall':>9s} "
           f"{'bytes/example':>14s}"]
  rows = [r for r in ROWS if r in results]
  for r in rows:
    x = results[r]
    lines.append(f"{r:14s} {x['examples_per_cpu_s']:20,.0f} {x['examples_per_wall_s']:12,.0f} "
                 f"{x['cpu_over_wall']:9.2f} {x['bytes_per_example']:14,.0f}")
  if "ours_expand_vs_model_garden_cpu" in results:
    lines.append(f"ours_expand / model_garden (CPU time): "
                 f"{results['ours_expand_vs_model_garden_cpu']:.2f}x")
  lines.append("")
  lines.append(f"{'accelerator':22s} {'consumes ex/s':>13s} " +
               " ".join(f"{'cores: ' + r:>20s}" for r in rows))
  for name, rate, _ in accelerators:
    lines.append(f"{name:22s} {rate:13,.1f} " + " ".join(
        f"{rate / results[r]['examples_per_cpu_s']:20.4f}" for r in rows))
  return "\n".join(lines)


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      epilog="Model Garden's row needs tf-models-official where --mg_path points: " +
      MG_PIP.format("/tmp/mg_lib"))
  parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(),
                                                         "xlnet_input_pipeline_bench"),
                      help="where the corpus, the SentencePiece model and both record sets "
                      "are written (reused when complete); new, empty or this bench's own")
  parser.add_argument("--out", default=None, help="JSON of the results (default: "
                      "WORK_DIR/input_pipeline.json); written under a temporary name, then "
                      "renamed; an existing file is replaced only if this bench wrote it")
  parser.add_argument("--mb", type=float, default=3.0, help="corpus size in MB (the records "
                      "repeat: the timed examples are not bounded by it)")
  parser.add_argument("--vocab_size", type=int, default=8000, help="SentencePiece pieces")
  parser.add_argument("--lanes", type=int, default=32, help="the records' lanes (the writer's "
                      "--num_lanes) and rows per host step (the reader's bsz_per_host)")
  parser.add_argument("--num_core_per_host", type=int, default=1, help="replicas the host's "
                      "rows are split over: a dataset element is one replica's batch")
  parser.add_argument("--examples", type=int, default=32768, help="examples timed per row "
                      f"and round (whole batches; ours_compact: {COMPACT_FACTOR}x as many)")
  parser.add_argument("--rounds", type=int, default=3, help="rounds over all rows (order "
                      "rotated); medians are reported")
  parser.add_argument("--warmup", type=int, default=8, help="untimed batches before each "
                      "timed run (tracing, first reads)")
  parser.add_argument("--threads", type=int, default=1, help="tf.data private thread pool and "
                      "TensorFlow's intra/inter-op threads (1: per-core figures)")
  parser.add_argument("--rows", default=",".join(ROWS), help=f"rows to run, of {','.join(ROWS)}")
  parser.add_argument("--mg_path", default="/tmp/mg_lib", help="a directory holding "
                      "tf-models-official and its loader's imports (pip --target), appended to "
                      "sys.path inside this bench only")
  parser.add_argument("--seed", type=int, default=0, help="seed of the tokenizer, both "
                      "writers and Model Garden's online sampling")
  parser.add_argument("--quick", action="store_true", help="seconds, not minutes: a 1 MB "
                      "corpus, 2048 examples, 1 round, 2 warm-up batches")
  args = parser.parse_args(argv)
  if args.quick:
    args.mb, args.examples, args.rounds, args.warmup = 1.0, 2048, 1, 2
  rows = [r for r in args.rows.split(",") if r]
  bad = [r for r in rows if r not in ROWS]
  if bad or not rows:
    parser.error(f"--rows={args.rows}: unknown {', '.join(bad) or 'empty'}; of {','.join(ROWS)}")
  args.rows = rows
  for flag in ("mb", "vocab_size", "lanes", "num_core_per_host", "examples", "rounds", "warmup",
               "threads"):
    if getattr(args, flag) <= 0:
      parser.error(f"--{flag}={getattr(args, flag)}: must be positive")
  if args.lanes % 2 or args.lanes % args.num_core_per_host:
    parser.error(f"--lanes={args.lanes}: must be even (bi_data) and a multiple of "
                 f"--num_core_per_host={args.num_core_per_host}")
  args.out = args.out or os.path.join(args.work_dir, "input_pipeline.json")
  return args


def main():
  args = parse_args()
  sys.path.insert(0, ROOT)        # this checkout's packages, installed or not
  from data_utils import cli_app, fileio, outputs
  cli_app.quiet_imports("__main__")
  try:
    outputs.check_dir(args.work_dir, "--work_dir", "input_pipeline_bench")
  except ValueError as e:
    sys.exit(f"input_pipeline.py: {e}")
  check_out(args.out)
  outputs.claim_dir(args.work_dir, "input_pipeline_bench")

  text, sp_model, records = prepare(args.work_dir, args.mb, args.vocab_size, args.lanes,
                                    args.seed)
  import tensorflow as tf
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  tf.random.set_seed(args.seed)     # Model Garden's online sampling draws from the global seed
  from data_utils import pipeline

  def limited(ds):
    options = tf.data.Options()
    options.threading.private_threadpool_size = args.threads
    options.threading.max_intra_op_parallelism = 1
    return ds.with_options(options)

  def ours(expand):
    return lambda: limited(pipeline.pretrain_dataset(
        records, SEQ_LEN, REUSE_LEN, NUM_PREDICT, args.lanes, True, args.num_core_per_host,
        vocab_size=None, split="train", expand_records=expand, repeat=True, host_id=0,
        num_hosts=1, verify="size")[0])

  makers = {}
  if "ours_expand" in args.rows:
    makers["ours_expand"] = ours(True)
  if "ours_compact" in args.rows:
    makers["ours_compact"] = ours(False)
  mg = import_model_garden(args.mg_path) if "model_garden" in args.rows else None
  if mg:
    pattern = prepare_model_garden(mg, args.work_dir, text, sp_model, args.lanes, args.seed)
    loader = mg[1]
    config = loader.XLNetPretrainDataConfig(
        input_path=pattern, global_batch_size=args.lanes // args.num_core_per_host,
        is_training=True, seq_length=SEQ_LEN, max_predictions_per_seq=NUM_PREDICT,
        reuse_length=REUSE_LEN, permutation_size=PERM_SIZE, seed=args.seed)
    makers["model_garden"] = lambda: limited(loader.XLNetPretrainDataLoader(config).load())

  # parsing alone is ~25x cheaper than expanding: timed over more examples to last as long
  counts = {name: args.examples * (COMPACT_FACTOR if name == "ours_compact" else 1)
            for name in makers}
  results = summarise(*time_rows(makers, counts, args.rounds, args.warmup))
  accelerators = consumption()
  print(table(results, accelerators))
  for name, _, how in accelerators:
    print(f"  {name}: {how}")
  report = {"by": BY, "command": " ".join(sys.argv), "nproc": os.cpu_count(),
            "tensorflow": tf.__version__, "settings": {k: v for k, v in vars(args).items()},
            "results": results,
            "accelerators": [{"name": n, "examples_per_s": r, "derivation": h,
                              "cores_needed": {row: r / results[row]["examples_per_cpu_s"]
                                               for row in ROWS if row in results}}
                             for n, r, h in accelerators]}
  fileio.write_atomic_light(args.out, json.dumps(report, indent=1) + "\n")
  print(f"wrote {args.out}")


if __name__ == "__main__":
  sys.path.insert(0, ROOT)
  from data_utils import cli_app
  cli_app.quietly(main)
