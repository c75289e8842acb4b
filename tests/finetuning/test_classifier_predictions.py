"""run_classifier.py's readable predictions: MODEL_DIR/predictions/TASK.SPLIT.jsonl for the split
--do_eval scores and the test split --do_predict predicts, and --predict_file on a raw file.

References are independent of the code under test: the ids and texts come from the files this
test writes; the probabilities are numpy's softmax of logits this test gets by running the
checkpoint the script used on rows it encodes itself; the submission TSV is the GLUE layout
written out by hand."""

import json
import os
import random

import numpy as np
import pytest

from data_utils import layouts, tokenization
from finetuning import runner
from modeling import checkpoint, families
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from tests.finetuning.test_classifier import _sentence
from tests.script_helpers import main_exit, run_main

TINY = {"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8, "d_inner": 32}
SHORT = dict(train_steps=2, steps_per_loop=2, save_every=2, warmup_steps=1, learning_rate=1e-3,
             seed=0, xla="off", dropout=0.0, dropatt=0.0)
LEN = 24


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """A tiny SST-2 run (train, dev with labels, GLUE test without), trained, evaluated on dev
  and predicted on test: (data dir, sp model, config, model dir, dev rows, test rows)."""
  d = tmp_path_factory.mktemp("sst2_pred")
  rng = random.Random(5)
  train = [(_sentence(rng, l), l) for l in [rng.randrange(2) for _ in range(24)]]
  dev = [(_sentence(rng, l), l) for l in [rng.randrange(2) for _ in range(9)]]
  test = [(str(100 + 3 * i), _sentence(rng, i % 2)) for i in range(7)]     # index, sentence
  (d / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in train))
  (d / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in dev))
  (d / "test.tsv").write_text("index\tsentence\n" + "".join(f"{i}\t{s}\n" for i, s in test))
  (d / "text.txt").write_text((d / "train.tsv").read_text().replace("\t", " ") * 8)
  sp = tokenization.train_sentencepiece([str(d / "text.txt")], str(d / "sp"), 80, lower=True)
  (d / "config.json").write_text(json.dumps(dict(TINY, n_token=80)))
  model_dir = d / "m"
  run_main("run_classifier.py", task_name="sst-2", data_dir=str(d), sp_model=sp, uncased=True,
           model_config_path=str(d / "config.json"), model_dir=str(model_dir),
           max_seq_length=LEN, train_batch_size=4, eval_batch_size=4, do_train=True,
           do_eval=True, do_predict=True, **SHORT)
  return d, sp, d / "config.json", model_dir, dev, test


def _jsonl(path):
  return [json.loads(line) for line in open(path, encoding="utf-8")]


def _reference_logits(model_dir, sp, config_path, texts):
  """Logits of the run's best checkpoint on TEXTS, from a model this test builds and rows it
  encodes with the layout module (not the task's feature code or predict path)."""
  record, best = checkpoint.read_best(str(model_dir / "best"))
  assert best, "the run kept no best checkpoint"
  model = families.get("xlnet").classifier(
      XLNetConfig.from_json(str(config_path)), RunConfig(dropout=0.0, dropatt=0.0), n_class=2,
      task_name="sst-2", regression=False, summary_type="last", use_proj=True).ensure_built()
  checkpoint.load_native_checkpoint(model, best)
  tok = tokenization.Tokenizer(sp, lower=True)
  rows = layouts.encode_texts(tok, list(texts), [None] * len(texts), LEN, "xlnet")
  import tensorflow as tf
  return model({k: tf.constant(v) for k, v in rows.items()}, training=False).numpy()


def _softmax(x):
  x = np.asarray(x, np.float64)
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _check_probabilities(rows, logits, labels=("0", "1")):
  probs = np.array([[r["probabilities"][l] for l in labels] for r in rows])
  assert [list(r["probabilities"]) for r in rows] == [list(labels)] * len(rows)
  np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-12)
  np.testing.assert_allclose(probs, _softmax(logits), atol=1e-5)
  assert [r["prediction"] for r in rows] == [labels[i] for i in probs.argmax(-1)]
  assert [r["prediction"] for r in rows] == [labels[i] for i in np.argmax(logits, -1)]


def test_dev_and_test_predictions_files(trained):
  d, sp, cfg, model_dir, dev, test = trained
  rows = _jsonl(model_dir / "predictions" / "sst-2.dev.jsonl")
  # ids: the split and line of each example (the header is line 1), in the file's order
  assert [r["id"] for r in rows] == [f"dev-{k + 2}" for k in range(len(dev))]
  assert [list(r) for r in rows] == [["id", "text_a", "prediction", "probabilities", "gold"]] * 9
  assert [(r["text_a"], r["gold"]) for r in rows] == [(s, str(l)) for s, l in dev]
  _check_probabilities(rows, _reference_logits(model_dir, sp, cfg, [s for s, _ in dev]))

  rows = _jsonl(model_dir / "predictions" / "sst-2.test.jsonl")
  assert [r["id"] for r in rows] == [i for i, _ in test]        # GLUE's test index
  assert [list(r) for r in rows] == [["id", "text_a", "prediction", "probabilities"]] * 7
  assert [r["text_a"] for r in rows] == [s for _, s in test]
  _check_probabilities(rows, _reference_logits(model_dir, sp, cfg, [s for _, s in test]))
  # the submission file: GLUE's layout, the same predictions
  expected = "index\tprediction\n" + "".join(f"{r['id']}\t{r['prediction']}\n" for r in rows)
  assert (model_dir / "SST-2.tsv").read_text() == expected


@pytest.mark.slow
def test_predict_file_with_the_trained_model(trained, tmp_path, capsys):
  d, sp, cfg, model_dir, dev, _ = trained
  texts = ["an excellent film, with \"quotes\"", "a terrible film", "the story was awful"]
  path = tmp_path / "reviews.csv"
  path.write_text("id,text,label\n" + "".join(
      f'r{k},"{t.replace(chr(34), chr(34) * 2)}",{k % 2}\n' for k, t in enumerate(texts)))
  run_main("run_classifier.py", task_name="sst-2", sp_model=sp, uncased=True,
           model_config_path=str(cfg), model_dir=str(model_dir), max_seq_length=LEN,
           eval_batch_size=2, do_predict=True, predict_file=str(path))
  out = capsys.readouterr().out
  assert "using the run's best checkpoint" in out
  written = model_dir / "predictions" / "sst-2.predict-reviews.jsonl"
  assert f"wrote {written}" in out
  rows = _jsonl(written)
  assert [(r["id"], r["text_a"], r["gold"]) for r in rows] == [
      (f"r{k}", t, str(k % 2)) for k, t in enumerate(texts)]
  _check_probabilities(rows, _reference_logits(model_dir, sp, cfg, texts))

  # JSON Lines, non-ASCII text kept as is; no id column: ids are predict-LINE
  path = tmp_path / "more.jsonl"
  path.write_text(json.dumps({"review": "café excellent"}) + "\n\n" +
                  json.dumps({"review": "awful"}) + "\n", encoding="utf-8")
  run_main("run_classifier.py", task_name="sst-2", sp_model=sp, uncased=True,
           model_config_path=str(cfg), model_dir=str(model_dir), max_seq_length=LEN,
           do_predict=True, predict_file=str(path), text_a_column="review")
  written = model_dir / "predictions" / "sst-2.predict-more.jsonl"
  assert "café" in written.read_text(encoding="utf-8")
  rows = _jsonl(written)
  assert [r["id"] for r in rows] == ["predict-1", "predict-3"] and "gold" not in rows[0]
  _check_probabilities(rows, _reference_logits(model_dir, sp, cfg, ["café excellent", "awful"]))


@pytest.mark.parametrize("name,content,flags,message", [
    ("bad.csv", "sentence,label\nfine,1\n", {},
     "{path}: no column 'text' (--text_a_column); its columns: 'sentence', 'label'"),
    ("bad.jsonl", '{"text": "a"}\n{"text": "b"}\n{"text": "c"\n', {},
     "{path}:3: not valid JSON (Expecting ',' delimiter)"),
    ("bad.jsonl", '{"text": "a"}\n{"body": "b"}\n', {}, "{path}:2: no 'text' (--text_a_column); "
     "keys: 'body'"),
    ("bad.tsv", "text\tlabel\nfine\t1\nbad\tmaybe\n", {},
     "{path}:3: label 'maybe' is not one of ['0', '1']"),
    ("empty.tsv", "", {}, "{path}: empty file (expected a header line naming the columns)"),
    ("bad.txt", "text\nfine\n", {}, "--predict_file={path}: unknown format: name the file "
     ".tsv, .csv or .jsonl"),
    ("ok.tsv", "text\tother\nfine\tx\n", {"text_b_column": "other"},
     "--text_b_column=other: sst-2 takes one text"),
])
def test_a_bad_predict_file_is_one_line_before_any_model_work(trained, tmp_path, monkeypatch,
                                                              name, content, flags, message):
  _, sp, cfg, _, _, _ = trained
  path = tmp_path / name
  path.write_text(content)
  def no_model(*args, **kwargs):
    raise AssertionError("the model was built before the predict file was checked")
  monkeypatch.setattr(runner, "train_or_load", no_model)
  code = main_exit("run_classifier.py", task_name="sst-2", sp_model=sp, uncased=True,
                   model_config_path=str(cfg), model_dir=str(tmp_path / "m"),
                   max_seq_length=LEN, do_predict=True, predict_file=str(path), **flags)
  assert code == "run_classifier.py: " + message.format(path=path)
  assert sorted(os.listdir(tmp_path)) == [name]          # nothing written, no model dir
