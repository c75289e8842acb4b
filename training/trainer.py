"""The one custom training loop, shared by pretraining and every fine-tuning task.

A task object supplies the model, the optimizer, the per-replica dataset, a
per-replica train step and (optionally) a state carried from step to step
(pretraining: the Transformer-XL memory of every batch lane). The trainer runs
`steps_per_loop` steps per host call inside one tf.function, with the step
XLA-compiled (--xla, see XLA_MODES); checkpoints every `save_every` steps (model, optimizer, step,
carried state; the data position is the step), keeps the last K, resumes
exactly, writes TensorBoard scalars and a log line with rate and ETA (training/progress.py:
both measured after the first loop of the run, which includes the compile). Its first line
says the model's size and where its weights come from (a resume, --init_checkpoint, or random).

A SIGTERM (preemption) or SIGINT (Ctrl-C) during the loop stops the run at the next host-loop
boundary with a checkpoint, one line and exit status 75 (training/preemption.py: the rules for
evaluations, checkpoint writes, second signals and several hosts).

The task interface is training/task.Task (written there once): build_model, dataset and loss,
with optional evaluate / eval_without_labels / main_metric, carried state, initialize, on_end
and export.
"""

import contextlib
import json
import os
import time

import keras
import numpy as np
import tensorflow as tf

from data_utils import fileio
from modeling import checkpoint as ckpt_lib
from modeling import ops
from training import best as best_lib
from training import distribution
from training import loss_scale
from training import optimization
from training import preemption
from training import progress

# How the train step is compiled (--xla):
#   full     the whole step is one XLA computation (jit_compile=True): the TPU path and
#            the fastest float32 step on CPU and GPU;
#   fusible  TensorFlow's kernels for matmuls (oneDNN: bf16 faster than float32 on CPUs with
#            AVX512-BF16/AMX, where XLA's CPU dot runs bf16 no faster than float32) and XLA
#            clusters for the element-wise ops between them: the fastest bf16 CPU step;
#   off      plain tf.function.
XLA_MODES = ("full", "fusible", "off")
_FUSIBLE_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_ops_to_cluster=FUSIBLE"


def use_bfloat16(flag_values):
  """Sets the mixed_bfloat16 policy (--use_bfloat16), warning where it will not pay.

  On a CPU-only run (no GPU, no --tpu / TPU strategy) where TensorFlow does not
  use oneDNN (e.g. AMD EPYC), bf16 brings no speed: under --xla=full the step
  runs at float32's speed (XLA's CPU dots), and with --xla=fusible / off its
  matmuls run on Eigen's bf16 kernels, several times slower than float32 (bench/README.md
  has the numbers).
  """
  keras.config.set_dtype_policy("mixed_bfloat16")
  f = flag_values
  if f.tpu or f.distribution_strategy == "tpu" or tf.config.list_physical_devices("GPU"):
    return
  if not ops.onednn_enabled():
    cost = ("runs no faster than float32" if f.xla == "full" else
            f"runs bf16 matmuls on Eigen with --xla={f.xla}, several times slower than float32")
    print(f"warning: --use_bfloat16 on a CPU where TensorFlow does not use oneDNN: the step {cost} "
          "(bench/README.md); drop the flag", flush=True)


def configure_xla(mode):
  """Validates `mode`; for "fusible", turns on auto-clustering of fusible ops. TensorFlow reads
  these settings when it runs its first op: entry scripts call this first thing."""
  if mode not in XLA_MODES:
    raise ValueError(f"--xla={mode}: expected one of {', '.join(XLA_MODES)}")
  ops.set_xla_mode(mode)   # which kernels the attention softmax / gather use (modeling/ops.py)
  if mode == "fusible":
    current = os.environ.get("TF_XLA_FLAGS", "")
    if _FUSIBLE_FLAGS not in current:
      os.environ["TF_XLA_FLAGS"] = (current + " " + _FUSIBLE_FLAGS).strip()
    tf.config.optimizer.set_jit("autoclustering")


def configure_determinism(enabled):
  """--deterministic: TensorFlow's op determinism (ops pick deterministic kernels or raise;
  tf.data keeps element order) and one inter-op thread. Op determinism alone is not enough
  outside full XLA: kernels of consecutive steps of a host loop then run concurrently, in an
  order that changes from run to run, and two runs drift apart in the last bits within a few
  hundred steps; one op at a time removes that. Call before TensorFlow runs its first op, next to configure_xla.
  Everything else a rerun needs is already fixed: records are read in order, fine-tuning
  shuffles are seeded, dropout draws from checkpointed seeded generators, and the data
  position of a resumed run is its step."""
  if enabled:
    tf.config.experimental.enable_op_determinism()
    tf.config.threading.set_inter_op_parallelism_threads(1)


# Test hook (tests/training/test_deterministic.py): with PAUSE_BEFORE_PUBLISH_ENV=STEP in the
# environment, once the files of checkpoint STEP are complete the trainer logs "checkpoint written, not yet
# published: PATH" and sleeps (10 minutes) before tf.train.CheckpointManager names it in its
# `checkpoint` state file (the manager runs write callbacks in order, its own last), so a test
# can SIGKILL the run inside that window; a stop request (SIGTERM, SIGINT) ends the pause, so a
# test can also signal the run there. Unset: no callback, no pause.
PAUSE_BEFORE_PUBLISH_ENV = "TRAINER_TEST_PAUSE_BEFORE_PUBLISH"
PAUSE_BEST_ENV = best_lib.PAUSE_ENV    # the same for best/'s publish points (training/best.py)
# and with PAUSE_IN_EVALUATION_ENV=STEP, the evaluation of STEP logs "evaluating step STEP" and
# sleeps before the task's evaluation runs (where a stop request abandons it).
PAUSE_IN_EVALUATION_ENV = "TRAINER_TEST_PAUSE_IN_EVALUATION"
LAST_EVAL = "last.json"                # MODEL_DIR/eval/: the last evaluation's step and results


def _save_options(step, log):
  if os.environ.get(PAUSE_BEFORE_PUBLISH_ENV) != str(step):
    return None

  def pause_before_publish(path):
    log(f"checkpoint written, not yet published: {path}")
    preemption.sleep(600)
  return tf.train.CheckpointOptions(experimental_write_callbacks=[pause_before_publish])


def _last_evaluated(model_dir):
  """The step of MODEL_DIR/eval/last.json (-1 without a readable one)."""
  path = fileio.join(model_dir, "eval", LAST_EVAL)
  try:
    step = json.loads(fileio.read_text(path)).get("step", -1) if fileio.exists(path) else -1
  except (ValueError, AttributeError):       # not JSON, not an object
    return -1
  return step if isinstance(step, int) else -1


def compile_step(mode):
  """Decorator: tf.function compiled as --xla=`mode` says (see XLA_MODES). AutoGraph off: the
  step is plain TensorFlow ops (Python control flow only on Python values), and converting its
  call tree (the task's loss, the model's heads, the optimizer) source by source costs seconds
  in every new process."""
  configure_xla(mode)
  return lambda fn: tf.function(fn, jit_compile=mode == "full", autograph=False)


_STATE_KEY = "state/.ATTRIBUTES/VARIABLE_VALUE"   # the carried state in a checkpoint


class Trainer:

  def __init__(self, task, strategy, model_dir, train_steps, steps_per_loop=10, save_every=1000,
               keep_checkpoints=5, xla="full", log=print, checkpoint_state=True,
               clock=time.monotonic):
    if steps_per_loop < 1 or train_steps < 1:
      raise ValueError("--train_steps and --steps_per_loop must be >= 1")
    self.task, self.strategy, self.model_dir = task, strategy, model_dir
    self.write_dir = model_dir       # train(): a temporary directory on a non-chief host
    self.train_steps, self.steps_per_loop = train_steps, steps_per_loop
    self.save_every, self.keep, self.xla, self.log = save_every, keep_checkpoints, xla, log
    self.checkpoint_state = checkpoint_state   # False: a resume starts from initial_state
    self.clock = clock                          # seconds, for the rate and ETA (tests: a fake)
    self.best, self.eval_history = None, []     # the best main metric so far; (step, results)
    self.eval_skipped, self._told_skipped = None, False   # why evaluation is skipped, if it is
    self.stopper = preemption.Watch()           # train(): the signals' (training/preemption.py)
    self._multi_client, self._agree = False, None   # train(): hosts agree on a stop

  # ---- set-up --------------------------------------------------------------
  def _build(self):
    # Same seed, same initial weights and dropout streams (and a resumed run
    # then restores both).
    keras.utils.set_random_seed(getattr(self.task, "seed", 0))
    with self.strategy.scope():
      self.model = self.task.build_model()
      self.model.ensure_built()
      # --use_float16: dynamic loss scaling around the task's optimizer (training/loss_scale.py)
      self.optimizer = loss_scale.wrap(self.task.build_optimizer(self.model))
      self.optimizer.build(self.model.trainable_variables)
      self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    replicas = self.strategy.num_replicas_in_sync
    # Host copy of the carried state, for checkpoints (not distributed).
    shape = [replicas] + list(self.task.state_shape()) if self.checkpoint_state else [0]
    self.state_store = tf.Variable(tf.zeros(shape, self.task.state_dtype), trainable=False,
                                   name="state_store")
    size = int(np.prod(shape)) * self.state_store.dtype.size
    if size >= 1 << 30:
      self.log(f"the carried state adds {size / 2**30:.1f} GiB to every checkpoint (pretraining: "
               "--nocheckpoint_memory leaves it out; a resume then starts from empty memory)")
    objects = dict(ckpt_lib.native_objects(self.model))
    objects.update(loss_scale.checkpoint_objects(self.optimizer))   # + the loss scale's state
    # Dropout seed-generator states (not in model.weights): resume draws the same masks.
    weight_ids = {id(v) for v in self.model.weights}
    rng_states = [v for v in self.model.variables if id(v) not in weight_ids]
    objects.update({f"rng.{i:04d}": v for i, v in enumerate(rng_states)})
    self._checkpoint_without_state = tf.train.Checkpoint(**objects, step=self.step)
    objects.update(step=self.step, state=self.state_store)
    self.checkpoint = tf.train.Checkpoint(**objects)
    self._state_restored = False
    if self.model_dir is None:            # training.stepper.Stepper without a directory
      self.manager = self.save_manager = None
      return
    # Every host resumes from model_dir; a non-chief saves into its temporary write_dir
    # (taking part in the save's collectives), which is discarded.
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, fileio.join(self.model_dir, ckpt_lib.CHECKPOINT_DIR), max_to_keep=self.keep)
    self.save_manager = self.manager if self.write_dir == self.model_dir else \
        tf.train.CheckpointManager(self.checkpoint, fileio.join(self.write_dir, ckpt_lib.CHECKPOINT_DIR),
                                   max_to_keep=self.keep)

  def _record_optimizer(self):
    """Logs the resolved optimizer settings and writes them to MODEL_DIR/optimizer.json (what
    the run used, for reports)."""
    settings = getattr(self.task, "optimizer_settings", None)
    if settings is None:
      return
    settings = settings()
    self.log(f"optimizer: {optimization.describe(settings)}")
    fileio.write_atomic(fileio.join(self.write_dir, "optimizer.json"),
                        json.dumps({"description": optimization.describe(settings),
                                    **settings}, indent=1))

  def _restore(self):
    latest = self.manager.latest_checkpoint if self.manager else None
    self.log(progress.start_line(self.task, self.model, resuming=latest))
    if latest:
      saved = self._saved_state(latest)
      if saved is None:                  # the memory as this run holds it
        ckpt_lib.read_checkpoint(self.checkpoint, latest, self.manager.checkpoints)  # 1 line
        self._state_restored = self.checkpoint_state
      else:
        ckpt_lib.read_checkpoint(self._checkpoint_without_state, latest,
                                 self.manager.checkpoints)
        self._state_restored = self._adapt_state(saved)
      self.log(f"resumed from {latest} at step {int(self.step.numpy())}")
      return True
    self.task.initialize(self.model, self.log)
    return False

  def _saved_state(self, prefix):
    """The checkpoint's carried state when its shape is not this run's (saved on another
    layout, or without memory: [0]); None when it fits (or there is none)."""
    reader = ckpt_lib.reader(prefix)
    shape = reader.get_variable_to_shape_map().get(_STATE_KEY)
    if shape is None or list(shape) == self.state_store.shape.as_list():
      return None
    return reader.get_tensor(_STATE_KEY)

  def _adapt_state(self, saved):
    """Puts a checkpoint's state of another shape into this run's: the task's
    `adapt_state(saved, replicas)` (pretraining: each lane's memory to the row now reading that
    lane, at the same global batch) or, when it cannot, empty state, said in one line. Returns
    True when the state was restored."""
    if not self.checkpoint_state:
      return False
    adapt = getattr(self.task, "adapt_state", None)
    value, why = (adapt(saved, self.strategy.num_replicas_in_sync) if adapt else
                  (None, "the task keeps no state across layouts"))
    if value is None:
      self.log(f"the checkpoint's carried state ({why}) is not restored: it starts empty")
      return False
    self.state_store.assign(value)
    self.log(f"the checkpoint's carried state {list(saved.shape)} is restored as "
             f"{list(value.shape)} ({why})")
    return True

  def _distributed_state(self, restored):
    if not restored or not self.checkpoint_state or not self._state_restored:
      return self.strategy.run(self.task.initial_state)
    store = self.state_store
    return self.strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.identity(store[ctx.replica_id_in_sync_group]))

  def _save_state(self, state):
    """The state of every replica into state_store, in replica order. A multi-worker host
    holds only its own replicas: the others' come through an all-gather (a collective: every
    host calls this at the same step)."""
    if not self.checkpoint_state:
      return
    values = self.strategy.experimental_local_results(state)
    if len(values) == self.strategy.num_replicas_in_sync:
      self.state_store.assign(tf.stack([tf.convert_to_tensor(v) for v in values]))
      return
    expanded = self.strategy.run(lambda s: tf.expand_dims(s, 0), args=(state,))
    self.state_store.assign(self.strategy.gather(expanded, axis=0))

  # ---- the loop -------------------------------------------------------------
  def _make_step(self):
    """one_step(batch, state, step) -> (loss, metrics, state): one training step of every
    replica on its per-replica batch (graph mode: call it inside a tf.function). metrics
    hold the task's, the gradient norm before clipping (of the unscaled gradients) and the
    learning rate of the step; under --use_float16 also whether it was skipped
    (training/loss_scale.py)."""
    task, model, optimizer, strategy = self.task, self.model, self.optimizer, self.strategy
    single = (strategy.num_replicas_in_sync == 1
              and not isinstance(strategy, tf.distribute.TPUStrategy))

    def compute(batch, state, step):
      with tf.GradientTape() as tape:
        loss, metrics, new_state = task.loss(model, batch, state, step, training=True)
        scaled = optimizer.scale_loss(loss) if hasattr(optimizer, "scale_loss") else loss
      grads = optimization.dense_gradients(tape.gradient(scaled, model.trainable_variables))
      metrics = dict(metrics, grad_norm=loss_scale.gradient_norm(optimizer, grads),  # unscaled
                     learning_rate=tf.cast(optimizer.learning_rate, tf.float32))
      return loss, metrics, new_state, grads

    def full_step(batch, state, step):   # compute + update, one XLA cluster (one replica)
      loss, metrics, new_state, grads = compute(batch, state, step)
      metrics = loss_scale.apply(optimizer, grads, model.trainable_variables, metrics)
      return loss, metrics, new_state

    if single:
      replica_fn = compile_step(self.xla)(full_step)
    else:                                # the update goes through the strategy's all-reduce
      compiled = compile_step(self.xla)(compute)

      def replica_fn(batch, state, step):
        loss, metrics, new_state, grads = compiled(batch, state, step)
        metrics = loss_scale.apply(optimizer, grads, model.trainable_variables, metrics)
        return loss, metrics, new_state

    def one_step(batch, state, step):
      loss, metrics, state = strategy.run(replica_fn, args=(batch, state, step))
      loss = strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
      metrics = {k: strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
                 for k, v in metrics.items()}
      return loss, metrics, state

    return one_step

  def _make_loop(self):
    step_fn = self._make_step()
    # AutoGraph writes the loop below as a graph loop; the step it calls is left as it is
    # (compile_step: plain TensorFlow ops; converting it would only cost time).
    one_step = tf.autograph.experimental.do_not_convert(
        lambda iterator, state, step: step_fn(next(iterator), state, step))

    @tf.function
    def host_loop(iterator, state, num_steps):
      # A graph loop (tf.range: one copy of the step however many steps a host call runs, as
      # TPUs need for long loops); the first step is outside it to give the sums their keys.
      # the step's number as a value, as in the loop below: one trace and one XLA compile
      # of the step serve both calls (a variable here would make a second function)
      total, sums, state = one_step(iterator, state, self.step.read_value())
      for i in tf.range(1, num_steps):
        loss, metrics, state = one_step(iterator, state, self.step + tf.cast(i, tf.int64))
        total += loss
        sums = {k: sums[k] + metrics[k] for k in sums}
      self.step.assign_add(tf.cast(num_steps, tf.int64))
      n = tf.cast(num_steps, total.dtype)
      return total / n, {k: v / tf.cast(num_steps, v.dtype) for k, v in sums.items()}, state

    return host_loop

  def _evaluate(self, step):
    """Periodic evaluation; the best checkpoint by the task's main metric is published under
    best/ with its score (training/best.py); the results go to eval/last.json."""
    if self._skip_evaluation():
      return
    # a stop request abandons the evaluation (one host only: several must stay in step); the
    # rerun evaluates this step again, as eval/last.json does not record it
    with (contextlib.nullcontext() if self._multi_client else self.stopper.abandonable()):
      if os.environ.get(PAUSE_IN_EVALUATION_ENV) == str(step):
        self.log(f"evaluating step {step}")
        preemption.sleep(600)
      results = self.task.evaluate(self.model)
    metric = self.task.main_metric
    if metric not in results:     # e.g. SquadTask.predict on a file without answers: {}
      self.eval_skipped = (f"the task's evaluation gave no {metric} (data without labels?): "
                           f"{sorted(results)}")
      self._skip_evaluation()
      return
    self.log(f"eval at step {step}: " + " ".join(f"{k} {v:.4f}" for k, v in results.items()))
    writer = tf.summary.create_file_writer(fileio.join(self.write_dir, "eval"))
    with writer.as_default(step=step):
      for k, v in results.items():
        tf.summary.scalar(k, v)
    value = results[metric]
    if best_lib.is_better(value, self.best, getattr(self.task, "lower_is_better", False)):
      best = fileio.join(self.write_dir, "best")
      best_lib.publish(best, self.model, step, results, self.log)
      self.best = value
      self.log(f"new best {metric} {value:.4f} -> {best}")
    fileio.write_atomic(fileio.join(self.write_dir, "eval", LAST_EVAL),
                        json.dumps({"step": step, **results}, indent=1))
    self.eval_history.append((step, results))

  def _skip_evaluation(self):
    """True when the task's evaluation data has no labels (task.eval_without_labels() gives
    the reason); said in one line, once per run."""
    if self.eval_skipped is None:
      check = getattr(self.task, "eval_without_labels", None)
      self.eval_skipped = (check() if check else None) or ""
    if self.eval_skipped and not self._told_skipped:
      self.log(f"evaluation skipped: {self.eval_skipped}; training goes on without a best/ "
               "checkpoint (the last weights are used)")
      self._told_skipped = True
    return bool(self.eval_skipped)

  def _resume_evaluation(self, restored, step):
    """On a resume: the recorded best score (a new best must beat it), stale entries of best/
    removed, and the restored step evaluated if the stopped run had not finished doing so (a
    step the run evaluates at: a stop checkpoint between --save_every points has none)."""
    self.best, self.eval_history = None, []
    self.eval_skipped, self._told_skipped = None, False
    if not getattr(self.task, "evaluate", None) or self._skip_evaluation():
      return
    best_lib.remove_stale(fileio.join(self.write_dir, "best"))
    if not restored:
      return
    record, ckpt = best_lib.read(fileio.join(self.model_dir, "best"))
    self.best = best_lib.score(record, self.task.main_metric)
    if self.best is not None:
      self.log(f"best so far: {self.task.main_metric} {self.best:.4f} at step "
               f"{record.get('step')} ({ckpt})")
    if self._evaluates_at(step) and _last_evaluated(self.model_dir) < step:
      self.log(f"evaluating step {step} again: the stopped run did not record its evaluation")
      self._evaluate(step)

  def _evaluates_at(self, step):
    """A step the run saves (and evaluates) at: every save_every steps and the last one."""
    return step % self.save_every == 0 or step == self.train_steps

  def _stop_agreed(self):
    """Whether to stop at this host-loop boundary: a signal here; on several hosts, on any of
    them (a scalar all-reduce every host makes at the same boundary)."""
    if not self._multi_client:
      return self.stopper.requested
    if self._agree is None:
      strategy = self.strategy

      @tf.function
      def agree(flag):
        flags = strategy.run(tf.identity, args=(flag,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, flags, axis=None) > 0
      self._agree = agree
    return bool(self._agree(tf.constant(float(self.stopper.requested))))

  def _save(self, step, state, counted=True):
    """The checkpoint of `step` (model, optimizer, carried state, dropout streams). A stop
    checkpoint between save points is not `counted`: the checkpoint's save counter stays at the
    run's regular saves, so later checkpoints have the bytes of a run never stopped."""
    self._save_state(state)
    if not counted:
      self.checkpoint.save_counter.assign_sub(1)        # the manager adds 1 again
    path = self.save_manager.save(checkpoint_number=step, options=_save_options(step, self.log))
    self.log(f"saved {path}")

  def train(self):
    """Runs to train_steps (resuming if a checkpoint exists); returns the loss history. A
    SIGTERM / SIGINT stops it with a checkpoint, one line and preemption.Stopped (a SystemExit
    with status preemption.EXIT_PREEMPTED); the previous signal handlers are back afterwards."""
    self._multi_client, self._agree = distribution.is_multi_client(self.strategy), None
    with distribution.write_dir(self.strategy, self.model_dir) as write_dir:
      self.write_dir = write_dir
      with preemption.watch() as self.stopper:
        try:
          history = self._train()
        except preemption.Abandoned:       # an evaluation cut short: its checkpoint is published
          preemption.stop(int(self.step.numpy()), self.log)
      self.task.on_end(self.model, self.write_dir, self.log)   # exports: the chief's only
      return history

  def _iterator(self, start_step):
    return iter(self.strategy.distribute_datasets_from_function(
        lambda ctx: self.task.dataset(ctx, skip_batches=start_step)))

  def _train(self):
    self._build()
    # The host loop is traced before anything a resume does differently (restoring, a pending
    # evaluation): TensorFlow names a traced function by a process-wide counter, the name is
    # part of the XLA compilation cache's key (training/compile_cache.py), so a resumed or
    # preempted run loads the program its fresh run compiled instead of compiling it again.
    iterator = self._iterator(0)
    host_loop = self.host_loop = self._make_loop()
    host_loop.get_concrete_function(iterator, self.strategy.run(self.task.initial_state),
                                    tf.TensorSpec([], tf.int32))
    restored = self._restore()
    self._record_optimizer()
    start_step = int(self.step.numpy())
    if start_step:                               # a resume reads on from its step
      iterator = self._iterator(start_step)
    self._resume_evaluation(restored, start_step)
    state = self._distributed_state(restored)
    writer = tf.summary.create_file_writer(fileio.join(self.write_dir, "train"))
    history, step = [], start_step
    pace = progress.Progress(start_step, self.train_steps)
    while step < self.train_steps:
      n = min(self.steps_per_loop, self.train_steps - step,
              self.save_every - step % self.save_every)
      t = self.clock()
      loss, metrics, state = host_loop(iterator, state, tf.constant(n, tf.int32))
      loss = float(loss)
      if not np.isfinite(loss):
        raise FloatingPointError(f"loss became {loss} at step {step + n}")
      step += n
      now = self.clock()
      loop = pace.loop(step, now - t, now)
      metrics = dict(metrics)
      lr = float(metrics.pop("learning_rate"))    # the mean over the loop's steps
      metrics = loss_scale.loop_metrics(self.optimizer, metrics, n)   # float16: skips, scale
      history.append((step, loss))
      with writer.as_default(step=step):
        tf.summary.scalar("loss", loss)
        tf.summary.scalar("learning_rate", lr)
        if not loop.compile:      # the first loop's time is mostly the compile
          tf.summary.scalar("tokens_per_second", self.task.tokens_per_step * loop.per_second)
        for k, v in metrics.items():
          tf.summary.scalar(k, float(v))
      extra = " ".join(f"{k} {v}" if isinstance(v, int) else f"{k} {float(v):.3f}"
                       for k, v in sorted(metrics.items()))     # ints: loss-scale counts
      self.log(f"step {step}/{self.train_steps} loss {loss:.4f} {extra} lr {lr:.2e} "
               + progress.pace_text(loop, n, self.task.tokens_per_step))
      # a stop request during the host loop: its steps are done, saved here; during the save:
      # it completes, then the run stops (several hosts: at the next boundary, agreed)
      stop = self._stop_agreed()
      if stop or self._evaluates_at(step):
        self._save(step, state, counted=self._evaluates_at(step))
        stop = stop or (self.stopper.requested and not self._multi_client)
        if not stop and getattr(self.task, "evaluate", None):
          self._evaluate(step)
        stop = stop or (self.stopper.requested and not self._multi_client)
      if stop:
        writer.flush()
        preemption.stop(step, self.log)
    writer.flush()
    if self._stop_agreed():    # asked before the loop (a rerun of a finished run)
      preemption.stop(step, self.log)
    return history
