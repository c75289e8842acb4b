"""The docs harness itself (tests/docs/harness.py): crafted markdown with a wrong import, a wrong
attribute, a wrong flag, a missing script, a missing make target and a failing command is
reported as failing; the same blocks written right pass; markers are read as the contract
says; runnable blocks of a file run in order in one directory, scripts resolved from the root;
and breaking one real documented import or flag makes its check fail."""

import ast
import re

import pytest

from tests.docs import harness

CRAFTED = '''# A crafted page

```bash
python run_classifier.py --task_name=sst-2 --no_such_flag=1
```

<!-- docs-test: check-only: needs the released checkpoint -->

```bash
python no_such_script.py --x=1
make no_such_target
```

```python
from modeling import no_such_module
import data_utils.fileio
data_utils.fileio.no_such_function("a")
```

```python
from data_utils import fileio
import modeling.xlnet.config
print(fileio.join("a", "b"), modeling.xlnet.config.XLNetConfig)
```

<!-- docs-test: check-only: right flags, not run -->
```sh
python run_classifier.py --task_name=sst-2 --nodo_train \\
    --max_seq_length=128   # a comment --not_a_flag
python -m serving.cli run --dir x --input_exprs='sentence=["a"]'
make test
```

```text
$ python no_such_script.py   (output samples are never checked)
```

<!-- docs-test: skip -->
```bash
echo a marker without a reason
```

<!-- docs-test: check-only: a marker with nothing after it -->

plain text
'''


@pytest.fixture(scope="module")
def crafted():
  return harness.parse_blocks(CRAFTED, "crafted.md")


def test_blocks_markers_and_ids(crafted):
  assert [(b.line, b.lang, b.mode) for b in crafted] == [
      (3, "bash", "run"), (9, "bash", "check-only"), (14, "python", "run"),
      (20, "python", "run"), (27, "sh", "check-only"), (34, "text", "text"),
      (39, "bash", "skip"), (43, "", "skip")]
  assert crafted[1].reason == "needs the released checkpoint" and crafted[1].id == "crafted.md:9"
  assert "needs a reason" in crafted[6].marker_error
  assert "not followed by a fence" in crafted[7].marker_error
  assert crafted[4].text.startswith("python run_classifier.py --task_name=sst-2 --nodo_train \\\n")
  assert not crafted[0].marker_error and not crafted[4].marker_error


def test_wrong_flag_missing_script_and_make_target_are_reported(crafted):
  problems = harness.check_block(crafted[0])
  assert problems == ["crafted.md:3: run_classifier.py defines no --no_such_flag"]
  problems = harness.check_block(crafted[1])
  assert problems == ["crafted.md:9: no_such_script.py: no such script in the repository",
                      "crafted.md:9: make no_such_target: no such Makefile target"]


def test_wrong_import_and_attribute_are_reported(crafted):
  problems = harness.check_block(crafted[2])
  assert len(problems) == 2, problems
  assert "modeling has no no_such_module" in problems[0]
  assert "data_utils.fileio has no no_such_function" in problems[1]


def test_right_blocks_pass(crafted):
  assert harness.check_block(crafted[3]) == []
  assert harness.check_block(crafted[4]) == []       # --noBOOL, a subcommand's flags, make
  assert harness.check_block(crafted[5]) == []       # text: never checked
  assert harness.auto_check_only(crafted[4]) == "runs make"
  assert harness.check_block(crafted[6]) and harness.check_block(crafted[7])


def test_syntax_errors_are_reported():
  [py] = harness.parse_blocks("```python\nprint(1\n```\n", "x.md")
  assert "does not compile" in harness.check_block(py)[0]
  [sh] = harness.parse_blocks("```bash\nif true; then echo\n```\n", "x.md")
  assert "bash syntax" in harness.check_block(sh)[0]


def test_commands_read_wrappers_nesting_and_console_prompts():
  found = [harness.invocation(w) for w in harness.commands(
      'X=1 taskset -c 0 python -u bench/preprocess.py --workers 1 --script && echo ok\n'
      'gcloud compute ssh --command="cd a && python3 run_pretrain.py --tpu=t" # python x.py\n'
      'python -m pytest -m "not slow" tests; pip install -e .')]
  kinds = [(i.kind, i.target, i.flags) for i in found if i]
  assert kinds == [("script", "bench/preprocess.py", ["workers", "script"]),
                   ("script", "run_pretrain.py", ["tpu"]), ("pytest", "pytest", []),
                   ("pip", "", [])]
  [console] = harness.parse_blocks("```console\n$ python a.py \\\n  --x=1\nout --y\n$ ls\n```\n",
                                   "c.md")
  assert harness.shell_text(console) == "python a.py \\\n  --x=1\nls\n"


def test_runnable_blocks_run_in_order_in_one_directory_with_scripts_from_the_root(tmp_path):
  text = ('```bash\nmkdir -p made && echo 7 > made/n.txt\n'
          'python bench/pretrain_step.py --help > made/help.txt\n```\n'
          '```python\nprint(int(open("made/n.txt").read()) * 6)\n```\n'
          '```bash\ngrep -q mg_python made/help.txt\nfalse\necho never\n```\n')
  blocks = harness.parse_blocks(text, "run.md")
  assert all(harness.runnable(b) for b in blocks)
  ok, out = harness.run_block(blocks[0], str(tmp_path))
  assert ok, out
  ok, out = harness.run_block(blocks[1], str(tmp_path))
  assert ok and out.splitlines()[0] == "42", out
  ok, out = harness.run_block(blocks[2], str(tmp_path))       # set -e: stops at `false`
  assert not ok and out.startswith("run.md:8: exit 1") and "never" not in out
  assert not (tmp_path / "bench").exists()                    # resolved, not copied


def test_a_failing_python_block_fails(tmp_path):
  [block] = harness.parse_blocks("```python\nimport data_utils\nraise SystemExit(3)\n```\n",
                                 "f.md")
  ok, out = harness.run_block(block, str(tmp_path))
  assert not ok and "f.md:1: exit 3" in out


def _first(kind):
  for block in harness.collect():
    if block.lang == "python" and kind == "import" and block.mode != "skip":
      tree = ast.parse(block.text)
      modules = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names if a.name.split(".")[0] in harness.project_packages()}
      for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and \
           node.module.split(".")[0] in harness.project_packages():
          return block, node.names[0].name          # from package import NAME
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
           node.value.id in modules:
          return block, node.attr                   # import package; package.NAME
    if block.lang in harness.SHELL and kind == "flag" and block.mode != "skip":
      for words in harness.commands(harness.shell_text(block)):
        inv = harness.invocation(words)
        if inv and inv.kind == "script" and inv.flags and "$" not in inv.target:
          return block, inv.flags[0]
  return None, None


@pytest.mark.parametrize("kind", ["import", "flag"])
def test_breaking_a_real_documented_import_or_flag_fails_its_check(kind):
  block, name = _first(kind)
  if block is None:
    pytest.skip(f"no documented block has a project {kind} to break")
  assert harness.check_block(block) == [], "the block must pass before it is broken"
  if kind == "import":
    broken = re.sub(rf"(\bimport |\.){re.escape(name)}\b", rf"\g<1>{name}_renamed", block.text,
                    count=1)
  else:
    broken = re.sub(rf"--{re.escape(name)}\b", f"--{name}_renamed", block.text, count=1)
  assert broken != block.text
  problems = harness.check_block(harness.Block(block.path, block.line, block.lang, broken,
                                               block.mode))
  assert problems and f"{name}_renamed" in problems[0], problems
