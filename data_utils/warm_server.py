"""The server of data_utils/warm_start.py: imports what every entry script imports (PRELOAD),
without starting TensorFlow's runtime, then forks one child per request; the child becomes
`python ARGV` in the request's directory, environment and standard streams (warm_start's
docstring says what a run shares with its server and what it does not).

Started as `python -m data_utils.warm_start --serve SOCKET` by a Launcher, whose pipe on its
stdin keeps it alive: at EOF it kills the runs still going and exits.
"""

import gc
import json
import os
import select
import signal
import socket
import sys
import threading

from data_utils import cli_app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# tensorboard.summary: what tf.summary.scalar imports at a run's first logged step
PRELOAD = ("numpy", "absl.app", "absl.flags", "absl.logging", "tensorflow", "sentencepiece",
           "tensorflow_text", "tensorboard.summary")


_GC_THRESHOLDS = gc.get_threshold()          # Python's own, which each run starts with


def _preload():
  cli_app.collect_less()                      # as every entry script starts
  cli_app.skip_keras_optional_imports()
  import importlib   # pylint: disable=import-outside-toplevel
  for name in PRELOAD:
    try:
      importlib.import_module(name)
    except ImportError:
      pass
  gc.freeze()         # never scanned again, by the server or its children (nor copied by them)


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
    gc.set_threshold(*_GC_THRESHOLDS)
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


def main(path):
  """Serves at `path`; its environment goes to PATH.env for `warm_start --connect`."""
  _SERVER_PYTHONPATH.update(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
  with open(path + ".env", "w", encoding="utf-8") as f:
    json.dump(dict(os.environ), f)
  serve(path)
