"""Docs that cannot go stale: every fenced block of README.md, docs/*.md and bench/README.md is
either run or checked (the convention is in the module's `MARKER` and below).

Blocks: ```bash / ```sh / ```console (commands; a console block's commands are its `$ ` lines)
and ```python. Any other language (```text, ```json, ...) is never run nor checked.

- An unmarked block is RUN (`run_block`) in one working directory in which the tiny quickstart
  (`python quickstart.py --preset=tiny`, outputs in output/quickstart-tiny/) ran once, the
  repository root on PYTHONPATH; `python SCRIPT.py` names a script by its path from the
  repository root (a `python` / `python3` wrapper first on PATH resolves it), blocks of one file
  in document order (a later block may read an earlier one's outputs). Shell blocks run under
  `set -e`. A block that runs `make`, `pip` or `pytest` is check-only by itself (an install or
  the test suite is never run by a test).
- `<!-- docs-test: check-only: REASON -->` on the line before the fence (blank lines allowed):
  not run; only the static check below.
- `<!-- docs-test: skip: REASON -->`: neither run nor checked (output samples; prefer ```text).

Every block of the covered languages, runnable or not, gets the static check (`check_block`,
fast, no TensorFlow): a shell block parses (`bash -n`); every `python SCRIPT.py` names a script
that exists and every `--flag` it passes is one the script defines (its `--helpfull`, or
`--help` for argparse scripts, run once per script and cached); `python -m MODULE` names an
importable module (a project module's flags are checked the same way); `make TARGET` names a
Makefile target; a python block compiles, its imports resolve and every `module.attr` it uses
from an imported project module exists (read from the modules' source).

Writers can run the checks outside pytest:
    python tests/docs/harness.py                      # static checks of every covered file
    python tests/docs/harness.py --run --workdir=/tmp/docs README.md   # and run its blocks
"""

import argparse
import ast
import dataclasses
import functools
import glob
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":    # run as a script: the repository root importable (tests.*)
  sys.path.insert(0, ROOT)
from tests import warm  # noqa: E402
from tests.hang_guard import HANG_GUARD  # noqa: E402

DOC_GLOBS = ("README.md", "docs/*.md", "bench/README.md")
SHELL = ("bash", "sh", "console", "shell")
LANGUAGES = SHELL + ("python",)
MARKER = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->")
MODES = ("check-only", "skip")
QUICKSTART = ("quickstart.py", "--preset=tiny")      # the README's first run
QUICKSTART_OUTPUT = os.path.join("output", "quickstart-tiny")
PYTHONS = re.compile(r"^python(3(\.\d+)?)?$")
SEPARATORS = {";", "&&", "&", "|", "||", "(", ")"}
WRAPPERS = {"time", "nohup", "taskset", "env", "exec", "sudo", "xargs", "timeout", "nice"}


@dataclasses.dataclass
class Block:
  path: str          # relative to the repository root
  line: int          # 1-based line of the opening fence
  lang: str
  text: str
  mode: str          # "run", "check-only" or "skip" ("text" for languages never run)
  reason: str = ""
  marker_error: str = ""

  @property
  def id(self):
    return f"{self.path}:{self.line}"


# ---------------------------------------------------------------------------------- collection

def doc_files(root=ROOT):
  """The covered files that exist, relative to `root`, in a fixed order."""
  found = []
  for pattern in DOC_GLOBS:
    found += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pattern)))
  return found


def parse_blocks(text, path="<doc>"):
  """[Block] of a markdown text, in document order, with their docs-test markers."""
  lines = text.split("\n")
  blocks, k, pending = [], 0, None       # pending: (line, marker body) not yet given a fence
  while k < len(lines):
    line = lines[k]
    m = MARKER.search(line)
    fence = re.match(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)", line)
    if m:
      pending = (k + 1, m.group(1))
    elif fence:
      indent, ticks, lang = fence.groups()
      body, j = [], k + 1
      while j < len(lines) and not re.match(rf"^\s*{re.escape(ticks[0])}{{{len(ticks)},}}\s*$",
                                            lines[j]):
        body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
        j += 1
      lang = lang.lower()
      mode, reason, error = ("run" if lang in LANGUAGES else "text"), "", ""
      if pending:
        mode, reason, error = _marker(pending[1])
      blocks.append(Block(path, k + 1, lang, "\n".join(body) + "\n", mode, reason, error))
      pending, k = None, j
    elif line.strip() and pending:      # a marker must stand just before its fence
      blocks.append(Block(path, pending[0], "", "", "skip", "",
                          f"docs-test marker on line {pending[0]} is not followed by a fence"))
      pending = None
    k += 1
  if pending:
    blocks.append(Block(path, pending[0], "", "", "skip", "",
                        f"docs-test marker on line {pending[0]} is not followed by a fence"))
  return blocks


def _marker(body):
  """(mode, reason, error) of a marker's body, e.g. 'check-only: needs a TPU'."""
  mode, _, reason = body.partition(":")
  mode, reason = mode.strip(), reason.strip()
  if mode not in MODES:
    return "run", "", f"unknown docs-test mode {mode!r} (use one of {', '.join(MODES)})"
  if not reason:
    return mode, "", f"docs-test: {mode} needs a reason after the colon"
  return mode, reason, ""


def collect(root=ROOT):
  """Every block of every covered file."""
  out = []
  for rel in doc_files(root):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
      out += parse_blocks(f.read(), rel)
  return out


# ------------------------------------------------------------------------------- shell parsing

def shell_text(block):
  """The shell commands of a block (a console block: its `$ ` lines and their continuations)."""
  if block.lang != "console":
    return block.text
  out, going_on = [], False
  for line in block.text.split("\n"):
    if line.startswith("$ ") or going_on:
      out.append(line[2:] if line.startswith("$ ") and not going_on else line)
      going_on = line.rstrip().endswith("\\")
  return "\n".join(out) + "\n"


def logical_lines(text):
  """Lines with `\\` continuations joined (comments are left to the lexer)."""
  return [l for l in text.replace("\\\n", " ").split("\n") if l.strip()]


def commands(text):
  """[[word, ...]] of every simple command in shell text (VAR=value prefixes dropped), including
  those nested in `--command="..."` (gcloud ssh) and `bash -c "..."`."""
  found = []
  for line in logical_lines(text):
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split, lexer.commenters = True, "#"
    try:
      tokens = list(lexer)
    except ValueError as e:
      raise ValueError(f"cannot split {line.strip()!r}: {e}") from None
    segment = []
    for token in tokens + [";"]:
      if token.startswith("--command="):
        found += commands(token[len("--command="):])
      if token in SEPARATORS or set(token) <= set(";&|()"):
        words = segment
        while words and re.match(r"^\w+=", words[0]):
          words = words[1:]
        if words and words[0] in ("bash", "sh") and len(words) > 2 and words[1] == "-c":
          found += commands(words[2])
        elif words:
          found.append(words)
        segment = []
      else:
        segment.append(token)
  return found


@dataclasses.dataclass
class Invocation:
  kind: str                  # "script", "module", "code", "make", "pip", "pytest"
  target: str                # script path, module name, code, make target(s)
  flags: list
  words: list
  subcommand: tuple = ()     # leading words before the first flag (`serving.cli run`)


def invocation(words):
  """What a command runs, as far as the checks care; None for any other program."""
  while words and (words[0] in WRAPPERS or re.match(r"^\w+=", words[0])):
    first = words[0]
    words = words[1:]
    if first == "taskset":
      while words and words[0].startswith("-"):
        words = words[1:]
      words = words[1:]                 # the CPU list
    elif first == "timeout":
      words = words[1:]
    while words and first in ("env", "nice", "xargs", "sudo") and words[0].startswith("-"):
      words = words[1:]
  if not words:
    return None
  program = os.path.basename(words[0])
  if program == "make":
    return Invocation("make", " ".join(w for w in words[1:] if not w.startswith("-")
                                       and "=" not in w), [], words)
  if program in ("pip", "pip3"):
    return Invocation("pip", "", [], words)
  if program == "pytest":
    return Invocation("pytest", "", [], words)
  if not PYTHONS.match(program):
    return None
  k = 1
  while k < len(words):
    w = words[k]
    if w in ("-m", "-c"):
      if k + 1 >= len(words):
        return None
      rest = words[k + 2:]
      if w == "-c":
        return Invocation("code", words[k + 1], [], words)
      module = words[k + 1]
      kind = {"pip": "pip", "pytest": "pytest"}.get(module, "module")
      return Invocation(kind, module, _flags(rest), words, _subcommand(rest))
    if w in ("-X", "-W"):
      k += 2
    elif w.startswith("-"):
      k += 1
    else:
      return Invocation("script", w, _flags(words[k + 1:]), words, _subcommand(words[k + 1:]))
  return None


def _subcommand(words):
  out = []
  for w in words[:2]:
    if not re.match(r"^[a-z][a-z_-]*$", w):
      break
    out.append(w)
  return tuple(out) if len(out) < len(words) or not words else ()


def _flags(words):
  return [w[2:].split("=", 1)[0] for w in words if w.startswith("--") and len(w) > 2]


def auto_check_only(block):
  """Why a runnable shell block is check-only by itself (make, pip or pytest), else ''."""
  if block.lang not in SHELL:
    return ""
  try:
    kinds = {getattr(invocation(w), "kind", None) for w in commands(shell_text(block))}
  except ValueError:
    return ""
  for kind, why in (("make", "runs make"), ("pip", "installs packages"),
                    ("pytest", "runs the test suite")):
    if kind in kinds:
      return why
  return ""


# ---------------------------------------------------------------------------- defined flags

def _help_text(argv):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
             PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")]
                                                   if p]))
  try:
    r = warm.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                 timeout=HANG_GUARD)
  except subprocess.TimeoutExpired:
    return 1, ""
  return r.returncode, r.stdout + r.stderr


@functools.lru_cache(maxsize=None)
def defined_flags(target, module=False, subcommand=()):
  """(flag names, boolean flag names) a script (path from the root) or module defines (after
  its subcommand words, e.g. `run`), from its --helpfull (absl: every flag, whatever the exit
  status) or else --help (argparse). Raises ValueError when neither lists any."""
  base = [sys.executable] + (["-m", target] if module else [os.path.join(ROOT, target)])
  base += list(subcommand)
  code, text = _help_text(base + ["--helpfull"])
  names = set(re.findall(r"^\s+--(?:\[no\])?([\w-]+):", text, re.MULTILINE))
  booleans = set(re.findall(r"^\s+--\[no\]([\w-]+):", text, re.MULTILINE))
  if not names:
    code, text = _help_text(base + ["--help"])
    names = set(re.findall(r"^\s+(?:-\w[ ,]*\s*(?:\w+)?,?\s*)?--([\w-]+)", text, re.MULTILINE))
    booleans = set()
    if code or not names:
      raise ValueError(f"{target} --help failed: {(text.strip().splitlines() or ['?'])[-1]}")
    names |= {"help"}
  return frozenset(names), frozenset(booleans)


def prefetch_flags(invocations):
  """Fills defined_flags' cache for several scripts at once, two processes at a time."""
  from concurrent.futures import ThreadPoolExecutor
  todo = sorted({(i.target, i.kind == "module", i.subcommand) for i in invocations})
  with ThreadPoolExecutor(2) as pool:
    list(pool.map(lambda t: _try_flags(*t), todo))


def prefetch_blocks(blocks):
  """Fills defined_flags' cache for every script the blocks' shell commands run."""
  found = []
  for block in blocks:
    if block.lang in SHELL and block.mode != "skip" and not block.marker_error:
      try:
        found += [i for i in map(invocation, commands(shell_text(block))) if i]
      except ValueError:
        pass
  prefetch_flags([i for i in found if i.kind == "script" and "$" not in i.target
                  and os.path.isfile(os.path.join(ROOT, i.target))] +
                 [i for i in found if i.kind == "module" and
                  i.target.split(".")[0] in project_packages() and module_file(i.target)])


def _try_flags(target, module, subcommand):
  try:
    defined_flags(target, module, subcommand)
  except ValueError:
    pass


@functools.lru_cache(maxsize=None)
def make_targets(root=ROOT):
  with open(os.path.join(root, "Makefile"), encoding="utf-8") as f:
    return frozenset(re.findall(r"^([\w.-]+)\s*:(?!=)", f.read(), re.MULTILINE)) - {".PHONY"}


# --------------------------------------------------------------------------- project modules

def project_packages(root=ROOT):
  """Top-level names a doc may import from the repository (packages and root .py scripts)."""
  names = set()
  for name in os.listdir(root):
    full = os.path.join(root, name)
    if os.path.isdir(full) and os.path.exists(os.path.join(full, "__init__.py")):
      names.add(name)
    elif name.endswith(".py"):
      names.add(name[:-3])
  return names


def module_file(name, root=ROOT):
  """The source file of a project module `a.b.c`, or None."""
  base = os.path.join(root, *name.split("."))
  for path in (base + ".py", os.path.join(base, "__init__.py")):
    if os.path.isfile(path):
      return path
  return None


@functools.lru_cache(maxsize=None)
def module_names(path):
  """(names bound at a module's top level, open): open is True when the module can bind names
  that cannot be read (a module __getattr__ or a star import from outside the project)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  names, open_ = set(), False

  def visit(body):
    nonlocal open_
    for node in body:
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names.add(node.name)
        open_ |= node.name == "__getattr__"
      elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
          names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
      elif isinstance(node, ast.Import):
        names.update((a.asname or a.name).split(".")[0] for a in node.names)
      elif isinstance(node, ast.ImportFrom):
        for a in node.names:
          if a.name == "*":
            star = _star_source(node, path)
            if star:
              names.update(module_names(star)[0])
            else:
              open_ = True
          else:
            names.add(a.asname or a.name)
      elif isinstance(node, (ast.If, ast.Try, ast.With)):
        for field in ("body", "orelse", "finalbody"):
          visit(getattr(node, field, []) or [])
        for handler in getattr(node, "handlers", []):
          visit(handler.body)

  visit(tree.body)
  return frozenset(names), open_


def _star_source(node, path):
  if node.level:
    base = os.path.dirname(path)
    for _ in range(node.level - 1):
      base = os.path.dirname(base)
    rel = os.path.relpath(base, ROOT).replace(os.sep, ".")
    name = f"{rel}.{node.module}" if node.module else rel
  else:
    name = node.module
  return module_file(name) if name.split(".")[0] in project_packages() else None


def _attribute(module, attr):
  """'module' when `module.attr` is a project submodule, 'name' when a name, else None."""
  if module_file(f"{module}.{attr}"):
    return "module"
  path = module_file(module)
  names, open_ = module_names(path)
  return "name" if attr in names or open_ else None


def check_python(code, label="block"):
  """Problems of a python block: syntax, imports that do not resolve, `module.attr` of an
  imported project module that does not exist. [] when sound."""
  try:
    tree = ast.parse(code, label)
  except SyntaxError as e:
    return [f"{label}: does not compile: {e.msg} (block line {e.lineno})"]
  problems, bound, project = [], {}, project_packages()

  def need_module(name, lineno):
    top = name.split(".")[0]
    if top in project:
      if not module_file(name):
        problems.append(f"{label} line {lineno}: no project module {name}")
        return False
    elif importlib.util.find_spec(top) is None:
      problems.append(f"{label} line {lineno}: module {top} is not installed")
      return False
    return True

  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        if need_module(a.name, node.lineno) and a.name.split(".")[0] in project:
          if a.asname:
            bound[a.asname] = a.name
          else:
            bound[a.name.split(".")[0]] = a.name.split(".")[0]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      if not need_module(node.module, node.lineno) or node.module.split(".")[0] not in project:
        continue
      for a in node.names:
        if a.name == "*":
          continue
        kind = _attribute(node.module, a.name)
        if kind is None:
          problems.append(f"{label} line {node.lineno}: {node.module} has no {a.name}")
        elif kind == "module":
          bound[a.asname or a.name] = f"{node.module}.{a.name}"
  parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
      chain, value = [node.attr], node.value
      while isinstance(value, ast.Attribute):
        chain.insert(0, value.attr)
        value = value.value
      if not isinstance(value, ast.Name) or value.id not in bound:
        continue
      if isinstance(parents.get(node), ast.Attribute):
        continue                       # part of a longer chain, checked with it
      module = bound[value.id]
      for attr in chain:
        kind = _attribute(module, attr)
        if kind is None:
          problems.append(f"{label} line {node.lineno}: {module} has no {attr}")
          break
        if kind == "name":
          break
        module = f"{module}.{attr}"
  return problems


# ------------------------------------------------------------------------------ static check

def check_shell(text, label="block"):
  """Problems of shell text: syntax, scripts and modules, their flags, make targets."""
  r = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
  if r.returncode:
    return [f"{label}: bash syntax: {r.stderr.strip()}"]
  try:
    found = [i for i in map(invocation, commands(text)) if i]
  except ValueError as e:
    return [f"{label}: {e}"]
  prefetch_flags([i for i in found if i.kind == "script" and "$" not in i.target
                  and os.path.isfile(os.path.join(ROOT, i.target))] +
                 [i for i in found if i.kind == "module" and
                  i.target.split(".")[0] in project_packages()])
  problems = []
  for inv in found:
    if inv.kind == "make":
      missing = [t for t in inv.target.split() if t not in make_targets()]
      problems += [f"{label}: make {t}: no such Makefile target" for t in missing]
    elif inv.kind == "code":
      problems += check_python(inv.target, f"{label} (python -c)")
    elif inv.kind == "script":
      if "$" in inv.target:
        continue                       # a path built from a variable: cannot be checked
      if os.path.isabs(inv.target) or not os.path.isfile(os.path.join(ROOT, inv.target)):
        problems.append(f"{label}: {inv.target}: no such script in the repository")
        continue
      problems += _check_flags(inv, label, module=False)
    elif inv.kind == "module":
      if inv.target.split(".")[0] in project_packages():
        if not module_file(inv.target):
          problems.append(f"{label}: python -m {inv.target}: no such project module")
          continue
        problems += _check_flags(inv, label, module=True)
      elif importlib.util.find_spec(inv.target.split(".")[0]) is None:
        problems.append(f"{label}: python -m {inv.target}: not installed")
  return problems


def _check_flags(inv, label, module):
  try:
    names, booleans = defined_flags(inv.target, module, inv.subcommand)
  except ValueError as e:
    return [f"{label}: {e}"]
  bad = [f for f in inv.flags if f not in names and not
         (f.startswith("no") and f[2:] in booleans)]
  return [f"{label}: {inv.target} defines no --{f}" for f in bad]


def check_block(block):
  """Problems of one block (the static check every block gets); [] when sound."""
  if block.marker_error:
    return [f"{block.id}: {block.marker_error}"]
  if block.mode in ("skip", "text"):
    return []
  if block.lang == "python":
    return check_python(block.text, block.id)
  return check_shell(shell_text(block), block.id)


# ----------------------------------------------------------------------------------- running

def _shim_dir(root=ROOT):
  """A directory holding `python` / `python3` wrappers that resolve a script path from the
  repository root when it does not exist where the command runs."""
  directory = tempfile.mkdtemp(prefix="docs-test-bin-")
  script = f"""#!/usr/bin/env bash
a=("$@"); i=0
while [ $i -lt ${{#a[@]}} ]; do
  case "${{a[$i]}}" in -m|-c) break;; -X|-W) i=$((i+2));; -*) i=$((i+1));; *) break;; esac
done
if [ $i -lt ${{#a[@]}} ] && [[ "${{a[$i]}}" == *.py ]] && [ ! -e "${{a[$i]}}" ] \\
   && [ -e {shlex.quote(root)}/"${{a[$i]}}" ]; then
  a[$i]={shlex.quote(root)}/"${{a[$i]}}"
fi
if [ -n "${{XLNET_WARM_SOCKET:-}}" ]; then   # the tests' warm server (tests/warm.py)
  exec {shlex.quote(sys.executable)} -m data_utils.warm_start --connect "$XLNET_WARM_SOCKET" \
    -- "${{a[@]}}"
fi
exec {shlex.quote(sys.executable)} "${{a[@]}}"
"""
  for name in ("python", "python3"):
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
      f.write(script)
    os.chmod(path, 0o755)
  return directory


@functools.lru_cache(maxsize=None)
def _shims():
  return _shim_dir()


def run_env():
  """The environment blocks run in: the root on PYTHONPATH, the wrappers first on PATH (they
  run `python` in the tests' warm server when it can: tests/warm.py)."""
  env = dict(os.environ)
  address = warm.launcher().address()
  if address:
    env["XLNET_WARM_SOCKET"] = address
  env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
  env["PATH"] = os.pathsep.join([_shims(), env.get("PATH", "")])
  env.setdefault("CUDA_VISIBLE_DEVICES", "")
  return env


def run_block(block, workdir, timeout=HANG_GUARD):
  """Runs a runnable block in `workdir`; returns (ok, output tail) — a failure names the block."""
  env = run_env()
  if block.lang == "python":
    argv = [sys.executable, "-c", block.text]
  else:
    argv = ["bash", "-c", "set -e\n" + shell_text(block)]
  try:
    r = warm.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
  except subprocess.TimeoutExpired:
    return False, f"{block.id}: still running after {timeout} s (the hang guard)"
  out = (r.stdout[-3000:] + "\n" + r.stderr[-4000:]).strip()
  if r.returncode:
    return False, f"{block.id}: exit {r.returncode}\n{out}"
  return True, out


def runnable(block):
  return block.mode == "run" and block.lang in LANGUAGES and not auto_check_only(block)


def run_quickstart(workdir, timeout=HANG_GUARD):
  """The README's first run in `workdir` (outputs in workdir/output/quickstart-tiny); returns
  the CompletedProcess (check its returncode). A rerun skips the finished stages."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
  env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
  return subprocess.run([sys.executable, os.path.join(ROOT, QUICKSTART[0])] + list(QUICKSTART[1:]),
                        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------------------------ command

def main(argv=None):
  parser = argparse.ArgumentParser(description="Check (and with --run, run) the documented "
                                   "blocks of README.md, docs/*.md and bench/README.md.")
  parser.add_argument("files", nargs="*", help="Files to check, relative to the repository "
                      "root (default: every covered file).")
  parser.add_argument("--run", action="store_true", help="Also run the runnable blocks, in "
                      "document order, in --workdir (the tiny quickstart runs there first).")
  parser.add_argument("--workdir", help="Working directory of --run (kept, reused: the "
                      "quickstart's finished stages are skipped).")
  args = parser.parse_args(argv)
  files = args.files or doc_files()
  failed = 0
  every = []
  for rel in files:
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
      every += parse_blocks(f.read(), rel)
  prefetch_blocks(every)
  for rel in files:
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
      blocks = parse_blocks(f.read(), rel)
    for block in blocks:
      for problem in check_block(block):
        print("FAIL", problem)
        failed += 1
  if args.run:
    workdir = args.workdir or tempfile.mkdtemp(prefix="docs-test-")
    os.makedirs(workdir, exist_ok=True)
    print(f"running the tiny quickstart in {workdir} ...", flush=True)
    r = run_quickstart(workdir)
    if r.returncode:
      print("FAIL the quickstart:", r.stderr[-2000:])
      return 1
    for rel in files:
      with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        blocks = [b for b in parse_blocks(f.read(), rel) if runnable(b)]
      for block in blocks:
        ok, out = run_block(block, workdir)
        print("ok  " if ok else "FAIL", block.id if ok else out, flush=True)
        failed += not ok
  print(f"{failed} problem(s)")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
