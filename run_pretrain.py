"""Pretrain XLNet (objectives plm, mlm, mpnet) from the records of data_utils/create_pretrain_data.py.

Status: the model, its heads and checkpoint loading are built (modeling/); the
pretraining loop (tf.distribute, memory across steps, objectives) is not built yet (issue #4). `--help` lists the flags.
"""

import sys

from absl import app
from absl import flags

from modeling import flags as model_flags

model_flags.define_model_flags()
flags.adopt_module_key_flags(model_flags)
flags.DEFINE_string("output_dir", None, "Where checkpoints, logs and outputs are written.")


def main(argv):
  del argv
  sys.exit("run_pretrain.py: the pretraining loop (tf.distribute, memory across steps, objectives) is not built yet (issue #4); "
           "modeling/ and quickstart.py show what works today.")


if __name__ == "__main__":
  app.run(main)
