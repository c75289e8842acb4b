"""Model-level behaviour: config round trips, parameter counts, XLA, bf16."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import losses
from modeling.run_config import RunConfig
from modeling.xlnet.config import BASE, LARGE, XLNetConfig
from modeling.xlnet.classification_head import ClassificationHead
from modeling.xlnet.lm_head import LMHead
from modeling.xlnet.sequence_summary import SequenceSummary
from modeling.squad_head import SquadHead
from modeling.xlnet.feed_forward import PositionwiseFeedForward
from modeling.xlnet.attention import TwoStreamRelativeAttention
from modeling.xlnet.block import XLNetBlock
from modeling.xlnet.models import XLNetClassifier, XLNetPretrainModel, XLNetRaceModel, XLNetSquadModel
from modeling.xlnet.encoder import XLNetEncoder
from tests import reference as ref

TINY = XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=50)


def test_config_json_round_trip(tmp_path):
  path = tmp_path / "xlnet_config.json"
  path.write_text(json.dumps({"d_head": 64, "d_inner": 3072, "d_model": 768,
                              "ff_activation": "gelu", "n_head": 12, "n_layer": 12,
                              "n_token": 32000, "untie_r": True}))
  config = XLNetConfig.from_json(path)
  assert config == XLNetConfig(**BASE)
  config.to_json(tmp_path / "again.json")
  assert XLNetConfig.from_json(tmp_path / "again.json") == config


def test_config_errors_name_the_file(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text('{"n_layer": 2,\n "d_model": }')
  with pytest.raises(ValueError, match=r"bad.json: line 2"):
    XLNetConfig.from_json(bad)
  bad.write_text(json.dumps({**BASE, "n_token": 10, "dropout": 0.1}))
  with pytest.raises(ValueError, match="unknown XLNetConfig keys: dropout"):
    XLNetConfig.from_json(bad)
  with pytest.raises(ValueError, match="ff_activation"):
    XLNetConfig(**BASE, ff_activation="swish")


@pytest.mark.parametrize("layer", [
    TwoStreamRelativeAttention(2, 8, dropout=0.1, dropatt=0.2, name="rel_attn"),
    PositionwiseFeedForward(32, activation="relu", dropout=0.1, name="ff"),
    XLNetBlock(2, 8, 32, activation="gelu", dropout=0.1, dropatt=0.0),
    XLNetEncoder(TINY, RunConfig(mem_len=4, bi_data=True, clamp_len=3)),
    LMHead(50),
    SequenceSummary("attn", use_proj=True, n_head=2, d_head=8, dropout=0.1),
    ClassificationHead(3),
    SquadHead(4, 3, dropout=0.1),
], ids=lambda l: type(l).__name__)
def test_layer_get_config_round_trip(layer):
  config = layer.get_config()
  clone = type(layer).from_config(config)
  assert clone.get_config() == config


@pytest.mark.parametrize("cls,kwargs", [
    (XLNetPretrainModel, {}), (XLNetClassifier, {"n_class": 3, "summary_type": "attn"}),
    (XLNetSquadModel, {"start_n_top": 2}), (XLNetRaceModel, {"summary_type": "first"})])
def test_model_config_round_trip_gives_same_numbers(cls, kwargs):
  run = RunConfig(dropout=0.0, dropatt=0.0)
  model = cls(TINY, run, **kwargs).ensure_built()
  clone = cls.from_config(model.get_config()).ensure_built()
  clone.set_weights(model.get_weights())
  inputs = model.dummy_inputs()
  inputs["input_ids"] = tf.random.stateless_uniform(inputs["input_ids"].shape, [1, 2], 0, 50,
                                                    tf.int32)
  a, b = model(inputs), clone(inputs)
  for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("size,params,n_vars", [(BASE, 116_750_336, 163),
                                                (LARGE, 360_300_800, 319)])
@pytest.mark.slow
def test_released_parameter_counts(size, params, n_vars):
  model = XLNetPretrainModel(XLNetConfig(**size), RunConfig()).ensure_built()
  assert sum(int(np.prod(v.shape)) for v in model.weights) == params
  assert len(model.weights) == n_vars == len(model.tf1_variables())


def _pretrain_batch(batch=4, seq_len=12, num_predict=5, seed=0):
  rng = np.random.default_rng(seed)
  perm_mask, mapping = ref.random_permutation_masks(rng, batch, seq_len, num_predict)
  ids = rng.integers(9, 50, [batch, seq_len]).astype(np.int32)
  target = np.einsum("bpl,bl->bp", mapping, ids).astype(np.int32)
  seg = np.zeros([batch, seq_len], np.int32)
  seg[:, 6:] = 1
  seg[:, -1] = 2
  return {"input_ids": ids, "seg_ids": seg, "perm_mask": perm_mask, "target_mapping": mapping,
          "input_mask": np.zeros([batch, seq_len], np.float32),
          "target": target, "target_mask": mapping.sum(-1)}


def _jit_train_step(model, optimizer):
  @tf.function(jit_compile=True)
  def step(batch, mems):
    with tf.GradientTape() as tape:
      out = model(batch, mems=mems, training=True)
      loss = losses.lm_loss(out["logits"], batch["target"], batch["target_mask"])
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss, out["new_mems"]
  return step


@pytest.mark.slow
def test_forward_and_train_step_compile_with_xla():
  run = RunConfig(dropout=0.1, dropatt=0.1, mem_len=6, reuse_len=6, bi_data=True)
  model = XLNetPretrainModel(TINY, run).ensure_built()
  batch = {k: tf.constant(v) for k, v in _pretrain_batch().items()}
  mems = tf.zeros([TINY.n_layer, 4, 6, TINY.d_model])

  forward = tf.function(lambda b, m: model(b, mems=m)["logits"], jit_compile=True)
  eager = model(batch, mems=mems)["logits"]
  np.testing.assert_allclose(forward(batch, mems), eager, rtol=1e-4, atol=1e-5)

  optimizer = keras.optimizers.AdamW(learning_rate=1e-2, weight_decay=0.01)
  step = _jit_train_step(model, optimizer)
  losses_seen = []
  for _ in range(30):
    loss, mems = step(batch, mems)
    losses_seen.append(float(loss))
  assert np.all(np.isfinite(losses_seen))
  assert mems.shape == (TINY.n_layer, 4, 6, TINY.d_model)
  assert np.mean(losses_seen[-5:]) < 0.7 * np.mean(losses_seen[:5]), losses_seen
  # the step really went through XLA
  hlo = step.experimental_get_compiler_ir(batch, mems)(stage="hlo")
  assert "HloModule" in hlo


@pytest.mark.slow
def test_mixed_bfloat16_matches_float32_and_trains():
  run = RunConfig(dropout=0.0, dropatt=0.0, mem_len=4, bi_data=True)
  f32 = XLNetPretrainModel(TINY, run).ensure_built()
  keras.config.set_dtype_policy("mixed_bfloat16")
  try:
    bf16 = XLNetPretrainModel(TINY, run).ensure_built()
  finally:
    keras.config.set_dtype_policy("float32")
  bf16.set_weights(f32.get_weights())
  assert all(v.dtype == "float32" for v in bf16.weights)
  batch = {k: tf.constant(v) for k, v in _pretrain_batch().items()}
  batch["input_mask"] = tf.constant([[0.0] * 12, [1.0] * 3 + [0.0] * 9] * 2)
  mems = tf.random.stateless_normal([TINY.n_layer, 4, 3, TINY.d_model], [3, 4])
  a = f32(batch, mems=mems)["logits"]
  b = bf16(batch, mems=mems)["logits"]
  assert b.dtype == tf.bfloat16
  b = tf.cast(b, tf.float32)
  assert np.all(np.isfinite(b))
  assert ref.rel_err(b, a) < 5e-2
  optimizer = keras.optimizers.AdamW(learning_rate=3e-3)
  loss, _ = _jit_train_step(bf16, optimizer)(batch, mems)
  assert np.isfinite(float(loss))


def test_dropout_only_in_training_and_memory_stops_gradients():
  run = RunConfig(dropout=0.3, dropatt=0.3, mem_len=5)
  model = XLNetPretrainModel(TINY, run).ensure_built()
  batch = {k: tf.constant(v) for k, v in _pretrain_batch().items()}
  mems = tf.random.stateless_normal([TINY.n_layer, 4, 3, TINY.d_model], [5, 6])
  eval_a, eval_b = model(batch, mems=mems), model(batch, mems=mems)
  np.testing.assert_array_equal(eval_a["logits"], eval_b["logits"])
  train = model(batch, mems=mems, training=True)
  assert np.max(np.abs(train["logits"] - eval_a["logits"])) > 1e-3
  with tf.GradientTape() as tape:
    out = model(batch, mems=mems, training=True)
    through_mems = tf.reduce_sum(out["new_mems"])
  grads = tape.gradient(through_mems, model.trainable_variables)
  assert all(g is None for g in grads)  # new memory is stop-gradient


def test_regression_and_classifier_output_shapes():
  run = RunConfig(dropout=0.0, dropatt=0.0)
  reg = XLNetClassifier(TINY, run, regression=True, task_name="sts-b").ensure_built()
  assert reg(reg.dummy_inputs(batch=3)).shape == (3,)
  assert "model/regression_sts-b/logit/kernel" in reg.tf1_variables()
  cls = XLNetClassifier(TINY, run, n_class=5, summary_type="mean").ensure_built()
  assert cls(cls.dummy_inputs(batch=3)).shape == (3, 5)
