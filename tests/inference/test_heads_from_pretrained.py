"""`inference.from_pretrained` on models of modeling/heads.py: a Hugging Face
*ForTokenClassification directory of either family tags raw text as transformers' own model
predicts it (the argmax of its logits at each word's first piece), with character offsets that
cut the entity's words out of the text; a run_pairs.py run embeds with its own pooling."""

import numpy as np
import pytest

pytestmark = pytest.mark.slow    # tiny HF models built and run on both sides

import inference
from finetuning import tagging_features
from tests import hf_dirs
from tests.reference_libs import require

torch = require("torch")
require("transformers")

LABELS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
TEXTS = ["A much  longer sentence, with many more words than the others", "yes",
         "Mid length\ttext is here", ""]


@pytest.fixture(scope="module")
def directories(tmp_path_factory):
  d = tmp_path_factory.mktemp("tagger")
  sp = hf_dirs.train_sp_model(d)
  out = {"xlnet": (d / "xlnet", hf_dirs.xlnet_dir(d / "xlnet", sp, "XLNetForTokenClassification",
                                                 labels=LABELS)),
         "mpnet": (d / "mpnet", hf_dirs.mpnet_dir(d / "mpnet", "MPNetForTokenClassification",
                                                 labels=LABELS))}
  for _, hf in out.values():      # tags of several kinds, not all O
    with torch.no_grad():
      hf.classifier.bias.copy_(torch.tensor([0.0, 0.3, 0.3, 0.3, 0.3]))
      hf.classifier.weight.mul_(40.0)
  for path, hf in out.values():
    hf.save_pretrained(str(path), safe_serialization=True)
  return out


def _hf_word_tags(hf, model, words, family):
  """transformers' predictions: its logits on each row, argmax at each word's first piece."""
  tags = []
  for row in tagging_features.encode_words(model.tokenizer, words, model.max_length, family):
    kwargs = {"attention_mask": torch.tensor(1.0 - row["input_mask"][None])}
    if family == "xlnet":
      kwargs["token_type_ids"] = torch.tensor(row["seg_ids"][None]).long()
    with torch.no_grad():
      logits = hf(torch.tensor(row["input_ids"][None]).long(), **kwargs).logits[0].numpy()
    tags += [LABELS[int(np.argmax(logits[c]))] if c >= 0 else "O" for c in row["first_piece"]]
  return tags


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_a_hugging_face_tagger_tags_raw_text_as_transformers(directories, family):
  path, hf = directories[family]
  lines = []
  model = inference.from_pretrained(str(path), log=lines.append)
  assert model.head == "tagger" and model.labels == LABELS
  assert f"tagger over {len(LABELS)} labels" in lines[0]
  seen = set()
  for text, got in zip(TEXTS, model.tag(TEXTS)):
    words = text.split()
    assert got["text"] == text and got["tags"] == _hf_word_tags(hf, model, words, family)
    seen.update(got["tags"])
    for e in got["entities"]:
      assert e["text"] == text[e["start"]:e["end"]]
      inside = text[e["start"]:e["end"]].split()
      assert inside and inside[0] in words and not text[e["start"]].isspace()
  assert len(seen - {"O"}) >= 2, seen
  with pytest.raises(ValueError, match="holds no classification head"):
    model.predict(["x"])


def test_tag_needs_a_tagger(directories, tmp_path):
  sp = hf_dirs.train_sp_model(tmp_path)
  hf_dirs.xlnet_dir(tmp_path / "enc", sp, "XLNetModel")
  model = inference.from_pretrained(str(tmp_path / "enc"), log=None)
  with pytest.raises(ValueError, match=r"^tag: .* holds no token tagger"):
    model.tag(["x"])
