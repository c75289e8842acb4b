"""serving/packing.py: the in-graph rows equal the Python feature code's, exactly."""

import types

import numpy as np
import tensorflow as tf

from finetuning import layouts, race
from serving import export, packing

SPM_IDS = types.SimpleNamespace(bos_id=1, eos_id=2, pad_id=5)


def test_truncation_closed_form_equals_the_release_loop():
  for budget in range(0, 16):
    lens = [(a, b) for a in range(0, 14) for b in range(0, 14)]
    keep_a, keep_b = packing.xlnet_keep_lengths(tf.constant([a for a, _ in lens]),
                                                tf.constant([b for _, b in lens]), budget)
    for k, (la, lb) in enumerate(lens):
      a, b = list(range(la)), list(range(lb))
      layouts.truncate_pair(a, b, budget, "xlnet")
      assert (len(a), len(b)) == (int(keep_a[k]), int(keep_b[k])), (la, lb, budget)


def test_xlnet_rows_exact():
  rows = packing.pack_xlnet(tf.ragged.constant([[10, 11], [12]]),
                            tf.ragged.constant([[20], []]), 7)
  assert rows["input_ids"].numpy().tolist() == [[0, 10, 11, 4, 20, 4, 3], [0, 0, 0, 12, 4, 4, 3]]
  assert rows["seg_ids"].numpy().tolist() == [[4, 0, 0, 0, 1, 1, 2], [4, 4, 4, 0, 0, 1, 2]]
  assert rows["input_mask"].numpy().tolist() == [[1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0]]


def _python_rows(model_type, a_rows, b_rows, max_len):
  out = []
  for a, b in zip(a_rows, b_rows):
    a, b = list(a), None if b is None else list(b)
    budget = max_len - layouts.special_count(model_type, b is not None)
    if b is None:
      a = a[:budget]
    else:
      layouts.truncate_pair(a, b, budget, model_type)
    out.append(layouts.pack(model_type, SPM_IDS, a, b, max_len)[:3])
  return out


def test_rows_equal_the_python_layouts_for_every_length():
  """Singles and pairs of every length pair 0..10 (uneven padding in one batch), cut or not."""
  pairs = [(la, lb) for la in range(0, 11) for lb in range(0, 11)]
  a_rows = [list(range(10, 10 + la)) for la, _ in pairs]
  b_rows = [list(range(50, 50 + lb)) for _, lb in pairs]
  for model_type in ("xlnet", "mpnet"):
    for max_len in (4, 7, 12, 25):
      for single in (False, True):
        b_in = None if single else tf.ragged.constant(b_rows, tf.int32)
        got = packing.pack_rows(model_type, SPM_IDS, tf.ragged.constant(a_rows, tf.int32), b_in,
                                max_len)
        want = _python_rows(model_type, a_rows, [None] * len(pairs) if single else b_rows,
                            max_len)
        for key, column in (("input_ids", 0), ("seg_ids", 1), ("input_mask", 2)):
          np.testing.assert_array_equal(got[key].numpy(), np.stack([w[column] for w in want]),
                                        err_msg=f"{model_type} {key} L={max_len} single={single}")


class _ListTokenizer:
  """A tokenizer whose texts are space-separated ids (race.encode's Python side)."""
  bos_id, eos_id, pad_id = 1, 2, 5

  def encode_lines(self, lines):
    return [[int(t) for t in line.replace("_", " ").split()] for line in lines]


def test_race_rows_equal_race_encode():
  rng = np.random.default_rng(0)
  items = []
  for k in range(12):
    article = " ".join(map(str, rng.integers(10, 99, rng.integers(0, 30))))
    question = " ".join(map(str, rng.integers(10, 99, rng.integers(0, 12))))
    options = [" ".join(map(str, rng.integers(10, 99, rng.integers(0, 6)))) for _ in range(4)]
    items.append(("high", article, question, options, 0))
  tok = _ListTokenizer()
  for model_type in ("xlnet", "mpnet"):
    for max_len, max_qa in ((20, 8), (12, 30), (40, 128)):
      want = race.encode(tok, items, max_len, max_qa, model_type)
      context = tf.ragged.constant([tok.encode_lines([it[1]])[0] for it in items
                                    for _ in range(4)], tf.int32, row_splits_dtype=tf.int64)
      qa = tf.ragged.constant(tok.encode_lines([f"{it[2]} {o}" for it in items for o in it[3]]),
                              tf.int32, row_splits_dtype=tf.int64)
      got = packing.race_rows(model_type, tok, context, qa, max_len, max_qa)
      for key in ("input_ids", "seg_ids", "input_mask"):
        np.testing.assert_array_equal(got[key].numpy().reshape(want[key].shape), want[key],
                                      err_msg=f"{model_type} {key} L={max_len}")


def test_race_question_option_texts_as_race_encode():
  questions = ["Who _ the _?", "No blank here", "", "_", "a\\1_$1"]
  options = [["ate", "\\1", "$0", ""], ["x", "y", "", "z"], ["a", "b", "c", "d"],
             ["_", "__", "", " "], ["p", "q", "r", "s"]]
  got = export.race_question_option(tf.constant(questions), tf.constant(options)).numpy()
  want = [q.replace("_", o) if "_" in q else f"{q} {o}" for q, opts in zip(questions, options)
          for o in opts]
  assert [g.decode() for g in got] == want
