"""The main job on an embedded default: no downloads, a few seconds on a CPU.

Today it shows the model end to end: it builds a small XLNet, writes it as a
checkpoint under the original release's TF1 variable names, loads that
checkpoint into a fresh model (as a released checkpoint would be loaded), checks
the two give identical two-stream outputs with memory, trains a few XLA-compiled
steps of the permutation LM loss, and saves both checkpoint formats.

    python quickstart.py [--output_dir output/quickstart] [--steps 20]
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from absl import logging  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from modeling import checkpoint, losses  # noqa: E402
from modeling.config import RunConfig, XLNetConfig  # noqa: E402
from modeling.models import XLNetPretrainModel  # noqa: E402

flags.DEFINE_string("output_dir", "output/quickstart", "Where the checkpoints are written.")
flags.DEFINE_integer("steps", 20, "Training steps to run (XLA-compiled).")
flags.DEFINE_integer("seed", 0, "Seed of the weights and the toy batch.")
FLAGS = flags.FLAGS

CONFIG = XLNetConfig(n_layer=2, d_model=32, n_head=4, d_head=8, d_inner=64, n_token=100)
BATCH, SEQ_LEN, NUM_PREDICT, MEM_LEN = 4, 16, 4, 8


def log(stage, message):
  print(f"[{stage}] {message}", flush=True)


def toy_batch(rng):
  """A permutation-LM batch: random factorization order, NUM_PREDICT targets."""
  ids = rng.integers(9, CONFIG.n_token, [BATCH, SEQ_LEN]).astype(np.int32)
  seg = np.zeros([BATCH, SEQ_LEN], np.int32)
  seg[:, SEQ_LEN // 2:] = 1
  ids[:, -1], seg[:, -1] = 3, 2  # <cls>
  perm_mask = np.zeros([BATCH, SEQ_LEN, SEQ_LEN], np.float32)
  mapping = np.zeros([BATCH, NUM_PREDICT, SEQ_LEN], np.float32)
  for b in range(BATCH):
    targets = np.sort(rng.choice(SEQ_LEN - 1, NUM_PREDICT, replace=False))
    rank = np.argsort(rng.permutation(SEQ_LEN))
    is_target = np.isin(np.arange(SEQ_LEN), targets)
    # 1 = blocked: everyone is blocked from a target unless it is a target later in the order
    perm_mask[b] = is_target[None, :] & ~(is_target[:, None] & (rank[None, :] < rank[:, None]))
    mapping[b, np.arange(NUM_PREDICT), targets] = 1.0
  target = np.take_along_axis(ids, mapping.argmax(-1), axis=1)
  batch = {"input_ids": ids, "seg_ids": seg, "perm_mask": perm_mask, "target_mapping": mapping,
           "input_mask": np.zeros([BATCH, SEQ_LEN], np.float32), "target": target}
  return {k: tf.constant(v) for k, v in batch.items()}


def main(argv):
  del argv
  tf.get_logger().setLevel("ERROR")
  logging.set_verbosity(logging.WARNING)
  start = time.time()
  keras.utils.set_random_seed(FLAGS.seed)
  out = FLAGS.output_dir
  os.makedirs(out, exist_ok=True)
  run = RunConfig(dropout=0.0, dropatt=0.0, mem_len=MEM_LEN, reuse_len=SEQ_LEN // 2,
                  bi_data=True)

  log("1/5 build", f"XLNet {CONFIG.n_layer} layers, d_model {CONFIG.d_model}, "
      f"{CONFIG.n_head} heads, vocab {CONFIG.n_token}; bi_data, mem_len {MEM_LEN}")
  model = XLNetPretrainModel(CONFIG, run).ensure_built()
  n_params = sum(int(np.prod(v.shape)) for v in model.weights)
  config_path = os.path.join(out, "xlnet_config.json")
  CONFIG.to_json(config_path)
  log("1/5 build", f"{n_params:,} parameters in {len(model.weights)} variables; "
      f"config -> {config_path}")

  tf1_path = checkpoint.save_tf1_checkpoint(model, os.path.join(out, "tf1", "xlnet_model.ckpt"))
  names = sorted(model.tf1_variables())
  log("2/5 save", f"release-named TF1 checkpoint -> {tf1_path} ({len(names)} variables, "
      f"e.g. {names[0]})")

  reloaded = XLNetPretrainModel(XLNetConfig.from_json(config_path), run)
  report = checkpoint.load_tf1_checkpoint(reloaded, tf1_path, require_all=True)
  log("3/5 load", report.summary())

  rng = np.random.default_rng(FLAGS.seed)
  batch = toy_batch(rng)
  mems = tf.zeros([CONFIG.n_layer, BATCH, MEM_LEN, CONFIG.d_model])
  a, b = model(batch, mems=mems), reloaded(batch, mems=mems)
  diff = float(tf.reduce_max(tf.abs(a["logits"] - b["logits"])))
  log("3/5 load", f"two-stream forward: logits {tuple(b['logits'].shape)}, new memory "
      f"{tuple(b['new_mems'].shape)}; max difference original vs reloaded = {diff:.1e}")
  if diff != 0.0:
    sys.exit("quickstart: the reloaded model differs from the original")

  optimizer = keras.optimizers.AdamW(learning_rate=1e-2, weight_decay=0.01)

  @tf.function(jit_compile=True)
  def train_step(batch, mems):
    with tf.GradientTape() as tape:
      out = reloaded(batch, mems=mems, training=True)
      loss = losses.lm_loss(out["logits"], batch["target"])
    grads = tape.gradient(loss, reloaded.trainable_variables)
    optimizer.apply_gradients(zip(grads, reloaded.trainable_variables))
    return loss, out["new_mems"]

  compile_start = time.time()
  loss, mems = train_step(batch, mems)
  log("4/5 train", f"step 1/{FLAGS.steps} loss {float(loss):.3f} "
      f"(XLA compile + step: {time.time() - compile_start:.1f}s)")
  step_start = time.time()
  for step in range(2, FLAGS.steps + 1):
    loss, mems = train_step(batch, mems)
    if step % 5 == 0 or step == FLAGS.steps:
      rate = (step - 1) / (time.time() - step_start)
      log("4/5 train", f"step {step}/{FLAGS.steps} loss {float(loss):.3f} "
          f"({rate:.1f} steps/s, ETA {(FLAGS.steps - step) / rate:.0f}s)")

  native = checkpoint.save_native_checkpoint(reloaded, os.path.join(out, "native", "ckpt"))
  trained_tf1 = checkpoint.save_tf1_checkpoint(
      reloaded, os.path.join(out, "trained", "xlnet_model.ckpt"), global_step=FLAGS.steps)
  log("5/5 save", f"trained model -> {trained_tf1} (release names) and {native} (native TF2)")
  print(f"\nDone in {time.time() - start:.0f}s. Outputs in {out}/:\n"
        f"  xlnet_config.json        model config (release keys)\n"
        f"  tf1/xlnet_model.ckpt     random-initialised model, release TF1 names\n"
        f"  trained/xlnet_model.ckpt after {FLAGS.steps} steps, release TF1 names\n"
        f"  native/ckpt              the same, native TF2 checkpoint")


if __name__ == "__main__":
  app.run(main)
