"""Fine-tune and evaluate XLNet or MPNet on GLUE, text-classification tasks or your own data.

Reads the official layouts from --data_dir (GLUE TSVs; aclImdb; the Yelp,
DBpedia, AG News and Amazon CSVs), or your own TSV / CSV / JSON Lines files
(--task_name=custom: finetuning/table_data.py), caches the encoded features,
fine-tunes with the shared training loop, evaluates on the dev split at every
checkpoint (keeping the best), and writes predictions: MODEL_DIR/predictions/
TASK.SPLIT.jsonl for every split evaluated (--do_eval) or predicted
(--do_predict), the GLUE submission files for test splits, and with
--predict_file a file of raw text predicted by the trained model.

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
from finetuning import table_data
from finetuning.classifier_task import ClassifierTask
from modeling import flags as model_flags
from training import entry
from training import flags as training_flags

model_flags.define_model_flags()
model_flags.define_model_type_flags()
flags.adopt_module_key_flags(model_flags)
training_flags.define_training_flags("classifier", train_steps=1000, save_every=500)
flags.adopt_module_key_flags(training_flags)
flags.DEFINE_string("task_name", None,
                    f"One of {', '.join(sorted(classifier_data.TASKS))}, or custom: your own "
                    "TSV / CSV / JSON Lines files (--train_file, --dev_file, --test_file, the "
                    "column flags, --labels or --regression).")
flags.DEFINE_string("data_dir", None,
                    "Directory with the task's files in the official layout (--task_name="
                    "custom: train, dev and test named SPLIT.tsv, SPLIT.csv or SPLIT.jsonl).")
flags.DEFINE_string("train_file", None,
                    "--task_name=custom: the training file (.tsv, .csv or .jsonl, a header "
                    "naming the columns); default DATA_DIR/train.{tsv,csv,jsonl}.")
flags.DEFINE_string("dev_file", None, "--task_name=custom: the dev file (--do_eval, the best "
                    "checkpoint); default DATA_DIR/dev.{tsv,csv,jsonl}.")
flags.DEFINE_string("test_file", None, "--task_name=custom: the test file (--do_predict; "
                    "labels optional); default DATA_DIR/test.{tsv,csv,jsonl}.")
table_data.define_column_flags(
    "Column (JSON Lines: key) of the first text, in --task_name=custom's files and in "
    "--predict_file.",
    "Column of the label (a class name, or the target with --regression); optional in dev, "
    "test and predict files (then only predicted).", missing_id="SPLIT-LINE")
flags.adopt_module_key_flags(table_data)   # listed by --help with the script's own
flags.DEFINE_string("labels", None,
                    "--task_name=custom: the label set in the model's output order, e.g. "
                    "neg,neutral,pos (default: the training file's labels sorted, numerically "
                    "when all are integers); recorded in MODEL_DIR/task.json.")
flags.DEFINE_bool("regression", False,
                  "--task_name=custom: the label column is a real-valued target (squared-error "
                  "loss; Pearson and Spearman correlation as GLUE's STS-B).")
flags.DEFINE_string("predict_file", None,
                    "With --do_predict: predict this file of raw text (.tsv, .csv with a header, "
                    "or .jsonl; --text_a_column, --text_b_column; a label column is kept as "
                    "gold) instead of the test split(s), writing MODEL_DIR/predictions/"
                    "TASK.predict-NAME.jsonl. Without --do_train the model is "
                    "--init_checkpoint, else MODEL_DIR's best, else its last checkpoint.")
flags.DEFINE_string("sp_model", None, "SentencePiece model (spiece.model of the checkpoint).")
flags.DEFINE_bool("uncased", False, "Lower-case the text (uncased models).")
flags.DEFINE_string("model_dir", None, "Checkpoints, logs, best model and predictions.")
flags.DEFINE_string("output_dir", None, "Alias of --model_dir.")
flags.DEFINE_string("cache_dir", None, "Encoded features cache (default: MODEL_DIR/features).")
flags.DEFINE_bool("do_train", False, "Fine-tune.")
flags.DEFINE_bool("do_eval", False,
                  "Evaluate on --eval_split (the best checkpoint if trained) and write its "
                  "predictions to MODEL_DIR/predictions/TASK.SPLIT.jsonl.")
flags.DEFINE_bool("do_predict", False,
                  "Predict the test split(s) (or --predict_file): MODEL_DIR/predictions/"
                  "TASK.SPLIT.jsonl, and for a built-in task its submission file.")
flags.DEFINE_string("eval_split", "dev", "Split to evaluate (dev, dev_mismatched, test, ...).")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per example (left padded).")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch.")
flags.DEFINE_integer("eval_batch_size", 64, "Evaluation batch.")
flags.DEFINE_enum("summary_type", "last", ["last", "first", "mean", "attn"], "Pooling.")
flags.DEFINE_bool("use_summ_proj", True, "tanh projection after pooling.")
FLAGS = flags.FLAGS


def check_flags():
  if FLAGS.predict_file and not FLAGS.do_predict:
    raise ValueError("--predict_file is predicted with --do_predict: pass it too")


def main(argv):
  del argv
  custom = (FLAGS.task_name or "").lower() == "custom"
  # an export alone reads no data; a --predict_file run only that file; custom data its files
  reads_data = (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict and not FLAGS.predict_file)
  model_dir, strategy = entry.prologue(
      "run_classifier.py", FLAGS,
      actions=["do_train", "do_eval", "do_predict", "export_dir", "export_hf_dir"],
      required=["task_name", *(["data_dir"] if reads_data and not custom else []), "model_dir",
                "model_config_path"], check=check_flags)
  try:
    spec, columns = classifier_task.resolve_spec(FLAGS, model_dir)
    if custom:
      check_custom_files(spec)
    model_flags.resolve_tokenizer(FLAGS)     # an export's own tokenizer by default
    config = classifier_task.config_from_flags(
        FLAGS, FLAGS.task_name, FLAGS.cache_dir or fileio.join(model_dir, "features"))
    task = ClassifierTask(config, model_flags.model_config_from_flags(),
                          model_flags.run_config_from_flags(), FLAGS.init_checkpoint, spec=spec,
                          columns=columns if custom else None)
    to_predict = None
    if FLAGS.do_predict and FLAGS.predict_file:      # checked before any model work
      to_predict = task.read_predict_file(FLAGS.predict_file, columns)
    if not FLAGS.init_checkpoint and not FLAGS.do_train:   # the run's own trained model
      task.init_checkpoint = classifier_task.trained_checkpoint(model_dir)
    model = runner.train_or_load(task, strategy, model_dir, FLAGS.do_train, FLAGS,
                                 script="run_classifier.py")
    written = []
    unlabelled = FLAGS.do_eval and task.eval_without_labels(FLAGS.eval_split)
    if unlabelled:     # a GLUE test split: --do_predict writes its submission file
      print(f"--do_eval skipped: {unlabelled}")
    elif FLAGS.do_eval:
      results, paths = task.evaluate_and_write(model, FLAGS.eval_split, model_dir)
      print(json.dumps({"task": task.spec.name, "split": FLAGS.eval_split, **results}))
      written += paths
    if FLAGS.do_predict and to_predict is not None:
      written += task.predict_file(model, FLAGS.predict_file, to_predict, model_dir)
    elif FLAGS.do_predict:
      for split in task.spec.files:
        if split.startswith("test"):
          written += [p for p in task.write_predictions(model, split, model_dir)
                      if p not in written]
    runner.report_written(written)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"run_classifier.py: {e}")


def check_custom_files(spec):
  """Each action's file of --task_name=custom is there, before any work."""
  needs = [("train", FLAGS.do_train, "--do_train"), (FLAGS.eval_split, FLAGS.do_eval, "--do_eval"),
           ("test", FLAGS.do_predict and not FLAGS.predict_file, "--do_predict")]
  for split, needed, action in needs:
    if needed and split not in spec.files:
      if split not in ("train", "dev", "test"):
        raise ValueError(f"--eval_split={split}: --task_name=custom has train, dev and test")
      raise ValueError(f"--task_name=custom {action}: no {split} file: pass --{split}_file="
                       f"PATH, or a --data_dir holding {split}.tsv, {split}.csv or "
                       f"{split}.jsonl" + (" (or --predict_file)" if split == "test" else ""))


if __name__ == "__main__":
  cli_app.run(main)
