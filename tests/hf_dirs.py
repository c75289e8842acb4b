"""Tiny Hugging Face XLNet and MPNet directories and their texts, for the tests that compare
this project's models with transformers' and sentence-transformers' on the same weights."""

import json

from data_utils import tokenization
from modeling import tokenizer_files
from tests.reference_libs import require

transformers = require("transformers")
torch = require("torch")

TEXTS = ["A short one.", "A much longer sentence, with many more words than the others have.",
         "Mid length text is here", "x"]
TEXTS_B = ["and a second text", "b", "the second text of the third pair is longer", "yes"]
WORDS = sorted({w.strip(".,").lower() for t in TEXTS + TEXTS_B for w in t.split()} - {""})


def train_sp_model(directory):
  """A lower-casing SentencePiece model of 60 pieces trained on the texts, in `directory`."""
  text = directory / "text.txt"
  text.write_text("\n".join((TEXTS + TEXTS_B) * 20 + [" ".join(WORDS)] * 5) + "\n")
  return tokenization.train_sentencepiece([str(text)], str(directory / "sp"), 60, lower=True)


def xlnet_dir(path, sp_model, architecture, labels=("neg", "neutral", "pos")):
  config = transformers.XLNetConfig(
      vocab_size=64, d_model=16, n_layer=2, n_head=2, d_inner=24, ff_activation="gelu",
      num_labels=len(labels), id2label=dict(enumerate(labels)),
      label2id={l: i for i, l in enumerate(labels)}, pad_token_id=5)
  torch.manual_seed(0)
  model = getattr(transformers, architecture)(config).eval()
  model.save_pretrained(str(path), safe_serialization=True)
  tokenizer_files.write(str(path), tokenizer_files.Source(tokenizer_files.SENTENCEPIECE,
                                                          sp_model, True), "xlnet")
  return model


def mpnet_dir(path, architecture, labels=("no", "yes"), **extra):
  """A Hugging Face MPNet directory as a release ships it: WordPiece vocab.txt (pad 1) and a
  tokenizer_config.json, no record of this project's."""
  pieces = (["<s>", "<pad>", "</s>", "<unk>", "[UNK]", "<mask>"] + list(".,!?")
            + WORDS + ["##s", "##er", "##ing"])
  path.mkdir(exist_ok=True)
  (path / "vocab.txt").write_text("".join(p + "\n" for p in dict.fromkeys(pieces)))
  (path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
  config = transformers.MPNetConfig(
      vocab_size=len(pieces) + 3, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
      intermediate_size=32, max_position_embeddings=40, pad_token_id=1, bos_token_id=0,
      eos_token_id=2, num_labels=len(labels), id2label=dict(enumerate(labels)),
      label2id={l: i for i, l in enumerate(labels)}, **extra)
  torch.manual_seed(1)
  model = getattr(transformers, architecture)(config).eval()
  model.save_pretrained(str(path), safe_serialization=True)
  return model
