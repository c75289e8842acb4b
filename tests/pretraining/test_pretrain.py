"""run_pretrain.py and the shared trainer."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_utils import pipeline
from tests import warm
from tests import pretrain_helpers as ph
from tests.hang_guard import HANG_GUARD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def recs(tmp_path_factory, text_and_sp):
  text, sp = text_and_sp
  base = tmp_path_factory.mktemp("pt")
  from data_utils.tokenization import Tokenizer
  vocab = Tokenizer(sp, lower=True).vocab_size
  return {"vocab": vocab, "text": text, "sp": sp,
          "uni1": ph.make_records(text, sp, base / "uni1"),
          "uni2": ph.make_records(text, sp, base / "uni2", cores=2),
          "bi1": ph.make_records(text, sp, base / "bi1", bi_data=True)}


def test_resume_continues_the_same_loss_sequence(tmp_path, recs):
  task = lambda: ph.tiny_task(recs["bi1"], recs["vocab"], bi_data=True, dropout=0.1)
  _, full = ph.train(task(), tmp_path / "full", steps_per_loop=5, save_every=10)

  class Stop(Exception):
    pass

  def stop_after_first_save(message):
    if "saved" in message and "ckpt-10" in message:
      raise Stop()

  with pytest.raises(Stop):
    ph.train(task(), tmp_path / "cut", log=stop_after_first_save)
  _, rest = ph.train(task(), tmp_path / "cut")
  assert len(full) == 4 and len(rest) == 2
  np.testing.assert_allclose(rest, full[2:], rtol=1e-6)


def test_resume_without_checkpointed_memory_starts_from_empty_memory(tmp_path, recs):
  """--nocheckpoint_memory (large pods): checkpoints hold no memory, and a resumed run's first
  step sees empty memory, so its loss differs from the uninterrupted run's (which the
  resume test above shows equal when the memory is kept)."""
  task = lambda: ph.tiny_task(recs["uni1"], recs["vocab"], lr=0.0, train_steps=4)
  _, full = ph.train(task(), tmp_path / "full", steps_per_loop=2, save_every=2, xla="off")
  first = ph.tiny_task(recs["uni1"], recs["vocab"], lr=0.0, train_steps=2)
  trainer, _ = ph.train(first, tmp_path / "cut", steps_per_loop=2, save_every=2, xla="off",
                        checkpoint_state=False)
  names = [n for n, _ in tf.train.list_variables(str(tmp_path / "cut" / "ckpt"))]
  state = [n for n in names if n.startswith("state/")]
  assert state and tf.train.load_checkpoint(str(tmp_path / "cut" / "ckpt")).get_tensor(
      state[0]).size == 0
  _, rest = ph.train(task(), tmp_path / "cut", steps_per_loop=2, save_every=2, xla="off",
                     checkpoint_state=False)
  # lr 0: the weights never change, so only the missing memory can move the loss of steps 3-4
  # (one host loop; by ~1e-5 relative at these random weights)
  assert len(rest) == 1 and not np.isclose(rest[0], full[1], rtol=1e-6, atol=0), (rest, full)


def test_memory_is_carried_per_lane_across_host_loops(tmp_path, recs):
  task = ph.tiny_task(recs["uni1"], recs["vocab"], lr=0.0, train_steps=3)
  trainer, _ = ph.train(task, tmp_path, steps_per_loop=1, save_every=3)
  ds, params, _ = pipeline.pretrain_dataset(recs["uni1"], ph.SEQ, ph.REUSE, ph.NP, ph.BSZ, False)
  batches = [b["input_ids"].numpy() for _, b in zip(range(3), ds)]
  emb = trainer.model.encoder.word_embedding.numpy()
  memory = trainer.state_store.numpy()[0]            # [layer, lane, mem_len, D], one replica
  # layer-0 memory after step 3 = embeddings of the reuse parts of steps 2 and 3, lane by lane
  expected = np.concatenate([emb[batches[1][:, :ph.REUSE]], emb[batches[2][:, :ph.REUSE]]], 1)
  np.testing.assert_allclose(memory[0], expected, rtol=1e-6)
  assert not np.allclose(memory[0][0], memory[0][1])


def test_keeps_the_last_k_checkpoints_and_writes_tensorboard_scalars(tmp_path, recs):
  task = ph.tiny_task(recs["uni1"], recs["vocab"], train_steps=4)
  ph.train(task, tmp_path, steps_per_loop=1, save_every=1, keep_checkpoints=2)
  kept = tf.train.get_checkpoint_state(str(tmp_path / "ckpt")).all_model_checkpoint_paths
  assert [os.path.basename(p) for p in kept] == ["ckpt-3", "ckpt-4"]
  assert sorted(f for f in os.listdir(tmp_path / "ckpt") if f.endswith(".index")) == [
      "ckpt-3.index", "ckpt-4.index"]
  scalars = {}
  for events in tf.io.gfile.glob(str(tmp_path / "train" / "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(events):
      for value in event.summary.value:
        scalars.setdefault(value.tag, []).append(
            (event.step, float(tf.make_ndarray(value.tensor))))
  for tag in ("loss", "learning_rate", "grad_norm"):
    assert [step for step, _ in scalars[tag]] == [1, 2, 3, 4], tag
  # throughput is measured after the first host loop (its compile: training/progress.py)
  assert [step for step, _ in scalars["tokens_per_second"]] == [2, 3, 4]
  # the learning rate each logged step trained with: the release's warmup from 0 (2 steps to
  # 3e-3), then linear decay to 3e-3 x min_lr_ratio (train.py's 0.001) at step 4
  np.testing.assert_allclose([v for _, v in scalars["learning_rate"]],
                             [0, 1.5e-3, 3e-3, 1.5e-3 + 0.5 * 3e-6], rtol=1e-6)
  assert all(v > 0 for _, v in scalars["grad_norm"])


def test_loss_falls_on_real_text(tmp_path, recs):
  task = ph.tiny_task(recs["bi1"], recs["vocab"], bi_data=True, train_steps=300, lr=3e-3)
  _, history = ph.train(task, tmp_path, steps_per_loop=20, save_every=300)
  # from ln(V) = 6.7 at initialisation to about the unigram entropy (5.4) of the targets
  assert history[-5:].mean() < np.log(recs["vocab"]) - 0.9, history
  assert history[-5:].mean() < history[0] - 0.3, history


@pytest.mark.parametrize("objective,nsp,mem_len", [("mlm", 0.0, 32), ("plm", 1.0, 0)])
def test_mlm_nsp_and_no_memory_train(tmp_path, recs, objective, nsp, mem_len):
  task = ph.tiny_task(recs["bi1"], recs["vocab"], bi_data=True, objective=objective,
                      train_steps=60, lr=1e-2, nsp_weight=nsp, mem_len=mem_len)
  trainer, history = ph.train(task, tmp_path, steps_per_loop=10, save_every=60)
  assert history[-1] < history[0] - 0.5
  names = trainer.model.tf1_variables()
  assert ("model/nsp/logit/kernel" in names) == (nsp > 0)
  assert os.path.exists(tmp_path / "export" / "xlnet_model.ckpt.index")
  # our pretraining output initialises a fine-tuning model (--init_checkpoint)
  from modeling import loading
  from modeling.xlnet.models import XLNetClassifier
  clf = XLNetClassifier(trainer.model.config, trainer.model.run_config, n_class=2)
  summary = loading.load_checkpoint(clf, str(tmp_path / "export" / "xlnet_model.ckpt"))
  assert "model/classification_task/logit/kernel" in summary and "initialised fresh" in summary
  np.testing.assert_array_equal(clf.encoder.word_embedding.numpy(),
                                trainer.model.encoder.word_embedding.numpy())


@pytest.mark.parametrize("mode,permute", [("mpnet", True), ("mlm", False)])
def test_mpnet_objective_trains_from_the_same_records(tmp_path, recs, mode, permute):
  import dataclasses
  from modeling.mpnet import encoder as mpnet
  task = ph.tiny_task(recs["bi1"], recs["vocab"], bi_data=True, objective="plm", train_steps=60,
                      lr=1e-2)
  config = mpnet.MPNetConfig(vocab_size=recs["vocab"], hidden_size=16, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=32,
                             max_position_embeddings=ph.SEQ + 6, pad_token_id=5)
  from pretraining.task import PretrainTask
  task = PretrainTask(dataclasses.replace(task.config, objective="mpnet", mpnet_mode=mode,
                                          mpnet_permute=permute), config, task.run_config)
  trainer, history = ph.train(task, tmp_path, steps_per_loop=10, save_every=60)
  assert np.mean(history[len(history) // 2:]) < history[0] - 0.5, history   # not one noisy loop
  # the export (Hugging Face layout) initialises a fine-tuning model's encoder
  from modeling import loading
  from modeling.mpnet import models as mpnet_models
  assert os.path.exists(tmp_path / "export" / "model.safetensors")
  classifier = mpnet_models.MPNetClassifier(config)
  loading.initialize_mpnet(classifier, str(tmp_path / "export"), log=lambda m: None)
  for ours, trained in zip(classifier.encoder.weights, trainer.model.encoder.weights):
    np.testing.assert_array_equal(ours.numpy(), trained.numpy())


MIRRORED = r"""
from data_utils import cli_app; cli_app.skip_keras_optional_imports()   # as a script starts
import sys, json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tests import pretrain_helpers as ph      # run from the repository root (cwd)
vocab, one, two, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
_, a = ph.train(ph.tiny_task(one, vocab, train_steps=10), out + "/one", steps_per_loop=5)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
_, b = ph.train(ph.tiny_task(two, vocab, cores=2, train_steps=10), out + "/two", strategy,
                steps_per_loop=5)
print(json.dumps({"one": a.tolist(), "two": b.tolist()}))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory, recs):
  """The subprocesses of the two tests below, concurrently (each is mostly single-threaded
  compile): MIRRORED (a 10-step run on one device under --xla=full, then its two-device twin)
  and FUSIBLE under --xla=fusible and off. MIRRORED's one-device run is the very run FUSIBLE
  makes under --xla=full (same task, records, steps, host loops; the trainer's default
  xla="full", configured by compile_step as configure_xla does), so the XLA-modes test reads
  its full-XLA losses from it instead of starting a fourth process for them.
  {name: (returncode, stdout, stderr)}."""
  base = tmp_path_factory.mktemp("xla_mirrored")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
  commands = {"mirrored": [sys.executable, "-c", MIRRORED, str(recs["vocab"]), recs["uni1"],
                           recs["uni2"], str(base / "mirrored")]}
  for mode in ("fusible", "off"):
    commands[mode] = [sys.executable, "-c", FUSIBLE, str(recs["vocab"]), recs["uni1"], mode,
                      str(base / mode)]
  procs = {name: warm.popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env)
           for name, command in commands.items()}
  try:
    outputs = {name: proc.communicate(timeout=HANG_GUARD) for name, proc in procs.items()}
  finally:                                  # a timeout leaves no child running
    for proc in procs.values():
      proc.kill()
  return {name: (procs[name].returncode, *outputs[name]) for name in procs}


def _losses(run, what):
  returncode, stdout, stderr = run
  assert returncode == 0, f"{what}: " + stderr[-3000:]
  return json.loads(stdout.strip().splitlines()[-1])


def test_mirrored_two_devices_equals_one_device(runs):
  losses = _losses(runs["mirrored"], "mirrored")
  np.testing.assert_allclose(losses["two"], losses["one"], rtol=2e-5)


FUSIBLE = r"""
from data_utils import cli_app; cli_app.skip_keras_optional_imports()   # as a script starts
import sys, json
from training import trainer                  # run from the repository root (cwd)
trainer.configure_xla(sys.argv[3])            # before the first op, as the scripts do
from tests import pretrain_helpers as ph
vocab, recs, out, mode = int(sys.argv[1]), sys.argv[2], sys.argv[4], sys.argv[3]
_, losses = ph.train(ph.tiny_task(recs, vocab, train_steps=10), out, steps_per_loop=5, xla=mode)
print(json.dumps(losses.tolist()))
"""


def test_xla_modes_give_the_same_losses(runs):
  """--xla=fusible (TF matmuls + XLA element-wise clusters) and off compute what full does
  (full: the one-device run of the mirrored test's script, the `runs` fixture)."""
  losses = {"full": _losses(runs["mirrored"], "--xla=full")["one"]}
  for mode in ("fusible", "off"):
    losses[mode] = _losses(runs[mode], f"--xla={mode}")
  np.testing.assert_allclose(losses["fusible"], losses["full"], rtol=1e-4)
  np.testing.assert_allclose(losses["off"], losses["full"], rtol=1e-4)


def test_cli_errors_are_one_line(tmp_path, recs):
  cfg = tmp_path / "c.json"
  cfg.write_text('{"n_layer": 1, "d_model": 16, "n_head": 2, "d_head": 8, "d_inner": 16, '
                 f'"n_token": {recs["vocab"]}}}')
  base = [sys.executable, "run_pretrain.py", f"--record_dir={recs['bi1']}",
          f"--model_config_path={cfg}", f"--model_dir={tmp_path}/m", "--bsz_per_host=4",
          "--num_predict=5", "--reuse_len=16", "--bi_data"]
  r = warm.run(base + ["--seq_len=64"], cwd=ROOT, capture_output=True, text=True,
                     timeout=HANG_GUARD)
  assert r.returncode == 1
  assert "seq_len=32 (asked 64)" in r.stderr.strip().splitlines()[-1]
  r = warm.run(base + ["--seq_len=32", "--train_steps=4", "--steps_per_loop=2",
                             "--mem_len=16", "--save_every=4"], cwd=ROOT, capture_output=True,
                     text=True, timeout=HANG_GUARD)
  assert r.returncode == 0, r.stderr[-2000:]
  assert "tokens/s ETA" in r.stdout and "exported" in r.stdout


@pytest.mark.parametrize("flags, expected", [
    (dict(xla="full"), "runs no faster than float32"),
    (dict(xla="fusible"), "--xla=fusible, several times slower"),
    (dict(xla="off", tpu="my-tpu"), None),
    (dict(xla="full", distribution_strategy="tpu"), None),
])
def test_use_bfloat16_warns_only_where_bf16_does_not_pay(monkeypatch, capsys, flags, expected):
  import keras
  from types import SimpleNamespace
  from modeling import ops
  from training import trainer
  monkeypatch.setattr(ops, "onednn_enabled", lambda: False)   # e.g. an AMD EPYC, no GPU here
  values = SimpleNamespace(**dict(dict(tpu=None, distribution_strategy="default"), **flags))
  try:
    trainer.use_bfloat16(values)
    assert keras.config.dtype_policy().name == "mixed_bfloat16"
  finally:
    keras.config.set_dtype_policy("float32")
  out = capsys.readouterr().out
  if expected is None:
    assert out == ""
  else:
    assert out.count("\n") == 1 and expected in out and out.startswith("warning: --use_bfloat16")
