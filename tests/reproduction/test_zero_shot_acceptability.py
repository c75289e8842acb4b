"""Acceptability judged zero-shot (reproduction/diagnostics.py: the threshold and variant chosen
on dev; reproduction/language_report.py: the verdicts), worked by hand."""

import numpy as np

from reproduction import diagnostics, language_report


def test_best_threshold_is_the_cut_of_highest_mcc_on_these_scores():
  # sorted: 0.1 (0), 0.35 (1), 0.4 (0), 0.8 (1). Cut at 0.225: TP 2 FP 1 TN 1 FN 0 ->
  # (2*1 - 1*0) / sqrt(3*2*2*1) = 0.577; at 0.6: TP 1 FP 0 TN 2 FN 1 -> 0.577 too (the lower
  # cut is kept); at 0.375: TP 1 FP 1 TN 1 FN 1 -> 0.
  t, mcc = diagnostics.best_threshold(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1]))
  assert abs(t - 0.225) < 1e-12 and abs(mcc - 2 / 12 ** 0.5) < 1e-12
  # a score that separates the labels perfectly: the cut falls between the classes, MCC 1
  t, mcc = diagnostics.best_threshold(np.array([3.0, 1.0, 4.0, 0.0]), np.array([1, 0, 1, 0]))
  assert t == 2.0 and mcc == 1.0


def test_the_variant_and_threshold_come_from_dev_and_test_is_read_with_them():
  dev = {"mean": np.array([0.5, 0.1, 0.4, 0.2]),       # the labels, badly
         "slor": np.array([-1.0, -3.0, 2.0, 1.0]),     # perfectly at any cut in (-1, 1)
         "label": np.array([0, 0, 1, 1])}
  test = {"mean": np.array([9.0, 9.0, 9.0]), "slor": np.array([0.5, -0.5, 0.0]),
          "label": np.array([1, 0, 0])}
  got = diagnostics.acceptability_judgement(dev, test)
  assert got["variant"] == "slor" and got["threshold"] == 0.0 and got["dev"]["mcc"] == 1.0
  # test at slor >= 0: predictions 1, 0, 1 against 1, 0, 0: TP 1 FP 1 TN 1 FN 0
  assert got["test"] == {"mcc": 0.5, "accuracy": 2 / 3, "n": 3}


def _zs(random, final, n=400):
  return {"0": {"variant": "mean", "dev": {"mcc": 0.1, "n": n}, "test": {"mcc": random, "n": n}},
          "2000": {"variant": "slor", "dev": {"mcc": 0.3, "n": n},
                   "test": {"mcc": final, "n": n}}}


def test_zero_shot_verdicts_against_random_weights_and_chance():
  # SE of an MCC r on n: sqrt((1 - r^2) / (n - 2)). plm, n 400: random 0.002 -> 0.050125,
  # final 0.269 -> 0.048278; two SE of the difference 2 * hypot = 0.139; of the final around
  # chance 0.0966. mlm: 0.08 / 0.213 (difference 0.133 < 0.140, final above 0.0955).
  # mpnet: -0.156 / 0.085 (difference 0.241 > 0.141, final below 0.0996).
  zs = {"plm": _zs(0.002, 0.269), "mlm": _zs(0.08, 0.213), "mpnet": _zs(-0.156, 0.085)}
  lines = language_report.zero_shot_accept_lines(zs)
  assert "| plm | mean | 10.0 | 0.2 | slor | 30.0 | 26.9 |" in lines
  plm, mlm, mpnet = [line for line in lines if line.startswith("- ")]
  assert "(+26.7, two standard errors ±13.9; chance 0 ±9.7)" in plm
  assert plm.endswith("judges single sentences beyond the noise, with no training set.")
  assert mlm.endswith("above chance, but not beyond the noise of its random weights' score.")
  assert mpnet.endswith("above its random weights (which fall below chance), not beyond chance.")
  # fine-tuned arms within the noise of their twins: the zero-shot verdict says so
  acc = {arm: {"mcc": {"n": 3, "mean": m, "std": 0.01, "values": [m] * 3},
               "accuracy": {"n": 3, "mean": 0.5, "std": 0.01, "values": [0.5] * 3},
               "n_test": 600} for arm, m in (("plm", 0.02), ("none", 0.0))}
  with_ft = language_report.zero_shot_accept_lines(zs, acc)
  assert [l for l in with_ft if l.startswith("- plm")][0].endswith(
      "the fine-tuning set does not draw it out (README: a dev sweep of train size, steps, "
      "rates and heads).")
  assert not any("draw out" in l for l in lines + with_ft if not l.startswith("- plm"))
  summary = language_report.zero_shot_accept_summary(zs)
  assert "plm +26.7 (±13.9; the pretrained model judges" in summary
  assert language_report.zero_shot_accept_lines({}) == []
  assert language_report.zero_shot_accept_summary(None) is None
