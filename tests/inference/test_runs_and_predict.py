"""inference.from_pretrained on a tiny fine-tuning run directory (its predictions equal the run's
own predictions file), and predict.py end to end on TSV, JSON Lines and .txt inputs with its
one-line refusals before any model work."""

import json
import os
import random

import numpy as np
import pytest

import inference
from data_utils import tokenization
from tests.script_helpers import main_exit, run_main

WORDS = ("the film was long and the story went on with many scenes of people talking about "
         "their day while music played").split()


def _sentence(rng, label):
  words = rng.sample(WORDS, rng.randrange(3, 12))
  words.insert(rng.randrange(len(words) + 1), "excellent" if label else "awful")
  return " ".join(words)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """(run directory, data directory, dev examples): run_classifier.py, 4 steps on SST-2's
  layout; the SentencePiece model lives in the data directory, not beside the run."""
  root = tmp_path_factory.mktemp("classify")
  data = root / "data"
  data.mkdir()
  rng = random.Random(0)
  dev = []
  for split, n in (("train", 24), ("dev", 7)):
    rows = [(_sentence(rng, l), l) for l in [rng.randrange(2) for _ in range(n)]]
    (data / f"{split}.tsv").write_text("sentence\tlabel\n" +
                                       "".join(f"{s}\t{l}\n" for s, l in rows))
    dev = rows
  (data / "text.txt").write_text("\n".join(WORDS * 3 + ["excellent awful"] * 9) + "\n")
  sp = tokenization.train_sentencepiece([str(data / "text.txt")], str(data / "sp"), 40,
                                        lower=True)
  config = data / "config.json"
  config.write_text(json.dumps({"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8,
                                "d_inner": 32, "n_token": 40}))
  model_dir = root / "run"
  run_main("run_classifier.py", task_name="sst-2", data_dir=str(data), sp_model=sp,
           uncased=True, model_config_path=str(config), model_dir=str(model_dir),
           max_seq_length=24, train_batch_size=4, learning_rate=1e-2, train_steps=4,
           warmup_steps=1, save_every=4, steps_per_loop=2, dropout=0.0, dropatt=0.0,
           do_train=True, do_eval=True, xla="off")
  return model_dir, data, dev


def _own_predictions(model_dir):
  with open(model_dir / "predictions" / "sst-2.dev.jsonl") as f:
    return [json.loads(line) for line in f]


def _same_predictions(got, want):
  label = lambda r: r["prediction"] if "prediction" in r else r["label"]   # file / predict()
  assert [label(r) for r in got] == [r["prediction"] for r in want]
  for g, w in zip(got, want):
    assert list(g["probabilities"]) == list(w["probabilities"]) == ["0", "1"]
    np.testing.assert_allclose(list(g["probabilities"].values()),
                               list(w["probabilities"].values()), atol=1e-5)


def test_a_fine_tuning_run_predicts_as_the_run_did(run, capsys):
  model_dir, _, dev = run
  lines = []
  model = inference.from_pretrained(str(model_dir), batch_size=3, log=lines.append)
  assert len(lines) == 1 and "xlnet classifier over 2 labels (0, 1)" in lines[0] and \
      "fine-tuning run (run_classifier.py)" in lines[0] and "at step 4" in lines[0] and \
      os.path.join(str(model_dir), "best") in lines[0] and "sp.model" in lines[0], lines
  assert model.max_length == 24
  want = _own_predictions(model_dir)
  assert [r["text_a"] for r in want] == [s for s, _ in dev]
  _same_predictions(model.predict([s for s, _ in dev]), want)
  # the tokenizer given instead of found: the same
  again = inference.from_pretrained(str(model_dir), sp_model=str(run[1] / "sp.model"),
                                    uncased=True, log=None)
  _same_predictions(again.predict([s for s, _ in dev]), want)


@pytest.mark.slow
def test_predict_py_writes_inputs_beside_predictions(run, tmp_path, capsys, monkeypatch):
  from inference import files
  monkeypatch.setattr(files, "PROGRESS_EVERY", 4)
  model_dir, _, dev = run
  want = _own_predictions(model_dir)
  tsv = tmp_path / "in.tsv"
  tsv.write_text("id\ttext\tlabel\n" + "".join(f"d{k}\t{s}\t{l}\n" for k, (s, l) in
                                                enumerate(dev)))
  out = tmp_path / "out.jsonl"
  run_main("predict.py", model=str(model_dir), input=str(tsv), output=str(out), batch_size=2)
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  assert [list(r) for r in rows] == [["id", "text_a", "prediction", "probabilities", "gold"]] * 7
  assert [r["id"] for r in rows] == [f"d{k}" for k in range(7)]
  assert [(r["text_a"], r["gold"]) for r in rows] == [(s, str(l)) for s, l in dev]
  _same_predictions(rows, want)
  printed = capsys.readouterr().out
  assert "predicted 4 of 7 rows" in printed and "predicted 7 of 7 rows" in printed, printed
  # JSON Lines without ids or labels, non-ASCII text; the earlier output replaced
  jsonl = tmp_path / "in.jsonl"
  jsonl.write_text("".join(json.dumps({"text": s}, ensure_ascii=False) + "\n"
                           for s in ["un film très long", dev[0][0]]), encoding="utf-8")
  run_main("predict.py", model=str(model_dir), input=str(jsonl), output=str(out))
  rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
  assert [r["id"] for r in rows] == ["input-1", "input-2"] and "gold" not in rows[0]
  assert rows[0]["text_a"] == "un film très long"
  _same_predictions(rows[1:], want[:1])
  # .txt: one text per line, blank lines skipped, ids by line
  txt = tmp_path / "in.txt"
  txt.write_text(f"{dev[1][0]}\n\n{dev[2][0]}\n")
  run_main("predict.py", model=str(model_dir), input=str(txt), output=str(out))
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  assert [r["id"] for r in rows] == ["input-1", "input-3"]
  _same_predictions(rows, want[1:3])


def test_predict_py_refuses_bad_input_in_one_line_before_loading(run, tmp_path, capsys):
  model_dir, _, _ = run
  good = tmp_path / "in.tsv"
  good.write_text("text\nfine film\n")
  bad_json = tmp_path / "bad.jsonl"
  bad_json.write_text('{"text": "a"}\n{"text": \n')
  no_column = tmp_path / "cols.tsv"
  no_column.write_text("sentence\nfine film\n")
  foreign = tmp_path / "notes.jsonl"
  foreign.write_text("my own notes\n")
  not_utf8 = tmp_path / "latin.txt"
  not_utf8.write_bytes(b"fine\ncaf\xe9\n")
  (tmp_path / "empty").mkdir()
  out = str(tmp_path / "out.jsonl")
  cases = [
      (dict(input=str(good), output=out), "--model is required"),
      (dict(model=str(model_dir), input=str(tmp_path / "none.tsv"), output=out), "not found"),
      (dict(model=str(model_dir), input=str(tmp_path / "x.xls"), output=out),
       "unknown format: name the file .tsv, .csv, .jsonl or .txt"),
      (dict(model=str(model_dir), input=str(no_column), output=out),
       "no column 'text' (--text_a_column); its columns: 'sentence'"),
      (dict(model=str(model_dir), input=str(bad_json), output=out), "bad.jsonl:2: not valid JSON"),
      (dict(model=str(model_dir), input=str(not_utf8), output=out), "latin.txt:2: not UTF-8"),
      (dict(model=str(model_dir), input=str(good), output=str(foreign)),
       "is not a predictions file of this project"),
      (dict(model=str(model_dir), input=str(good), output=str(tmp_path)),
       "is an existing directory"),
      (dict(model=str(model_dir), input=str(good), output=str(good)), "is --input"),
      (dict(model=str(tmp_path / "empty"), input=str(good), output=out),
       "not a model directory this project reads"),
      (dict(model=str(model_dir), input=str(good), output=out, text_b_column="other"),
       "no column 'other' (--text_b_column)"),
  ]
  for flags, message in cases:
    code = main_exit("predict.py", **flags)
    assert isinstance(code, str) and code.startswith("predict.py: ") and message in code \
        and "\n" not in code, (flags, code)
    assert "inference: loaded" not in capsys.readouterr().out, flags
  assert not os.path.exists(out)
  assert foreign.read_text() == "my own notes\n"
