"""Fine-tune and evaluate XLNet on RACE (middle, high, all).

Reads the official layout (RACE/{train,dev,test}/{middle,high}/*.txt, one JSON
article with its questions, options and answers per file) and reports accuracy
per level with the shared training loop. --do_predict writes the answers of a split
(its files may have no "answers") to MODEL_DIR/race_SPLIT_predictions.json, one list of
letters per file as in the files' own "answers", and race_SPLIT_predictions.jsonl, one line
per question (id, article, question, options, prediction, probabilities, gold when known);
--do_eval on such a split says it is skipped. --predict_file predicts a RACE file or
directory instead (a trained model from --init_checkpoint):

  python run_race.py --do_predict --predict_file=RACE/test/high --sp_model=spiece.model \\
      --model_config_path=xlnet_config.json --init_checkpoint=runs/race/best \\
      --model_dir=runs/race-predict

  python run_race.py --data_dir=RACE --sp_model=spiece.model \\
      --model_config_path=xlnet_config.json --init_checkpoint=xlnet_model.ckpt \\
      --model_dir=runs/race --max_seq_length=512 --train_batch_size=32 \\
      --learning_rate=2e-5 --train_steps=12000 --warmup_steps=1000 --do_train --do_eval
"""

import json
import sys

from absl import flags

from data_utils import cli_app
cli_app.quiet_imports(__name__)   # Ctrl-C during the imports below: one line, status 130
from data_utils import fileio
from finetuning import runner
from finetuning import classifier_task
from finetuning import race
from finetuning.race import RaceTask
from modeling import flags as model_flags
from training import entry
from training import flags as training_flags

model_flags.define_model_flags()
model_flags.define_model_type_flags()
flags.adopt_module_key_flags(model_flags)
training_flags.define_training_flags("race", train_steps=12000)
flags.adopt_module_key_flags(training_flags)
flags.DEFINE_string("data_dir", None, "The RACE directory (train/dev/test, middle/high).")
flags.DEFINE_string("sp_model", None, "SentencePiece model of the checkpoint.")
flags.DEFINE_bool("uncased", False, "Lower-case the text (uncased models).")
flags.DEFINE_string("model_dir", None, "Checkpoints, logs and the best model.")
flags.DEFINE_string("output_dir", None, "Alias of --model_dir.")
flags.DEFINE_bool("do_train", False, "Fine-tune on train.")
flags.DEFINE_bool("do_eval", False, "Accuracy on --eval_split (the best checkpoint if trained).")
flags.DEFINE_string("eval_split", "dev", "dev or test.")
flags.DEFINE_bool("do_predict", False, "Write the answers for --predict_split to "
                  "MODEL_DIR/race_SPLIT_predictions.json ({\"high/1.txt\": [\"A\", ...]}; the "
                  "split's files may have no answers).")
flags.DEFINE_string("predict_split", "test", "The split --do_predict answers.")
flags.DEFINE_string("predict_file", None,
                    "--do_predict answers this instead of --predict_split: one RACE file, a "
                    "directory of them (*.txt), or one in the split layout ({middle,high}/*.txt); "
                    "answers optional. Writes MODEL_DIR/race_NAME_predictions.{json,jsonl} "
                    "(NAME: its base name) and prints the accuracy when it has answers.")
flags.DEFINE_integer("max_seq_length", 512, "Tokens per (context, question+option) row.")
flags.DEFINE_integer("max_qa_length", 128, "Question+option keeps its last N tokens.")
flags.DEFINE_integer("train_batch_size", 32, "Questions per step (x4 rows).")
flags.DEFINE_integer("eval_batch_size", 32, "Questions per evaluation batch.")
flags.DEFINE_enum("summary_type", "last", ["last", "first", "mean", "attn"], "Pooling.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  # an export alone reads no data; --do_predict with --predict_file reads that file only
  reads_data = FLAGS.do_train or FLAGS.do_eval or (FLAGS.do_predict and not FLAGS.predict_file)
  model_dir, strategy = entry.prologue(
      "run_race.py", FLAGS,
      actions=["do_train", "do_eval", "do_predict", "export_dir", "export_hf_dir"],
      required=[*(["data_dir"] if reads_data else []), "model_dir", "model_config_path"])
  try:
    model_flags.resolve_tokenizer(FLAGS)     # an export's own tokenizer by default
    config = classifier_task.config_from_flags(FLAGS, "race",
                                               fileio.join(model_dir, "features"))
    task = RaceTask(config, model_flags.model_config_from_flags(),
                    model_flags.run_config_from_flags(), FLAGS.init_checkpoint,
                    max_qa_length=FLAGS.max_qa_length, predict_file=FLAGS.predict_file)
    if FLAGS.do_predict and FLAGS.predict_file:     # its layout checked before any work
      task.eval_without_labels(race.PREDICT_FILE)
    model = runner.train_or_load(task, strategy, model_dir, FLAGS.do_train, FLAGS,
                                 script="run_race.py")
    unlabelled = FLAGS.do_eval and task.eval_without_labels(FLAGS.eval_split)
    if unlabelled:     # --do_predict writes its answers
      print(f"--do_eval skipped: {unlabelled}")
    elif FLAGS.do_eval:
      print(json.dumps({"split": FLAGS.eval_split, **task.evaluate(model, FLAGS.eval_split)}))
    if FLAGS.do_predict:
      split = race.PREDICT_FILE if FLAGS.predict_file else FLAGS.predict_split
      result, paths = task.predict_files(model, split, model_dir)
      runner.report_written(paths)
      if result and FLAGS.predict_file:     # --do_eval scores --eval_split
        print(json.dumps({"predict_file": FLAGS.predict_file, **result}))
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"run_race.py: {e}")


if __name__ == "__main__":
  cli_app.run(main)
