"""Fine-tune XLNet on SQuAD 1.1/2.0, write predictions and score them.

Status: scoring is built — `--do_eval_only` scores a predictions.json (and a
null_odds.json) with numbers identical to the official v1.1 / v2.0 scripts:

  python run_squad.py --do_eval_only --predict_file=dev-v2.0.json \\
      --predictions=predictions.json --null_odds=null_odds.json

Training and prediction are not built yet (issue #5). `--help` lists the flags.
"""

import json
import sys

from absl import app
from absl import flags

from finetuning import squad_metrics
from modeling import flags as model_flags

model_flags.define_model_flags()
flags.adopt_module_key_flags(model_flags)
flags.DEFINE_string("output_dir", None, "Where checkpoints, logs and predictions are written.")
flags.DEFINE_bool("do_eval_only", False, "Only score --predictions against --predict_file.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON (train-v1.1.json, dev-v2.0.json, ...).")
flags.DEFINE_string("predictions", None, "predictions.json: {question id: answer text}.")
flags.DEFINE_string("null_odds", None, "null_odds.json: {question id: no-answer score} (v2.0).")
flags.DEFINE_enum("version", None, ["1.1", "2.0"], "SQuAD version (default: from the data).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.do_eval_only:
    sys.exit("run_squad.py: SQuAD fine-tuning and prediction are not built yet (issue #5); "
             "--do_eval_only scores a prediction file.")
  if not FLAGS.predict_file or not FLAGS.predictions:
    sys.exit("run_squad.py: --do_eval_only needs --predict_file and --predictions")
  try:
    result = squad_metrics.evaluate_files(FLAGS.predict_file, FLAGS.predictions,
                                          FLAGS.null_odds, FLAGS.version)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"run_squad.py: {e}")
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  app.run(main)
