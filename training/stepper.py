"""Step-level training from in-memory batches: the trainer's own step, one call at a time.

For step-by-step experiments and parity checks: no records, no tokenizer files, no
distribution strategy. The step is exactly `Trainer`'s (the task's loss, the XLA-compiled
forward/backward and update, the task's optimizer and recipe, the carried state), so what a
Stepper shows is what run_pretrain.py / run_classifier.py / ... do.

  from modeling.run_config import RunConfig
  from modeling.xlnet.config import XLNetConfig
  from pretraining.task import PretrainConfig, PretrainTask
  from training.stepper import Stepper

  task = PretrainTask(PretrainConfig(seq_len=8, reuse_len=4, num_predict=2, bsz_per_host=2,
                                     bi_data=False, learning_rate=1e-3, train_steps=8),
                      XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                                  n_token=40),
                      RunConfig(dropout=0.0, dropatt=0.0, mem_len=4))
  stepper = Stepper(task)                      # builds the model and optimizer, seed task.seed
                                               # (log=None: says nothing)
  stepper.load_weights(release_named_arrays)   # optional: {release name: array}
  out = stepper.step(batch)                    # {"loss", "learning_rate", "grad_norm", ...}
  stepper.weights()                            # {release name: np.ndarray} (MPNet: HF names)
  stepper.state                                # carried memory [n_layer, B, mem_len, D]
  stepper.save()                               # with model_dir: a checkpoint at this step;
  Stepper(task, model_dir=same_dir)            # resumes from it (weights, optimizer, state)

A batch is a dict of arrays, the task's training rows (one replica's batch):
  PretrainTask (plm / mlm): input_ids [B, L] int32, seg_ids [B, L] int32, input_mask [B, L]
    float32 (1 = padding), perm_mask [B, L, L] float32 (1 = i may not see j), target_mapping
    [B, P, L] float32 (one-hot rows, zero rows for padding), target [B, P] int32, target_mask
    [B, P] float32, input_k [B, L], input_q [B, L] float32 (1 = target), label [B] int32 (NSP);
    mpnet adds is_masked [B, L] bool and rank [B, L] int32 (data_utils/pipeline.expand makes
    all of these from the records).
  ClassifierTask: input_ids [B, L], seg_ids [B, L], input_mask [B, L], label [B] (float32 for
    regression). RaceTask: the same with [B, 4, L] rows. SquadTask: finetuning/squad.py's
    training features (input_ids, seg_ids, input_mask, p_mask, cls_index, start_positions,
    end_positions, is_impossible).
"""

import numpy as np
import tensorflow as tf

from training import trainer as trainer_lib


class Stepper:
  """Runs a task's training step on batches given one at a time (see the module docstring).

  task: any trainer task (PretrainTask, ClassifierTask, RaceTask, SquadTask); its config
    need not name any data (record_dir, data_dir, sp_model may be None).
  model_dir: where save() writes checkpoints and from where a new Stepper resumes (local or a
    tf.io.gfile URL); None: no checkpoints.
  xla: "full" (the default, as training runs: one XLA computation), "fusible" or "off".
  log: where it says what it loaded (one line each: the model's size and where its weights
    come from, a resume, the task's init_checkpoint with what it filled, load_weights; print by
    default); None says nothing.
  """

  def __init__(self, task, model_dir=None, xla="full", log=print):
    self.task = task
    self.log = log or (lambda message: None)
    self.trainer = trainer_lib.Trainer(task, tf.distribute.get_strategy(), model_dir,
                                       task.config.train_steps, xla=xla, log=self.log)
    self.trainer._build()
    self.resumed = self.trainer._restore()
    self.model, self.optimizer = self.trainer.model, self.trainer.optimizer
    self._state = self.trainer._distributed_state(self.resumed)
    step_fn = self.trainer._make_step()
    global_step = self.trainer.step

    @tf.function(reduce_retracing=True, autograph=False)     # plain TensorFlow ops
    def run(batch, state):
      loss, metrics, new_state = step_fn(batch, state, global_step)
      global_step.assign_add(1)
      return loss, metrics, new_state

    self._run = run

  @property
  def step_count(self):
    """Steps taken so far (restored by a resume)."""
    return int(self.trainer.step.numpy())

  def step(self, batch):
    """One optimizer step on `batch`; returns the step's loss, learning rate, gradient norm
    (before clipping) and the task's other metrics, as Python floats."""
    batch = {k: tf.convert_to_tensor(v) for k, v in batch.items()}
    loss, metrics, self._state = self._run(batch, self._state)
    return {"loss": float(loss), **{k: float(v) for k, v in metrics.items()}}

  @property
  def state(self):
    """The carried state after the last step (pretraining: memory [n_layer, B, M, D])."""
    return np.asarray(self._state)

  def _named(self):
    return self.model.reference_variables()

  def weights(self):
    """{reference name: array}: the release's TF1 names (XLNet), Hugging Face names (MPNet,
    in this project's layout: kernels [in, out])."""
    return {name: var.numpy() for name, var in self._named().items()}

  def load_weights(self, values):
    """Assigns {reference name: array}; every name must exist, shapes must match. Says how
    many of the model's variables it set (a partial load names what keeps its values)."""
    named = self._named()
    unknown = sorted(set(values) - set(named))
    if unknown:
      raise ValueError(f"no variable called {unknown[0]} ({len(unknown)} unknown names)")
    for name, value in values.items():
      var = named[name]
      if tuple(var.shape) != tuple(np.shape(value)):
        raise ValueError(f"{name}: shape {tuple(np.shape(value))}, the model's is "
                         f"{tuple(var.shape)}")
      var.assign(np.asarray(value, var.dtype))
    kept = sorted(set(named) - set(values))
    rest = (f"; {len(kept)} keep their values ({', '.join(kept[:3])}"
            f"{', ...' if len(kept) > 3 else ''})" if kept else "")
    self.log(f"load_weights: set {len(values)} of {len(named)} variables{rest}")

  def save(self):
    """Writes a checkpoint of everything a resume needs (weights, optimizer, step, carried
    state, dropout generators) into model_dir/ckpt; returns its path."""
    if self.trainer.save_manager is None:
      raise ValueError("Stepper.save needs a model_dir")
    self.trainer._save_state(self._state)
    return self.trainer.save_manager.save(checkpoint_number=self.step_count)
