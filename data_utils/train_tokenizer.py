"""Train a SentencePiece model with the XLNet special symbols at the XLNet ids.

<unk>=0 <s>=1 </s>=2 <cls>=3 <sep>=4 <pad>=5 <mask>=6 <eod>=7 <eop>=8, so the
model is interchangeable with a released spiece.model.

  python data_utils/train_tokenizer.py --input_glob='corpus/*.txt' \\
      --model_prefix=spiece --vocab_size=32000

Inputs and --model_prefix may be local paths or tf.io.gfile URLs (gs://bucket/...).
"""

import sys

from absl import flags

from data_utils import cli_app
from data_utils import fileio, tokenization

flags.DEFINE_string("input_glob", None, "Text files to learn from (comma-separated globs).")
flags.DEFINE_string("model_prefix", None, "Writes PREFIX.model and PREFIX.vocab.")
flags.DEFINE_integer("vocab_size", 32000, "Pieces in the model (specials included).")
flags.DEFINE_bool("uncased", False, "Lower-case the text first (then create records with "
                  "--uncased too).")
flags.DEFINE_integer("seed", 0, "Seed of SentencePiece's sampling.")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.input_glob or not FLAGS.model_prefix:
    sys.exit("train_tokenizer.py: --input_glob and --model_prefix are required")
  paths = fileio.glob_files_light(FLAGS.input_glob)
  if not paths:
    sys.exit(f"train_tokenizer.py: --input_glob={FLAGS.input_glob} matched no files")
  try:
    model = tokenization.train_sentencepiece(paths, FLAGS.model_prefix, FLAGS.vocab_size,
                                             lower=FLAGS.uncased, seed=FLAGS.seed)
  except RuntimeError as e:
    sys.exit(f"train_tokenizer.py: SentencePiece failed: {str(e).splitlines()[0]}")
  tokenizer = tokenization.Tokenizer(model, lower=FLAGS.uncased)
  print(f"wrote {model} ({tokenizer.vocab_size} pieces, XLNet symbols at ids 0-8)")


if __name__ == "__main__":
  cli_app.run(main)
