"""A run directory knows how it was made (training/run_record.py): a rerun with the same
settings resumes, one with a result-changing setting is refused in one line naming the
setting and both values (nothing written), --allow_changed_settings continues and records the
change, settings that do not change the result never block, and MODEL_DIR must be ours."""

import contextlib
import io
import json
import os

import pytest
from tests import script_helpers
from tests.finetuning.test_classifier import sst2  # noqa: F401  (the tiny SST-2 fixture)


def run(relative, **flag_values):
  """The script's main() in this process; returns (exit message or None, printed lines)."""
  out = io.StringIO()
  with contextlib.redirect_stdout(out):
    code = script_helpers.main_exit(relative, **flag_values)
  return (str(code) if code not in (None, 0) else None), out.getvalue().splitlines()


def classifier_flags(sst2_dir, model_dir, **extra):
  d, sp, cfg = sst2_dir
  return {**dict(task_name="sst-2", data_dir=d, sp_model=sp, uncased=True,
                 model_config_path=cfg, model_dir=model_dir, max_seq_length=16,
                 train_batch_size=4, eval_batch_size=8, train_steps=2, steps_per_loop=1,
                 save_every=2, learning_rate=1e-3, warmup_steps=0, xla="off", do_train=True),
          **extra}


def listing(path):
  return sorted(os.path.relpath(os.path.join(d, f), path)
                for d, _, fs in os.walk(path) for f in fs)


@pytest.fixture(scope="module")
def trained(sst2, tmp_path_factory):
  model_dir = str(tmp_path_factory.mktemp("runs") / "sst")
  err, lines = run("run_classifier.py", **classifier_flags(sst2, model_dir))
  assert err is None, err
  return model_dir


def test_run_json_records_the_effective_settings(trained):
  record = json.loads(open(os.path.join(trained, "run.json")).read())
  s = record["settings"]
  assert record["script"] == "run_classifier.py" and record["history"] == []
  assert s["learning_rate"] == 1e-3 and s["max_seq_length"] == 16
  assert s["adam_epsilon"] is not None          # the recipe's value, not the flag's None
  assert s["model_config"]["n_layer"] == 2
  assert len(s["sp_model"]["sha256"]) == 64 and "/" not in json.dumps(s["sp_model"])


@pytest.mark.parametrize("change", [dict(learning_rate=2e-3), dict(max_seq_length=32),
                                    dict(seed=1), dict(train_steps=4),
                                    dict(summary_type="mean"), dict(uncased=False)])
def test_a_result_changing_flag_is_refused_naming_both_values(sst2, trained, change):
  before = {p: os.path.getmtime(os.path.join(trained, p)) for p in listing(trained)}
  err, _ = run("run_classifier.py", **{**classifier_flags(sst2, trained), **change})
  (name, value), = change.items()
  assert err and err.startswith("run_classifier.py: --model_dir=") and "\n" not in err, err
  assert f"--{name} " in err and "--allow_changed_settings" in err, err
  after = {p: os.path.getmtime(os.path.join(trained, p)) for p in listing(trained)}
  assert after == before          # nothing written, nothing removed


def test_same_settings_resume_and_neutral_flags_never_block(sst2, trained):
  err, lines = run("run_classifier.py", **classifier_flags(
      sst2, trained, steps_per_loop=2, save_every=1, eval_batch_size=4, recompute=True,
      xla="full", do_eval=True))
  assert err is None, err
  assert not any("other settings" in l for l in lines)


def test_allow_changed_settings_continues_and_records_history(sst2, trained, tmp_path):
  import shutil
  copy = str(tmp_path / "copy")
  shutil.copytree(trained, copy)
  err, lines = run("run_classifier.py", **classifier_flags(
      sst2, copy, learning_rate=5e-4, train_steps=4, allow_changed_settings=True))
  assert err is None, err
  record = json.loads(open(os.path.join(copy, "run.json")).read())
  assert record["settings"]["learning_rate"] == 5e-4 and record["settings"]["train_steps"] == 4
  (entry,) = record["history"]
  assert entry["step"] == 2
  assert entry["changed"]["learning_rate"] == [1e-3, 5e-4]
  assert entry["changed"]["train_steps"] == [2, 4]
  assert os.path.exists(os.path.join(copy, "ckpt", "ckpt-4.index"))


def test_a_changed_tokenizer_or_data_file_is_refused(sst2, trained, tmp_path):
  d, sp, cfg = sst2
  other = tmp_path / "data"
  other.mkdir()
  for name in os.listdir(d):
    if os.path.isfile(os.path.join(d, name)):
      (other / name).write_bytes(open(os.path.join(d, name), "rb").read())
  moved = (str(other), str(other / os.path.basename(sp)), str(other / "config.json"))
  err, _ = run("run_classifier.py", **classifier_flags(moved, trained, do_train=False,
                                                       do_eval=True))
  assert err is None, err                   # evaluation alone compares nothing
  lines = (other / "train.tsv").read_text().splitlines()
  (other / "train.tsv").write_text("\n".join(lines[:-1]) + "\n")
  err, _ = run("run_classifier.py", **classifier_flags(moved, trained))
  assert err and "--data_dir sha256 " in err, err


def test_model_dir_must_be_ours(sst2, tmp_path):
  theirs = tmp_path / "theirs"
  theirs.mkdir()
  (theirs / "notes.txt").write_text("keep me")
  err, _ = run("run_classifier.py", **classifier_flags(sst2, str(theirs)))
  assert err and "holds files this project did not write" in err and "\n" not in err, err
  assert listing(str(theirs)) == ["notes.txt"]
  a_file = tmp_path / "a_file"
  a_file.write_text("x")
  err, _ = run("run_classifier.py", **classifier_flags(sst2, str(a_file)))
  assert err and "is an existing file" in err, err
  assert a_file.read_text() == "x"


def test_warmup_past_the_last_step_warns(sst2, tmp_path):
  err, lines = run("run_classifier.py", **classifier_flags(
      sst2, str(tmp_path / "w"), warmup_steps=5))
  assert err is None, err
  assert any(l.startswith("warning: --warmup_steps=5 is at or past --train_steps=2") for l in
             lines), lines


@pytest.fixture(scope="module")
def pretrain(tmp_path_factory, text_and_sp):
  """run_pretrain.py's flags on tiny records, and a finished 2-step plm run."""
  from data_utils.tokenization import Tokenizer
  from tests import pretrain_helpers as ph
  text, sp = text_and_sp
  base = tmp_path_factory.mktemp("ptrun")
  records = ph.make_records(text, sp, base / "records")
  cfg = base / "config.json"
  cfg.write_text(json.dumps({"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8,
                             "d_inner": 32, "n_token": Tokenizer(sp, lower=True).vocab_size}))
  args = lambda model_dir, **extra: {**dict(
      record_dir=records, model_config_path=cfg, model_dir=model_dir, train_steps=2,
      steps_per_loop=1, save_every=2, learning_rate=1e-3, warmup_steps=0, xla="off"), **extra}
  model_dir = str(base / "run")
  err, _ = run("run_pretrain.py", **args(model_dir))
  assert err is None, err
  return args, model_dir, base


@pytest.mark.parametrize("change", [dict(objective="mlm"), dict(learning_rate=3e-3),
                                    dict(mem_len=8), dict(seed=3)])
def test_pretraining_rerun_with_other_settings_is_refused(pretrain, change):
  args, model_dir, _ = pretrain
  err, _ = run("run_pretrain.py", **args(model_dir, **change))
  (name, _), = change.items()
  assert err and err.startswith("run_pretrain.py: --model_dir=") and f"--{name} " in err, err


def test_pretraining_rerun_at_another_global_batch_is_refused(pretrain):
  """The layout flags are neutral (the same global batch on other hardware trains the same), the
  global batch is not."""
  args, model_dir, _ = pretrain
  err, _ = run("run_pretrain.py", **args(model_dir, bsz_per_host=2))
  assert err and err.startswith("run_pretrain.py: --model_dir="), err
  assert "--global_batch 4 -> 2" in err and "--bsz_per_host" not in err, err


def test_pretraining_same_settings_resume_and_changed_records_refused(pretrain):
  args, model_dir, base = pretrain
  err, lines = run("run_pretrain.py", **args(model_dir, steps_per_loop=2, keep_checkpoints=2))
  assert err is None, err
  info = sorted(p for p in os.listdir(base / "records") if p.startswith("record_info"))[0]
  path = base / "records" / info
  original = path.read_text()
  try:
    data = json.loads(original)
    data["seed_note"] = "edited"        # any change of the record set's infos
    path.write_text(json.dumps(data))
    err, _ = run("run_pretrain.py", **args(model_dir))
    assert err and "--record_dir sha256 " in err, err
  finally:
    path.write_text(original)


@pytest.mark.parametrize("script", ["run_classifier.py", "run_squad.py"])
def test_a_data_error_leaves_nothing_behind(sst2, tmp_path, script):
  d, sp, cfg = sst2
  bad = tmp_path / "bad"
  bad.mkdir()
  (bad / "train.tsv").write_text("sentence\tlabel\nfine words\t1\nodd words\tmaybe\n")
  (bad / "dev.tsv").write_text("sentence\tlabel\nfine words\t1\n")
  (bad / "train.json").write_text('{"data": [{"title": "t", "paragraphs": [{"context": 5}]}]}')
  model_dir = tmp_path / "run"
  if script == "run_classifier.py":
    flags_ = classifier_flags((str(bad), sp, cfg), str(model_dir))
  else:
    flags_ = dict(train_file=bad / "train.json", sp_model=sp, uncased=True,
                  model_config_path=cfg, model_dir=str(model_dir), max_seq_length=32,
                  doc_stride=8, max_query_length=8, train_batch_size=2, train_steps=2,
                  xla="off", do_train=True)
  err, _ = run(script, **flags_)
  assert err and err.startswith(f"{script}: ") and "\n" not in err, err
  assert not model_dir.exists() or listing(str(model_dir)) == [], listing(str(model_dir))


@pytest.mark.parametrize("script", ["run_race.py", "run_squad.py"])
def test_race_and_squad_reruns_resume_or_refuse(tmp_path, text_and_sp, script):
  """The same rule through the two other fine-tuning scripts: the same command resumes, a
  result-changing flag (--max_seq_length, --learning_rate) is refused naming it, nothing
  written; --allow_changed_settings continues."""
  import random
  from data_utils.tokenization import Tokenizer
  _, sp = text_and_sp
  vocab = Tokenizer(sp, lower=True).vocab_size
  cfg = tmp_path / "config.json"
  cfg.write_text(json.dumps({"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8,
                             "d_inner": 32, "n_token": vocab}))
  rng = random.Random(0)
  if script == "run_race.py":
    from tests.finetuning.test_race import _write_split
    data = tmp_path / "RACE"
    _write_split(data, "train", 8, rng)
    _write_split(data, "dev", 4, rng)
    flags_ = dict(data_dir=data, max_seq_length=48, max_qa_length=8, eval_batch_size=4)
  else:
    from tests.finetuning.test_squad import _squad
    flags_ = dict(train_file=_squad(tmp_path / "train.json", rng, 8, v2=True),
                  max_seq_length=48, max_query_length=12, doc_stride=16)
  model_dir = str(tmp_path / "run")
  common = dict(sp_model=sp, uncased=True, model_config_path=cfg, model_dir=model_dir,
                train_batch_size=4, train_steps=2, steps_per_loop=1, save_every=2,
                learning_rate=1e-3, warmup_steps=0, xla="off", do_train=True, **flags_)
  err, _ = run(script, **common)
  assert err is None, err
  err, lines = run(script, **common)
  assert err is None and not any("other settings" in l for l in lines), err
  before = {p: os.path.getmtime(os.path.join(model_dir, p)) for p in listing(model_dir)}
  for change in (dict(max_seq_length=64), dict(learning_rate=2e-3)):
    err, _ = run(script, **{**common, **change})
    (name, _), = change.items()
    assert err and err.startswith(f"{script}: --model_dir=") and f"--{name} " in err, err
  assert {p: os.path.getmtime(os.path.join(model_dir, p)) for p in listing(model_dir)} == before
  err, _ = run(script, **{**common, "learning_rate": 2e-3, "train_steps": 3,
                          "allow_changed_settings": True})
  assert err is None, err
  history = json.loads(open(os.path.join(model_dir, "run.json")).read())["history"]
  assert [h["step"] for h in history] == [2] and set(history[0]["changed"]) == {
      "learning_rate", "train_steps"}


def test_the_model_config_is_compared_by_its_contents(sst2, trained, tmp_path):
  """A config with another value is refused naming the key; the same contents in another file
  (moved, keys reordered, reindented) are the same run."""
  _, sp, cfg = sst2
  config = json.loads(open(cfg).read())
  same = tmp_path / "same.json"
  same.write_text(json.dumps(dict(reversed(list(config.items()))), indent=4))
  err, _ = run("run_classifier.py", **classifier_flags((sst2[0], sp, same), trained))
  assert err is None, err
  other = tmp_path / "other.json"
  other.write_text(json.dumps({**config, "n_layer": 3}))
  err, _ = run("run_classifier.py", **classifier_flags((sst2[0], sp, other), trained))
  assert err and "model_config.n_layer 2 -> 3" in err, err


def test_two_output_flags_on_one_new_path_are_refused(sst2, tmp_path, monkeypatch):
  """--export_hf_dir naming the (not yet made) --model_dir, spelled another way: one line,
  nothing made."""
  monkeypatch.chdir(tmp_path)
  err, _ = run("run_classifier.py", **classifier_flags(sst2, "run", export_hf_dir="./run/"))
  assert err and "--model_dir=run and --export_hf_dir=./run/ name the same path" in err, err
  assert not (tmp_path / "run").exists()
