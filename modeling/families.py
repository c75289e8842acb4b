"""The model families, keyed by --model_type: what differs between XLNet and MPNet when a task
builds and initialises its model, so that the tasks never ask which family they hold.

  family = families.get(model_type)      # "xlnet" | "mpnet"; anything else: a one-line error
  family.config_from_json(path)          # XLNetConfig | MPNetConfig (HF config.json)
  family.classifier(model_config, run_config, n_class, task_name, regression, summary_type,
                    use_proj)            # [B, n_class] logits ([B] for regression)
  family.race_model(model_config, run_config, summary_type, use_proj)   # [B, 4] logits
  family.squad_model(model_config, run_config, start_n_top, end_n_top)  # SQuAD beam outputs
  family.initialize(model, path, log)    # --init_checkpoint into a task model

XLNet's models take the release's summary settings and a RunConfig (dropout, attention
dropout, ...); MPNet's take their own config only (its dropout lives there, as in HF).
Adding a family: one class here with these methods and one line in FAMILIES.
"""

from modeling import loading, models, mpnet, mpnet_models
from modeling.config import XLNetConfig


class XLNet:
  name = "xlnet"

  @staticmethod
  def config_from_json(path):
    return XLNetConfig.from_json(path)

  @staticmethod
  def classifier(model_config, run_config, n_class, task_name, regression, summary_type,
                 use_proj):
    return models.XLNetClassifier(model_config, run_config, n_class=n_class, task_name=task_name,
                                  regression=regression, summary_type=summary_type,
                                  use_proj=use_proj)

  @staticmethod
  def race_model(model_config, run_config, summary_type, use_proj):
    return models.XLNetRaceModel(model_config, run_config, summary_type=summary_type,
                                 use_proj=use_proj)

  @staticmethod
  def squad_model(model_config, run_config, start_n_top, end_n_top):
    return models.XLNetSquadModel(model_config, run_config, start_n_top=start_n_top,
                                  end_n_top=end_n_top)

  @staticmethod
  def initialize(model, path, log):
    """A release / native checkpoint or a Hugging Face XLNet directory (loading.py)."""
    log(f"init from {path}: {loading.load_checkpoint(model, path)}")


class MPNet:
  name = "mpnet"

  @staticmethod
  def config_from_json(path):
    return mpnet.MPNetConfig.from_json(path)

  @staticmethod
  def classifier(model_config, run_config, n_class, task_name, regression, summary_type,
                 use_proj):
    del run_config, task_name, summary_type, use_proj   # <s> pooled; dropout in the config
    return mpnet_models.MPNetClassifier(model_config, n_class=n_class, regression=regression)

  @staticmethod
  def race_model(model_config, run_config, summary_type, use_proj):
    del run_config, summary_type, use_proj
    return mpnet_models.MPNetRaceModel(model_config)

  @staticmethod
  def squad_model(model_config, run_config, start_n_top, end_n_top):
    del run_config
    return mpnet_models.MPNetSquadModel(model_config, start_n_top=start_n_top,
                                        end_n_top=end_n_top)

  @staticmethod
  def initialize(model, path, log):
    """A Hugging Face MPNet directory fills the encoder; else a checkpoint (loading.py)."""
    loading.initialize_mpnet(model, path, log)


FAMILIES = {family.name: family for family in (XLNet, MPNet)}


def get(model_type):
  """The family of --model_type (ValueError naming the flag and the choices otherwise)."""
  try:
    return FAMILIES[model_type]
  except KeyError:
    raise ValueError(f"--model_type={model_type}: expected one of "
                     f"{', '.join(FAMILIES)}") from None
