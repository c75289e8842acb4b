"""Pretraining as a task of the shared trainer: the records, the carried state, the seeds and
the LM loss, the same for every objective; what differs (the model, its inputs, extra losses,
the export) is the objective's (pretraining/plm.py, mlm.py, mpnet.py; plm, mlm, mpnet).

The memory of each batch lane is carried from step to step when the run config has one
(mem_len > 0; the XLNet objectives). With held-out records (PretrainConfig.eval_record_dir) the
task evaluates at every checkpoint (pretraining/evaluation.py).

The export (MODEL_DIR/export) is one unit: the objective's weights and config, the tokenizer the
records were written with (--sp_model: spiece.model + tokenizer_info.json) and, for XLNet, the
encoder SavedModel. `EXPORT_RECORD` (export.json: the step, the parts, the tokenizer's sha256)
is removed before a re-export starts and written after every part is in place (each written
under a temporary name and renamed), so it names the step all parts were made from; a rerun
whose latest checkpoint or tokenizer differs from the record re-exports every part.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from data_utils import fileio
from data_utils import lanes
from data_utils import pipeline
from modeling import checkpoint as ckpt_lib
from modeling import families, tokenizer_files
from pretraining import evaluation, objective, objectives
from training.task import OptimizerConfig, Task

OBJECTIVES = objectives.NAMES


@dataclasses.dataclass(kw_only=True)
class PretrainConfig(OptimizerConfig):
  record_dir: str = None         # None: batches come from elsewhere (training/stepper.py)
  seq_len: int = 512
  reuse_len: int = 256
  num_predict: int = 85
  bsz_per_host: int = 32
  num_core_per_host: int = 1
  bi_data: bool = True
  objective: str = "plm"
  mpnet_mode: str = "mpnet"      # mpnet | plm (- position compensation) | mlm (- both)
  mpnet_permute: bool = True     # False: predictions in position order (- permutation)
  nsp_weight: float = 0.0
  num_hosts: int = 1
  verify_records: str = "auto"   # record files against their info: size | sha256 | auto
  sp_model: str = None           # the records' SentencePiece model: exported with the model
  uncased: bool = False
  eval_record_dir: str = None    # held-out records (pretraining/evaluation.py); None: no evaluation
  eval_split: str = "valid"      # their split name (create_pretrain_data.py --split)
  eval_batches: int = 100        # steps' worth of held-out rows (bsz_per_host each) per evaluation


EXPORT_RECORD = objective.EXPORT_RECORD
latest_step = ckpt_lib.latest_step
read_export_record = objective.read_export_record
remove_export_record = objective.remove_export_record
write_export_record = objective.write_export_record


class PretrainTask(Task):
  """The trainer's Task (training/task.py) for every objective; the objective's part is
  `self.objective` (pretraining/objective.py), chosen by config.objective."""

  recipe_script = "pretrain"
  main_metric = evaluation.MAIN_METRIC   # with --eval_record_dir: best/ by held-out loss
  lower_is_better = evaluation.LOWER_IS_BETTER

  @property
  def family(self):
    return self.objective.family

  def __init__(self, config, model_config, run_config, init_checkpoint=None, export_hf_dir=None):
    self.objective = objectives.get(config.objective)
    run_config = self.objective.run_config(run_config)
    vocab = families.get(self.family).vocab_size(model_config)
    run_config = records_run_config(run_config, config)
    self.config, self.model_config, self.run_config = config, model_config, run_config
    self.init_checkpoint = init_checkpoint
    # the config against the rows: MPNet's positions and (records: SentencePiece) its pad id
    families.get(self.family).check_rows(
        model_config, config.seq_len, "--seq_len",
        pad_id=_records_pad_id() if config.record_dir else None)
    self.seed = config.seed
    self.per_replica = config.bsz_per_host // config.num_core_per_host
    self.tokens_per_step = config.bsz_per_host * config.num_hosts * config.seq_len
    # Fail early, with the records' own explanation, if the flags do not match or a record
    # file does not match its info (record_format.find_records), before any step runs.
    train_params = None
    if config.record_dir:
      _, train_params, _ = pipeline.pretrain_dataset(
          config.record_dir, config.seq_len, config.reuse_len, config.num_predict,
          config.bsz_per_host, config.bi_data, config.num_core_per_host, vocab_size=vocab,
          num_hosts=config.num_hosts, verify=config.verify_records)
    self.vocab_size, self.train_params = vocab, train_params
    if config.eval_record_dir:   # the trainer evaluates a task whose `evaluate` is set
      if config.eval_batches < 1:
        raise ValueError(f"--eval_batches={config.eval_batches}: must be at least 1")
      self.evaluate = evaluation.HeldOut(
          self, evaluation.check_records(config, vocab, train_params))
    self.export_hf_dir = export_hf_dir
    if export_hf_dir:   # a config Hugging Face cannot hold fails now, not after training
      families.hf_architecture(self.build_model())

  # ---- model and optimizer -----------------------------------------------------------
  def build_model(self):
    return self.objective.build_model(self)

  # ---- data and state ----------------------------------------------------------------
  def dataset(self, input_context, skip_batches=0):
    """This host's per-replica batches (one input pipeline per host: MultiWorkerMirrored and
    TPU pods call this on every host). Host h reads its rows' lanes (data_utils/lanes.py) and
    hands consecutive elements to its num_core_per_host replicas, so each replica's rows stay
    the same lanes from step to step, whatever layout the records were written on."""
    c = self.config
    if not c.record_dir:
      raise ValueError("this PretrainTask has no record_dir: feed its batches with "
                       "training.stepper.Stepper")
    host_id = input_context.input_pipeline_id if input_context else 0
    num_hosts = input_context.num_input_pipelines if input_context else 1
    replicas = input_context.num_replicas_in_sync if input_context else 1
    if replicas != num_hosts * c.num_core_per_host:
      raise ValueError(f"the strategy has {replicas} replicas on {num_hosts} host(s) but "
                       f"--num_core_per_host={c.num_core_per_host} replicas per host")
    self.tokens_per_step = c.bsz_per_host * num_hosts * c.seq_len
    ds, _, _ = pipeline.pretrain_dataset(
        c.record_dir, c.seq_len, c.reuse_len, c.num_predict, c.bsz_per_host, c.bi_data,
        c.num_core_per_host, vocab_size=self.vocab_size, host_id=host_id,
        num_hosts=num_hosts, skip_steps=skip_batches,
        verify="size")                     # hashed (if at all) in __init__
    return ds

  def state_shape(self):
    mem = self.run_config.mem_len
    if not mem:
      return [1]
    return [self.model_config.n_layer, self.per_replica, mem, self.model_config.d_model]

  def adapt_state(self, saved, replicas):
    """A checkpoint's memory saved on another layout, for this run's (the trainer's resume):
    saved [replicas', n_layer, rows', mem_len, d_model] -> ([replicas, n_layer, rows, mem_len,
    d_model], why), each lane's memory moved to the row that now reads that lane
    (data_utils/lanes.py); (None, why) when the global batch (so the data position), the model
    or the memory length differ, or nothing was saved."""
    want = self.state_shape()
    if len(want) == 1:                 # no memory carried: a placeholder
      return np.zeros([replicas] + want, saved.dtype), "no memory carried"
    if saved.size == 0:
      return None, "saved without memory, --nocheckpoint_memory"
    if saved.ndim != 5 or [saved.shape[1]] + list(saved.shape[3:]) != [want[0]] + want[2:]:
      return None, f"saved as {list(saved.shape)}: another model or --mem_len"
    old_batch, batch = saved.shape[0] * saved.shape[2], replicas * self.per_replica
    if old_batch != batch or self.train_params is None:
      return None, f"saved at a global batch of {old_batch}, this run's is {batch}"
    p = self.train_params

    def rows(num_replicas, per_replica):   # record positions of the replicas' rows, in order
      return lanes.plan(p.bsz_per_host, batch // p.bsz_per_host + 1, 1, num_replicas,
                        per_replica, p.bi_data, p.num_core_per_host).rows[0].ravel()
    old_rows = rows(saved.shape[0], saved.shape[2])
    by_row = np.moveaxis(saved, 2, 1).reshape((old_batch,) + saved.shape[1:2] + saved.shape[3:])
    where = {int(pos): i for i, pos in enumerate(old_rows)}
    moved = by_row[[where[int(pos)] for pos in rows(replicas, self.per_replica)]]
    value = np.moveaxis(moved.reshape((replicas, self.per_replica) + moved.shape[1:]), 1, 2)
    return value, (f"saved on {saved.shape[0]} replica(s) of {saved.shape[2]} rows: each lane's "
                   "memory to the row reading it now")

  # ---- the objective -------------------------------------------------------------------
  def step_seed(self, step):
    """A stateless seed per (run seed, replica, step): resumed runs draw the same."""
    replica = tf.distribute.get_replica_context()
    replica_id = tf.cast(replica.replica_id_in_sync_group if replica else 0, tf.int64)
    return tf.stack([tf.cast(self.config.seed, tf.int64) * 1_000_003 + replica_id,
                     tf.cast(step, tf.int64)])

  def predict(self, model, batch, state, step, training=True):
    """The objective's forward pass on one batch of the input pipeline.

    Returns (logits [B, P, V], target [B, P], target_mask [B, P] or None, extra, new_state);
    extra holds what an analysis needs to know which inputs each prediction could see:
    "query_pos" [B, P] (positions of the predictions, MPNet) and "kind" (80/10/10 draw of
    each prediction's input copy: [B, P] for MPNet, [B, L] for mlm).
    """
    return self.objective.predict(self, model, batch, state, step, training)

  def loss(self, model, batch, state, step, training=True):
    logits, target, target_mask, extra, new_state = self.predict(model, batch, state, step,
                                                                 training)
    total, metrics = evaluation.objective_losses(self, logits, target, target_mask, batch, extra)
    return total / self.replicas(), metrics, tf.cast(new_state, self.state_dtype)

  def tokenizer(self):
    """The records' tokenizer (modeling/tokenizer_files.Source) or None without --sp_model."""
    return tokenizer_files.Source.of(self.config.sp_model, None, self.config.uncased)

  def on_end(self, model, model_dir, log):
    tokenizer = self.tokenizer()
    if self.export_hf_dir:   # XLNetLMHeadModel / MPNetForMaskedLM
      families.export_hf(model, self.export_hf_dir, log, tokenizer=tokenizer)
    export_dir = fileio.join(model_dir, "export")
    step = latest_step(model_dir)
    parts = self.export_parts(tokenizer)
    want = {"step": step, "objective": self.objective.name, "parts": parts,
            "tokenizer": tokenizer.sha256() if tokenizer else None}
    if read_export_record(export_dir) == want and all(
        fileio.exists(fileio.join(export_dir, p)) for p in parts):
      log(f"{export_dir}: the export of step {step} is current")
      return
    remove_export_record(export_dir)       # incomplete until every part is written again
    self.objective.export(self, model, export_dir, log)
    if tokenizer is not None:
      hf = self.family if self.objective.exports_hf_layout else None   # MPNet: an HF directory
      tokenizer_files.write(export_dir, tokenizer, hf, log)
    if self.objective.exports_encoder and tokenizer is not None:
      self.objective.export_encoder(self, model_dir, tokenizer.path, tokenizer.uncased, log)
    write_export_record(export_dir, want)   # last: names the step of every part

  def export_parts(self, tokenizer):
    """The names the export holds (the objective's files, the tokenizer's, the SavedModel)."""
    parts = list(self.objective.export_files)
    if tokenizer is not None:
      parts += tokenizer_files.written_names(
          tokenizer, self.family if self.objective.exports_hf_layout else None)
      if self.objective.exports_encoder:
        parts.append("saved_model")
    return parts


def records_run_config(run_config, config):
  """`run_config` with the records' reuse_len and bi_data (`config`, a PretrainConfig) where it
  leaves them unset (None); a set value that differs is refused (ValueError, one line naming
  both), never replaced: the model would otherwise cache or position its memory otherwise than
  the records were laid out for."""
  for name in ("reuse_len", "bi_data"):
    given, records = getattr(run_config, name), getattr(config, name)
    if given is not None and given != records:
      raise ValueError(f"RunConfig.{name}={given!r} but PretrainConfig.{name}={records!r} (the "
                       f"records'): give the same value, or leave RunConfig.{name} unset (None)")
  return dataclasses.replace(run_config, reuse_len=config.reuse_len, bi_data=config.bi_data)


def _records_pad_id():
  from data_utils.tokenization import PAD_ID   # the records: SentencePiece, XLNet's symbols
  return PAD_ID
