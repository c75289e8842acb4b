"""`saved_model_cli` with the tensorflow_text ops registered (the exports' tokenizers use them).

  python -m serving.cli run --dir EXPORT --tag_set serve --signature_def serving_default \\
      --input_exprs='sentence=["A man is playing."]'

Every saved_model_cli command and flag works as documented by TensorFlow; `run` loads the
SavedModel the way TF Serving does (a TF1 session).
"""

import sys

if __name__ == "__main__":
  from data_utils import cli_app
  cli_app.skip_keras_optional_imports()     # before TensorFlow's import below

import tensorflow_text  # noqa: F401  (registers SentencepieceOp, the WordPiece ops, ...)
from tensorflow.python.tools import saved_model_cli


def main():
  sys.argv[0] = "saved_model_cli"
  saved_model_cli.main()


if __name__ == "__main__":
  main()
