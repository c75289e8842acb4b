"""serving/packing.py: the in-graph rows equal the Python feature code's, exactly."""

import types

import numpy as np
import tensorflow as tf

from data_utils import layouts
from finetuning import race
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


def test_trim_padding_exact():
  ids = tf.constant([[0, 0, 0, 7, 4, 3], [0, 0, 0, 0, 4, 3]])       # left padded, L = 6
  mask = tf.cast(tf.equal(ids, 0), tf.float32)
  rows = {"input_ids": ids, "seg_ids": ids + 1, "input_mask": mask, "cls_index": tf.constant([5, 5])}
  got = packing.trim_padding(rows, 6, left=True)
  assert got["input_ids"].numpy().tolist() == [[7, 4, 3], [0, 4, 3]]
  assert got["seg_ids"].numpy().tolist() == [[8, 5, 4], [1, 5, 4]]
  assert got["input_mask"].numpy().tolist() == [[0, 0, 0], [1, 0, 0]]
  assert got["cls_index"].numpy().tolist() == [5, 5]                    # not per position
  right = {"input_ids": ids[:, ::-1], "input_mask": mask[:, ::-1], "p_mask": mask[:, ::-1]}
  got = packing.trim_padding(right, 6, left=False)
  assert got["input_ids"].numpy().tolist() == [[3, 4, 7], [3, 4, 0]]
  assert got["p_mask"].numpy().tolist() == [[0, 0, 0], [0, 0, 1]]
  assert packing.trim_padding(rows, 6, True, "max") is rows
  empty = {"input_ids": tf.zeros([0, 6], tf.int32), "input_mask": tf.zeros([0, 6])}
  assert packing.trim_padding(empty, 6, True)["input_ids"].shape == [0, 1]


def test_length_buckets_and_bucketed_padding():
  assert packing.length_buckets(128) == (16, 32, 64, 128)
  assert packing.length_buckets(100) == (16, 32, 64, 100)
  assert packing.length_buckets(16) == (16,) and packing.length_buckets(8) == (8,)
  for tokens, want in ((1, 16), (16, 16), (17, 32), (33, 64), (65, 100), (100, 100)):
    mask = tf.constant([[1.0] * (100 - tokens) + [0.0] * tokens, [1.0] * 99 + [0.0]])
    got = packing.trim_padding({"input_mask": mask}, 100, True, "buckets")["input_mask"]
    assert got.shape == [2, want], (tokens, got.shape)
    assert float(tf.reduce_sum(1 - got)) == tokens + 1


class _Spy(tf.Module):
  """A model that records the length of the rows it was last given (in a variable: its call is
  traced, at any length) and returns, per row, a value of its tokens only (so any padding gives
  the same outputs)."""

  def __init__(self, n_out):
    super().__init__()
    self.n_out, self.weights = n_out, []
    self.length = tf.Variable(0)

  def __call__(self, rows, training=False):
    self.length.assign(tf.shape(rows["input_ids"])[-1])
    keep = 1.0 - rows["input_mask"]
    total = tf.reduce_sum(tf.cast(rows["input_ids"], tf.float32) * keep, -1)
    return tf.stack([total * (k + 1) for k in range(self.n_out)], -1)


def test_served_rows_are_padded_to_the_longest_row_or_its_bucket():
  tok = types.SimpleNamespace(tokenize=lambda s: tf.ragged.map_flat_values(
      lambda b: tf.strings.unicode_decode(b, "UTF-8").flat_values % 50 + 10,
      tf.strings.bytes_split(s)))
  texts = tf.constant(["abc", "a", "abcdefghijklmnopqrst"])           # 3, 1 and 20 pieces
  outs = {}
  for padding in ("max", "longest", "buckets"):
    spy = _Spy(2)
    serve = export.classifier_module(spy, tok, "xlnet", 64, ("a", "b"), pair=False,
                                     padding=padding).serving_default.python_function
    outs[padding], lengths = [], []
    for batch in (texts, texts[:2]):                                  # run eagerly
      outs[padding].append(serve(batch))
      lengths.append(int(spy.length.numpy()))
    assert lengths == {"max": [64, 64], "longest": [22, 5],           # + <sep> <cls>
                       "buckets": [32, 16]}[padding], padding
  for padding in ("longest", "buckets"):
    for batch, want in zip(outs[padding], outs["max"]):
      for key in ("logits", "label"):
        np.testing.assert_array_equal(batch[key], want[key])
