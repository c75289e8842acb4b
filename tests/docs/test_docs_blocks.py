"""The static check of every documented block (README.md, docs/*.md, bench/README.md): runnable
or check-only, each block's scripts, flags, make targets, imports and module attributes exist,
and its docs-test marker is well formed (tests/docs/harness.py). Fast: no block runs here; the
runnable ones run in tests/reproduction/test_quickstart.py, after the tiny quickstart."""

import pytest

from tests.docs import harness

BLOCKS = [b for b in harness.collect() if b.lang in harness.LANGUAGES or b.marker_error]


@pytest.fixture(scope="module", autouse=True)
def flags_read_once():
  """Every documented script's --helpfull, two at a time, once for the module."""
  harness.prefetch_blocks(BLOCKS)


def test_the_covered_files_have_blocks():
  assert "README.md" in harness.doc_files()
  assert any(b.path == "README.md" and b.lang in harness.LANGUAGES for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_documented_block_is_sound(block):
  problems = harness.check_block(block)
  assert not problems, "\n".join(problems)
