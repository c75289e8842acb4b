"""absl flags every training script shares (optimizer, schedule, loop, strategy)."""

from absl import flags

from training import distribution


def define_training_flags(learning_rate=2e-5, train_steps=1000, warmup_steps=0, save_every=1000,
                          lr_layer_decay_rate=1.0, flag_values=flags.FLAGS):
  """Defines the flags (in `flag_values`: the tests parse into their own); the defaults differ
  per script (the release's recipes)."""
  define = _Definer(flag_values)
  define.DEFINE_float("learning_rate", learning_rate, "Peak learning rate.")
  define.DEFINE_integer("train_steps", train_steps, "Optimizer steps.")
  define.DEFINE_integer("warmup_steps", warmup_steps, "Linear warmup steps.")
  define.DEFINE_enum("decay_method", "linear", ["linear", "cosine"], "Decay after the warmup.")
  define.DEFINE_float("min_lr_ratio", 0.0, "Final learning rate as a fraction of the peak.")
  define.DEFINE_float("weight_decay", 0.0, "Decoupled weight decay (LayerNorm and biases "
                     "excluded).")
  define.DEFINE_float("adam_epsilon", 1e-6, "Adam epsilon.")
  define.DEFINE_float("clip", 1.0, "Global-norm gradient clipping (0 = off).")
  define.DEFINE_float("lr_layer_decay_rate", lr_layer_decay_rate, "Layer l of N learns at "
                     "rate^(N-1-l) of the learning rate (embeddings rate^N).")
  define.DEFINE_integer("grad_accumulation_steps", 1, "Optimizer update every N steps.")
  define.DEFINE_integer("save_every", save_every, "Checkpoint (and evaluate) every N steps.")
  define.DEFINE_integer("steps_per_loop", 10, "Steps per host call (one tf.function).")
  define.DEFINE_string("tpu", None, "TPU to train on (implies the TPU strategy): 'local' on a "
                      "TPU VM (the VM's own TPU or pod slice), else its name or grpc:// address.")
  define.DEFINE_string("tpu_zone", None, "Zone of --tpu=NAME (default: the VM's own zone, from "
                      "the metadata server).")
  define.DEFINE_string("gcp_project", None, "Cloud project of --tpu=NAME (default: the VM's).")
  define.DEFINE_enum("distribution_strategy", "default", list(distribution.STRATEGIES),
                    "tf.distribute strategy: mirrored = every GPU of this host; "
                    "multi_worker_mirrored = several hosts, each described by TF_CONFIG "
                    "(chief = worker 0 writes the files); tpu (or --tpu).")
  define.DEFINE_integer("seed", 0, "Seed of weights, data order and dropout.")
  define.DEFINE_enum("xla", "full", ["full", "fusible", "off"],
                    "How the train step compiles: full = one XLA computation (TPU, GPU, "
                    "float32 CPU); fusible = TensorFlow matmuls + XLA element-wise clusters "
                    "(fastest with --use_bfloat16 on a CPU whose TensorFlow uses oneDNN); "
                    "off = plain tf.function.")
  define.DEFINE_bool("deterministic", False,
                    "Bit-identical reruns: the same command, and a run killed and rerun with "
                    "it, end with the same bytes in every checkpoint. Turns on TensorFlow's op "
                    "determinism (deterministic kernels; an op without one raises) and runs one "
                    "op at a time (one inter-op thread; each op still uses every core). Costs "
                    "5-15% of the step speed on a 2-core CPU (README, Reliability) and changes "
                    "the last bits of the numbers (summation order), so runs with and without "
                    "it differ. Holds on the same machine, TensorFlow version and flags.")


class _Definer:
  """absl's DEFINE_* functions bound to one FlagValues."""

  def __init__(self, flag_values):
    self.flag_values = flag_values

  def __getattr__(self, name):
    define = getattr(flags, name)
    return lambda *args, **kwargs: define(*args, flag_values=self.flag_values, **kwargs)


def optimizer_kwargs(flag_values=flags.FLAGS):
  """The OPTIMIZER_FIELDS of training/task.py from the flags."""
  from training.task import OPTIMIZER_FIELDS
  return {k: getattr(flag_values, k) for k in OPTIMIZER_FIELDS}
