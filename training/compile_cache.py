"""XLA's persistent compilation cache, on by default: a program compiled once is loaded, not
compiled, by every later run of the same program (a rerun, a resumed run, each run of a sweep).

TensorFlow does the caching (TF_XLA_FLAGS --tf_xla_persistent_cache_directory): before it
compiles an XLA cluster it looks for a file named by the cluster's signature (function name,
argument shapes and dtypes) and the fingerprint of its HLO, and loads the executable in it;
after a compilation it writes one (to a temporary name, renamed whole, so concurrent runs never
read half a file). Around that, this module adds what TensorFlow leaves out:

* The key covers everything the program depends on. The HLO and signature cover the program;
  the directory adds what compiles it differently or cannot load it: TensorFlow's version and
  build, the machine (architecture, CPU features, GPU models), XLA_FLAGS and the rest of
  TF_XLA_FLAGS. Each such combination gets its own subdirectory `tfVERSION-HASH`.
* A damaged entry is ignored, never loaded: TensorFlow fails the run on an entry it cannot
  parse. Each entry gets a sidecar `NAME.sha256` (its digest, size and mtime) once a run has
  seen it complete; at start an entry whose bytes no longer match, or a never-sealed entry that
  is not a well-formed protocol buffer, is removed with a warning and compiled again.
* A count: "N loaded, M compiled" in the run's summary (`report`). Compiled = entries new in
  this run; loaded = entries read during it (their access time, on local disks; elsewhere the
  count says it is unknown).

Only files named with this project's prefix (PREFIX) are ever read, checked or removed, so a
directory shared with other programs is safe. Hyper-parameters that do not change the program
(learning rate, schedule lengths, seed, data; with weight decay on, Adam's betas, epsilon and
decay rate) enter the step as tensors (training/optimization.py), so a sweep compiles once.

The directory: --compile_cache (the training scripts' flag), else the environment variable
XLNET_COMPILE_CACHE, else ~/.cache/xlnet-tf/xla ($XDG_CACHE_HOME if set); "off" disables.
It may be a tf.io.gfile URL (gs://...: a cache shared by a pod's hosts).
"""

import atexit
import glob
import hashlib
import json
import os
import platform
import sys
import time

ENV = "XLNET_COMPILE_CACHE"
OFF = ("off", "none", "false", "0")
PREFIX = "xlnet_tf"                          # TensorFlow's --tf_xla_persistent_cache_prefix
_DIR_FLAG = "--tf_xla_persistent_cache_directory"
_OURS = (_DIR_FLAG, "--tf_xla_persistent_cache_prefix")
SIDECAR = ".sha256"
_SET_ENV = "XLNET_COMPILE_CACHE_SET"        # the TF_XLA_FLAGS text `enable` added

_active = None                               # the Cache of this process, once enabled


def default_dir():
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "xlnet-tf", "xla")


def resolve(flag_value=None):
  """The cache's base directory, or None when disabled: the flag's value if given, else
  $XLNET_COMPILE_CACHE, else default_dir()."""
  value = flag_value if flag_value is not None else os.environ.get(ENV)
  if value is None:
    return default_dir()
  value = value.strip()
  return None if not value or value.lower() in OFF else value


def _machine():
  """What makes a compiled executable specific to this machine, read without starting
  TensorFlow: architecture, CPU model and features, GPU models."""
  parts = [platform.machine(), platform.system()]
  try:
    with open("/proc/cpuinfo") as f:
      info = f.read()
    for key in ("model name", "flags", "Features", "CPU part"):
      line = next((l for l in info.splitlines() if l.startswith(key)), "")
      parts.append(" ".join(sorted(line.split(":", 1)[-1].split())))
  except OSError:
    parts.append(platform.processor())
  for path in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
    try:
      with open(path) as f:
        parts.append(next((l for l in f if l.startswith("Model")), ""))
    except OSError:
      pass
  return parts


def _other_flags(text):
  return " ".join(w for w in (text or "").split() if not w.startswith(_OURS))


def key_parts():
  """Everything besides the program that decides the compiled bytes (see the docstring)."""
  import tensorflow as tf
  return {"tensorflow": [tf.__version__, tf.version.GIT_VERSION, tf.version.COMPILER_VERSION],
          "python": sys.version.split()[0], "machine": _machine(),
          "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
          "TF_XLA_FLAGS": _other_flags(os.environ.get("TF_XLA_FLAGS"))}


def key_dir(base):
  """base/tfVERSION-HASH: this TensorFlow, machine and flags' own subdirectory."""
  import tensorflow as tf
  digest = hashlib.sha256(json.dumps(key_parts(), sort_keys=True).encode()).hexdigest()[:16]
  return _join(base, f"tf{tf.__version__}-{digest}")


# ---- files (local or tf.io.gfile URLs) ------------------------------------------------------
def _is_local(path):
  return "://" not in path


def _join(a, b):
  return os.path.join(a, b) if _is_local(a) else a.rstrip("/") + "/" + b


def _gfile():
  import tensorflow as tf
  return tf.io.gfile


def _listdir(path):
  if _is_local(path):
    return os.listdir(path) if os.path.isdir(path) else []
  return [n.rstrip("/") for n in _gfile().listdir(path)] if _gfile().isdir(path) else []


def _read(path):
  if _is_local(path):
    with open(path, "rb") as f:
      return f.read()
  with _gfile().GFile(path, "rb") as f:
    return f.read()


def _stat(path):
  """(size, mtime in ns, inode or None) of a file."""
  if _is_local(path):
    s = os.stat(path)
    return s.st_size, s.st_mtime_ns, s.st_ino
  s = _gfile().stat(path)
  return s.length, s.mtime_nsec, None


def _remove(path):
  try:
    os.remove(path) if _is_local(path) else _gfile().remove(path)
  except (OSError, Exception):       # already gone (another run cleaned it), or unreachable
    pass


def _write_atomic(path, data):
  tmp = f"{path}.tmp-{os.getpid()}-{time.monotonic_ns()}"
  if _is_local(path):
    with open(tmp, "w") as f:
      f.write(data)
    os.replace(tmp, path)
  else:
    with _gfile().GFile(tmp, "w") as f:
      f.write(data)
    _gfile().rename(tmp, path, overwrite=True)


# ---- entries --------------------------------------------------------------------------------
def is_entry(name):
  return name.startswith(PREFIX + "__") and name.endswith(".pb")


def well_formed(data):
  """Whether `data` parses as a protocol buffer message to its last byte (TensorFlow's entry
  is one): a truncated or overwritten file almost never does."""
  i, n = 0, len(data)

  def varint(i):
    shift = value = 0
    while True:
      if i >= n or shift > 63:
        raise ValueError
      b = data[i]
      value |= (b & 0x7F) << shift
      i, shift = i + 1, shift + 7
      if not b & 0x80:
        return value, i
  try:
    if n == 0:
      return False
    while i < n:
      tag, i = varint(i)
      wire, field = tag & 7, tag >> 3
      if field == 0:
        return False
      if wire == 0:
        _, i = varint(i)
      elif wire == 1:
        i += 8
      elif wire == 2:
        length, i = varint(i)
        i += length
      elif wire == 5:
        i += 4
      else:
        return False
      if i > n:
        return False
    return True
  except ValueError:
    return False


def _sidecar_record(path, data):
  size, mtime, inode = _stat(path)
  return {"sha256": hashlib.sha256(data).hexdigest(), "size": size, "mtime_ns": mtime,
          "inode": inode}


def _adopt(path):
  """Seals the entry at `path` (writes its sidecar) if it is a complete entry; returns why
  not, or ""."""
  data = _read(path)
  if not well_formed(data):
    return "not a complete entry"
  _write_atomic(path + SIDECAR, json.dumps(_sidecar_record(path, data)))
  return ""


class Cache:
  """The cache of one process (see the module docstring). `log(line)` takes the warnings."""

  def __init__(self, base, log):
    self.base, self.log = base, log
    self.dir = key_dir(base)
    self.started = time.time()
    self.before = set()            # entries present (and sound) when the run started
    self.removed = []              # damaged entries removed at start

  def check(self):
    """Verifies every entry (see the module docstring); returns the sound ones' names."""
    names = set(_listdir(self.dir))
    sound = set()
    for name in sorted(n for n in names if is_entry(n)):
      path = _join(self.dir, name)
      try:
        why = self._damage(path, name + SIDECAR in names)
      except (OSError, ValueError, Exception) as e:   # vanished, or unreadable sidecar
        why = f"unreadable ({type(e).__name__})"
      if why:
        self.log(f"warning: XLA compile cache: ignoring damaged entry {path} ({why}); "
                 "it is compiled again")
        _remove(path)
        _remove(path + SIDECAR)
        self.removed.append(name)
      else:
        sound.add(name)
    return sound

  def _damage(self, path, has_sidecar):
    """Why the entry at `path` must not be loaded, or "" when it is sound. An entry replaced
    whole (another inode: TensorFlow writes a temporary file and renames it, and concurrent runs
    each write their own compilation of a program) is checked and sealed again; one changed in
    place must still have the bytes its sidecar records."""
    if not has_sidecar:
      return _adopt(path)
    record = json.loads(_read(path + SIDECAR))
    size, mtime, inode = _stat(path)
    if [record.get("size"), record.get("mtime_ns"), record.get("inode")] == [size, mtime, inode]:
      return ""                                     # unchanged since it was sealed
    if inode is None or inode != record.get("inode"):
      return _adopt(path)
    data = _read(path)
    if hashlib.sha256(data).hexdigest() != record.get("sha256"):
      return "its bytes differ from those recorded when it was written"
    _write_atomic(path + SIDECAR, json.dumps(_sidecar_record(path, data)))
    return ""

  def start(self):
    self.before = self.check()
    if _is_local(self.dir):
      # An access time before the mtime: the next read sets it (relatime), which `counts` sees.
      for name in self.before:
        path = _join(self.dir, name)
        try:
          mtime = os.stat(path).st_mtime_ns
          os.utime(path, ns=(mtime - 1_000_000_000, mtime))
        except OSError:
          pass

  def seal(self):
    """Records the digest of each entry that appeared during this run (sidecars), so later
    runs can tell a damaged entry; returns their names. Sealed again here even when a
    concurrent run sealed it first: the file may since have been replaced by this run's own
    compilation of the same program."""
    new = set()
    for name in _listdir(self.dir):
      if not is_entry(name) or name in self.before:
        continue
      new.add(name)
      try:
        _adopt(_join(self.dir, name))
      except Exception:     # noqa: BLE001: removed meanwhile; the next run checks it anyway
        pass
    return new

  def counts(self):
    """(loaded, compiled): entries read during this run (None when the file system cannot
    tell) and entries written by it."""
    compiled = len(self.seal())
    if not _is_local(self.dir):
      return None, compiled
    loaded = 0
    for name in self.before:
      try:
        if os.stat(_join(self.dir, name)).st_atime >= self.started - 1:
          loaded += 1
      except OSError:
        pass
    return loaded, compiled

  def report(self):
    """One line for the run's summary: "3 loaded, 1 compiled (DIR)"."""
    loaded, compiled = self.counts()
    loaded = "? (unknown on this file system)" if loaded is None else loaded
    return f"{loaded} program(s) loaded, {compiled} compiled and stored ({self.dir})"


def _tensorflow_started():
  """True once TensorFlow has set up its devices in this process: it has read TF_XLA_FLAGS
  then, and a cache directory named later is never used."""
  if "tensorflow" not in sys.modules:
    return False
  try:
    from tensorflow.python.eager import context
    ctx = context.context_safe()
    return bool(ctx is not None and getattr(ctx, "_initialized", False))
  except Exception:                                # noqa: BLE001 - a TensorFlow without it
    return False


def enable(flag_value=None, log=None):
  """Turns the cache on for this process (call before TensorFlow compiles anything: entry
  scripts do it first thing). Returns the Cache, or None when it is off, when TensorFlow has
  already read its flags in this process (a run started from Python after other TensorFlow
  work), or when TF_XLA_FLAGS already names a cache directory (the user's own setting is left
  alone; the one a parent run of ours set and a child inherited is replaced by the child's)."""
  global _active
  if _active is not None:
    return _active
  log = log or (lambda line: print(line, file=sys.stderr))
  base = resolve(flag_value)
  if base is None:
    return None
  if _tensorflow_started():
    if flag_value is not None:
      log("note: XLA compile cache not used: TensorFlow was already running in this process "
          "before the run started")
    return None
  current = os.environ.get("TF_XLA_FLAGS", "")
  inherited = os.environ.get(_SET_ENV)
  if inherited and inherited in current:
    current = " ".join(current.replace(inherited, " ").split())
  if _DIR_FLAG in current:
    return None
  cache = Cache(base, log)
  try:
    if _is_local(cache.dir):
      os.makedirs(cache.dir, exist_ok=True)
    else:
      _gfile().makedirs(cache.dir)
    cache.start()
  except OSError as e:
    log(f"warning: XLA compile cache off: cannot use {base}: {e.strerror or e}")
    return None
  ours = f"{_DIR_FLAG}={cache.dir} --tf_xla_persistent_cache_prefix={PREFIX}"
  os.environ["TF_XLA_FLAGS"] = f"{current} {ours}".strip()
  os.environ[_SET_ENV] = ours
  atexit.register(cache.seal)
  _active = cache
  return cache


def active():
  """The Cache `enable` turned on in this process, or None."""
  return _active
