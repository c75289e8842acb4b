"""The reference libraries (torch, transformers) the parity tests compare against.

`require("torch")` imports and returns the module. When it cannot be imported, the test (or,
at module level, the whole file) is skipped with the reason, unless the environment variable
XLNET_TESTS_REQUIRE_REFERENCE=1 is set: then it FAILS. `make test` (what CI runs) sets it, so a
CI machine without the reference libraries cannot pass with the reference tests silently
skipped; a bare `python -m pytest` on a machine without torch still skips them.
"""

import importlib
import os

import pytest

ENV = "XLNET_TESTS_REQUIRE_REFERENCE"


def required():
  """True when missing reference libraries must fail the tests (make test)."""
  return os.environ.get(ENV, "") not in ("", "0")


def require(name):
  """The imported module `name`; skips (or fails, under XLNET_TESTS_REQUIRE_REFERENCE=1) when
  it cannot be imported. Works inside a test and at module level."""
  try:
    return importlib.import_module(name)
  except ImportError as e:
    reason = f"reference library {name!r} cannot be imported ({type(e).__name__}: {e})"
  # Outside the except block, so that the report is this one line, not a chained traceback.
  if required():
    pytest.fail(f"{reason}; {ENV}=1 (set by `make test`) requires it: "
                "pip install -r requirements-dev.txt", pytrace=False)
  pytest.skip(f"{reason}; set {ENV}=1 to fail instead", allow_module_level=True)
