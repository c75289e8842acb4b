"""Predict a file of raw text with a trained classifier: inputs beside outputs, as JSON Lines.

  python predict.py --model=output/quickstart-tiny/finetune/classify/plm/seed0 \\
      --input=texts.tsv --output=predictions.jsonl

--model is anything inference.from_pretrained reads that holds a classification head (a
run_classifier.py run directory, a Hugging Face *ForSequenceClassification directory). The
input is a .tsv / .csv with a header, a .jsonl (columns by --text_a_column, --text_b_column,
--id_column, --label_column) or a .txt of one text per line; the output holds one object per
text: id, text_a (text_b), prediction, probabilities (score for regression), gold (when the
input has labels). See docs/python-api.md.
"""

import sys

from absl import flags

from data_utils import cli_app
cli_app.quiet_imports(__name__)   # Ctrl-C during the imports below: one line, status 130

from finetuning import table_data  # noqa: E402  (no TensorFlow: --help stays quick)

flags.DEFINE_string("model", None, "The model: a fine-tuning run directory (run_classifier.py's "
                    "--model_dir), or a Hugging Face XLNet / MPNet *ForSequenceClassification "
                    "directory; local or gs://.")
flags.DEFINE_string("input", None, "Texts to predict: .tsv or .csv with a header line, .jsonl "
                    "(one object per line), or .txt (one text per line); UTF-8.")
flags.DEFINE_string("output", None, "Predictions file (.jsonl) to write: absent, or an earlier "
                    "predictions file (replaced); anything else is refused.")
table_data.define_column_flags(
    "Column (JSON Lines: key) of the text.",
    "Column of known labels, copied to the output as `gold` when the input has it.",
    missing_id="input-LINE")
flags.adopt_module_key_flags(table_data)   # listed by --help with the script's own
flags.DEFINE_integer("batch_size", 32, "Texts per forward pass.", lower_bound=1)
flags.DEFINE_integer("max_length", None, "Tokens per row, special tokens included (default: the "
                     "run's --max_seq_length; longer texts are cut as in fine-tuning).",
                     lower_bound=4)
flags.DEFINE_string("sp_model", None, "SentencePiece model, when the model's own tokenizer is not "
                    "found beside it.")
flags.DEFINE_string("vocab_file", None, "MPNet WordPiece vocab.txt, when the model's own "
                    "tokenizer is not found beside it.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  try:
    for name in ("model", "input", "output"):
      if not FLAGS[name].value:
        raise ValueError(f"--{name} is required")
    from finetuning.table_data import Columns
    from inference import files
    overrides = {k: FLAGS[k].value for k in ("sp_model", "vocab_file") if FLAGS[k].value}
    files.predict_file(
        FLAGS.model, FLAGS.input, FLAGS.output,
        Columns(text_a=FLAGS.text_a_column, text_b=FLAGS.text_b_column,
                label=FLAGS.label_column, id=FLAGS.id_column),
        batch_size=FLAGS.batch_size, max_length=FLAGS.max_length, overrides=overrides)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"predict.py: {e}")


if __name__ == "__main__":
  cli_app.run(main)
