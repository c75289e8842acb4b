"""Whose hyper-parameters fill the optimizer settings a run does not set
(docs/fine-tuning.md, "Optimizer semantics and recipes").

A setting left unset (None: a flag not given, an OptimizerConfig field not filled) takes the
value of the run's recipe for its model family and script; anything set explicitly wins.

  --recipe=release (default)
    XLNet: the release's scripts (zihangdai/xlnet): each script's own flag defaults
      (train.py, run_classifier.py, run_squad.py, run_race.py), with the warmup of the
      published scripts/tpu_squad_large.sh and tpu_race_large_bsz32.sh. Optimizer: the
      release's get_train_op (`tf.train.AdamOptimizer`, as weight_decay is 0).
    MPNet: its release (microsoft/MPNet, fairseq): fairseq's Adam, betas (0.9, 0.98), eps
      1e-6, no clipping, weight decay 0.01 pretraining / 0.1 GLUE / 0.01 SQuAD, warmup 6% of
      the fine-tuning steps (README.glue.md), 10K of 125K pretraining steps (its README).
  --recipe=paper
    XLNet: the paper's Tables 7 (pretraining) and 8 (fine-tuning): eps 1e-6, weight decay
      0.01 (so the release's AdamWeightDecayOptimizer), layer-wise decay as the paper's text
      describes it (per-layer learning rates); warmup 40K of 500K pretraining steps; Table 8
      gives no fine-tuning warmup, so the release scripts' is kept.
    MPNet: the same as release (the paper's hyper-parameters are its release's), lr 6e-4
      for pretraining (paper; its README's example uses 5e-4).

A warmup given as a float below 1 is a fraction of train_steps.
"""

FAMILIES = ("xlnet", "mpnet")
SCRIPTS = ("pretrain", "classifier", "squad", "race")
RECIPES = ("release", "paper")
FIELDS = ("optimizer", "learning_rate", "warmup_steps", "decay_method", "min_lr_ratio",
          "weight_decay", "adam_epsilon", "adam_beta1", "adam_beta2", "clip",
          "lr_layer_decay_rate", "layer_decay_method")

_XLNET_COMMON = dict(optimizer="release", decay_method="linear", min_lr_ratio=0.0,
                     weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.999, clip=1.0,
                     lr_layer_decay_rate=1.0, layer_decay_method="release")
_MPNET_COMMON = dict(optimizer="fairseq", decay_method="linear", min_lr_ratio=0.0,
                     adam_beta1=0.9, adam_beta2=0.98, adam_epsilon=1e-6, clip=0.0,
                     lr_layer_decay_rate=1.0, layer_decay_method="release")

TABLE = {
    ("xlnet", "release"): {
        # train.py: lr 1e-4, min_lr_ratio 0.001, eps 1e-8, warmup 0
        "pretrain": dict(_XLNET_COMMON, learning_rate=1e-4, warmup_steps=0,
                         min_lr_ratio=0.001, adam_epsilon=1e-8),
        # run_classifier.py: lr 1e-5, eps 1e-8, warmup 0
        "classifier": dict(_XLNET_COMMON, learning_rate=1e-5, warmup_steps=0,
                           adam_epsilon=1e-8),
        # run_squad.py: lr 3e-5, eps 1e-6, lr_layer_decay_rate 0.75; tpu_squad_large.sh: warmup 1000
        "squad": dict(_XLNET_COMMON, learning_rate=3e-5, warmup_steps=1000, adam_epsilon=1e-6,
                      lr_layer_decay_rate=0.75),
        # run_race.py: lr 2e-5, eps 1e-6; tpu_race_large_bsz32.sh: warmup 1000
        "race": dict(_XLNET_COMMON, learning_rate=2e-5, warmup_steps=1000, adam_epsilon=1e-6),
    },
    ("xlnet", "paper"): {
        "pretrain": dict(_XLNET_COMMON, learning_rate=4e-4, warmup_steps=0.08,
                         adam_epsilon=1e-6, weight_decay=0.01, layer_decay_method="paper"),
        "classifier": dict(_XLNET_COMMON, learning_rate=2e-5, warmup_steps=0,
                           adam_epsilon=1e-6, weight_decay=0.01, layer_decay_method="paper"),
        "squad": dict(_XLNET_COMMON, learning_rate=3e-5, warmup_steps=1000, adam_epsilon=1e-6,
                      weight_decay=0.01, lr_layer_decay_rate=0.75, layer_decay_method="paper"),
        "race": dict(_XLNET_COMMON, learning_rate=2e-5, warmup_steps=1000, adam_epsilon=1e-6,
                     weight_decay=0.01, layer_decay_method="paper"),
    },
    ("mpnet", "release"): {
        "pretrain": dict(_MPNET_COMMON, learning_rate=5e-4, warmup_steps=0.08,
                         weight_decay=0.01),
        "classifier": dict(_MPNET_COMMON, learning_rate=1e-5, warmup_steps=0.06,
                           weight_decay=0.1),
        # no learning rate given for SQuAD / RACE: the scripts' XLNet values; RACE's weight
        # decay: GLUE's (no RACE recipe in the release)
        "squad": dict(_MPNET_COMMON, learning_rate=3e-5, warmup_steps=0.06, weight_decay=0.01),
        "race": dict(_MPNET_COMMON, learning_rate=2e-5, warmup_steps=0.06, weight_decay=0.1),
    },
}
TABLE[("mpnet", "paper")] = dict(TABLE[("mpnet", "release")])
TABLE[("mpnet", "paper")]["pretrain"] = dict(TABLE[("mpnet", "release")]["pretrain"],
                                             learning_rate=6e-4)


def defaults(family, script, recipe="release"):
  """The recipe's settings (warmup possibly a fraction of train_steps)."""
  if family not in FAMILIES or script not in SCRIPTS or recipe not in RECIPES:
    raise ValueError(f"no recipe {recipe!r} for {family} {script} (recipes: "
                     f"{', '.join(RECIPES)})")
  return dict(TABLE[(family, recipe)][script])


def resolve(config, family, script):
  """{field: value} of the optimizer settings: `config`'s own (fields not None) over its
  recipe's (`config.recipe`), warmup fractions turned into steps; plus train_steps,
  grad_accumulation_steps and the recipe's name."""
  recipe = getattr(config, "recipe", None) or "release"
  values = defaults(family, script, recipe)
  for name in FIELDS:
    given = getattr(config, name, None)
    if given is not None:
      values[name] = given
  if isinstance(values["warmup_steps"], float) and values["warmup_steps"] < 1:
    values["warmup_steps"] = int(round(values["warmup_steps"] * config.train_steps))
  values["warmup_steps"] = int(values["warmup_steps"])
  values.update(train_steps=config.train_steps,
                grad_accumulation_steps=getattr(config, "grad_accumulation_steps", 1),
                recipe=f"{family}-{recipe}")
  return values


def help_default(field, script):
  """The help text's "default:" part for `field` in `script`, from the table."""
  parts = []
  for (family, recipe), table in TABLE.items():
    if (family, recipe) == ("mpnet", "paper") and table[script] == TABLE[("mpnet", "release")][
        script]:
      continue
    value = table[script][field]
    shown = (f"{value:g} of the steps" if isinstance(value, float) and field == "warmup_steps"
             and 0 < value < 1 else f"{value:g}" if isinstance(value, float) else str(value))
    parts.append(f"{family} {recipe}: {shown}")
  return "default: the recipe's (" + "; ".join(parts) + ")"


def schedule_warnings(settings):
  """Lines warning of resolved settings (`resolve`'s) that cannot do what a user likely means:
  a warmup at or past the last step trains the whole run in warmup, the learning rate never
  reaching its peak."""
  warmup, steps = settings.get("warmup_steps") or 0, settings.get("train_steps") or 0
  if steps and warmup >= steps:
    return [f"warning: --warmup_steps={warmup} is at or past --train_steps={steps}: the whole "
            f"run is warmup and the learning rate never reaches its peak "
            f"({settings.get('learning_rate')}); a fraction below 1 (e.g. 0.1) is a share of "
            "the steps"]
  return []
