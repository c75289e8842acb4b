"""What the output-path tests share: a directory's whole contents, and a refusal's message."""

from data_utils import fileio


def tree(path):
  """{relative path: bytes, or None for a directory} of everything under PATH (exact listing
  through fileio, also on ram://)."""
  out = {}

  def walk(d, rel):
    for name in fileio.listdir(d):
      full, r = fileio.join(d, name), f"{rel}{name}"
      if fileio.isdir(full):
        out[r + "/"] = None
        walk(full, r + "/")
      else:
        out[r] = fileio.read_bytes(full)
  walk(path, "")
  return out


def refusal(fn):
  """fn()'s ValueError message, or "" when it raised none (callers compare the files first)."""
  try:
    fn()
  except ValueError as e:
    return str(e)
  return ""
