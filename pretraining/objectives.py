"""The pretraining objectives, keyed by --objective (the contract: pretraining/objective.py).

  objective = objectives.get("plm")      # anything unknown: a one-line error
  objective.family                       # the model family it trains ("xlnet" | "mpnet")
  objective.build_model(task), .predict(task, model, batch, state, step), .extra_losses(...),
  objective.export(task, model, export_dir, log)

Adding an objective: one module in pretraining/ (an objective.Objective) and one line in
OBJECTIVES.
"""

from pretraining import mlm, mpnet, plm

OBJECTIVES = {objective.name: objective for objective in (plm.PLM(), mlm.MLM(), mpnet.MPNet())}
NAMES = tuple(OBJECTIVES)


def get(name):
  """The objective called `name` (ValueError naming the choices otherwise)."""
  try:
    return OBJECTIVES[name]
  except KeyError:
    raise ValueError(f"--objective must be one of {NAMES}, got {name!r}") from None
