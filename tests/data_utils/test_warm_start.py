"""data_utils/warm_start.py: a script run in the warm server behaves as `python SCRIPT` in a
fresh interpreter (the reference: subprocess with this interpreter, same arguments, directory
and environment): output, exit status, tracebacks, deaths by signal, sys.argv / sys.path /
__name__, atexit; it draws its own random numbers and loads the project's modules afresh; the
server never started TensorFlow's runtime; a client that goes away takes its run with it."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from data_utils import warm_start
from tests.hang_guard import HANG_GUARD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = textwrap.dedent("""
    import atexit, os, sys
    atexit.register(lambda: print("atexit ran", flush=True))
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0],
                      "name": __name__, "env": os.environ.get("PROBE_VALUE")}))
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "refuse":
      sys.exit("probe.py: a one-line refusal")
    if what == "status":
      sys.exit(3)
    if what == "raise":
      raise ValueError("boom")
    if what == "term":
      os.kill(os.getpid(), signal.SIGTERM)
    if what == "interrupt":
      raise KeyboardInterrupt
    if what == "stdin":
      print(sys.stdin.read().upper())
    """)


@pytest.fixture(scope="module")
def launcher():
  with warm_start.Launcher() as launcher:
    yield launcher


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
  directory = tmp_path_factory.mktemp("probe")
  path = directory / "probe.py"
  path.write_text("import json, signal\n" + PROBE)
  (directory / "probe_pkg").mkdir()
  (directory / "probe_pkg" / "__init__.py").write_text("")
  (directory / "probe_pkg" / "__main__.py").write_text("import json, signal\n" + PROBE)
  return directory


def _both(launcher, argv, cwd):
  env = dict(os.environ, PROBE_VALUE="run's own", PYTHONPATH=str(cwd))
  fresh = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=HANG_GUARD)
  proc = launcher.popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
  assert proc.warm
  out, err = proc.communicate(timeout=HANG_GUARD)
  return fresh, subprocess.CompletedProcess(argv, proc.returncode, out, err)


@pytest.mark.parametrize("what", ["", "refuse", "status", "raise", "term", "interrupt"])
def test_a_script_behaves_as_in_a_fresh_interpreter(launcher, probe, what, tmp_path):
  fresh, warm = _both(launcher, [str(probe / "probe.py"), what], tmp_path)
  assert (warm.returncode, warm.stdout, warm.stderr) == (
      fresh.returncode, fresh.stdout, fresh.stderr)
  expected_status = {"": 0, "refuse": 1, "status": 3, "raise": 1, "term": -signal.SIGTERM,
                     "interrupt": -signal.SIGINT}[what]
  assert warm.returncode == expected_status
  if what != "term":
    assert warm.stdout.endswith("atexit ran\n")


@pytest.mark.parametrize("form", ["-m", "-c"])
def test_module_and_command_forms(launcher, probe, form, tmp_path):
  argv = (["-m", "probe_pkg", "status"] if form == "-m" else
          ["-c", "import json, signal\n" + PROBE, "refuse"])
  fresh, warm = _both(launcher, argv, probe if form == "-m" else tmp_path)
  assert (warm.returncode, warm.stdout, warm.stderr) == (
      fresh.returncode, fresh.stdout, fresh.stderr)
  assert warm.returncode == (3 if form == "-m" else 1)


def test_standard_input_is_the_callers(launcher, probe, tmp_path):
  source = tmp_path / "in.txt"
  source.write_text("from the caller")
  with open(source, encoding="utf-8") as stdin:
    proc = launcher.popen([str(probe / "probe.py"), "stdin"], stdin=stdin,
                          stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=HANG_GUARD)
  assert proc.warm and proc.returncode == 0 and "FROM THE CALLER" in out


SEEDS = ("import json, random, numpy as np, data_utils.cli_app as c, tempfile\n"
         "print(json.dumps([random.random(), float(np.random.rand()), c.STARTED]))")


def test_each_run_draws_its_own_random_numbers_and_loads_the_project_afresh(launcher):
  assert launcher.address()      # the server has imported what it imports
  before = time.time()
  runs = [launcher.run(["-c", SEEDS], cwd=ROOT, capture_output=True, text=True,
                       timeout=HANG_GUARD) for _ in range(2)]
  values = [json.loads(r.stdout) for r in runs]
  assert values[0][0] != values[1][0] and values[0][1] != values[1][1]
  # data_utils.cli_app.STARTED is the script's start (the end-of-run summary's clock): the
  # module is imported by the run, not inherited from the server's imports
  assert all(v[2] >= before for v in values), (values, before)


def test_tensorflow_runtime_starts_in_the_run(launcher, tmp_path):
  """Logical devices can only be configured before TensorFlow's runtime starts: the server
  imported TensorFlow without starting it."""
  code = ("import tensorflow as tf\n"
          "cpu = tf.config.list_physical_devices('CPU')[0]\n"
          "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
          "print(len(tf.config.list_logical_devices('CPU')))")
  r = launcher.run(["-c", code], cwd=tmp_path, capture_output=True, text=True,
                   timeout=HANG_GUARD)
  assert r.returncode == 0 and r.stdout.strip() == "2", r.stderr[-2000:]


def test_runs_the_server_cannot_serve_start_a_fresh_interpreter(tmp_path):
  env = dict(os.environ)
  with warm_start.Launcher(env, max_servers=2) as launcher:
    args = dict(cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD)
    assert launcher.popen(["-c", "pass"], cwd=tmp_path).wait(HANG_GUARD) == 0
    # another setting read at import time: a second server; a third: a fresh interpreter
    other = dict(env, TF_CPP_MIN_LOG_LEVEL="3" if env.get("TF_CPP_MIN_LOG_LEVEL") != "3" else "1")
    third = dict(env, PYTHONHASHSEED="123")
    procs = [launcher.popen(["-c", "pass"], cwd=tmp_path, env=e) for e in (other, third)]
    assert [p.warm for p in procs] == [True, False] and all(
        p.wait(HANG_GUARD) == 0 for p in procs)
    # interpreter options, --verbose (TensorFlow's start-up messages are the run's to print)
    for argv in (["-X", "utf8", "-c", "pass"], ["-c", "pass", "--verbose"]):
      proc = launcher.popen(argv, cwd=tmp_path)
      assert not proc.warm and proc.wait(HANG_GUARD) == 0
    fresh = launcher.run(["-X", "utf8", "-c", "import sys; print(sys.flags.utf8_mode)"], **args)
    assert fresh.stdout.strip() == "1"       # the option reached the interpreter


def _gone(pid):
  deadline = time.time() + HANG_GUARD
  while time.time() < deadline:
    try:
      os.kill(pid, 0)
    except ProcessLookupError:
      return True
    time.sleep(0.1)
  return False


def test_a_run_ends_with_its_client_and_with_the_launcher(tmp_path):
  with warm_start.Launcher() as launcher:
    sleeper = ["-c", "import time; time.sleep(3600)"]
    proc = launcher.popen(sleeper, cwd=tmp_path)
    assert proc.warm and proc.poll() is None
    os.kill(proc.pid, 0)                       # the pid is the run's own process
    proc._sock.close()                         # pylint: disable=protected-access
    assert _gone(proc.pid)
    proc = launcher.popen(sleeper, cwd=tmp_path)
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
      proc.wait(timeout=0.5)
  assert _gone(proc.pid)


def test_the_command_line_client_runs_in_the_server_and_passes_signals_on(launcher, probe,
                                                                          tmp_path):
  address = launcher.address()
  assert address
  client = [sys.executable, "-m", "data_utils.warm_start", "--connect", address, "--"]
  env = dict(os.environ, PROBE_VALUE="run's own",
             PYTHONPATH=os.pathsep.join([ROOT, str(tmp_path)]))
  fresh = subprocess.run([sys.executable, str(probe / "probe.py"), "status"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=HANG_GUARD)
  via = subprocess.run(client + [str(probe / "probe.py"), "status"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=HANG_GUARD)
  assert (via.returncode, via.stdout, via.stderr) == (
      fresh.returncode, fresh.stdout, fresh.stderr)
  # SIGTERM to the client reaches the run; the client ends as the run did
  ready = tmp_path / "ready"
  code = (f"import pathlib, time; pathlib.Path({str(ready)!r}).write_text('x'); "
          "time.sleep(3600)")
  proc = subprocess.Popen(client + ["-c", code], cwd=tmp_path, env=env)
  deadline = time.time() + HANG_GUARD
  while not ready.exists() and time.time() < deadline:
    time.sleep(0.1)
  proc.send_signal(signal.SIGTERM)
  assert proc.wait(timeout=HANG_GUARD) == -signal.SIGTERM


def test_a_server_that_died_is_replaced_by_fresh_interpreters(tmp_path):
  with warm_start.Launcher() as launcher:
    assert launcher.address()
    server = next(iter(launcher._servers.values())).process   # pylint: disable=protected-access
    server.kill()
    server.wait()
    proc = launcher.popen(["-c", "print('ran')"], cwd=tmp_path, stdout=subprocess.PIPE,
                          text=True)
    out, _ = proc.communicate(timeout=HANG_GUARD)
    assert not proc.warm and proc.returncode == 0 and out == "ran\n"
