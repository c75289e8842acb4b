"""Zero-shot cloze scoring (pretraining/cloze.py and each objective's span_log_probs): the row
layout, the visibility of the span's tokens as an exact matrix and as information flow through
real tiny models, the accuracy and its noise, and a hand-built model whose right option is
known."""

import gc
import weakref

import numpy as np
import pytest
import tensorflow as tf

from data_utils.tokenization import CLS_ID, MASK_ID, SEP_ID
from modeling.mpnet.config import MPNetConfig
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from pretraining import cloze, objectives, plm
from pretraining.task import PretrainConfig, PretrainTask

V = 40


def test_span_perm_mask_is_the_release_rule_for_a_left_to_right_span():
  #        0   1   2     3   4   5   6     7
  ids = [10, 11, SEP_ID, 12, 13, 14, SEP_ID, CLS_ID]
  # ranked: <sep> 2 (rank 0), <sep> 6 (1), <cls> 7 (2), then the span 4 (3), 5 (4); the
  # others rank -1. Row i blocks a ranked j of rank >= rank(i).
  want = np.array([
      [0, 0, 1, 0, 1, 1, 1, 1],    # 0: context sees no ranked token
      [0, 0, 1, 0, 1, 1, 1, 1],    # 1
      [0, 0, 1, 0, 1, 1, 1, 1],    # 2: <sep>, rank 0
      [0, 0, 1, 0, 1, 1, 1, 1],    # 3
      [0, 0, 0, 0, 1, 1, 0, 0],    # 4: the span's first token sees <sep> <sep> <cls>
      [0, 0, 0, 0, 0, 1, 0, 0],    # 5: ... and the span's first token
      [0, 0, 0, 0, 1, 1, 1, 1],    # 6: <sep>, rank 1
      [0, 0, 0, 0, 1, 1, 0, 1],    # 7: <cls>, rank 2
  ], np.float32)
  np.testing.assert_array_equal(plm.span_perm_mask(ids, 4, 6), want)
  np.testing.assert_array_equal(plm.span_target_mapping(8, 4, 6),
                                np.eye(8, dtype=np.float32)[[4, 5]])


class WordTokenizer:
  """Space-separated words -> ids 10, 11, ... in order of first sight."""

  def __init__(self):
    self.vocab = {}

  def encode(self, text):
    return [self.vocab.setdefault(w, 10 + len(self.vocab)) for w in text.split()]


def test_cloze_row_layout():
  tok = WordTokenizer()
  a, b, c, d, e, f = tok.encode("a b c d e f")
  row = cloze.cloze_row(tok, "a b c", "d _ e", "f f", seq_len=12)
  assert row.input_ids == (a, b, c, SEP_ID, d, f, f, e, SEP_ID, CLS_ID)
  assert row.seg_ids == (0, 0, 0, 0, 1, 1, 1, 1, 1, 2)
  assert (row.start, row.end) == (5, 7)
  short = cloze.cloze_row(tok, "a b c", "d _ e", "f f", seq_len=8)   # the article's last token
  assert short.input_ids == (c, SEP_ID, d, f, f, e, SEP_ID, CLS_ID) and short.start == 3
  assert cloze.cloze_row(tok, "a", "_ e", "f", 5).input_ids == (SEP_ID, f, e, SEP_ID, CLS_ID)
  # a question longer than the row keeps the words nearest the blank, half the room a side
  g, h, i, j = tok.encode("g h i j")
  row = cloze.cloze_row(tok, "a b", "d e g _ h i j", "f", seq_len=8)   # room 4: 2 left, 2 right
  assert row.input_ids == (SEP_ID, e, g, f, h, i, SEP_ID, CLS_ID) and (row.start, row.end) == (3, 4)
  row = cloze.cloze_row(tok, "a b", "d e g _ h", "f", seq_len=8)       # right has 1: left 3
  assert row.input_ids == (SEP_ID, d, e, g, f, h, SEP_ID, CLS_ID) and row.start == 4
  assert cloze.cloze_row(tok, "a", "d _ e", "f", 4).input_ids == (SEP_ID, f, SEP_ID, CLS_ID)
  with pytest.raises(ValueError, match="more than seq_len 3"):
    cloze.cloze_row(tok, "a", "_ e", "f", 3)
  with pytest.raises(ValueError, match="needs a blank"):
    cloze.cloze_row(tok, "a", "d e", "f", 12)


def test_accuracy_and_its_noise():
  scores = [[0, 1, 0, 0], [2, 1, 0, 0], [0, 0, 3, 0], [1, 1, 0, 0]]   # ties: the first wins
  got = cloze.accuracy(scores, [1, 0, 1, 1])
  assert got == {"accuracy": 0.5, "n": 4, "chance": 0.25, "se": 0.25}


def _task(objective):
  config = PretrainConfig(seq_len=16, reuse_len=8, num_predict=3, bsz_per_host=2,
                          bi_data=False, objective=objective, mpnet_mode="mpnet")
  if objective == "mpnet":
    model_config = MPNetConfig(vocab_size=V, hidden_size=16, num_hidden_layers=2,
                               num_attention_heads=2, intermediate_size=32,
                               max_position_embeddings=40, pad_token_id=5)
  else:
    model_config = XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=V)
  task = PretrainTask(config, model_config, RunConfig(dropout=0.0, dropatt=0.0, mem_len=8,
                                                      reuse_len=8))
  tf.keras.utils.set_random_seed(0)
  model = task.build_model()
  model.ensure_built()
  return task, model


ROW = cloze.Row((10, 11, 12, SEP_ID, 13, 14, 15, 16, SEP_ID, CLS_ID), (0,) * 4 + (1,) * 5 + (2,),
                5, 8)     # the span: tokens 14 15 16 at positions 5, 6, 7


def _with(row, position, token):
  ids = list(row.input_ids)
  ids[position] = token
  return cloze.Row(tuple(ids), row.seg_ids, row.start, row.end)


@pytest.mark.parametrize("name", ["plm", "mlm", "mpnet"])
@pytest.mark.slow
def test_what_each_span_token_sees(name):
  """Changing one input token, which of the span's log-probabilities move: plm and mpnet
  predict left to right (token k sees the span before it, never itself or after it); mlm
  masks the whole span (its tokens see none of it); all see the context. (Changing the token
  a prediction is scored on changes its log-probability whatever the model sees: that case is
  the sum-to-one check.)"""
  objective = objectives.get(name)
  task, model = _task(name)
  base = objective.span_log_probs(task, model, ROW)
  assert base.shape == (3,) and (base < 0).all()

  def moved(position):
    other = objective.span_log_probs(task, model, _with(ROW, position, 30))
    return [not np.isclose(a, b, rtol=0, atol=1e-6) for a, b in zip(base, other)]

  left_to_right = name != "mlm"
  # the span's first token: the 2nd and 3rd predictions see it only left to right; the 1st is
  # a target (its own value changes its log-probability but not what the model sees)
  assert moved(5)[1:] == [left_to_right, left_to_right]
  assert moved(6)[2] == left_to_right
  assert not any(moved(7)[:2])                                # nothing sees the last one
  assert all(moved(1))                                        # the context is seen by all
  # no prediction sees its own token: with each token t of the vocabulary written there, the
  # probabilities it gives t add up to 1 (they are one distribution); a model that saw the token
  # would give each t a distribution of its own
  for k in range(3):
    total = sum(np.exp(objective.span_log_probs(task, model, _with(ROW, ROW.start + k, t))[k])
                for t in range(V))
    assert abs(total - 1.0) < 1e-5, (k, total)   # float32 rounding: ~1e-7


@pytest.mark.parametrize("name", ["plm", "mlm", "mpnet"])
def test_a_model_that_wants_one_token_picks_the_option_made_of_it(name):
  """A hand-built case: the LM head's bias for token 21 raised by 30, so every prediction puts
  nearly all its mass on 21: the option "w21" wins at any blank, under both scorings."""
  objective = objectives.get(name)
  task, model = _task(name)
  bias = model.lm_head.bias
  bias.assign(bias.numpy() + 30.0 * (np.arange(V) == 21))
  tok = WordTokenizer()
  tok.vocab.update({f"w{i}": i for i in range(10, V)})
  items = [("middle", "w10 w11 w12", "w13 _ w14", ["w22", "w21", "w23 w24", "w25"], 1),
           ("high", "w15 w16", "_ w17 w18", ["w30", "w31", "w32", "w21"], 3)]
  got = cloze.evaluate(objective, task, model, tok, items, seq_len=16)
  assert got["sum"]["accuracy"] == got["mean"]["accuracy"] == 1.0
  assert got["sum"]["n"] == 2 and got["sum"]["chance"] == 0.25


def test_mlm_span_inputs_mask_the_span():
  inputs = objectives.get("mlm").span_inputs(ROW)
  assert list(inputs["input_ids"][0]) == [10, 11, 12, SEP_ID, 13, MASK_ID, MASK_ID, MASK_ID,
                                          SEP_ID, CLS_ID]
  np.testing.assert_array_equal(inputs["target_mapping"][0], np.eye(10)[[5, 6, 7]])


@pytest.mark.parametrize("name", ["plm", "mlm", "mpnet"])
def test_batched_rows_score_as_each_row_alone(name):
  """span_log_probs_many (plm / mlm: rows left padded to the longest, spans to the longest,
  in batches) gives each row's span_log_probs alone."""
  objective = objectives.get(name)
  task, model = _task(name)
  rows = [ROW, cloze.Row((17, SEP_ID, 18, 19, SEP_ID, CLS_ID), (0, 0, 1, 1, 1, 2), 3, 4),
          cloze.Row((20, 21, 22, 23, SEP_ID, 24, SEP_ID, CLS_ID), (0,) * 5 + (1, 1, 2), 5, 6)]
  together = objective.span_log_probs_many(task, model, rows)
  for row, got in zip(rows, together):
    alone = objective.span_log_probs(task, model, row)
    assert got.shape == (row.end - row.start,)
    np.testing.assert_allclose(got, alone, rtol=0, atol=2e-5)


@pytest.mark.parametrize("name", ["plm", "mlm", "mpnet"])
def test_scoring_traces_one_graph_for_every_shape_and_scores_as_eager(name, monkeypatch):
  """The scorers' forward is one tf.function per model (pretraining/objective.scorer): rows of
  five lengths, one batch each, trace it at most twice (reduce_retracing), and every row's
  log-probabilities are those of the model called eagerly."""
  from pretraining import objective as objective_lib
  from training import task as task_lib
  objective = objectives.get(name)
  task, model = _task(name)
  rows = [cloze.Row((17,) * n + (SEP_ID, 18, 19, SEP_ID, CLS_ID), (0,) * (n + 1) + (1, 1, 1, 2),
                    n + 1, n + 3) for n in (1, 2, 3, 5, 8)]
  traced = [objective.span_log_probs_many(task, model, [rows[0]])[0]]
  scorers = task_lib._MODEL_FUNCTIONS[model]                  # pylint: disable=protected-access
  made = list(scorers.values())
  traced += [objective.span_log_probs_many(task, model, [row])[0] for row in rows[1:]]
  assert list(scorers.values()) == made and len(made) == 1
  assert 1 <= made[0].experimental_get_tracing_count() <= 2
  monkeypatch.setattr(objective_lib, "scorer",
                      lambda model, forward, key=None: lambda x: forward(model, x))
  for row, got in zip(rows, traced):
    eager = objective.span_log_probs_many(task, model, [row])[0]
    assert got.shape == (2,)
    np.testing.assert_allclose(got, eager, rtol=0, atol=1e-5)
  alive = weakref.ref(model)
  del task, model, made, scorers                 # the scorer keeps no model alive
  gc.collect()
  assert alive() is None


def test_word_rows_blank_each_word_in_turn():
  tok = WordTokenizer()
  rows = cloze.word_rows(tok, "a b  c", seq_len=16)
  a, b, c = tok.encode("a b c")
  assert [r.input_ids for r in rows] == [(SEP_ID, a, b, c, SEP_ID, CLS_ID)] * 3
  assert [(r.start, r.end) for r in rows] == [(1, 2), (2, 3), (3, 4)]
  with pytest.raises(ValueError, match="cannot hold '_'"):
    cloze.word_rows(tok, "a _ b", seq_len=16)
  assert cloze.scorable(tok, "a b c", 16) and not cloze.scorable(tok, "a _ b", 16)
  assert not cloze.scorable(tok, "a b c", 3)           # a word and <sep> <sep> <cls>: 4 > 3


@pytest.mark.parametrize("name", ["plm", "mlm", "mpnet"])
def test_sentence_scores_sum_each_words_log_probability(name):
  """The pseudo-log-likelihood is the sum, over words, of what the objective gives each word's
  tokens alone at that place (rows scored one by one here), whatever order the batches took;
  and the hand-built model that wants token 21 finds a sentence of 21s the most probable."""
  objective = objectives.get(name)
  task, model = _task(name)
  tok = WordTokenizer()
  tok.vocab.update({f"w{i}": i for i in range(10, V)})
  sentences = ["w10 w11 w12 w13", "w14 w15", "w21 w21 w21 w21 w21"]
  pll, ids = cloze.sentence_scores(objective, task, model, tok, sentences, seq_len=16)
  for k, sentence in enumerate(sentences):
    rows = cloze.word_rows(tok, sentence, 16)
    want = sum(float(np.sum(objective.span_log_probs(task, model, r))) for r in rows)
    np.testing.assert_allclose(pll[k], want, rtol=0, atol=1e-4)
    assert ids[k] == tok.encode(sentence)
  bias = model.lm_head.bias
  bias.assign(bias.numpy() + 30.0 * (np.arange(V) == 21))
  pll, _ = cloze.sentence_scores(objective, task, model, tok, sentences, seq_len=16)
  assert pll[2] / 5 > max(pll[0] / 4, pll[1] / 2) and pll[2] / 5 > -0.01
