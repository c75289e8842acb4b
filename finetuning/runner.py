"""The train-or-load step the fine-tuning scripts share, and what they report: the files they
wrote (`report_written`, `write_predictions`) go to the end-of-run summary (training/summary.py)
with the run's exports and best checkpoint."""

from data_utils import fileio
from data_utils import outputs
from modeling import checkpoint
from modeling import families
from modeling import flags as model_flags
from serving import export as serving_export
from training import best as best_lib
from training import distribution
from training import progress
from training import recipes
from training import run_record
from training import summary
from training.task import Task
from training.trainer import Trainer


def train_or_load(task, strategy, model_dir, do_train, flag_values, log=print, script=None):
  """Fine-tunes (then reloads the best checkpoint, if one was kept) or builds the
  model from --init_checkpoint; then writes --export_hf_dir and --export_dir (chief only);
  returns the model to evaluate / predict with. Training first checks MODEL_DIR and records
  the run's settings (training/run_record.py: a rerun with other settings is refused)."""
  check_outputs(task, model_dir, flag_values)
  run = summary.current()
  if run is not None:
    run.metric = getattr(task, "main_metric", None)
  if do_train:
    commit = record_run(task, strategy, model_dir, flag_values, script, log)   # may refuse
    if hasattr(task, "prepare_training_data"):   # a data error: one line, nothing written
      task.prepare_training_data()
    commit()
    trainer = Trainer(task, strategy, model_dir, flag_values.train_steps,
                      flag_values.steps_per_loop, flag_values.save_every, xla=flag_values.xla,
                      log=log)
    trainer.train()
    # best.json names the checkpoint its score belongs to (training/best.py); none is used
    # when this training did not evaluate (no evaluation data, or data without labels: a
    # best/ there is another run's)
    record, best = best_lib.read(fileio.join(model_dir, "best"))
    if best and getattr(task, "evaluate", None) and not trainer.eval_skipped:
      checkpoint.load_native_checkpoint(trainer.model, best)
      metric = getattr(task, "main_metric", None)
      log(f"using the best checkpoint {best} ({metric} {record.get(metric)} at step "
          f"{record.get('step')})")
    model = trainer.model
  else:
    with strategy.scope():
      model = task.build_model().ensure_built()
    log(progress.start_line(task, model))
    task.initialize(model, log)
  chief = distribution.is_chief(strategy)
  if chief and model_dir and not do_train:   # evaluation / prediction write into it: ours
    outputs.claim_dir(model_dir, outputs.RUN)
  export_hf_if_asked(model, flag_values, log, labels=getattr(getattr(task, "spec", None),
                                                             "labels", None), chief=chief)
  export_dir = getattr(flag_values, "export_dir", None)
  if export_dir and chief:   # the SavedModel on raw text (the task's own export)
    task.export(model, export_dir, log, padding=getattr(flag_values, "export_padding", None),
                xla=getattr(flag_values, "export_xla", False),
                version=getattr(flag_values, "version", None))
  if run is not None and chief:
    for path in (export_dir, getattr(flag_values, "export_hf_dir", None)):
      run.add_export(path)     # the summary names those written
  return model


def report_written(paths, log=print):
  """Logs "wrote PATH" for each file a script wrote (a list, one path, or None from a task that
  does not say) and adds them to the end-of-run summary's predictions. Returns the paths."""
  paths = [paths] if isinstance(paths, str) else list(paths or ())
  for path in paths:
    log(f"wrote {path}")
  run = summary.current()
  if run is not None:
    run.add_predictions(paths)
  return paths


def write_predictions(task, model, split, output_dir, log=print):
  """task.write_predictions(model, split, output_dir), its files reported (report_written)."""
  return report_written(task.write_predictions(model, split, output_dir), log)


def check_outputs(task, model_dir, flag_values):
  """Every output path checked before any work (data_utils/outputs.py): --export_dir and
  --export_hf_dir absent, empty or an earlier export of their own kind, distinct from each
  other and from MODEL_DIR; a task without the export asked for refused."""
  export_dir = getattr(flag_values, "export_dir", None)
  hf_dir = getattr(flag_values, "export_hf_dir", None)
  outputs.check_distinct({"model_dir": model_dir, "export_dir": export_dir,
                          "export_hf_dir": hf_dir})
  if hf_dir:   # a layout with no Hugging Face class fails here, before any training
    families.hf_architecture(task.build_model())
    outputs.check_dir(hf_dir, "export_hf_dir", outputs.HF)
  if export_dir:
    check_export(task)
    serving_export.check_export_dir(export_dir, "export_dir", model_dir=model_dir)


def record_run(task, strategy, model_dir, flag_values, script, log=print):
  """MODEL_DIR checked and its run.json compared (training/run_record.check) with the task's
  effective settings (the flags, the recipe's optimizer values, the model config); returns
  the `commit` that writes them."""
  if not hasattr(flag_values, "flags_by_module_dict"):    # not absl flags (a test's namespace)
    return lambda: None
  resolved = dict(task.optimizer_settings()) if hasattr(task, "optimizer_settings") else {}
  for line in recipes.schedule_warnings(resolved):
    log(line)
  settings = run_record.settings_from_flags(flag_values, resolved=resolved,
                                            model_config=getattr(task, "model_config", None))
  return run_record.check(model_dir, script, settings,
                          allow_changes=getattr(flag_values, run_record.ALLOW_FLAG, False),
                          write=distribution.is_chief(strategy), log=log)


def check_export(task):
  """ValueError at once, before any training, for a task type without a SavedModel export."""
  if type(task).export is Task.export:
    raise ValueError(f"--export_dir: {type(task).__name__} has no SavedModel export")


def export_hf_if_asked(model, flag_values, log=print, labels=None, chief=True):
  """With --export_hf_dir, writes `model` there in the Hugging Face layout
  (modeling/families.export_hf; only the chief host writes). Returns the directory or None."""
  export_dir = getattr(flag_values, "export_hf_dir", None)
  if not export_dir or not chief:
    return None
  return families.export_hf(model, export_dir, log, labels=labels,
                            tokenizer=model_flags.tokenizer_source(flag_values))
