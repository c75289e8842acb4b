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
the fork (PRELOAD, imported with the settings an entry script's `cli_app.quiet_imports` makes)
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
PRELOAD = ("numpy", "absl.app", "absl.flags", "absl.logging", "tensorflow", "sentencepiece",
           "tensorflow_text")
# Environment variables (exact names, or prefixes ending in "_") read when those modules are
# imported or when the interpreter starts: a run must see the server's values.
IMPORT_TIME_ENV = ("PYTHON", "LANG", "LANGUAGE", "LC_", "TF_CPP_", "TF_ENABLE_ONEDNN_OPTS",
                   "TF_USE_LEGACY_KERAS", "KERAS_", "OMP_", "MKL_", "OPENBLAS_", "GOTO_",
                   "NPY_", "NUMPY_")
# quiet_tensorflow's default (data_utils/cli_app.py): a script run without the variable sets it
# before importing TensorFlow, so the server imports under it too
DEFAULT_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _import_time_env(env):
  """The settings of `env` a run must share with its server (PYTHONPATH aside: the child
  builds its sys.path from its own)."""
  merged = dict(DEFAULT_ENV, **env)
  return {k: v for k, v in merged.items()
          if k.startswith(IMPORT_TIME_ENV) and k != "PYTHONPATH"}


def runnable(argv, env, server_env):
  """Whether `python *argv` in `env` may run in a server started in `server_env`."""
  if not argv or _import_time_env(env) != _import_time_env(server_env):
    return False
  if argv[0] in ("-c", "-m"):
    head = argv[:2]
  elif argv[0].startswith("-") or not argv[0].endswith(".py"):
    return False
  else:
    head = argv[:1]
  if len(head) < (2 if argv[0] in ("-c", "-m") else 1):
    return False
  return not cli_app.verbose_requested(argv[len(head):])


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
      line = self.process.stdout.readline()    # "ready", or EOF if its imports failed
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


# ------------------------------------------------------------------------------------ server

def _preload():
  cli_app.skip_keras_optional_imports()       # as every entry script starts
  import importlib   # pylint: disable=import-outside-toplevel
  for name in PRELOAD:
    try:
      importlib.import_module(name)
    except ImportError:
      pass


def _receive(conn):
  header, fds, _, _ = socket.recv_fds(conn, 64, 3)
  length, _, payload = header.partition(b"\n")
  length = int(length)
  while len(payload) < length:
    chunk = conn.recv(length - len(payload))
    if not chunk:
      raise OSError("request cut short")
    payload += chunk
  return json.loads(payload), fds


def serve(path):
  """The server: preload, then fork a child per request until stdin closes."""
  _preload()
  signal.signal(signal.SIGINT, signal.SIG_IGN)       # Ctrl-C is its runs' to answer
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(path)
  listener.listen(64)
  sys.stdout.write("ready\n")
  sys.stdout.flush()
  runs = {}                     # pid -> connection to its client
  try:
    while True:
      waiting = list(runs.values())
      readable, _, _ = select.select([listener, sys.stdin] + waiting, [], [], 0.05)
      if sys.stdin in readable and not os.read(sys.stdin.fileno(), 4096):
        break
      if listener in readable:
        conn, _ = listener.accept()
        try:
          request, fds = _receive(conn)
        except (OSError, ValueError):
          conn.close()
        else:
          pid = os.fork()
          if pid == 0:
            listener.close()
            for other in waiting:
              other.close()
            _child(conn, request, fds)      # never returns
          for fd in fds:
            os.close(fd)
          conn.sendall(f"pid {pid}\n".encode())
          runs[pid] = conn
      for pid, conn in list(runs.items()):
        if conn in readable:       # the client is gone (it sends nothing else): so is its run
          try:
            os.kill(pid, signal.SIGKILL)
          except ProcessLookupError:
            pass
      while runs:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
          break
        conn = runs.pop(pid, None)
        if conn is not None:
          try:
            conn.sendall(f"exit {status}\n".encode())
          except OSError:
            pass
          conn.close()
  finally:
    for pid in runs:
      try:
        os.kill(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    for pid in runs:
      os.waitpid(pid, 0)


def _child(conn, request, fds):
  """In the forked child: become `python *argv` in the request's directory and environment."""
  code = 1
  try:
    conn.close()
    for i, fd in enumerate(fds):
      os.dup2(fd, i)
    for fd in set(fds):
      if fd > 2:
        os.close(fd)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGQUIT):
      signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for stream in (sys.stdout, sys.stderr):
      stream.reconfigure(line_buffering=stream.isatty() or stream is sys.stderr)
    for name in [n for n, m in sys.modules.items()    # the project's modules load afresh
                 if n != "__main__"
                 and (getattr(m, "__file__", None) or "").startswith(ROOT + os.sep)]:
      del sys.modules[name]
    import random   # pylint: disable=import-outside-toplevel
    random.seed()
    if "numpy" in sys.modules:
      sys.modules["numpy"].random.seed()
    code = _run_as_main(request["argv"], request["env"])
  except BaseException:      # pylint: disable=broad-except
    try:
      import traceback   # pylint: disable=import-outside-toplevel
      traceback.print_exc()
    finally:
      os._exit(1)
  os._exit(code)


def _exit_code(e):
  """The status Python gives SystemExit(e.code), printing a message as Python does."""
  if e.code is None:
    return 0
  if isinstance(e.code, int):
    return e.code & 0xff
  try:
    print(e.code, file=sys.stderr)
  except Exception:    # pylint: disable=broad-except
    pass
  return 1


def _run_as_main(argv, env):
  """Runs `python *argv` in this process, then what the interpreter's exit does (threads
  joined, atexit handlers, streams flushed); returns the exit status."""
  import runpy   # pylint: disable=import-outside-toplevel
  import types   # pylint: disable=import-outside-toplevel
  pythonpath = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
  base = [p for p in sys.path[1:] if p not in _SERVER_PYTHONPATH]
  interrupted = False
  try:
    try:
      if argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        sys.path[:] = [""] + pythonpath + base
        main = types.ModuleType("__main__")
        main.__builtins__ = __builtins__
        sys.modules["__main__"] = main
        exec(compile(argv[1], "<string>", "exec"), main.__dict__)   # pylint: disable=exec-used
      elif argv[0] == "-m":
        sys.argv = ["-m", *argv[2:]]
        sys.path[:] = [os.getcwd()] + pythonpath + base
        runpy._run_module_as_main(argv[1], alter_argv=True)   # pylint: disable=protected-access
      else:
        sys.argv = list(argv)
        script = os.path.realpath(argv[0])
        sys.path[:] = [os.path.dirname(script)] + pythonpath + base
        runpy.run_path(argv[0], run_name="__main__")
      code = 0
    except SystemExit as e:
      code = _exit_code(e)
    except KeyboardInterrupt:
      _excepthook()
      code, interrupted = 1, True
    except BaseException:     # pylint: disable=broad-except
      _excepthook()
      code = 1
    threading._shutdown()     # pylint: disable=protected-access
    import atexit   # pylint: disable=import-outside-toplevel
    atexit._run_exitfuncs()   # pylint: disable=protected-access
    for stream in (sys.stdout, sys.stderr):
      try:
        stream.flush()
      except (OSError, ValueError):
        code = code or 120
  except SystemExit as e:      # from an atexit handler
    code = _exit_code(e)
  if interrupted:     # as Python ends on an uncaught KeyboardInterrupt: killed by SIGINT
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
  return code


_SERVER_PYTHONPATH = set()


def _excepthook():
  """sys.excepthook on the exception being handled, its traceback starting where the script's
  code does (as Python prints it), not in this module or runpy."""
  kind, value, tb = sys.exc_info()
  while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>",
                                                              getattr(_runpy(), "__file__", "")):
    tb = tb.tb_next
  sys.excepthook(kind, value.with_traceback(tb), tb)


def _runpy():
  import runpy   # pylint: disable=import-outside-toplevel
  return runpy


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
    _SERVER_PYTHONPATH.update(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    with open(argv[1] + ".env", "w", encoding="utf-8") as f:
      json.dump(dict(os.environ), f)
    serve(argv[1])
    return 0
  if len(argv) >= 4 and argv[0] == "--connect" and argv[2] == "--":
    return connect(argv[1], argv[3:])
  print("usage: python -m data_utils.warm_start (--serve SOCKET | --connect SOCKET -- ARGV)",
        file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
