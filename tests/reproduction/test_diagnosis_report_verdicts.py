"""The diagnosis report's verdict sentences (reproduction/diagnosis_report.py: exclusions,
learning rates, held-out losses, trends, probes, MPNet's modes and the architecture split) on
crafted inputs; every expected sentence worked out by hand from the report's rules."""

import pytest

from tests.reproduction.test_report_verdicts import _s

# ---- the diagnosis section (diagnosis_report) ------------------------------------------------
def test_exclusions_every_branch():
  """Classification: trivial answer 70.0 (70 of 100), noise 2 sqrt(.7 .3 / 100) = 9.2 points;
  the best arm's 75.0 is within it: left out. RACE: chance 25.0 on 100 questions (noise 8.7);
  60.0 beats it: entered, unless every arm ran at one rate (no dev choice). SQuAD without its
  data: no verdict."""
  from reproduction import diagnosis_report as dr
  data = {"classify": {"counts": {"test": {"a": 70, "b": 30}}}, "race": {"test": {"x": 100}}}
  agg = {"classify": {"plm": _s(0.75, 0.01)}, "squad": {"plm": {"f1": _s(50.0, 1.0)}},
         "race": {"plm": {"accuracy": _s(0.60, 0.01)}}}
  assert dr.exclusions(agg, data) == {
      "classify": "no arm beats the trivial answer (70.0) by more than the test set's noise "
                  "(±9.2 points), so differences between arms there measure nothing about the "
                  "objectives",
      "race": None}
  agg["sweep"] = {"race": {"plm": {"scores": {}, "chosen": "3e-05"}}}
  assert dr.exclusions(agg, data)["race"] == (
      "every arm ran at one learning rate (3e-05, no dev choice), so the runs show that the "
      "scripts train, predict and score, not how the objectives compare")
  assert "Left out of the orderings: RACE format (accuracy): every arm ran at one learning " \
         "rate (3e-05, no dev choice)" in " ".join(dr.summary_lines(agg, data))


def _sweep(**chosen):
  grid = ("0.0001", "0.0003", "0.001")
  return {"classify": {arm: {"scores": {lr: 0.5 for lr in grid}, "chosen": lr}
                       for arm, lr in chosen.items()}}


def test_learning_rate_sentences_every_branch():
  from reproduction import diagnosis_report as dr
  lines = dr.section({"sweep": _sweep(plm="0.0003", mlm="0.001")}, {})
  assert ("The arms chose 2 different learning rates (0.0003, 0.001): one fixed rate for every "
          "arm would have favoured some of them. mlm chose a rate at the edge of the grid, so a "
          "wider grid might move them further.") in lines
  lines = dr.section({"sweep": _sweep(plm="0.0003", mlm="0.0003")}, {})
  assert ("Every arm chose the same rate (0.0003): on this task a shared rate was not what "
          "separated them.") in lines
  assert "The preset's grids have one value each: no dev runs." in dr.section({}, {})
  assert dr._sweep_verdict(_sweep(plm="0.0003", mlm="0.0003")) == [
      "Learning rate: on dev every arm chose the same rate (0.0003) for classification, so a "
      "shared rate is not what separates the arms there."]
  assert dr._sweep_verdict(_sweep(plm="0.0003", mlm="0.001")) == [
      "Learning rate: the arms chose different rates on dev for classification (plm 0.0003, "
      "mlm 0.001); each test run uses its arm's choice."]
  assert dr._sweep_verdict({"classify": {"plm": {"scores": {}, "chosen": "1e-4"}}}) == []


def test_heldout_loss_sentences():
  from reproduction import diagnosis_report as dr
  diag = {"checkpoints": [100, 200, 300],
          "heldout": {"plm": {"100": 6.0, "200": 5.5, "300": 5.0},
                      "mlm": {"100": 6.0, "200": 5.0, "300": 5.2}}}
  lines = dr.section({"diagnostics": diag}, {})
  assert "- plm: falls at every checkpoint." in lines
  assert "- mlm: lowest at step 200 (5.000), 5.200 at the end." in lines


def test_trend_every_branch():
  """Dev noise 2 sqrt(m (1 - m) / n) at the curve's mean m: n 100, m 0.51 -> 10.0 points;
  n 10,000, m 0.5 -> 1.0; m 0.4833 -> 1.0."""
  from reproduction import diagnosis_report as dr
  assert dr.trend([0.50, 0.52, 0.51], [1, 2, 3], 100) == (
      "level within noise from step 1 to step 3 (±10.0 points is the dev set's noise)")
  assert dr.trend([0.4, 0.5, 0.6], [1, 2, 3], 10000) == (
      "rises with pretraining length (±1.0 points is the dev set's noise)")
  assert dr.trend([0.6, 0.5, 0.4], [1, 2, 3], 10000) == (
      "falls with pretraining length (±1.0 points is the dev set's noise)")
  assert dr.trend([0.4, 0.6, 0.45], [1, 2, 3], 10000) == (
      "peaks at step 2, 15.0 points above the end (±1.0 points is the dev set's noise)")
  assert dr.trend([0.5, 0.6, 0.5], [1, 2, 3], 10000) == (      # ends where it began
      "peaks at step 2, 10.0 points above the end (±1.0 points is the dev set's noise)")
  assert dr.trend([0.4, 0.5, 0.6], [1, 2, 3], None) == "rises with pretraining length"


def _probes(**tests):
  return {"checkpoints": [300],
          "probe": {arm: {"300": {"dev": t, "test": t}} for arm, t in tests.items()}}


def test_probe_sentences_and_verdicts():
  """400 test examples; noise 2 sqrt(m (1 - m) / 400) at the pair's mean m: plm 0.60 vs none
  0.40 (m 0.5: ±5.0): +20.0 beyond; mlm 0.42 vs 0.40 (m 0.41: ±4.9): +2.0 within; mpnet 0.30
  vs none-mpnet 0.50 (m 0.4: ±4.9): -20.0 beyond."""
  from reproduction import diagnosis_report as dr
  diag = _probes(none=0.40, plm=0.60, mlm=0.42, mpnet=0.30, **{"none-mpnet": 0.50})
  assert dr.probe_text(diag, [300], {"test": 400}) == [
      "- Final-checkpoint probe test accuracy: plm (60.0) > none-mpnet (50.0) > mlm (42.0) > "
      "none (40.0) > mpnet (30.0).",
      "- plm's representation is 20.0 points above the same model's random weights (none) "
      "under the probe (beyond the test set's noise of ±5.0 points).",
      "- mlm's representation is 2.0 points above the same model's random weights (none) under "
      "the probe (within the test set's noise of ±4.9 points).",
      "- mpnet's representation is 20.0 points below the same model's random weights "
      "(none-mpnet) under the probe (beyond the test set's noise of ±4.9 points)."]
  assert dr.probe_text(diag, [300])[1] == ("- plm's representation is 20.0 points above the "
                                           "same model's random weights (none) under the probe.")
  finals = {a: dr._final_probe(diag, a) for a in diag["probe"]}
  assert dr._probe_verdict(finals, 400) == [
      "Under the probe, pretrained against random weights: plm +20.0, mlm +2.0, mpnet -20.0 "
      "points; beyond the test set's noise: plm, mpnet."]
  close = {a: finals[a] for a in ("none", "mlm")}
  assert dr._probe_verdict(close, 400) == [
      "Why the fine-tuned arms differ: under the probe no pretrained encoder is told apart "
      "from its own random weights (mlm +2.0 points, each within the test set's noise of about "
      "±4.9): on this task pretraining put no label information into the representation that "
      "a linear probe can read, so gaps between fine-tuned arms reflect how well each starting "
      "point fine-tunes in a few steps, not features the objectives taught."]
  assert dr._probe_verdict(finals, None) == []


def _arch(mpnet_mlm):
  return {"checkpoints": [300], "mpnet_mlm": mpnet_mlm,
          "heldout": {"plm": {"300": 5.0}, "mlm": {"300": 5.3}, "mpnet": {"300": 5.6}}}


def test_mpnet_mode_and_architecture_sentences():
  """MPNet 5.6 against PLM 5.0 (+0.600); MPNet's architecture on mlm 5.8 against XLNet's 5.3
  (+0.500): 0.5 / 0.6 = 83% of the gap is the architecture's; at 5.1 (-0.200) the share
  clamps to 0: it explains none of it."""
  from reproduction import diagnosis_report as dr
  lines = dr.mode_text({"mpnet": 5.0, "plm": 5.2, "mlm": 4.9}, _arch(5.8))
  assert lines[:3] == [
      "- Without position compensation (plm mode) the same weights score 0.200 nats worse than "
      "with it: the positions of the predicted tokens carry information the model uses.",
      "- In mlm mode (no dependency among predictions) it scores 0.100 nats better.",
      "- Held-out at the end: MPNet 5.600 against XLNet PLM 5.000 (+0.600); the two differ in "
      "architecture (absolute positions + one shared relative bias and no memory, against "
      "relative attention with memory). Same objective (mlm), same records, the two "
      "architectures: MPNet's 5.800, XLNet's 5.300 (+0.500), so 83% of the MPNet-PLM gap is "
      "the architecture's, not the objective's."]
  assert lines[3].startswith("- A second implementation can be set against this run")
  assert dr.mode_text({"mpnet": 5.0, "plm": 4.8}, {})[0] == (
      "- Without position compensation (plm mode) the same weights score 0.200 nats better "
      "than with it: the model did not learn to use them.")
  assert dr.mode_text({}, _arch(5.1))[0].endswith(
      "(+0.600); the two differ in architecture (absolute positions + one shared relative "
      "bias and no memory, against relative attention with memory). Same objective (mlm), "
      "same records, the two architectures: MPNet's 5.100, XLNet's 5.300 (-0.200), so the "
      "architecture does not explain the MPNet-PLM gap.")
  assert dr.mode_text({}, _arch(None)) == [
      "- Held-out at the end: MPNet 5.600 against XLNet PLM 5.000 (+0.600); the two differ in "
      "architecture (absolute positions + one shared relative bias and no memory, against "
      "relative attention with memory), so this gap mixes objective and model."]
  cls = {"none": {"mean": 0.40}, "none-mpnet": {"mean": 0.70}}
  assert dr._architecture_verdict(_arch(5.8), cls) == [
      "Why MPNet learns slower here: trained on the mlm objective, MPNet's architecture ends at "
      "5.800 held-out against XLNet's 5.300 (+0.500 nats), 83% of MPNet's gap to XLNet PLM "
      "(5.600 against 5.000, +0.600): the gap belongs to the architecture (no memory, learned "
      "absolute positions, one shared relative bias), not to the masked-and-permuted "
      "objective; without any pretraining the same architectures fine-tune to 70.0% (MPNet) "
      "and 40.0% (XLNet) on classification."]
  assert dr._architecture_verdict(_arch(5.1), {}) == [
      "MPNet's architecture on the mlm objective: 5.100 held-out against XLNet's 5.300; MPNet "
      "5.600 against XLNet PLM 5.000."]
  assert dr._architecture_verdict(_arch(None), cls) == []


def test_summary_sets_the_probe_order_against_fine_tuning():
  from reproduction import diagnosis_report as dr
  diag = _probes(none=0.40, plm=0.60)
  agg = {"diagnostics": diag, "classify": {"plm": _s(0.70, 0.01), "none": _s(0.50, 0.01)},
         "squad": {}, "race": {}}
  assert dr.summary_lines(agg, {}) == [
      "Linear probes (frozen encoders, no fine-tuning learning rate): plm 60.0 > none 40.0; "
      "fine-tuning orders the same arms the same way."]
  agg["classify"] = {"plm": _s(0.50, 0.01), "none": _s(0.70, 0.01)}
  assert dr.summary_lines(agg, {}) == [
      "Linear probes (frozen encoders, no fine-tuning learning rate): plm 60.0 > none 40.0; "
      "fine-tuning orders the same arms none > plm."]
