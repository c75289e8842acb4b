"""Turn raw text into pretraining TFRecords with precomputed factorization orders.

Status: not built yet (issue #3). `--help` lists the flags.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

flags.DEFINE_string("input_glob", None, "Text files, one sentence per line, blank line = "
                    "end of document.")
flags.DEFINE_string("sp_model", None, "SentencePiece model with the XLNet special symbols.")
flags.DEFINE_string("output_dir", None, "Where the TFRecord shards and record-info go.")
flags.DEFINE_integer("seq_len", 512, "Tokens per example.")
flags.DEFINE_integer("reuse_len", 256, "Tokens of each example reused as the next one's memory.")
flags.DEFINE_integer("num_predict", 85, "Targets per example.")


def main(argv):
  del argv
  sys.exit("create_pretrain_data.py: not built yet (issue #3).")


if __name__ == "__main__":
  app.run(main)
