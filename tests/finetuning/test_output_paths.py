"""The fine-tuning tasks' own outputs and warnings: the feature cache (--cache_dir) is refused in
one line before any work when it names a file or somebody else's folder, made (and marked) only
when a cache file is written, and an earlier version's unmarked cache is still ours; a train set
smaller than one batch trains (every batch repeats its rows) and says so once, for the
classifier, RACE and SQuAD alike."""

import json
import os

import pytest

from data_utils import outputs
from finetuning import classifier_features, race
from finetuning.classifier_task import ClassifierConfig, ClassifierTask
from finetuning.squad import SquadConfig, SquadTask
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from tests.path_helpers import refusal, tree

WARNING = "warning: the train set has {n} {unit}, fewer than one batch of {b}: "


def _config(tok):
  return XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=16, n_token=tok.vocab_size)


def _sst2(directory, n):
  if directory.exists():       # written once: its stamp names the cache file
    return directory
  directory.mkdir()
  (directory / "train.tsv").write_text("sentence\tlabel\n" + "".join(
      f"a {'good' if k % 2 else 'bad'} film number {k}\t{k % 2}\n" for k in range(n)))
  return directory


def _classifier(tmp_path, tok, cache_dir, n=3, batch=8):
  config = ClassifierConfig(task_name="sst-2", data_dir=str(_sst2(tmp_path / "sst2", n)),
                            sp_model=tok.model_path, uncased=True, cache_dir=str(cache_dir),
                            max_seq_length=16, train_batch_size=batch)
  return ClassifierTask(config, _config(tok), RunConfig())


# ---- --cache_dir ------------------------------------------------------------------------------
def _user_folder(d):
  d.mkdir()
  (d / "thesis.tex").write_text("mine")


def _a_file(d):
  d.write_text("not a directory")


def _run_dir(d):
  d.mkdir()
  (d / "ckpt-1.index").write_bytes(b"i")
  outputs.claim_dir(str(d), outputs.RUN)


def _old_cache_plus_a_file(d):
  d.mkdir()
  (d / "sst-2.train.len-16.vocab-0123456789.uncased.xlnet.src-none.tfrecord").write_bytes(b"")
  (d / "notes.txt").write_text("mine")


@pytest.mark.parametrize("make, why", [
    (_user_folder, "holds files this project did not write"),
    (_a_file, "is an existing file"),
    (_run_dir, "is a training run's directory of this project"),
    (_old_cache_plus_a_file, "holds files this project did not write"),
])
def test_a_cache_dir_not_ours_is_refused_before_any_work(tmp_path, tok, make, why):
  place = tmp_path / "place"
  place.mkdir()
  make(place / "cache")
  before = tree(place)
  message = refusal(lambda: _classifier(tmp_path, tok, place / "cache"))
  assert tree(place) == before
  assert message.startswith(f"--cache_dir={place / 'cache'}: {why}") and "\n" not in message
  under = place / "cache" / "sub"     # a path under a file is refused too
  if not (place / "cache").is_dir():
    assert "is a file, not a directory" in refusal(lambda: _classifier(tmp_path, tok, under))


def test_the_cache_dir_is_made_when_written_and_an_earlier_one_is_ours(tmp_path, tok):
  cache = tmp_path / "features"
  task = _classifier(tmp_path, tok, cache)
  assert not cache.exists()           # a run refused later leaves no empty features/ behind
  path = task.features_path("train")
  assert outputs.kind_of(str(cache)) == outputs.FEATURES
  assert sorted(os.listdir(cache)) == sorted([outputs.OUTPUT_MARKER, os.path.basename(path)])
  os.remove(cache / outputs.OUTPUT_MARKER)     # as an earlier version left it: cache files only
  assert classifier_features.is_earlier_cache(str(cache))
  again = _classifier(tmp_path, tok, cache)
  assert again.features_path("train") == path
  (cache / "split.tsv").write_text("mine")     # with somebody's file, it is not ours
  assert "holds files this project did not write" in refusal(
      lambda: _classifier(tmp_path, tok, cache))


# ---- a train set smaller than one batch --------------------------------------------------------
def _race(tmp_path, tok, n, batch):
  for k in range(n):
    d = tmp_path / "RACE" / "train" / "middle"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{k}.txt").write_text(json.dumps({
        "article": f"the door was red number {k}", "questions": ["the door was _ ."],
        "options": [["red", "blue", "green", "pink"]], "answers": ["A"]}))
  config = ClassifierConfig(task_name="race", data_dir=str(tmp_path / "RACE"),
                            sp_model=tok.model_path, uncased=True, max_seq_length=24,
                            train_batch_size=batch)
  return race.RaceTask(config, _config(tok), RunConfig(), max_qa_length=8)


def _squad(tmp_path, tok, n, batch):
  context = "The old house near the river was painted red last summer."
  data = [{"title": "t", "paragraphs": [{"context": context, "qas": [
      {"id": f"q{k}", "question": f"What colour, {k}?",
       "answers": [{"text": "red", "answer_start": context.index("red")}]}]}]}
          for k in range(n)]
  (tmp_path / "train.json").write_text(json.dumps({"version": "1.1", "data": data}))
  config = SquadConfig(train_file=str(tmp_path / "train.json"), max_seq_length=64,
                       doc_stride=16, max_query_length=10, train_batch_size=batch)
  return SquadTask(config, _config(tok), RunConfig(), tok)


TASKS = {"classifier": (lambda p, t, n, b: _classifier(p, t, p / "cache", n, b), "examples"),
         "race": (_race, "questions"), "squad": (_squad, "windows")}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_train_set_smaller_than_one_batch_trains_and_warns_once(tmp_path, tok, capsys, name):
  make, unit = TASKS[name]
  task = make(tmp_path, tok, 3, 8)
  batches = [task.dataset(None), task.dataset(None)]     # a resume asks again
  lines = capsys.readouterr().out.splitlines()
  warned = [line for line in lines if line.startswith("warning: the train set")]
  assert warned == [WARNING.format(n=3, unit=unit, b=8)
                    + "every step trains on the same 3, each repeated about 2.7 times in its "
                    "batch (lower --train_batch_size, or add data)"], lines
  batch = next(iter(batches[0]))         # what the warning says: full batches of copies
  ids = batch["input_ids"].numpy().reshape(8, -1)
  assert len({tuple(row) for row in ids}) == 3
  (tmp_path / "whole").mkdir()
  make(tmp_path / "whole", tok, 8, 8).dataset(None)     # one whole batch: no warning
  assert "warning" not in capsys.readouterr().out
