"""The pretraining objectives' registry (pretraining/objectives.py) and its contract
(pretraining/objective.py): every objective is found by name, unknown names are one-line errors,
the quickstart's TensorFlow-free table agrees with the registry, and a new objective written
against the contract (one class, one registry entry) trains through the unchanged task and
trainer: the worked example of ARCHITECTURE.md's "How to add a pretraining objective"."""

import numpy as np
import pytest
import tensorflow as tf

from modeling import families
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from pretraining import objectives, plm
from pretraining.task import PretrainConfig, PretrainTask
from reproduction import pipeline
from training.stepper import Stepper

B, L, P, V = 2, 8, 3, 24


def test_every_objective_is_registered_with_its_family():
  assert objectives.NAMES == ("plm", "mlm", "mpnet")
  for name in objectives.NAMES:
    objective = objectives.get(name)
    assert objective.name == name
    assert objective.family in families.FAMILIES
    # the quickstart's own table (its process imports no TensorFlow) says the same
    assert pipeline.OBJECTIVE_MODEL[name] == (objective.family, objective.carries_memory)
  assert [objectives.get(n).carries_memory for n in objectives.NAMES] == [True, True, False]
  with pytest.raises(ValueError, match=r"^--objective must be one of \('plm', 'mlm', "
                                       r"'mpnet'\), got 'clm'$"):
    objectives.get("clm")


def test_memory_follows_the_objective():
  run = RunConfig(mem_len=16, reuse_len=4)
  assert objectives.get("plm").run_config(run).mem_len == 16
  assert objectives.get("mpnet").run_config(run).mem_len == 0


class CopyLM(plm.PLM):
  """A toy objective: XLNet's content stream predicts the targets while seeing them (no
  permutation, no corruption), with an extra loss pulling the target logits' mean to 0."""

  name = "copy"
  query_stream = False
  exports_encoder = False

  def extra_losses(self, task, batch, extra):
    return [("zero_loss", tf.square(tf.reduce_mean(extra["logits"])), 0.5)]

  def predict(self, task, model, batch, state, step, training=True):
    logits, target, target_mask, extra, new_state = super().predict(
        task, model, batch, state, step, training)
    extra["logits"] = tf.cast(logits, tf.float32)
    return logits, target, target_mask, extra, new_state

  def export(self, task, model, export_dir, log):
    log(f"copy: nothing to export to {export_dir}")


def _batch(rng):
  """One replica's plm batch: uneven padding (row 1 has 2 padding tokens)."""
  ids = rng.integers(10, V, [B, L]).astype(np.int32)
  mask = np.zeros([B, L], np.float32)
  mask[1, :2] = 1.0
  positions = np.stack([rng.choice(np.arange(2, L), P, replace=False) for _ in range(B)])
  mapping = np.zeros([B, P, L], np.float32)
  mapping[np.arange(B)[:, None], np.arange(P)[None], positions] = 1.0
  is_target = mapping.sum(1)
  return {"input_ids": ids, "seg_ids": np.zeros([B, L], np.int32), "input_mask": mask,
          "perm_mask": np.tile(is_target[:, None, :], [1, L, 1]), "target_mapping": mapping,
          "target": np.take_along_axis(ids, positions, 1), "target_mask": np.ones([B, P],
                                                                                np.float32),
          "input_k": 1.0 - is_target, "input_q": is_target, "label": np.zeros([B], np.int32)}


@pytest.mark.slow
def test_a_new_objective_is_one_class_and_one_registry_line(monkeypatch):
  monkeypatch.setitem(objectives.OBJECTIVES, "copy", CopyLM())      # the one registry line
  config = PretrainConfig(seq_len=L, reuse_len=L // 2, num_predict=P, bsz_per_host=B,
                          bi_data=False, objective="copy", learning_rate=1e-2, train_steps=40,
                          warmup_steps=0)
  task = PretrainTask(config, XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8,
                                          d_inner=32, n_token=V),
                      RunConfig(dropout=0.0, dropatt=0.0, mem_len=4, reuse_len=L // 2))
  assert task.family == "xlnet" and task.recipe_script == "pretrain"
  stepper = Stepper(task, xla="full")          # the trainer's own step, compiled with XLA
  batch = _batch(np.random.default_rng(0))
  outs = [stepper.step(batch) for _ in range(40)]
  assert {"loss", "lm_loss", "zero_loss"} <= set(outs[0])
  np.testing.assert_allclose(outs[0]["loss"], outs[0]["lm_loss"] + 0.5 * outs[0]["zero_loss"],
                             rtol=1e-5)
  # seeing its targets, the content stream learns to copy them: the loss falls far below
  # the uniform guess ln(24) = 3.18 it starts near
  assert outs[0]["lm_loss"] > 2.5 and outs[-1]["lm_loss"] < 0.5 * outs[0]["lm_loss"], \
      [round(o["lm_loss"], 3) for o in outs]
  assert stepper.state.shape == (2, B, 4, 16)  # the XLNet memory is carried
  said = []
  task.on_end(stepper.model, "ram://objectives/copy", said.append)
  assert said == ["copy: nothing to export to ram://objectives/copy/export"]
