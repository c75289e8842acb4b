"""What a run traces once: the train step, whether the host loop runs it as its first step or
inside its graph loop (one function, so one XLA compile), and a model's inference function,
shared by every evaluation and prediction of that model (training/task.inference_fn)."""

import gc
import weakref

import numpy as np
import tensorflow as tf

from tests import best_helpers
from training import task as task_lib
from training import trainer as trainer_lib


def test_the_host_loop_traces_the_step_once(tmp_path, monkeypatch):
  traces = []
  compile_step = trainer_lib.compile_step

  def counting(mode):          # compile_step, counting the traces of the step it compiles
    compile = compile_step(mode)

    def decorate(fn):
      def traced(*args):
        traces.append(1)
        return fn(*args)
      return compile(traced)
    return decorate

  monkeypatch.setattr(trainer_lib, "compile_step", counting)
  task = best_helpers.ScriptedTask({6: 1.0})
  trainer = trainer_lib.Trainer(task, tf.distribute.get_strategy(), str(tmp_path), 6,
                                steps_per_loop=3, save_every=6, xla="off", log=lambda _: None)
  trainer.train()
  assert len(traces) == 1
  assert best_helpers.step_of(trainer.model) == 6       # 6 steps taken, 2 host loops of 3
  assert int(trainer.step.numpy()) == 6


def test_inference_fn_is_one_function_per_model():
  model = best_helpers.OneWeight().ensure_built()
  model.dense.kernel.assign([[2.0]])
  fn = task_lib.inference_fn(model)
  assert task_lib.inference_fn(model) is fn
  for rows in (3, 3, 5):                  # two batch sizes: a trace each at most
    x = np.arange(rows, dtype=np.float32).reshape(rows, 1)
    np.testing.assert_array_equal(task_lib.inference_fn(model)({"x": x}).numpy(), 2 * x)
  assert fn.experimental_get_tracing_count() <= 2
  other = best_helpers.OneWeight().ensure_built()
  assert task_lib.inference_fn(other) is not fn
  np.testing.assert_array_equal(task_lib.inference_fn(other)({"x": np.ones([1, 1], np.float32)}),
                                [[0.0]])
  gc.collect()                            # models of earlier tests, if garbage, gone first
  held, gone = len(task_lib._INFERENCE_FNS), weakref.ref(other)
  del other
  gc.collect()
  assert gone() is None                   # the function does not keep its model alive
  assert len(task_lib._INFERENCE_FNS) == held - 1     # and goes with it
