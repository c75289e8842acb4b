"""Held-out evaluation while pretraining (pretraining/evaluation.py; run_pretrain.py
--eval_record_dir): the trainer evaluates at every checkpoint, logs the results, writes them to
TensorBoard (MODEL_DIR/eval) and eval/last.json, and keeps best/.

Reference for plm and mlm: Hugging Face's PyTorch XLNetLMHeadModel given the trained model's
release-named weights and the same held-out batches, its memory (use_mems, mem_len, reuse_len)
carried from batch to batch starting from zeros (as a training run starts), dropout off; its loss is the mean cross-entropy over
real targets (labels -100 at padding targets), its accuracy counted from its logits in numpy,
both averaged over the batches. plm: the two-stream prediction on the stored perm_mask and
target_mapping; mlm: the content stream (no perm_mask) on the corrupted ids, read at the target
positions. mpnet (no Hugging Face counterpart of its two-stream model): the training loss
function itself (PretrainTask.loss, eagerly, one batch at a time) on the same batches.
"""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf

from data_utils import pipeline, record_format, writer
from pretraining.task import PretrainTask
from tests import pretrain_helpers as ph

EVAL_BATCHES = 3


def _write(text, sp, out, split="valid", seed=1, **overrides):
  params = dict(seq_len=ph.SEQ, reuse_len=ph.REUSE, perm_size=ph.REUSE, num_predict=ph.NP,
                bsz_per_host=ph.BSZ, num_core_per_host=1, bi_data=False, uncased=True)
  params.update(overrides)
  writer.create(text, sp, str(out), record_format.RecordParams(**params), split=split,
                seed=seed, shard_bytes=10**9, progress=lambda m: None)
  return str(out)


@pytest.fixture(scope="module")
def recs(tmp_path_factory, text_and_sp):
  text, sp = text_and_sp
  base = tmp_path_factory.mktemp("heldout")
  from data_utils.tokenization import Tokenizer
  return {"vocab": Tokenizer(sp, lower=True).vocab_size, "text": text, "sp": sp,
          "train": ph.make_records(text, sp, base / "train"),
          "valid": _write(text, sp, base / "valid")}


def _task(recs, objective="plm", **eval_config):
  base = ph.tiny_task(recs["train"], recs["vocab"], objective=objective, train_steps=4, lr=1e-2)
  config = dataclasses.replace(base.config, **dict(
      dict(eval_record_dir=recs["valid"], eval_batches=EVAL_BATCHES), **eval_config))
  return PretrainTask(config, base.model_config, base.run_config)


def _eval_batches(recs):
  ds, _, _ = pipeline.pretrain_dataset(recs["valid"], ph.SEQ, ph.REUSE, ph.NP, ph.BSZ, False,
                                       split="valid", repeat=False)
  return [{k: v.numpy() for k, v in b.items()} for b in ds.take(EVAL_BATCHES)]


def _scalars(directory):
  out = {}
  for events in tf.io.gfile.glob(str(directory / "events.out.tfevents.*")):
    for event in tf.compat.v1.train.summary_iterator(events):
      for value in event.summary.value:
        out.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
  return {tag: sorted(values) for tag, values in out.items()}   # one events file per writer


def _hf_reference(model, batches, objective, task, memory=True):
  """{"lm_loss", "lm_accuracy"}: Hugging Face XLNet on the batches (see the module docstring)."""
  torch = pytest.importorskip("torch")
  pytest.importorskip("transformers")
  import transformers
  from tests import reference as ref
  c = model.config
  weights = {name: var.numpy() for name, var in model.tf1_variables().items()}
  config = ref.hf_config(c.n_layer, c.d_model, c.n_head, c.d_inner, c.n_token, untie_r=c.untie_r,
                         mem_len=ph.REUSE * 2, reuse_len=ph.REUSE, bi_data=False,
                         attn_type="bi", clamp_len=-1, same_length=False)
  hf = ref.hf_model(transformers.XLNetLMHeadModel, config,
                    ref.hf_state_dict(weights, c.n_layer, c.untie_r, "lm")).float().eval()
  tt = lambda a: torch.tensor(np.asarray(a))
  mems = ([torch.zeros(ph.REUSE * 2, ph.BSZ, c.d_model) for _ in range(c.n_layer)]
          if memory else None)                # zeros first, as a training run starts
  losses, accuracies = [], []
  for i, b in enumerate(batches):
    mask = b["target_mask"] > 0
    kwargs = dict(token_type_ids=tt(b["seg_ids"]).long(), input_mask=tt(b["input_mask"]),
                  mems=mems, use_mems=memory)
    with torch.no_grad():
      if objective == "plm":
        out = hf(input_ids=tt(b["input_ids"]).long(), perm_mask=tt(b["perm_mask"]),
                 target_mapping=tt(b["target_mapping"]), **kwargs)
        logits = out.logits.numpy()                                   # [B, P, V]
      else:   # mlm: the corrupted ids, the content stream read at the targets
        ids, _ = task.objective.corrupt(task, {k: tf.constant(v) for k, v in b.items()},
                                        tf.constant(i, tf.int64))
        out = hf(input_ids=tt(ids.numpy()).long(), **kwargs)
        positions = b["target_mapping"].argmax(-1)                     # [B, P]
        logits = np.take_along_axis(out.logits.numpy(), positions[..., None], 1)
    mems = out.mems if memory else None
    logits = logits.astype(np.float64)
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, b["target"][..., None].astype(np.int64), -1)[..., 0]
    losses.append(nll[mask].mean())
    accuracies.append((logits.argmax(-1) == b["target"])[mask].mean())
  return {"lm_loss": float(np.mean(losses)), "lm_accuracy": float(np.mean(accuracies))}


@pytest.mark.slow
def test_heldout_loss_at_every_checkpoint_logged_written_and_equal_to_hugging_faces(tmp_path,
                                                                                   recs):
  task = _task(recs, "plm")
  lines = []
  trainer, _ = ph.train(task, tmp_path, steps_per_loop=2, save_every=2, log=lines.append)
  evals = [l for l in lines if l.startswith("eval at step ")]
  assert [l.split(":")[0] for l in evals] == ["eval at step 2", "eval at step 4"], lines
  last = json.loads((tmp_path / "eval" / "last.json").read_text())
  assert last["step"] == 4 and sorted(last) == ["lm_accuracy", "lm_loss", "loss", "step"]
  assert evals[-1] == (f"eval at step 4: lm_accuracy {last['lm_accuracy']:.4f} lm_loss "
                       f"{last['lm_loss']:.4f} loss {last['loss']:.4f}")
  scalars = _scalars(tmp_path / "eval")
  assert [s for s, _ in scalars["lm_loss"]] == [2, 4]
  assert scalars["lm_loss"][-1][1] == pytest.approx(last["lm_loss"], rel=1e-6)
  assert last["loss"] == last["lm_loss"]                       # no extra loss (nsp off)
  best = json.loads((tmp_path / "best" / "best.json").read_text())
  losses = [v for _, v in scalars["lm_loss"]]
  assert losses[0] != pytest.approx(losses[1], rel=1e-6)       # a choice to make
  assert best["lm_loss"] == pytest.approx(min(losses), rel=1e-6)   # the lowest (TensorBoard:
  assert best["step"] == 2 + 2 * losses.index(min(losses))        # float32)
  want = _hf_reference(trainer.model, _eval_batches(recs), "plm", task)
  np.testing.assert_allclose(last["lm_loss"], want["lm_loss"], rtol=2e-5)
  assert last["lm_accuracy"] == pytest.approx(want["lm_accuracy"], abs=1e-6)


@pytest.mark.parametrize("objective", ["plm", "mlm"])
def test_heldout_loss_carries_memory_as_hugging_face_does(recs, objective):
  """Weights drawn with std 0.5 (at the trainer's few steps from init the memory moves the loss
  by only ~4e-6): here the memory carried between held-out batches moves the reference by far
  more than the tolerance, so a fresh memory per batch (or none) would fail."""
  task = _task(recs, objective)
  model = task.build_model()
  model.ensure_built()
  rng = np.random.default_rng(0)
  for v in model.weights:
    v.assign(rng.normal(0.0, 0.5, v.shape).astype(np.float32))
  got = task.evaluate(model)
  batches = _eval_batches(recs)
  want = _hf_reference(model, batches, objective, task)
  np.testing.assert_allclose(got["lm_loss"], want["lm_loss"], rtol=2e-5)
  assert got["lm_accuracy"] == pytest.approx(want["lm_accuracy"], abs=1e-6)
  without = _hf_reference(model, batches, objective, task, memory=False)
  assert abs(without["lm_loss"] - want["lm_loss"]) > 10 * 2e-5 * want["lm_loss"], (without, want)
  assert task.evaluate(model) == got                        # deterministic: the same again


@pytest.mark.slow
def test_mpnet_heldout_loss_is_the_training_loss_on_the_heldout_batches(recs):
  import keras
  from modeling.mpnet import encoder as mpnet
  base = _task(recs)
  config = mpnet.MPNetConfig(vocab_size=recs["vocab"], hidden_size=16, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=32,
                             max_position_embeddings=ph.SEQ + 6, pad_token_id=5)
  task = PretrainTask(dataclasses.replace(base.config, objective="mpnet"), config,
                      base.run_config)
  keras.utils.set_random_seed(0)
  model = task.build_model()
  model.ensure_built()
  got = task.evaluate(model)
  losses, accuracies = [], []
  for i, b in enumerate(_eval_batches(recs)):
    batch = {k: tf.constant(v) for k, v in b.items()}
    _, metrics, _ = task.loss(model, batch, task.initial_state(), tf.constant(i, tf.int64),
                              training=False)
    losses.append(float(metrics["lm_loss"]))
    logits, target, _, _, _ = task.predict(model, batch, task.initial_state(),
                                           tf.constant(i, tf.int64), training=False)
    accuracies.append(float((logits.numpy().argmax(-1) == target.numpy()).mean()))
  np.testing.assert_allclose(got["lm_loss"], np.mean(losses), rtol=1e-6)
  assert got["lm_accuracy"] == pytest.approx(np.mean(accuracies), abs=1e-6)
  assert task.evaluate(model) == got                        # the same draws every time


def test_heldout_records_must_match_the_training_records(tmp_path, recs):
  text, sp = recs["text"], recs["sp"]
  other = _write(text, sp, tmp_path / "short", seq_len=24, reuse_len=8, perm_size=8)
  with pytest.raises(ValueError) as e:
    _task(recs, eval_record_dir=other)
  message = str(e.value)
  assert message.startswith(f"--eval_record_dir={other} (split valid): {other}: 1 record "
                            "files, none matching: ") and "seq_len=24 (asked 32)" in message
  assert "\n" not in message
  single = _write(text, sp, tmp_path / "single", span_mode="single")
  with pytest.raises(ValueError, match=r"^--eval_record_dir=.*single \(split valid\): the "
                                       r"held-out records have span_mode='single', the training "
                                       r"records span_mode='word': write them with the same "
                                       r"create_pretrain_data.py settings$"):
    _task(recs, eval_record_dir=single)
  with pytest.raises(FileNotFoundError, match=r"^--eval_record_dir=.* \(split test\): "):
    _task(recs, eval_split="test")
