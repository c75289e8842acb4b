"""Script runs without the interpreter's start-up: a server process imports TensorFlow once and
forks one child per run, which runs the script as `python SCRIPT ARGS` would.

Every entry script spends seconds importing TensorFlow and Keras before it reads its flags
(bench/README.md, Start-up). A caller that runs many scripts (the quickstart's stages, a sweep,
the tests) pays that once per Launcher instead of once per run:

    launcher = Launcher()
    proc = launcher.popen(["run_classifier.py", "--task_name=...", ...], cwd=ROOT,
                          stdout=log_file, stderr=subprocess.STDOUT)
    proc.wait()          # Popen's interface: pid, poll, wait, communicate, send_signal, kill
    launcher.close()

A child is the run's own process: its argv, working directory, environment, standard streams,
sys.path, signal handlers, exit status (a signal's death included) and atexit handlers are what
a fresh interpreter would have; Python's and NumPy's random states are drawn afresh. It shares
with its server only what a fresh interpreter could not tell apart: the modules imported before
the fork (warm_server.PRELOAD, imported with the settings an entry script's `cli_app.quiet_imports` makes)
and the string hash seed. TensorFlow's runtime never starts in the server (forking a process
whose thread pools run is unsafe); forking after the import alone is the standard
multiprocessing 'fork' pattern.

A run starts a fresh interpreter instead (`proc.warm` is False) when its environment differs
from the server's in a setting read at import time (IMPORT_TIME_ENV: Python's, the locale's,
TensorFlow's C++ logging and oneDNN's, the math libraries' thread counts), when it passes
interpreter options or --verbose (TensorFlow's start-up messages, which the server printed to
nobody), or when the server could not start.

`python -m data_utils.warm_start --connect SOCKET -- SCRIPT ARGS` is the same as a command (for
a shell's `python`): it runs the script in the server listening at SOCKET (`Launcher.socket`)
with this process's streams, environment and directory, passes on SIGINT, SIGTERM and SIGHUP,
and exits as the script did; without a usable server it becomes `python SCRIPT ARGS`.
"""

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

from data_utils import cli_app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Environment variables (exact names, or prefixes ending in "_") read when those modules are
# imported or when the interpreter starts: a run must see the server's values.
IMPORT_TIME_ENV = ("PYTHON", "LANG", "LANGUAGE", "LC_", "TF_CPP_", "TF_ENABLE_ONEDNN_OPTS",
                   "TF_USE_LEGACY_KERAS", "KERAS_", "OMP_", "MKL_", "OPENBLAS_", "GOTO_",
                   "NPY_", "NUMPY_")
# quiet_tensorflow's default (data_utils/cli_app.py): a script run without the variable sets it
# before importing TensorFlow, so the server imports under it too
DEFAULT_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
START_TIMEOUT = 600    # seconds a server may take to import before it is given up


def _import_time_env(env):
  """The settings of `env` a run must share with its server (PYTHONPATH aside: the child
  builds its sys.path from its own)."""
  merged = dict(DEFAULT_ENV, **env)
  return {k: v for k, v in merged.items()
          if k.startswith(IMPORT_TIME_ENV) and k != "PYTHONPATH"}


def runnable(argv, env, server_env):
  """Whether `python *argv` in `env` may run in a server started in `server_env`: the same
  import-time settings, a script path, `-m MODULE` or `-c CODE` first, no --verbose."""
  if _import_time_env(env) != _import_time_env(server_env):
    return False
  if argv[:1] in (["-c"], ["-m"]) and len(argv) >= 2:
    rest = argv[2:]
  elif argv and argv[0].endswith(".py") and not argv[0].startswith("-"):
    rest = argv[1:]
  else:
    return False
  return not cli_app.verbose_requested(rest)


# ------------------------------------------------------------------------------------ client

def _send_request(sock, argv, cwd, env, fds):
  payload = json.dumps({"argv": list(argv), "cwd": cwd, "env": env}).encode()
  socket.send_fds(sock, [f"{len(payload)}\n".encode()], fds)
  sock.sendall(payload)


def _read_line(sock):
  """The server's first line (b'' if it closed) and the bytes read past it."""
  buffer = b""
  while b"\n" not in buffer:
    chunk = sock.recv(4096)
    if not chunk:
      return b"", b""
    buffer += chunk
  line, _, rest = buffer.partition(b"\n")
  return line, rest


class WarmProcess:
  """A run in the server: subprocess.Popen's interface (pid, returncode, stdout/stderr when
  PIPE, poll, wait, communicate, send_signal, terminate, kill)."""

  warm = True

  def __init__(self, sock, args, pipes):
    self.args = args
    self._sock, self._buffer = sock, b""
    self.stdin = None
    self.stdout, self.stderr = pipes
    line, self._buffer = _read_line(sock)
    if not line.startswith(b"pid "):
      raise OSError(f"warm start: the server did not start {args[0]}: {line!r}")
    self.pid = int(line[4:])
    self.returncode = None
    self._readers = None

  def _finish(self, timeout):
    """Reads the server's exit line (waiting up to `timeout` seconds; None: until it comes);
    whether the run has ended."""
    self._sock.settimeout(timeout)
    while b"\n" not in self._buffer:
      try:
        chunk = self._sock.recv(4096)
      except (socket.timeout, BlockingIOError):
        return False
      if not chunk:
        break
      self._buffer += chunk
    line = self._buffer.partition(b"\n")[0]
    if line.startswith(b"exit "):
      self.returncode = os.waitstatus_to_exitcode(int(line[5:]))
    else:       # the server ended first (its own client closed it): it killed the run
      self.returncode = -signal.SIGKILL
    self._sock.close()
    return True

  def poll(self):
    if self.returncode is None:
      self._finish(0)
    return self.returncode

  def wait(self, timeout=None):
    if self.returncode is None and not self._finish(timeout):
      raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def communicate(self, input=None, timeout=None):   # pylint: disable=redefined-builtin
    del input
    if self._readers is None:
      self._readers = []
      for pipe in (self.stdout, self.stderr):
        box = []
        thread = threading.Thread(target=lambda p=pipe, b=box: b.append(p.read() if p else None),
                                  daemon=True)
        thread.start()
        self._readers.append((thread, box))
    for thread, _ in self._readers:
      thread.join(timeout)
      if thread.is_alive():
        raise subprocess.TimeoutExpired(self.args, timeout)
    self.wait(timeout)
    outs = [box[0] for _, box in self._readers]
    for pipe in (self.stdout, self.stderr):
      if pipe:
        pipe.close()
    return outs[0], outs[1]

  def send_signal(self, sig):
    if self.returncode is None:
      try:
        os.kill(self.pid, sig)
      except ProcessLookupError:
        pass

  def terminate(self):
    self.send_signal(signal.SIGTERM)

  def kill(self):
    self.send_signal(signal.SIGKILL)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    for pipe in (self.stdout, self.stderr):
      if pipe:
        pipe.close()
    self.wait()


def _fd(spec, default, stdout_fd=None):
  """(descriptor for the child, pipe end kept by the caller or None, descriptor to close)."""
  if spec is None:
    return default, None, None
  if spec == subprocess.DEVNULL:
    fd = os.open(os.devnull, os.O_RDWR)
    return fd, None, fd
  if spec == subprocess.PIPE:
    r, w = os.pipe()
    return w, r, w
  if spec == subprocess.STDOUT:
    return stdout_fd, None, None
  return (spec if isinstance(spec, int) else spec.fileno()), None, None


class _Server:
  """One server process, importing under one environment."""

  def __init__(self, env):
    self.env = dict(DEFAULT_ENV, **env)
    self.dir = tempfile.mkdtemp(prefix="xlnet-warm-")
    self.socket = os.path.join(self.dir, "server")
    pythonpath = [ROOT] + [p for p in [self.env.get("PYTHONPATH")] if p]
    self.ok = None          # None: starting; then whether it said "ready"
    try:
      self.process = subprocess.Popen(
          [sys.executable, "-m", "data_utils.warm_start", "--serve", self.socket],
          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
          cwd=self.dir, env=dict(self.env, PYTHONPATH=os.pathsep.join(pythonpath)))
    except OSError:
      self.process, self.ok = None, False

  def ready(self):
    if self.ok is None:
      # "ready", or EOF if its imports failed; a server still importing after START_TIMEOUT
      # seconds is given up (its runs start fresh interpreters)
      waited = select.select([self.process.stdout], [], [], START_TIMEOUT)[0]
      line = self.process.stdout.readline() if waited else b""
      self.ok = line.strip() == b"ready"
      if not self.ok:
        self.close()
    return self.ok

  def close(self):
    if self.process is not None:
      try:
        self.process.stdin.close()
        self.process.wait(timeout=60)
      except (OSError, subprocess.TimeoutExpired):
        self.process.kill()
        self.process.wait()
      self.process.stdout.close()
      self.process = None
      self.ok = False
    shutil.rmtree(self.dir, ignore_errors=True)


class Launcher:
  """Starts scripts in servers that imported TensorFlow once (module docstring): one per
  import-time environment (IMPORT_TIME_ENV) its runs bring, at most `max_servers` (then a fresh
  interpreter), each started at its first run. `env`: the environment `start()` and `address()`
  mean (default: this process's)."""

  def __init__(self, env=None, max_servers=2):
    self.env = dict(os.environ if env is None else env)
    self.max_servers = max_servers
    self._servers = {}
    self._lock = threading.Lock()

  def _server(self, env, ready=False):
    """The server for runs in `env` (started if new; waited for if `ready`), or None."""
    key = tuple(sorted(_import_time_env(env).items()))
    with self._lock:
      if key not in self._servers:
        if len(self._servers) >= self.max_servers:
          return None
        self._servers[key] = _Server(env)
      server = self._servers[key]
      return server if not ready or server.ready() else None

  def start(self):
    """Starts the server for `env` in the background (its imports take seconds)."""
    self._server(self.env)
    return self

  def address(self):
    """The socket of the server for `env` once it is ready (`--connect`), or None."""
    server = self._server(self.env, ready=True)
    return server.socket if server is not None else None

  def popen(self, argv, **kwargs):
    """`subprocess.Popen([sys.executable, *argv], **kwargs)`, run in a server when it can be
    (module docstring; keyword arguments cwd, env, stdin (not PIPE), stdout, stderr, text;
    any other starts a fresh interpreter); `.warm` says which."""
    env = dict(os.environ if kwargs.get("env") is None else kwargs["env"])
    served = (set(kwargs) <= {"cwd", "env", "stdin", "stdout", "stderr", "text"}
              and kwargs.get("stdin") != subprocess.PIPE and runnable(argv, env, env))
    server = self._server(env, ready=True) if served else None
    if server is not None:
      try:
        return self._start(server, argv, env, kwargs)
      except OSError:        # the server is gone (killed, out of memory): fresh from now on
        server.ok = False
    proc = subprocess.Popen([sys.executable, *argv], **kwargs)
    proc.warm = False
    return proc

  @staticmethod
  def _start(server, argv, env, kwargs):
    text = kwargs.get("text", False)
    child, keep, close = [], [], []
    for i, name in enumerate(("stdin", "stdout", "stderr")):
      fd, kept, to_close = _fd(kwargs.get(name), i, child[1] if i == 2 else None)
      child.append(fd)
      keep.append(kept)
      close.append(to_close)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
      try:
        sock.connect(server.socket)
        _send_request(sock, argv, os.path.abspath(kwargs.get("cwd") or os.getcwd()), env,
                      child)
      finally:
        for fd in {c for c in close if c is not None}:
          os.close(fd)
      pipes = [os.fdopen(r, "r" if text else "rb") if r is not None else None
               for r in keep[1:]]
      keep = []
      return WarmProcess(sock, [sys.executable, *argv], pipes)
    except OSError:
      sock.close()
      for fd in keep:
        if fd is not None:
          os.close(fd)
      raise

  def run(self, argv, capture_output=False, timeout=None, check=False, **kwargs):
    """`subprocess.run([sys.executable, *argv], ...)`, run in a server when it can be."""
    if kwargs.get("input") is not None:
      return subprocess.run([sys.executable, *argv], capture_output=capture_output,
                            timeout=timeout, check=check, **kwargs)
    kwargs.pop("input", None)
    if capture_output:
      kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc = self.popen(argv, **kwargs)
    try:
      out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
      raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check:
      done.check_returncode()
    return done

  def close(self):
    """Stops the servers; a run still going is killed."""
    with self._lock:
      for server in self._servers.values():
        server.close()
      self._servers = {}

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


# ------------------------------------------------------------------------------ command line

def connect(path, argv):
  """`python *argv` run in the server at `path` with this process's streams; returns (exits
  with) its status. Without a usable server: exec `python *argv` instead."""
  server_env = None
  try:
    with open(path + ".env", encoding="utf-8") as f:
      server_env = json.load(f)
  except (OSError, ValueError):
    pass
  sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  try:
    if server_env is None or not runnable(argv, dict(os.environ), server_env):
      raise OSError("not runnable here")
    sock.connect(path)
    _send_request(sock, argv, os.getcwd(), dict(os.environ), [0, 1, 2])
    proc = WarmProcess(sock, argv, (None, None))
  except OSError:
    sock.close()
    os.execv(sys.executable, [sys.executable, *argv])
  for sig in _FORWARDED:
    signal.signal(sig, lambda s, _f: proc.send_signal(s))
  code = proc.wait()
  if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
  return code


def main(argv):
  if len(argv) >= 2 and argv[0] == "--serve":
    from data_utils import warm_server   # pylint: disable=import-outside-toplevel
    warm_server.main(argv[1])
    return 0
  if len(argv) >= 4 and argv[0] == "--connect" and argv[2] == "--":
    return connect(argv[1], argv[3:])
  print("usage: python -m data_utils.warm_start (--serve SOCKET | --connect SOCKET -- ARGV)",
        file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
