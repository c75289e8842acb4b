"""The token-tagging SavedModel on raw text (serving/tagging_graph.py): its entity spans, tags and
character offsets equal the Python path's (finetuning/tag_spans.py, through
tagging_features.encode_words and word_predictions) on invalid UTF-8, accents, CJK, runs of
spaces and tabs, the empty text and texts longer than a row (several windows); XLNet with
SentencePiece (rows left padded) and MPNet with WordPiece (right padded). With the classifier
forced to one tag, the spans are written out by hand."""

import json
import os
import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_utils import tokenization, wordpiece
from finetuning import tag_spans, tagging_features
from modeling import families
from modeling.run_config import RunConfig
from serving import tagging_graph, utf8
from tests import warm
from tests import hf_dirs

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
MAX_LEN = 12                      # 10 pieces a row: the longer texts take several windows
LONG = "a much longer sentence with many more words than the others have " * 3
TEXTS = ["A short one.  Mid length\ttext is here", "", b"yes \xff x the caf\xc3 b",
         "Café  Müller in 東京 — naïve\u00a0x!", "   \t ", LONG,
         "x " + "y" * 40 + " words"]   # a word longer than a row: alone in its row, cut
RUN = RunConfig(dropout=0.0, dropatt=0.0)
SPEC = {"type": "token_tagger", "n_class": len(LABELS), "labels": LABELS}
# TF Serving's way of loading (a TF1 session), in a process importing only TF and tensorflow_text
_SESSION = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
  sig = tf.compat.v1.saved_model.load(sess, ["serve"], sys.argv[1]).signature_def["serving_default"]
  got = sess.run({k: v.name for k, v in sig.outputs.items()},
                 {sig.inputs["text"].name: [t.encode("latin-1") for t in json.loads(sys.argv[2])]})
print(json.dumps({k: [[x.decode() for x in r] if v.ndim == 2 else r.decode() for r in v]
                  if v.dtype == object else v.tolist() for k, v in got.items()}))
"""


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
  root = tmp_path_factory.mktemp("tag")
  sp = tokenization.Tokenizer(hf_dirs.train_sp_model(root), lower=True)
  hf_dirs.mpnet_dir(root / "mpnet", "MPNetForTokenClassification")
  wp = wordpiece.WordPieceTokenizer(str(root / "mpnet" / "vocab.txt"), lower_case=True)
  return {"xlnet": sp, "mpnet": wp}


def _model(family, tok, seed, kernel_scale=2.0, bias=(0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.5)):
  """A tiny tagger; its classifier set so that several entity types come out untrained."""
  if family == "xlnet":
    config = dict(n_token=tok.vocab_size, n_layer=2, d_model=16, n_head=2, d_head=8,
                  d_inner=32)
  else:
    config = dict(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=32, max_position_embeddings=40,
                  pad_token_id=tok.pad_id)
  model = families.get(family).with_head(config, RUN, SPEC).ensure_built()
  rng = np.random.default_rng(seed)
  kernel = model.head.classifier.kernel
  kernel.assign(rng.normal(0, kernel_scale, kernel.shape).astype(np.float32))
  model.head.classifier.bias.assign(np.array(bias, np.float32))
  return model


def _decoded(values):
  return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(values)


def _served(export_dir, texts):
  fn = tf.saved_model.load(export_dir).signatures["serving_default"]
  out = fn(text=tf.constant(np.array(texts, object)))
  return {k: _decoded(v.numpy()) if v.dtype == tf.string else v.numpy() for k, v in out.items()}


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_served_spans_equal_the_python_path(family, tokenizers, tmp_path):
  tok = tokenizers[family]
  model = _model(family, tok, seed=3)
  export_dir = str(tmp_path / "export")
  tag_spans.export_tagger(model, tok, family, MAX_LEN, LABELS, export_dir,
                          log=lambda _: None, max_entities=40, max_words=40)
  got = _served(export_dir, TEXTS)
  want = tag_spans.served_outputs(model, tok, family, MAX_LEN, LABELS, TEXTS, 40, 40)
  for key, value in want.items():
    np.testing.assert_array_equal(got[key], value, err_msg=key)
  if family == "xlnet":         # the same through a TF1 session, request bytes as they are
    raw = [(t if isinstance(t, bytes) else t.encode("utf-8")).decode("latin-1") for t in TEXTS]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = warm.run([sys.executable, "-c", _SESSION, export_dir, json.dumps(raw)],
                         capture_output=True, text=True, env=env, check=True)
    session = json.loads(run.stdout.strip().splitlines()[-1])
    for key, value in want.items():
      np.testing.assert_array_equal(np.array(session[key], value.dtype), value, err_msg=key)
  tagged = tag_spans.predict_spans(model, tok, family, MAX_LEN, LABELS, TEXTS)
  # the inputs exercise what they should: several windows, several types, multi-word entities
  assert len(tagging_features.encode_words(tok, LONG.split(), MAX_LEN, family)) >= 3
  spans = [s for t in tagged for s in t.spans]
  assert len({kind for kind, _, _ in spans}) >= 2
  assert any(" " in text[s:e] for t in tagged for _, s, e in t.spans for text in [t.text])
  assert not got["truncated"].any() and got["count"].sum() == len(spans)
  # character offsets: each entity runs from a word's start to a word's end (words found here
  # by a regular expression on the decoded text), over words tagged X, the first B-X or I-X
  for k, text in enumerate(TEXTS):
    text = utf8.python_text(text)
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    tags = got["tags"][k][:len(words)]
    assert list(got["tags"][k][len(words):]) == [""] * (40 - len(words))
    for e in range(got["count"][k]):
      kind, start, end = got["entity_type"][k, e], got["start"][k, e], got["end"][k, e]
      first = [w for w, (s, _) in enumerate(words) if s == start]
      last = [w for w, (_, x) in enumerate(words) if x == end]
      assert first and last, (text, start, end)
      assert tags[first[0]] in (f"B-{kind}", f"I-{kind}")
      assert all(t == f"I-{kind}" for t in tags[first[0] + 1:last[0] + 1])
      assert " ".join(text[start:end].split()) == " ".join(w for w in text.split()[first[0]:
                                                                                  last[0] + 1])


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_forced_tags_give_hand_written_spans(family, tokenizers):
  """Classifier kernel 0: every word with a piece gets the tag of the largest bias. I-PER
  everywhere makes each text one PER entity from its first word to its last (across the rows
  of a long text); B-LOC makes each word its own entity. Offsets in characters, by hand."""
  tok = tokenizers[family]
  texts = ["  Zürich\t東京  x  ", "ab", "", "héllo wörld " * 6]
  ends = {0: (2, 14), 1: (0, 2), 3: (0, 71)}
  for bias, want in (
      ((0, 0, 9, 0, 0, 0, 0), [[("PER", *ends[0])], [("PER", *ends[1])], [], [("PER", *ends[3])]]),
      ((0, 0, 0, 9, 0, 0, 0), [[("LOC", 2, 8), ("LOC", 9, 11), ("LOC", 13, 14)],
                               [("LOC", 0, 2)], [],
                               [("LOC", 12 * k + d, 12 * k + d + 5) for k in range(6)
                                for d in (0, 6)]])):
    model = _model(family, tok, seed=0, kernel_scale=0.0, bias=bias)
    module = tagging_graph.tagger_module(model, tok, family, MAX_LEN, LABELS, max_entities=16,
                                         max_words=16)
    got = module.serving_default(tf.constant(texts))
    got = {k: _decoded(v.numpy()) if v.dtype == tf.string else v.numpy() for k, v in got.items()}
    for k, spans in enumerate(want):
      assert got["count"][k] == len(spans)
      assert [(got["entity_type"][k, e], got["start"][k, e], got["end"][k, e])
              for e in range(len(spans))] == spans
      assert (got["start"][k, len(spans):] == -1).all()
    assert got["truncated"].tolist() == [False] * 4


def test_outputs_past_the_widths_are_cut_and_flagged(tokenizers):
  """More entities than max_entities / words than max_words: the first ones, truncated set."""
  tok = tokenizers["xlnet"]
  model = _model("xlnet", tok, seed=0, kernel_scale=0.0, bias=(0, 9, 0, 0, 0, 0, 0))
  module = tagging_graph.tagger_module(model, tok, "xlnet", MAX_LEN, LABELS, max_entities=3,
                                       max_words=4)
  out = module.serving_default(tf.constant(["a b c d e", "a b c", "a b c d"]))
  assert out["count"].numpy().tolist() == [3, 3, 3]
  assert out["start"].numpy().tolist() == [[0, 2, 4]] * 3
  assert out["truncated"].numpy().tolist() == [True, False, True]
  assert _decoded(out["tags"].numpy()).tolist() == [["B-PER"] * 4, ["B-PER"] * 3 + [""],
                                                    ["B-PER"] * 4]


def test_rows_kept_at_max_seq_length_same_answers(tokenizers):
  """padding="max" (rows not cut to the batch's longest; XLNet rows are left padded, so the
  first-piece columns move with the width): the Python path's answers still."""
  tok = tokenizers["xlnet"]
  model = _model("xlnet", tok, seed=3)
  module = tagging_graph.tagger_module(model, tok, "xlnet", MAX_LEN, LABELS, 40, 40,
                                       padding="max")
  got = module.serving_default(tf.constant(np.array(TEXTS, object)))
  want = tag_spans.served_outputs(model, tok, "xlnet", MAX_LEN, LABELS, TEXTS, 40, 40)
  for key, value in want.items():
    value_got = got[key].numpy()
    np.testing.assert_array_equal(_decoded(value_got) if value_got.dtype == object else value_got,
                                  value, err_msg=key)


def test_label_codes_by_hand_and_a_bad_label_refused():
  prefix, kind, types = tagging_graph.label_codes(["O", "B-PER", "I-LOC", "B-LOC", "I-PER"])
  assert types == ["LOC", "PER"]
  assert prefix.tolist() == [0, 1, 2, 1, 2, 0]           # the extra last class: no piece, O
  assert kind.tolist() == [-1, 1, 0, 0, 1, -1]
  with pytest.raises(ValueError, match="label 'PER' is not O, B-TYPE or I-TYPE"):
    tagging_graph.label_codes(["O", "PER"])
