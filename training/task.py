"""What every trainer task shares (see training/trainer.py for the interface)."""

import tensorflow as tf

from modeling import checkpoint
from training import optimization

OPTIMIZER_FIELDS = ("learning_rate", "train_steps", "warmup_steps", "decay_method",
                    "min_lr_ratio", "weight_decay", "adam_epsilon", "clip",
                    "lr_layer_decay_rate", "grad_accumulation_steps")


class Task:
  """Defaults: no carried state, the common optimizer, init from --init_checkpoint.

  Subclasses set `self.config` (with the OPTIMIZER_FIELDS it has), `self.seed`,
  `self.init_checkpoint` and `self.tokens_per_step`.
  """

  state_dtype = tf.float32
  init_checkpoint = None

  def build_optimizer(self, model):
    kwargs = {k: getattr(self.config, k) for k in OPTIMIZER_FIELDS if hasattr(self.config, k)}
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
