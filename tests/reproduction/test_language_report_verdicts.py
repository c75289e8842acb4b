"""The language report's verdict sentences (reproduction/language_report.py: the acceptability
section and the zero-shot acceptability judgements) on crafted result tables; every expected
sentence worked out by hand from the report's rules (see test_report_verdicts.py)."""

import pytest

from tests.reproduction.test_report_verdicts import _acc

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
