"""The README's main job: quickstart.py end to end at the toy size (every stage through the
entry scripts, the report, a rerun that skips what is done), the derived data sets in their
official layouts, the pipeline's one-line stage errors, and every runnable documented block
(README.md, docs/*.md, bench/README.md) run after that one quickstart (tests/docs/harness.py)."""

import csv
import glob
import json
import os
import time
import types

import numpy as np
import pytest

from reproduction import pipeline as pipeline_lib
from reproduction import tasks
from reproduction.presets import PRESETS
from tests.docs import harness

pytestmark = pytest.mark.slow   # a long system test (pyproject.toml)

@pytest.fixture(scope="module")
def quickstart_tiny(tmp_path_factory):
  """The README's first run, once for the module: `python quickstart.py --preset=tiny` in a
  working directory (outputs in output/quickstart-tiny/), shared by the end-to-end test and the
  documented blocks, which run in that directory."""
  workdir = tmp_path_factory.mktemp("docs-workdir")
  start = time.time()
  result = harness.run_quickstart(str(workdir))
  return types.SimpleNamespace(workdir=workdir, result=result, seconds=time.time() - start,
                               out=workdir / harness.QUICKSTART_OUTPUT)


@pytest.fixture(scope="module")
def splits():
  return tasks.split_documents(tasks.load_documents(), seed=0)


def _texts(docs):
  return {d.text for d in docs}


def test_splits_are_disjoint_by_document(splits):
  assert all(len(v) > 100 for v in splits.values())
  for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
    assert not _texts(splits[a]) & _texts(splits[b]), (a, b)


def test_classification_is_dbpedia_csv_and_read_by_run_classifier(tmp_path, splits):
  from finetuning import classifier_data
  info = tasks.write_classification(splits, str(tmp_path), seed=0, train_per_class=5,
                                    test_per_class=3)
  assert list(info["labels"]) == [str(i) for i in range(1, 15)]
  contents = {}
  for split in ("train", "dev", "test"):
    with open(tmp_path / f"{split}.csv", encoding="utf-8", newline="") as f:
      rows = list(csv.reader(f))
    assert rows and all(len(r) == 3 and r[0] in info["labels"] and r[2] for r in rows)
    assert len(rows) == sum(info["counts"][split].values())
    contents[split] = {r[2] for r in rows}
    examples = classifier_data.read_split(classifier_data.get_task("dbpedia"), str(tmp_path),
                                          split)
    assert len(examples) == len(rows)
  assert not contents["train"] & contents["test"] and not contents["dev"] & contents["test"]
  assert not contents["train"] & contents["dev"]
  # a module's own docstring gets no title (its name would give the label away)
  assert not any(r[1] in info["labels"].values() for r in rows)


def test_squad_is_v2_json_with_answers_at_answer_start(tmp_path, splits):
  from finetuning import squad_features
  counts = tasks.write_squad(splits, str(tmp_path), seed=0, n_train=60, n_eval=30,
                             max_chars=400)
  contexts = {}
  for name in ("train-v2.0.json", "dev-v2.0.json", "test-v2.0.json"):
    with open(tmp_path / name, encoding="utf-8") as f:
      data = json.load(f)
    assert data["version"] == "v2.0"
    ids, n_impossible = set(), 0
    contexts[name] = set()
    for article in data["data"]:
      assert article["title"]
      for paragraph in article["paragraphs"]:
        context = paragraph["context"]
        contexts[name].add(context)
        for qa in paragraph["qas"]:
          assert {"id", "question", "answers", "is_impossible"} <= set(qa)
          assert qa["id"] not in ids
          ids.add(qa["id"])
          if qa["is_impossible"]:
            n_impossible += 1
            assert qa["answers"] == []
          else:
            for answer in qa["answers"]:
              start = answer["answer_start"]
              assert context[start:start + len(answer["text"])] == answer["text"]
    assert counts[name] == {"questions": len(ids), "impossible": n_impossible}
    assert 0 < n_impossible < len(ids)
    examples, skipped = squad_features.read_squad(str(tmp_path / name), is_training=True)
    assert skipped == 0 and len(examples) == len(ids)
  for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
    assert not contexts[f"{a}-v2.0.json"] & contexts[f"{b}-v2.0.json"]


def test_race_is_official_layout_and_the_answer_fills_the_blank(tmp_path, splits):
  from finetuning import race
  out = str(tmp_path / "RACE")
  counts = tasks.write_race(splits, out, seed=0, n_train=30, n_eval=10, max_chars=400)
  articles = {}
  for split in tasks.SPLITS:
    articles[split] = set()
    for path in glob.glob(os.path.join(out, split, "*", "*.txt")):
      level = os.path.basename(os.path.dirname(path))
      with open(path, encoding="utf-8") as f:
        doc = json.load(f)
      assert set(doc) == {"answers", "options", "questions", "article", "id"}
      assert doc["id"] == level + os.path.basename(path)
      articles[split].add(doc["article"])
      for question, options, answer in zip(doc["questions"], doc["options"], doc["answers"]):
        assert len(options) == 4 and len(set(options)) == 4 and answer in "ABCD"
        filled = question.replace("_", options["ABCD".index(answer)]).rstrip(".")
        assert filled in doc["article"]
    items = race.read_split(out, split)
    assert len(items) == sum(counts[split].values())
  assert not articles["train"] & articles["test"] and not articles["dev"] & articles["test"]


def test_same_seed_same_bytes(tmp_path, splits):
  def build(directory, seed):
    s = tasks.split_documents(tasks.load_documents(), seed)
    tasks.write_pretrain_corpus(s["train"], os.path.join(directory, "corpus.txt"))
    tasks.write_classification(s, os.path.join(directory, "classify"), seed, 4, 2)
    tasks.write_squad(s, os.path.join(directory, "squad"), seed, 20, 10, 400)
    tasks.write_race(s, os.path.join(directory, "RACE"), seed, 10, 4, 400)
    files = sorted(glob.glob(os.path.join(directory, "**", "*.*"), recursive=True))
    return {os.path.relpath(p, directory): open(p, "rb").read() for p in files}
  a, b, c = build(str(tmp_path / "a"), 0), build(str(tmp_path / "b"), 0), build(
      str(tmp_path / "c"), 1)
  assert a == b
  assert a.keys() and a["squad/train-v2.0.json"] != c["squad/train-v2.0.json"]


def test_failed_stage_is_one_line_naming_stage_and_log(tmp_path, monkeypatch):
  pipe = pipeline_lib.Pipeline(PRESETS["tiny"], str(tmp_path), log=lambda *a: None)
  code = "import sys; print('step 1/2 loss 3.0 ETA 1s'); sys.exit('boom.py: no such thing')"
  stage = pipeline_lib.Stage("fake", "a failing script", 1.0, argv=["-c", code],
                             parse=lambda text: {})
  monkeypatch.setattr(pipe, "stages", lambda: [stage])
  with pytest.raises(pipeline_lib.StageError) as e:
    pipe.run()
  message = str(e.value)
  assert "\n" not in message and "stage fake failed (exit 1)" in message
  assert "boom.py: no such thing" in message and str(tmp_path / "logs" / "fake.log") in message
  assert not os.path.exists(tmp_path / "stages" / "fake.json")
  # another preset in the same directory is refused
  other = pipeline_lib.Pipeline(PRESETS["small"], str(tmp_path), log=lambda *a: None)
  with pytest.raises(pipeline_lib.StageError, match="other settings"):
    other.run()


def test_quickstart_tiny_end_to_end(quickstart_tiny):
  out, result, seconds = quickstart_tiny.out, quickstart_tiny.result, quickstart_tiny.seconds
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  print(f"quickstart --preset=tiny: {seconds:.0f}s")
  stages = [s.name for s in pipeline_lib.Pipeline(PRESETS["tiny"], str(out)).stages()]
  for name in ("data", "tokenizer", "records", "records-valid", "configs", "pretrain-plm",
               "pretrain-mpnet", "classify-plm-lr0.001", "classify-plm-lr0.003",
               "classify-plm-s0", "classify-mpnet-s0", "accept-plm-s0",
               "accept-mpnet-s0", "squad-plm-s0", "race-mpnet-s0", "diagnostics"):
    assert name in stages
  for k, name in enumerate(stages):
    assert f"[{k + 1}/{len(stages)} {name}] done in" in result.stdout
    assert (out / "stages" / f"{name}.json").exists()
  assert "ETA" in result.stdout and "report.md" in result.stdout
  for path in ("report.md", "results.json", "plots/pretrain_loss.png", "plots/classification.png",
               "plots/qa.png", "tokenizer/spiece.model", "models/mpnet_config.json",
               "pretrain/plm/export/xlnet_model.ckpt.index", "pretrain/mpnet/export/config.json",
               "finetune/squad/plm/seed0/predictions.json", "data/classify/train.csv",
               "data/CoLA/test-labels.tsv", "finetune/accept/mpnet/seed0/CoLA.tsv"):
    assert (out / path).exists(), path
  report = (out / "report.md").read_text()
  for heading in ("## Pretraining", "## Module classification", "## SQuAD 2.0 and RACE",
                  "## How this compares with the papers", "## Diagnosis",
                  "### Learning-rate choice on dev", "### Linear probes",
                  "### MPNet's weights in its three modes", "## Acceptability (CoLA layout",
                  "### Zero-shot cloze", "### Zero-shot minimal pairs", "- Zero-shot, no ",
                  "### The language models' own judgement (zero-shot)",
                  "- Acceptability judged zero-shot", "summary token alone, last"):
    assert heading in report
  # every training run (pretraining and fine-tuning, XLNet and MPNet) names its optimizer in its
  # log; the report says they all used the one the quickstart pins
  # log; the report says which. Epsilon is the XLNet release script's own (its flag defaults:
  # train.py and run_classifier.py 1e-8, run_squad.py and run_race.py 1e-6)
  optimizers = {path.stem.split("-")[0]: set() for path in (out / "stages").glob("*.json")}
  for path in (out / "stages").glob("*.json"):
    optimizers[path.stem.split("-")[0]].add(json.loads(path.read_text())["results"].get(
        "optimizer"))
  rule = ("release tf.train.AdamOptimizer (TF1 bias correction), betas (0.9, 0.999), eps {}, "
          "weight decay 0, clip 1")
  for kind, eps in (("pretrain", "1e-08"), ("classify", "1e-08"), ("accept", "1e-08"),
                    ("squad", "1e-06"), ("race", "1e-06")):
    assert optimizers[kind] == {rule.format(eps)}, (kind, optimizers[kind])
  assert "- Optimizers used" in report and "tf.train.AdamOptimizer" in report
  assert f"{rule.format('1e-06')}: " in report and "runs (race, squad)" in report
  results = json.loads((out / "results.json").read_text())
  assert set(results["aggregate"]["classify"]) >= {"plm", "mpnet"}
  assert results["aggregate"]["pretrain"]["plm"]["curve"]
  # the acceptability test runs are scored from their CoLA.tsv against the labels kept apart
  accept = results["aggregate"]["accept"]
  assert set(accept) == {"plm", "mpnet"} and accept["plm"]["n_test"] == 16
  labels = (out / "data" / "CoLA" / "test-labels.tsv").read_text().split("\n")[1:-1]
  preds = (out / "finetune" / "accept" / "plm" / "seed0" / "CoLA.tsv").read_text().split(
      "\n")[1:-1]
  right = sum(a.split("\t") == b.split("\t") for a, b in zip(labels, preds))
  assert len(preds) == 16 and accept["plm"]["accuracy"]["mean"] == right / 16
  diag = results["aggregate"]["diagnostics"]
  assert set(diag["probe"]) == {"plm", "mpnet"} and set(diag["probe"]["plm"]) == {"5", "10"}
  assert set(diag["mpnet_modes"]) == {"mpnet", "plm", "mlm", "mpnet, position order"}
  for measure in ("cloze", "pairs"):       # random (step 0) and final weights, dev and test
    assert set(diag[measure]) == {"plm", "mpnet"}, measure
    assert set(diag[measure]["mpnet"]) == {"0", "10"}
  assert diag["pairs"]["plm"]["10"]["test"]["mean"]["n"] == 12
  # the test runs used the learning rate that scored best on dev
  dev = {lr: json.loads((out / "stages" / f"classify-plm-lr{lr}.json").read_text())
         ["results"]["metrics"]["accuracy"] for lr in ("0.001", "0.003")}
  chosen = "0.003" if dev["0.003"] > dev["0.001"] else "0.001"
  assert f"--learning_rate={chosen}" in (out / "logs" / "classify-plm-s0.log").read_text()
  # a rerun skips every finished stage and rewrites the report
  rerun = harness.run_quickstart(str(quickstart_tiny.workdir))
  assert rerun.returncode == 0, rerun.stderr[-2000:]
  assert rerun.stdout.count("done in an earlier run") == len(stages)


def test_diagnostics_load_each_checkpoint_into_one_model_per_task(quickstart_tiny):
  """Diagnostics builds one model per task and loads each checkpoint into it (its held-out
  step compiled once): the weights and held-out losses are those of a model built afresh for
  each checkpoint, and step 0 after a checkpoint is the seeded fresh model again."""
  from reproduction import diagnostics
  pipe = pipeline_lib.Pipeline(PRESETS["tiny"], str(quickstart_tiny.out))
  reused = diagnostics.Diagnostics(pipe)
  task = reused.task("plm")
  assert reused.task("plm") is task
  got = {}
  for step in (5, 10, 0):
    model = reused.model(task, step)
    got[step] = ([v.numpy() for v in model.variables],
                 reused.heldout_loss(task, model) if step else None)
  steps = [f for f in reused._functions.values()]            # pylint: disable=protected-access
  assert [f.experimental_get_tracing_count() for f in steps] == [1]
  for step in (5, 10, 0):
    fresh = diagnostics.Diagnostics(pipe)                  # a new model for this checkpoint
    model = fresh.model(fresh.task("plm"), step)
    want = [v.numpy() for v in model.variables]
    assert len(want) == len(got[step][0]) > 10
    for a, b in zip(got[step][0], want):
      np.testing.assert_array_equal(a, b)
    if step:
      assert got[step][1] == fresh.heldout_loss(fresh.task("plm"), model)
  assert not all(np.array_equal(a, b) for a, b in zip(got[5][0], got[10][0]))


def test_chosen_lr_is_the_best_dev_score_with_ties_to_the_smaller_rate():
  res = lambda acc: {"metrics": {"accuracy": acc}}
  results = {"classify-plm-lr0.0001": res(0.4), "classify-plm-lr0.0003": res(0.6),
             "classify-plm-lr0.001": res(0.6)}
  lr, scores = pipeline_lib.chosen_lr(results, "classify", "plm", (1e-4, 3e-4, 1e-3))
  assert lr == 3e-4 and scores == {"0.0001": 0.4, "0.0003": 0.6, "0.001": 0.6}
  results["classify-plm-lr0.001"] = res(0.7)
  assert pipeline_lib.chosen_lr(results, "classify", "plm", (1e-4, 3e-4, 1e-3))[0] == 1e-3
  assert pipeline_lib.chosen_lr({}, "classify", "plm", (5e-4,)) == (5e-4, {})
  with pytest.raises(pipeline_lib.StageError):
    pipeline_lib.chosen_lr({}, "squad", "plm", (1e-4, 3e-4))


def test_corpus_passes_repeat_every_document_in_a_new_order(tmp_path, splits):
  docs = splits["dev"][:50]
  n, size = tasks.write_pretrain_corpus(docs, str(tmp_path / "one.txt"))
  n3, size3 = tasks.write_pretrain_corpus(docs, str(tmp_path / "three.txt"), passes=3, seed=1)
  one = (tmp_path / "one.txt").read_text()
  three = (tmp_path / "three.txt").read_text()
  assert n == n3 == 50 and size == size3 == len(one.encode("utf-8"))
  assert len(three) == 3 * len(one) and three.startswith(one)
  blocks = lambda text: text.split("\n\n")[:-1]
  assert sorted(blocks(three)[50:100]) == sorted(blocks(one)) == sorted(blocks(three)[100:])
  assert blocks(three)[50:100] != blocks(one) and blocks(three)[50:100] != blocks(three)[100:]


def test_linear_probe_reads_information_the_features_carry():
  from reproduction import diagnostics
  rng = np.random.default_rng(0)
  labels = {k: rng.integers(0, 4, n) for k, n in (("train", 200), ("dev", 100), ("test", 100))}
  centers = rng.normal(0, 1, [4, 16])
  informative = {k: centers[y] + rng.normal(0, 0.8, [len(y), 16]) for k, y in labels.items()}
  noise = {k: rng.normal(0, 1, [len(y), 16]) for k, y in labels.items()}
  good = diagnostics.linear_probe(informative, labels, 4)
  bad = diagnostics.linear_probe(noise, labels, 4)
  assert good["test"] > 0.85 and bad["test"] < 0.4
  assert good["l2"] in diagnostics.L2_GRID


def test_diagnosis_words_follow_the_noise_of_the_evaluation_set():
  from reproduction import diagnosis_report as d
  steps = [500, 1000, 1500, 2000]
  # 385 dev examples at ~45%: two standard errors are about 5 points.
  assert abs(d.noise(0.45, 385) - 2 * (0.45 * 0.55 / 385) ** 0.5) < 1e-12
  assert d.trend([0.447, 0.460, 0.455, 0.455], steps, 385).startswith("level within noise")
  assert d.trend([0.30, 0.38, 0.44, 0.50], steps, 385).startswith("rises")
  assert d.trend([0.50, 0.44, 0.38, 0.30], steps, 385).startswith("falls")
  assert d.trend([0.30, 0.55, 0.45, 0.40], steps, 385).startswith("peaks at step 1000")
  # Without a known set size every difference counts.
  assert d.trend([0.447, 0.460, 0.455, 0.455], steps, None).startswith("peaks at step 1000")


def test_diagnosis_sweep_table_shows_squad_f1_in_its_own_unit():
  from reproduction import diagnosis_report as d
  agg = {"sweep": {"squad": {"none": {"scores": {"0.0003": 6.09, "0.001": 5.08},
                                      "chosen": "0.0003"}},
                   "classify": {"none": {"scores": {"0.0003": 0.571, "0.001": 0.122},
                                         "chosen": "0.0003"}}}}
  text = "\n".join(d.section(agg, {}))
  assert "| none | 6.1 | 5.1 | 0.0003 |" in text        # F1 is already in percent
  assert "| none | 57.1 | 12.2 | 0.0003 |" in text      # accuracy is a fraction
  assert "edge of the grid" not in text                  # two rates: every choice is an edge


def test_small_preset_trains_mpnet_architecture_on_mlm_for_the_diagnosis(tmp_path):
  stages = {s.name: s for s in pipeline_lib.Pipeline(PRESETS["small"], str(tmp_path)).stages()}
  argv = stages["pretrain-mpnet-mlm"].argv
  assert "--objective=mpnet" in argv and "--mpnet_mode=mlm" in argv
  assert f"--model_dir={tmp_path / 'pretrain' / 'mpnet-mlm'}" in argv
  same = lambda a: sorted(x for x in a if not x.startswith(("--model_dir", "--mpnet_mode")))
  assert same(argv) == same(stages["pretrain-mpnet"].argv)   # nothing else differs
  assert not any(n.startswith(("classify-mpnet-mlm", "squad-mpnet-mlm")) for n in stages)
  tiny = [s.name for s in pipeline_lib.Pipeline(PRESETS["tiny"], str(tmp_path)).stages()]
  assert "pretrain-mpnet-mlm" not in tiny                       # tiny has no mlm arm


def _data(test_counts, squad_questions=300, squad_impossible=90, race=(150, 150)):
  return {"classify": {"counts": {"test": test_counts, "dev": test_counts}},
          "squad": {"test-v2.0.json": {"questions": squad_questions,
                                       "impossible": squad_impossible}},
          "race": {"test": {"high": race[0], "middle": race[1]}}}


def test_a_task_enters_the_orderings_only_with_a_dev_choice_and_a_score_beyond_noise():
  from reproduction import diagnosis_report as d
  s = lambda m: {"mean": m}
  data = _data({"a": 250, "b": 250})                      # majority class 50% of 500
  swept = {"scores": {"0.0003": 0.5, "0.001": 0.4}, "chosen": "0.0003"}
  agg = {"classify": {"none": s(0.56), "plm": s(0.50)},   # 2 SE at 50% of 500: 4.47 points
         "squad": {"none": {"f1": s(0.40)}},              # all-no-answer 30%; 2 SE 5.3 points
         "race": {"none": {"accuracy": s(0.29)}},         # chance 25%; 2 SE 5.0 points
         "sweep": {"classify": {"none": swept}, "squad": {"none": swept},
                   "race": {"none": {"scores": {}, "chosen": "0.0003"}}}}
  why = d.exclusions(agg, data)
  assert why["classify"] is None and why["squad"] is None
  assert "one learning rate (0.0003" in why["race"]
  agg["classify"]["none"] = s(0.54)                        # +4 points: within the noise
  agg["race"]["none"] = {"accuracy": s(0.45)}              # far above chance, still no dev
  why = d.exclusions(agg, data)
  assert "noise (±4.5 points)" in why["classify"] and "one learning rate" in why["race"]
  assert d.usable_tasks(agg, data) == {"classify": False, "squad": True, "race": False}
  lines = "\n".join(d.summary_lines(agg, data))
  assert "Left out of the orderings: RACE format (accuracy): every arm ran at one" in lines


def test_summary_says_whether_pretraining_beats_random_weights_and_what_the_architecture_costs():
  from reproduction import diagnosis_report as d
  probe = lambda t: {"2000": {"dev": t, "test": t}}
  diag = {"checkpoints": [1000, 2000],
          "probe": {"none": {"0": {"dev": .41, "test": .41}}, "plm": probe(.43),
                    "mlm": probe(.44), "none-mpnet": {"0": {"dev": .37, "test": .37}},
                    "mpnet": probe(.34)},
          "heldout": {"plm": {"1000": 5.4, "2000": 5.0}, "mlm": {"1000": 5.3, "2000": 5.1},
                      "mpnet": {"1000": 6.1, "2000": 5.9}},
          "mpnet_mlm": 5.95}
  cls = {"none": {"mean": .58}, "none-mpnet": {"mean": .21}}
  agg = {"diagnostics": diag, "classify": cls, "squad": {}, "race": {}}
  text = "\n".join(d.summary_lines(agg, _data({"a": 250, "b": 250})))
  assert "no pretrained encoder is told apart from its own random weights" in text
  assert "plm +2.0, mlm +3.0, mpnet -3.0 points" in text
  assert "ends at 5.950 held-out against XLNet's 5.100 (+0.850 nats)" in text
  assert "the gap belongs to the architecture" in text and "21.0% (MPNet) and 58.0%" in text
  diag["probe"]["mlm"] = probe(.60)                        # +19 points: beyond the noise
  diag["mpnet_mlm"] = 5.05                                 # MPNet's architecture is fine on mlm
  text = "\n".join(d.summary_lines(agg, _data({"a": 250, "b": 250})))
  assert "beyond the test set's noise: mlm." in text
  assert "the gap belongs to the architecture" not in text
  diag["mpnet_mlm"] = 5.2                                  # worse than XLNet on mlm, but
  text = "\n".join(d.summary_lines(agg, _data({"a": 250, "b": 250})))   # 11% of the gap
  assert "MPNet's architecture on the mlm objective: 5.200" in text
  assert "the gap belongs to the architecture" not in text


RUNNABLE = [b for b in harness.collect() if harness.runnable(b)]


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_documented_block_runs(block, quickstart_tiny):
  """Each runnable block, in document order, in the quickstart's working directory (a later
  block may read what an earlier one wrote); check-only blocks are checked in tests/docs/."""
  assert quickstart_tiny.result.returncode == 0, "the quickstart failed (see the end-to-end test)"
  ok, out = harness.run_block(block, str(quickstart_tiny.workdir))
  assert ok, out

