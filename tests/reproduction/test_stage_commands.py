"""The quickstart's stage commands, built without running anything: each training run trains as
the XLNet release script it stands for."""

from reproduction import pipeline as pipeline_lib
from reproduction.presets import PRESETS

# The release's flag defaults (xlnet/train.py, run_classifier.py: adam_epsilon 1e-8;
# run_squad.py, run_race.py: 1e-6), written here from the release, not from the code.
RELEASE_EPSILON = {"pretrain": "1e-08", "classify": "1e-08", "accept": "1e-08",
                   "squad": "1e-06", "race": "1e-06"}


def _argv(stage, names):
  if callable(stage.argv):      # a test run: its rate is the one chosen on dev (any here)
    return stage.argv({name: {"metrics": {"accuracy": 0.5, "mcc": 0.1, "exact": 1.0,
                                          "split": {"accuracy": 0.5}}} for name in names})
  return stage.argv


def test_every_training_stage_uses_its_release_scripts_epsilon(tmp_path):
  pipe = pipeline_lib.Pipeline(PRESETS["small"], str(tmp_path))
  stages = pipe.stages()
  names = [s.name for s in stages]
  seen = {}
  for stage in stages:
    kind = stage.name.split("-")[0]
    if kind not in RELEASE_EPSILON:
      continue
    flags = [f for f in _argv(stage, names) if f.startswith("--adam_epsilon=")]
    assert len(flags) == 1, (stage.name, flags)
    seen.setdefault(kind, set()).add(flags[0].split("=", 1)[1])
  assert seen == {kind: {eps} for kind, eps in RELEASE_EPSILON.items()}, seen
