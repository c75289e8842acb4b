"""subprocess.run and subprocess.Popen for the tests' runs of `python ...`, without paying
TensorFlow's import each time: a command starting with this interpreter runs in one
data_utils.warm_start.Launcher per test process (a pytest-xdist worker; started at its first
use, stopped at exit), or in a fresh interpreter when the server cannot serve it (another
import-time environment, interpreter options); any other command is subprocess's. Tests of
what a fresh interpreter does (its start-up and imports, its hash seed, its process group)
call subprocess themselves."""

import atexit
import os
import subprocess
import sys

from data_utils import warm_start

_LAUNCHER = []


def launcher():
  if not _LAUNCHER:
    _LAUNCHER.append(warm_start.Launcher(dict(os.environ)))
    atexit.register(_LAUNCHER[0].close)
  return _LAUNCHER[0]


def close():
  """Stops this process's server, if it started one (tests/conftest.py, at the session's end:
  a pytest-xdist worker may leave without running atexit)."""
  while _LAUNCHER:
    _LAUNCHER.pop().close()


def run(command, **kwargs):
  """subprocess.run(command, **kwargs)."""
  if command[0] != sys.executable:
    return subprocess.run(command, **kwargs)   # pylint: disable=subprocess-run-check
  return launcher().run(command[1:], **kwargs)


def popen(command, **kwargs):
  """subprocess.Popen(command, **kwargs)."""
  if command[0] != sys.executable:
    return subprocess.Popen(command, **kwargs)
  return launcher().popen(command[1:], **kwargs)
