"""run_pretrain.py's run: the records' parameters resolved from the flags, the task of the
objective, the run record, the shared trainer (whose end writes the chief's exports)."""

import dataclasses

from data_utils import fingerprint
from data_utils import outputs
from data_utils import pipeline
from data_utils import record_format
from modeling import families
from modeling import flags as model_flags
from pretraining import objectives
from pretraining.flags import RECORD_FLAGS
from pretraining.task import PretrainConfig, PretrainTask
from training import distribution
from training import flags as training_flags
from training import recipes
from training import run_record
from training import summary
from training import trainer as trainer_lib


def run(f, model_dir, strategy):
  """Pretrains with the flags `f` (run_pretrain.py's) into `model_dir` under `strategy`."""
  outputs.check_distinct({"model_dir": model_dir, "export_hf_dir": f.export_hf_dir})
  if f.export_hf_dir:     # checked before any work; written at the end
    outputs.check_dir(f.export_hf_dir, "export_hf_dir", outputs.HF)
  objective = objectives.get(f.objective)
  if f.mem_len and not objective.carries_memory:   # refused, not dropped without a word
    raise ValueError(f"--mem_len={f.mem_len}: --objective={f.objective} carries no memory; "
                     "leave --mem_len out")
  family = families.get(objective.family)   # mpnet: a Hugging Face style MPNet config.json
  model_config = family.config_from_json(f.model_config_path)
  resolved = record_format.resolve_training_params(
      f.record_dir, vocab_size=family.vocab_size(model_config),
      **{name: f[name].value for name in RECORD_FLAGS if f[name].present})
  if resolved.from_records:
    print(resolved.summary(), flush=True)
  record = {name: resolved.values[name] for name in RECORD_FLAGS}
  record.update(layout(f, strategy, resolved.params))
  run_config = dataclasses.replace(model_flags.run_config_from_flags(f),   # the memory's too
                                   reuse_len=record["reuse_len"], bi_data=record["bi_data"])
  config = PretrainConfig(
      record_dir=f.record_dir, **record,
      objective=f.objective, nsp_weight=f.nsp_weight, mpnet_mode=f.mpnet_mode,
      sp_model=f.sp_model, uncased=f.uncased,
      mpnet_permute=f.mpnet_permute,
      seed=f.seed, **training_flags.optimizer_kwargs(f),
      verify_records=f.verify_records,
      eval_record_dir=f.eval_record_dir, eval_split=f.eval_split, eval_batches=f.eval_batches)
  task = PretrainTask(config, model_config, run_config, f.init_checkpoint,
                      export_hf_dir=f.export_hf_dir)   # written by the chief only
  if not distribution.is_chief(strategy):
    task.export_hf_dir = None
  run = summary.current()
  if run is not None:     # the end-of-run summary's best/ line: the held-out loss
    run.metric = task.main_metric
  for line in recipes.schedule_warnings(task.optimizer_settings()):
    print(line, flush=True)
  settings = run_record.settings_from_flags(
      f, model_config=model_config,
      resolved={**record, **task.optimizer_settings(),
                "global_batch": record["bsz_per_host"] * record["num_hosts"],
                "record_dir": {"record_infos": len(resolved.info_files),
                               "sha256": fingerprint.files_digest(resolved.info_files)}})
  run_record.start(model_dir, "run_pretrain.py", settings,
                   allow_changes=f[run_record.ALLOW_FLAG].value,
                   write=distribution.is_chief(strategy),
                   neutral=("sp_model", "uncased",     # only the export's tokenizer
                            "eval_record_dir", "eval_split", "eval_batches",   # evaluation only
                            # the layout: at the same global batch, the same rows and losses
                            # (data_utils/lanes.py), and the memory follows its lanes
                            "bsz_per_host", "num_core_per_host", "num_hosts"))
  trainer = trainer_lib.Trainer(task, strategy, model_dir, f.train_steps, f.steps_per_loop,
                                f.save_every, f.keep_checkpoints, f.xla,
                                checkpoint_state=f.checkpoint_memory)
  with pipeline.named_record_errors(f.record_dir):   # tf.data names no file
    trainer.train()     # its end writes the export (PretrainTask.on_end: the chief's)


def layout(f, strategy, params):
  """{bsz_per_host, num_core_per_host, num_hosts} of the run: the flags, else the records' lanes
  per host and the strategy's replicas per host; checked against the strategy (one line)."""
  for name in ("bsz_per_host", "num_core_per_host", "num_hosts"):
    if f[name].value is not None and f[name].value < 1:
      raise ValueError(f"--{name}={f[name].value} must be at least 1")
  hosts = distribution.hosts(strategy)
  if f.num_hosts and f.num_hosts != hosts:
    raise ValueError(f"--num_hosts={f.num_hosts} but the strategy has {hosts} host(s)")
  cores = f.num_core_per_host or distribution.replicas(strategy) // hosts
  distribution.num_hosts(strategy, cores, hosts)
  bsz = f.bsz_per_host or params.bsz_per_host
  if not f.bsz_per_host:
    print(f"records: {params.bsz_per_host} lanes: --bsz_per_host={bsz} ({hosts} host(s) x "
          f"{bsz} rows, {cores} replica(s) per host)", flush=True)
  return {"bsz_per_host": bsz, "num_core_per_host": cores, "num_hosts": hosts}
