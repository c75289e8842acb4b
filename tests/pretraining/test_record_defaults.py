"""run_pretrain.py's record flags default to the records' values (issue #30).

--seq_len, --reuse_len, --num_predict and --bi_data not given take the values of the record set
in --record_dir (record_format.resolve_training_params); given, they choose among several record
sets and are checked against the records as before. --bsz_per_host not given is the records'
lanes and --num_core_per_host the strategy's replicas per host (pretraining/runner.layout).
"""

import dataclasses
import json

import pytest

from data_utils import fileio, record_format, writer
from tests import pretrain_helpers as ph
from tests.script_helpers import run_main
from pretraining.task import PretrainTask

TINY = dict(seq_len=ph.SEQ, reuse_len=ph.REUSE, bsz_per_host=ph.BSZ, num_predict=ph.NP)


# ---- the library function on hand-written record-info files (ram://) ----------------------------

def _write_info(directory, params, shard, num_batch=2):
  """A consistent record-info (load_info accepts it) for a shard of `params`; no record file."""
  name = params.record_name("train", shard)
  data = bytes(num_batch * params.bsz_per_host * record_format.framed_record_bytes(params))
  info = record_format.make_info(params, "train", shard, name if num_batch else None,
                                 data if num_batch else None, num_batch, {})
  fileio.write_atomic(fileio.join(directory, params.info_name("train", shard)),
                      record_format.info_text(info).encode())


@pytest.fixture
def ram_dir(request):
  directory = f"ram://resolve_{request.node.name.replace('[', '_').replace(']', '_')}_dir"
  fileio.makedirs(directory)
  yield directory
  fileio.rmtree(directory)


P32 = record_format.RecordParams(seq_len=32, reuse_len=16, perm_size=16, num_predict=5,
                                 bsz_per_host=4, bi_data=True, vocab_size=800)
P48 = dataclasses.replace(P32, seq_len=48)


def test_resolve_takes_what_is_not_given_from_the_one_record_set(ram_dir):
  for shard in range(3):
    _write_info(ram_dir, P32, shard)
  resolved = record_format.resolve_training_params(ram_dir)
  assert resolved.values == {"seq_len": 32, "reuse_len": 16, "num_predict": 5, "bi_data": True,
                             "vocab_size": 800}
  assert resolved.params == P32
  assert resolved.from_records == record_format.TRAINING_KEYS
  assert len(resolved.info_files) == 3
  assert resolved.summary() == (
      "records: seq_len=32 reuse_len=16 num_predict=5 "
      f"bi_data=True vocab_size=800 (from {P32.info_name('train', 0)} and 2 more)")
  given = record_format.resolve_training_params(ram_dir, seq_len=32, bi_data=None,
                                                vocab_size=800)
  assert given.values == resolved.values          # None = not given
  assert given.from_records == ("reuse_len", "num_predict", "bi_data")
  every = record_format.resolve_training_params(ram_dir, **resolved.values)
  assert every.from_records == () and every.summary() == ""


def test_resolve_reports_a_contradicting_given_value_in_one_line(ram_dir):
  _write_info(ram_dir, P32, 0)
  with pytest.raises(ValueError) as e:
    record_format.resolve_training_params(ram_dir, seq_len=64, num_predict=5)
  assert str(e.value) == (f"{ram_dir}: 1 record files, none matching: "
                          f"{P32.info_name('train', 0)} has seq_len=32 (asked 64)")
  with pytest.raises(ValueError, match=r"has bi_data=True \(asked False\)$"):
    record_format.resolve_training_params(ram_dir, bi_data=False)


def test_resolve_chooses_among_record_sets_by_the_given_values(ram_dir):
  _write_info(ram_dir, P32, 0)
  _write_info(ram_dir, P32, 1)
  _write_info(ram_dir, P48, 0)
  with pytest.raises(ValueError) as e:
    record_format.resolve_training_params(ram_dir)
  message = str(e.value)
  assert "\n" not in message
  assert message == (f"{ram_dir}: 2 record sets, differing in seq_len (32 or 48); "
                     "pass --seq_len to choose one")
  with pytest.raises(ValueError, match=r"2 record sets with bi_data=True vocab_size=800, "
                                       r"differing in seq_len \(32 or 48\)"):
    record_format.resolve_training_params(ram_dir, bi_data=True, vocab_size=800)
  for seq_len, params, count in ((32, P32, 2), (48, P48, 1)):
    resolved = record_format.resolve_training_params(ram_dir, seq_len=seq_len)
    assert resolved.values["seq_len"] == seq_len and "seq_len" not in resolved.from_records
    assert resolved.info_files == tuple(
        fileio.join(ram_dir, params.info_name("train", k)) for k in range(count))
  # none has seq_len=64: the set nearest the given values is named (ties: first by name)
  with pytest.raises(ValueError,
                     match=r"none matching: .*seqlen-32.* has seq_len=32 \(asked 64\)$"):
    record_format.resolve_training_params(ram_dir, seq_len=64, bi_data=True)


def test_resolve_names_every_differing_parameter_and_the_flags(ram_dir):
  _write_info(ram_dir, P32, 0)
  _write_info(ram_dir, dataclasses.replace(P48, bi_data=False, bsz_per_host=2), 0)
  with pytest.raises(ValueError) as e:
    record_format.resolve_training_params(ram_dir)
  assert str(e.value).endswith(
      "2 record sets, differing in seq_len (32 or 48), bsz_per_host (2 or 4), bi_data (False or "
      "True); pass --seq_len and --bi_data/--nobi_data to choose one")
  # sets that differ only where no training flag chooses
  _write_info(ram_dir, dataclasses.replace(P32, span_mode="single"), 0)
  with pytest.raises(ValueError) as e:
    record_format.resolve_training_params(ram_dir, seq_len=32)
  assert str(e.value).endswith("2 record sets with seq_len=32, differing in span_mode (single "
                               "or word); no training flag chooses between them: keep one record "
                               "set per directory")


def test_resolve_prefers_a_set_with_data_and_needs_record_infos(ram_dir):
  _write_info(ram_dir, P32, 0)
  _write_info(ram_dir, P48, 0, num_batch=0)       # every shard too short: nothing to train on
  assert record_format.resolve_training_params(ram_dir).values["seq_len"] == 32
  with pytest.raises(FileNotFoundError, match="no record_info-valid-"):
    record_format.resolve_training_params(ram_dir, split="valid")
  fileio.write_atomic(fileio.join(ram_dir, P48.info_name("train", 1)), b'{"params": ')
  with pytest.raises(ValueError, match="record-info is not valid JSON"):
    record_format.resolve_training_params(ram_dir)
  with pytest.raises(TypeError, match="perm_size"):
    record_format.resolve_training_params(ram_dir, perm_size=16)


# ---- run_pretrain.py's main, in this process ----------------------------------------------------

@pytest.fixture(scope="module")
def setup(tmp_path_factory, text_and_sp):
  """bi_data records written by create_pretrain_data.py with its default --bi_data, a second
  directory holding two record sets (seq_len 32 and 48), and a tiny model config."""
  text, sp = text_and_sp
  base = tmp_path_factory.mktemp("defaults")
  from data_utils.tokenization import Tokenizer
  vocab = Tokenizer(sp, lower=True).vocab_size
  run_main("data_utils/create_pretrain_data.py", input_glob=text, sp_model=sp,
           output_dir=str(base / "records"), uncased=True, **TINY)   # --bi_data: its default
  for seq_len in (32, 48):
    params = record_format.RecordParams(seq_len=seq_len, reuse_len=ph.REUSE, perm_size=ph.REUSE,
                                        num_predict=ph.NP, bsz_per_host=ph.BSZ, uncased=True)
    writer.create(text, sp, str(base / "two"), params, progress=lambda m: None)
  cfg = base / "config.json"
  cfg.write_text(json.dumps({"n_layer": 1, "d_model": 16, "n_head": 2, "d_head": 8,
                             "d_inner": 16, "n_token": vocab}))
  return base, cfg


@pytest.fixture
def tasks(monkeypatch):
  """The (config, run_config) each PretrainTask of run_pretrain.main was built with, and the
  run_config it uses."""
  built = []
  init = PretrainTask.__init__

  def record(self, config, model_config, run_config, *args, **kwargs):
    init(self, config, model_config, run_config, *args, **kwargs)
    built.append((config, run_config, self.run_config))

  monkeypatch.setattr(PretrainTask, "__init__", record)
  return built


def _fails(**flag_values):
  """The one-line message run_pretrain.py stops with."""
  with pytest.raises(pytest.fail.Exception) as e:
    run_main("run_pretrain.py", **flag_values)
  message = str(e.value).split("run_pretrain.py exited: ", 1)[1]
  assert "\n" not in message.strip() and message.startswith("run_pretrain.py: "), message
  return message


@pytest.mark.slow
def test_run_pretrain_with_its_defaults_trains_on_the_writers_defaults(setup, tasks, tmp_path,
                                                                        capsys):
  base, cfg = setup
  records = str(base / "records")
  params, _, _ = record_format.find_records(records)
  assert params.bi_data and params.seq_len == ph.SEQ      # the writer's default --bi_data
  run_main("run_pretrain.py", record_dir=records, model_config_path=cfg,
           model_dir=tmp_path / "m", train_steps=2)
  out = capsys.readouterr().out
  line = [text for text in out.splitlines() if text.startswith("records: ")]
  assert line == [f"records: seq_len={ph.SEQ} reuse_len={ph.REUSE} num_predict={ph.NP} "
                  f"bi_data=True (from {params.info_name('train', 0)})",
                  f"records: {ph.BSZ} lanes: --bsz_per_host={ph.BSZ} (1 host(s) x {ph.BSZ} "
                  "rows, 1 replica(s) per host)"], out[-3000:]
  assert "step 2/2 loss " in out and fileio.exists(str(tmp_path / "m" / "export"))   # trained
  [(config, given_run_config, run_config)] = tasks
  for key in ("seq_len", "reuse_len", "num_predict", "bsz_per_host", "num_core_per_host",
              "bi_data"):
    assert getattr(config, key) == getattr(params, key), key
  # the model's memory caching and positions use the records' values too
  assert given_run_config.reuse_len == run_config.reuse_len == ph.REUSE
  assert given_run_config.bi_data is run_config.bi_data is True


def test_run_pretrain_checks_a_flag_given_against_the_records(setup, tmp_path):
  base, cfg = setup
  common = dict(record_dir=base / "records", model_config_path=cfg, model_dir=tmp_path / "m",
                train_steps=2)
  message = _fails(seq_len=64, **common)
  assert message.endswith("has seq_len=32 (asked 64)"), message   # only what was given differs
  message = _fails(bi_data=False, **common)
  assert message.endswith("has bi_data=True (asked False)"), message


@pytest.mark.slow
def test_run_pretrain_chooses_among_record_sets_by_the_flags_given(setup, tasks, tmp_path, capsys):
  base, cfg = setup
  common = dict(record_dir=base / "two", model_config_path=cfg, model_dir=tmp_path / "m",
                train_steps=2)
  message = _fails(**common)
  assert message == (f"run_pretrain.py: {base / 'two'}: 2 record sets with vocab_size="
                     f"{json.loads(cfg.read_text())['n_token']}, differing in seq_len (32 or "
                     "48); pass --seq_len to choose one")
  assert not tasks
  run_main("run_pretrain.py", seq_len=48, **common)
  out = capsys.readouterr().out
  assert f"records: reuse_len={ph.REUSE} num_predict={ph.NP}" in out, out[-3000:]
  assert "seq_len=48" not in out.split("records: ")[1].splitlines()[0]   # given, not taken
  [(config, _, run_config)] = tasks
  assert config.seq_len == 48 and config.bi_data and run_config.reuse_len == ph.REUSE


@pytest.mark.parametrize("flag, value", [("bsz_per_host", 0), ("num_core_per_host", 0),
                                         ("num_hosts", 0), ("bsz_per_host", -4)])
def test_run_pretrain_refuses_a_layout_flag_below_one(setup, tmp_path, flag, value):
  """0 is not "not given": it is refused in one line, before anything is written."""
  base, cfg = setup
  message = _fails(record_dir=base / "records", model_config_path=cfg,
                   model_dir=tmp_path / "m", train_steps=2, **{flag: value})
  assert message.strip() == f"run_pretrain.py: --{flag}={value} must be at least 1"
  assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("lanes, expected", [
    (0, "--num_lanes=0 must be at least 1"),
    (5, "--bi_data needs --num_lanes=5 to be even (forward and backward pairs)")])
def test_writer_refuses_lanes_it_cannot_cut(text_and_sp, tmp_path, lanes, expected):
  from tests.script_helpers import main_exit
  text, sp = text_and_sp
  code = main_exit("data_utils/create_pretrain_data.py", input_glob=text, sp_model=sp,
                   output_dir=str(tmp_path / "r"), uncased=True, num_lanes=lanes,
                   **{k: v for k, v in TINY.items() if k != "bsz_per_host"})
  assert code == f"create_pretrain_data.py: {expected}"
  assert not (tmp_path / "r").exists()
