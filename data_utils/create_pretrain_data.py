"""Turn raw text into XLNet pretraining TFRecords, factorization order included.

Input: text files (a glob, comma-separated globs allowed), one sentence per line,
a blank line between documents. Output in --output_dir: one TFRecord file and one
JSON record-info per shard, named after their parameters. The records serve any training layout
their lanes can (data_utils/lanes.py): written once for one GPU, they train on eight, or a pod.
Targets (span-based, whole words), segments A/B and the factorization order are
decided here, once; the training input pipeline only expands them.

  python data_utils/create_pretrain_data.py --input_glob='corpus/*.txt' \\
      --sp_model=spiece.model --output_dir=records --seq_len=512 --reuse_len=256 \\
      --num_lanes=32 --num_predict=85 --num_workers=8

A rerun skips shards already complete from the same text, SentencePiece model and settings,
rewrites shards whose text changed (or moved: a file added to or dropped from --input_glob) and
removes the shards no longer planned, so --output_dir ends as a run into an empty directory would
leave it (data_utils/rerun.py). --output_dir must be new, empty, or a records directory of this
project; anything else is refused before any work. --num_tasks/--task split the shards over
machines. The bytes written depend on --seed, never on the number of workers.
--input_glob, --sp_model and --output_dir may be local paths or tf.io.gfile URLs (gs://...):
each shard's records are written straight to --output_dir under a temporary name and renamed,
its record-info last, so a rerun skips finished shards and never sees a partial one. When every
shard of the split is complete, a manifest (manifest-SPLIT.TAG.json: counts, settings, input
fingerprints and each shard's sha256; data_utils/manifest.py) is written last.

--runner=DataflowRunner (FlinkRunner, SparkRunner; DirectRunner to try it locally) writes the
same shards, bytes and manifest on Apache Beam (pip install -e '.[beam]'):

  python data_utils/create_pretrain_data.py --runner=DataflowRunner \\
      --beam_pipeline_options='--project=P --region=R --temp_location=gs://B/tmp \\
      --setup_file=./pyproject.toml' --input_glob='gs://B/corpus/*.txt' \\
      --sp_model=gs://B/spiece.model --output_dir=gs://B/records ...
"""

import os
import sys

from absl import flags

from data_utils import cli_app, lanes, record_format, writer

flags.DEFINE_string("input_glob", None, "Text files: a glob, or several separated by commas.")
flags.DEFINE_string("sp_model", None, "SentencePiece model with the XLNet special symbols "
                    "(a released spiece.model, or one from data_utils/train_tokenizer.py).")
flags.DEFINE_string("output_dir", None, "Where the TFRecord shards and their record-info go.")
flags.DEFINE_enum("split", "train", ["train", "valid", "test"], "Split name in the file names.")
flags.DEFINE_integer("seq_len", 512, "Tokens per example.")
flags.DEFINE_integer("reuse_len", 256, "Tokens at the start of each example that the next "
                     "example of the same lane sees as memory.")
flags.DEFINE_integer("perm_size", None, "Factorization order is permuted within blocks of this "
                     "many tokens (default: reuse_len).")
flags.DEFINE_integer("num_predict", 85, "Targets per example (split between the two halves).")
flags.DEFINE_integer("num_lanes", 32, "Lanes: independent token streams the text is cut into "
                     "(consecutive records of a lane continue each other). Chosen for the data, "
                     "not the hardware: " + lanes.RULE + ". More lanes serve more layouts; "
                     "fewer keep longer continuous text per lane.")
flags.DEFINE_alias("bsz_per_host", "num_lanes")
flags.DEFINE_integer("num_core_per_host", 1, "Leave at 1. Earlier versions interleaved the "
                     "lanes per replica (C > 1 writes that layout again); every layout can read "
                     "records of either.")
flags.DEFINE_bool("bi_data", True, "Half of the lanes read the text backwards.")
flags.DEFINE_integer("mask_alpha", 6, "Context tokens per span group (K = alpha / beta).")
flags.DEFINE_integer("mask_beta", 1, "Predicted tokens per group.")
flags.DEFINE_enum("span_mode", "word", list(record_format.SPAN_MODES),
                  "word: spans of whole words; piece: the release's bug (n pieces); "
                  "single: single random tokens (the '- span-based prediction' ablation).")
flags.DEFINE_bool("uncased", False, "Lower-case the text (must match the SentencePiece model).")
flags.DEFINE_bool("use_eod", True, "Append <eod> at the end of each document.")
flags.DEFINE_integer("seed", 0, "Seed of every random choice (same seed, same bytes).")
flags.DEFINE_integer("num_tasks", 1, "Machines sharing the work.")
flags.DEFINE_integer("task", 0, "This machine's index in [0, num_tasks).")
flags.DEFINE_integer("num_workers", 1, "Processes on this machine.")
flags.DEFINE_float("shard_mb", 32, "Megabytes (MiB) of text per shard (cut at document ends).")
flags.DEFINE_string("runner", "local", "local: processes on this machine (--num_workers, "
                    "--num_tasks). Or an Apache Beam runner (pip install -e '.[beam]'): "
                    "DirectRunner (in-process, to try the pipeline), DataflowRunner, FlinkRunner, "
                    "SparkRunner; the same shards, bytes and manifest (data_utils/beam_writer.py).")
flags.DEFINE_string("beam_pipeline_options", "", "With a Beam --runner: Beam's pipeline options, "
                    "one string as on a command line, e.g. '--project=P --region=R "
                    "--temp_location=gs://B/tmp --setup_file=./pyproject.toml' (Dataflow), or "
                    "'--direct_running_mode=multi_processing --direct_num_workers=N' (DirectRunner "
                    "with N worker processes; in-process otherwise).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  for name in ("input_glob", "sp_model", "output_dir"):
    if not getattr(FLAGS, name):
      sys.exit(f"create_pretrain_data.py: --{name} is required")
  params = record_format.RecordParams(
      seq_len=FLAGS.seq_len, reuse_len=FLAGS.reuse_len,
      perm_size=FLAGS.perm_size or FLAGS.reuse_len, num_predict=FLAGS.num_predict,
      bsz_per_host=FLAGS.num_lanes, num_core_per_host=FLAGS.num_core_per_host,
      bi_data=FLAGS.bi_data, mask_alpha=FLAGS.mask_alpha, mask_beta=FLAGS.mask_beta,
      span_mode=FLAGS.span_mode, uncased=FLAGS.uncased, use_eod=FLAGS.use_eod)
  try:
    summary = _create(params)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"create_pretrain_data.py: {e}")
  rate = summary["tokens"] / max(summary["seconds"], 1e-9)
  print(f"done: {summary['shards']} shards written ({summary['already_complete']} were already "
        f"complete, {summary['skipped_shards']} too short), {summary['records']:,} records, "
        f"{summary['tokens']:,} tokens in {summary['seconds']:.1f}s ({rate:,.0f} tokens/s), "
        f"{summary['bad_lines']} undecodable lines skipped -> {FLAGS.output_dir}")


def _create(params):
  """The writer the --runner names: local processes, or Apache Beam (imported only then)."""
  common = dict(split=FLAGS.split, seed=FLAGS.seed, num_workers=FLAGS.num_workers,
                shard_bytes=int(FLAGS.shard_mb * (1 << 20)))
  if FLAGS.runner == "local":
    return writer.create(FLAGS.input_glob, FLAGS.sp_model, FLAGS.output_dir, params,
                         num_tasks=FLAGS.num_tasks, task=FLAGS.task, **common)
  if FLAGS.num_tasks != 1 or FLAGS.task != 0:
    raise ValueError(f"--num_tasks={FLAGS.num_tasks} --task={FLAGS.task}: with "
                     f"--runner={FLAGS.runner} the runner spreads the shards; leave both unset")
  from data_utils import beam_writer  # pylint: disable=import-outside-toplevel
  beam_writer.check(FLAGS.runner, FLAGS.beam_pipeline_options)      # (before any work)
  return beam_writer.create(FLAGS.input_glob, FLAGS.sp_model, FLAGS.output_dir, params,
                            runner=FLAGS.runner, pipeline_options=FLAGS.beam_pipeline_options,
                            **common)


def run(argv):
  """`absl.app.run(main)`, without importing absl.app (with absl.logging and pdb: a visible
  part of a writer process's start-up) when the command line holds only this script's own flags; any
  other flag (--help, --helpfull, --flagfile, absl.logging's...) or a bad value goes through
  absl.app as before (data_utils/cli_app.py: the help flags exit 0)."""
  cli_app.skip_keras_optional_imports()       # before main imports TensorFlow
  if not any(arg.startswith(("-h", "-?", "--help", "--flagfile", "--only_check_args"))
             for arg in argv[1:]):
    try:
      rest = FLAGS(argv)
    except flags.Error:
      FLAGS.unparse_flags()
    else:
      _exit(cli_app.quietly(main, rest))   # Ctrl-C, a closed stdout: one line / status
  cli_app.run(main, argv)


def _exit(code):
  """`sys.exit(code)`; on success (and without TensorFlow loaded) as os._exit(0) after the
  atexit handlers and a flush of stdout/stderr: every file is closed and every worker joined by
  then, and what is skipped is only the interpreter's teardown (deallocating every module and
  object one by one, mostly numpy's), memory the OS reclaims at once anyway."""
  if code not in (None, 0) or "tensorflow" in sys.modules:
    sys.exit(code)
  import atexit  # pylint: disable=import-outside-toplevel
  atexit._run_exitfuncs()  # pylint: disable=protected-access
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)  # pylint: disable=protected-access


if __name__ == "__main__":
  run(sys.argv)
