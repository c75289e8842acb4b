"""`run(main)`: the entry scripts' `absl.app.run`, except that asking for help exits with 0, and
no traceback at the door (`quietly`).

absl (2.x) prints the help of --help / -? / --helpshort / --helpfull / --helpxml and then exits
with status 1, the status of an error: `script.py --help && ...` stops there, and a caller
cannot tell the help it asked for from a failure. Here each help flag exits with 0 after
printing exactly what absl prints; everything else is absl's app.run unchanged (a bad flag still
exits 1 with absl's message, main's return value or sys.exit is still the exit status).

`quietly(fn, *args)` (around app.run here; a script with its own start-up calls it itself):
- Ctrl-C outside the training loop (start-up, data preparation, evaluation after training,
  export) is one line on stderr, "SCRIPT: interrupted; nothing half-written was published", and
  exit status EXIT_INTERRUPTED = 130 (128 + SIGINT, what a shell reports), no traceback. Every
  output is published whole or not at all (data_utils/fileio.py), so this holds wherever it
  lands. Inside the loop the trainer stops itself (training/preemption.py: a checkpoint, one
  line, status 75).
- stdout closed early (`script.py ... | head`): the rest of the output is dropped and the
  script exits at once with EXIT_STDOUT_CLOSED = 141 (128 + SIGPIPE: what a shell reports for a
  program killed by the closed pipe, so `set -o pipefail` sees the same status as for any Unix
  tool), instead of a BrokenPipeError traceback.

TensorFlow's start-up noise (`quiet_imports`, unless `--verbose` is on the command line): what
TensorFlow and Keras print on every start that is not about the run is filtered where it is made:
- C++ INFO and WARNING lines: TF_CPP_MIN_LOG_LEVEL=2 (when the environment does not set it);
  the lines TensorFlow prints before its logging reads that setting ("All log messages before
  absl::InitializeLog()", oneDNN, "Could not find cuda drivers", CPU instructions) and the
  benign CUDA errors of a machine without a GPU (failed call to cuInit) or with several CUDA
  plug-ins (Unable to register cuDNN/cuFFT/cuBLAS factory) and oneDNN's fallback notices
  (an E line: "oneDNN supports DT_INT64 only on platforms with AVX-512") are dropped from file descriptor 2
  by a filter process, line by line, exactly these patterns (NATIVE_NOISE); every other line,
  errors and Python's own messages included, passes;
- Python-side warnings (PYTHON_NOISE): unused-gradient warnings for `mask_emb` only (the
  two-stream query embedding fine-tuning never uses), checkpoint values a partial load leaves
  unused (save_counter, the optimizer's slots: our loaders report what they loaded),
  tf.function retracing notices, and absl's SavedModel notices (untraced functions, custom
  gradients), as logging filters on the 'tensorflow' and 'absl' loggers and warning filters.
The flag `--verbose` (training/flags.py) keeps all of it.

`run(main)` then runs the callbacks given to `on_success` once main returns without an error:
the end-of-run summary (training/summary.py) is the run's last lines.

This module imports absl.app only inside `run`, so a script that avoids it on its fast path
can still use `quietly`.
"""

import atexit
import gc
import logging
import os
import re
import signal
import subprocess
import sys
import time
import warnings

from absl import flags

EXIT_INTERRUPTED = 130
EXIT_STDOUT_CLOSED = 141
STARTED = time.time()      # when the script began (its imports included): the summary's clock
_on_success = []
_before_run = []


def _script():
  return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


def quietly(fn, *args):
  """fn(*args), with Ctrl-C and a closed stdout turned into their exit statuses (see the
  module docstring); stdout is flushed inside, so a pipe closed early is seen here and not at
  the interpreter's exit."""
  try:
    try:
      return fn(*args)
    finally:
      sys.stdout.flush()
  except BrokenPipeError:
    _drop_stdout()
    sys.exit(EXIT_STDOUT_CLOSED)
  except KeyboardInterrupt:
    try:
      sys.stdout.flush()
      print(f"{_script()}: interrupted; nothing half-written was published", file=sys.stderr,
            flush=True)
    except (BrokenPipeError, KeyboardInterrupt):
      _drop_stdout()
    sys.exit(EXIT_INTERRUPTED)


def quiet_imports(module_name):
  """Called by an entry script right after importing this module, with its `__name__`: when it
  runs as the program, Ctrl-C during the imports that follow (TensorFlow's take seconds) is one
  line and status 130 instead of a traceback (nothing is written yet); `run` puts Python's own
  handler back before `main`. Unless --verbose is on the command line, TensorFlow's start-up
  noise is filtered from here on (module docstring): TensorFlow reads its logging settings when
  imported, before the flags are parsed, so the command line is read here. Imported as a module
  (the tests), it does nothing."""
  if module_name != "__main__":
    return
  collect_less()
  skip_keras_optional_imports()
  if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_while_importing)   # (an ignored SIGINT stays so)
  if not verbose_requested(sys.argv[1:]):
    quiet_tensorflow()


# Python's cyclic garbage collector at its default thresholds (700, 10, 10) scans the millions of
# long-lived objects that importing TensorFlow and tracing graphs make, again and again: a
# visible part of a small run's start-up. Entry scripts collect less often, and `run` freezes what
# start-up made (gc.freeze: those objects are never scanned again; they live to the end anyway).
GC_THRESHOLDS = (10_000, 20, 20)


def collect_less():
  """GC_THRESHOLDS for an entry script (`quiet_imports`); a library leaves a program's own."""
  gc.set_threshold(*GC_THRESHOLDS)


class _KerasOptionalImports:
  """An import finder that answers ImportError to a `keras.src` module importing one of
  KERAS_OPTIONAL, and stays out of every other import (returns None)."""

  def find_spec(self, name, path=None, target=None):
    del path, target
    if name.partition(".")[0] not in KERAS_OPTIONAL:
      return None
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(
        ("importlib", "_frozen_importlib")):
      frame = frame.f_back
    if frame is not None and frame.f_globals.get("__name__", "").startswith("keras.src."):
      raise ImportError(f"{name}: not imported for Keras by this script (data_utils/cli_app.py)")
    return None


# Keras imports these at its own import whenever they are installed (scikit-learn for its
# sklearn wrappers, matplotlib for its plotting helpers), and takes its documented fallbacks
# when they are not; no entry script uses either.
KERAS_OPTIONAL = ("sklearn", "matplotlib")


def skip_keras_optional_imports():
  """From here on, Keras's own imports of scikit-learn and matplotlib fail, so Keras takes its
  not-installed fallbacks: on an environment that has them (most research set-ups; the test
  requirements) they are a visible part of every script's start (bench/README.md, Start-up). Any other importer (a user's code, sentence-transformers) gets them as usual. For
  entry scripts only (`quiet_imports`): a library imported into someone's program leaves the
  import system alone."""
  if not any(isinstance(f, _KerasOptionalImports) for f in sys.meta_path):
    sys.meta_path.insert(0, _KerasOptionalImports())


def _interrupted_while_importing(signum, frame):
  del signum, frame
  message = f"{_script()}: interrupted; nothing half-written was published\n"
  try:      # straight to the terminal: the filter process may not pass it on before the exit
    os.write(_STDERR[0] if _STDERR[0] is not None else 2, message.encode())
  except OSError:
    pass
  os._exit(EXIT_INTERRUPTED)    # mid-import: no state to unwind, nothing written


# ---- TensorFlow's start-up noise ----------------------------------------------------------
# Lines of file descriptor 2 dropped (whole lines, from their first character).
NATIVE_NOISE = (
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"[IW]\d{4} [\d:. ]+\d+ \S+:\d+\] ",                 # C++ INFO / WARNING lines
    r"To enable the following instructions: .* rebuild TensorFlow with the appropriate "
    r"compiler flags\.",                                    # cpu_feature_guard's second line
    r"E\d{4} [\d:. ]+\d+ cuda_(platform|driver|executor|diagnostics)\.cc:\d+\] (failed call "
    r"to cuInit|kernel driver does not appear|retrieving CUDA diagnostic|hostname|"
    r"libcuda reported|could not retrieve CUDA device count)",
    r"E\d{4} [\d:. ]+\d+ \S+:\d+\] Unable to register cu(DNN|FFT|BLAS) factory",
    r"E\d{4} [\d:. ]+\d+ \S+:\d+\] computation placer already registered",
    r"E\d{4} [\d:. ]+\d+ \S+:\d+\] oneDNN supports \S+ only on platforms with",   # it falls back
    # a compilation cache entry loaded (training/compile_cache.py): TensorFlow tries the text
    # format before the binary one, and names LLVM's scatter/gather tuning hints as features
    # (the key's CPU features keep an entry to the machines it was compiled for)
    r"E\d{4} [\d:. ]+\d+ text_format\.cc:\d+\] Error parsing text-format "
    r"tensorflow\.XlaSerializedCacheEntry",
    r"E\d{4} [\d:. ]+\d+ cpu_aot_loader\.cc:\d+\] Loading XLA:CPU AOT result\. Target machine "
    r"feature \+prefer-no-(scatter|gather) is not +supported on the host machine",
)
# (logger, message) patterns of Python-side records dropped, and warnings ignored.
PYTHON_NOISE = (
    ("tensorflow", r"Value in checkpoint could not be found in the restored object"),
    ("tensorflow", r"(Detecting that an object or model or tf\.train\.Checkpoint is being "
                   r"deleted with unrestored values|A checkpoint was restored .* but not all "
                   r"checkpointed values were used)"),
    ("tensorflow", r"\d+ out of the last \d+ calls to .* triggered tf\.function retracing"),
    ("absl", r"Found untraced functions such as"),
    ("absl", r"Importing a function \(.*\) with ops with unsaved custom gradients"),
)
UNUSED_MASK_EMB = r"Gradients do not exist for variables \[('[^']*mask_emb'(, )?)+\]"
_STDERR = [None]        # the terminal's stderr while the filter process holds descriptor 2
_FILTER_CODE = """
import re, sys
noise = re.compile("|".join("(?:%s)" % p for p in sys.argv[1:]))
out = sys.stdout.buffer
for line in sys.stdin.buffer:
  if not noise.match(line.decode("utf-8", "replace")):
    out.write(line)
    out.flush()
"""


def argv_value(argv, name):
  """The value the command line gives string flag --NAME (`--NAME=V` or `--NAME V`; the last
  one wins), or None: for settings needed before absl parses the flags."""
  value = None
  for k, arg in enumerate(argv):
    if arg == "--":
      break
    for prefix in (f"--{name}", f"-{name}"):
      if arg.startswith(prefix + "="):
        value = arg[len(prefix) + 1:]
      elif arg == prefix and k + 1 < len(argv):
        value = argv[k + 1]
  return value


def before_run(callback):
  """Runs callback(argv) in `run` before absl parses the flags: absl's start-up hooks may
  start TensorFlow's runtime (tf.distribute's lists the devices), after which TensorFlow no
  longer reads its environment settings (training/compile_cache.py)."""
  if callback not in _before_run:
    _before_run.append(callback)


def verbose_requested(argv):
  """Whether the command line turns --verbose on (absl's spellings; the last one wins)."""
  verbose = False
  for arg in argv:
    if arg == "--":
      break
    if arg in ("--verbose", "-verbose", "--verbose=true", "--verbose=True", "--verbose=1"):
      verbose = True
    elif arg in ("--noverbose", "-noverbose") or arg.lower() in ("--verbose=false", "--verbose=0"):
      verbose = False
  return verbose


class _Drop(logging.Filter):
  """Drops the records of one logger whose message matches `pattern`."""

  def __init__(self, pattern):
    super().__init__()
    self.pattern = re.compile(pattern, re.S)

  def filter(self, record):
    try:
      return not self.pattern.search(record.getMessage())
    except Exception:      # a record that cannot format: let it through
      return True


def quiet_python_side(quiet=True):
  """Installs (quiet) or removes the Python-side filters of PYTHON_NOISE and UNUSED_MASK_EMB."""
  for name in {logger for logger, _ in PYTHON_NOISE}:
    logger = logging.getLogger(name)
    for f in [f for f in logger.filters if isinstance(f, _Drop)]:
      logger.removeFilter(f)
    if quiet:
      for f in [_Drop(p) for n, p in PYTHON_NOISE if n == name]:
        logger.addFilter(f)
  entry = ("ignore", re.compile(UNUSED_MASK_EMB), UserWarning)
  warnings.filters[:] = [w for w in warnings.filters if w[:3] != entry]
  if quiet:
    warnings.filterwarnings("ignore", message=UNUSED_MASK_EMB, category=UserWarning)


def quiet_tensorflow():
  """TensorFlow's start-up noise filtered from here on (module docstring); before TensorFlow
  is imported."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  quiet_python_side(True)
  if _STDERR[0] is not None or os.name != "posix":    # (the filter process is POSIX's)
    return
  try:
    sys.stderr.flush()
    terminal = os.dup(2)
  except (OSError, ValueError, AttributeError):    # no real descriptor 2: nothing to filter
    return
  try:
    filter_process = subprocess.Popen(
        [sys.executable, "-I", "-c", _FILTER_CODE, *NATIVE_NOISE], stdin=subprocess.PIPE,
        stdout=terminal, stderr=terminal, close_fds=True, preexec_fn=_ignore_stop_signals)
  except OSError:
    os.close(terminal)
    return
  # descriptor 2 into the filter: its copy closes when this process (and its children) end,
  # and the filter then passes on what is left and exits
  os.dup2(filter_process.stdin.fileno(), 2)
  filter_process.stdin.close()
  _STDERR[0] = terminal
  atexit.register(_end_filter, filter_process)


def _ignore_stop_signals():
  """In the filter process: Ctrl-C and SIGTERM (sent to the whole process group) are the
  script's to answer; the filter ends when the script's last copy of descriptor 2 closes, after
  passing on the script's last lines (its stop message, an error)."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _end_filter(filter_process):
  """At exit: descriptor 2 back to the terminal (the pipe's last copy here closes) and the
  filter given a moment to pass on the last lines, so they come before the shell's prompt."""
  try:
    sys.stderr.flush()
    os.dup2(_STDERR[0], 2)
    filter_process.wait(timeout=2)
  except (OSError, ValueError, subprocess.TimeoutExpired):   # a child still holds the pipe
    pass


def on_success(callback):
  """`callback()` after main returns without an error (run): e.g. the end-of-run summary."""
  if callback not in _on_success:
    _on_success.append(callback)


def _drop_stdout():
  """Points stdout (the file descriptor) at /dev/null: Python flushes sys.stdout again at exit,
  which would otherwise raise into the closed pipe once more."""
  try:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
  except (OSError, ValueError, AttributeError):    # no real stdout (a test's capture)
    pass

HELP_FLAGS = ("help", "helpshort", "helpfull", "helpxml")   # -? is --help's short name


def _exit_0_after_help(flag):
  """Wraps `flag.parse` (absl's: print the help, then sys.exit(1)) to exit with 0 instead."""
  if getattr(flag, "_exits_0_after_help", False):
    return
  parse = flag.parse

  def parse_then_exit_0(argument):
    try:
      parse(argument)
    except SystemExit as e:
      if e.code == 1:   # the help flags' only exit, after printing the help
        sys.exit(0)
      raise

  flag.parse = parse_then_exit_0
  flag._exits_0_after_help = True


def run(main, argv=None):
  """absl.app.run(main, argv) with the help flags exiting 0, under `quietly`."""
  from absl import app  # pylint: disable=import-outside-toplevel

  if signal.getsignal(signal.SIGINT) is _interrupted_while_importing:
    signal.signal(signal.SIGINT, signal.default_int_handler)    # KeyboardInterrupt again
  if gc.get_threshold() == GC_THRESHOLDS:      # an entry script (quiet_imports)
    gc.freeze()
  for callback in _before_run:
    callback(sys.argv if argv is None else argv)
  app.define_help_flags()   # idempotent; app.run calls it again
  for name in HELP_FLAGS:
    _exit_0_after_help(flags.FLAGS[name])

  def main_then_callbacks(args):
    status = main(args)
    if status in (None, 0):
      while _on_success:
        _on_success.pop(0)()
    return status

  quietly(app.run, main_then_callbacks, argv)
