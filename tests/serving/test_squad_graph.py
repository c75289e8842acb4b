"""serving/squad_graph.py: the in-graph windows and answers equal the Python path's
(squad_features.make_features, squad.extract_answers, SquadTask.predict's files), inside one
tf.function whose inputs have an unknown batch (as a SavedModel signature)."""

import json
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

from finetuning import squad, squad_features
from serving import squad_graph, utf8

RAGGED = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)
STRINGS = tf.TensorSpec([None], tf.string)
# Whitespace that Python's str.strip() removes and tf.strings.strip() (ASCII only) does not.
SPACES = [" ", "\t", "\n", "\u00a0", "\u2009", "\u3000", "\u2028", "\x1c", "\x85"]


class _Words:
  """A WordPiece-like stand-in: each whitespace word is 1-3 pieces (words_with_offsets path)."""
  bos_id, eos_id, pad_id = 1, 2, 0

  def encode_lines(self, lines):
    return [[10 + ord(c) % 40 for w in line.split() for c in w[:1 + len(w) % 3]]
            for line in lines]


def _ragged(rows):
  return tf.RaggedTensor.from_row_lengths(
      tf.constant([x for r in rows for x in r], tf.int32, shape=[sum(map(len, rows))]),
      tf.constant([len(r) for r in rows], tf.int64))


def _infos(windows, starts, ends):
  """make_features' infos from make_windows' (equal, see the windows test) + piece spans."""
  infos = []
  for f, ex in enumerate(windows["example_index"].numpy()):
    ss, n = windows["span_start"][f].numpy(), windows["length"][f].numpy()
    infos.append({"example_index": ex, "span_start": ss, "length": n,
                  "doc_offset": windows["doc_offset"][f].numpy(),
                  "starts": starts[ex][ss:ss + n], "ends": ends[ex][ss:ss + n]})
  return infos


def test_python_whitespace_lies_below_the_table():
  assert max(c for c in range(sys.maxunicode + 1) if chr(c).isspace()) < utf8.SPACE_LIMIT


@pytest.mark.parametrize("model_type", ["xlnet", "mpnet"])
def test_windows_equal_make_features(model_type):
  tok, rng = _Words(), random.Random(0)
  words = "a bb ccc dddd ee f gg".split()
  sentence = lambda n: " ".join(rng.choice(words) for _ in range(n))
  examples = [squad_features.SquadExample(f"q{k}", sentence(q), sentence(n))
              for k, (n, q) in enumerate((n, q) for n in (0, 1, 2, 4, 5, 9, 12, 13, 20, 37)
                                         for q in (0, 1, 3, 7))]
  specials = squad_features.SPECIAL_TOKENS[model_type]
  queries = _ragged(tok.encode_lines([ex.question for ex in examples]))
  docs = _ragged([squad_features.words_with_offsets(tok, ex.context)[0] for ex in examples])
  for seq, stride, query in [(16, 3, 4), (16, 16 - 4 - specials, 4), (12, 1, 3), (24, 5, 8),
                             (11 + specials, 10, 1)]:
    windows = tf.function(
        lambda q, d: squad_graph.make_windows(q, d, seq, stride, query, model_type, 1, 2, 0),
        input_signature=[RAGGED, RAGGED])(queries, docs)
    arrays, infos = squad_features.make_features(tok, examples, seq, stride, query,
                                                 model_type=model_type)
    assert len(infos) > 2 * len(examples)
    for k, want in arrays.items():
      assert windows[k].dtype == want.dtype, k
      np.testing.assert_array_equal(windows[k].numpy(), want, err_msg=f"{k} {seq} {stride}")
    for k in squad_graph.WINDOW_INFOS:
      np.testing.assert_array_equal(windows[k].numpy(), [info[k] for info in infos], err_msg=k)
  assert any(len(squad_features.words_with_offsets(tok, ex.context)[0]) == 16 - specials - len(
      tok.encode_lines([ex.question])[0]) for ex in examples)        # exactly one window's room


def test_extract_best_equals_extract_answers_on_random_beams():
  """Hostile spans (leading/trailing Unicode whitespace, zero width, all whitespace, past the
  end), non-BMP characters, and integer log-probabilities so that scores tie everywhere."""
  rng = np.random.default_rng(0)
  alphabet = list("ab é,.0\"'") + ["北", "\U0001F600", "ǅ"] + SPACES
  examples, starts, ends = [], [], []
  for k in range(60):
    context = "".join(rng.choice(alphabet, rng.integers(0, 40)))
    n = int(rng.integers(0, 30))
    s = np.sort(rng.integers(0, len(context) + 2, n))              # may pass the end
    e = s + rng.integers(0, 4, n)
    examples.append(squad_features.SquadExample(f"q{k}", "", context))
    starts.append(s.tolist())
    ends.append(e.tolist())
  queries = _ragged([[7] * int(rng.integers(0, 5)) for _ in examples])
  seq, n_top, e_top, max_answer = 16, 3, 4, 5
  args = (_ragged(starts), _ragged(ends), tf.constant([ex.context for ex in examples]))
  windows = squad_graph.make_windows(queries, _ragged([[9] * len(s) for s in starts]), seq, 3, 4)
  w = len(windows["length"])
  outs = {"cls_logits": rng.normal(size=w).astype(np.float32),
          "start_top_index": rng.integers(0, seq, (w, n_top)).astype(np.int32),
          "end_top_index": rng.integers(0, seq, (w, n_top * e_top)).astype(np.int32),
          "start_top_log_probs": -rng.integers(0, 3, (w, n_top)).astype(np.float32),
          "end_top_log_probs": -rng.integers(0, 3, (w, n_top * e_top)).astype(np.float32)}
  outs["end_top_log_probs"][::3] += 0.25
  preds, nbest, odds = squad.extract_answers(examples, _infos(windows, starts, ends), outs,
                                             n_top, e_top, max_answer, 20)
  best = tf.function(
      lambda o, win, *a: squad_graph.extract_best(o, win, *a, n_top, e_top, max_answer))(
          outs, windows, *args)
  ties = 0
  for k, ex in enumerate(examples):
    top = nbest[ex.qas_id][0]
    ties += len(nbest[ex.qas_id]) > 1 and nbest[ex.qas_id][1]["log_score"] == top["log_score"]
    assert best["answer"][k].numpy().decode() == preds[ex.qas_id] == top["text"], k
    assert (best["start"][k], best["end"][k]) == (top["start"], top["end"]), k
    assert best["score"][k] == top["log_score"]
    if top["start"] >= 0:
      assert ex.context[top["start"]:top["end"]] == top["text"]
    np.testing.assert_allclose(best["no_answer_probability"][k],
                               1 / (1 + np.exp(-odds[ex.qas_id])), rtol=1e-6)
  assert ties > 10                                     # the tie rule was exercised
  assert sum(p != "" for p in preds.values()) >= 20
  assert any(v[0]["text"] == "" and len(v) > 1 for v in nbest.values())   # "" as a candidate
  assert any(ex.context[t["start"] - 1].isspace() for ex, t in
             ((ex, nbest[ex.qas_id][0]) for ex in examples) if t["start"] > 0)


# ---- end to end: SquadTask.predict's files vs one tf.function ------------------------------
CONTEXTS = [
    "The Café Müller, founded in 1,905 by Zoë Ångström, served \"strong\" coffee ``daily'' to "
    "12,000 guests.\u00a0Visitors paid 3,50 francs each; in 2,001 it closed. Many\u2009people "
    "still talk about the naïve façade, the old piano and the garden of 1,200 roses behind it. "
    "Its owner, Renée O'Neil, said: \"we sold 40,000 cups in one year\".",
    "Élise walked 25,000 steps through Zürich's old town on a cold Sunday.  She met her "
    "friend \u3000 José near the lake, where 1,500 swans swim every winter. They ate crêpes "
    "and spoke about the \"great\" storm of 1,999, which broke 3,000 windows in one night.",
]
QUESTIONS = [[("q0", "Who founded the Café Müller?"), ("q1", "How many guests came?"),
              ("q2", "What did the owner say about the 40,000 cups?")],
             [("q3", "How many steps did Élise walk?"), ("q4", "Who owned the blue boat?"),
              ("q5", "")]]


def _dev_file(path):
  data = [{"title": "t", "paragraphs": [{"context": c, "qas": [
      {"id": qid, "question": q, "answers": [], "is_impossible": qid in ("q4", "q5")}
      for qid, q in qs]}]} for c, qs in zip(CONTEXTS, QUESTIONS)]
  path.write_text(json.dumps({"version": "2.0", "data": data}))
  return path


def _randomize(model, seed, scale):
  rng = np.random.default_rng(seed)
  for v in model.trainable_variables:
    v.assign(rng.normal(0, scale, v.shape).astype(np.float32))


def _end_to_end(tmp_path, tokenizer, model, model_type, export=False):
  flags = dict(max_seq_length=40, doc_stride=13, max_query_length=10, start_n_top=4,
               end_n_top=3, max_answer_length=40)
  config = squad.SquadConfig(model_dir=str(tmp_path), n_best_size=20, predict_batch_size=64,
                             model_type=model_type, **flags)
  task = squad.SquadTask(config, None, None, tokenizer)
  dev = _dev_file(tmp_path / "dev.json")
  task.predict(model, str(dev), str(tmp_path / "out"))
  preds, nbest, odds = (json.loads((tmp_path / "out" / f).read_text()) for f in
                        ("predictions.json", "nbest_predictions.json", "null_odds.json"))

  examples, _ = squad_features.read_squad(str(dev), False)
  spans = [(squad_features.tokenize_with_offsets(tokenizer, ex.context)
            if hasattr(tokenizer, "sp") else squad_features.words_with_offsets(tokenizer,
                                                                              ex.context))
           for ex in examples]
  special = {k: getattr(tokenizer, k, None) for k in ("bos_id", "eos_id", "pad_id")}

  @tf.function(input_signature=[RAGGED] * 4 + [STRINGS])
  def serve(query_ids, doc_ids, doc_starts, doc_ends, contexts):
    windows = squad_graph.make_windows(query_ids, doc_ids, flags["max_seq_length"],
                                       flags["doc_stride"], flags["max_query_length"],
                                       model_type, **special)
    outputs = model({k: windows[k] for k in squad_graph.MODEL_INPUTS}, training=False)
    best = squad_graph.extract_best(outputs, windows, doc_starts, doc_ends, contexts,
                                    flags["start_n_top"], flags["end_n_top"],
                                    flags["max_answer_length"])
    return dict(best, windows=tf.size(windows["length"]))

  inputs = (_ragged(tokenizer.encode_lines([ex.question for ex in examples])),
            *(_ragged([s[i] for s in spans]) for i in range(3)),
            tf.constant([ex.context for ex in examples]))
  got = serve(*inputs)
  if export:                     # the function saves and reloads with its unknown batch
    module = tf.Module()          # weights tracked, the Keras model only closed over (as
    module.model_weights, module.serve = list(model.weights), serve   # serving/export.py)
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))      # kept: it owns the variables
    again = loaded.serve(*inputs)
    for k, v in got.items():
      np.testing.assert_array_equal(again[k].numpy(), v.numpy(), err_msg=k)
  assert got["windows"] >= 2 * len(examples)                   # contexts span windows
  for k, ex in enumerate(examples):
    top = nbest[ex.qas_id][0]
    assert got["answer"][k].numpy().decode() == preds[ex.qas_id] == top["text"]
    assert (got["start"][k], got["end"][k]) == (top["start"], top["end"])
    if top["start"] >= 0:
      assert ex.context[top["start"]:top["end"]] == top["text"]
    np.testing.assert_allclose(got["score"][k], top["log_score"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["no_answer_probability"][k],
                               1 / (1 + np.exp(-odds[ex.qas_id])), rtol=1e-5)
  answers = [p for p in preds.values() if p]
  assert len(set(answers)) >= 3, preds                         # varied, not all empty
  assert any(any(not c.isascii() or c.isdigit() for c in a) for a in answers), preds
  return preds


@pytest.mark.slow
def test_end_to_end_xlnet(tmp_path, tok):
  from modeling.xlnet.config import XLNetConfig
  from modeling.xlnet.models import XLNetSquadModel
  config = XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                       n_token=tok.vocab_size)
  model = XLNetSquadModel(config, start_n_top=4, end_n_top=3).ensure_built()
  _randomize(model, 0, 0.5)
  _end_to_end(tmp_path, tok, model, "xlnet", export=True)


@pytest.mark.slow
def test_end_to_end_mpnet_wordpiece(tmp_path):
  import re
  import unicodedata
  from data_utils.wordpiece import WordPieceTokenizer
  from modeling.mpnet import encoder as mpnet
  from modeling.mpnet import models as mpnet_models
  plain = lambda w: "".join(c for c in unicodedata.normalize("NFD", w.lower())
                            if not unicodedata.combining(c))
  words = sorted({plain(w) for c in CONTEXTS for w in re.findall(r"\w+", c)})
  pieces = (["<s>", "<pad>", "</s>", "<unk>", "[UNK]", "<mask>"] + list(".,;:!?'\"`")
            + words[::2] + ["##" + w for w in words[1::2]] + ["##s"])
  (tmp_path / "vocab.txt").write_text("".join(p + "\n" for p in dict.fromkeys(pieces)))
  tok = WordPieceTokenizer(str(tmp_path / "vocab.txt"))
  config = mpnet.MPNetConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=64,
                             max_position_embeddings=80, pad_token_id=tok.pad_id)
  model = mpnet_models.MPNetSquadModel(config, start_n_top=4, end_n_top=3).ensure_built()
  _randomize(model, 1, 0.3)
  _end_to_end(tmp_path, tok, model, "mpnet")
