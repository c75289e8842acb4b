"""Held-out evaluation of a pretraining run (run_pretrain.py --eval_record_dir): the objective's
losses on records written by data_utils/create_pretrain_data.py from text the run never trains
on, at every checkpoint (the trainer logs them, writes them to TensorBoard under eval/ and keeps
the best checkpoint by `MAIN_METRIC` under best/).

The held-out records must be written with the training records' settings (check_records): the
same rows, lanes and targets per row, so a held-out loss is the training loss's twin.
"""

import dataclasses

import tensorflow as tf

from data_utils import lanes
from data_utils import pipeline
from data_utils import record_format
from modeling import losses

# The metric best/ is kept by: the lowest held-out loss of the predicted targets.
MAIN_METRIC = "lm_loss"
LOWER_IS_BETTER = True
# RecordParams fields that say how lanes are stored, not what the data is
LAYOUT_KEYS = ("bsz_per_host", "num_core_per_host")


def check_records(config, vocab_size, train_params=None):
  """The held-out records of `config` (a PretrainConfig with eval_record_dir) checked before
  any step: every record parameter training must match (record_format.find_records' one-line
  error otherwise), and every parameter of the training records' RecordParams
  (`train_params`, when the run has records). Returns the number of per-replica batches one
  evaluation reads."""
  c = config
  where = f"--eval_record_dir={c.eval_record_dir} (split {c.eval_split})"
  try:
    params, files, file_steps = record_format.find_records(
        c.eval_record_dir, c.eval_split, c.verify_records, per_file=True, seq_len=c.seq_len,
        reuse_len=c.reuse_len, num_predict=c.num_predict, bi_data=c.bi_data,
        vocab_size=vocab_size)
    layout = pipeline.plan_layout(params, len(files), c.bsz_per_host, c.num_core_per_host, 1)
  except (FileNotFoundError, ValueError) as e:
    raise type(e)(f"{where}: {e}") from None
  num_batch = lanes.steps_per_epoch(layout, file_steps)
  if train_params is not None:   # the lanes may differ: the reader assembles the rows
    for name, value in dataclasses.asdict(train_params).items():
      if name not in LAYOUT_KEYS and getattr(params, name) != value:
        raise ValueError(f"{where}: the held-out records have {name}={getattr(params, name)!r}, "
                         f"the training records {name}={value!r}: write them with the same "
                         "create_pretrain_data.py settings")
  return min(c.eval_batches * c.num_core_per_host, num_batch * c.num_core_per_host)


def objective_losses(task, logits, target, target_mask, batch, extra):
  """(total loss, {metric: value}) of one per-replica batch, the training step's: "lm_loss"
  (mean cross-entropy over real targets), the objective's extra losses by name, and the total
  (LM loss + weighted extras). logits [B, P, V]; target, target_mask [B, P] (None: all real)."""
  lm = losses.lm_loss(logits, target, target_mask)
  metrics = {"lm_loss": lm}
  total = lm
  for name, value, weight in task.objective.extra_losses(task, batch, extra):
    metrics[name] = value
    total = total + weight * value
  return total, metrics


def lm_accuracy(logits, target, target_mask=None):
  """Fraction of real targets whose most probable token is the target (logits [B, P, V],
  target [B, P], target_mask [B, P] or None = all real): a scalar float32."""
  right = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                           tf.cast(target, tf.int32)), tf.float32)
  if target_mask is None:
    return tf.reduce_mean(right)
  mask = tf.cast(target_mask, tf.float32)
  return tf.reduce_sum(right * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)


class HeldOut:
  """One task's held-out evaluation: `__call__(model)` -> {"loss", "lm_loss", "lm_accuracy",
  the objective's extra losses}: each the mean over the evaluation's per-replica batches of
  what the training step computes on a batch.

  Deterministic, the same batches and draws every time: the first batches of the records in
  file order (--eval_batches steps of bsz_per_host rows), dropout off; the memory (XLNet
  objectives with mem_len > 0) is fresh at every evaluation, zeros as a training run starts
  (task.initial_state), and carried from batch to batch per lane, each replica's lanes their
  own, as in training; the seeded draws of mlm and
  mpnet (80/10/10 corruption, MPNet's permutation) use the batch's index in the evaluation as
  the step, so every evaluation draws the same.
  """

  def __init__(self, task, num_elements):
    self.task, self.num_elements = task, num_elements
    self._step = None

  def dataset(self):
    c = self.task.config
    ds, _, _ = pipeline.pretrain_dataset(
        c.eval_record_dir, c.seq_len, c.reuse_len, c.num_predict, c.bsz_per_host, c.bi_data,
        c.num_core_per_host, vocab_size=self.task.vocab_size, split=c.eval_split, repeat=False,
        verify="size")                       # checked (and hashed, if at all) in __init__
    return ds.take(self.num_elements)

  def _make_step(self, model):
    task = self.task

    @tf.function(reduce_retracing=True, autograph=False)     # plain TensorFlow ops
    def step(batch, state, index):
      logits, target, target_mask, extra, new_state = task.predict(model, batch, state, index,
                                                                   training=False)
      total, metrics = objective_losses(task, logits, target, target_mask, batch, extra)
      metrics = dict(metrics, loss=total, lm_accuracy=lm_accuracy(logits, target, target_mask))
      return metrics, tf.cast(new_state, task.state_dtype)
    return step

  def __call__(self, model):
    if self._step is None or self._step[0] is not model:
      self._step = (model, self._make_step(model))
    step, c = self._step[1], self.task.config
    states = [self.task.initial_state() for _ in range(c.num_core_per_host)]
    sums, n = {}, 0
    with pipeline.named_record_errors(c.eval_record_dir, c.eval_split):
      for i, batch in enumerate(self.dataset()):
        lane = i % c.num_core_per_host      # consecutive elements: the replicas of one step
        metrics, states[lane] = step(batch, states[lane], tf.constant(i, tf.int64))
        for k, v in metrics.items():
          sums[k] = sums.get(k, 0.0) + float(v)
        n += 1
    return {k: v / n for k, v in sorted(sums.items())}
