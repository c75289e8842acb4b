"""bench/memory.py: reading XLA's buffer assignment, the fit against batch, the
largest batch in 16 GB, and a child stopped once the step is planned."""

import json

import pytest

from bench import memory

GIB = 2.0 ** 30


def _write(path, text):
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


def test_plan_reads_the_steps_total_and_temporaries_only(tmp_path):
  step = tmp_path / "module_0278.a_inference_full_step_6004__.134.cpu_after_optimizations-buffer-assignment.txt"
  _write(step, "BufferAssignment:\n"
         "allocation 0: size 4096, parameter 0, shape |f32[1024]| at ShapeIndex {}:\n"
         "allocation 1: size 1000, preallocated-temp:\n"
         "allocation 2: size 24, output shape is |(f32[], f32[])|, maybe-live-out:\n"
         "allocation 3: size 500, preallocated-temp:\n"
         "\nTotal bytes used: 5620 (5.49KiB)\n")
  # another module (e.g. the evaluation step) is not the training step's plan
  _write(tmp_path / "module_0300.a_inference_eval_step_9__.1.cpu_after_optimizations-"
         "buffer-assignment.txt", "allocation 0: size 7, preallocated-temp:\n"
         "Total bytes used: 99999\n")
  assert memory.xla_plan(str(tmp_path)) == (5620, 1500)
  assert memory.plan_written(str(tmp_path))


def test_a_plan_cut_before_its_total_is_not_taken(tmp_path):
  _write(tmp_path / "m.a_inference_full_step_1__.1.cpu_after_optimizations-buffer-assignment.txt",
         "allocation 0: size 4096, preallocated-temp:\n")
  assert not memory.plan_written(str(tmp_path))
  with pytest.raises(ValueError, match="Total bytes used"):
    memory.xla_plan(str(tmp_path))
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(ValueError, match="no buffer assignment"):
    memory.xla_plan(str(empty))


def _row(batch, gib, **kw):
  row = {"task": "classifier", "size": "base", "seq": 512, "batch": batch,
         "precision": "float32", "recompute": False, "params": 117, "step_gib": gib,
         "temp_gib": 0.0}
  row.update(kw)
  return row


def test_fit_takes_the_slope_of_the_two_largest_batches():
  # a fixed peak at batch 1 (1.9), then 2 + 0.5 / example: the slope is the large batches'
  rows = [_row(1, 1.9), _row(4, 4.0), _row(8, 6.0), _row(8, 0.0, recompute=True,
                                                            error="killed")]
  fits = memory.fit(rows)
  assert list(fits) == [("classifier", "base", 512, "float32", False)]
  f = fits[("classifier", "base", 512, "float32", False)]
  assert f["a_gib"] == pytest.approx(2.0) and f["b_gib"] == pytest.approx(0.5)
  # 16 GB = 14.9012 GiB, less 1 GiB of context, less 2 fixed: 11.9012 / 0.5 = 23.8
  assert f["max_batch"] == 23 and f["measured_up_to"] == 8


def test_table_marks_extrapolated_batches_and_sets_the_release_beside():
  rows = [_row(4, 4.0), _row(8, 6.0), _row(16, 10.0, recompute=True),
          _row(32, 13.0, recompute=True),
          _row(4, 3.0, task="pretrain"), _row(8, 5.0, task="pretrain")]
  text = memory.table(memory.fit(rows))
  lines = text.splitlines()
  # float32: 23, more than twice the 8 measured: only ">=8"; + recompute: a = 7, b = 3 / 16:
  # (13.9012 - 7) / 0.1875 = 36.8 -> 36, beyond the 32 measured: "36*"; the release: 8
  assert lines[2] == "| classifier, base, 512 | 8 | >=8 | 36* | - | - | - | - |"
  # pretraining has no release figure: 1 + 0.5 / example: (13.9012 - 1) / 0.5 = 25.8 -> 25,
  # again more than twice the 8 measured; a fit within the batches measured is printed bare
  assert lines[3] == "| pretrain, base, 512 | - | >=8 | - | - | - | - | - |"
  inside = memory.table(memory.fit([_row(4, 8.0), _row(8, 14.0)])).splitlines()
  # 2 + 1.5 / example: 11.9012 / 1.5 = 7.9 -> 7, within the 8 measured (which does not fit)
  assert inside[2] == "| classifier, base, 512 | 8 | 7 | - | - | - | - | - |"
  flat = memory.table(memory.fit([_row(4, 2.5), _row(8, 2.5)])).splitlines()
  assert flat[2] == "| classifier, base, 512 | 8 | >=8 | - | - | - | - | - |"
  costs = memory.cost_table(memory.fit(rows)).splitlines()
  assert costs[2].startswith("| classifier, base, 512 | 2.00 + 0.500/ex | 7.00 + 0.188/ex |")


def test_resume_keeps_measured_rows(tmp_path):
  out = str(tmp_path / "memory.json")
  memory.save(out, [_row(4, 4.0), _row(8, 6.0)])
  saved = json.loads(open(out, encoding="utf-8").read())
  assert [r["batch"] for r in saved["rows"]] == [4, 8]
  assert saved["fits"]["classifier,base,512,float32,False"]["max_batch"] == 23
  assert {memory._config(r) for r in saved["rows"]} == {
      ("classifier", "base", 512, 4, "float32", False),
      ("classifier", "base", 512, 8, "float32", False)}


@pytest.mark.slow
def test_a_child_stopped_once_planned_reads_the_same_plan_as_one_that_ran():
  """The plan-only path kills the child as soon as the plan's total line is written: its
  figure must be the complete plan's (the one a child that ran its steps leaves)."""
  planned = memory.run_child("classifier", "tiny", 32, 2, "float32", False, run_steps=False)
  ran = memory.run_child("classifier", "tiny", 32, 2, "float32", False, run_steps=True)
  assert "error" not in planned and "error" not in ran, (planned, ran)
  assert planned["step_seconds"] is None and ran["step_seconds"] > 0
  assert planned["step_gib"] == ran["step_gib"] and planned["temp_gib"] == ran["temp_gib"]
  assert planned["params"] == ran["params"]
  # the step holds at least the weights and Adam's two slots (12 bytes per parameter)
  assert ran["step_gib"] * GIB >= 12 * ran["params"]
