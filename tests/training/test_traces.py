"""What a run traces once: the train step, whether the host loop runs it as its first step or
inside its graph loop (one function, so one XLA compile), and a model's inference function,
shared by every evaluation and prediction of that model (training/task.inference_fn); and what
AutoGraph converts: the host loop alone."""

import gc
import json
import os
import sys
import weakref

import numpy as np
import tensorflow as tf

from tests import best_helpers
from tests import pretrain_helpers as ph
from tests import warm
from tests.hang_guard import HANG_GUARD
from training import task as task_lib
from training import trainer as trainer_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
  for rows in (3, 3, 5):                  # two batch sizes: one trace, of any length
    x = np.arange(rows, dtype=np.float32).reshape(rows, 1)
    np.testing.assert_array_equal(task_lib.inference_fn(model)({"x": x}).numpy(), 2 * x)
  assert fn.traced.experimental_get_tracing_count() == 1
  other = best_helpers.OneWeight().ensure_built()
  assert task_lib.inference_fn(other) is not fn
  np.testing.assert_array_equal(task_lib.inference_fn(other)({"x": np.ones([1, 1], np.float32)}),
                                [[0.0]])
  gc.collect()                            # models of earlier tests, if garbage, gone first
  held, gone = len(task_lib._MODEL_FUNCTIONS), weakref.ref(other)
  del other
  gc.collect()
  assert gone() is None                   # the function does not keep its model alive
  assert len(task_lib._MODEL_FUNCTIONS) == held - 1     # and goes with it


CONVERSIONS = r"""
import json, sys
from tensorflow.python.autograph.pyct import transpiler   # what AutoGraph converts, by name
converted, transform = [], transpiler.PyToPy.transform
def counting(self, fn, user_context):
  converted.append(fn.__module__ + "." + fn.__qualname__)
  return transform(self, fn, user_context)
transpiler.PyToPy.transform = counting
import tensorflow as tf
from tests import pretrain_helpers as ph
from training import task as task_lib
records, vocab, model_dir, xla = sys.argv[1:]
task = ph.tiny_task(records, int(vocab), train_steps=4, eval_record_dir=records,
                    eval_split="train", eval_batches=2)
trainer, _ = ph.train(task, model_dir, steps_per_loop=2, save_every=2, xla=xla)
batch = next(iter(task_lib.static_batches(task.dataset(None), 4)))
task_lib.inference_fn(trainer.model)(batch)
print(json.dumps(converted))
"""


def test_autograph_converts_the_host_loop_only(tmp_path, text_and_sp):
  """A run's step, its data functions, its evaluation and its model's inference function are
  plain TensorFlow ops, traced as written: AutoGraph (which rewrites a function's source, and
  every function it calls, at each new process) converts the host loop's graph loop alone. A
  fresh interpreter: AutoGraph keeps what it converted for the life of a process. (--xla=off
  and fusible build the step with the same compile_step, only jit_compile differs.)"""
  text, sp = text_and_sp
  from data_utils.tokenization import Tokenizer
  records = ph.make_records(text, sp, tmp_path / "records", max_bytes=30_000)
  result = warm.run([sys.executable, "-c", CONVERSIONS, records,
                     str(Tokenizer(sp, lower=True).vocab_size), str(tmp_path / "run"), "full"],
                    cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD)
  assert result.returncode == 0, result.stderr[-3000:]
  converted = json.loads(result.stdout.strip().splitlines()[-1])
  ours = [name for name in converted if not name.startswith(("tensorflow.", "keras."))]
  assert ours == ["training.trainer.Trainer._make_loop.<locals>.host_loop"], converted
