"""Pretraining step benchmark: bench-small of ../shared/reference/results-and-benchmarks.md.

6 layers, d_model 512, 8 heads of 64, d_inner 2048, GELU, untie_r, vocab 32000;
seq_len 256, reuse_len 128, mem_len 128, num_predict 43, batch 8, dropout 0.1,
AdamW. One step = forward + backward + update of the two-stream PLM loss, memory
carried between steps. Median of N timed steps after warm-up.

One run measures, side by side on this machine:
  - the machine's matmul peak (TensorFlow, 2048^3, float32 and bfloat16);
  - ours: float32 and mixed_bfloat16, the step under XLA (--xla=full), with TF matmuls +
    XLA element-wise clusters (--xla=fusible) and as a plain tf.function;
  - ours, MPNet at the same sizes (c = 43 predicted, no memory): float32 XLA, bf16 fusible;
  - a bound, not a model: our bf16 fusible step with attention cut down to its three
    matmuls (scores over K key columns, no rel-shift, segment term, mask, softmax or
    dropout), i.e. what the step would take if that element-wise work were free;
  - Model Garden's TF2 XLNet (tf-models-official, in its own virtual env given by
    --mg_python), eager tf.function and XLA.

  python -m venv /tmp/mg && /tmp/mg/bin/pip install tf-models-official==2.20.0
  python bench/pretrain_step.py --mg_python /tmp/mg/bin/python
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B, L, P, M, LAYERS, D, H, DH, INNER, V = 8, 256, 43, 128, 6, 512, 8, 64, 2048, 32000
FLOPS_PER_STEP = 0.43e12   # by count (reference)


def _batch(np):
  from pretraining.random_inputs import random_permutation_masks
  rng = np.random.default_rng(0)
  perm_mask, mapping = random_permutation_masks(rng, B, L, P, pad_rows=0)
  ids = rng.integers(9, V, [B, L]).astype(np.int32)
  seg = np.zeros([B, L], np.int32)
  seg[:, 160:] = 1
  seg[:, -1] = 2
  return dict(ids=ids, seg=seg, perm_mask=perm_mask, mapping=mapping,
              target=np.take_along_axis(ids, mapping.argmax(-1), 1),
              input_q=mapping.sum(1).astype(np.float32))


def _time(step, n):
  step()                                   # compile / warm-up
  step()
  times = []
  for _ in range(n):
    t = time.perf_counter()
    step()
    times.append(time.perf_counter() - t)
  times.sort()
  return times[len(times) // 2]


def matmul_peak(n_steps):
  import tensorflow as tf
  out = {}
  for dtype in (tf.float32, tf.bfloat16):
    a = tf.random.normal([2048, 2048], dtype=tf.float32)
    a = tf.cast(a, dtype)
    f = tf.function(lambda x: tf.matmul(x, x))
    sec = _time(lambda: f(a).numpy(), n_steps)
    out[dtype.name] = 2 * 2048 ** 3 / sec
  return out


def _attend_matmuls_only(self, q, k, v, k_r, biases, seg_embed, seg_diff, mask, klen,
                         positions, training, seg_len=None):
  """TwoStreamRelativeAttention._attend without its element-wise work (the bound row)."""
  import tensorflow as tf
  from modeling import ops
  r_w_bias, r_r_bias = (b[:, None, :] for b in biases[:2])
  scale = tf.cast(self._scale, q.dtype)
  ac = tf.matmul((q + r_w_bias) * scale, k, transpose_b=True)
  bd = ops.position_scores((q + r_r_bias) * scale, k_r[:, :, :klen])
  return tf.matmul(ac + bd, v)


def ours(policy, n_steps, xla="full", bound=False):
  import keras
  import numpy as np
  import tensorflow as tf
  if bound:
    from modeling.xlnet import attention as relative_attention
    relative_attention.TwoStreamRelativeAttention._attend = _attend_matmuls_only
  from modeling import losses
  from modeling.run_config import RunConfig
  from modeling.xlnet.config import XLNetConfig
  from modeling.xlnet.models import XLNetPretrainModel
  from training import optimization
  keras.config.set_dtype_policy(policy)
  config = XLNetConfig(n_layer=LAYERS, d_model=D, n_head=H, d_head=DH, d_inner=INNER, n_token=V)
  run = RunConfig(dropout=0.1, dropatt=0.1, mem_len=M, reuse_len=128, bi_data=True)
  model = XLNetPretrainModel(config, run).ensure_built()
  data = _batch(np)
  batch = {"input_ids": data["ids"], "seg_ids": data["seg"], "perm_mask": data["perm_mask"],
           "target_mapping": data["mapping"], "target": data["target"],
           "input_mask": np.zeros([B, L], np.float32)}
  batch = {k: tf.constant(v) for k, v in batch.items()}
  opt = optimization.Adam(learning_rate=1e-4, weight_decay_rate=0.01, clip_norm=1.0)
  opt.build(model.trainable_variables)

  from training import trainer as trainer_lib
  @trainer_lib.compile_step(xla)
  def step(batch, mems):
    with tf.GradientTape() as tape:
      out = model(batch, mems=mems, training=True)
      loss = losses.lm_loss(out["logits"], batch["target"])
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss, tf.cast(out["new_mems"], tf.float32)

  state = {"mems": tf.zeros([LAYERS, B, M, D])}

  def run_step():
    loss, state["mems"] = step(batch, state["mems"])
    float(loss)
  return _time(run_step, n_steps)


def mpnet_step(policy, n_steps, xla="full"):
  """MPNet (modeling/mpnet/pretrain.py) at the same sizes: 6 x 512, vocab 32000, seq 256,
  c = 43 predicted (content stream n + c = 299, query stream c), batch 8, no memory."""
  import keras
  import numpy as np
  import tensorflow as tf
  from modeling import losses
  from modeling.mpnet import encoder as mpnet
  from modeling.mpnet import pretrain as mpnet_pretrain
  from training import optimization
  from training import trainer as trainer_lib
  keras.config.set_dtype_policy(policy)
  config = mpnet.MPNetConfig(vocab_size=V, hidden_size=D, num_hidden_layers=LAYERS,
                             num_attention_heads=H, intermediate_size=INNER,
                             max_position_embeddings=L + 2)
  model = mpnet_pretrain.MPNetPretrainModel(config).ensure_built()
  rng = np.random.default_rng(0)
  ids = tf.constant(rng.integers(9, V, [B, L]), tf.int32)
  is_masked = np.zeros([B, L], bool)
  for b in range(B):
    is_masked[b, rng.choice(L, P, replace=False)] = True
  is_masked = tf.constant(is_masked)
  rank = tf.constant(np.stack([rng.permutation(L) for _ in range(B)]), tf.int32)
  opt = optimization.Adam(learning_rate=1e-4, weight_decay_rate=0.01, clip_norm=1.0)
  opt.build(model.trainable_variables)

  @trainer_lib.compile_step(xla)
  def step(seed):
    inputs = mpnet_pretrain.build_inputs(ids, is_masked, rank, P, seed, vocab_size=V)
    with tf.GradientTape() as tape:
      loss = losses.lm_loss(model(inputs, training=True), inputs["targets"])
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  seed = tf.constant([1, 2])
  return _time(lambda: float(step(seed)), n_steps)


def model_garden(mode, n_steps):
  import numpy as np
  import tensorflow as tf
  import tf_keras
  from official.nlp.modeling import models, networks
  init = tf_keras.initializers.RandomNormal(stddev=0.02)
  net = networks.XLNetBase(
      vocab_size=V, num_layers=LAYERS, hidden_size=D, num_attention_heads=H, head_size=DH,
      inner_size=INNER, dropout_rate=0.1, attention_dropout_rate=0.1, attention_type="bi",
      bi_data=True, initializer=init, two_stream=True, tie_attention_biases=False,
      memory_length=M, reuse_length=128, inner_activation="gelu")
  model = models.XLNetPretrainer(network=net, mlm_activation="gelu", mlm_initializer=init)
  data = _batch(np)
  inputs = {"input_word_ids": tf.constant(data["ids"]), "input_type_ids": tf.constant(data["seg"]),
            "masked_tokens": tf.constant(data["input_q"]),
            "permutation_mask": tf.constant(data["perm_mask"]),
            "target_mapping": tf.constant(data["mapping"])}
  target = tf.constant(data["target"])
  opt = tf_keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01, global_clipnorm=1.0)

  if mode == "fusible":   # the same hybrid as ours (training/trainer.py compile_step)
    os.environ["TF_XLA_FLAGS"] = ("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit "
                                  "--tf_xla_ops_to_cluster=FUSIBLE")
    tf.config.optimizer.set_jit("autoclustering")

  @tf.function(jit_compile=mode == "full")
  def step(inputs, mems):
    with tf.GradientTape() as tape:
      logits, new_mems = model(dict(inputs, state=mems), training=True)
      loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(target, logits))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss, new_mems

  state = {"mems": [tf.zeros([B, M, D]) for _ in range(LAYERS)]}

  def run_step():
    loss, state["mems"] = step(inputs, state["mems"])
    float(loss)
  return _time(run_step, n_steps)


def child(args):
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  if ":fusible" in args.what:
    import tensorflow as tf
    from training import trainer as trainer_lib
    trainer_lib.configure_xla("fusible")   # before TensorFlow runs its first op
  if args.what == "peak":
    result = matmul_peak(args.steps)
  elif args.what.startswith("ours:"):
    _, policy, mode, *bound = args.what.split(":")
    result = ours(policy, args.steps, xla=mode, bound=bool(bound))
  elif args.what.startswith("mpnet:"):
    _, policy, mode = args.what.split(":")
    result = mpnet_step(policy, args.steps, xla=mode)
  else:
    result = model_garden(args.what.split(":")[1], args.steps)
  print("RESULT " + json.dumps(result))


def run_child(python, what, steps):
  # `-m` from the root: the root is on the child's sys.path (the packages, for a --mg_python
  # whose environment does not have this project installed)
  cmd = [python, "-m", "bench.pretrain_step", "--child", what, "--steps", str(steps)]
  out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
  lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
  if out.returncode or not lines:
    return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1][:200]}
  return json.loads(lines[-1][7:])


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--mg_python", help="python of a venv with tf-models-official")
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--child", dest="what")
  args = parser.parse_args()
  if args.what:
    return child(args)
  peak = run_child(sys.executable, "peak", 10)
  rows = {}
  for policy in ("float32", "mixed_bfloat16"):
    for mode, label in (("full", "XLA"), ("fusible", "XLA fusible ops"),
                        ("off", "tf.function")):
      rows[f"ours {policy} ({label})"] = run_child(sys.executable, f"ours:{policy}:{mode}",
                                                   args.steps)
  rows["bound: bf16 fusible, attention matmuls only"] = run_child(
      sys.executable, "ours:mixed_bfloat16:fusible:bound", args.steps)
  for policy, mode, label in (("float32", "full", "XLA"),
                              ("mixed_bfloat16", "fusible", "XLA fusible ops")):
    rows[f"ours MPNet {policy} ({label})"] = run_child(sys.executable, f"mpnet:{policy}:{mode}",
                                                       args.steps)
  if args.mg_python:
    for mode, label in (("off", "tf.function"), ("full", "XLA"), ("fusible", "XLA fusible ops")):
      rows[f"Model Garden float32 ({label})"] = run_child(args.mg_python, f"mg:{mode}",
                                                          args.steps)
  mg = [v for k, v in rows.items() if k.startswith("Model Garden") and isinstance(v, float)]
  best_mg = min(mg) if mg else None
  print(f"matmul peak 2048^3: float32 {peak['float32'] / 1e9:.0f} GFLOP/s, "
        f"bfloat16 {peak['bfloat16'] / 1e9:.0f} GFLOP/s")
  print(f"{'configuration':44s} {'s/step':>8s} {'tokens/s':>9s} {'vs MG best':>10s} "
        f"{'of peak':>8s}")
  for name, sec in rows.items():
    if not isinstance(sec, float):
      print(f"{name:44s} {sec['error']}")
      continue
    ratio = f"{best_mg / sec:.2f}x" if best_mg else "-"
    # XLNet's FLOP count against the peak of the row's compute dtype (MPNet rows: "-")
    dtype = "bfloat16" if "bfloat16" in name else "float32"
    frac = "-" if "MPNet" in name or name.startswith("bound") else f"{FLOPS_PER_STEP / sec / peak[dtype]:.0%} {dtype[:4]}"
    print(f"{name[:44]:44s} {sec:8.2f} {B * L / sec:9.0f} {ratio:>10s} {frac:>8s}")

if __name__ == "__main__":
  main()
