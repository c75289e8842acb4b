"""absl flags every training script shares (optimizer, schedule, loop, strategy)."""

from absl import flags

from data_utils import cli_app
from training import compile_cache
from training import distribution
from training import optimization
from training import recipes
from training import run_record


def define_training_flags(script, train_steps=1000, save_every=1000, flag_values=flags.FLAGS):
  """Defines the flags (in `flag_values`: the tests parse into their own). `script` (pretrain,
  classifier, squad, race) picks the recipe defaults the help text shows: an optimizer flag
  left unset takes its recipe's value for the model family (training/recipes.py)."""
  define = _Definer(flag_values)
  default = lambda field: recipes.help_default(field, script)
  define.DEFINE_enum("recipe", "release", list(recipes.RECIPES),
                     "Whose hyper-parameters fill the optimizer flags not given: release = the "
                     "released code's (XLNet: zihangdai/xlnet's scripts; MPNet: its fairseq "
                     "scripts), paper = the papers' tables (XLNet Tables 7-8: eps 1e-6, weight "
                     "decay 0.01, per-layer learning rates). docs/fine-tuning.md, 'Optimizer semantics and recipes'.")
  define.DEFINE_enum("optimizer", None, list(optimization.SEMANTICS),
                     "Update rule. release = XLNet's get_train_op: tf.train.AdamOptimizer "
                     "(TF1 bias correction) when --weight_decay=0, else its "
                     "AdamWeightDecayOptimizer (no bias correction; LayerNorm and biases "
                     "excluded, r_w/r_r/r_s_bias decayed); fairseq = fairseq's Adam (MPNet): "
                     "bias-corrected, decoupled decay w -= lr*wd*w on every weight. "
                     + default("optimizer"))
  define.DEFINE_float("learning_rate", None, "Peak learning rate. " + default("learning_rate"))
  define.DEFINE_integer("train_steps", train_steps, "Optimizer steps.")
  define.DEFINE_float("warmup_steps", None, "Linear warmup from 0: steps, or a fraction of "
                      "--train_steps when below 1. " + default("warmup_steps"))
  define.DEFINE_enum("decay_method", None, list(optimization.DECAY_METHODS),
                     "Decay after the warmup: linear (= the release's poly) or cosine (= cos). "
                     + default("decay_method"))
  define.DEFINE_float("min_lr_ratio", None, "Final learning rate as a fraction of the peak. "
                      + default("min_lr_ratio"))
  define.DEFINE_float("weight_decay", None, "Decoupled weight decay; with --optimizer=release "
                      "a value > 0 switches to AdamWeightDecayOptimizer. "
                      + default("weight_decay"))
  define.DEFINE_float("adam_epsilon", None, "Adam epsilon. " + default("adam_epsilon"))
  define.DEFINE_float("adam_beta1", None, "Adam beta1. " + default("adam_beta1"))
  define.DEFINE_float("adam_beta2", None, "Adam beta2. " + default("adam_beta2"))
  define.DEFINE_float("clip", None, "Global-norm clipping of the summed gradients (0 = off). "
                      + default("clip"))
  define.DEFINE_float("lr_layer_decay_rate", None, "Layer-wise decay: layer l of N is scaled by "
                      "rate^(N-1-l), as --layer_decay_method says. "
                      + default("lr_layer_decay_rate"))
  define.DEFINE_enum("layer_decay_method", None, list(optimization.LAYER_DECAY_METHODS),
                     "release = the release's code: the clipped gradients of layer l's "
                     "variables are scaled (Adam cancels most of it); paper = the paper's text: "
                     "layer l learns at rate^(N-1-l) of the learning rate, the embeddings at "
                     "rate^N. " + default("layer_decay_method"))
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
                    "some step speed (bench/README.md) and changes "
                    "the last bits of the numbers (summation order), so runs with and without "
                    "it differ. Holds on the same machine, TensorFlow version and flags.")
  cli_app.before_run(_enable_compile_cache)
  define.DEFINE_string("compile_cache", None,
                      "Directory of XLA's persistent compilation cache: a program compiled once "
                      "is loaded by later runs of the same program (a rerun, a resume, each run "
                      "of a sweep). Default: $XLNET_COMPILE_CACHE, else ~/.cache/xlnet-tf/xla; "
                      "'off' disables. May be a gs:// URL (training/compile_cache.py).")
  define.DEFINE_bool("verbose", False,
                    "Keep TensorFlow's start-up noise in the log (C++ INFO/WARNING lines, "
                    "oneDNN and CUDA-not-found notices, unused mask_emb gradients, unused "
                    "checkpoint values such as save_counter, retracing notices), filtered by "
                    "default; errors are never filtered (data_utils/cli_app.py).")
  run_record.define_flags(flag_values)


def _enable_compile_cache(argv):
  """--compile_cache, read from the command line before absl parses it: TensorFlow takes the
  cache's setting when its runtime starts, which absl's start-up hooks may do."""
  compile_cache.enable(cli_app.argv_value(argv[1:], "compile_cache"))


class _Definer:
  """absl's DEFINE_* functions bound to one FlagValues."""

  def __init__(self, flag_values):
    self.flag_values = flag_values

  def __getattr__(self, name):
    define = getattr(flags, name)
    return lambda *args, **kwargs: define(*args, flag_values=self.flag_values, **kwargs)


def optimizer_kwargs(flag_values=flags.FLAGS):
  """The OPTIMIZER_FIELDS of training/task.py (None where not given) and train_steps."""
  from training.task import OPTIMIZER_FIELDS
  return {"train_steps": flag_values.train_steps,
          **{k: getattr(flag_values, k) for k in OPTIMIZER_FIELDS}}
