"""An English corpus every machine has: the docstrings of Python's standard library.

One sentence per line, a blank line between documents (one document per
docstring), in a fixed order, so the same Python gives the same bytes. Used by
the benchmarks and the quickstart; no download.
"""

import ast
import collections
import os
import re
import sysconfig

from data_utils import fileio

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__", "lib2to3"}


# The fields that hold statements (where a def or a class can be) and the nodes between them
# (except handlers, match cases).
_BODIES = ("body", "handlers", "orelse", "finalbody", "cases")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _definitions(tree):
  """The module, then its functions and classes in ast.walk's order (breadth first, fields in
  order), walking only the statement lists that can hold them; ast.walk visits every
  expression too, most of the parse's cost."""
  yield tree
  queue = collections.deque([tree])
  while queue:
    node = queue.popleft()
    if isinstance(node, _DEFINITIONS):
      yield node
    for field in node._fields:
      if field in _BODIES:
        queue.extend(getattr(node, field))


def _docstrings(path):
  try:
    with open(path, "rb") as f:
      tree = ast.parse(f.read(), filename=path)
  except (SyntaxError, ValueError, UnicodeDecodeError, OSError, RecursionError, MemoryError):
    return   # not Python 3.x source (or nested beyond the parser's limits: MemoryError too)
  for node in _definitions(tree):
    doc = ast.get_docstring(node)
    if doc:
      yield node, doc


def _sentences(doc):
  """Paragraph-aware sentence split; code-ish and very short lines dropped."""
  for paragraph in re.split(r"\n\s*\n", doc):
    lines = [l.strip() for l in paragraph.splitlines()]
    if not lines or any(l.startswith((">>>", "...", "$ ")) for l in lines):
      continue
    text = " ".join(l for l in lines if l)
    for sentence in _SENTENCE_END.split(text):
      sentence = sentence.strip()
      if len(sentence.split()) >= 3:
        yield sentence


def documents(stdlib_dir=None):
  """Yields (module name, qualified object name, [sentences]) in a fixed order."""
  root = stdlib_dir or sysconfig.get_paths()["stdlib"]
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
    for name in sorted(filenames):
      if not name.endswith(".py"):
        continue
      path = os.path.join(dirpath, name)
      module = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
      for node, doc in _docstrings(path):
        sentences = list(_sentences(doc))
        if sentences:
          yield module, getattr(node, "name", module), sentences


def write_corpus(path, max_bytes=None, repeat_to=None):
  """Writes the corpus to `path` (local or URL; atomically); returns (documents, bytes).

  repeat_to: if the docstrings are fewer bytes than this, repeat them (for
  benchmarks that need a fixed input size).
  """
  n_docs = n_bytes = 0
  parts = []
  while True:
    before = n_bytes
    for _, _, sentences in documents():
      text = "\n".join(sentences) + "\n\n"
      size = len(text.encode("utf-8"))
      if max_bytes and n_bytes + size > max_bytes:
        break
      parts.append(text)
      n_docs += 1
      n_bytes += size
    if not repeat_to or n_bytes >= repeat_to or n_bytes == before or (
        max_bytes and n_bytes + 1000 > max_bytes):
      break
  fileio.write_atomic_light(path, "".join(parts).encode("utf-8"))
  return n_docs, n_bytes
