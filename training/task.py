"""What every trainer task shares (see training/trainer.py for the interface)."""

import dataclasses

import tensorflow as tf

from modeling import checkpoint
from training import optimization



@dataclasses.dataclass(kw_only=True)
class OptimizerConfig:
  """The optimizer/schedule settings every task config carries (training/flags.py)."""
  learning_rate: float = 1e-4
  train_steps: int = 1000
  warmup_steps: int = 0
  decay_method: str = "linear"
  min_lr_ratio: float = 0.0
  weight_decay: float = 0.0
  adam_epsilon: float = 1e-6
  clip: float = 1.0
  lr_layer_decay_rate: float = 1.0
  grad_accumulation_steps: int = 1
  seed: int = 0


def host_examples(ds, input_context):
  """This input pipeline's share of a fine-tuning set: with several hosts (multi-worker, a TPU
  pod) each reads every n-th example, so hosts never train on each other's rows."""
  if input_context and input_context.num_input_pipelines > 1:
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  return ds


def static_batches(ds, batch_size):
  """Batches whose leading dimension is the static `batch_size` (TPUs need fully static
  shapes; `drop_remainder` alone leaves it unknown after a parse that reshapes)."""
  def fix(features):
    return {k: tf.ensure_shape(v, [batch_size] + v.shape[1:]) for k, v in features.items()}
  return ds.map(fix)


OPTIMIZER_FIELDS = tuple(f.name for f in dataclasses.fields(OptimizerConfig) if f.name != "seed")


class Task:
  """Defaults: no carried state, the common optimizer, init from --init_checkpoint.

  Subclasses set `self.config` (with the OPTIMIZER_FIELDS it has), `self.seed`,
  `self.init_checkpoint` and `self.tokens_per_step`.
  """

  state_dtype = tf.float32
  init_checkpoint = None

  def build_optimizer(self, model):
    kwargs = {k: getattr(self.config, k) for k in OPTIMIZER_FIELDS}
    return optimization.build_optimizer(model, **kwargs)

  def initialize(self, model, log):
    if self.init_checkpoint:
      log(f"init from {self.init_checkpoint}: "
          f"{checkpoint.load_checkpoint(model, self.init_checkpoint)}")

  def state_shape(self):
    return [1]

  def initial_state(self):
    return tf.zeros(self.state_shape(), self.state_dtype)

  def replicas(self):
    return tf.distribute.get_strategy().num_replicas_in_sync

  def on_end(self, model, model_dir, log):
    pass
