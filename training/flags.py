"""absl flags every training script shares (optimizer, schedule, loop, strategy)."""

from absl import flags

from training import distribution


def define_training_flags(learning_rate=2e-5, train_steps=1000, warmup_steps=0, save_every=1000,
                          lr_layer_decay_rate=1.0):
  """Defines the flags; the defaults differ per script (the release's recipes)."""
  flags.DEFINE_float("learning_rate", learning_rate, "Peak learning rate.")
  flags.DEFINE_integer("train_steps", train_steps, "Optimizer steps.")
  flags.DEFINE_integer("warmup_steps", warmup_steps, "Linear warmup steps.")
  flags.DEFINE_enum("decay_method", "linear", ["linear", "cosine"], "Decay after the warmup.")
  flags.DEFINE_float("min_lr_ratio", 0.0, "Final learning rate as a fraction of the peak.")
  flags.DEFINE_float("weight_decay", 0.0, "Decoupled weight decay (LayerNorm and biases "
                     "excluded).")
  flags.DEFINE_float("adam_epsilon", 1e-6, "Adam epsilon.")
  flags.DEFINE_float("clip", 1.0, "Global-norm gradient clipping (0 = off).")
  flags.DEFINE_float("lr_layer_decay_rate", lr_layer_decay_rate, "Layer l of N learns at "
                     "rate^(N-1-l) of the learning rate (embeddings rate^N).")
  flags.DEFINE_integer("grad_accumulation_steps", 1, "Optimizer update every N steps.")
  flags.DEFINE_integer("save_every", save_every, "Checkpoint (and evaluate) every N steps.")
  flags.DEFINE_integer("steps_per_loop", 10, "Steps per host call (one tf.function).")
  flags.DEFINE_string("tpu", None, "TPU to train on (implies the TPU strategy): 'local' on a "
                      "TPU VM (the VM's own TPU or pod slice), else its name or grpc:// address.")
  flags.DEFINE_string("tpu_zone", None, "Zone of --tpu=NAME (default: the VM's own zone, from "
                      "the metadata server).")
  flags.DEFINE_string("gcp_project", None, "Cloud project of --tpu=NAME (default: the VM's).")
  flags.DEFINE_enum("distribution_strategy", "default", list(distribution.STRATEGIES),
                    "tf.distribute strategy: mirrored = every GPU of this host; "
                    "multi_worker_mirrored = several hosts, each described by TF_CONFIG "
                    "(chief = worker 0 writes the files); tpu (or --tpu).")
  flags.DEFINE_integer("seed", 0, "Seed of weights, data order and dropout.")
  flags.DEFINE_enum("xla", "full", ["full", "fusible", "off"],
                    "How the train step compiles: full = one XLA computation (TPU, GPU, "
                    "float32 CPU); fusible = TensorFlow matmuls + XLA element-wise clusters "
                    "(fastest with --use_bfloat16 on a CPU whose TensorFlow uses oneDNN); "
                    "off = plain tf.function.")
  flags.DEFINE_bool("deterministic", False,
                    "Bit-identical reruns: the same command, and a run killed and rerun with "
                    "it, end with the same bytes in every checkpoint. Turns on TensorFlow's op "
                    "determinism (deterministic kernels; an op without one raises) and runs one "
                    "op at a time (one inter-op thread; each op still uses every core). Costs "
                    "5-15% of the step speed on a 2-core CPU (README, Reliability) and changes "
                    "the last bits of the numbers (summation order), so runs with and without "
                    "it differ. Holds on the same machine, TensorFlow version and flags.")


def optimizer_kwargs(flag_values=flags.FLAGS):
  """The OPTIMIZER_FIELDS of training/task.py from the flags."""
  from training.task import OPTIMIZER_FIELDS
  return {k: getattr(flag_values, k) for k in OPTIMIZER_FIELDS}
