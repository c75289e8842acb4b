"""Hostile bytes at the server (#31): every kind of export, fed raw BYTES (invalid sequences, lone
continuation bytes, overlong forms, encoded surrogates, code points past U+10FFFF, NUL, a
multi-byte character cut at the end, mixed with valid text), gives the Python path's outputs on
the same bytes decoded with U+FFFD replacement (serving/utf8.py): ids, answers, offsets, logits.
Answers are valid UTF-8 and `context[start:end] == answer` in the code points of the decoded
context. One hostile row in a batch changes nothing for the other rows.

The exports are built once per module (each task module's export_* function, which also runs its self-check) and
loaded back as a server loads them; inputs are drawn by hypothesis with a fixed seed
(tests/fuzz_helpers.py), about 150 batches in all.
"""

import types

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import example, given
from hypothesis import strategies as st

from finetuning import classifier_data, classifier_task, race, squad, squad_features
from modeling.mpnet import encoder as mpnet
from modeling.mpnet import models as mpnet_models
from modeling.xlnet.models import (XLNetClassifier, XLNetPretrainModel, XLNetRaceModel,
                             XLNetSquadModel)
from serving import export, squad_graph, tasks, utf8
from tests.fuzz_helpers import fuzz_settings
from tests.serving.test_serving import (RUN, TEXTS, _randomize, _squad_task, _xlnet_config,
                                tokenizers)  # noqa: F401  (a module-scoped fixture)

pytestmark = pytest.mark.slow   # a long system test (pyproject.toml)

HOSTILE = [
    b"\xff", b"\xfe", b"\x80", b"\xbf\x80", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf",
    b"\xf0\x80\x80\xaf",                                   # overlong forms of "/" and U+007F
    b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xa0\xbd\xed\xb8\x80",   # encoded surrogates
    b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80",   # > U+10FFFF
    b"\x00", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98",         # NUL, cut multi-byte characters
    b"\xef\xbb\xbf", b"\xef\xbf\xbd", b"\xe2\x80\xa8", b"\xc2\x85", b"\x1c"]   # valid, odd
WORDS = [w.encode() for w in (
    "Café Müller founded in 2000, sold 1,000 ``pastries'' to the Élysée. 東京は Tokyo! ½ "
    "naïve ΣΟΦΟΣ İstanbul ﬁne <mask> <s> </s> _ committee met Zürich Kraków who when").split()]
SPACES = [b" ", b" ", b"  ", b"\t", b"\n", b"\xc2\xa0", b"\xe3\x80\x80"]
CUT_ENDS = [b"", b"", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0", b"\xff"]
FRAGMENT = st.one_of(st.sampled_from(HOSTILE), st.sampled_from(WORDS), st.sampled_from(SPACES),
                     st.binary(max_size=4),
                     st.text(max_size=3).map(lambda t: t.encode("utf-8", "surrogatepass")))
RAW = st.builds(lambda parts, end: b"".join(parts) + end, st.lists(FRAGMENT, max_size=30),
                st.sampled_from(CUT_ENDS))
# contexts: mostly words, so that the SQuAD models find answers after the hostile bytes
CONTEXT = st.builds(lambda parts, end: b"".join(parts) + end, st.lists(
    st.one_of(FRAGMENT, st.sampled_from(WORDS), st.sampled_from(WORDS)), min_size=4,
    max_size=40).map(lambda ps: [p + b" " for p in ps]), st.sampled_from(CUT_ENDS))
# a context that made the old extract_best fail the whole batch ("pos .. out of range"): each
# encoded surrogate is three U+FFFD but one UTF8_CHAR to tf.strings.substr
CRASH = b"\xed\xa0\x80" * 12 + b" ".join(WORDS[:12])
BATCHES = lambda rows: st.lists(rows, min_size=1, max_size=4)


def _strings(rows):
  return tf.constant(list(rows), tf.string)


def _loaded(directory):
  return tf.saved_model.load(directory).signatures[export.SIGNATURE]


def _out(fn, **inputs):
  return {k: v.numpy() for k, v in fn(**{k: _strings(v) if np.ndim(v) == 1 else tf.constant(
      v, tf.string) for k, v in inputs.items()}).items()}


@pytest.fixture(scope="module")
def served(tmp_path_factory, tokenizers):  # noqa: F811
  """name -> (loaded serving_default, the Python path on the same inputs)."""
  root = tmp_path_factory.mktemp("hostile_exports")
  cased, uncased, wp = tokenizers["cased"], tokenizers["uncased"], tokenizers["wordpiece"]
  quiet = lambda _: None
  out = {}
  mconfig = mpnet.MPNetConfig(vocab_size=wp.vocab_size, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=64,
                              max_position_embeddings=80, pad_token_id=wp.pad_id)
  for name, tok, task_name, model_type, seed in (("mnli", cased, "mnli", "xlnet", 1),
                                                 ("mrpc_mpnet", wp, "mrpc", "mpnet", 2)):
    spec = classifier_data.get_task(task_name)
    model = (XLNetClassifier(_xlnet_config(tok.vocab_size), RUN, n_class=len(spec.labels),
                             task_name=task_name) if model_type == "xlnet"
             else mpnet_models.MPNetClassifier(mconfig, n_class=len(spec.labels)))
    model = _randomize(model.ensure_built(), seed)
    task = types.SimpleNamespace(config=types.SimpleNamespace(max_seq_length=24,
                                                              model_type=model_type),
                                 spec=spec, tokenizer=tok)
    out[name] = (_loaded(classifier_task.export_classifier(task, model, str(root / name), log=quiet)),
                 lambda a, b, t=task, m=model: classifier_task.classifier_outputs(t, m, a, b))
  race_model = _randomize(XLNetRaceModel(_xlnet_config(uncased.vocab_size), RUN).ensure_built(), 3)
  race_task = types.SimpleNamespace(config=types.SimpleNamespace(max_seq_length=32,
                                                                 model_type="xlnet"),
                                    tokenizer=uncased, max_qa_length=12)
  out["race"] = (_loaded(race.export_race(race_task, race_model, str(root / "race"), log=quiet)),
                 lambda a, q, o: race.race_outputs(race_task, race_model, a, q, o))
  for name, tok, make in (
      ("squad", cased, lambda: XLNetSquadModel(_xlnet_config(cased.vocab_size), RUN,
                                               start_n_top=3, end_n_top=3)),
      ("squad_mpnet", wp, lambda: mpnet_models.MPNetSquadModel(mconfig, start_n_top=3,
                                                               end_n_top=3))):
    model = _randomize(make().ensure_built(), 4)
    task = _squad_task(root, tok, model.config, "mpnet" if "mpnet" in name else "xlnet")
    out[name] = (_loaded(squad.export_squad(task, model, str(root / name), log=quiet)),
                 lambda q, c, t=task, m=model: squad.squad_python_path(t, m, q, c))
  enc = _randomize(XLNetPretrainModel(_xlnet_config(cased.vocab_size), RUN).ensure_built(), 5)
  out["encoder"] = (_loaded(tasks.export_encoder(enc, cased, 24, str(root / "encoder"),
                                                 log=quiet)),
                    lambda s: tasks.encoder_outputs(enc, cased, 24, s))
  return out


def _tied(logits, atol=1e-5):
  """Rows whose two largest logits are within atol (their label is float rounding's choice:
  rows padded to other lengths round differently, see packing.trim_padding)."""
  logits = np.asarray(logits, np.float64)
  if logits.ndim != 2 or logits.shape[1] < 2:
    return np.zeros(len(logits), bool)
  top = np.sort(logits, axis=1)
  return top[:, -1] - top[:, -2] <= atol * np.maximum(1.0, np.abs(top[:, -1]))


def _assert_equal(got, want, keys, what):
  """Served outputs == the Python path's: strings and ids exactly, floats to 1e-5 relative; a
  label (the argmax) where the logits do not tie within that tolerance."""
  for key in keys:
    have, expected = got[key], want[key]
    if key in ("label", "answer") and "logits" in want:
      keep = ~_tied(want["logits"])
      have, expected = have[keep], np.asarray(expected)[keep]
    if np.asarray(expected).dtype.kind in "OSU":
      text = [v.decode("utf-8") for v in have.reshape(-1)]      # strict: valid UTF-8
      assert text == [str(v) for v in np.asarray(expected, object).reshape(-1)], (what, key)
    elif key in ("start", "end", "input_ids", "input_mask"):
      np.testing.assert_array_equal(have, expected, err_msg=f"{what} {key}")
    else:
      np.testing.assert_allclose(have, expected, rtol=0, err_msg=f"{what} {key}",
                                 atol=1e-5 * max(1.0, float(np.max(np.abs(expected)))))


def _check_offsets(contexts, got, seen):
  for raw, answer, start, end in zip(contexts, got["answer"], got["start"], got["end"]):
    text, answer = utf8.python_text(raw), answer.decode("utf-8")
    assert text[start:end] == answer if answer else (start, end) == (-1, -1), (raw, answer)
    if answer and not raw.startswith(text[:start].encode()):      # invalid bytes before it
      seen["answers after invalid bytes"] += 1


# ---- the tokenizers on raw bytes ------------------------------------------------------------
@fuzz_settings(40)
@given(rows=BATCHES(RAW))
@example(rows=[b"ok \xff\xfe bad " * 3, b"\xed\xa0\x80 surrogate \xc0\xaf 2000, <mask>",
               b"Caf\xc3\xa9 \xe2\x82"])
def test_tokenizers_on_raw_bytes_equal_the_python_path(tokenizers, rows):  # noqa: F811
  texts = utf8.python_texts(rows)
  for name in ("cased", "uncased", "wordpiece"):
    py, graph = tokenizers[name], export.graph_tokenizer(tokenizers[name])
    assert graph.tokenize(_strings(rows)).to_list() == py.encode_lines(texts), name
    if name == "wordpiece":
      want = [squad_features.words_with_offsets(py, t) for t in texts]
      ids, starts, ends = graph.tokenize_words_with_offsets(_strings(rows))
    else:
      want = [squad_features.tokenize_with_offsets(py, t) for t in texts]
      ids, starts, ends = graph.tokenize_with_offsets(_strings(rows))
    assert [list(w) for w in zip(ids.to_list(), starts.to_list(), ends.to_list())] == [
        list(w) for w in want], name


# ---- every export on raw bytes ----------------------------------------------------------------
@fuzz_settings(20)
@given(pairs=BATCHES(st.tuples(RAW, RAW)))
def test_classifiers_serve_the_python_paths_outputs(served, pairs):
  a, b = [p[0] for p in pairs], [p[1] for p in pairs]
  for name in ("mnli", "mrpc_mpnet"):
    fn, python = served[name]
    _assert_equal(_out(fn, sentence=a, sentence_b=b), python(a, b),
                  ("logits", "probabilities", "label"), name)


@fuzz_settings(15)
@given(rows=BATCHES(st.tuples(CONTEXT, RAW, st.lists(RAW, min_size=4, max_size=4))))
def test_race_serves_the_python_paths_outputs(served, rows):
  articles, questions, options = ([r[i] for r in rows] for i in range(3))
  fn, python = served["race"]
  _assert_equal(_out(fn, article=articles, question=questions, options=options),
                python(articles, questions, options), ("logits", "probabilities", "answer"),
                "race")


@fuzz_settings(15)
@given(sentences=BATCHES(RAW))
def test_encoder_serves_the_python_paths_outputs(served, sentences):
  fn, python = served["encoder"]
  _assert_equal(_out(fn, sentence=sentences), python(sentences),
                ("input_ids", "input_mask", "sequence_output"), "encoder")


@pytest.mark.parametrize("name", ["squad", "squad_mpnet"])
def test_squad_answers_are_the_python_paths_and_valid_utf8(served, name):
  fn, python = served[name]
  seen = {"answers after invalid bytes": 0}

  @fuzz_settings(25)
  @given(pairs=BATCHES(st.tuples(RAW, CONTEXT)))
  @example(pairs=[(b"who founded \xff it?", CRASH), (b"\xed\xa0\x80", CRASH[::-1]),
                  (b"", b"\xe0\x80\xaf" * 9 + CRASH[36:])])
  def run(pairs):
    questions, contexts = [p[0] for p in pairs], [p[1] for p in pairs]
    got = _out(fn, question=questions, context=contexts)
    _assert_equal(got, python(questions, contexts),
                  ("answer", "start", "end", "score", "no_answer_probability"), name)
    _check_offsets(contexts, got, seen)

  run()
  assert seen["answers after invalid bytes"] >= 5, seen     # the shifted-answer case was tried


# ---- one hostile row in a batch ---------------------------------------------------------------
NORMAL = [t.encode() for t in TEXTS[:4]]
SQUAD_NORMAL = [(b"Who sold 1,000 pastries?", TEXTS[0].encode()),
                (b"When did the committee meet?", TEXTS[5].encode()),
                (b"Where is Tokyo?", TEXTS[1].encode())]


def _rows(out, k):
  return {key: v[k] for key, v in out.items()}


def _alone_equals_in_batch(alone, batch, k, what):
  for key, v in alone.items():
    if key in ("label", "answer") and "logits" in alone and _tied(alone["logits"]).all():
      continue
    if v.dtype.kind in "OSU" or key in ("start", "end", "input_ids", "input_mask"):
      assert np.array_equal(v, batch[key]), (what, key, v, batch[key])
    else:
      np.testing.assert_allclose(batch[key], v, rtol=0, atol=1e-5, err_msg=f"{what} {key} {k}")


@fuzz_settings(10)
@given(hostile=RAW, at=st.integers(0, 3))
@example(hostile=CRASH, at=1)
def test_a_hostile_row_changes_nothing_for_the_other_rows(served, hostile, at):
  calls = {
      "mnli": lambda rows: {"sentence": rows, "sentence_b": rows[::-1]},
      "mrpc_mpnet": lambda rows: {"sentence": rows, "sentence_b": rows[::-1]},
      "encoder": lambda rows: {"sentence": rows},
      "race": lambda rows: {"article": rows, "question": rows[::-1],
                            "options": [[r, b"x", r[:3], b""] for r in rows]},
  }
  for name, inputs in calls.items():
    rows = NORMAL[:at] + [hostile] + NORMAL[at:]
    fn = served[name][0]
    batch = _out(fn, **inputs(rows))
    for k in range(len(rows)):
      alone = _out(fn, **{key: v[k:k + 1] for key, v in inputs(rows).items()})
      _alone_equals_in_batch(alone, _rows(batch, slice(k, k + 1)), k, name)
  for name in ("squad", "squad_mpnet"):
    fn = served[name][0]
    pairs = SQUAD_NORMAL[:at] + [(b"who \xc0\xaf?", hostile)] + SQUAD_NORMAL[at:]
    batch = _out(fn, question=[q for q, _ in pairs], context=[c for _, c in pairs])
    for k, (q, c) in enumerate(pairs):
      _alone_equals_in_batch(_out(fn, question=[q], context=[c]),
                             _rows(batch, slice(k, k + 1)), k, name)


def test_extract_best_on_raw_bytes_never_fails_the_batch():
  """squad_graph.extract_best given undecoded contexts (as before #31 it was): each span is cut
  from the U+FFFD-decoded text, so answers are valid UTF-8 and no row can fail the others."""
  contexts = [CRASH, b"fine text here", b"\xff\xfe" * 20 + b"tail words", b"\xe2\x82"]
  texts = [c.decode("utf-8", "replace") for c in contexts]
  end = len(texts[0])
  example = tf.constant([0, 0, 1, 2, 2, 3, 3], tf.int32)
  start = tf.constant([end - 8, 0, 5, 40, 0, 0, -1], tf.int32)
  stop = tf.constant([end, 3, 9, 50, 3, 1, -1], tf.int32)
  got = squad_graph.span_texts(tf.constant(contexts), example, start, stop).numpy()
  want = [texts[e][max(s, 0):max(t, 0)] for e, s, t in zip(example.numpy(), start.numpy(),
                                                             stop.numpy())]
  assert [g.decode("utf-8") for g in got] == want
  # the spans reach past what tf.strings.substr counts in the raw bytes (an encoded surrogate is
  # three U+FFFD but one UTF8_CHAR to it), where the old extraction failed
  assert tf.strings.length(contexts[0], unit="UTF8_CHAR") < end - 8
