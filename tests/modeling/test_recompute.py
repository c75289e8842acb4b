"""--recompute (modeling/recompute.py): each layer recomputed in the backward pass gives the
loss, the gradient of every trainable variable and the dropout generators' states of a run
without it (tiny models, dropout on, training=True, uneven padding; eagerly and under XLA), and
it does recompute (the layers' forward runs again in the backward pass)."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import dropout as dropout_lib
from modeling import losses
from modeling import ops
from modeling import recompute as recompute_lib
from modeling.mpnet import encoder as mpnet
from modeling.mpnet import models as mpnet_models
from modeling.mpnet import pretrain as mpnet_pretrain
from modeling.run_config import RunConfig
from modeling.xlnet import block as block_lib
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.models import XLNetClassifier, XLNetPretrainModel
from tests import reference as ref

XLNET = XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=50)
MPNET = mpnet.MPNetConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=40,
                          hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
RUN = RunConfig(dropout=0.3, dropatt=0.3, mem_len=3)
BATCH, SEQ, NP, MEM = 2, 8, 3, 3
PAD = np.array([[0] * SEQ, [1, 1, 1] + [0] * (SEQ - 3)], np.float32)   # row 1 left padded by 3


def _xlnet_pretrain(untie_r=True):
  keras.utils.set_random_seed(1)
  model = XLNetPretrainModel(dataclasses.replace(XLNET, untie_r=untie_r), RUN).ensure_built()
  rng = np.random.default_rng(0)
  perm_mask, mapping = ref.random_permutation_masks(rng, BATCH, SEQ, NP)
  ids = rng.integers(9, 50, [BATCH, SEQ]).astype(np.int32)
  seg = np.zeros([BATCH, SEQ], np.int32)
  seg[:, 5:] = 1
  batch = {"input_ids": ids, "seg_ids": seg, "perm_mask": perm_mask, "target_mapping": mapping,
           "input_mask": PAD}
  batch = {k: tf.constant(v) for k, v in batch.items()}
  target = tf.constant(np.einsum("bpl,bl->bp", mapping, ids).astype(np.int32))
  mems = tf.constant(rng.normal(size=[XLNET.n_layer, BATCH, MEM, XLNET.d_model]), tf.float32)

  def loss(model):
    out = model(batch, mems=mems, training=True)
    # the content stream's last layer too (the query stream's loss does not read it)
    return (losses.lm_loss(out["logits"], target, tf.reduce_sum(mapping, -1))
            + tf.reduce_mean(tf.square(tf.cast(out["content_output"], tf.float32))))
  return model, loss


def _xlnet_classifier():
  keras.utils.set_random_seed(2)
  model = XLNetClassifier(XLNET, RUN, n_class=3).ensure_built()
  rng = np.random.default_rng(1)
  batch = {"input_ids": tf.constant(rng.integers(9, 50, [BATCH, SEQ]), tf.int32),
           "seg_ids": tf.constant([[0] * 4 + [1] * 4] * BATCH, tf.int32),
           "input_mask": tf.constant(PAD)}
  labels = tf.constant([0, 2])

  def loss(model):
    logits = model(batch, training=True)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
  return model, loss


def _mpnet_pretrain():
  keras.utils.set_random_seed(3)
  model = mpnet_pretrain.MPNetPretrainModel(MPNET, mode="mpnet").ensure_built()
  rng = np.random.default_rng(2)
  ids = rng.integers(9, 50, [BATCH, SEQ]).astype(np.int32)
  masked = np.zeros([BATCH, SEQ], bool)
  masked[0, [1, 4, 6]] = masked[1, [2, 3, 5]] = True
  rank = np.stack([rng.permutation(SEQ) for _ in range(BATCH)]).astype(np.int32)
  inputs = mpnet_pretrain.build_inputs(tf.constant(ids), tf.constant(masked), tf.constant(rank),
                                       NP, tf.constant([4, 5]), vocab_size=50)
  pad = np.zeros([BATCH, SEQ], bool)
  pad[1, -2:] = True     # row 1's last two tokens are padding keys (no target among them)
  key_pad = tf.gather(tf.constant(pad), inputs["content_pos"], batch_dims=1)[:, None, :]
  inputs["content_mask"] = tf.logical_or(inputs["content_mask"], key_pad)
  inputs["query_mask"] = tf.logical_or(inputs["query_mask"], key_pad)

  def loss(model):
    logits = model(inputs, training=True)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(inputs["targets"],
                                                                         logits))
  return model, loss


def _mpnet_classifier():
  keras.utils.set_random_seed(4)
  model = mpnet_models.MPNetClassifier(MPNET, n_class=3).ensure_built()
  rng = np.random.default_rng(3)
  ids = rng.integers(9, 50, [BATCH, SEQ])
  ids[1, -3:] = MPNET.pad_token_id                # right padded, as MPNet's rows
  batch = {"input_ids": tf.constant(ids, tf.int32),
           "input_mask": tf.constant(PAD[:, ::-1].copy())}
  labels = tf.constant([1, 2])

  def loss(model):
    logits = model(batch, training=True)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
  return model, loss


MODELS = {"xlnet_pretrain": _xlnet_pretrain, "xlnet_classifier": _xlnet_classifier,
          "mpnet_pretrain": _mpnet_pretrain, "mpnet_classifier": _mpnet_classifier}


def set_recompute(model, on):
  """Switches recomputation of an already built model (both families read it at call time)."""
  if model.family == "xlnet":
    model.encoder.run_config = dataclasses.replace(model.encoder.run_config, recompute=on)
  else:
    model.encoder.recompute = on


def rng_states(model):
  """The dropout generators' states (the variables that are not weights), as the trainer."""
  weights = {id(v) for v in model.weights}
  return [v for v in model.variables if id(v) not in weights]


def loss_and_grads(model, loss_fn, recompute, jit):
  """(loss, {variable path: gradient}, generator states after) of one step from the
  generators' current states, which are then put back. jit: False eagerly, True in
  tf.function(jit_compile=True), "graph" in a plain tf.function (as --xla=off)."""
  set_recompute(model, recompute)
  states = rng_states(model)
  start = [v.numpy() for v in states]

  def step():
    with tf.GradientTape() as tape:
      loss = loss_fn(model)
    return loss, tape.gradient(loss, model.trainable_variables)
  if jit:
    step = tf.function(step, jit_compile=jit is True)
  loss, grads = step()
  after = [v.numpy() for v in states]
  for v, value in zip(states, start):
    v.assign(value)
  names = [v.path for v in model.trainable_variables]
  assert len(set(names)) == len(names)
  return float(loss), dict(zip(names, grads)), after


def assert_same_step(model, loss_fn, jit):
  loss, grads, after = loss_and_grads(model, loss_fn, False, jit)
  loss_r, grads_r, after_r = loss_and_grads(model, loss_fn, True, jit)
  np.testing.assert_allclose(loss_r, loss, rtol=1e-6)
  assert grads_r.keys() == grads.keys()
  for name, grad in grads.items():
    # the same variables reached (None: not used, e.g. XLNet's mask_emb without a query stream)
    assert (grads_r[name] is None) == (grad is None), name
    if grad is None:
      continue
    g, g_r = tf.convert_to_tensor(grad).numpy(), tf.convert_to_tensor(grads_r[name]).numpy()
    scale = max(np.abs(g).max(), 1e-3)
    np.testing.assert_allclose(g_r, g, rtol=0, atol=1e-5 * scale, err_msg=name)
  for a, b in zip(after_r, after):         # the generators advanced exactly as without
    np.testing.assert_array_equal(a, b)
  return grads, after


@pytest.fixture
def xla_mode(request):
  """modeling/ops.py's mode as the trainer sets it from --xla: "off" for a plain graph."""
  ops.set_xla_mode("off" if request.param == "graph" else "full")
  yield request.param
  ops.set_xla_mode("full")


@pytest.mark.parametrize("xla_mode", ["eager", "graph", "xla"], indirect=True)
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.slow
def test_recompute_gives_the_same_loss_and_gradients(name, xla_mode):
  jit = {"eager": False, "graph": "graph", "xla": True}[xla_mode]
  model, loss_fn = MODELS[name]()
  states = [v.numpy() for v in rng_states(model)]
  grads, after = assert_same_step(model, loss_fn, jit)
  # the test is not vacuous: dropout drew, and the layers' weights have gradients
  assert any(not np.array_equal(a, b) for a, b in zip(after, states))
  layer_grads = {path: g for path, g in grads.items() if "layer_" in path}
  assert layer_grads and all(g is not None and np.abs(tf.convert_to_tensor(g).numpy()).max() > 0
                             for g in layer_grads.values()), layer_grads.keys()


@pytest.mark.slow
def test_xlnet_with_tied_biases():
  """untie_r=False: the biases are the variables themselves (passed in, read once)."""
  assert_same_step(*_xlnet_pretrain(untie_r=False), jit=False)


@pytest.mark.slow
def test_a_stateful_draw_inside_the_recomputed_call_is_caught(monkeypatch):
  """The break-it check: were dropout to draw from its generator inside the recomputed
  function (the naive recompute), the masks of the second forward would differ: the
  comparison above fails, and so does the generators' state."""
  model, loss_fn = _xlnet_classifier()
  monkeypatch.setattr(dropout_lib.Dropout, "next_seed", lambda self: self.seed_generator.next())
  with pytest.raises(AssertionError, match="Not equal to tolerance"):   # the gradients
    assert_same_step(model, loss_fn, jit=False)


def test_an_unlisted_dropout_cannot_draw_inside():
  layer = dropout_lib.Dropout(0.5)
  with dropout_lib.replayed_seeds({}):
    with pytest.raises(RuntimeError, match="not given a seed"):
      layer(tf.ones([4]), training=True)


def test_only_training_recomputes():
  """Inference (training False or None, as exports and evaluation call) runs the layers as
  they are: no custom gradient in a SavedModel."""
  assert recompute_lib.active(True, True) and recompute_lib.active(True, tf.constant(True))
  assert not any(recompute_lib.active(on, training) for on, training in
                 ((True, False), (True, None), (False, True)))


def test_an_unbuilt_layer_is_refused():
  block = block_lib.XLNetBlock(2, 8, 32)
  with pytest.raises(ValueError, match="not built"):
    recompute_lib.layer_call(lambda x: x, [tf.ones([1])], block, [], recompute=True)


@pytest.mark.parametrize("name, layer_method", [
    ("xlnet_pretrain", (block_lib.XLNetBlock, "call")),
    ("mpnet_pretrain", (mpnet.MPNetLayer, "keys_values"))])
@pytest.mark.slow
def test_the_backward_pass_runs_each_layer_again(monkeypatch, name, layer_method):
  """Counted per layer call: N forwards without recompute, 2N with (the gradient
  recomputes)."""
  cls, method = layer_method
  original = getattr(cls, method)
  calls = []

  def counted(self, *args, **kwargs):
    calls.append(self.name)
    return original(self, *args, **kwargs)
  monkeypatch.setattr(cls, method, counted)
  model, loss_fn = MODELS[name]()
  n = model.num_layers
  for recompute, expected in ((False, n), (True, 2 * n)):
    calls.clear()
    loss_and_grads(model, loss_fn, recompute, jit=False)
    assert len(calls) == expected, (recompute, calls)


@pytest.mark.parametrize("name", ["xlnet_classifier", "mpnet_pretrain"])
@pytest.mark.slow
def test_xla_keeps_the_recomputation(name):
  """XLA does not merge the backward pass's forward into the first one (tf.recompute_grad
  makes it depend on the incoming gradient): the optimized program holds more matmuls."""
  import re
  model, loss_fn = MODELS[name]()
  dots = {}
  for recompute in (False, True):
    set_recompute(model, recompute)

    @tf.function(jit_compile=True)
    def step():
      with tf.GradientTape() as tape:
        loss = loss_fn(model)
      return loss, tape.gradient(loss, model.trainable_variables)
    hlo = step.experimental_get_compiler_ir()(stage="optimized_hlo")
    dots[recompute] = len(re.findall(r"\bdot\(", hlo))
  assert dots[True] > dots[False], dots
