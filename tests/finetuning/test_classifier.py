"""run_classifier.py: official layouts in, a tiny model learns a toy task, GLUE files out."""

import json
import os
import random
import sys

import numpy as np
import pytest

from data_utils import tokenization
from finetuning import classifier_data, classifier_features
from tests import warm
from tests.hang_guard import HANG_GUARD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILLER = ("the film was long and the story went on with many scenes of people talking about "
          "their day while music played softly in the background").split()


def _sentence(rng, label):
  words = rng.sample(FILLER, 8)
  words.insert(rng.randrange(9), rng.choice(["excellent", "wonderful"] if label else
                                            ["terrible", "awful"]))
  return " ".join(words)


@pytest.fixture(scope="module")
def sst2(tmp_path_factory):
  d = tmp_path_factory.mktemp("sst2")
  rng = random.Random(0)
  for split, n in (("train", 400), ("dev", 100)):
    rows = [(_sentence(rng, l), l) for l in [rng.randrange(2) for _ in range(n)]]
    (d / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in rows))
  (d / "test.tsv").write_text("index\tsentence\n" + "".join(
      f"{i}\t{_sentence(rng, i % 2)}\n" for i in range(20)))
  text = d / "text.txt"
  text.write_text((d / "train.tsv").read_text().replace("\t", " "))
  sp = tokenization.train_sentencepiece([str(text)], str(d / "sp"), 120, lower=True)
  cfg = d / "config.json"
  cfg.write_text(json.dumps({"n_layer": 2, "d_model": 32, "n_head": 4, "d_head": 8,
                             "d_inner": 64, "n_token": 120}))
  return d, sp, cfg


def test_glue_readers_and_errors(tmp_path):
  (tmp_path / "train.tsv").write_text("gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\n"
                                      "gj04\t0\t*\tThe more we study verbs.\n")
  ex = classifier_data.read_split(classifier_data.GLUE["cola"], tmp_path, "train")
  assert [e.label for e in ex] == ["1", "0"] and ex[1].text_a == "The more we study verbs."
  (tmp_path / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
  with pytest.raises(ValueError, match=r"dev.tsv:2: label 'maybe' is not one of"):
    classifier_data.read_split(classifier_data.GLUE["rte"], tmp_path, "dev")
  (tmp_path / "dev.tsv").write_text("index\tsentence1\n0\ta\n")   # short lines are skipped
  with pytest.raises(ValueError, match=r"dev.tsv: no examples \(1 line, skipped 1: 1 with too "
                                       r"few columns \(first: line 2 has 2 of 4\)\)"):
    classifier_data.read_split(classifier_data.GLUE["rte"], tmp_path, "dev")
  (tmp_path / "test.tsv").write_text("index\tsentence1\tsentence2\n0\ta\n")  # but not in test
  with pytest.raises(ValueError, match=r"test.tsv:2: expected at least 3 columns, found 2"):
    classifier_data.read_split(classifier_data.GLUE["rte"], tmp_path, "test")
  (tmp_path / "train.csv").write_text('"3","Title","Some news, with a comma"\n')
  ex = classifier_data.read_split(classifier_data.TEXT["ag-news"], tmp_path, "train")
  assert ex[0].text_a == "Title Some news, with a comma" and ex[0].label == "3"
  for label, name in (("pos", "1_9.txt"), ("neg", "2_1.txt")):
    os.makedirs(tmp_path / "train" / label, exist_ok=True)
    (tmp_path / "train" / label / name).write_text("Great<br />movie")
  ex = classifier_data.read_split(classifier_data.TEXT["imdb"], tmp_path, "train")
  assert sorted(e.label for e in ex) == ["neg", "pos"] and ex[0].text_a == "Great movie"
  with pytest.raises(ValueError, match="--task_name='glue' is not one of"):
    classifier_data.get_task("glue")


def test_glue_reports_what_it_used_and_skipped(tmp_path, capsys):
  # Official GLUE train/dev files have incomplete lines; like the release, they are skipped,
  # and one line says how many and why.
  (tmp_path / "train.tsv").write_text("index\tquestion\tsentence\tlabel\n"
                                      "0\tWho?\tHim.\tentailment\n1\tWhat?\n\n"
                                      "2\tWhy?\tBecause.\tnot_entailment\n3\tHow?\tSo.\n")
  ex = classifier_data.read_split(classifier_data.GLUE["qnli"], tmp_path, "train")
  assert [(e.guid, e.text_b, e.label) for e in ex] == [
      ("train-2", "Him.", "entailment"), ("train-5", "Because.", "not_entailment")]
  assert capsys.readouterr().out == (
      f"{tmp_path / 'train.tsv'}: used 2 of 5 lines; skipped 3: 2 with too few columns "
      "(first: line 3 has 2 of 4), 1 blank\n")
  (tmp_path / "train.csv").write_text('"1","Title","Body"\n\n"2","T","B"\n')
  classifier_data.read_split(classifier_data.TEXT["dbpedia"], tmp_path, "train")
  assert capsys.readouterr().out == (f"{tmp_path / 'train.csv'}: used 2 of 3 rows; "
                                     "skipped 1: 1 blank\n")


def test_sts_b_regression_and_mnli_splits(tmp_path, sst2):
  _, sp, _ = sst2
  header = "\t".join(["index", "genre", "filename", "year", "old_index", "source1", "source2",
                      "sentence1", "sentence2", "score"])
  (tmp_path / "dev.tsv").write_text(header + "\n0\tmain\tf\t2012\t1\tx\ty\tA film.\tA movie.\t4.2\n"
                                    "1\tmain\tf\t2012\t2\tx\ty\tOne.\tTwo.\tbad\n")
  with pytest.raises(ValueError, match=r"dev.tsv:3: score 'bad' is not a number"):
    classifier_data.read_split(classifier_data.GLUE["sts-b"], tmp_path, "dev")
  (tmp_path / "dev.tsv").write_text(header + "\n0\tmain\tf\t2012\t1\tx\ty\tA film.\tA movie.\t4.2\n")
  ex = classifier_data.read_split(classifier_data.GLUE["sts-b"], tmp_path, "dev")
  tok = tokenization.Tokenizer(sp, lower=True)
  f = classifier_features.encode(tok, ex, 16, ())
  assert f["label"].dtype == np.float32 and f["label"][0] == pytest.approx(4.2)
  row = ["0"] * 8 + ["premise text", "hypothesis text", "x", "neutral"]
  (tmp_path / "dev_mismatched.tsv").write_text("header\n" + "\t".join(row) + "\n")
  ex = classifier_data.read_split(classifier_data.GLUE["mnli"], tmp_path, "dev_mismatched")
  assert (ex[0].text_a, ex[0].text_b, ex[0].label) == ("premise text", "hypothesis text", "neutral")
  with pytest.raises(FileNotFoundError, match="dev_matched.tsv: not found"):
    classifier_data.read_split(classifier_data.GLUE["mnli"], tmp_path, "dev")


def test_xlnet_layout_left_padding(sst2):
  _, sp, _ = sst2
  tok = tokenization.Tokenizer(sp, lower=True)
  exs = [classifier_data.Example("a", "excellent film", "the story", "1"),
         classifier_data.Example("b", " ".join(FILLER), None, "0")]
  f = classifier_features.encode(tok, exs, 32, ("0", "1"))
  a, b = tok.encode("excellent film"), tok.encode("the story")
  n = len(a) + len(b) + 3
  assert n < 32
  np.testing.assert_array_equal(f["input_ids"][0, -n:], a + [4] + b + [4, 3])
  np.testing.assert_array_equal(f["seg_ids"][0], [4] * (32 - n) + [0] * (len(a) + 1) +
                                [1] * (len(b) + 1) + [2])
  np.testing.assert_array_equal(f["input_mask"][0], [1] * (32 - n) + [0] * n)
  assert f["input_ids"][1, -1] == 3 and f["input_ids"][1, -2] == 4 and f["input_mask"][1].sum() == 0
  np.testing.assert_array_equal(f["label"], [1, 0])
  a, b = [1, 2, 3, 4, 5], [6, 7]
  classifier_features.truncate_pair(a, b, 5)      # the longer text loses its last tokens
  assert (a, b) == ([1, 2, 3], [6, 7])


@pytest.mark.slow
def test_fine_tunes_well_above_chance_and_writes_submission(sst2, tmp_path):
  d, sp, cfg = sst2
  args = [sys.executable, "run_classifier.py", "--task_name=sst-2", f"--data_dir={d}",
          f"--sp_model={sp}", "--uncased", f"--model_config_path={cfg}",
          f"--model_dir={tmp_path}", "--max_seq_length=48", "--train_batch_size=16",
          "--learning_rate=1e-3", "--train_steps=150", "--warmup_steps=15", "--save_every=75",
          "--steps_per_loop=15", "--dropout=0.0", "--dropatt=0.0", "--do_train", "--do_eval",
          "--do_predict"]
  r = warm.run(args, cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD,
                     env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
  assert r.returncode == 0, r.stderr[-3000:]
  result = json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
  assert result["accuracy"] > 0.85, r.stdout
  assert os.path.exists(tmp_path / "best" / "best.json")
  lines = (tmp_path / "SST-2.tsv").read_text().splitlines()
  assert lines[0] == "index\tprediction" and len(lines) == 21
  assert all(l.split("\t")[1] in ("0", "1") for l in lines[1:])


# One tiny fixture per official layout: (task, split, file name, content, expected first example)
_GLUE_ROWS = {
    "mrpc": ("train", "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
             "1\t1\t2\tHe said hi.\tHe greeted.\n", ("He said hi.", "He greeted.", "1")),
    "qqp": ("train", "train.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
            "0\t1\t2\tWhy?\tHow?\t0\n", ("Why?", "How?", "0")),
    "qnli": ("dev", "dev.tsv", "index\tquestion\tsentence\tlabel\n"
             "0\tWho?\tHim.\tentailment\n", ("Who?", "Him.", "entailment")),
    "wnli": ("train", "train.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\t1\n",
             ("A.", "B.", "1")),
    "ax": ("test", "diagnostic.tsv", "index\tsentence1\tsentence2\n7\tA cat.\tAn animal.\n",
           ("A cat.", "An animal.", None)),
    "sst-2": ("test", "test.tsv", "index\tsentence\n3\tfine film\n", ("fine film", None, None)),
    "cola": ("test", "test.tsv", "index\tsentence\n5\tThe book.\n", ("The book.", None, None)),
    "yelp-2": ("train", "train.csv", '"2","Great ""food"", nice"\n', ('Great "food", nice', None,
                                                                     "2")),
    "yelp-5": ("test", "test.csv", '"5","Best"\n', ("Best", None, "5")),
    "dbpedia": ("train", "train.csv", '"14","Title","Body text"\n', ("Title Body text", None, "14")),
    "amazon-2": ("train", "train.csv", '"1","Bad","Broke fast"\n', ("Bad Broke fast", None, "1")),
    "amazon-5": ("test", "test.csv", '"3","Ok","Fine"\n', ("Ok Fine", None, "3")),
}


@pytest.mark.parametrize("task", sorted(_GLUE_ROWS))
def test_every_official_layout(task, tmp_path):
  split, name, content, expected = _GLUE_ROWS[task]
  (tmp_path / name).write_text(content)
  spec = classifier_data.get_task(task)
  ex = classifier_data.read_split(spec, tmp_path, split)
  assert (ex[0].text_a, ex[0].text_b, ex[0].label) == expected
  if split == "test" and spec.reader == "tsv":
    assert ex[0].guid == content.splitlines()[1].split("\t")[0]   # submission index
  (tmp_path / name).write_text(content.splitlines()[0] + "\n" if spec.header is True else "")
  with pytest.raises(ValueError, match=f"{name}: no examples"):
    classifier_data.read_split(spec, tmp_path, split)


def test_training_batches_are_split_between_hosts_with_static_shapes(tmp_path, sst2):
  """Multi-worker / TPU pod: each host trains on its own share of the examples (together the
  whole set, once per epoch), in per-replica batches of a static size."""
  import collections
  import tensorflow as tf
  from finetuning.classifier_task import ClassifierConfig, ClassifierTask
  from modeling.run_config import RunConfig
  from modeling.xlnet.config import XLNetConfig
  d, sp, cfg = sst2
  config = ClassifierConfig(task_name="sst-2", data_dir=str(d), sp_model=sp, uncased=True,
                            cache_dir=str(tmp_path), max_seq_length=24, train_batch_size=8)
  task = ClassifierTask(config, XLNetConfig.from_json(str(cfg)), RunConfig())
  everything = next(iter(task._dataset("train", 400, train=False)))["input_ids"].numpy()
  seen = collections.Counter()
  for host in range(2):
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=host,
                                         num_replicas_in_sync=4)
    ds = task.dataset(context)
    assert all(spec.shape.as_list()[0] == 2 and spec.shape.is_fully_defined()
               for spec in ds.element_spec.values()), ds.element_spec
    for batch in ds.take(100):     # one epoch of this host's 200 examples
      seen.update(map(tuple, batch["input_ids"].numpy()))
  assert seen == collections.Counter(map(tuple, everything))
