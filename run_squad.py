"""Fine-tune XLNet on SQuAD 1.1/2.0, write predictions and score them.

  python run_squad.py --do_train --do_predict --train_file=train-v2.0.json \\
      --predict_file=dev-v2.0.json --sp_model=spiece.model \\
      --model_config_path=xlnet_config.json --init_checkpoint=xlnet_model.ckpt \\
      --model_dir=runs/squad --train_batch_size=48 --learning_rate=3e-5 \\
      --train_steps=8000 --warmup_steps=1000 --lr_layer_decay_rate=0.75

writes predictions.json, nbest_predictions.json and null_odds.json (the release's files),
predictions.jsonl (one readable line per question) and, for SQuAD 2.0,
predictions_submission.json (the file one submits: "" where the null odds exceed the
threshold chosen on the dev file, recorded in null_threshold.json), and prints the official
metrics (exact match, F1, HasAns/NoAns, best thresholds). A file without answers, predicted
into the same MODEL_DIR with the trained model, gets the threshold recorded there (or
--null_odds_threshold):

  python run_squad.py --do_predict --predict_file=test-v2.0.json --sp_model=spiece.model \\
      --model_config_path=xlnet_config.json --init_checkpoint=runs/squad/best \\
      --model_dir=runs/squad

A prediction file alone is scored with:

  python run_squad.py --do_eval_only --predict_file=dev-v2.0.json \\
      --predictions=predictions.json --null_odds=null_odds.json
"""

import json
import sys

from absl import flags

from data_utils import cli_app
cli_app.quiet_imports(__name__)   # Ctrl-C during the imports below: one line, status 130
from finetuning import runner
from finetuning import squad
from finetuning import squad_metrics
from modeling import flags as model_flags
from training import entry
from training import flags as training_flags

model_flags.define_model_flags()
model_flags.define_model_type_flags()
flags.adopt_module_key_flags(model_flags)
training_flags.define_training_flags("squad", train_steps=8000)
flags.adopt_module_key_flags(training_flags)
flags.DEFINE_string("model_dir", None, "Checkpoints, logs and prediction files.")
flags.DEFINE_string("output_dir", None, "Alias of --model_dir.")
flags.DEFINE_bool("do_train", False, "Fine-tune on --train_file.")
flags.DEFINE_bool("do_predict", False, "Predict --predict_file (and score it if it has answers).")
flags.DEFINE_bool("do_eval_only", False, "Only score --predictions against --predict_file.")
flags.DEFINE_string("train_file", None, "SQuAD JSON for training (1.1 or 2.0).")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict / score.")
flags.DEFINE_string("predictions", None, "predictions.json to score (--do_eval_only).")
flags.DEFINE_string("null_odds", None, "null_odds.json to score with (--do_eval_only, v2.0).")
flags.DEFINE_enum("version", None, ["1.1", "2.0"], "SQuAD version (default: from the data).")
flags.DEFINE_string("sp_model", None, "SentencePiece model of the checkpoint.")
flags.DEFINE_bool("uncased", False, "Lower-case the text (uncased models).")
flags.DEFINE_integer("max_seq_length", 512, "Tokens per window.")
flags.DEFINE_integer("doc_stride", 128, "Stride between windows of a long paragraph.")
flags.DEFINE_integer("max_query_length", 64, "Question tokens kept.")
flags.DEFINE_integer("max_answer_length", 64, "Longest answer, in pieces.")
flags.DEFINE_integer("start_n_top", 5, "Beam over starts.")
flags.DEFINE_integer("end_n_top", 5, "Beam over ends per start.")
flags.DEFINE_integer("n_best_size", 5, "Answers kept in nbest_predictions.json.")
flags.DEFINE_integer("train_batch_size", 48, "Global training batch.")
flags.DEFINE_integer("predict_batch_size", 32, "Prediction batch.")
flags.DEFINE_float("null_odds_threshold", None,
                   "SQuAD 2.0: predictions_submission.json answers \"\" where null_odds.json's "
                   "value exceeds this. Default: on a file with answers the threshold chosen on "
                   "it (best F1, the official script's search), on a file without the one "
                   "recorded in MODEL_DIR/null_threshold.json by an earlier dev prediction.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  try:
    if FLAGS.do_eval_only:
      entry.configure(FLAGS)
      if not FLAGS.predict_file or not FLAGS.predictions:
        sys.exit("run_squad.py: --do_eval_only needs --predict_file and --predictions")
      return print(json.dumps(squad_metrics.evaluate_files(
          FLAGS.predict_file, FLAGS.predictions, FLAGS.null_odds, FLAGS.version), indent=2))
    data = (["train_file"] if FLAGS.do_train else ["predict_file"] if FLAGS.do_predict else [])
    model_dir, strategy = entry.prologue(
        "run_squad.py", FLAGS, check=lambda: squad.check_flags(FLAGS),
        actions=["do_train", "do_predict", "do_eval_only", "export_dir", "export_hf_dir"],
        required=["model_dir", "model_config_path", *data])
    model_flags.resolve_tokenizer(FLAGS)     # an export's own tokenizer by default
    task = squad.task_from_flags(FLAGS, model_dir)
    if FLAGS.do_predict:                     # a broken recorded threshold: said before any work
      squad.recorded_threshold(model_dir)
    if FLAGS.do_train and not FLAGS.predict_file:
      task.evaluate = None
    model = runner.train_or_load(task, strategy, model_dir, FLAGS.do_train, FLAGS,
                                 script="run_squad.py")
    if FLAGS.do_predict:
      result, paths = task.predict_files(model, FLAGS.predict_file, model_dir)
      runner.report_written(paths)
      if result:
        print(json.dumps(result))
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"run_squad.py: {e}")


if __name__ == "__main__":
  cli_app.run(main)
