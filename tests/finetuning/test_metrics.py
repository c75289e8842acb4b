"""GLUE metrics on hand-computed cases."""

import numpy as np
import pytest

from finetuning import metrics as m


def test_accuracy_f1_by_hand():
  y, p = [1, 0, 1, 1, 0], [1, 1, 0, 1, 0]
  assert m.accuracy(y, p) == pytest.approx(0.6)
  # tp 2, predicted positive 3, actual positive 3 -> P = R = 2/3 -> F1 2/3
  assert m.f1_binary(y, p) == pytest.approx(2 / 3)
  assert m.f1_binary([0, 0], [0, 0]) == 0.0


def test_matthews_by_hand():
  # tp 2, tn 1, fp 1, fn 1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6
  y, p = [1, 0, 1, 1, 0], [1, 1, 0, 1, 0]
  assert m.matthews_corrcoef(y, p) == pytest.approx(1 / 6)
  assert m.matthews_corrcoef([1, 1, 1], [1, 1, 1]) == 0.0        # undefined -> 0
  assert m.matthews_corrcoef([0, 1, 2], [0, 1, 2]) == pytest.approx(1.0)


def test_pearson_spearman_with_ties():
  x, y = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.5]
  assert m.pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
  assert m.spearman(x, y) == pytest.approx(1.0)
  np.testing.assert_array_equal(m._ranks([10, 20, 20, 5]), [2, 3.5, 3.5, 1])
  # ranks x: 1,2,3 ; y: 1, 2.5, 2.5 -> pearson of ranks = 0.866...
  assert m.spearman([1, 2, 3], [1, 5, 5]) == pytest.approx(np.sqrt(3) / 2)


def test_task_metrics_names():
  assert set(m.task_metrics("CoLA", [1, 0], [1, 0])) == {"mcc"}
  assert set(m.task_metrics("sts-b", [1.0, 2.0], [1.0, 2.5])) == {"pearson", "spearman"}
  assert m.task_metrics("imdb", [1, 0], [1, 1]) == {"accuracy": 0.5, "error_rate": 0.5}
