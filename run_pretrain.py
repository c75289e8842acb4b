"""Pretrain XLNet from the records of data_utils/create_pretrain_data.py.

Objectives: plm (XLNet's permutation LM), mlm (denoising with <mask>, the
"DAE + Transformer-XL" ablation row), mpnet (MPNet, with --model_config_path a
Hugging Face style MPNet config.json; --mpnet_mode / --mpnet_permute switch the
paper's ablations). One CPU, one or
many GPUs (--distribution_strategy), several hosts, or a TPU (--tpu=NAME).

  python run_pretrain.py --record_dir=records --model_config_path=xlnet_config.json \\
      --model_dir=runs/base --mem_len=384 --train_steps=500000 --learning_rate=4e-4

--seq_len, --reuse_len, --num_predict, --bsz_per_host, --num_core_per_host and --bi_data
default to the records' values (record_format.resolve_training_params; when --record_dir holds
several record sets, the ones given choose among them) and are checked against them when given.

The ablations of the XLNet paper are flags: --mem_len=0, records written with
--span_mode=single, --nobi_data, --nsp_weight=1.
"""

import dataclasses
import sys

from absl import flags

from data_utils import cli_app
from data_utils import fileio
from data_utils import pipeline
from data_utils import record_format
from modeling import flags as model_flags
from modeling import mpnet
from serving import tasks as serving_tasks
from training import distribution
from training import entry
from training import flags as training_flags
from training.pretrain_task import OBJECTIVES, PretrainConfig, PretrainTask
from training import trainer as trainer_lib

model_flags.define_model_flags(record_defaults=True)
flags.adopt_module_key_flags(model_flags)
training_flags.define_training_flags("pretrain", train_steps=1000)
flags.adopt_module_key_flags(training_flags)
flags.DEFINE_string("record_dir", None, "Directory of the records (create_pretrain_data.py "
                    "--output_dir).")
flags.DEFINE_string("model_dir", None, "Checkpoints, TensorBoard logs and the export go here; "
                    "a rerun resumes from its latest checkpoint.")
flags.DEFINE_string("output_dir", None, "Alias of --model_dir.")
flags.DEFINE_enum("objective", "plm", list(OBJECTIVES), "Pretraining objective.")
flags.DEFINE_enum("mpnet_mode", "mpnet", ["mpnet", "plm", "mlm"], "With --objective=mpnet: "
                  "mpnet, plm (- position compensation) or mlm (- both).")
flags.DEFINE_bool("mpnet_permute", True, "With --objective=mpnet: False keeps the predictions in "
                  "position order (- permutation).")
flags.DEFINE_float("nsp_weight", 0.0, "Weight of a next-sentence loss on the stored A/B label "
                   "(0 = off, as XLNet).")
flags.DEFINE_string("sp_model", None, "SentencePiece model the records were written with; when "
                    "given, the export also holds a SavedModel on raw text "
                    "(MODEL_DIR/export/saved_model: sentence -> sequence_output; XLNet "
                    "objectives).")
flags.DEFINE_bool("uncased", False, "With --sp_model: lower-case the text (uncased records).")
# Parameters of the records (not given: the records' values; given: checked against them).
RECORD_FLAGS = ("seq_len", "reuse_len", "num_predict", "bsz_per_host", "num_core_per_host",
                "bi_data")
REC = "default: the records' value (checked against them when given)."
flags.DEFINE_integer("seq_len", None, "Tokens per example; " + REC)
flags.DEFINE_integer("num_predict", None, "Targets per example; " + REC)
flags.DEFINE_integer("bsz_per_host", None, "Batch per host; " + REC)
flags.DEFINE_integer("num_core_per_host", None, "Replicas per host (TPU cores or GPUs of one "
                     "host); " + REC)
flags.DEFINE_integer("keep_checkpoints", 5, "Checkpoints kept.")
flags.DEFINE_bool("checkpoint_memory", True, "Save every replica's Transformer-XL memory in the "
                  "checkpoints, so a resumed run continues exactly. It costs replicas x n_layer "
                  "x lanes per replica x mem_len x d_model floats per checkpoint (and, on "
                  "multi-worker, every host holds all of it when saving): turn it off on large "
                  "pods; a resume then starts from empty memory.")
flags.DEFINE_integer("num_hosts", None, "Hosts of the job; optional: taken from the strategy "
                     "(replicas / --num_core_per_host), and checked against it when given.")
flags.DEFINE_enum("verify_records", "auto", list(record_format.VERIFY_MODES),
                  "Before training, check every record file against its record-info: size "
                  "(always; catches truncation), sha256 (also hash every file: catches any altered "
                  "byte, ~1.4 GB/s per core), auto (sha256 when the files total at most "
                  f"{record_format.AUTO_SHA256_BYTES >> 30} GiB). A record corrupted beyond "
                  "these checks stops the run when it is read, naming the file (CRC32C).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  model_dir, strategy = entry.prologue(
      "run_pretrain.py", FLAGS, required=["record_dir", "model_dir", "model_config_path"])
  try:
    if FLAGS.objective == "mpnet":   # a Hugging Face style MPNet config.json
      model_config = mpnet.MPNetConfig.from_json(FLAGS.model_config_path)
    else:
      model_config = model_flags.model_config_from_flags()
    vocab = model_config.vocab_size if FLAGS.objective == "mpnet" else model_config.n_token
    resolved = record_format.resolve_training_params(
        FLAGS.record_dir, vocab_size=vocab,
        **{name: FLAGS[name].value for name in RECORD_FLAGS if FLAGS[name].present})
    if resolved.from_records:
      print(resolved.summary(), flush=True)
    record = {name: resolved.values[name] for name in RECORD_FLAGS}
    run_config = dataclasses.replace(model_flags.run_config_from_flags(),   # the memory's too
                                     reuse_len=record["reuse_len"], bi_data=record["bi_data"])
    config = PretrainConfig(
        record_dir=FLAGS.record_dir, **record,
        objective=FLAGS.objective, nsp_weight=FLAGS.nsp_weight, mpnet_mode=FLAGS.mpnet_mode,
        mpnet_permute=FLAGS.mpnet_permute,
        seed=FLAGS.seed, **training_flags.optimizer_kwargs(),
        num_hosts=FLAGS.num_hosts or 1, verify_records=FLAGS.verify_records)
    task = PretrainTask(config, model_config, run_config, FLAGS.init_checkpoint,
                        export_hf_dir=FLAGS.export_hf_dir)   # written by the chief only
    if not distribution.is_chief(strategy):
      task.export_hf_dir = None
    distribution.num_hosts(strategy, config.num_core_per_host, FLAGS.num_hosts)
    fileio.makedirs(model_dir)
    trainer = trainer_lib.Trainer(task, strategy, model_dir, FLAGS.train_steps,
                                  FLAGS.steps_per_loop, FLAGS.save_every,
                                  FLAGS.keep_checkpoints, FLAGS.xla,
                                  checkpoint_state=FLAGS.checkpoint_memory)
    with pipeline.named_record_errors(FLAGS.record_dir):   # tf.data names no file
      trainer.train()
    if FLAGS.sp_model and FLAGS.objective != "mpnet" and distribution.is_chief(strategy):
      serving_tasks.export_pretrained(task, model_dir, FLAGS.sp_model, FLAGS.uncased)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"run_pretrain.py: {e}")


if __name__ == "__main__":
  cli_app.run(main)
