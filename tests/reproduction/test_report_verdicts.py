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


# ---- the acceptability section (language_report.section) -----------------------------------
def _one(mean):
  """A one-seed stats() record (no seed spread: the standard errors are the test set's)."""
  return {"n": 1, "mean": mean, "std": 0.0, "min": mean, "max": mean, "values": [mean]}


def _accept(**arms):
  """{arm: (mcc, accuracy)} -> aggregate()'s layout, 600 test sentences."""
  return {arm: {"mcc": _one(m), "accuracy": _one(a), "n_test": 600}
          for arm, (m, a) in arms.items()}


def test_acceptability_section_beyond_within_and_ordering():
  """By hand (n 600; MCC SE sqrt((1 - r^2) / 598), accuracy SE sqrt(a (1 - a) / 600), two SE
  of a difference 2 hypot(se_a, se_b)): plm - none MCC +20.0 against ±11.3 (beyond), accuracy
  +10.0 against ±5.6 (beyond); mlm - none MCC +10.0 against ±11.4 (within), accuracy +5.0
  against ±5.7 (within); ordering plm > mlm by 10.0 against ±11.2 (within)."""
  from reproduction import language_report, presets
  acc = _accept(plm=(0.3, 0.65), none=(0.1, 0.55), mlm=(0.2, 0.60))
  data = {"accept": {"train": {"0": 50, "1": 50}, "dev": {"0": 20, "1": 20},
                     "test": {"0": 300, "1": 300}}}
  lines = language_report.section(acc, data, presets.PRESETS["small"])
  assert [l for l in lines if l.startswith("- ")] == [
      "- plm against its random-weights twin none: MCC +20.0 points (beyond two standard "
      "errors, ±11.3); accuracy +10.0 (beyond ±5.6).",
      "- mlm against its random-weights twin none: MCC +10.0 points (within two standard "
      "errors, ±11.4); accuracy +5.0 (within ±5.7).",
      "- Ordering of the objectives by test MCC: plm > mlm by 10.0 (within ±11.2)."]
  assert language_report.section({}, data, presets.PRESETS["small"]) == []
  assert language_report.summary_line({"none": acc["none"]}) is None


# ---- acceptability judged zero-shot (language_report.zero_shot_accept_*) -------------------
def _zs(random, final, n=402):
  """One objective's zero-shot record: random weights at step 0, final at step 600 (test MCC;
  n 402, so an MCC's SE is sqrt(1 - r^2) / 20)."""
  cell = lambda r: {"variant": "mean", "dev": {"mcc": r}, "test": {"mcc": r, "n": n}}
  return {"0": cell(random), "600": cell(final)}


def test_zero_shot_acceptability_every_verdict():
  """Each of the four judgements, by hand (two SE of the difference 2 hypot(se_r, se_f);
  chance's two SE 2 se_f): plm 0 -> 0.30: +30.0 > 13.8 and 30.0 > 9.5: beyond both; mlm 0.10 ->
  0.20: +10.0 < 14.0 but 20.0 > 9.8: above chance only; mpnet -0.20 -> 0.05: +25.0 > 14.0 but
  5.0 < 10.0: above its random weights only; x 0 -> 0.05: +5.0 < 14.1, 5.0 < 10.0: neither.
  plm's fine-tuned arm within the noise of its twin (MCC 0.15 against 0.10): the sentence on
  what fine-tuning does not draw out follows; mlm's (not beyond zero-shot) gets none."""
  from reproduction import language_report
  zs = {"plm": _zs(0.0, 0.30), "mlm": _zs(0.10, 0.20), "mpnet": _zs(-0.20, 0.05),
        "x": _zs(0.0, 0.05)}
  acc = _accept(plm=(0.15, 0.6), none=(0.10, 0.55), mlm=(0.12, 0.56))
  lines = [l for l in language_report.zero_shot_accept_lines(zs, acc) if l.startswith("- ")]
  assert lines == [
      "- plm: test MCC 30.0 against 0.0 for its random weights (+30.0, two standard errors "
      "±13.8; chance 0 ±9.5): the pretrained model judges single sentences beyond the noise, "
      "with no training set. Fine-tuned, the same weights are not told apart from their random "
      "twin: what the model knows shows in its word predictions, which the classifier never "
      "reads (it reads the summary token), and the fine-tuning set does not draw it out "
      "(README: a dev sweep of train size, steps, rates and heads).",
      "- mlm: test MCC 20.0 against 10.0 for its random weights (+10.0, two standard errors "
      "±14.0; chance 0 ±9.8): above chance, but not beyond the noise of its random weights' "
      "score.",
      "- mpnet: test MCC 5.0 against -20.0 for its random weights (+25.0, two standard errors "
      "±14.0; chance 0 ±10.0): above its random weights (which fall below chance), not beyond "
      "chance.",
      "- x: test MCC 5.0 against 0.0 for its random weights (+5.0, two standard errors ±14.1; "
      "chance 0 ±10.0): not told apart from its random weights or chance."]
  # fine-tuned beyond its twin: no such sentence
  beyond = _accept(plm=(0.40, 0.7), none=(0.10, 0.55))
  assert language_report.zero_shot_accept_lines({"plm": _zs(0.0, 0.30)}, beyond)[-2].endswith(
      "with no training set.")
  assert language_report.zero_shot_accept_summary({"mlm": _zs(0.10, 0.20)}) == (
      "Acceptability judged zero-shot by the language models themselves (test MCC points over "
      "the same model's random weights, two standard errors): mlm +10.0 (±14.0; above chance, "
      "but not beyond the noise of its random weights' score).")
  assert language_report.zero_shot_accept_summary({}) is None


def test_zero_shot_summary_gaps_and_order():
  """cloze: plm 0.25 -> 0.40 (se sqrt(.25*.75/300 + .4*.6/300) = 0.03775: +15.0 beyond
  ±7.5), mlm 0.25 -> 0.27 (+2.0 within ±7.2: 2 sqrt(.1875/300 + .1971/300) = 0.07161);
  pretrained order plm 40.0 > mlm 27.0. No pairs: that part left out; nothing: None."""
  from reproduction import language_report
  cell = lambda acc: {"dev": {"sum": _acc(acc), "mean": _acc(acc)},
                      "test": {"sum": _acc(acc), "mean": _acc(acc)}}
  diag = {"cloze": {"plm": {"0": cell(0.25), "2000": cell(0.40)},
                    "mlm": {"0": cell(0.25), "2000": cell(0.27)}}}
  assert language_report.zero_shot_summary(diag) == (
      "Zero-shot, no fine-tuning (test points over the same model's random weights, two "
      "standard errors of the difference): cloze (chance 25%): plm +15.0 (beyond ±7.5), mlm "
      "+2.0 (within ±7.2); pretrained: plm 40.0 > mlm 27.0.")
  assert language_report.zero_shot_summary({}) is None


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
