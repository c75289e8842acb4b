"""Your own classification data (--task_name=custom): TSV / CSV / JSON Lines files with named
columns, the label set from the training file (sorted) or from --labels (in its order), a
real-valued target (--regression), through the same features, cache, metrics, predictions files
and Hugging Face export as the GLUE tasks; bad files refused in one line naming file and line.

References: hand-written files and hand-computed metrics; scipy's Pearson and Spearman; the
predictions files read back and scored by this test's own arithmetic."""

import json
import os
import random

import numpy as np
import pytest

from data_utils import tokenization
from finetuning import classifier_data, metrics, table_data
from finetuning.classifier_task import ClassifierConfig, ClassifierTask
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from tests.script_helpers import main_exit, run_main

TINY = {"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8, "d_inner": 32}
SHORT = dict(train_steps=2, steps_per_loop=2, save_every=2, warmup_steps=1, learning_rate=1e-3,
             seed=0, xla="off", dropout=0.0, dropatt=0.0, max_seq_length=24, train_batch_size=4,
             eval_batch_size=4)
WORDS = "the film was long and the story went on with many scenes of people talking".split()
CUE = {"pos": "excellent", "neg": "awful", "neutral": "ordinary"}


def _text(rng, label):
  words = rng.sample(WORDS, 6)
  words.insert(rng.randrange(7), CUE[label])
  return " ".join(words)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """A 3-class data set in --data_dir's names: train.jsonl (ids), dev.tsv, test.csv (no
  labels); an SP model and a tiny config."""
  d = tmp_path_factory.mktemp("custom")
  rng = random.Random(4)
  labels = ["pos", "neg", "neutral"]
  with open(d / "train.jsonl", "w") as f:
    for k in range(24):
      f.write(json.dumps({"id": f"t{k}", "text": _text(rng, labels[k % 3]),
                          "label": labels[k % 3]}) + "\n")
  dev = [(_text(rng, labels[k % 3]), labels[k % 3]) for k in range(8)]
  (d / "dev.tsv").write_text("label\ttext\n" + "".join(f"{l}\t{t}\n" for t, l in dev))
  test = [_text(rng, labels[k % 3]) for k in range(5)]
  (d / "test.csv").write_text("text\n" + "".join(f"{t}\n" for t in test))
  (d / "text.txt").write_text("\n".join(_text(rng, l) for l in labels * 40))
  sp = tokenization.train_sentencepiece([str(d / "text.txt")], str(d / "sp"), 60, lower=True)
  (d / "config.json").write_text(json.dumps(dict(TINY, n_token=60)))
  return d, sp, dev, test


def _jsonl(path):
  return [json.loads(line) for line in open(path, encoding="utf-8")]


# ---- reading, labels and errors (no model) --------------------------------------------------
def test_labels_sorted_from_the_file_numerically_when_integers(tmp_path):
  path = tmp_path / "train.tsv"
  path.write_text("text\tlabel\na\t10\nb\t2\nc\t1\nd\t2\n")
  assert table_data.labels_from_file(str(path), table_data.Columns()) == ("1", "2", "10")
  path.write_text("text\tlabel\na\tb10\nb\tb2\nc\tB\n")
  assert table_data.labels_from_file(str(path), table_data.Columns()) == ("B", "b10", "b2")
  assert table_data.parse_labels("neg, pos ,neutral") == ("neg", "pos", "neutral")


def test_pairs_ids_and_formats(tmp_path):
  (tmp_path / "a.csv").write_text('q1,q2,same,id\n"Why, now?",How?,yes,x\nA,B,no,y\n')
  (tmp_path / "a.jsonl").write_text(json.dumps({"q1": "Why, now?", "q2": "How?", "same": "yes",
                                                "id": "x"}) + "\n\n" +
                                    json.dumps({"q1": "A", "q2": "B", "same": "no", "id": "y"}))
  columns = table_data.Columns("q1", "q2", "same")
  for name in ("a.csv", "a.jsonl"):
    ex = table_data.read_table(str(tmp_path / name), "dev", columns, labels=("no", "yes"),
                               report=lambda _: None)
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in ex] == [
        ("x", "Why, now?", "How?", "yes"), ("y", "A", "B", "no")]
  # a TSV has no quoting (GLUE's rule): quotes are text; without an id column: SPLIT-LINE
  (tmp_path / "b.tsv").write_text('text\tlabel\n"quoted" text\t1\n\nplain\t0\n')
  ex = table_data.read_table(str(tmp_path / "b.tsv"), "train", table_data.Columns(),
                             report=lambda _: None)
  assert [(e.guid, e.text_a, e.label) for e in ex] == [("train-2", '"quoted" text', "1"),
                                                       ("train-4", "plain", "0")]


@pytest.mark.parametrize("name,content,labels,message", [
    ("train.tsv", "sentence\tlabel\na\tx\n", None,
     "{path}: no column 'text' (--text_a_column); its columns: 'sentence', 'label'"),
    ("train.csv", "text,gold\na,x\n", None,
     "{path}: no column 'label' (--label_column); its columns: 'text', 'gold'"),
    ("dev.tsv", "text\tlabel\na\tpos\nb\tmaybe\n", ("neg", "pos"),
     "{path}:3: label 'maybe' is not one of ['neg', 'pos']"),
    ("train.tsv", "", None, "{path}: empty file (expected a header line naming the columns)"),
    ("train.jsonl", "\n", None, "{path}: empty file (no JSON objects)"),
    ("train.tsv", "text\tlabel\n", None, "{path}: no examples (a header, no rows)"),
    ("train.tsv", "text\tlabel\na\tpos\nb\tpos\n", None,
     "{path}: 1 label in column 'label' ('pos'): a classifier needs at least 2 (a "
     "real-valued target: --regression)"),
    ("train.jsonl", '{"text": "a", "label": "x", "id": 1}\n{"text": "b", "label": "y", "id": 1}\n',
     None, "{path}:2: id '1' repeats line 1 (column 'id')"),
    ("train.jsonl", '{"text": 3, "label": "x"}\n', None, "{path}:1: 'text' is not a string (3)"),
])
def test_bad_files_are_one_line_naming_file_and_line(tmp_path, name, content, labels, message):
  path = tmp_path / name
  path.write_text(content)
  split = name.split(".")[0]
  with pytest.raises(ValueError) as e:
    if labels is None and split == "train":
      table_data.labels_from_file(str(path), table_data.Columns())
    else:
      table_data.read_table(str(path), split, table_data.Columns(), labels=labels)
  assert str(e.value) == message.format(path=path)


def test_the_cache_key_changes_with_labels_columns_and_regression(data, tmp_path):
  d, sp, _, _ = data
  files = {"train": str(d / "train.jsonl")}
  labels = ("neg", "neutral", "pos")
  specs = [table_data.custom_spec(files, table_data.Columns(), labels),
           table_data.custom_spec(files, table_data.Columns(), ("pos", "neg", "neutral")),
           table_data.custom_spec(files, table_data.Columns(text_b="id"), labels),
           table_data.custom_spec(files, table_data.Columns(label="id"), labels),
           table_data.custom_spec(files, table_data.Columns(), (), regression=True)]
  assert len({spec.key for spec in specs}) == 5
  names = []
  for spec in specs[:3]:          # the settings this file can be read with: three cache files
    config = ClassifierConfig(task_name="custom", sp_model=sp, uncased=True,
                              cache_dir=str(tmp_path / "cache"), max_seq_length=16)
    task = ClassifierTask(config, XLNetConfig(**TINY, n_token=60), RunConfig(), spec=spec)
    names.append(os.path.basename(task.features_path("train")))
  assert len(set(names)) == 3 and sorted(os.listdir(tmp_path / "cache")) == sorted(
      names + [n for n in os.listdir(tmp_path / "cache") if n not in names])
  # the same settings again: the same name (the cache is reused)
  assert table_data.custom_spec(files, table_data.Columns(), labels).key == specs[0].key


def test_custom_metrics_against_hand_and_scipy():
  labels = [0, 0, 1, 1, 2, 2]
  preds = [0, 1, 1, 1, 0, 2]
  # per class F1: 0: p 1/2 r 1/2 -> 1/2; 1: p 2/3 r 1 -> 4/5; 2: p 1 r 1/2 -> 2/3
  assert metrics.task_metrics("custom", labels, preds) == pytest.approx(
      {"accuracy": 4 / 6, "macro_f1": (1 / 2 + 4 / 5 + 2 / 3) / 3})
  stats = pytest.importorskip("scipy.stats")
  y = [0.5, 1.0, 3.25, 2.0, 2.0, 4.75]
  p = [0.1, 1.5, 2.5, 2.5, 1.0, 5.0]
  out = metrics.task_metrics("custom", y, p, regression=True)
  assert out == pytest.approx({"pearson": stats.pearsonr(y, p)[0],
                               "spearman": stats.spearmanr(y, p)[0]})


# ---- end to end: run_classifier.py --task_name=custom ---------------------------------------
def _macro_f1_by_hand(gold, pred):
  f1s = []
  for c in sorted(set(gold) | set(pred)):
    tp = sum(g == c and p == c for g, p in zip(gold, pred))
    n_pred, n_gold = sum(p == c for p in pred), sum(g == c for g in gold)
    f1s.append(0.0 if tp == 0 else 2 * tp / (n_pred + n_gold))
  return sum(f1s) / len(f1s)


def _result(out):
  return json.loads([l for l in out.splitlines() if l.startswith("{")][-1])


@pytest.mark.slow
def test_custom_labels_from_the_file(data, tmp_path, capsys):
  d, sp, dev, test = data
  m = tmp_path / "m"
  run_main("run_classifier.py", task_name="custom", data_dir=str(d), sp_model=sp, uncased=True,
           model_config_path=str(d / "config.json"), model_dir=str(m), do_train=True,
           do_eval=True, do_predict=True, **SHORT)
  result = _result(capsys.readouterr().out)
  order = ["neg", "neutral", "pos"]                       # the file's labels, sorted
  assert json.loads((m / "task.json").read_text())["labels"] == order
  rows = _jsonl(m / "predictions" / "custom.dev.jsonl")
  assert [(r["id"], r["text_a"], r["gold"]) for r in rows] == [
      (f"dev-{k + 2}", t, l) for k, (t, l) in enumerate(dev)]
  assert all(list(r["probabilities"]) == order for r in rows)
  gold, pred = [r["gold"] for r in rows], [r["prediction"] for r in rows]
  assert result["accuracy"] == pytest.approx(np.mean([g == p for g, p in zip(gold, pred)]))
  assert result["macro_f1"] == pytest.approx(_macro_f1_by_hand(gold, pred))
  rows = _jsonl(m / "predictions" / "custom.test.jsonl")  # unlabelled: no gold
  assert [(r["id"], r["text_a"]) for r in rows] == [(f"test-{k + 2}", t)
                                                     for k, t in enumerate(test)]
  assert all("gold" not in r for r in rows) and not (m / "custom.test.tsv").exists()

  # a later run reads the recorded label set; another one is refused in one line
  code = main_exit("run_classifier.py", task_name="custom", data_dir=str(d), sp_model=sp,
                   uncased=True, model_config_path=str(d / "config.json"), model_dir=str(m),
                   do_eval=True, labels="pos,neg,neutral", **SHORT)
  assert code == (f"run_classifier.py: the labels ['pos', 'neg', 'neutral'] are not those {m} "
                  f"was trained with (['neg', 'neutral', 'pos'], {m}/task.json)")


@pytest.mark.slow
def test_custom_labels_from_the_flag(data, tmp_path, capsys):
  d, sp, dev, _ = data
  m = tmp_path / "m"
  order = ["pos", "neutral", "neg"]
  run_main("run_classifier.py", task_name="custom", train_file=str(d / "train.jsonl"),
           dev_file=str(d / "dev.tsv"), labels=",".join(order), sp_model=sp, uncased=True,
           model_config_path=str(d / "config.json"), model_dir=str(m), do_train=True,
           do_eval=True, export_hf_dir=str(tmp_path / "hf"),
           export_dir=str(tmp_path / "serving"), **SHORT)
  capsys.readouterr()
  assert json.loads((m / "task.json").read_text())["labels"] == order
  rows = _jsonl(m / "predictions" / "custom.dev.jsonl")
  assert all(list(r["probabilities"]) == order for r in rows)
  assert all(max(r["probabilities"], key=r["probabilities"].get) == r["prediction"]
             for r in rows)
  hf = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert hf["id2label"] == {str(k): l for k, l in enumerate(order)}
  # the SavedModel on raw text answers the dev texts as the predictions file does
  import tensorflow as tf
  served = tf.saved_model.load(str(tmp_path / "serving")).signatures["serving_default"](
      sentence=tf.constant([t for t, _ in dev]))
  assert [v.decode() for v in served["label"].numpy()] == [r["prediction"] for r in rows]
  np.testing.assert_allclose(served["probabilities"].numpy(),
                             [[r["probabilities"][l] for l in order] for r in rows], atol=1e-5)


@pytest.mark.slow
def test_custom_regression(data, tmp_path, capsys):
  d, sp, _, _ = data
  rng = random.Random(9)
  rows = [(_text(rng, "pos"), _text(rng, "neg"), round(rng.uniform(0, 5), 2)) for _ in range(14)]
  for split, part in (("train", rows[:8]), ("dev", rows[8:])):
    (tmp_path / f"{split}.csv").write_text("first,second,score\n" + "".join(
        f"{a},{b},{s}\n" for a, b, s in part))
  m = tmp_path / "m"
  run_main("run_classifier.py", task_name="custom", data_dir=str(tmp_path), regression=True,
           text_a_column="first", text_b_column="second", label_column="score", sp_model=sp,
           uncased=True, model_config_path=str(d / "config.json"), model_dir=str(m),
           do_train=True, do_eval=True, **SHORT)
  result = _result(capsys.readouterr().out)
  out = _jsonl(m / "predictions" / "custom.dev.jsonl")
  assert [list(r) for r in out] == [["id", "text_a", "text_b", "prediction", "score",
                                     "gold"]] * 6
  assert [(r["text_a"], r["text_b"], r["gold"]) for r in out] == rows[8:]
  assert all(r["prediction"] == r["score"] for r in out)
  stats = pytest.importorskip("scipy.stats")
  gold, pred = [r["gold"] for r in out], [r["score"] for r in out]
  assert result["pearson"] == pytest.approx(stats.pearsonr(gold, pred)[0], abs=1e-6)
  assert result["spearman"] == pytest.approx(stats.spearmanr(gold, pred)[0], abs=1e-6)
  assert json.loads((m / "task.json").read_text())["regression"] is True


@pytest.mark.parametrize("files,flags,message", [
    ({"train.tsv": "sentence\tlabel\na\tx\nb\ty\n"}, {},
     "{d}/train.tsv: no column 'text' (--text_a_column); its columns: 'sentence', 'label'"),
    ({"train.tsv": "text\tlabel\na\tx\nb\ty\n", "dev.tsv": "text\tlabel\na\tx\nb\tz\n"}, {},
     "{d}/dev.tsv:3: label 'z' is not one of ['x', 'y']"),
    ({"train.tsv": ""}, {}, "{d}/train.tsv: empty file (expected a header line naming the "
     "columns)"),
    ({"train.tsv": "text\tlabel\na\tx\nb\tx\n"}, {}, "{d}/train.tsv: 1 label in column 'label' "
     "('x'): a classifier needs at least 2 (a real-valued target: --regression)"),
    ({"train.tsv": "text\tlabel\na\tx\nb\ty\n"}, {"labels": "x"},
     "--labels=x: a classifier needs at least 2 labels"),
    ({"train.tsv": "text\tlabel\na\tx\nb\ty\n", "train.csv": "text,label\na,x\n"}, {},
     "--data_dir={d}: train.tsv and train.csv both hold the train split: keep one, or name "
     "it with --train_file"),
    ({"dev.tsv": "text\tlabel\na\tx\n"}, {"labels": "x,y"},
     "--task_name=custom --do_train: no train file: pass --train_file=PATH, or a --data_dir "
     "holding train.tsv, train.csv or train.jsonl"),
    ({"train.tsv": "text\tlabel\na\tx\nb\ty\n"}, {"train_file": "x.txt"},
     "--train_file=x.txt: unknown format: name the file .tsv, .csv or .jsonl"),
])
def test_bad_custom_data_is_refused_before_anything_is_written(data, tmp_path, files, flags,
                                                               message):
  _, sp, _, _ = data
  d = tmp_path / "data"
  d.mkdir()
  for name, content in files.items():
    (d / name).write_text(content)
  code = main_exit("run_classifier.py", task_name="custom", data_dir=str(d), sp_model=sp,
                   uncased=True, model_config_path=str(data[0] / "config.json"),
                   model_dir=str(tmp_path / "m"), do_train=True, do_eval=True,
                   **flags, **SHORT)
  assert code == "run_classifier.py: " + message.format(d=d)
  assert sorted(os.listdir(tmp_path)) == ["data"]                  # no model dir
  assert sorted(os.listdir(d)) == sorted(files)                    # no cache beside the data


def test_a_built_in_task_refuses_custom_flags(data, tmp_path):
  _, sp, _, _ = data
  code = main_exit("run_classifier.py", task_name="sst-2", data_dir=str(tmp_path), sp_model=sp,
                   model_config_path=str(data[0] / "config.json"), model_dir=str(tmp_path / "m"),
                   do_train=True, labels="a,b")
  assert code == ("run_classifier.py: --labels is for --task_name=custom (sst-2 reads its "
                  "official files from --data_dir)")
  assert classifier_data.get_task("sst-2").key is None
