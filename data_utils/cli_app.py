"""`run(main)`: the entry scripts' `absl.app.run`, except that asking for help exits with 0, and
no traceback at the door (`quietly`).

absl (2.x) prints the help of --help / -? / --helpshort / --helpfull / --helpxml and then exits
with status 1, the status of an error: `script.py --help && ...` stops there, and a caller
cannot tell the help it asked for from a failure. Here each help flag exits with 0 after
printing exactly what absl prints; everything else is absl's app.run unchanged (a bad flag still
exits 1 with absl's message, main's return value or sys.exit is still the exit status).

`quietly(fn, *args)` (around app.run here; a script with its own start-up calls it itself):
- Ctrl-C outside the training loop (start-up, data preparation, evaluation after training,
  export) is one line on stderr, "SCRIPT: interrupted; nothing half-written was published", and
  exit status EXIT_INTERRUPTED = 130 (128 + SIGINT, what a shell reports), no traceback. Every
  output is published whole or not at all (data_utils/fileio.py), so this holds wherever it
  lands. Inside the loop the trainer stops itself (training/preemption.py: a checkpoint, one
  line, status 75).
- stdout closed early (`script.py ... | head`): the rest of the output is dropped and the
  script exits at once with EXIT_STDOUT_CLOSED = 141 (128 + SIGPIPE: what a shell reports for a
  program killed by the closed pipe, so `set -o pipefail` sees the same status as for any Unix
  tool), instead of a BrokenPipeError traceback.

This module imports absl.app only inside `run`, so a script that avoids it on its fast path
can still use `quietly`.
"""

import os
import signal
import sys

from absl import flags

EXIT_INTERRUPTED = 130
EXIT_STDOUT_CLOSED = 141


def _script():
  return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def quietly(fn, *args):
  """fn(*args), with Ctrl-C and a closed stdout turned into their exit statuses (see the
  module docstring); stdout is flushed inside, so a pipe closed early is seen here and not at
  the interpreter's exit."""
  try:
    try:
      return fn(*args)
    finally:
      sys.stdout.flush()
  except BrokenPipeError:
    _drop_stdout()
    sys.exit(EXIT_STDOUT_CLOSED)
  except KeyboardInterrupt:
    try:
      sys.stdout.flush()
      print(f"{_script()}: interrupted; nothing half-written was published", file=sys.stderr,
            flush=True)
    except (BrokenPipeError, KeyboardInterrupt):
      _drop_stdout()
    sys.exit(EXIT_INTERRUPTED)


def quiet_imports(module_name):
  """Called by an entry script right after importing this module, with its `__name__`: when it
  runs as the program, Ctrl-C during the imports that follow (TensorFlow's take seconds) is one
  line and status 130 instead of a traceback (nothing is written yet); `run` puts Python's own
  handler back before `main`. Imported as a module (the tests), it does nothing."""
  if module_name == "__main__" and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_while_importing)   # (an ignored SIGINT stays so)


def _interrupted_while_importing(signum, frame):
  del signum, frame
  print(f"{_script()}: interrupted; nothing half-written was published", file=sys.stderr,
        flush=True)
  os._exit(EXIT_INTERRUPTED)    # mid-import: no state to unwind, nothing written


def _drop_stdout():
  """Points stdout (the file descriptor) at /dev/null: Python flushes sys.stdout again at exit,
  which would otherwise raise into the closed pipe once more."""
  try:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
  except (OSError, ValueError, AttributeError):    # no real stdout (a test's capture)
    pass

HELP_FLAGS = ("help", "helpshort", "helpfull", "helpxml")   # -? is --help's short name


def _exit_0_after_help(flag):
  """Wraps `flag.parse` (absl's: print the help, then sys.exit(1)) to exit with 0 instead."""
  if getattr(flag, "_exits_0_after_help", False):
    return
  parse = flag.parse

  def parse_then_exit_0(argument):
    try:
      parse(argument)
    except SystemExit as e:
      if e.code == 1:   # the help flags' only exit, after printing the help
        sys.exit(0)
      raise

  flag.parse = parse_then_exit_0
  flag._exits_0_after_help = True


def run(main, argv=None):
  """absl.app.run(main, argv) with the help flags exiting 0, under `quietly`."""
  from absl import app  # pylint: disable=import-outside-toplevel

  if signal.getsignal(signal.SIGINT) is _interrupted_while_importing:
    signal.signal(signal.SIGINT, signal.default_int_handler)    # KeyboardInterrupt again
  app.define_help_flags()   # idempotent; app.run calls it again
  for name in HELP_FLAGS:
    _exit_0_after_help(flags.FLAGS[name])
  quietly(app.run, main, argv)
