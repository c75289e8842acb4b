"""A trainer task whose evaluation scores are given per step, for
tests/training/test_best_checkpoint.py.

Its model has one weight, and its loss is that weight (plain SGD at rate 1): after `step` steps
the weight is exactly -step, so any checkpoint of it says which step it holds, and so does the
model the fine-tuning runner reloads from best/. `python -m tests.best_helpers MODEL_DIR
TRAIN_STEPS SCORES_JSON` trains it through `finetuning.runner.train_or_load` (a checkpoint and
an evaluation at every step) and prints `reloaded step N`: the step of the weights it returned.
"""

import json
import sys
import types

import keras
import tensorflow as tf


class OneWeight(keras.Model):

  def __init__(self):
    super().__init__()
    self.dense = keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros", name="w")

  def call(self, inputs, training=False):
    return self.dense(inputs["x"])

  def ensure_built(self):
    if not self.built:
      self({"x": tf.zeros([1, 1])})
    return self


def step_of(model):
  """The step a OneWeight model's weights come from."""
  return int(round(-float(model.dense.kernel.numpy().reshape(()))))


class ScriptedTask:
  """See training/trainer.py for the interface. `scores`: {step: score} (the main metric)."""

  main_metric = "score"
  state_dtype = tf.float32
  tokens_per_step = 1
  seed = 0

  def __init__(self, scores):
    self.scores = {int(k): v for k, v in scores.items()}

  def build_model(self):
    return OneWeight()

  def build_optimizer(self, model):
    return keras.optimizers.SGD(learning_rate=1.0)

  def state_shape(self):
    return [1]

  def initial_state(self):
    return tf.zeros([1])

  def dataset(self, input_context, skip_batches=0):
    return tf.data.Dataset.from_tensors({"x": tf.ones([1, 1])}).repeat()

  def loss(self, model, batch, state, step, training=True):
    model(batch, training=training)
    return tf.reduce_sum(model.dense.kernel), {}, state

  def initialize(self, model, log):
    pass

  def evaluate(self, model):
    return {"score": self.scores[step_of(model)], "step_seen": float(step_of(model))}

  def on_end(self, model, model_dir, log):
    pass


def train(model_dir, train_steps, scores, log=print):
  """runner.train_or_load on a ScriptedTask: a checkpoint and an evaluation at every step."""
  from finetuning import runner
  flag_values = types.SimpleNamespace(train_steps=train_steps, steps_per_loop=1, save_every=1,
                                      xla="off", export_hf_dir=None, export_dir=None)
  return runner.train_or_load(ScriptedTask(scores), tf.distribute.get_strategy(), model_dir,
                              True, flag_values, log=log)


if __name__ == "__main__":
  log = lambda line: print(line, flush=True)
  model = train(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), log)
  log(f"reloaded step {step_of(model)}")
