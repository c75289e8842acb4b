"""Running an entry script's main() inside the test process (its flags defined afresh)."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_script(relative):
  spec = importlib.util.spec_from_file_location(
      "_chain_" + relative.replace("/", "_")[:-3], os.path.join(ROOT, relative))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def main_exit(relative, **flag_values):
  """Runs an entry script's main() in this process with these flags (defined afresh, removed
  afterwards); returns its exit: None (or 0) when it finished, else SystemExit's code (a
  refusal's one-line message)."""
  from absl import flags
  values = flags.FLAGS
  before = set(values)
  try:
    module = _load_script(relative)
    argv = [relative] + [f"--{k}={v}" if not isinstance(v, bool) else
                         (f"--{k}" if v else f"--no{k}") for k, v in flag_values.items()]
    values.unparse_flags()
    values(argv)
    try:
      module.main(argv[:1])
    except SystemExit as e:
      return e.code
    return None
  finally:
    for name in set(values) - before:   # the next script defines its own
      delattr(values, name)
    values.unparse_flags()


def run_main(relative, **flag_values):
  """main_exit, with an exit other than success failing the test with its message."""
  code = main_exit(relative, **flag_values)
  if code not in (None, 0):
    pytest.fail(f"{relative} exited: {code}")
