"""Training with evaluation on data without labels (issue #31): each fine-tuning script runs to
the end, says once that its evaluation is skipped and why, keeps no best/ checkpoint, and still
writes its predictions and its export.

Before #31, `run_squad.py --do_train --do_predict` on a predict file without answers (SQuAD's
test layout) ended with `KeyError: 'f1'` in the periodic evaluation, right after its first
checkpoint, and wrote neither predictions nor the export. run_race.py refused a split without
answers with a one-line error and had no prediction output at all."""

import json
import random

import numpy as np
import pytest

from data_utils import fileio, tokenization
from finetuning import race
from tests.script_helpers import run_main
from tests.finetuning.test_classifier import _sentence
from tests.finetuning.test_race import _write_split
from tests.finetuning.test_squad import _squad

TINY = {"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8, "d_inner": 32}
SHORT = dict(train_steps=4, steps_per_loop=2, save_every=2, warmup_steps=1, learning_rate=1e-3,
             seed=0, xla="off", dropout=0.0, dropatt=0.0)


def _skipped_lines(out):
  return [l for l in out.splitlines() if "evaluation skipped" in l or "--do_eval skipped" in l]


@pytest.mark.slow
def test_squad_trains_and_predicts_a_file_without_answers(tmp_path, text_and_sp, capsys):
  _, sp = text_and_sp
  rng = random.Random(3)
  train = _squad(tmp_path / "train.json", rng, 24, v2=True)
  test = json.loads(_squad(tmp_path / "test.json", rng, 6, v2=True).read_text())
  for article in test["data"]:                  # SQuAD's test layout: no answers at all
    for qa in article["paragraphs"][0]["qas"]:
      del qa["answers"], qa["is_impossible"]
  (tmp_path / "test.json").write_text(json.dumps(test))
  cfg = tmp_path / "config.json"
  cfg.write_text(json.dumps(dict(TINY, n_token=tokenization.Tokenizer(sp, lower=True)
                                 .vocab_size)))
  run_main("run_squad.py", do_train=True, do_predict=True, train_file=str(train),
           predict_file=str(tmp_path / "test.json"), sp_model=sp, uncased=True,
           model_config_path=str(cfg), model_dir=str(tmp_path / "m"), max_seq_length=48,
           max_query_length=12, doc_stride=16, train_batch_size=4, start_n_top=2,
           end_n_top=2, export_dir=str(tmp_path / "serving"), **SHORT)
  out = capsys.readouterr().out
  assert _skipped_lines(out) == [
      f"evaluation skipped: {tmp_path}/test.json has no answers (6 questions without "
      "'answers' or 'is_impossible', as in SQuAD's test layout): nothing to score; training "
      "goes on without a best/ checkpoint (the last weights are used)"], out[-3000:]
  assert "eval at step" not in out and "new best" not in out
  assert "saved " + str(tmp_path / "m" / "ckpt" / "ckpt-4") in out       # ran to the end
  predictions = json.loads((tmp_path / "m" / "predictions.json").read_text())
  assert set(predictions) == {f"q{k}" for k in range(6)}
  assert (tmp_path / "m" / "null_odds.json").exists()
  assert (tmp_path / "serving" / "saved_model.pb").exists()
  assert not (tmp_path / "m" / "best").exists()


@pytest.fixture(scope="module")
def glue_test_split(tmp_path_factory):
  """SST-2 files whose test split has no label column (the GLUE layout)."""
  d = tmp_path_factory.mktemp("sst2_unlabelled")
  rng = random.Random(1)
  rows = [(_sentence(rng, l), l) for l in [rng.randrange(2) for _ in range(24)]]
  (d / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in rows))
  (d / "test.tsv").write_text("index\tsentence\n" + "".join(
      f"{i}\t{_sentence(rng, i % 2)}\n" for i in range(7)))
  (d / "text.txt").write_text((d / "train.tsv").read_text().replace("\t", " ") * 8)
  sp = tokenization.train_sentencepiece([str(d / "text.txt")], str(d / "sp"), 80, lower=True)
  (d / "config.json").write_text(json.dumps(dict(TINY, n_token=80)))
  return d, sp


@pytest.mark.slow
def test_classifier_evaluating_a_split_without_labels(glue_test_split, tmp_path, capsys):
  d, sp = glue_test_split
  run_main("run_classifier.py", task_name="sst-2", data_dir=str(d), sp_model=sp, uncased=True,
           model_config_path=str(d / "config.json"), model_dir=str(tmp_path), eval_split="test",
           max_seq_length=24, train_batch_size=4, eval_batch_size=4, do_train=True,
           do_eval=True, do_predict=True, export_dir=str(tmp_path / "serving"), **SHORT)
  out = capsys.readouterr().out
  reason = f"{d}/test.tsv (sst-2's test split) has no labels: nothing to score"
  assert _skipped_lines(out) == [
      f"evaluation skipped: {reason}; training goes on without a best/ checkpoint (the last "
      "weights are used)", f"--do_eval skipped: {reason}"], out[-3000:]
  assert "eval at step" not in out and "Traceback" not in out
  lines = fileio.read_text(str(tmp_path / "SST-2.tsv")).splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 8
  rows = [json.loads(l) for l in fileio.read_text(
      str(tmp_path / "predictions" / "sst-2.test.jsonl")).splitlines()]
  assert [r["id"] for r in rows] == [str(i) for i in range(7)]          # the test file's index
  assert all("gold" not in r for r in rows)                             # no labels, no gold
  assert [f"{r['id']}\t{r['prediction']}" for r in rows] == lines[1:]
  assert not (tmp_path / "predictions" / "sst-2.dev.jsonl").exists()    # --do_eval skipped
  assert (tmp_path / "serving" / "saved_model.pb").exists()
  assert not (tmp_path / "best").exists()


def _race_answers_removed(directory, split):
  """Delete "answers" from every file of a split (a RACE layout without answers)."""
  for path in sorted((directory / split).glob("*/*.txt")):
    doc = json.loads(path.read_text())
    del doc["answers"]
    path.write_text(json.dumps(doc))


@pytest.mark.slow
def test_race_trains_and_predicts_a_split_without_answers(tmp_path, capsys, monkeypatch):
  d = tmp_path / "RACE"
  rng = random.Random(2)
  for split, n in (("train", 8), ("test", 3), ("dev", 3)):
    _write_split(d, split, n, rng)
  _race_answers_removed(d, "test")
  for path in d.glob("dev/*/*.txt"):           # 1-3 questions per dev file, answers at random
    doc = json.loads(path.read_text())
    n = rng.randint(1, 3)
    doc.update(questions=doc["questions"] * n, options=doc["options"] * n,
               answers=[rng.choice("ABCD") for _ in range(n)])
    path.write_text(json.dumps(doc))
  text = "\n".join(json.loads(p.read_text())["article"] for p in d.glob("train/*/*.txt"))
  (tmp_path / "text.txt").write_text(text * 4)
  sp = tokenization.train_sentencepiece([str(tmp_path / "text.txt")], str(tmp_path / "sp"), 60,
                                        lower=True)
  cfg = tmp_path / "config.json"
  cfg.write_text(json.dumps(dict(TINY, n_token=60)))
  common = dict(data_dir=str(d), sp_model=sp, uncased=True, model_config_path=str(cfg),
                model_dir=str(tmp_path / "m"), max_seq_length=40, max_qa_length=8,
                train_batch_size=2, eval_batch_size=4)
  run_main("run_race.py", do_train=True, do_eval=True, do_predict=True, eval_split="test",
           predict_split="test", export_dir=str(tmp_path / "serving"), **common, **SHORT)
  out = capsys.readouterr().out
  reason = (f"{d}/test has no answers (6 questions in 6 files without 'answers'): nothing to "
            "score")
  assert _skipped_lines(out) == [
      f"evaluation skipped: {reason}; training goes on without a best/ checkpoint (the last "
      "weights are used)", f"--do_eval skipped: {reason}"], out[-3000:]
  assert "eval at step" not in out and "new best" not in out
  assert "saved " + str(tmp_path / "m" / "ckpt" / "ckpt-4") in out       # ran to the end
  predictions = json.loads((tmp_path / "m" / "race_test_predictions.json").read_text())
  assert sorted(predictions) == sorted(f"{level}/{k}.txt" for level in ("middle", "high")
                                       for k in range(3))
  assert all(len(v) == 1 and v[0] in "ABCD" for v in predictions.values())
  assert (tmp_path / "serving" / "saved_model.pb").exists()
  assert not (tmp_path / "m" / "best").exists()

  # The same model on a labelled split: the file's answers, read against the files' own
  # "answers", give the accuracy --do_eval reports (predictions line up with their questions).
  run_main("run_race.py", do_eval=True, do_predict=True, eval_split="dev", predict_split="dev",
           **common, **SHORT)
  out = capsys.readouterr().out
  reported = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])["accuracy"]
  predictions = json.loads((tmp_path / "m" / "race_dev_predictions.json").read_text())
  truth = {f"{p.parent.name}/{p.name}": json.loads(p.read_text())["answers"]
           for p in d.glob("dev/*/*.txt")}
  assert sorted(predictions) == sorted(truth)
  assert [len(predictions[k]) for k in truth] == [len(v) for v in truth.values()]
  hits = [a == b for name in truth for a, b in zip(predictions[name], truth[name])]
  assert reported == pytest.approx(sum(hits) / len(hits))

  # A model that always answers right: the file must be the files' own answers, in order.
  def oracle(self, model, split):     # logits peaked at the right answer
    labels = self._features(split)["label"]
    return np.eye(race.N_CHOICE, dtype=np.float32)[labels] * 10, labels
  monkeypatch.setattr(race.RaceTask, "predict_logits", oracle)
  run_main("run_race.py", do_predict=True, predict_split="dev", **common, **SHORT)
  capsys.readouterr()
  assert json.loads((tmp_path / "m" / "race_dev_predictions.json").read_text()) == truth
