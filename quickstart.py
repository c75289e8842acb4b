"""The main job: the whole system on this machine, offline, with a report at the end.

From the docstrings of Python's standard library it derives a pretraining corpus and three
task sets (module classification in the DBpedia CSV layout, SQuAD 2.0 JSON, RACE JSON), trains
a SentencePiece model, writes pretraining records, pretrains the same small model with three
objectives (plm, mlm, mpnet) on the same budget, fine-tunes those and the same models without
pretraining the same way, and writes a report (Markdown + plots). Every stage runs the entry
script a user would call; a rerun skips what is done. See reproduction/pipeline.py for the
stage list and reproduction/presets.py for the sizes.

    python quickstart.py [--preset small|tiny|base] [--output_dir output/quickstart]

Presets (reproduction/presets.py; docs/reproduction.md): tiny, every script and both model
families at toy size in about 1.5 minutes on 2 CPU cores (output/quickstart-tiny); small
(default), the main job, 17 to 27 minutes on 2 CPU cores (two 2-core VMs); base, a longer
run, about 4.5 hours on 2 CPU cores (estimated from measured step times;
output/quickstart-base). The run prints its ETA from the start.
"""

import os
import signal
import sys
import time

from absl import flags

from data_utils import cli_app
from data_utils import outputs
from reproduction import pipeline as pipeline_lib
from reproduction import report
from reproduction.presets import PRESETS

flags.DEFINE_enum("preset", "small", list(PRESETS), "Size of the run: tiny (toy sizes, about 1.5 "
                  "minutes), small (default, 17 to 27 minutes on 2 CPU cores), base (about 4.5 "
                  "hours on 2 CPU cores).")
flags.DEFINE_string("output_dir", "output/quickstart", "Where everything is written (a rerun "
                    "with the same flags resumes; another preset needs another directory). A "
                    "local directory: the quickstart is this machine's demo, with live logs; "
                    "the entry scripts it runs take gs:// paths themselves.")
flags.DEFINE_integer("seed", 0, "Seed of the data split, the derived sets, the tokenizer, the "
                     "records and pretraining (fine-tuning uses the preset's seeds).")
flags.DEFINE_integer("jobs", 2, "How many pretraining / fine-tuning runs share the machine at "
                     "once (each run seeds itself: the numbers do not depend on this; 2 suits "
                     "2 to 4 cores, where one run leaves cores idle while it starts up and "
                     "compiles).", lower_bound=1)
flags.DEFINE_bool("warm_start", True, "Run the stages' scripts in one process that imported "
                  "TensorFlow once, forked for each stage (data_utils/warm_start.py), instead of "
                  "a fresh Python per stage; the results are the same.")
FLAGS = flags.FLAGS


def _report(pipe, results, times):
  t0 = time.time()
  path = report.write_report(pipe, results, times)
  pipe.log("report", f"wrote {path} and {pipe.path('plots')}/*.png "
           f"({pipeline_lib.format_duration(time.time() - t0)})")


def main(argv):
  del argv
  start = time.time()
  preset = PRESETS[FLAGS.preset]
  output_dir = FLAGS.output_dir
  if "://" in output_dir:
    sys.exit(f"quickstart: --output_dir={output_dir}: must be a local directory (the entry "
             "scripts take gs:// paths; see docs/tpu-gpu.md)")
  if FLAGS.preset != "small" and output_dir == flags.FLAGS["output_dir"].default:
    output_dir = f"{output_dir}-{FLAGS.preset}"
  # A TERM (a scheduler, `kill`) stops the run like Ctrl-C: the running stage's process is
  # killed and its stage is not recorded as done.
  signal.signal(signal.SIGTERM, lambda *_: sys.exit("quickstart: terminated"))
  try:      # new, empty, or a quickstart's own (an earlier version's: it has stages/)
    if not os.path.isdir(os.path.join(output_dir, "stages")):
      outputs.check_dir(output_dir, "output_dir", outputs.QUICKSTART)
  except ValueError as e:
    sys.exit(f"quickstart: {e}")
  outputs.claim_dir(output_dir, outputs.QUICKSTART)
  pipe = pipeline_lib.Pipeline(preset, output_dir, seed=FLAGS.seed, jobs=FLAGS.jobs,
                               warm=FLAGS.warm_start)
  pipe.log("quickstart", f"preset {preset.name}: {len(pipe.stages())} stages -> {pipe.out}")
  try:
    _, times = pipe.run(finish=_report)
  except pipeline_lib.StageError as e:
    sys.exit(f"quickstart: {e}")
  out = pipe.out
  rel = os.path.relpath(out)
  rel = out if rel.startswith("..") else rel
  print(f"\nDone in {pipeline_lib.format_duration(time.time() - start)} (stage total "
        f"{pipeline_lib.format_duration(sum(times.values()))}). Outputs in {rel}/:\n"
        f"  report.md         the report: what the run shows, with plots/*.png\n"
        f"  results.json      the aggregated numbers\n"
        f"  data/             corpus.txt, classify/ (DBpedia CSV), squad/ (SQuAD 2.0), RACE/\n"
        f"  tokenizer/        spiece.model (XLNet symbols)\n"
        f"  records/          pretraining TFRecords (shared by plm, mlm, mpnet)\n"
        f"  models/           xlnet_config.json, mpnet_config.json\n"
        f"  pretrain/OBJ/     checkpoints, TensorBoard logs, export/ (per objective)\n"
        f"  finetune/TASK/ARM/seedN/   fine-tuned models, predictions\n"
        f"  logs/STAGE.log    each stage's command line and output\n"
        f"  stages/STAGE.json each finished stage's results (a rerun skips these stages)",
        flush=True)


if __name__ == "__main__":
  cli_app.run(main)
