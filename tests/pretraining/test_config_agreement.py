"""Settings two configs both hold are refused when they disagree, never silently replaced:
PretrainTask's RunConfig against its PretrainConfig (the records'), run_pretrain.py's --mem_len
against an objective that carries no memory."""

import pytest

from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from pretraining.task import PretrainConfig, PretrainTask

MODEL = XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=16, n_token=40)


def _task(run_config, reuse_len=4, bi_data=True):
  config = PretrainConfig(seq_len=8, reuse_len=reuse_len, num_predict=2, bsz_per_host=2,
                          bi_data=bi_data)
  return PretrainTask(config, MODEL, run_config)


@pytest.mark.parametrize("run_config, message", [
    (RunConfig(mem_len=4, reuse_len=2),
     "RunConfig.reuse_len=2 but PretrainConfig.reuse_len=4 (the records'): give the same value, "
     "or leave RunConfig.reuse_len unset (None)"),
    (RunConfig(reuse_len=0),          # 0 is a setting (cache everything), not "unset"
     "RunConfig.reuse_len=0 but PretrainConfig.reuse_len=4"),
    (RunConfig(bi_data=False),
     "RunConfig.bi_data=False but PretrainConfig.bi_data=True (the records'): give the same "
     "value, or leave RunConfig.bi_data unset (None)"),
])
def test_a_disagreement_is_refused_in_one_line_naming_both(run_config, message):
  with pytest.raises(ValueError) as e:
    _task(run_config)
  assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_equal_or_unset_values_pass_and_take_the_records():
  assert RunConfig().reuse_len is None and RunConfig().bi_data is None
  for run_config in (RunConfig(mem_len=4), RunConfig(mem_len=4, reuse_len=4, bi_data=True)):
    task = _task(run_config)
    assert (task.run_config.reuse_len, task.run_config.bi_data, task.run_config.mem_len) == (
        4, True, 4)
  task = _task(RunConfig(bi_data=False), bi_data=False)
  assert task.run_config.bi_data is False


def test_run_pretrain_refuses_memory_for_an_objective_that_carries_none(tmp_path):
  from types import SimpleNamespace
  from pretraining import runner
  flags = SimpleNamespace(export_hf_dir=None, objective="mpnet", mem_len=16)
  with pytest.raises(ValueError, match=r"^--mem_len=16: --objective=mpnet carries no memory; "
                                       r"leave --mem_len out$"):
    runner.run(flags, str(tmp_path / "run"), None)
  assert not (tmp_path / "run").exists()
