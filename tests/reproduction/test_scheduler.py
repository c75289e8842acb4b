"""The quickstart's stage scheduler (reproduction/scheduler.py): order, `after`, barriers, at
most `jobs` at once, failures and resuming. Fake script stages record when they ran.

Overlap is shown by a rendezvous, not by sleeps that a busy machine could outlast: a stage
given a partner marks that it started and waits for the partner's mark, so both finish only if
the scheduler ran them at once (else the wait ends at the hang guard, and the test fails)."""

import json
import os
import sys

import pytest

from reproduction.scheduler import Stage, StageError, run_stages
from tests.hang_guard import HANG_GUARD

_SCRIPT = ("import json, os, sys, time; t0 = time.time(); times, name = sys.argv[1], sys.argv[3]\n"
           "if len(sys.argv) > 5:\n"
           "  open(times + '.' + name, 'w').close()\n"
           "  end = t0 + float(sys.argv[6])\n"
           "  while not os.path.exists(times + '.' + sys.argv[5]):\n"
           "    if time.time() > end: sys.exit('no partner: ' + sys.argv[5])\n"
           "    time.sleep(0.05)\n"
           "time.sleep(float(sys.argv[2]))\n"
           "open(times, 'a').write(json.dumps([name, t0, time.time()]) + '\\n')\n"
           "print('step 1/1 loss 1.0'); sys.exit(int(sys.argv[4]))")


def _stage(name, times, sleep=0.6, fail=0, parallel=True, after=(), partner=None):
  """A stage that sleeps `sleep` s and records its span; with `partner`, it first waits (up to
  the hang guard) until the partner stage has started."""
  argv = ["-c", _SCRIPT, str(times), str(sleep), name, str(fail)]
  if partner:
    argv += [partner, str(HANG_GUARD)]
  return Stage(name, name, 1.0, argv=argv, parse=lambda text, name=name: {"name": name},
               parallel=parallel, after=after)


def _spans(times):
  with open(times) as f:
    return {name: (t0, t1) for name, t0, t1 in map(json.loads, f)}


def _run(tmp_path, stages, jobs, warm=False):
  """warm: the script stages run in a warm server (data_utils/warm_start.py)."""
  return run_stages(stages, str(tmp_path / "out"), sys.executable if warm else "python",
                    lambda *a: None, jobs=jobs, warm=warm)


@pytest.mark.slow
@pytest.mark.parametrize("warm", [False, True])
def test_parallel_stages_overlap_after_and_barriers_hold(tmp_path, warm):
  times = tmp_path / "times.jsonl"
  stages = [_stage("a", times, partner="b"), _stage("b", times, partner="a"),
            _stage("c", times, after=("a",)),
            _stage("barrier", times, sleep=0.1, parallel=False), _stage("d", times)]
  results, seconds = _run(tmp_path, stages, jobs=2, warm=warm)
  assert set(results) == {"a", "b", "c", "barrier", "d"}
  s = _spans(times)
  assert s["b"][0] < s["a"][1] and s["a"][0] < s["b"][1]            # a and b overlapped
  assert s["c"][0] >= s["a"][1]                                      # c after a
  assert s["barrier"][0] >= max(s[n][1] for n in "abc")              # the barrier waits
  assert s["d"][0] >= s["barrier"][1]                                # and holds back d
  for name in ("a", "b", "c", "barrier", "d"):
    saved = json.loads((tmp_path / "out" / "stages" / f"{name}.json").read_text())
    assert saved["results"] == {"name": name}


def test_one_job_runs_one_at_a_time_in_order(tmp_path):
  times = tmp_path / "times.jsonl"
  _run(tmp_path, [_stage(n, times, sleep=0.2) for n in "abc"], jobs=1)
  s = _spans(times)
  assert s["a"][1] <= s["b"][0] and s["b"][1] <= s["c"][0]


@pytest.mark.parametrize("warm", [False, True])
def test_a_failure_stops_the_others_and_a_rerun_resumes(tmp_path, warm):
  times = tmp_path / "times.jsonl"
  stages = [_stage("slow", times, sleep=HANG_GUARD), _stage("bad", times, sleep=0.2, fail=1),
            _stage("later", times)]
  with pytest.raises(StageError, match=r"^stage bad failed \(exit 1\)"):
    _run(tmp_path, stages, jobs=2, warm=warm)
  stage_dir = tmp_path / "out" / "stages"
  assert not stage_dir.exists() or os.listdir(stage_dir) == []
  # slow was killed, not recorded; later never started
  assert "slow" not in _spans(times) and "later" not in _spans(times)
  # rerun: a stage recorded as done is skipped, the rest runs
  stage_dir.mkdir(parents=True, exist_ok=True)
  (stage_dir / "slow.json").write_text(json.dumps(
      {"name": "slow", "seconds": 1.0, "results": {"name": "slow"}}))
  stages[1] = _stage("bad", times, sleep=0.1)
  results, _ = _run(tmp_path, stages, jobs=2, warm=warm)
  assert set(results) == {"slow", "bad", "later"} and "slow" not in _spans(times)


def test_waiting_for_a_stage_nobody_provides_is_an_error(tmp_path):
  with pytest.raises(StageError, match="waits for"):
    _run(tmp_path, [_stage("x", tmp_path / "t", after=("missing",))], jobs=2)


def test_a_stage_eta_is_read_from_the_training_logs_step_line(tmp_path):
  """The quickstart relays a stage's ETA from the trainer's step line (training/progress.py's
  h:mm:ss): 1:02:03 left is 3723 s, shown as 1h02m; a step line without an ETA (the first
  loop, which includes the compile) falls back to the default (0 s here)."""
  from training import progress
  lines = ["step 2/10 loss 2.5 46.7s for 2 steps, with compile",
           f"step 5/10 loss 2.0 0.50s/step 1,000 tokens/s ETA {progress.hms(3723)}"]
  script = "import sys; print(sys.argv[1]); print(sys.argv[2])"
  stage = Stage("s", "s", 1.0, argv=["-c", script, *lines], parse=lambda text: {})
  said = []
  run_stages([stage], str(tmp_path / "out"), "python", lambda *a: said.append(a), jobs=1)
  relayed = [message for tag, message in said if message.startswith("step ")]
  assert relayed[0].startswith("step 2/10 loss 2.500; stage ETA 0s,"), relayed
  assert relayed[1].startswith("step 5/10 loss 2.000; stage ETA 1h02m,"), relayed
