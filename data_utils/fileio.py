"""File access for every path a user names: a local path or any `tf.io.gfile` URL.

`gs://bucket/...` on Cloud TPUs, TensorFlow's in-memory `ram://` in the tests: both go through
`tf.io.gfile`, so a path that works in the tests works on a bucket. Every reader, writer and
entry script opens, lists, globs, renames and creates user paths through this module, never
through `open`, `os.path.exists`, `glob` or `os.makedirs` (which turn `gs://b/x` into a local
folder named `gs:`).

TensorFlow's ram:// answers `exists`/`isdir` True for any string prefix of an existing name
(and lists such siblings' tails); `exists`, `isdir` and `listdir` here answer exactly, as on
gs://. Code that calls tf.io.gfile itself on ram:// does not get that correction.

Path strings are joined and split with `posixpath` (URLs always use "/"), never made absolute.

Atomic publication: `atomic_write(path)` writes `PATH.tmp-<pid>-<random>` and renames it to PATH
when the block ends without an exception (on a bucket the rename is a copy and a delete, so a
reader still never sees a partial PATH: it appears whole or not at all). A killed run leaves
only a `.tmp-` object, which no reader matches and `remove_stale_tmp` deletes.

TensorFlow is imported on first use, so the text-to-records writer's worker processes that
never touch a URL stay light.
"""

import contextlib
import io
import os
import posixpath
import uuid

TMP_MARK = ".tmp-"


def gfile():
  import tensorflow as tf  # noqa: PLC0415 (deferred: see the module docstring)
  return tf.io.gfile


@contextlib.contextmanager
def os_errors(path):
  """TensorFlow's file errors as the builtin ones (NotFoundError -> FileNotFoundError, ...),
  with PATH in the message, so callers catch one family for local paths and URLs alike."""
  try:
    yield
  except Exception as e:  # noqa: BLE001 (re-raised, narrowed below)
    import tensorflow as tf  # noqa: PLC0415
    if not isinstance(e, tf.errors.OpError):
      raise
    kind = {tf.errors.NotFoundError: FileNotFoundError,
            tf.errors.PermissionDeniedError: PermissionError}.get(type(e), OSError)
    detail = {FileNotFoundError: "not found", PermissionError: "permission denied"}
    raise kind(f"{path}: {detail.get(kind) or e.message}") from None


def is_url(path):
  return "://" in str(path)


def join(*parts):
  return posixpath.join(*[str(p) for p in parts])


def basename(path):
  return posixpath.basename(str(path).rstrip("/"))


def dirname(path):
  return posixpath.dirname(str(path).rstrip("/"))


def _ram_listed(path):
  """ram:// only: whether PATH itself is an entry (its own exists/isdir also answer True for
  any string prefix of an existing name, e.g. `x.ckpt` of `x.ckpt.index`; gs:// does not)."""
  path = str(path).rstrip("/")
  parent = dirname(path)
  return parent in ("ram:", "ram:/") or path in gfile().glob(join(parent, "*"))


def exists(path):
  if str(path).startswith("ram://") and not _ram_listed(path):
    return False
  return gfile().exists(path)


def isdir(path):
  if str(path).startswith("ram://") and not _ram_listed(path):
    return False
  return gfile().isdir(path)


def makedirs(path):
  if path:
    gfile().makedirs(path)


def listdir(path):
  """Sorted names in directory PATH. Through glob: TensorFlow's ram:// listdir also returns the
  tails of siblings that merely start with PATH's name (ram://d/b lists ig.bin of ram://d/big.bin)."""
  return sorted(basename(p) for p in gfile().glob(join(path, "*")))


def glob(pattern):
  """Sorted matches of one pattern (`*`, `?`, `[...]`), local or URL."""
  return sorted(gfile().glob(pattern))


def walk(path):
  return gfile().walk(path)


def size(path):
  return gfile().stat(path).length


def mtime_ns(path):
  """Modification time in ns. Local paths ask the OS: TensorFlow's local stat keeps whole
  seconds only, so two writes within a second would look unchanged."""
  if not is_url(path):
    return os.stat(path).st_mtime_ns
  return gfile().stat(path).mtime_nsec


def remove(path):
  gfile().remove(path)


def rmtree(path):
  gfile().rmtree(path)


def rename(src, dst, overwrite=True):
  gfile().rename(src, dst, overwrite=overwrite)


def copy(src, dst, overwrite=True):
  gfile().copy(src, dst, overwrite=overwrite)


def read_bytes(path):
  with os_errors(path), gfile().GFile(path, "rb") as f:
    return f.read()


def read_text(path, encoding="utf-8", errors="strict"):
  """The whole file as text with universal newlines (as the builtin `open` reads it)."""
  with open_text(path, encoding=encoding, errors=errors) as f:
    return f.read()


class _RawGFile(io.RawIOBase):
  """A GFile opened for reading, as the raw stream `io.BufferedReader` expects."""

  def __init__(self, path):
    super().__init__()
    self.name = path
    self._f = gfile().GFile(path, "rb")

  def readable(self):
    return True

  def readinto(self, buffer):
    with os_errors(self.name):
      data = self._f.read(len(buffer))
    buffer[:len(data)] = data
    return len(data)

  def close(self):
    if not self.closed:
      self._f.close()
    super().close()


def open_binary(path):
  """A buffered binary reader of PATH (local or URL)."""
  return io.BufferedReader(_RawGFile(path), buffer_size=1 << 20)


def open_text(path, encoding="utf-8", errors="strict", newline=None):
  """A text reader of PATH with the builtin `open`'s newline handling (local or URL)."""
  return io.TextIOWrapper(open_binary(path), encoding=encoding, errors=errors, newline=newline)


def read_json(path, what="file"):
  """PATH's JSON. A missing PATH is FileNotFoundError "PATH: WHAT not found"; invalid JSON a
  one-line ValueError naming the line."""
  import json  # noqa: PLC0415
  try:
    return json.loads(read_text(path))
  except FileNotFoundError:
    raise FileNotFoundError(f"{path}: {what} not found") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None


def tmp_name(path):
  return f"{path}{TMP_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def atomic_write(path, mode="w"):
  """Write PATH under a temporary name; rename to PATH only if the block completes."""
  tmp = tmp_name(path)
  makedirs(dirname(path))
  try:
    with gfile().GFile(tmp, mode) as f:
      yield f
    rename(tmp, path, overwrite=True)
  except BaseException:
    with contextlib.suppress(Exception):
      if exists(tmp):
        remove(tmp)
    raise


def write_atomic(path, data):
  """PATH holds DATA (str or bytes), published whole or not at all."""
  with atomic_write(path, "wb" if isinstance(data, bytes) else "w") as f:
    f.write(data)


def remove_stale_tmp(directory, prefix=""):
  """Delete `.tmp-` leftovers of killed runs in DIRECTORY whose names start with PREFIX."""
  if not exists(directory):
    return 0
  stale = [n for n in listdir(directory) if n.startswith(prefix) and TMP_MARK in n]
  for name in stale:
    with contextlib.suppress(Exception):
      remove(join(directory, name))
  return len(stale)


# ---- the light variants: local paths without TensorFlow -----------------------------------------
# For processes that must not import TensorFlow: the text-to-records writer and its forked workers
# (importing TensorFlow costs ~3.5 s per process, and forking after it is unsafe), the tokenizer
# and the tokenizer trainer. A local path goes to the OS directly (builtin `open`, `os`, `glob`);
# a URL (gs://, ram://) goes through tf.io.gfile like the functions above, TensorFlow then being
# imported on first use. Errors: the builtin ones (FileNotFoundError, OSError) for both.
# Everything else calls the functions above.

def open_read_light(path):
  """A seekable binary reader of PATH."""
  if not is_url(path):
    return open(path, "rb")
  return gfile().GFile(path, "rb")


def open_text_light(path, encoding="utf-8", errors="strict", newline=None):
  """A text reader of PATH with the builtin `open`'s newline handling."""
  if not is_url(path):
    return open(path, encoding=encoding, errors=errors, newline=newline)
  return open_text(path, encoding=encoding, errors=errors, newline=newline)


def read_bytes_light(path):
  """The whole file. A missing PATH is FileNotFoundError (also on ram://, whose TensorFlow
  `exists` answers True for any prefix of an existing name)."""
  if not is_url(path):
    with open(path, "rb") as f:
      return f.read()
  if not exists(path):
    raise FileNotFoundError(f"{path}: not found")
  return read_bytes(path)


def size_light(path):
  return os.path.getsize(path) if not is_url(path) else size(path)


def write_atomic_light(path, data):
  """PATH holds DATA (bytes or str), published whole (temporary name, then rename) or not at all.
  The parent directory must exist for a local PATH."""
  if is_url(path):
    write_atomic(path, data)
    return
  tmp = tmp_name(path)
  try:
    with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
      f.write(data)
    os.replace(tmp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise


def remove_light(path):
  if is_url(path):
    remove(path)
  else:
    os.remove(path)


def listdir_light(path):
  """Sorted names in directory PATH."""
  return listdir(path) if is_url(path) else sorted(os.listdir(path))


def makedirs_light(path):
  if not path:
    return
  if is_url(path):
    makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def glob_files_light(patterns):
  """Files (not directories) matched by comma-separated glob PATTERNS, sorted, each once."""
  import glob as glob_module  # noqa: PLC0415
  paths = set()
  for pattern in filter(None, (g.strip() for g in str(patterns).split(","))):
    if is_url(pattern):
      paths.update(p for p in glob(pattern) if not gfile().stat(p).is_directory)
    else:
      paths.update(p for p in glob_module.glob(pattern) if os.path.isfile(p))
  return sorted(paths)
