"""Token tagging: the rows of finetuning/tagging_features.py against hand-written rows (both
layouts), and run_tagger.py end to end on tiny CoNLL files, its printed entity scores checked
against the seqeval / conlleval transcriptions of tests/reference_seqeval.py on the tags read
back from its predictions file.

python -m pytest tests/finetuning/test_tagging.py -q
"""

import json
import os

import numpy as np
import pytest

from data_utils import tokenization
import inference
from finetuning import conll
from finetuning import tagging_features as tf_
from tests import reference_seqeval as ref
from tests.script_helpers import main_exit, run_main
from training import entry  # noqa: F401  (absl's --verbosity defined before main_exit runs)


class FakeTokenizer:
  """A fixed piece list per word, SentencePiece's special ids (<s> 1, </s> 2, <pad> 5)."""
  bos_id, eos_id, pad_id = 1, 2, 5
  PIECES = {"Hemingway": [21, 22, 23], "\x07": [], "is": [24], "in": [25], "Paris": [20],
            "France": [26, 27]}

  def encode_lines(self, lines):
    return [list(self.PIECES[w]) for w in lines]


WORDS = ["Hemingway", "\x07", "is", "in", "Paris"]


def _check(row, ids, seg, mask, first, start):
  np.testing.assert_array_equal(row["input_ids"], ids)
  np.testing.assert_array_equal(row["seg_ids"], seg)
  np.testing.assert_array_equal(row["input_mask"], mask)
  np.testing.assert_array_equal(row["first_piece"], first)
  assert row["word_start"] == start
  assert row["input_ids"].dtype == np.int32 and row["input_mask"].dtype == np.float32
  assert row["first_piece"].dtype == np.int32


def test_one_row_first_pieces_and_a_word_without_pieces_both_layouts():
  tok = FakeTokenizer()
  [x] = tf_.encode_words(tok, WORDS, 10, "xlnet")   # `A <sep> <cls>`, left padded
  _check(x, [0, 0, 21, 22, 23, 24, 25, 20, 4, 3], [4, 4, 0, 0, 0, 0, 0, 0, 0, 2],
         [1, 1, 0, 0, 0, 0, 0, 0, 0, 0], [2, -1, 5, 6, 7], 0)
  [m] = tf_.encode_words(tok, WORDS, 10, "mpnet")   # `<s> A </s>`, right padded
  _check(m, [1, 21, 22, 23, 24, 25, 20, 2, 5, 5], [0] * 10, [0] * 8 + [1, 1],
         [1, -1, 4, 5, 6], 0)
  # labels on first pieces only: B-PER O O O B-LOC with ids 1 0 0 0 3
  ids, weight = tf_.label_arrays(x, [1, 0, 0, 0, 3], 10)
  np.testing.assert_array_equal(ids, [0, 0, 1, 0, 0, 0, 0, 3, 0, 0])
  np.testing.assert_array_equal(weight, [0, 0, 1, 0, 0, 1, 1, 1, 0, 0])
  ids, weight = tf_.label_arrays(m, [1, 0, 0, 0, 3], 10)
  np.testing.assert_array_equal(ids, [0, 1, 0, 0, 0, 0, 3, 0, 0, 0])
  np.testing.assert_array_equal(weight, [0, 1, 0, 0, 1, 1, 1, 0, 0, 0])


def test_a_long_sentence_is_split_into_whole_word_windows():
  """Rows of 6 hold 4 pieces: Hemingway (3) + \\x07 (0) + is (1), then in + Paris."""
  tok = FakeTokenizer()
  a, b = tf_.encode_words(tok, WORDS, 6, "xlnet")
  _check(a, [21, 22, 23, 24, 4, 3], [0, 0, 0, 0, 0, 2], [0] * 6, [0, -1, 3], 0)
  _check(b, [0, 0, 25, 20, 4, 3], [4, 4, 0, 0, 0, 2], [1, 1, 0, 0, 0, 0], [2, 3], 3)
  a, b = tf_.encode_words(tok, WORDS, 6, "mpnet")
  _check(a, [1, 21, 22, 23, 24, 2], [0] * 6, [0] * 6, [1, -1, 4], 0)
  _check(b, [1, 25, 20, 2, 5, 5], [0] * 6, [0, 0, 0, 0, 1, 1], [1, 2], 3)
  ids, weight = tf_.label_arrays(b, [1, 0, 0, 0, 3], 6)    # the window's words: in, Paris
  np.testing.assert_array_equal(ids, [0, 0, 3, 0, 0, 0])
  np.testing.assert_array_equal(weight, [0, 1, 1, 0, 0, 0])


def test_a_word_longer_than_a_row_is_cut_keeping_its_first_piece():
  tok = FakeTokenizer()
  rows = tf_.encode_words(tok, ["is", "Hemingway", "in"], 4, "xlnet")   # 2 pieces a row
  assert [r["word_start"] for r in rows] == [0, 1, 2]
  assert [r["input_ids"].tolist() for r in rows] == [[0, 24, 4, 3], [21, 22, 4, 3],
                                                     [0, 25, 4, 3]]
  assert [r["first_piece"].tolist() for r in rows] == [[1], [0], [1]]
  rows = tf_.encode_words(tok, ["is", "Hemingway", "in"], 4, "mpnet")
  assert [r["input_ids"].tolist() for r in rows] == [[1, 24, 2, 5], [1, 21, 22, 2], [1, 25, 2, 5]]
  assert [r["first_piece"].tolist() for r in rows] == [[1], [1], [1]]
  with pytest.raises(ValueError, match=r"^--max_seq_length=2: "):
    tf_.encode_words(tok, WORDS, 2, "xlnet")


def test_word_predictions_read_each_words_first_piece():
  """Hand-made logits: a word's tag is the argmax at its first piece; a word of no piece O;
  windows of one sentence go back to their words."""
  labels = ["O", "B-PER", "I-PER", "B-LOC"]
  rows = tf_.encode_words(FakeTokenizer(), WORDS, 6, "mpnet")
  logits = np.zeros([2, 6, 4], np.float32)
  logits[0, 1, 1] = logits[0, 2, 3] = logits[0, 4, 2] = 1.0    # Hemingway B-PER (2: inside it)
  logits[1, 1, 0] = logits[1, 2, 3] = 1.0                      # in O, Paris B-LOC
  index = [(0, r["word_start"], r["first_piece"]) for r in rows]
  assert tf_.word_predictions(logits, index, [5], labels) == [
      ["B-PER", "O", "I-PER", "O", "B-LOC"]]


def test_each_word_is_tokenized_alone_with_sentencepiece(tmp_path):
  """With a real SentencePiece model a row holds each word's own encoding (its "▁" start),
  not the sentence's."""
  text = tmp_path / "t.txt"
  text.write_text("\n".join(["Anna lives in Paris and works at Acme Corp ."] * 30))
  tok = tokenization.Tokenizer(tokenization.train_sentencepiece([str(text)], str(tmp_path / "sp"),
                                                                30, lower=True), lower=True)
  words = "Anna lives in Parisworks".split()
  [row] = tf_.encode_words(tok, words, 40, "mpnet")
  expected = [1] + [i for w in words for i in tok.encode(w)] + [2]
  np.testing.assert_array_equal(row["input_ids"][:len(expected)], expected)
  starts = np.cumsum([0] + [len(tok.encode(w)) for w in words[:-1]]) + 1
  np.testing.assert_array_equal(row["first_piece"], starts)
  assert all(tok.id_to_piece(row["input_ids"][k]).startswith("\u2581") for k in starts)


# ---- run_tagger.py end to end ---------------------------------------------------------------
PEOPLE = ["Anna", "Bob", "Carl", "Dora"]
PLACES = ["Paris", "Rome", "Oslo", "Lima"]
FILLER = ["went", "to", "see", "the", "old", "city", "with", "friends"]


def _sentences(rng, n):
  out = []
  for _ in range(n):
    words, tags = [], []
    for _ in range(rng.integers(3, 7)):
      kind = rng.integers(3)
      if kind == 0:
        words += [PEOPLE[rng.integers(4)], PEOPLE[rng.integers(4)] + "son"]
        tags += ["I-PER", "I-PER"]
      elif kind == 1:
        words.append(PLACES[rng.integers(4)])
        tags.append("I-LOC")
      else:
        words.append(FILLER[rng.integers(len(FILLER))])
        tags.append("O")
    out.append((words, tags))
  return out


def _write_conll(path, sentences, iob1):
  """CoNLL-2003's 4 columns, -DOCSTART- and blank lines; IOB1 as written, else BIO."""
  lines = ["-DOCSTART- -X- -X- O", ""]
  for k, (words, tags) in enumerate(sentences):
    if k == len(sentences) // 2:
      lines += ["-DOCSTART- -X- -X- O", "", ""]
    if not iob1:
      tags = conll.iob1_to_bio(tags)
    lines += [f"{w} NNP B-NP {t}" for w, t in zip(words, tags)] + [""]
  path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  d = tmp_path_factory.mktemp("ner")
  rng = np.random.default_rng(0)
  train, dev = _sentences(rng, 40), _sentences(rng, 10)
  dev.append((["\x07", "Rome"], ["O", "I-LOC"]))   # a word of no piece: predicted O, counted
  (d / "text.txt").write_text("\n".join(" ".join(w) for w, _ in train) + "\n")
  sp = tokenization.train_sentencepiece([str(d / "text.txt")], str(d / "sp"), 60, lower=True)
  vocab = tokenization.Tokenizer(sp, lower=True).vocab_size
  (d / "config.json").write_text(json.dumps({"n_layer": 2, "d_model": 16, "n_head": 2,
                                             "d_head": 8, "d_inner": 32, "n_token": vocab}))
  (d / "mpnet.json").write_text(json.dumps({
      "vocab_size": vocab, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
      "intermediate_size": 32, "max_position_embeddings": 40, "pad_token_id": 5,
      "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}))
  return d, sp, train, dev


def _flags(d, sp, model_dir, **kw):
  return dict(train_file=str(d / "train.txt"), dev_file=str(d / "dev.txt"), sp_model=sp,
              uncased=True, model_config_path=str(d / "config.json"), model_dir=str(model_dir),
              max_seq_length=12, train_batch_size=4, eval_batch_size=3, train_steps=40,
              save_every=40, learning_rate=3e-3, warmup_steps=0, dropout=0.0, dropatt=0.0,
              seed=1, **kw)


def _printed_scores(out):
  lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
  return lines[-1]


@pytest.mark.parametrize("family,iob1", [
    ("xlnet", True), pytest.param("xlnet", False, marks=pytest.mark.slow), ("mpnet", True)])
def test_run_tagger_scores_equal_seqeval_on_the_predictions_file(data, tmp_path, capsys, family,
                                                                 iob1):
  """Trains a few steps, writes the dev predictions; the printed scores are the references'
  on the file's gold and predicted columns. xlnet/BIO also exports (--export_dir,
  --export_hf_dir: slow); xlnet/IOB1 then evaluates alone from the run directory."""
  d, sp, train, dev = data
  _write_conll(d / "train.txt", train, iob1)
  _write_conll(d / "dev.txt", dev, iob1)
  exports = {} if iob1 else {"export_dir": str(tmp_path / "serving"),
                             "export_hf_dir": str(tmp_path / "hf")}
  model = {} if family == "xlnet" else {"model_type": "mpnet",
                                        "model_config_path": str(d / "mpnet.json")}
  flags = dict(_flags(d, sp, tmp_path / "run", do_train=True, do_predict=True,
                      predict_split="dev", **exports), **model)
  run_main("run_tagger.py", **flags)
  printed = _printed_scores(capsys.readouterr().out)
  path = tmp_path / "run" / "tagging_dev_predictions.txt"
  assert printed["predictions"] == str(path)
  # the file: every input line, the prediction appended; gold and prediction read back
  assert len(path.read_text().splitlines()) == len((d / "dev.txt").read_text().splitlines())
  scheme = "iob1" if iob1 else "bio"
  gold = [list(s.tags) for s in conll.read_conll(str(path), tag_column=-2, scheme=scheme)]
  pred = [list(s.tags) for s in conll.read_conll(str(path), tag_column=-1)]
  assert gold == [conll.iob1_to_bio(t) for _, t in dev]
  assert pred[-1][0] == "O"                                # the word of no piece
  assert sum(t != "O" for p in pred for t in p) > 0        # the model predicts entities
  (p, r, f1), _ = ref.scores(ref.seqeval_default_counts(gold, pred))
  assert (printed["precision"], printed["recall"], printed["f1"]) == pytest.approx((p, r, f1))
  assert f1 > 0
  (p, r, f1), _ = ref.scores(ref.seqeval_strict_counts(gold, pred))
  assert (printed["strict_precision"], printed["strict_recall"], printed["strict_f1"]) == \
      pytest.approx((p, r, f1))
  (p, r, f1), _ = ref.scores(ref.conlleval_counts(gold, pred))
  assert printed["f1"] == pytest.approx(f1)
  words = sum(len(g) for g in gold)
  assert printed["accuracy"] == pytest.approx(
      sum(a == b for g, q in zip(gold, pred) for a, b in zip(g, q)) / words)
  assert json.loads((tmp_path / "run" / "tagging_labels.json").read_text()) == [
      "O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
  # the Python API on the run directory tags raw text as the predictions file has it
  loaded = inference.from_pretrained(str(tmp_path / "run"), log=None)
  tagged = loaded.tag([" ".join(words) for words, _ in dev])
  assert [t["tags"] for t in tagged] == pred
  if exports:     # the SavedModel on raw text (serving/tagging_graph.py) and the HF layout
    assert (tmp_path / "serving" / "saved_model.pb").exists()
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["XLNetForTokenClassification"]
    assert [config["id2label"][str(k)] for k in range(5)] == [
        "O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
  if (family, iob1) != ("xlnet", True):
    return
  # evaluation alone from the run directory: its labels come from the run, the same scores
  flags = dict(flags, model_dir=str(tmp_path / "eval"), do_eval=True, do_train=False,
               do_predict=False, init_checkpoint=str(tmp_path / "run"))
  for name in ("train_file", "export_dir", "export_hf_dir"):
    flags.pop(name, None)
  run_main("run_tagger.py", **flags)
  again = _printed_scores(capsys.readouterr().out)
  assert {k: again[k] for k in again if k != "split"} == {
      k: printed[k] for k in printed if k not in ("split", "predictions")}


def test_a_malformed_line_is_one_error_naming_file_and_line(data, tmp_path):
  d, sp, train, dev = data
  _write_conll(d / "train.txt", train, False)
  _write_conll(d / "dev.txt", dev, False)
  lines = (d / "dev.txt").read_text().splitlines()
  lines[5] = "Paris"                      # one column: no tag
  bad = d / "bad_dev.txt"
  bad.write_text("\n".join(lines) + "\n")
  model_dir = tmp_path / "run"
  code = main_exit("run_tagger.py", **dict(_flags(d, sp, model_dir, do_train=True, do_eval=True),
                                           dev_file=str(bad)))
  assert isinstance(code, str) and "\n" not in code
  assert code.startswith(f"run_tagger.py: {bad}: line 6: one column")
  assert not model_dir.exists() or not os.listdir(model_dir)


def test_the_loss_is_cross_entropy_on_the_labelled_positions_only():
  """task.loss against numpy: log-softmax of the model's logits, the label's term at the
  positions of weight 1, averaged over them (padding and other pieces do not count)."""
  from finetuning import tagging
  from modeling.run_config import RunConfig
  from modeling.xlnet.config import XLNetConfig
  config = XLNetConfig(n_token=40, n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32)
  task = tagging.TaggingTask(tagging.TaggingConfig(max_seq_length=8), config,
                             RunConfig(dropout=0.0, dropatt=0.0), labels=["O", "B-X", "I-X"])
  model = task.build_model().ensure_built()
  rng = np.random.default_rng(0)
  mask = np.zeros([2, 8], np.float32)
  mask[1, :3] = 1.0
  weight = np.zeros([2, 8], np.float32)
  weight[0, [0, 2, 5]] = weight[1, [3, 6]] = 1.0
  batch = {"input_ids": rng.integers(6, 40, [2, 8]).astype(np.int32),
           "seg_ids": np.zeros([2, 8], np.int32), "input_mask": mask,
           "label_ids": rng.integers(0, 3, [2, 8]).astype(np.int32), "label_weight": weight}
  loss, _, _ = task.loss(model, batch, None, 0, training=False)
  logits = model(batch).numpy().astype(np.float64)
  logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  picked = np.take_along_axis(logp, batch["label_ids"][..., None], -1)[..., 0]
  want = -(picked * weight).sum() / weight.sum()
  assert float(loss) == pytest.approx(want, rel=1e-5)


def test_strict_and_conlleval_scores_differ_on_i_started_predictions(data, tmp_path, capsys,
                                                                    monkeypatch):
  """A model forced to predict the dev file's own IOB1 tags (every entity starting with I-,
  through the logits at each word's first piece): conlleval reads them as the gold entities
  (F1 1), seqeval's strict mode drops them all (F1 0); the printed scores equal the references'
  on the tags read back from the predictions file."""
  from finetuning import tagging
  d, sp, train, dev = data
  _write_conll(d / "train.txt", train, True)
  _write_conll(d / "dev.txt", dev, True)
  forced = [t for _, t in dev]

  def logits(self, model, split):
    features, index = self.features(split)
    out = np.zeros(features["input_ids"].shape + (len(self.labels),), np.float32)
    for r, (n, start, first) in enumerate(index):
      for k, col in enumerate(first):
        out[r, col, self.labels.index(forced[n][start + k])] = 1.0
    return out
  monkeypatch.setattr(tagging.TaggingTask, "logits", logits)
  flags = _flags(d, sp, tmp_path / "run", do_predict=True, predict_split="dev",
                 labels="O,B-LOC,B-PER,I-LOC,I-PER")
  del flags["train_file"]
  run_main("run_tagger.py", **flags)
  printed = _printed_scores(capsys.readouterr().out)
  path = tmp_path / "run" / "tagging_dev_predictions.txt"
  gold = [list(s.tags) for s in conll.read_conll(str(path), tag_column=-2, scheme="iob1")]
  pred = [list(s.tags) for s in conll.read_conll(str(path), tag_column=-1)]
  assert pred == forced
  (_, _, f1), _ = ref.scores(ref.seqeval_default_counts(gold, pred))
  (_, _, strict_f1), _ = ref.scores(ref.seqeval_strict_counts(gold, pred))
  assert (f1, strict_f1) == (1.0, 0.0)
  assert (printed["f1"], printed["strict_f1"]) == (f1, strict_f1)


def test_data_dir_names_and_label_schemes(tmp_path):
  """--data_dir finds CoNLL-2003's own names or the common copies' (train.txt / valid.txt);
  auto reads a file with an I- start as IOB1; bio keeps its tags as written, saying so."""
  from finetuning import tagging
  for names in (("eng.train", "eng.testa", "eng.testb"), ("train.txt", "valid.txt", "test.txt")):
    d = tmp_path / names[0]
    d.mkdir()
    for name in names:
      (d / name).write_text("Anna B-PER\n")
    assert tagging.data_dir_files(str(d)) == {split: str(d / name) for split, name in
                                              zip(("train", "dev", "test"), names)}
  with pytest.raises(FileNotFoundError, match=r"^--data_dir=.*: none of eng\.train"):
    tagging.data_dir_files(str(tmp_path / "eng.train" / "nothing"))
  path = tmp_path / "iob1.txt"
  path.write_text("-DOCSTART- O\n\nAnna I-PER\nKarl I-PER\nwent O\nhome O\n\nRome I-LOC\n")
  sentences, scheme = tagging.read_tagged(str(path), "auto", log=lambda line: None)
  assert scheme == "iob1" and [s.tags for s in sentences] == [
      ("B-PER", "I-PER", "O", "O"), ("B-LOC",)]
  said = []
  sentences, scheme = tagging.read_tagged(str(path), "bio", log=said.append)
  assert scheme == "bio" and sentences[0].tags == ("I-PER", "I-PER", "O", "O")   # as written
  assert said == [f"{path}: 2 entities start with I- although --label_scheme=bio (an IOB1 "
                  "file? --label_scheme=auto or iob1 converts it)"]
  assert [s.tags for s in tagging.read_tagged(str(path), "iob1")[0]] == [
      ("B-PER", "I-PER", "O", "O"), ("B-LOC",)]
  bio = tmp_path / "bio.txt"
  bio.write_text("Anna B-PER\nKarl I-PER\nRome B-LOC\n")
  assert tagging.read_tagged(str(bio), "auto")[1] == "bio"
