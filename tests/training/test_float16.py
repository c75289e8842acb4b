"""--use_float16 (training/loss_scale.py): the mixed_float16 policy with dynamic loss scaling
around the project's optimizer, through the trainer's own XLA-compiled step.

Crafted cases on a tiny XLNet classifier (2 layers, d_model 16, two rows with uneven left
padding), the loss multiplied by a factor to move its gradients out of float16's range:
- a loss so small that float16's backward pass rounds its gradients to zero (no update at all
  without scaling), while the scaled step lands on float32's update;
- a loss so large that float16's backward pass overflows (NaN weights without scaling), while
  the scaled run skips steps, halving the scale, until its first applied update equals
  float32's first update (a skipped step leaves no trace);
- a skip bit for bit (weights, Adam slots, beta powers, iterations), the scale halved, the skip
  counted, and the scale doubled after the growth interval; gradient accumulation; the
  loss-scale state through a checkpoint (and checkpoints across precisions); the log line and
  TensorBoard; two replicas (MirroredStrategy, two logical CPUs) where only one overflows;
- the SQuAD head's log-probabilities in float32;
- both precision flags from run_pretrain.py, run_classifier.py and run_squad.py to the policy
  and optimizer; the flags exclude each other; the warnings where float16 does not pay.
"""

import glob
import json
import os
import sys
from types import SimpleNamespace

import keras
import numpy as np
import pytest
import tensorflow as tf

from finetuning.classifier_task import ClassifierConfig, ClassifierTask
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from tests import warm
from tests.hang_guard import HANG_GUARD
from training import entry
from training import loss_scale
from training import trainer as trainer_lib
from training.stepper import Stepper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ScaledLossTask(ClassifierTask):
  """The classifier's loss times `factor` (gradients scale with it); batches from memory."""

  evaluate = None                    # the trainer evaluates nothing

  def __init__(self, factor=1.0, train_steps=8, **opt):
    opt.setdefault("warmup_steps", 0)
    config = ClassifierConfig(task_name="sst-2", learning_rate=1e-3, train_steps=train_steps,
                              train_batch_size=2, max_seq_length=12, **opt)
    super().__init__(config, XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                                         n_token=40), RunConfig(dropout=0.0, dropatt=0.0))
    self.factor = factor

  def loss(self, model, batch, state, step, training=True):
    loss, metrics, state = super().loss(model, batch, state, step, training)
    return loss * self.factor, metrics, state

  def dataset(self, input_context, skip_batches=0):
    return tf.data.Dataset.from_tensors(batch()).repeat()


def batch(rows=2):
  """`rows` classifier rows of 12 tokens, left padded by 0, 5, 0, 5, ... positions."""
  rng = np.random.default_rng(0)
  ids = rng.integers(9, 40, [rows, 12]).astype(np.int32)
  mask = np.zeros([rows, 12], np.float32)
  seg = np.zeros([rows, 12], np.int32)
  for row in range(1, rows, 2):
    ids[row, :5], mask[row, :5], seg[row, :5] = 5, 1.0, 4
  seg[:, -1] = 2                                             # <cls> last
  return {"input_ids": ids, "seg_ids": seg, "input_mask": mask,
          "label": np.arange(rows, dtype=np.int32) % 2}


@pytest.fixture
def float16(monkeypatch):
  """The mixed_float16 policy while the test runs (float32 again after it)."""
  keras.config.set_dtype_policy("mixed_float16")
  yield monkeypatch
  keras.config.set_dtype_policy("float32")


def _inner(stepper):
  """The task's own optimizer (inside the loss scaling, if any)."""
  return getattr(stepper.optimizer, "inner_optimizer", stepper.optimizer)


def _snapshot(stepper):
  """Bytes of every weight and every variable of the task's optimizer (slots, beta powers,
  iterations, learning rate)."""
  out = {f"w:{k}": v.tobytes() for k, v in stepper.weights().items()}
  out.update({f"opt:{i}": np.asarray(v.numpy()).tobytes()
              for i, v in enumerate(_inner(stepper).variables)})
  return out


def _update(stepper, b):
  before = stepper.weights()
  out = stepper.step(b)
  return out, {k: v - before[k] for k, v in stepper.weights().items()}


def _relative(ours, ref):
  """Relative difference of two updates (dicts of arrays), over all of them."""
  num = sum(np.sum((ours[k] - ref[k]) ** 2) for k in ref)
  return float(np.sqrt(num / sum(np.sum(ref[k] ** 2) for k in ref)))


def _float32_update(factor):
  stepper = Stepper(ScaledLossTask(factor))
  return _update(stepper, batch())


def test_loss_scaling_keeps_the_gradients_plain_float16_rounds_to_zero(float16):
  """Loss x 1e-7: d loss / d logit ~ 2.5e-8, under float16's smallest subnormal (6e-8 / 2), so
  the backward pass is zero from the first float16 tensor on: no update. Scaled by 2^15 the
  gradients are normal float16 numbers; the update (Adam's first step, epsilon-dominated, so
  proportional to the gradients) and the logged gradient norm are float32's."""
  keras.config.set_dtype_policy("float32")
  ref, ref_update = _float32_update(1e-7)
  keras.config.set_dtype_policy("mixed_float16")
  float16.setattr(loss_scale, "wrap", lambda optimizer: optimizer)     # no loss scaling
  plain = Stepper(ScaledLossTask(1e-7))
  assert plain.model.dtype_policy.name == "mixed_float16"
  out, update = _update(plain, batch())
  assert out["grad_norm"] == 0.0 and ref["grad_norm"] > 1e-9
  assert all(not u.any() for u in update.values())
  float16.undo()
  keras.config.set_dtype_policy("mixed_float16")
  scaled = Stepper(ScaledLossTask(1e-7))
  assert isinstance(scaled.optimizer, loss_scale.LossScaleOptimizer)
  out, update = _update(scaled, batch())
  assert out["skipped_steps"] == 0.0
  assert _relative(update, ref_update) < 0.02, _relative(update, ref_update)
  assert abs(out["grad_norm"] / ref["grad_norm"] - 1) < 0.01, (out["grad_norm"], ref["grad_norm"])
  assert abs(out["loss"] / ref["loss"] - 1) < 0.01


def test_overflow_nan_without_scaling_skipped_with_it(float16):
  """Loss x 2^20 (d loss / d logit ~ 2.6e5 > 65504): float16's backward pass overflows.
  Without loss scaling the weights become NaN in one step; with it (start 2^15) the steps are skipped, the scale halved each time, until
  the gradients fit; that first applied update is float32's first update (clipped gradients:
  the skipped steps moved neither the weights, the slots, nor the schedule)."""
  factor = 2.0 ** 20
  keras.config.set_dtype_policy("float32")
  ref, ref_update = _float32_update(factor)
  keras.config.set_dtype_policy("mixed_float16")
  float16.setattr(loss_scale, "wrap", lambda optimizer: optimizer)
  plain = Stepper(ScaledLossTask(factor))
  _, update = _update(plain, batch())
  assert not all(np.isfinite(u).all() for u in update.values())
  float16.undo()
  keras.config.set_dtype_policy("mixed_float16")
  scaled = Stepper(ScaledLossTask(factor))
  start = _snapshot(scaled)
  skipped = 0
  while True:
    out, update = _update(scaled, batch())
    if not out["skipped_steps"]:
      break
    skipped += 1
    assert _snapshot(scaled) == start
    assert skipped < 40
  assert skipped > 0
  opt = scaled.optimizer
  assert float(opt.dynamic_scale.numpy()) == 2.0 ** (15 - skipped)
  assert int(opt.skipped_steps.numpy()) == skipped and int(_inner(scaled).iterations) == 1
  assert all(np.isfinite(u).all() for u in update.values())
  assert _relative(update, ref_update) < 0.02, _relative(update, ref_update)
  assert abs(out["grad_norm"] / ref["grad_norm"] - 1) < 0.01, (out["grad_norm"], ref["grad_norm"])


def test_skip_is_bit_exact_then_the_scale_halves_and_later_doubles(float16):
  """Start at 2^30 (d loss / d logit 2.7e8 > 65504): the step is skipped with every weight and
  every optimizer variable unchanged bit for bit, the scale halves, the skip is counted; from
  2^10 with a growth interval of 2 the scale doubles after two finite steps."""
  float16.setattr(loss_scale, "INITIAL_SCALE", 2.0 ** 30)
  float16.setattr(loss_scale, "GROWTH_STEPS", 2)
  stepper = Stepper(ScaledLossTask())
  opt = stepper.optimizer
  before = _snapshot(stepper)
  out = stepper.step(batch())
  assert out["skipped_steps"] == 1.0 and out["grad_norm"] == 0.0 and np.isfinite(out["loss"])
  assert _snapshot(stepper) == before
  assert float(opt.dynamic_scale.numpy()) == 2.0 ** 29
  assert int(opt.skipped_steps.numpy()) == 1 and int(opt.step_counter.numpy()) == 0
  opt.dynamic_scale.assign(2.0 ** 10)
  out = stepper.step(batch())
  assert out["skipped_steps"] == 0.0 and _snapshot(stepper) != before
  assert float(opt.dynamic_scale.numpy()) == 2.0 ** 10 and int(opt.step_counter.numpy()) == 1
  stepper.step(batch())
  assert float(opt.dynamic_scale.numpy()) == 2.0 ** 11 and int(opt.step_counter.numpy()) == 0
  assert int(opt.skipped_steps.numpy()) == 1 and int(_inner(stepper).iterations) == 2


def test_gradient_accumulation_under_loss_scaling(float16):
  """--grad_accumulation_steps=2: a skipped micro-step leaves the accumulators (and all else)
  alone; the next two micro-steps make float32's accumulated update."""
  keras.config.set_dtype_policy("float32")
  ref = Stepper(ScaledLossTask(grad_accumulation_steps=2))
  start = ref.weights()
  for _ in range(2):
    ref.step(batch())
  ref_update = {k: v - start[k] for k, v in ref.weights().items()}
  keras.config.set_dtype_policy("mixed_float16")
  float16.setattr(loss_scale, "INITIAL_SCALE", 2.0 ** 30)
  stepper = Stepper(ScaledLossTask(grad_accumulation_steps=2))
  before = _snapshot(stepper)
  assert stepper.step(batch())["skipped_steps"] == 1.0 and _snapshot(stepper) == before
  stepper.optimizer.dynamic_scale.assign(2.0 ** 10)
  start = stepper.weights()
  stepper.step(batch())
  assert all((v == start[k]).all() for k, v in stepper.weights().items())   # accumulated only
  stepper.step(batch())
  update = {k: v - start[k] for k, v in stepper.weights().items()}
  assert _relative(update, ref_update) < 0.02, _relative(update, ref_update)


def test_loss_scale_state_through_a_checkpoint(float16, tmp_path):
  """A skip, two applied steps, a checkpoint; a new Stepper resumes with the same scale, growth
  counter and skip count, and its next steps give the bytes of the run that went on."""
  float16.setattr(loss_scale, "INITIAL_SCALE", 2.0 ** 30)
  float16.setattr(loss_scale, "GROWTH_STEPS", 3)
  first = Stepper(ScaledLossTask(), model_dir=str(tmp_path))
  first.step(batch())
  first.optimizer.dynamic_scale.assign(2.0 ** 12)
  for _ in range(2):
    first.step(batch())
  first.save()
  state = lambda s: (float(s.optimizer.dynamic_scale.numpy()),
                     int(s.optimizer.step_counter.numpy()),
                     int(s.optimizer.skipped_steps.numpy()))
  assert state(first) == (2.0 ** 12, 2, 1)
  resumed = Stepper(ScaledLossTask(), model_dir=str(tmp_path))
  assert resumed.resumed and state(resumed) == state(first)
  assert _snapshot(resumed) == _snapshot(first)
  for _ in range(2):                    # the first one doubles the scale (3rd finite step)
    assert first.step(batch()) == resumed.step(batch())
  assert state(resumed) == state(first) == (2.0 ** 13, 1, 1)
  assert _snapshot(resumed) == _snapshot(first)


def test_squad_head_log_probabilities_are_float32_under_float16(float16):
  """The SQuAD head (the one head with its own softmaxes) on float16 hidden states: float32
  log-probabilities (the -1e30 mask, not float16's -6e4), within float16's rounding of the
  float32 head with the same weights, in training and in the beam."""
  from modeling.squad_head import SquadHead
  rng = np.random.default_rng(0)
  hidden = rng.normal(size=[2, 12, 16]).astype(np.float32)
  p_mask = np.zeros([2, 12], np.float32)
  p_mask[1, :5] = 1                                          # uneven padding
  args = dict(p_mask=p_mask, cls_index=np.array([11, 11]))
  heads, outs = {}, {}
  for policy in ("float32", "mixed_float16"):
    keras.config.set_dtype_policy(policy)
    heads[policy] = SquadHead(start_n_top=2, end_n_top=2)
    dtype = "float16" if policy == "mixed_float16" else "float32"
    x = tf.constant(hidden, dtype)
    heads[policy](x, start_positions=np.array([3, 7]), **args)
    if policy == "mixed_float16":
      for ours, ref in zip(heads[policy].weights, heads["float32"].weights):
        ours.assign(ref)
    outs[policy] = (heads[policy](x, start_positions=np.array([3, 7]), **args),
                    heads[policy](x, **args))
  for ours, ref in zip(outs["mixed_float16"], outs["float32"]):
    for key in ("start_log_probs", "end_log_probs", "start_top_log_probs", "end_top_log_probs"):
      if key in ref:
        assert ours[key].dtype == tf.float32, key
        np.testing.assert_allclose(ours[key], ref[key], rtol=2e-2, atol=2e-2, err_msg=key)
  assert float(tf.reduce_min(outs["mixed_float16"][0]["start_log_probs"][1])) < -1e29


def test_resume_across_precisions(float16, tmp_path):
  """A float16 checkpoint resumes in float32 (the loss-scale state is left unread); a float32
  checkpoint under float16 is a one-line error (it has no loss-scale state to restore)."""
  Stepper(ScaledLossTask(), model_dir=str(tmp_path / "f16")).save()
  keras.config.set_dtype_policy("float32")
  assert Stepper(ScaledLossTask(), model_dir=str(tmp_path / "f16")).resumed
  Stepper(ScaledLossTask(), model_dir=str(tmp_path / "f32")).save()
  keras.config.set_dtype_policy("mixed_float16")
  with pytest.raises(ValueError, match="checkpoint does not fit the model"):
    Stepper(ScaledLossTask(), model_dir=str(tmp_path / "f32"))


def _events(directory):
  tags = {}
  for path in glob.glob(os.path.join(directory, "events.*")):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        tags.setdefault(value.tag, []).append(
            (event.step, float(tf.make_ndarray(value.tensor))))
  return tags


def test_log_line_and_tensorboard_count_the_skips(float16, tmp_path):
  """Trainer.train with the scale starting at 2^30: the first host loop's line says how many
  steps it skipped, the run's total and the current scale, the gradient norm is the mean over
  the applied steps; TensorBoard has the same scalars. A float32 run's line has none of them."""
  float16.setattr(loss_scale, "INITIAL_SCALE", 2.0 ** 30)
  lines = []
  trainer = trainer_lib.Trainer(ScaledLossTask(train_steps=40), tf.distribute.get_strategy(),
                                str(tmp_path / "f16"), 40, steps_per_loop=20, save_every=40,
                                log=lines.append)
  trainer.train()
  steps = [line for line in lines if line.startswith("step ")]
  assert len(steps) == 2, lines
  skipped = int(trainer.optimizer.skipped_steps.numpy())
  assert 0 < skipped < 20
  assert f"skipped_steps {skipped} skipped_total {skipped} " in steps[0], steps[0]
  assert "skipped_steps 0 skipped_total " in steps[1], steps[1]
  scale = 2 ** (30 - skipped)
  assert f"loss_scale {scale} " in steps[0] and "grad_norm inf" not in steps[0], steps[0]
  tags = _events(str(tmp_path / "f16" / "train"))
  assert tags["skipped_steps"] == [(20, skipped), (40, 0)]
  assert tags["skipped_total"] == [(20, skipped), (40, skipped)]
  assert tags["loss_scale"] == [(20, scale), (40, scale)]
  assert all(np.isfinite(v) and v > 0 for _, v in tags["grad_norm"])
  keras.config.set_dtype_policy("float32")
  lines.clear()
  # --xla=off: what this run checks is the log line and TensorBoard (the trainer's host-side
  # code), not the step; the float32 step under XLA is every other trainer test's
  trainer_lib.Trainer(ScaledLossTask(train_steps=2), tf.distribute.get_strategy(),
                      str(tmp_path / "f32"), 2, steps_per_loop=2, log=lines.append,
                      xla="off").train()
  (line,) = [line for line in lines if line.startswith("step ")]
  assert "skipped" not in line and "loss_scale" not in line
  assert "skipped_steps" not in _events(str(tmp_path / "f32" / "train"))


MIRRORED = r"""
from data_utils import cli_app; cli_app.skip_keras_optional_imports()   # as a script starts
import json, sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
keras.config.set_dtype_policy("mixed_float16")
from tests.training import test_float16 as t
from training import loss_scale
from training import trainer as trainer_lib
loss_scale.INITIAL_SCALE = 2.0 ** 10


class OneReplicaOverflows(t.ScaledLossTask):
  # replica 1's loss x 2^10: at scale 2^10 its float16 gradients overflow, replica 0's do not
  def loss(self, model, batch, state, step, training=True):
    loss, metrics, state = super().loss(model, batch, state, step, training)
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    return loss * tf.where(tf.equal(replica, 1), 2.0 ** 10, 1.0), metrics, state

  def dataset(self, input_context, skip_batches=0):
    return tf.data.Dataset.from_tensors(t.batch(4)).repeat().unbatch().batch(2)


strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
# --xla=off: with two replicas only the forward and backward pass (the trainer's `compute`) is
# compiled; the skip decided over the replicas (loss_scale.apply) runs outside XLA either way.
# The float16 step under XLA is the single-replica tests' above (the Stepper's xla="full").
trainer = trainer_lib.Trainer(OneReplicaOverflows(), strategy, None, 4, xla="off")
trainer._build()
step_fn = trainer._make_step()
iterator = iter(strategy.distribute_datasets_from_function(
    lambda ctx: trainer.task.dataset(ctx)))
run = tf.function(lambda state: step_fn(next(iterator), state, trainer.step))
state = strategy.run(trainer.task.initial_state)
weights = lambda: [v.numpy().tobytes() for v in trainer.model.trainable_variables]
start, out = weights(), []
for _ in range(int(sys.argv[1])):
  loss, metrics, state = run(state)
  out.append(dict(unchanged=weights() == start, finite=all(
      np.isfinite(v.numpy()).all() for v in trainer.model.trainable_variables),
      skipped=float(metrics["skipped_steps"]),
      scale=float(trainer.optimizer.dynamic_scale.numpy())))
print(json.dumps(out))
"""


def test_two_replicas_skip_together_when_one_overflows(tmp_path):
  """MirroredStrategy over two logical CPUs, replica 1's gradients overflow, replica 0's do not:
  both skip (Keras alone would take replica 0's verdict and all-reduce an inf into every
  weight); once the scale is low enough, both apply the same finite update."""
  result = warm.run([sys.executable, "-c", MIRRORED, "4"], cwd=ROOT, capture_output=True,
                          text=True, timeout=HANG_GUARD,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
  assert result.returncode == 0, result.stderr[-3000:]
  steps = json.loads(result.stdout.strip().splitlines()[-1])
  assert steps[0] == dict(unchanged=True, finite=True, skipped=1.0, scale=2.0 ** 9), steps
  assert all(s["finite"] for s in steps), steps
  applied = [i for i, s in enumerate(steps) if not s["skipped"]]
  assert applied and all(s["unchanged"] and s["skipped"] for s in steps[:applied[0]]), steps
  assert not steps[applied[0]]["unchanged"]


def test_the_two_precision_flags_exclude_each_other():
  flags = SimpleNamespace(xla="full", deterministic=False, model_dir="m", output_dir=None,
                          use_bfloat16=True, use_float16=True)
  with pytest.raises(SystemExit) as exit_:
    entry.prologue("run_classifier.py", flags, required=["model_dir"])
  assert str(exit_.value) == ("run_classifier.py: --use_float16 and --use_bfloat16 exclude each "
                              "other: pass one")


@pytest.mark.parametrize("flags, expected", [
    (dict(tpu=None, distribution_strategy="default"), "without a GPU: CPUs have no fast float16"),
    (dict(tpu="my-tpu", distribution_strategy="default"), "on a TPU: TPUs compute in bfloat16"),
])
def test_use_float16_sets_the_policy_and_warns_where_float16_does_not_pay(flags, expected,
                                                                          capsys):
  try:
    loss_scale.use_float16(SimpleNamespace(**flags))       # no GPU in the tests
    assert keras.config.dtype_policy().name == "mixed_float16" and loss_scale.active()
  finally:
    keras.config.set_dtype_policy("float32")
  out = capsys.readouterr().out
  assert out.count("\n") == 1 and out.startswith("warning: --use_float16") and expected in out


class _Reached(Exception):
  """Raised where the trainer would start training (the set-up is complete)."""


@pytest.fixture(scope="module")
def script_inputs(tmp_path_factory, text_and_sp):
  """A model config (800 pieces: the SentencePiece model's), pretraining records, SQuAD files."""
  from reproduction import tasks
  from tests import pretrain_helpers as ph
  text, sp = text_and_sp
  out = tmp_path_factory.mktemp("float16_scripts")
  config = out / "xlnet_config.json"
  config.write_text(json.dumps(dict(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                                    n_token=800)))
  docs = tasks.split_documents(tasks.load_documents(), seed=0)
  tasks.write_squad(docs, str(out / "squad"), seed=0, n_train=4, n_eval=2, max_chars=200)
  return dict(config=str(config), sp=sp, out=out,
              records=ph.make_records(text, sp, out / "records"))


@pytest.mark.parametrize("precision", ["use_float16", "use_bfloat16"])
@pytest.mark.parametrize("script", ["run_pretrain.py", "run_classifier.py", "run_squad.py"])
def test_the_flags_reach_the_policy_and_the_optimizer(script, precision, script_inputs, tmp_path,
                                                      monkeypatch):
  """Each script's main() in this process up to where training starts: --use_float16 gives the
  mixed_float16 policy (the model computes in float16) and the loss-scaling optimizer around
  the task's Adam; --use_bfloat16 the mixed_bfloat16 policy and the Adam alone."""
  from tests.script_helpers import run_main
  seen = {}

  def train(self):
    self._build()
    seen.update(policy=keras.config.dtype_policy().name, optimizer=self.optimizer,
                compute=self.model.dtype_policy.compute_dtype)
    raise _Reached

  monkeypatch.setattr(trainer_lib.Trainer, "train", train)
  from finetuning.classifier_task import ClassifierTask   # no GLUE files: nothing to read ahead
  monkeypatch.setattr(ClassifierTask, "prepare_training_data", lambda self: None)
  s = script_inputs
  common = dict(model_config_path=s["config"], model_dir=str(tmp_path / "m"), train_steps=2,
                **{precision: True})
  args = {"run_pretrain.py": dict(record_dir=s["records"]),
          "run_classifier.py": dict(task_name="sst-2", data_dir=str(tmp_path / "glue"),
                                    do_train=True),
          "run_squad.py": dict(train_file=str(s["out"] / "squad" / "train-v2.0.json"),
                               sp_model=s["sp"], do_train=True)}[script]
  try:
    with pytest.raises(_Reached):
      run_main(script, **common, **args)
  finally:
    keras.config.set_dtype_policy("float32")
  if precision == "use_float16":
    assert seen["policy"] == "mixed_float16" and seen["compute"] == "float16"
    assert isinstance(seen["optimizer"], loss_scale.LossScaleOptimizer)
    assert type(seen["optimizer"].inner_optimizer).__name__ == "Adam"
  else:
    assert seen["policy"] == "mixed_bfloat16" and seen["compute"] == "bfloat16"
    assert type(seen["optimizer"]).__name__ == "Adam"
