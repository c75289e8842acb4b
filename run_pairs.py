"""Fine-tune XLNet or MPNet sentence embeddings on pairs with in-batch negatives.

The model is the family's encoder, pooling over each row's real tokens (--pooling) and L2
normalisation; the loss is sentence-transformers' MultipleNegativesRankingLoss (each anchor's
softmax over every positive and hard negative of its batch, cosine scores times --scale).
Training pairs come from a TSV / CSV / JSON Lines file (--train_file: columns anchor, positive
and optionally a hard negative; finetuning/pairs_data.py). At every checkpoint the model is
evaluated on --dev_file (retrieval: each query against all positives of the file, MRR@10 and
recall@1/5/10) and --sts_file (GLUE STS-B layout: Spearman correlation of cosine similarity
with the gold scores); the best checkpoint by MRR@10 (Spearman without --dev_file) is kept
under MODEL_DIR/best/. --export_st_dir writes a directory sentence-transformers loads,
--export_dir a SavedModel on raw text (`sentence` [N] -> `embedding` [N, D]), --export_hf_dir
the bare encoder (transformers' XLNetModel / MPNetModel).

  python run_pairs.py --model_type=mpnet --init_checkpoint=mpnet-base \\
      --model_config_path=mpnet-base/config.json --train_file=pairs.jsonl \\
      --dev_file=dev_pairs.tsv --sts_file=glue/STS-B/dev.tsv --model_dir=runs/pairs \\
      --max_seq_length=128 --train_batch_size=64 --learning_rate=2e-5 --train_steps=2000 \\
      --do_train --do_eval --export_st_dir=runs/pairs-st --export_dir=runs/pairs-saved
"""

import json
import sys

from absl import flags

from data_utils import cli_app
cli_app.quiet_imports(__name__)   # Ctrl-C during the imports below: one line, status 130
from data_utils import outputs
from finetuning import classifier_task
from finetuning import pairs_data
from finetuning import runner
from finetuning import st_export
from finetuning.pairs_task import PairsConfig, PairsTask
from modeling import flags as model_flags
from modeling import pooling
from training import entry
from training import flags as training_flags

SCRIPT = "run_pairs.py"
model_flags.define_model_flags()
model_flags.define_model_type_flags()
flags.adopt_module_key_flags(model_flags)
training_flags.define_training_flags("classifier", train_steps=1000, save_every=500)
flags.adopt_module_key_flags(training_flags)
flags.DEFINE_string("sp_model", None, "SentencePiece model (spiece.model of the checkpoint).")
flags.DEFINE_bool("uncased", False, "Lower-case the text (uncased models).")
flags.DEFINE_string("train_file", None,
                    "Training pairs: .tsv, .csv (a header naming the columns) or .jsonl, one "
                    "(anchor, positive[, negative]) per row.")
flags.DEFINE_string("dev_file", None,
                    "Retrieval evaluation: (query, positive) pairs in --anchor_column and "
                    "--positive_column; every query is ranked against all positives of the "
                    "file (MRR@10, recall@1/5/10; the best checkpoint by MRR@10).")
flags.DEFINE_string("sts_file", None,
                    "Similarity evaluation: a file in GLUE STS-B's layout (columns sentence1, "
                    "sentence2, score; dev.tsv), scored by the Spearman correlation of cosine "
                    "similarity with the gold scores.")
flags.DEFINE_string("anchor_column", "anchor", "Column (JSON Lines: key) of the anchor / query.")
flags.DEFINE_string("positive_column", "positive", "Column of the anchor's positive.")
flags.DEFINE_string("negative_column", None,
                    "Column of a hard negative in --train_file (default: none, in-batch "
                    "negatives only).")
flags.DEFINE_enum("pooling", "mean", list(pooling.MODES),
                  "Sentence embedding from the token states: mean of the real tokens, the first "
                  "real token or the last (XLNet's <cls>).")
flags.DEFINE_float("scale", 20.0, "Cosine similarities are multiplied by this before the "
                   "softmax (1 / temperature).")
flags.DEFINE_string("model_dir", None, "Checkpoints, logs, best model and evaluation results.")
flags.DEFINE_string("output_dir", None, "Alias of --model_dir.")
flags.DEFINE_bool("do_train", False, "Fine-tune on --train_file.")
flags.DEFINE_bool("do_eval", False, "Evaluate (the best checkpoint if trained) on --dev_file "
                  "and --sts_file; results in MODEL_DIR/pairs_eval.json.")
flags.DEFINE_string("export_st_dir", None,
                    "Write the model here for sentence-transformers: a Hugging Face directory "
                    "(weights, tokenizer) with modules.json, sentence_bert_config.json, "
                    "1_Pooling/ and 2_Normalize/; SentenceTransformer(DIR) loads it.")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per row (special tokens included); longer "
                     "texts keep their first pieces.")
flags.DEFINE_integer("train_batch_size", 32, "Pairs per (global) batch, at least 2 per replica.")
flags.DEFINE_integer("eval_batch_size", 64, "Rows per evaluation forward pass.")
FLAGS = flags.FLAGS


def check_flags():
  if FLAGS.do_train and not FLAGS.train_file:
    raise ValueError("--do_train needs --train_file")
  if FLAGS.do_eval and not (FLAGS.dev_file or FLAGS.sts_file):
    raise ValueError("--do_eval needs --dev_file or --sts_file")
  if FLAGS.export_st_dir:
    st_export.check_dir(FLAGS.export_st_dir)


def config_from_flags(f):
  return PairsConfig(
      train_file=f.train_file, dev_file=f.dev_file, sts_file=f.sts_file,
      columns=pairs_data.PairColumns(f.anchor_column, f.positive_column, f.negative_column),
      sp_model=f.sp_model, vocab_file=f.vocab_file, uncased=f.uncased, model_type=f.model_type,
      max_seq_length=f.max_seq_length, train_batch_size=f.train_batch_size,
      eval_batch_size=f.eval_batch_size, pooling=f.pooling, scale=f.scale, seed=f.seed,
      **training_flags.optimizer_kwargs(f))


def main(argv):
  del argv
  model_dir, strategy = entry.prologue(
      SCRIPT, FLAGS,
      actions=["do_train", "do_eval", "export_st_dir", "export_hf_dir", "export_dir"],
      required=["model_dir", "model_config_path"], check=check_flags)
  try:
    model_flags.resolve_tokenizer(FLAGS)
    if model_flags.tokenizer_source(FLAGS) is None:
      raise ValueError("no tokenizer: pass --sp_model (SentencePiece) or --vocab_file "
                       "(WordPiece), or an --init_checkpoint exported with its tokenizer")
    task = PairsTask(config_from_flags(FLAGS), model_flags.model_config_from_flags(),
                     model_flags.run_config_from_flags(), FLAGS.init_checkpoint)
    if not FLAGS.do_train:          # the evaluation files checked before any model work
      task.dev_pairs()
      task.sts_rows()
    outputs.check_distinct({"export_st_dir": FLAGS.export_st_dir,
                            "export_hf_dir": FLAGS.export_hf_dir, "export_dir": FLAGS.export_dir,
                            "model_dir": model_dir})
    if not FLAGS.init_checkpoint and not FLAGS.do_train:   # the run's own trained model
      task.init_checkpoint = classifier_task.trained_checkpoint(model_dir)
    model = runner.train_or_load(task, strategy, model_dir, FLAGS.do_train, FLAGS,
                                 script=SCRIPT)
    written = []
    if FLAGS.do_eval:
      results = task.evaluate(model)
      print(json.dumps(results))
      written.append(task.write_results(results, model_dir))
    if FLAGS.export_st_dir:
      st_export.export(model, FLAGS.export_st_dir, model_flags.tokenizer_source(FLAGS),
                       FLAGS.max_seq_length)
    runner.report_written(written)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"{SCRIPT}: {e}")


if __name__ == "__main__":
  cli_app.run(main)
