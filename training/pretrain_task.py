"""XLNet pretraining as a task of the shared trainer: objectives plm, mlm and mpnet.

plm: the two-stream permutation LM on the stored factorization order.
mlm: "DAE + Transformer-XL" of the XLNet ablation: the stored target positions
     are corrupted BERT-style (80% <mask>, 10% random token, 10% kept; seeded,
     stateless, so a resumed run draws the same), predicted from the content
     stream; no permutation.
mpnet: MPNet (modeling/mpnet_pretrain.py) on the same records, with the ablation
     switches mpnet_mode (mpnet / plm / mlm) and mpnet_permute.
plm and mlm carry the memory of each batch lane from step to step, and can add a
next-sentence loss on the stored A/B label (--nsp_weight).
"""

import dataclasses

import tensorflow as tf

from data_utils import fileio
from data_utils import pipeline
from data_utils.tokenization import MASK_ID
from modeling import checkpoint, hf_xlnet, losses, mpnet, mpnet_pretrain
from modeling.models import XLNetPretrainModel
from training.task import OptimizerConfig, Task

OBJECTIVES = ("plm", "mlm", "mpnet")


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


class PretrainTask(Task):
  """See training/trainer.py for the interface."""

  recipe_script = "pretrain"

  @property
  def family(self):
    return "mpnet" if self.config.objective == "mpnet" else "xlnet"

  def __init__(self, config, model_config, run_config, init_checkpoint=None, export_hf_dir=None):
    if config.objective not in OBJECTIVES:
      raise ValueError(f"--objective must be one of {OBJECTIVES}, got {config.objective!r}")
    self.mpnet = config.objective == "mpnet"
    if self.mpnet:   # MPNet: no memory; the model config is an MPNetConfig
      run_config = dataclasses.replace(run_config, mem_len=0)
    vocab = model_config.vocab_size if self.mpnet else model_config.n_token
    if run_config.mem_len and run_config.reuse_len != config.reuse_len:
      run_config = dataclasses.replace(run_config, reuse_len=config.reuse_len)
    run_config = dataclasses.replace(run_config, bi_data=config.bi_data)
    self.config, self.model_config, self.run_config = config, model_config, run_config
    self.init_checkpoint = init_checkpoint
    self.seed = config.seed
    self.per_replica = config.bsz_per_host // config.num_core_per_host
    self.tokens_per_step = config.bsz_per_host * config.num_hosts * config.seq_len
    # Fail early, with the records' own explanation, if the flags do not match or a record
    # file does not match its info (record_format.find_records), before any step runs.
    if config.record_dir:
      pipeline.pretrain_dataset(config.record_dir, config.seq_len, config.reuse_len,
                                config.num_predict, config.bsz_per_host, config.bi_data,
                                config.num_core_per_host, vocab_size=vocab,
                                verify=config.verify_records)
    self.vocab_size = vocab
    self.export_hf_dir = export_hf_dir
    if export_hf_dir:   # a config Hugging Face cannot hold fails now, not after training
      hf_xlnet.architecture(self.build_model())

  # ---- model and optimizer -----------------------------------------------------------
  def build_model(self):
    if self.mpnet:
      return mpnet_pretrain.MPNetPretrainModel(self.model_config, mode=self.config.mpnet_mode)
    return XLNetPretrainModel(self.model_config, self.run_config, nsp=self.config.nsp_weight > 0)

  # ---- data and state ----------------------------------------------------------------
  def dataset(self, input_context, skip_batches=0):
    """This host's per-replica batches (one input pipeline per host: MultiWorkerMirrored and
    TPU pods call this on every host). Host h reads shards h, h + hosts, ... (pipeline.host_files)
    and hands consecutive elements to its num_core_per_host replicas, as the records are laid
    out, so each replica's rows stay the same lanes from step to step."""
    c = self.config
    if not c.record_dir:
      raise ValueError("this PretrainTask has no record_dir: feed its batches with "
                       "training.stepper.Stepper")
    host_id = input_context.input_pipeline_id if input_context else 0
    num_hosts = input_context.num_input_pipelines if input_context else 1
    replicas = input_context.num_replicas_in_sync if input_context else 1
    if replicas != num_hosts * c.num_core_per_host:
      raise ValueError(f"the strategy has {replicas} replicas on {num_hosts} host(s) but the "
                       f"records are laid out for --num_core_per_host={c.num_core_per_host} "
                       "replicas per host")
    self.tokens_per_step = c.bsz_per_host * num_hosts * c.seq_len
    ds, _, _ = pipeline.pretrain_dataset(
        c.record_dir, c.seq_len, c.reuse_len, c.num_predict, c.bsz_per_host, c.bi_data,
        c.num_core_per_host, vocab_size=self.vocab_size, host_id=host_id,
        num_hosts=num_hosts, skip_batches=skip_batches * c.num_core_per_host,
        verify="size")                     # hashed (if at all) in __init__
    return ds

  def state_shape(self):
    mem = self.run_config.mem_len
    if not mem:
      return [1]
    return [self.model_config.n_layer, self.per_replica, mem, self.model_config.d_model]

  # ---- the objective -------------------------------------------------------------------
  def _seed(self, step):
    """A stateless seed per (run seed, replica, step): resumed runs draw the same."""
    replica = tf.distribute.get_replica_context()
    replica_id = tf.cast(replica.replica_id_in_sync_group if replica else 0, tf.int64)
    return tf.stack([tf.cast(self.config.seed, tf.int64) * 1_000_003 + replica_id,
                     tf.cast(step, tf.int64)])

  def _corrupt(self, batch, step):
    """BERT's 80/10/10 at the target positions, from a stateless seeded draw.
    Returns (corrupted ids [B, L], kind [B, L]: mpnet_pretrain.MASKED / RANDOM / KEPT)."""
    ids = batch["input_ids"]
    kind, random_ids = mpnet_pretrain.corruption(tf.shape(ids), self._seed(step),
                                                 self.model_config.n_token)
    target = batch["input_q"] > 0
    corrupted = tf.where(kind == mpnet_pretrain.MASKED, MASK_ID,
                         tf.where(kind == mpnet_pretrain.RANDOM, random_ids, ids))
    return tf.where(target, corrupted, ids), tf.where(target, kind, mpnet_pretrain.KEPT)

  def predict(self, model, batch, state, step, training=True):
    """The objective's forward pass on one batch of the input pipeline.

    Returns (logits [B, P, V], target [B, P], target_mask [B, P] or None, extra, new_state);
    extra holds what an analysis needs to know which inputs each prediction could see:
    "query_pos" [B, P] (positions of the predictions, MPNet) and "kind" (80/10/10 draw of
    each prediction's input copy: [B, P] for MPNet, [B, L] for mlm).
    """
    c = self.config
    if self.mpnet:
      inputs = mpnet_pretrain.build_inputs(
          batch["input_ids"], batch["is_masked"], batch["rank"], c.num_predict, self._seed(step),
          mode=c.mpnet_mode, permute=c.mpnet_permute, vocab_size=self.vocab_size)
      extra = {"query_pos": inputs["query_pos"], "kind": inputs["kind"]}
      return model(inputs, training=training), inputs["targets"], None, extra, state
    mems = state if self.run_config.mem_len else None
    inputs, extra = dict(batch), {}
    if c.objective == "mlm":
      inputs["input_ids"], extra["kind"] = self._corrupt(batch, step)
    out = model(inputs, mems=mems, training=training, objective=c.objective)
    extra["nsp_logits"] = out.get("nsp_logits")
    new_state = out["new_mems"] if self.run_config.mem_len else state
    return out["logits"], batch["target"], batch["target_mask"], extra, new_state

  def loss(self, model, batch, state, step, training=True):
    logits, target, target_mask, extra, new_state = self.predict(model, batch, state, step,
                                                                 training)
    lm = losses.lm_loss(logits, target, target_mask)
    metrics = {"lm_loss": lm}
    total = lm
    if not self.mpnet and self.config.nsp_weight > 0:
      nsp = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
          labels=batch["label"], logits=tf.cast(extra["nsp_logits"], tf.float32)))
      metrics["nsp_loss"] = nsp
      total = total + self.config.nsp_weight * nsp
    return total / self.replicas(), metrics, tf.cast(new_state, self.state_dtype)

  def on_end(self, model, model_dir, log):
    if self.export_hf_dir:   # XLNetLMHeadModel / MPNetForMaskedLM
      hf_xlnet.export_hf(model, self.export_hf_dir, log)
    export = fileio.join(model_dir, "export")
    if self.mpnet:
      mpnet.save_hf_weights(model.hf_variable_map(), self.model_config, export,
                            "MPNetForMaskedLM")
      log(f"exported MPNet in the Hugging Face layout: {export}/config.json + model.safetensors")
      return
    fileio.makedirs(export)
    self.model_config.to_json(fileio.join(export, "xlnet_config.json"))
    path = checkpoint.save_tf1_checkpoint(model, fileio.join(export, "xlnet_model.ckpt"))
    log(f"exported the model under the release's variable names: {path} (+ xlnet_config.json)")

