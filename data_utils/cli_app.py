"""`run(main)`: the entry scripts' `absl.app.run`, except that asking for help exits with 0.

absl (2.x) prints the help of --help / -? / --helpshort / --helpfull / --helpxml and then exits
with status 1, the status of an error: `script.py --help && ...` stops there, and a caller
cannot tell the help it asked for from a failure. Here each help flag exits with 0 after
printing exactly what absl prints; everything else is absl's app.run unchanged (a bad flag still
exits 1 with absl's message, main's return value or sys.exit is still the exit status).
"""

import sys

from absl import app
from absl import flags

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
  """absl.app.run(main, argv) with the help flags exiting 0."""
  app.define_help_flags()   # idempotent; app.run calls it again
  for name in HELP_FLAGS:
    _exit_0_after_help(flags.FLAGS[name])
  app.run(main, argv)
