"""The quickstart report's verdict sentences (reproduction/report.py) on crafted result tables.

Every expected sentence below is written from the report's rules, worked out by hand for the
crafted numbers, not copied from a run:
- a difference is "beyond the seed spread" when |mean_a - mean_b| > std_a + std_b (strictly),
  "within" it otherwise; with one seed on a side there is no spread to judge by;
- an ordering the papers predict (hi > lo) holds when mean_hi > mean_lo, whatever the spread;
- a gap has the papers' sign when the first objective is ahead (gap > 0), counted over the
  measured cells only (not "n/a", not "excl."), from the gap itself, not from its rounding.
"""

import pytest

from reproduction import papers, report

DATA = {"classify": {"labels": {"a": 0, "b": 1, "c": 2, "d": 3},
                     "counts": {"test": {"a": 10, "b": 10, "c": 10, "d": 20}}}}


def _s(mean, std, n=5):
  """A stats() record with this mean and standard deviation (the sentences read n/mean/std)."""
  return {"n": n, "mean": mean, "std": std, "min": mean - std, "max": mean + std,
          "values": [mean] * n}


def _classify(n=5):
  """Accuracies (fractions) with every branch of the ordering sentences (points, spread =
  sum of the two stds): plm - mlm +22.0 (spread 4.0: beyond), mpnet - plm +2.0 (5.0: within),
  mpnet - mlm +24.0 (3.0: beyond), plm - none +20.0 (5.0: beyond), mlm - none -2.0 (3.0:
  within), mpnet - none-mpnet -8.0 (3.0: beyond). Means strictly ahead: 4 of the 6 pairs."""
  return {"none": _s(0.40, 0.02, n), "none-mpnet": _s(0.70, 0.01, n), "plm": _s(0.60, 0.03, n),
          "mlm": _s(0.38, 0.01, n), "mpnet": _s(0.62, 0.02, n)}


# ---- compare: the seed-spread branch ------------------------------------------------------
def test_compare_beyond_the_spread():
  sentence, diff, clear = report.compare("plm", _s(0.60, 0.03), "mlm", _s(0.38, 0.01))
  assert sentence == ("plm is 22.0 points above mlm (beyond the seed spread, sum of the "
                      "standard deviations 4.0)")
  assert diff == pytest.approx(22.0) and clear is True


def test_compare_within_the_spread_and_below():
  sentence, diff, clear = report.compare("mlm", _s(0.38, 0.01), "none", _s(0.40, 0.02))
  assert sentence == ("mlm is 2.0 points below none (within the seed spread, sum of the "
                      "standard deviations 3.0)")
  assert diff == pytest.approx(-2.0) and clear is False


def test_compare_a_difference_equal_to_the_spread_is_within():
  # Exact in binary: diff (0.75 - 0.5) * 100 = 25.0 = (0.125 + 0.125) * 100.
  sentence, diff, clear = report.compare("a", _s(0.75, 0.125), "b", _s(0.5, 0.125))
  assert (diff, clear) == (25.0, False)
  assert sentence == ("a is 25.0 points above b (within the seed spread, sum of the standard "
                      "deviations 25.0)")


def test_compare_with_one_seed_has_no_spread_to_judge_by():
  # 22 points apart with stds 0: still no verdict on the spread, and never "clear".
  sentence, diff, clear = report.compare("plm", _s(0.60, 0.0, n=1), "mlm", _s(0.38, 0.0, n=1))
  assert sentence == "plm is 22.0 points above mlm (one seed each: no spread to judge by)"
  assert diff == pytest.approx(22.0) and not clear


# ---- the classification section ------------------------------------------------------------
def test_classification_verdicts_every_branch():
  lines = report._classification_text({"classify": _classify()}, DATA)
  assert lines[0] == ("Highest mean accuracy: **none-mpnet** (70.0 ± 1.0% over 5 seeds); "
                      "chance is 25.0% and the majority class 40.0% of the test set.")
  assert lines[2:] == [
      "plm is 20.0 points above the same model without pretraining (none) (beyond the seed "
      "spread, sum of the standard deviations 5.0).",
      "mlm is 2.0 points below the same model without pretraining (none) (within the seed "
      "spread, sum of the standard deviations 3.0).",
      "mpnet is 8.0 points below the same model without pretraining (none-mpnet) (beyond the "
      "seed spread, sum of the standard deviations 3.0).",
      "Expected plm > mlm; here plm − mlm = +22.0 points: same direction, beyond the seed "
      "spread.",
      "Expected mpnet > plm; here mpnet − plm = +2.0 points: same direction, within the seed "
      "spread.",
      "Expected mpnet > mlm; here mpnet − mlm = +24.0 points: same direction, beyond the seed "
      "spread.",
      "Expected plm > none; here plm − none = +20.0 points: same direction, beyond the seed "
      "spread.",
      "Expected mlm > none; here mlm − none = -2.0 points: opposite direction, within the seed "
      "spread.",
      "Expected mpnet > none-mpnet; here mpnet − none-mpnet = -8.0 points: opposite direction, "
      "beyond the seed spread.",
      "4 of 6 orderings that the papers' ablations (and the premise of pretraining) predict "
      "hold in this run on this task."]


def test_classification_no_difference_and_missing_arms():
  """Equal means: "no difference", not an ordering that holds; only pairs with both arms."""
  cls = {"plm": _s(0.50, 0.01), "mlm": _s(0.50, 0.02)}
  lines = report._classification_text({"classify": cls}, DATA)
  assert lines[2:] == [
      "Expected plm > mlm; here plm − mlm = +0.0 points: no difference, within the seed spread.",
      "0 of 1 orderings that the papers' ablations (and the premise of pretraining) predict "
      "hold in this run on this task."]


def test_classification_with_one_seed_says_there_is_no_spread():
  """The tiny preset fine-tunes one seed per arm: no sentence may call a gap within (or
  beyond) a seed spread that was never measured."""
  lines = report._classification_text({"classify": _classify(n=1)}, DATA)
  assert "(70.0% over 1 seed)" in lines[0]
  assert lines[2:] == [
      "plm is 20.0 points above the same model without pretraining (none) (one seed each: no "
      "spread to judge by).",
      "mlm is 2.0 points below the same model without pretraining (none) (one seed each: no "
      "spread to judge by).",
      "mpnet is 8.0 points below the same model without pretraining (none-mpnet) (one seed "
      "each: no spread to judge by).",
      "Expected plm > mlm; here plm − mlm = +22.0 points: same direction (one seed each: no "
      "spread to judge by).",
      "Expected mpnet > plm; here mpnet − plm = +2.0 points: same direction (one seed each: no "
      "spread to judge by).",
      "Expected mpnet > mlm; here mpnet − mlm = +24.0 points: same direction (one seed each: no "
      "spread to judge by).",
      "Expected plm > none; here plm − none = +20.0 points: same direction (one seed each: no "
      "spread to judge by).",
      "Expected mlm > none; here mlm − none = -2.0 points: opposite direction (one seed each: "
      "no spread to judge by).",
      "Expected mpnet > none-mpnet; here mpnet − none-mpnet = -8.0 points: opposite direction "
      "(one seed each: no spread to judge by).",
      "4 of 6 orderings that the papers' ablations (and the premise of pretraining) predict "
      "hold in this run on this task."]


# ---- the summary bullets -------------------------------------------------------------------
def _curve(end):
  """A pretraining curve whose last three logs are all `end` (the summary averages them)."""
  return {"curve": [(100, 7.0), (200, end), (300, end), (400, end)]}


def test_summary_pretraining_says_which_side_of_the_unigram_loss_each_ended():
  """The sign first: a model that ended ABOVE the unigram loss is said to be above it (and not
  past it), never "-1.02 nats below"; 0.10 below is "within 0.2 nats below", 0.50 below plain;
  exactly at it is "at", and not past it either. Unigram 5.0; ends 6.02, 4.90, 4.50, 5.0."""
  agg = {"pretrain": {"plm": _curve(6.02), "mlm": _curve(4.90), "mpnet": _curve(4.50)},
         "classify": {}}
  assert report._summary(agg, 5.0, DATA) == [
      "- Pretraining: plm ended 1.02 nats above the unigram loss, mlm ended 0.10 nats below the "
      "unigram loss, mpnet ended 0.50 nats below the unigram loss; mlm stayed within 0.2 nats "
      "below it (barely past predicting token frequencies); plm did not get past it (not yet "
      "using context beyond token frequencies)."]
  agg["pretrain"] = {"plm": _curve(5.0), "mpnet": _curve(4.0)}
  assert report._summary(agg, 5.0, DATA) == [
      "- Pretraining: plm ended at the unigram loss, mpnet ended 1.00 nats below the unigram "
      "loss; plm did not get past it (not yet using context beyond token frequencies)."]


def test_summary_plateau_sentence_for_near_and_above_only_when_fine_tuning_stays_at_chance():
  """Chance 25%: an arm under 2x chance (50%) whose random-weights twin is over it gets the
  plateau sentence, worded by the side of the unigram loss it ended on; mpnet (1.0 below:
  not near) and an arm whose twin is also low get none."""
  agg = {"pretrain": {"plm": _curve(6.0), "mlm": _curve(4.9), "mpnet": _curve(4.0)},
         "classify": {"none": _s(0.60, 0.01), "plm": _s(0.30, 0.01), "mlm": _s(0.26, 0.01),
                      "mpnet": _s(0.30, 0.01), "none-mpnet": _s(0.70, 0.01)}}
  plateau = [l for l in report._summary(agg, 5.0, DATA) if "plateau" in l]
  assert plateau == [
      "- mlm: pretraining ended near the unigram loss and fine-tuning from it stays near "
      "chance (26.0 ± 1.0%) with the shared recipe, while the same model from random weights "
      "reaches 60.0 ± 1.0%: consistent with a model stopped on that plateau holding "
      "representations that carry little of the input.",
      "- plm: pretraining ended at or above the unigram loss and fine-tuning from it stays "
      "near chance (30.0 ± 1.0%) with the shared recipe, while the same model from random "
      "weights reaches 60.0 ± 1.0%: consistent with a model stopped on that plateau holding "
      "representations that carry little of the input."]
  agg["classify"]["none"] = _s(0.45, 0.01)       # the twin itself under 2x chance: no sentence
  assert not [l for l in report._summary(agg, 5.0, DATA) if "plateau" in l]


def test_summary_verdicts_every_branch():
  agg = {"pretrain": {}, "classify": _classify()}
  assert report._summary(agg, None, DATA) == [
      "- Module classification: best none-mpnet at 70.0 ± 1.0% (chance 25.0%).",
      "- Pretrained against the same model without pretraining: plm above none beyond the seed "
      "spread (+20.0 points); mlm within the seed spread of none (-2.0 points); mpnet below "
      "none-mpnet beyond the seed spread (-8.0 points).",
      "- Of the 6 orderings the papers' ablations (and the premise of pretraining) predict, 4 "
      "hold on this task (plm > mlm, mpnet > plm, mpnet > mlm, plm > none); see the comparison "
      "below."]


def test_summary_none_hold_and_one_seed():
  """All orderings reversed (0 hold, no list); one seed: no spread verdict either way."""
  cls = {"none": _s(0.60, 0.0, 1), "plm": _s(0.40, 0.0, 1), "mlm": _s(0.50, 0.0, 1)}
  assert report._summary({"pretrain": {}, "classify": cls}, None, DATA)[1:] == [
      "- Pretrained against the same model without pretraining: plm below none (-20.0 points; "
      "one seed each: no spread to judge by); mlm below none (-10.0 points; one seed each: no "
      "spread to judge by).",
      "- Of the 3 orderings the papers' ablations (and the premise of pretraining) predict, 0 "
      "hold on this task; see the comparison below."]


# ---- the papers' comparison: sign counts ---------------------------------------------------
def _sign_line(agg, usable):
  lines = papers.section(agg, "SCALE", usable)
  line, = [l for l in lines if l.startswith("In this run ")]
  return line.split(" (positive")[0], lines


def test_sign_count_over_measured_cells_only():
  """Classification: the 6 gaps above (4 positive). SQuAD F1: plm - mlm +6.0, plm - none +5.0,
  mlm - none -1.0 measured, the 3 pairs with mpnet "n/a" (no mpnet run). RACE: "excl." (no
  arm beat chance), whatever its numbers. 9 measured, 6 positive."""
  f1 = lambda m: {"f1": _s(m, 0.01)}
  agg = {"classify": _classify(),
         "squad": {"none": f1(0.30), "none-mpnet": f1(0.30), "plm": f1(0.35), "mlm": f1(0.29)},
         "race": {a: {"accuracy": _s(0.9 if a == "mlm" else 0.2, 0.01)} for a in report.ARMS}}
  line, lines = _sign_line(agg, {"classify": True, "squad": True, "race": False})
  assert line == "In this run 6 of 9 measured gaps have the papers' sign"
  assert "| plm − mlm | XLNet Table 6 (XLNet-Base K=7 − DAE + Transformer-XL): RACE +1.02; " \
         "SQuAD2.0 F1 +1.77; MNLI-m +0.96; SST-2 +0.06 | +22.0 | +6.0 | excl. |" in lines
  assert "| mpnet − plm | MPNet ablation (MPNet − its PLM row): SQuAD2.0 F1 +2.30; MNLI +0.60; " \
         "SST-2 +0.60 | +2.0 | n/a | excl. |" in lines
  # The same run with every gap reversed in sign: the 3 negative measured gaps now agree.
  flipped = {k: {a: v for a, v in agg[k].items()} for k in agg}
  for a, s in list(flipped["classify"].items()):
    flipped["classify"][a] = _s(1 - s["mean"], s["std"])
  for a, s in list(flipped["squad"].items()):
    flipped["squad"][a] = f1(1 - s["f1"]["mean"])
  assert _sign_line(flipped, {"classify": True, "squad": True, "race": False})[0] == \
      "In this run 3 of 9 measured gaps have the papers' sign"


def test_sign_count_all_positive_and_nothing_measured():
  agg = {"classify": {"plm": _s(0.6, 0.01), "mlm": _s(0.5, 0.01), "none": _s(0.4, 0.01)},
         "squad": {}, "race": {}}
  # plm - mlm +10.0, plm - none +20.0, mlm - none +10.0; the rest "n/a".
  assert _sign_line(agg, {})[0] == "In this run 3 of 3 measured gaps have the papers' sign"
  assert _sign_line(agg, {"classify": False})[0] == \
      "In this run 0 of 0 measured gaps have the papers' sign"


def test_sign_count_reads_the_gap_not_its_rounding():
  """A gap of +0.04 points is shown as "+0.0" but the first objective IS ahead (the
  classification text counts the same gap as an ordering that holds); -0.04 ("-0.0") and an
  exact 0 ("+0.0") are not ahead."""
  agg = {"classify": {"plm": _s(0.5004, 0.01), "mlm": _s(0.50, 0.01), "none": _s(0.5004, 0.01),
                      "mpnet": _s(0.4996, 0.01)}, "squad": {}, "race": {}}
  # plm - mlm +0.04; mpnet - plm -0.08; mpnet - mlm -0.04; plm - none 0; mlm - none -0.04.
  line, lines = _sign_line(agg, {})
  assert "| plm − mlm | " in lines[2] and lines[2].endswith(" | +0.0 | n/a | n/a |")
  assert line == "In this run 1 of 5 measured gaps have the papers' sign"
  text = report._classification_text(agg, DATA)
  assert text[-1].startswith("1 of 5 orderings")


def _acc(accuracy, n=300):
  return {"accuracy": accuracy, "n": n, "chance": 0.25,
          "se": (accuracy * (1 - accuracy) / n) ** 0.5}


def test_cloze_scoring_chosen_on_dev_and_verdicts():
  """Scoring chosen by the dev gap (plm: mean, +0.20 against sum's +0.05, although sum's TEST gap
  is larger; mlm: sum). Verdicts from the test gap against two standard errors of the
  difference, worked out by hand: plm 0.40 vs 0.27, se sqrt(.4*.6/300 + .27*.73/300) = 0.0382,
  gap 3.4 se: beyond; mlm 0.30 vs 0.27, se 0.0368, 0.8 se: not told apart; mpnet 0.20 vs 0.30,
  se sqrt(.2*.8/300 + .3*.7/300) = 0.0351, -2.8 se: below."""
  from reproduction import diagnosis_report as dr, language_report
  cloze = {
      "plm": {"0": {"dev": {"sum": _acc(0.30), "mean": _acc(0.25)},
                    "test": {"sum": _acc(0.20), "mean": _acc(0.27)}},
              "2000": {"dev": {"sum": _acc(0.35), "mean": _acc(0.45)},
                       "test": {"sum": _acc(0.60), "mean": _acc(0.40)}}},
      "mlm": {"0": {"dev": {"sum": _acc(0.25), "mean": _acc(0.25)},
                    "test": {"sum": _acc(0.27), "mean": _acc(0.27)}},
              "2000": {"dev": {"sum": _acc(0.32), "mean": _acc(0.30)},
                       "test": {"sum": _acc(0.30), "mean": _acc(0.50)}}},
      "mpnet": {"0": {"dev": {"sum": _acc(0.25), "mean": _acc(0.25)},
                      "test": {"sum": _acc(0.30), "mean": _acc(0.30)}},
                "2000": {"dev": {"sum": _acc(0.26), "mean": _acc(0.25)},
                         "test": {"sum": _acc(0.20), "mean": _acc(0.35)}}}}
  chosen = language_report.cloze_choice(cloze)
  assert {k: v[0] for k, v in chosen.items()} == {"plm": "mean", "mlm": "sum", "mpnet": "sum"}
  lines = language_report.cloze_lines(cloze)
  assert "| plm | mean | 25.0 | 27.0 | 45.0 | 40.0 |" in lines
  assert ("- plm: test 40.0% against 27.0% (+13.0 points, 3.4 standard errors of the "
          "difference, n 300): beats its random weights beyond the noise.") in lines
  assert ("- mlm: test 30.0% against 27.0% (+3.0 points, 0.8 standard errors of the "
          "difference, n 300): is not told apart from its random weights.") in lines
  assert ("- mpnet: test 20.0% against 30.0% (-10.0 points, -2.8 standard errors of the "
          "difference, n 300): scores below its random weights beyond the noise.") in lines


def test_acceptability_verdicts_weigh_test_sampling_and_seed_spread():
  import dataclasses
  from reproduction import language_report, presets
  p = dataclasses.replace(presets.PRESETS["small"], accept_seeds=(0, 1, 2))
  mcc = {"plm": [0.3, 0.3, 0.3], "none": [0.1, 0.1, 0.1], "mlm": [0.15, 0.25, 0.2]}
  results = {f"accept-{arm}-s{s}": {"metrics": {"mcc": v, "accuracy": 0.5 + v / 2, "n": 600}}
             for arm, values in mcc.items() for s, v in zip(p.seeds, values)}
  acc = language_report.aggregate(p, results)
  # by hand: SE(plm) = sqrt((1 - 0.09) / 598) = 0.039009, SE(none) = sqrt(0.99 / 598) = 0.040688
  diff, two_se, beyond = language_report.verdict(acc, "plm", "none")
  assert abs(diff - 0.2) < 1e-12 and abs(two_se - 0.112733) < 1e-5 and beyond
  # mlm: mean 0.2, seed std 0.05 over 3 seeds adds 0.05^2 / 3 to the sampling's 0.96 / 598
  diff, two_se, beyond = language_report.verdict(acc, "mlm", "none")
  se_mlm = (0.96 / 598 + 0.0025 / 3) ** 0.5
  assert abs(two_se - 2 * (se_mlm ** 2 + 0.99 / 598) ** 0.5) < 1e-9
  assert abs(diff - 0.1) < 1e-12 and abs(two_se - 0.127972) < 1e-5 and not beyond
  # accuracy: binomial, 0.65 and 0.55 on 600: 2 * sqrt(.65*.35/600 + .55*.45/600) = 0.056273
  diff, two_se, beyond = language_report.verdict(acc, "plm", "none", "accuracy")
  assert abs(two_se - 0.056273) < 1e-5 and beyond
  line = language_report.summary_line(acc)
  assert "plm +20.0 MCC points over none (beyond" in line
  assert "mlm +10.0 MCC points over none (within" in line


def test_mpnet_gap_is_called_the_architectures_only_when_hugging_face_agrees():
  from reproduction import diagnosis_report as dr

  def curve(hf_minus_ours, null_minus_ours):
    return {"comparisons": {
        "exact_ours_vs_hf": {"steps": 50, "max_abs_diff": 3e-6},
        "replay_vs_log": {"max_abs_diff": 5e-5},
        "replay_vs_hf": {"last": {"mean_diff": -hf_minus_ours}},
        "replay_vs_null": {"last": {"mean_diff": -null_minus_ours}}},
        "heldout": {"hf": 6.052, "replay": 6.054}}
  agree = dr.hf_check_text(dr.hf_check_summary(curve(-0.0001, 0.0013)))
  assert "HF's mean loss is -0.0001 nats from ours, where ours with other dropout masks is " \
         "+0.0013" in agree and agree.endswith("so the gap is the architecture's.")
  # HF 0.05 nats lower, dropout noise 0.002: not the architecture's until explained
  differ = dr.hf_check_text(dr.hf_check_summary(curve(-0.05, 0.002)))
  assert "so the gap is the architecture's" not in differ and "see the tool's JSON" in differ
  assert "tools/mpnet_hf_curve.py --output_dir" in dr.hf_check_text(None)
  # with the tool's curves the text points at the plot of both
  full = curve(-0.0001, 0.0013)
  full["arms"] = {"replay": {"curve": [[50, 8.2], [100, 7.6]]},
                  "hf": {"curve": [[50, 8.21], [100, 7.59]]}, "null": {}}
  check = dr.hf_check_summary(full)
  assert check["curves"] == {"replay": [[50, 8.2], [100, 7.6]], "hf": [[50, 8.21], [100, 7.59]]}
  assert dr.hf_check_text(check).endswith("(plots/mpnet_hf_curve.png)")


def test_fine_tuning_is_set_against_the_probe_on_what_its_head_reads():
  import numpy as np
  from reproduction import diagnosis_report, diagnostics
  # the summary half of the probe's features is the first half of each row
  feats = {"train": np.arange(12.).reshape(2, 6)}
  assert diagnostics.summary_part(feats)["train"].tolist() == [[0, 1, 2], [6, 7, 8]]
  # 491 test examples; two SE of a difference: 2 * sqrt(a (1 - a) / 491 + std^2 / seeds +
  # b (1 - b) / 491), worked by hand (std 0 unless given):
  # none:  0.50 against the full probe 0.40 -> not below it
  # plm:   0.15 against 0.385 (2 sqrt(.1275/491 + .236775/491) = 0.05449) -> below; against
  #        the summary probe 0.16 (2 sqrt(.1275/491 + .1344/491) = 0.04620) -> not below
  # mlm:   0.15 against 0.385 -> below; against 0.34 (0.05354) -> below too
  # mpnet: 0.25, seeds' std 0.11 over 3, against 0.45: 2 sqrt(.1875/491 + .0121/3 +
  #        .2475/491) = 0.14027 -> below; against the summary probe 0.34: 2 sqrt(.1875/491 +
  #        .0121/3 + .2244/491) = 0.13960 -> not below (the seed spread is that wide)
  diag = {"probe": {arm: {"2000": {"test": both, "summary": {"test": alone}}}
                    for arm, both, alone in (("none", 0.40, 0.30), ("plm", 0.385, 0.16),
                                             ("mlm", 0.385, 0.34), ("mpnet", 0.45, 0.34))}}
  cls = {"none": {"mean": 0.50}, "plm": {"mean": 0.15}, "mlm": {"mean": 0.15},
         "mpnet": {"mean": 0.25, "std": 0.11, "n": 3}}
  lines = diagnosis_report.finetune_vs_probe(diag, cls, 491)
  assert len(lines) == 4
  none, plm, mlm, mpnet = lines
  assert none.startswith("- none: fine-tuned 50.0; probe on the summary token alone 30.0, on "
                         "summary and mean 40.0") and none.endswith("not below the probe.")
  assert plm.startswith("- plm:") and "not information its path lost" in plm
  assert "±5.4" in plm and "±14.0" in mpnet and "not information its path lost" in mpnet
  assert mlm.startswith("- mlm:") and mlm.endswith("fell short of what its own input holds.")
  assert diagnosis_report.finetune_vs_probe(diag, cls, None) == []


# ---- the pretraining section (report._pretrain_text) ---------------------------------------
def test_pretraining_text_below_and_above_the_unigram_loss():
  agg = {"pretrain": {"plm": _curve(4.5), "mlm": _curve(5.5), "mpnet": {"curve": []}}}
  lines = report._pretrain_text(agg, 5.0, None)
  assert lines[:2] == [
      "- plm: loss 7.00 at the first log, 4.50 (mean of the last 3 logs) after 400 steps; 0.50 "
      "nats below the unigram loss (5.00).",
      "- mlm: loss 7.00 at the first log, 5.50 (mean of the last 3 logs) after 400 steps; still "
      "at or above the unigram loss (5.00): the model has not yet learnt to use context beyond "
      "token frequencies."]
  assert report._pretrain_text(agg, None, None)[0].endswith("after 400 steps.")
