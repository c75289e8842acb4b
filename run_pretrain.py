"""Pretrain XLNet from the records of data_utils/create_pretrain_data.py.

Objectives: plm (XLNet's permutation LM), mlm (denoising with <mask>, the
"DAE + Transformer-XL" ablation row), mpnet (MPNet, with --model_config_path a
Hugging Face style MPNet config.json; --mpnet_mode / --mpnet_permute switch the
paper's ablations). One CPU, one or
many GPUs (--distribution_strategy), several hosts, or a TPU (--tpu=NAME).

  python run_pretrain.py --record_dir=records --model_config_path=xlnet_config.json \\
      --model_dir=runs/base --mem_len=384 --train_steps=500000 --learning_rate=4e-4

--seq_len, --reuse_len, --num_predict and --bi_data default to the records' values
(record_format.resolve_training_params; when --record_dir holds several record sets, the ones
given choose among them) and are checked against them when given. The layout is the run's:
--bsz_per_host (rows per host) defaults to the records' lanes and --num_core_per_host to the
strategy's replicas per host; any layout the records serve reads them (data_utils/lanes.py),
and a run resumed on another layout at the same global batch continues each lane's memory.

Held-out loss while it runs: records of held-out text written with the same settings
(create_pretrain_data.py --split=valid, into --record_dir or another directory), then
--eval_record_dir=DIR (--eval_split, --eval_batches): at every checkpoint the log and
TensorBoard (MODEL_DIR/eval) get the mean held-out losses and target accuracy, and MODEL_DIR/best
keeps the checkpoint of the lowest held-out loss (pretraining/evaluation.py).

The ablations of the XLNet paper are flags: --mem_len=0, records written with
--span_mode=single, --nobi_data, --nsp_weight=1.
"""

import sys

from absl import flags

from data_utils import cli_app
cli_app.quiet_imports(__name__)   # Ctrl-C during the imports below: one line, status 130
from modeling import flags as model_flags
from pretraining import flags as pretrain_flags
from pretraining import runner
from training import entry
from training import flags as training_flags

model_flags.define_model_flags(record_defaults=True)
flags.adopt_module_key_flags(model_flags)
training_flags.define_training_flags("pretrain", train_steps=1000)
flags.adopt_module_key_flags(training_flags)
pretrain_flags.define_pretrain_flags()
flags.adopt_module_key_flags(pretrain_flags)
flags.DEFINE_string("record_dir", None, "Directory of the records (create_pretrain_data.py "
                    "--output_dir).")
flags.DEFINE_string("model_dir", None, "Checkpoints, TensorBoard logs and the export go here; "
                    "a rerun resumes from its latest checkpoint.")
flags.DEFINE_string("output_dir", None, "Alias of --model_dir.")
flags.DEFINE_string("sp_model", None, "SentencePiece model the records were written with; when "
                    "given, the export also holds it (spiece.model + tokenizer_info.json: "
                    "fine-tuning from the export then uses it by default and refuses another) "
                    "and a SavedModel on raw text (MODEL_DIR/export/saved_model: sentence -> "
                    "sequence_output; XLNet objectives).")
flags.DEFINE_bool("uncased", False, "With --sp_model: lower-case the text (uncased records).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  model_dir, strategy = entry.prologue(
      "run_pretrain.py", FLAGS, required=["record_dir", "model_dir", "model_config_path"])
  try:
    runner.run(FLAGS, model_dir, strategy)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"run_pretrain.py: {e}")


if __name__ == "__main__":
  cli_app.run(main)
