"""run_race.py's readable predictions (race_NAME_predictions.jsonl) and --predict_file, checked
against the files read here and the model called here (numpy softmax of its logits)."""

import json
import random

import numpy as np
import pytest

from data_utils import tokenization
from finetuning import race
from finetuning.classifier_task import ClassifierConfig
from modeling import checkpoint
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from tests.finetuning.test_race import _write_split
from tests.script_helpers import run_main

TINY = {"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8, "d_inner": 32}
SHAPE = dict(max_seq_length=40, max_qa_length=8)


@pytest.fixture(scope="module")
def race_data(tmp_path_factory):
  """RACE/{train,dev}/{middle,high}/*.txt with 1-3 questions per dev file (of uneven lengths),
  a SentencePiece model and a tiny config."""
  d = tmp_path_factory.mktemp("race_predictions")
  rng = random.Random(4)
  _write_split(d / "RACE", "train", 6, rng)
  _write_split(d / "RACE", "dev", 4, rng)
  for path in sorted(d.glob("RACE/dev/*/*.txt")):
    doc = json.loads(path.read_text())
    n = rng.randint(1, 3)
    doc.update(questions=[f"question {k}:" + " long" * (3 * k) + " the door was _ ."
                          for k in range(n)],
               options=[doc["options"][0][k:] + doc["options"][0][:k] for k in range(n)],
               answers=[rng.choice("ABCD") for _ in range(n)])
    path.write_text(json.dumps(doc))
  text = "\n".join(json.loads(p.read_text())["article"] for p in d.glob("RACE/*/*/*.txt"))
  (d / "text.txt").write_text((text + "\nquestion long\n") * 4)
  sp = tokenization.train_sentencepiece([str(d / "text.txt")], str(d / "sp"), 60, lower=True)
  (d / "config.json").write_text(json.dumps(dict(TINY, n_token=_vocab(sp))))
  return d, sp


def _vocab(sp):
  return tokenization.Tokenizer(sp, lower=True).vocab_size


def _random_model(sp, seed):
  """A RACE model with every weight drawn at random (spread-out option probabilities)."""
  task = race.RaceTask(ClassifierConfig(task_name="race", sp_model=sp, uncased=True,
                                        max_seq_length=SHAPE["max_seq_length"]),
                       XLNetConfig(**TINY, n_token=_vocab(sp)), RunConfig(),
                       max_qa_length=SHAPE["max_qa_length"])
  model = task.build_model().ensure_built()
  rng = np.random.default_rng(seed)
  for v in model.trainable_variables:
    v.assign(rng.normal(0, 1.0, v.shape).astype(np.float32))
  return model


def _expected_questions(directory, prefix=True):
  """(id, article, question, options, answer or None) of every question under `directory`,
  read here: levels middle then high, files by name, questions in file order."""
  out = []
  for level in race.LEVELS:
    for path in sorted((directory / level).glob("*.txt"), key=lambda p: p.name):
      doc = json.loads(path.read_text())
      name = f"{level}/{path.name}" if prefix else path.name
      for k, question in enumerate(doc["questions"]):
        answer = doc["answers"][k] if "answers" in doc else None
        out.append((f"{name}#{k}", doc["article"], question, doc["options"][k], answer))
  return out


def _softmax_of_model(model, tok, questions):
  """The model called here on race.encode's rows of `questions`, as one batch -> numpy
  softmax [N, 4] in float64."""
  items = [("middle", a, q, o, 0) for _, a, q, o, _ in questions]
  feats = race.encode(tok, items, SHAPE["max_seq_length"], SHAPE["max_qa_length"])
  logits = model({k: feats[k] for k in ("input_ids", "seg_ids", "input_mask")},
                 training=False).numpy().astype(np.float64)
  e = np.exp(logits - logits.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _check_rows(rows, questions, probs):
  assert [r["id"] for r in rows] == [q[0] for q in questions]          # ids in order
  for row, (_, article, question, options, answer), p in zip(rows, questions, probs):
    keys = ["id", "article", "question", "options", "prediction", "probabilities"]
    assert list(row) == keys + (["gold"] if answer else [])
    assert (row["article"], row["question"], row["options"]) == (article, question, options)
    assert list(row["probabilities"]) == list("ABCD")
    assert sum(row["probabilities"].values()) == pytest.approx(1, abs=1e-9)
    np.testing.assert_allclose(list(row["probabilities"].values()), p, atol=1e-5)
    assert row["prediction"] == "ABCD"[int(np.argmax(p))]
    assert row["prediction"] == max(row["probabilities"], key=row["probabilities"].get)
    if answer:
      assert row["gold"] == answer


def test_write_predictions_jsonl_is_the_softmax_of_the_models_logits(race_data, tmp_path):
  d, sp = race_data
  tok = tokenization.Tokenizer(sp, lower=True)
  config = ClassifierConfig(task_name="race", data_dir=str(d / "RACE"), sp_model=sp,
                            uncased=True, max_seq_length=SHAPE["max_seq_length"],
                            eval_batch_size=3)
  task = race.RaceTask(config, XLNetConfig(**TINY, n_token=_vocab(sp)), RunConfig(),
                       max_qa_length=SHAPE["max_qa_length"])
  model = _random_model(sp, 1)
  paths = task.write_predictions(model, "dev", str(tmp_path))
  assert paths == [str(tmp_path / "race_dev_predictions.json"),
                   str(tmp_path / "race_dev_predictions.jsonl")]
  questions = _expected_questions(d / "RACE" / "dev")
  assert len(questions) > 8 and len({len(q[2]) for q in questions}) > 1
  rows = [json.loads(line) for line in (tmp_path / "race_dev_predictions.jsonl").read_text(
      encoding="utf-8").splitlines()]
  probs = _softmax_of_model(model, tok, questions)
  _check_rows(rows, questions, probs)
  letters = json.loads((tmp_path / "race_dev_predictions.json").read_text())
  by_file = {}
  for row in rows:                       # the release-style file: the same letters per file
    by_file.setdefault(row["id"].split("#")[0], []).append(row["prediction"])
  assert letters == by_file


@pytest.mark.slow
def test_predict_file_with_a_trained_model(race_data, tmp_path, capsys):
  """--init_checkpoint: a checkpoint of this project (random weights saved here, so that the
  option probabilities are far from uniform); the model is called here on the same weights."""
  d, sp = race_data
  tok = tokenization.Tokenizer(sp, lower=True)
  model = _random_model(sp, 2)
  saved = checkpoint.save_native_checkpoint(model, str(tmp_path / "ckpt" / "weights"))
  common = dict(sp_model=sp, uncased=True, model_config_path=str(d / "config.json"),
                init_checkpoint=saved, eval_batch_size=2, seed=0, xla="off", **SHAPE)

  # a directory in the split layout, with answers: the accuracy is printed
  capsys.readouterr()
  run_main("run_race.py", do_predict=True, predict_file=str(d / "RACE" / "dev"),
           model_dir=str(tmp_path / "a"), **common)
  printed = capsys.readouterr().out
  questions = _expected_questions(d / "RACE" / "dev")
  probs = _softmax_of_model(model, tok, questions)
  rows = [json.loads(line) for line in (tmp_path / "a" / "race_dev_predictions.jsonl")
          .read_text(encoding="utf-8").splitlines()]
  _check_rows(rows, questions, probs)
  result = json.loads([l for l in printed.splitlines() if l.startswith("{")][-1])
  hits = ["ABCD"[int(np.argmax(p))] == q[4] for p, q in zip(probs, questions)]
  assert result["predict_file"] == str(d / "RACE" / "dev")
  assert result["accuracy"] == pytest.approx(np.mean(hits))

  # one file without answers: no gold, no accuracy; named by the file's base name
  doc = json.loads((d / "RACE" / "dev" / "high" / "2.txt").read_text())
  del doc["answers"]
  (tmp_path / "mine.txt").write_text(json.dumps(doc))
  run_main("run_race.py", do_predict=True, predict_file=str(tmp_path / "mine.txt"),
           model_dir=str(tmp_path / "b"), **common)
  printed = capsys.readouterr().out
  assert not [l for l in printed.splitlines() if l.startswith("{")]
  rows = [json.loads(line) for line in (tmp_path / "b" / "race_mine_predictions.jsonl")
          .read_text(encoding="utf-8").splitlines()]
  mine = [(f"mine.txt#{k}", doc["article"], q, doc["options"][k], None)
          for k, q in enumerate(doc["questions"])]
  _check_rows(rows, mine, _softmax_of_model(model, tok, mine))
  assert json.loads((tmp_path / "b" / "race_mine_predictions.json").read_text()) == {
      "mine.txt": [r["prediction"] for r in rows]}


def test_predict_file_errors_are_one_line_before_any_work(race_data, tmp_path):
  from tests.script_helpers import main_exit
  d, sp = race_data
  common = dict(sp_model=sp, uncased=True, model_config_path=str(d / "config.json"), **SHAPE)
  code = main_exit("run_race.py", do_predict=True, predict_file=str(tmp_path / "none"),
                   model_dir=str(tmp_path / "m"), **common)
  assert code == f"run_race.py: {tmp_path / 'none'}: --predict_file not found"
  (tmp_path / "bad.txt").write_text('{"article": "a", "questions": ["q"], "options": [["x"]]}')
  code = main_exit("run_race.py", do_predict=True, predict_file=str(tmp_path / "bad.txt"),
                   model_dir=str(tmp_path / "m"), **common)
  assert code.startswith(f"run_race.py: {tmp_path / 'bad.txt'}: not a RACE file") and \
      "\n" not in code
  assert not (tmp_path / "m").exists()
