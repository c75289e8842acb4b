"""The train-or-load step the fine-tuning scripts share."""

from data_utils import fileio
from modeling import checkpoint
from training.trainer import Trainer


def train_or_load(task, strategy, model_dir, do_train, flag_values, log=print):
  """Fine-tunes (then reloads the best checkpoint, if one was kept) or builds the
  model from --init_checkpoint; returns the model to evaluate / predict with."""
  if do_train:
    trainer = Trainer(task, strategy, model_dir, flag_values.train_steps,
                      flag_values.steps_per_loop, flag_values.save_every, xla=flag_values.xla,
                      log=log)
    trainer.train()
    best = fileio.join(model_dir, "best", "ckpt")
    if fileio.exists(best + ".index"):
      checkpoint.load_native_checkpoint(trainer.model, best)
      log(f"using the best checkpoint {best}")
    return trainer.model
  with strategy.scope():
    model = task.build_model().ensure_built()
  task.initialize(model, log)
  return model
