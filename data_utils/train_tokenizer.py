"""Train a SentencePiece model with the XLNet special symbols at the XLNet ids.

<unk>=0 <s>=1 </s>=2 <cls>=3 <sep>=4 <pad>=5 <mask>=6 <eod>=7 <eop>=8, so the
model is interchangeable with a released spiece.model.

  python data_utils/train_tokenizer.py --input_glob='corpus/*.txt' \\
      --model_prefix=spiece --vocab_size=32000

Inputs and --model_prefix may be local paths or tf.io.gfile URLs (gs://bucket/...).

Writes PREFIX.json (the settings, a fingerprint of the input text and the model's sha256), then
PREFIX.vocab, then PREFIX.model, each whole or not at all; a failed training writes nothing. An
existing PREFIX.model is never overwritten: a rerun with the same inputs and settings says
"already complete" (exit 0); anything else (other settings, other text, a model this script
did not write or that changed since) is a one-line refusal naming what differs. SentencePiece
stops at the pieces the text holds: a model smaller than --vocab_size is a one-line warning.
"""

import hashlib
import json
import sys

from absl import flags

from data_utils import cli_app
cli_app.quiet_imports(__name__)   # Ctrl-C during the imports below: one line, status 130
from data_utils import fileio, fingerprint, outputs, tokenization

flags.DEFINE_string("input_glob", None, "Text files to learn from (comma-separated globs).")
flags.DEFINE_string("model_prefix", None, "Writes PREFIX.model and PREFIX.vocab.")
flags.DEFINE_integer("vocab_size", 32000, "Pieces in the model (specials included).")
flags.DEFINE_bool("uncased", False, "Lower-case the text first (then create records with "
                  "--uncased too).")
flags.DEFINE_integer("seed", 0, "Seed of SentencePiece's sampling.")
FLAGS = flags.FLAGS

BY = "data_utils/train_tokenizer.py"
# what each setting is called in a refusal
_SHOWN = {"vocab_size": "--vocab_size", "uncased": "--uncased", "seed": "--seed",
          "inputs": "the input text (names, sizes and bytes of --input_glob's files)"}


def _sidecar(prefix):
  """PREFIX.json as written by this script, or None (absent, unreadable, someone else's)."""
  path = prefix + ".json"
  try:
    data = json.loads(fileio.read_bytes_light(path).decode("utf-8"))
  except (OSError, ValueError, UnicodeDecodeError):
    return None
  if not isinstance(data, dict) or data.get("by") != BY or \
      not isinstance(data.get("settings"), dict):
    return None
  return data


def check_existing(prefix, settings):
  """None when PREFIX's files may be written; "complete" when PREFIX.model was made by this
  script from these settings; else raises ValueError (one line) saying what is there."""
  model, side = prefix + ".model", _sidecar(prefix)
  flag = f"--model_prefix={prefix}"
  if not outputs.exists(model):
    for other in (prefix + ".json", prefix + ".vocab"):
      if outputs.exists(other) and side is None:
        raise ValueError(f"{flag}: {other} exists and was not written by this script; pass "
                         "another --model_prefix (nothing was written)")
    return None
  if side is None:
    raise ValueError(f"{flag}: {model} exists and was not written by this script (no "
                     f"{fileio.basename(prefix)}.json beside it); pass another --model_prefix "
                     "(nothing was written)")
  if side.get("model_sha256") != fingerprint.file_sha256(model):
    raise ValueError(f"{flag}: {model} changed since this script wrote it; pass another "
                     "--model_prefix (nothing was written)")
  old = side["settings"]
  differ = [f"{_SHOWN.get(k, k)}" + (f"={settings[k]} (the model's: {old.get(k)})"
                                     if k != "inputs" else " differs")
            for k in settings if old.get(k) != settings[k]]
  if differ:
    raise ValueError(f"{flag}: {model} was trained with other settings: {'; '.join(differ)}; "
                     "pass another --model_prefix (nothing was written)")
  return "complete"


def main(argv):
  del argv
  if not FLAGS.input_glob or not FLAGS.model_prefix:
    sys.exit("train_tokenizer.py: --input_glob and --model_prefix are required")
  prefix = FLAGS.model_prefix
  if prefix.endswith("/") or (outputs.exists(prefix) and outputs.isdir(prefix)):
    sys.exit(f"train_tokenizer.py: --model_prefix={prefix}: is a directory; pass a prefix of "
             f"file names, e.g. --model_prefix={prefix.rstrip('/')}/spiece (writes "
             f"{prefix.rstrip('/')}/spiece.model)")
  try:
    for suffix in (".model", ".vocab", ".json"):
      outputs.check_file(prefix + suffix, "model_prefix")
  except ValueError as e:
    sys.exit(f"train_tokenizer.py: {e}")
  paths = fileio.glob_files_light(FLAGS.input_glob)
  if not paths:
    sys.exit(f"train_tokenizer.py: --input_glob={FLAGS.input_glob} matched no files")
  settings = {"vocab_size": FLAGS.vocab_size, "uncased": FLAGS.uncased, "seed": FLAGS.seed,
              "inputs": fingerprint.files_digest(paths)}
  try:
    if check_existing(prefix, settings) == "complete":
      print(f"{prefix}.model: already complete (same input text and settings); nothing to do")
      return
  except ValueError as e:
    sys.exit(f"train_tokenizer.py: {e}")
  try:
    proto = tokenization.train_sentencepiece_proto(paths, FLAGS.vocab_size,
                                                   lower=FLAGS.uncased, seed=FLAGS.seed)
  except RuntimeError as e:
    sys.exit(f"train_tokenizer.py: SentencePiece failed: {str(e).splitlines()[0]}")
  pieces = tokenization.piece_count(proto)
  sidecar = json.dumps({"by": BY, "settings": settings, "pieces": pieces,
                        "model_sha256": hashlib.sha256(proto).hexdigest()}, indent=1,
                       sort_keys=True) + "\n"
  model = tokenization.write_sentencepiece(proto, prefix, sidecar)
  if pieces < FLAGS.vocab_size:
    print(f"warning: asked for {FLAGS.vocab_size} pieces, the corpus gave {pieces}: "
          f"SentencePiece stops at the pieces the text holds; records and models take "
          f"{pieces} from {model} (more text gives more, a smaller --vocab_size silences this)")
  print(f"wrote {model} ({pieces} pieces, XLNet symbols at ids 0-8)")


if __name__ == "__main__":
  cli_app.run(main)
