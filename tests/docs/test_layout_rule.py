"""The rule of which layouts a record set serves is stated once (data_utils/lanes.RULE) and
shown where a user looks: the README and both scripts' --help."""

import os
import sys

import pytest

from data_utils import lanes
from tests import warm
from tests.hang_guard import HANG_GUARD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _flat(text):
  return " ".join(text.split())


def test_readme_states_the_rule_in_one_line():
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  rule = lanes.RULE[0].upper() + lanes.RULE[1:]
  assert any(rule in line for line in lines)


@pytest.mark.parametrize("script, flag", [("data_utils/create_pretrain_data.py", "--num_lanes"),
                                          ("run_pretrain.py", "--bsz_per_host")])
def test_help_states_the_rule(script, flag):
  out = warm.run([sys.executable, os.path.join(ROOT, script), "--helpfull"], cwd=ROOT,
                       capture_output=True, text=True, timeout=HANG_GUARD, check=True).stdout
  start = out.index(f"  {flag}:")
  assert lanes.RULE in _flat(out[start:start + 1200])
