"""Fine-tune and evaluate XLNet or MPNet on token tagging (named entities, CoNLL-2003's layout).

Files: one word per line (`word ... tag`, the tag in --tag_column, default the last), blank
lines between sentences, -DOCSTART- lines ignored (finetuning/conll.py). Tags in BIO or IOB1
(--label_scheme=auto tells them apart). --do_eval prints entity precision / recall / F1 as
conlleval counts them (and in seqeval's strict mode) with the token accuracy, and conlleval's
summary lines; --do_predict writes MODEL_DIR/tagging_SPLIT_predictions.txt in conlleval's layout
(each input line with the predicted tag appended) and prints the same scores.

  python run_tagger.py --data_dir=conll2003 --sp_model=spiece.model \\
      --model_config_path=xlnet_config.json --init_checkpoint=xlnet_model.ckpt \\
      --model_dir=runs/ner --max_seq_length=128 --train_batch_size=32 \\
      --learning_rate=3e-5 --train_steps=3000 --do_train --do_eval --do_predict

  python run_tagger.py --model_type=mpnet --train_file=train.txt --dev_file=dev.txt \\
      --vocab_file=mpnet-base/vocab.txt --model_config_path=mpnet-base/config.json \\
      --init_checkpoint=mpnet-base --model_dir=runs/ner-mpnet --do_train --do_eval \\
      --export_hf_dir=exports/ner-mpnet
"""

import json
import sys

from absl import flags

from data_utils import cli_app
cli_app.quiet_imports(__name__)   # Ctrl-C during the imports below: one line, status 130
from finetuning import entity_metrics
from finetuning import runner
from finetuning import tagging
from modeling import flags as model_flags
from training import entry
from training import flags as training_flags

model_flags.define_model_flags()
model_flags.define_model_type_flags()
flags.adopt_module_key_flags(model_flags)
training_flags.define_training_flags("classifier", train_steps=3000)
flags.adopt_module_key_flags(training_flags)
flags.DEFINE_string("data_dir", None, "A directory of CoNLL-2003 files: eng.train / eng.testa / "
                    "eng.testb, or train.txt / valid.txt (or dev.txt) / test.txt. "
                    "--train_file / --dev_file / --test_file override its files.")
flags.DEFINE_string("train_file", None, "CoNLL-layout training file.")
flags.DEFINE_string("dev_file", None, "CoNLL-layout dev file (--eval_split=dev).")
flags.DEFINE_string("test_file", None, "CoNLL-layout test file (--eval_split=test).")
flags.DEFINE_enum("label_scheme", "auto", list(tagging.SCHEMES),
                  "Tags of the files: bio (IOB2: entities start with B-), iob1 (CoNLL-2003's "
                  "original files: entities start with I-), or auto (a file is IOB1 when some "
                  "entity starts with I-). iob1 files are converted to BIO (what the model learns); "
                  "bio keeps the tags as written. conlleval's entity scores are the same either "
                  "way.")
flags.DEFINE_integer("tag_column", -1, "The tags' column (0 is the word; negative counts from "
                     "the end). CoNLL-2003's `word POS chunk NER`: -1.")
flags.DEFINE_list("labels", None, "The label set in id order (e.g. O,B-PER,I-PER); default the "
                  "training file's tags (O first, then sorted), else the --init_checkpoint's "
                  "(a Hugging Face config.json's id2label or a run's tagging_labels.json).")
flags.DEFINE_string("sp_model", None, "SentencePiece model of the checkpoint.")
flags.DEFINE_bool("uncased", False, "Lower-case the text (uncased models).")
flags.DEFINE_string("model_dir", None, "Checkpoints, logs, the best model and predictions.")
flags.DEFINE_string("output_dir", None, "Alias of --model_dir.")
flags.DEFINE_bool("do_train", False, "Fine-tune on the training file.")
flags.DEFINE_bool("do_eval", False, "Entity scores on --eval_split (the best checkpoint if "
                  "trained).")
flags.DEFINE_enum("eval_split", "dev", ["dev", "test"], "The split --do_eval scores (and "
                  "training evaluates at each checkpoint, when its file is given).")
flags.DEFINE_bool("do_predict", False, "Write MODEL_DIR/tagging_SPLIT_predictions.txt for "
                  "--predict_split (conlleval's layout) and print its scores.")
flags.DEFINE_enum("predict_split", "test", ["dev", "test"], "The split --do_predict tags.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per row; a longer sentence is split into "
                     "windows of whole words, each its own row.")
flags.DEFINE_integer("train_batch_size", 32, "Rows per step.")
flags.DEFINE_integer("eval_batch_size", 64, "Rows per evaluation batch.")
FLAGS = flags.FLAGS


def _report(split, scores, path=None):
  print(entity_metrics.format_report(scores["conlleval"]))
  print(json.dumps({"split": split, **({"predictions": path} if path else {}),
                    **tagging.TaggingTask.metrics(scores)}))


def main(argv):
  del argv
  model_dir, strategy = entry.prologue(
      "run_tagger.py", FLAGS,
      actions=["do_train", "do_eval", "do_predict", "export_dir", "export_hf_dir"],
      required=["model_dir", "model_config_path"])
  try:
    model_flags.resolve_tokenizer(FLAGS)
    config = tagging.config_from_flags(FLAGS)
    labels = FLAGS.labels or (None if FLAGS.do_train else
                              tagging.labels_of_checkpoint(FLAGS.init_checkpoint))
    task = tagging.TaggingTask(config, model_flags.model_config_from_flags(),
                               model_flags.run_config_from_flags(), FLAGS.init_checkpoint,
                               labels=labels)
    # every input read and checked before any work: a bad line is one error, nothing written
    task.check_inputs((["train"] if FLAGS.do_train else [])
                      + ([FLAGS.eval_split] if FLAGS.do_eval else [])
                      + ([FLAGS.predict_split] if FLAGS.do_predict else []))
    model = runner.train_or_load(task, strategy, model_dir, FLAGS.do_train, FLAGS,
                                 script="run_tagger.py")
    if FLAGS.do_eval:
      predicted = task.predict_tags(model, FLAGS.eval_split)
      _report(FLAGS.eval_split, task.scores(FLAGS.eval_split, predicted))
    if FLAGS.do_predict:
      scores, paths = task.evaluate_and_write(model, FLAGS.predict_split, model_dir)
      runner.report_written(paths)
      _report(FLAGS.predict_split, scores, paths[0])
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"run_tagger.py: {e}")


if __name__ == "__main__":
  cli_app.run(main)
