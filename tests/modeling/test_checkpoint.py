"""Checkpoint formats: release TF1 names in and out, native TF2, clear errors."""

import numpy as np
import pytest
import tensorflow as tf

from modeling import checkpoint, loading
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.models import XLNetClassifier, XLNetPretrainModel, XLNetRaceModel
from modeling.xlnet import release_checkpoint
from tests import reference as ref

SIZE = dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=24, n_token=40)
RUN = RunConfig(dropout=0.0, dropatt=0.0)


def _write(tmp_path, name="model.ckpt", drop=(), untie_r=True, heads=(), **overrides):
  weights = ref.random_release_weights(**SIZE, untie_r=untie_r, heads=heads)
  weights.update(overrides)
  for key in drop:
    del weights[key]
  return weights, ref.write_tf1_checkpoint(weights, str(tmp_path / name))


@pytest.mark.parametrize("untie_r", [True, False])
def test_tf1_load_then_save_round_trips_every_variable(tmp_path, untie_r):
  weights, prefix = _write(tmp_path, untie_r=untie_r)
  model = XLNetPretrainModel(XLNetConfig(**SIZE, untie_r=untie_r), RUN)
  report = release_checkpoint.load_tf1_checkpoint(model, prefix, require_all=True)
  assert sorted(report.loaded) == sorted(weights) and not report.fresh and not report.unused
  out_dir = tmp_path / "export"
  release_checkpoint.save_tf1_checkpoint(model, str(out_dir / "xlnet_model.ckpt"), global_step=7)
  found = tf.train.latest_checkpoint(str(out_dir))
  assert found == str(out_dir / "xlnet_model.ckpt")
  reader = tf.train.load_checkpoint(found)
  assert set(reader.get_variable_to_shape_map()) == set(weights) | {"global_step"}
  for name, value in weights.items():
    np.testing.assert_array_equal(reader.get_tensor(name), value)
  assert reader.get_tensor("global_step") == 7
  assert not list(out_dir.glob("*.tmp*"))


def test_fine_tuned_checkpoint_without_mask_emb_and_lm_bias(tmp_path):
  _, prefix = _write(tmp_path, drop=("model/transformer/mask_emb/mask_emb", "model/lm_loss/bias"))
  model = XLNetPretrainModel(XLNetConfig(**SIZE), RUN)
  report = release_checkpoint.load_tf1_checkpoint(model, prefix)
  assert sorted(report.fresh) == ["model/lm_loss/bias", "model/transformer/mask_emb/mask_emb"]
  with pytest.raises(ValueError, match="missing 2: .*mask_emb"):
    release_checkpoint.load_tf1_checkpoint(model, prefix, require_all=True)


def test_pretrained_checkpoint_initialises_a_classifier(tmp_path):
  weights, prefix = _write(tmp_path)
  model = XLNetClassifier(XLNetConfig(**SIZE), RUN, n_class=2, task_name="imdb")
  report = release_checkpoint.load_tf1_checkpoint(model, prefix)
  assert sorted(report.fresh) == ["model/classification_imdb/logit/bias",
                                  "model/classification_imdb/logit/kernel",
                                  "model/sequnece_summary/summary/bias",
                                  "model/sequnece_summary/summary/kernel"]
  assert report.unused == ["model/lm_loss/bias"]
  np.testing.assert_array_equal(model.encoder.word_embedding.numpy(),
                                weights["model/transformer/word_embedding/lookup_table"])


def test_race_and_attn_summary_heads_load_by_release_name(tmp_path):
  d = SIZE["d_model"]
  heads = [("model/sequnece_summary/abs_attn/q", (d, 2, 8)),
           ("model/sequnece_summary/abs_attn/k", (d, 2, 8)),
           ("model/sequnece_summary/abs_attn/v", (d, 2, 8)),
           ("model/sequnece_summary/abs_attn/o", (d, 2, 8)),
           ("model/sequnece_summary/abs_attn/LayerNorm", None),
           ("model/sequnece_summary/summary", (d, d)), ("logits/dense", (d, 1))]
  weights, _ = _write(tmp_path, heads=heads)
  for name in list(weights):  # head projections have no bias in the release
    if "/abs_attn/" in name and name.endswith("/bias"):
      del weights[name]
  weights["model/sequnece_summary/summary_bias"] = np.linspace(-1, 1, d).astype(np.float32)
  prefix = ref.write_tf1_checkpoint(weights, str(tmp_path / "race.ckpt"))
  model = XLNetRaceModel(XLNetConfig(**SIZE), RUN, summary_type="attn")
  report = release_checkpoint.load_tf1_checkpoint(model, prefix, require_all=True)
  assert not report.fresh
  np.testing.assert_array_equal(model.head.dense.kernel.numpy(), weights["logits/dense/kernel"])


def test_mis_shaped_and_missing_variables_are_named(tmp_path):
  _, prefix = _write(tmp_path, untie_r=False)
  model = XLNetPretrainModel(XLNetConfig(**SIZE, untie_r=True), RUN)
  with pytest.raises(ValueError) as err:
    release_checkpoint.load_tf1_checkpoint(model, prefix)
  message = str(err.value)
  assert "model.ckpt" in message and "model/transformer/r_w_bias (checkpoint [2, 8], model [2, 2, 8])" in message
  assert "untie_r" in message and "\n" not in message
  _, prefix = _write(tmp_path, name="m2.ckpt", drop=("model/transformer/layer_1/ff/layer_2/bias",))
  with pytest.raises(ValueError, match=r"m2.ckpt: .*missing 1: model/transformer/layer_1/ff/layer_2/bias"):
    release_checkpoint.load_tf1_checkpoint(XLNetPretrainModel(XLNetConfig(**SIZE), RUN), prefix)
  with pytest.raises(FileNotFoundError, match="nowhere.ckpt"):
    release_checkpoint.load_tf1_checkpoint(model, str(tmp_path / "nowhere.ckpt"))


def test_native_tf2_round_trip_and_auto_detection(tmp_path):
  _, prefix = _write(tmp_path)
  model = XLNetPretrainModel(XLNetConfig(**SIZE), RUN)
  assert "loaded 33 variables" in loading.load_checkpoint(model, prefix)
  native = checkpoint.save_native_checkpoint(model, str(tmp_path / "native" / "ckpt"))
  clone = XLNetPretrainModel(XLNetConfig(**SIZE), RUN)
  assert "native" in loading.load_checkpoint(clone, native)
  for a, b in zip(model.weights, clone.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  assert not release_checkpoint.is_tf1_checkpoint(native)


# ---- --init_checkpoint=RUN_DIR: a training run's directory ----------------------------------
def _snapshot(model):
  return [v.numpy().copy() for v in model.encoder.weights]


def _trainer_like_run(run_dir, model, steps):
  """MODEL_DIR/ckpt/ckpt-STEP as training/trainer.py writes them (the model's variables by
  key beside the trainer's own entries: step, optimizer, dropout streams); the weights change
  before every save. Returns {step: encoder weights saved}."""
  step = tf.Variable(0, dtype=tf.int64)
  objects = dict(checkpoint.native_objects(model), step=step,
                 **{"optimizer.0000": tf.Variable(1.0), "rng.0000": tf.Variable([1, 2])})
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(**objects), str(run_dir / "ckpt"),
                                       max_to_keep=3)
  saved = {}
  for s in steps:
    for v in model.weights:
      v.assign(v + 1.0)
    step.assign(s)
    manager.save(checkpoint_number=s)
    saved[s] = _snapshot(model)
  return saved


def test_init_from_a_run_directory_takes_best_else_the_last_checkpoint(tmp_path):
  from modeling import families
  from training import best as best_lib
  run = tmp_path / "run"
  trained = XLNetPretrainModel(XLNetConfig(**SIZE), RUN).ensure_built()
  saved = _trainer_like_run(run, trained, [10, 20])
  lines = []
  clf = XLNetClassifier(XLNetConfig(**SIZE), RUN, n_class=2).ensure_built()
  families.get("xlnet").initialize(clf, str(run), lines.append)     # what Task.initialize runs
  prefix = str(run / "ckpt" / "ckpt-20")
  # the encoder's 32: 2 layers x (5 attention kernels + 2 LayerNorms x 2 + 2 dense x 2) + 6
  # shared (word_embedding, mask_emb, r_w/r_r/r_s biases, seg_embed); lm_loss.bias unused
  assert lines == [
      f"init from {run}: ckpt/ckpt-20, the last checkpoint (no best/): native TF2 checkpoint "
      f"{prefix}: loaded 32 variables; 4 initialised fresh (logit_head.logit.bias, "
      "logit_head.logit.kernel, sequnece_summary.summary.bias, sequnece_summary.summary.kernel)"
      "; 1 in the checkpoint unused"]
  for got, want in zip(_snapshot(clf), saved[20]):
    np.testing.assert_array_equal(got, want)
  # the run publishes a best/ of step 10's weights: it wins over the later ckpt-20
  at_10 = XLNetPretrainModel(XLNetConfig(**SIZE), RUN).ensure_built()
  checkpoint.read_checkpoint(tf.train.Checkpoint(**checkpoint.native_objects(at_10)),
                             str(run / "ckpt" / "ckpt-10"), partial=True)
  best_lib.publish(str(run / "best"), at_10, 10, {"accuracy": 0.81, "f1": 0.5},
                   log=lambda m: None)
  lines = []
  families.get("xlnet").initialize(clf, str(run), lines.append)
  assert lines[0].startswith(f"init from {run}: best/ (step 10, accuracy 0.8100, f1 0.5000): "
                             f"native TF2 checkpoint {run / 'best' / 'step-10' / 'ckpt'}: "
                             "loaded 32 variables; 4 initialised fresh")
  for got, want in zip(_snapshot(clf), saved[10]):
    np.testing.assert_array_equal(got, want)
  assert checkpoint.resolve(str(run)) == str(run / "best" / "step-10" / "ckpt")


def test_a_directory_without_any_checkpoint_says_what_it_looked_for(tmp_path):
  (tmp_path / "ckpt").mkdir()
  with pytest.raises(FileNotFoundError) as e:
    checkpoint.resolve(str(tmp_path))
  assert str(e.value) == (f"{tmp_path}: directory holds no checkpoint (no best/best.json, no "
                          "ckpt/ of a run, no `checkpoint` state file)")


def test_native_load_by_key_names_missing_encoder_and_misshaped_variables(tmp_path):
  model = XLNetPretrainModel(XLNetConfig(**SIZE), RUN).ensure_built()
  objects = checkpoint.native_objects(model)
  del objects["transformer.seg_embed"]
  prefix = tf.train.Checkpoint(**objects).write(str(tmp_path / "part" / "ckpt"))
  with pytest.raises(ValueError, match=r"ckpt: checkpoint does not fit the model: missing 1: "
                                       r"transformer.seg_embed$"):
    loading.load_checkpoint(XLNetPretrainModel(XLNetConfig(**SIZE), RUN), prefix)
  wider = XLNetPretrainModel(XLNetConfig(**dict(SIZE, n_token=41)), RUN)
  full = checkpoint.save_native_checkpoint(model, str(tmp_path / "full" / "ckpt"))
  with pytest.raises(ValueError, match=r"wrong shape: .*transformer.word_embedding "
                                       r"\(checkpoint \[40, 16\], model \[41, 16\]\)"):
    loading.load_checkpoint(wider, full)
