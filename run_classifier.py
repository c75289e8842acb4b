"""Fine-tune and evaluate XLNet on GLUE and text-classification tasks.

Reads the official layouts from --data_dir (GLUE TSVs; aclImdb; the Yelp,
DBpedia, AG News and Amazon CSVs), caches the encoded features, fine-tunes with
the shared training loop, evaluates on the dev split at every checkpoint
(keeping the best), and writes GLUE submission files for test splits.

  python run_classifier.py --task_name=sts-b --data_dir=glue/STS-B \\
      --sp_model=xlnet_cased_L-24_H-1024_A-16/spiece.model \\
      --model_config_path=xlnet_cased_L-24_H-1024_A-16/xlnet_config.json \\
      --init_checkpoint=xlnet_cased_L-24_H-1024_A-16/xlnet_model.ckpt \\
      --model_dir=runs/sts-b --max_seq_length=128 --train_batch_size=32 \\
      --learning_rate=5e-5 --train_steps=1200 --warmup_steps=120 --do_train --do_eval
"""

import json
import sys

from absl import flags

from data_utils import cli_app
cli_app.quiet_imports(__name__)   # Ctrl-C during the imports below: one line, status 130
from data_utils import fileio
from finetuning import runner
from finetuning import classifier_data
from finetuning import classifier_task
from finetuning.classifier_task import ClassifierTask
from modeling import flags as model_flags
from training import entry
from training import flags as training_flags

model_flags.define_model_flags()
model_flags.define_model_type_flags()
flags.adopt_module_key_flags(model_flags)
training_flags.define_training_flags("classifier", train_steps=1000, save_every=500)
flags.adopt_module_key_flags(training_flags)
flags.DEFINE_string("task_name", None, f"One of {', '.join(sorted(classifier_data.TASKS))}.")
flags.DEFINE_string("data_dir", None, "Directory with the task's files in the official layout.")
flags.DEFINE_string("sp_model", None, "SentencePiece model (spiece.model of the checkpoint).")
flags.DEFINE_bool("uncased", False, "Lower-case the text (uncased models).")
flags.DEFINE_string("model_dir", None, "Checkpoints, logs, best model and predictions.")
flags.DEFINE_string("output_dir", None, "Alias of --model_dir.")
flags.DEFINE_string("cache_dir", None, "Encoded features cache (default: MODEL_DIR/features).")
flags.DEFINE_bool("do_train", False, "Fine-tune.")
flags.DEFINE_bool("do_eval", False, "Evaluate on --eval_split (the best checkpoint if trained).")
flags.DEFINE_bool("do_predict", False, "Write GLUE submission files for the test split(s).")
flags.DEFINE_string("eval_split", "dev", "Split to evaluate (dev, dev_mismatched, test, ...).")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per example (left padded).")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch.")
flags.DEFINE_integer("eval_batch_size", 64, "Evaluation batch.")
flags.DEFINE_enum("summary_type", "last", ["last", "first", "mean", "attn"], "Pooling.")
flags.DEFINE_bool("use_summ_proj", True, "tanh projection after pooling.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  reads_data = FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict   # an export alone reads none
  model_dir, strategy = entry.prologue(
      "run_classifier.py", FLAGS,
      actions=["do_train", "do_eval", "do_predict", "export_dir", "export_hf_dir"],
      required=["task_name", *(["data_dir"] if reads_data else []), "model_dir",
                "model_config_path"])
  try:
    model_flags.resolve_tokenizer(FLAGS)     # an export's own tokenizer by default
    config = classifier_task.config_from_flags(
        FLAGS, FLAGS.task_name, FLAGS.cache_dir or fileio.join(model_dir, "features"))
    task = ClassifierTask(config, model_flags.model_config_from_flags(),
                          model_flags.run_config_from_flags(), FLAGS.init_checkpoint)
    model = runner.train_or_load(task, strategy, model_dir, FLAGS.do_train, FLAGS,
                                 script="run_classifier.py")
    unlabelled = FLAGS.do_eval and task.eval_without_labels(FLAGS.eval_split)
    if unlabelled:     # a GLUE test split: --do_predict writes its submission file
      print(f"--do_eval skipped: {unlabelled}")
    elif FLAGS.do_eval:
      results = task.evaluate(model, FLAGS.eval_split)
      print(json.dumps({"task": task.spec.name, "split": FLAGS.eval_split, **results}))
    if FLAGS.do_predict:
      for split in task.spec.files:
        if split.startswith("test"):
          print(f"wrote {task.write_predictions(model, split, model_dir)}")
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"run_classifier.py: {e}")


if __name__ == "__main__":
  cli_app.run(main)
