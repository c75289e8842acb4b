"""--recompute reaches the model from every entry script's flags: each script's main() runs in
this process (tests/script_helpers.py) up to the point where it hands its task to the trainer,
and the task's model is built there (both families, pretraining and every fine-tuning task).
And through the trainer under a two-replica MirroredStrategy, recomputation trains the same."""

import dataclasses
import json
import os
import sys

import numpy as np
import pytest

from finetuning import runner as finetuning_runner
from modeling.mpnet.config import MPNetConfig
from modeling.xlnet.config import XLNetConfig
from pretraining import runner as pretraining_runner
from tests import warm
from tests import pretrain_helpers as ph
from tests import script_helpers
from tests.hang_guard import HANG_GUARD


class Built(Exception):
  """Raised where the script would start training, with the task's model."""

  def __init__(self, model):
    super().__init__("built")
    self.model = model


def recomputes(model):
  """The switch the model's encoder reads at call time (XLNet: its RunConfig; MPNet: its own)."""
  encoder = model.encoder
  return encoder.run_config.recompute if model.family == "xlnet" else encoder.recompute


@pytest.fixture(scope="module")
def setup(tmp_path_factory, text_and_sp):
  """Tiny configs of both families for the fixture's SentencePiece model, and its records."""
  from data_utils.tokenization import PAD_ID, Tokenizer
  text, sp = text_and_sp
  vocab = Tokenizer(sp, lower=True).vocab_size
  base = tmp_path_factory.mktemp("recompute_flags")
  xlnet = XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=vocab)
  mpnet = MPNetConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=520,
                      pad_token_id=PAD_ID)
  (base / "xlnet.json").write_text(xlnet.to_json())
  (base / "mpnet.json").write_text(json.dumps(dataclasses.asdict(mpnet)))
  return {"sp": sp, "text": text, "vocab": vocab, "xlnet": str(base / "xlnet.json"),
          "mpnet": str(base / "mpnet.json"),
          "records": ph.make_records(text, sp, base / "records")}


def run_until_built(script, **flag_values):
  with pytest.raises(Built) as built:
    script_helpers.run_main(script, **flag_values)
  return built.value.model


@pytest.mark.parametrize("recompute", [True, False])
@pytest.mark.parametrize("model_type", ["xlnet", "mpnet"])
@pytest.mark.parametrize("script, extra", [
    ("run_classifier.py", {"task_name": "sst-2", "data_dir": "."}),
    ("run_race.py", {"data_dir": "."}),
    ("run_squad.py", {"train_file": "train.json"})])
def test_fine_tuning_scripts(monkeypatch, tmp_path, setup, script, extra, model_type, recompute):
  def train_or_load(task, *args, **kwargs):
    raise Built(task.build_model())
  monkeypatch.setattr(finetuning_runner, "train_or_load", train_or_load)
  model = run_until_built(script, model_type=model_type, model_config_path=setup[model_type],
                          sp_model=setup["sp"], model_dir=str(tmp_path / "m"),
                          do_train=True, recompute=recompute, **extra)
  assert model.family == model_type
  assert recomputes(model) is recompute


@pytest.mark.parametrize("recompute", [True, False])
@pytest.mark.parametrize("objective", ["plm", "mpnet"])
def test_run_pretrain(monkeypatch, tmp_path, setup, objective, recompute):
  def trainer(task, *args, **kwargs):
    raise Built(task.build_model())
  monkeypatch.setattr(pretraining_runner.trainer_lib, "Trainer", trainer)
  family = "xlnet" if objective == "plm" else "mpnet"
  model = run_until_built("run_pretrain.py", objective=objective, record_dir=setup["records"],
                          model_config_path=setup[family], model_dir=str(tmp_path / "m"),
                          recompute=recompute)
  assert model.family == family
  assert recomputes(model) is recompute



MIRRORED = r"""
from data_utils import cli_app; cli_app.skip_keras_optional_imports()   # as a script starts
import dataclasses, sys, json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tests import pretrain_helpers as ph      # run from the repository root (cwd)
vocab, records, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
result = {}
for recompute in (False, True):
  task = ph.tiny_task(records, vocab, cores=2, dropout=0.1, train_steps=4)
  task.run_config = dataclasses.replace(task.run_config, recompute=recompute)
  strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  # --xla=off: the strategy is what this test adds (XLA: tests/modeling/test_recompute.py);
  # two XLA-compiled replica steps made it the suite's slowest test but one (177 s)
  trainer, losses = ph.train(task, f"{out}/{recompute}", strategy, steps_per_loop=2, save_every=4,
                             xla="off")
  assert trainer.model.encoder.run_config.recompute is recompute
  result[str(recompute)] = {"losses": losses.tolist(),
                            "weights": [v.numpy().tolist() for v in trainer.model.variables]}
print(json.dumps(result))
"""


@pytest.mark.slow   # a subprocess: two two-replica runs (pyproject.toml)
def test_mirrored_two_devices_same_training_with_recompute(tmp_path, setup):
  """A MirroredStrategy over two logical CPUs (a subprocess: devices are set before TensorFlow
  starts) through the trainer: 4 pretraining steps with dropout give the same losses, weights
  and dropout generator states with recompute as without."""
  records = ph.make_records(setup["text"], setup["sp"], tmp_path / "records", cores=2)
  result = warm.run(
      [sys.executable, "-c", MIRRORED, str(setup["vocab"]), records, str(tmp_path)],
      cwd=script_helpers.ROOT, capture_output=True, text=True, timeout=HANG_GUARD,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
  assert result.returncode == 0, result.stderr[-3000:]
  runs = json.loads(result.stdout.strip().splitlines()[-1])
  off, on = runs["False"], runs["True"]
  np.testing.assert_allclose(on["losses"], off["losses"], rtol=1e-5)
  assert len(on["weights"]) == len(off["weights"])
  for a, b in zip(on["weights"], off["weights"]):     # weights, and the generators' states
    np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-4, atol=1e-6)
