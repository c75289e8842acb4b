"""Stopping a training run cleanly on SIGTERM or SIGINT (preemption, Ctrl-C).

SIGTERM is what a TPU VM, a spot GPU or Kubernetes sends before it takes the machine away;
SIGINT is Ctrl-C. While the trainer runs its loop (training/trainer.py installs `watch()`
around it), either signal asks the run to stop at the next safe point instead of dying:

- during a host loop (the `steps_per_loop` steps of one graph call, which cannot be cut
  inside): the loop finishes, a checkpoint of that step is written through the normal save
  path (model, optimizer, carried state, dropout streams), and the run stops;
- during a checkpoint write: the write completes and is published, then the run stops;
- during an evaluation (fine-tuning): the evaluation is abandoned; its step's checkpoint is
  already published and eval/last.json does not record it, so the rerun evaluates that step
  again (trainer._resume_evaluation), and best/ and eval/last.json end as they would have.

It then prints one line, "stopped at step N; checkpoint written; rerun the same command to
resume", and exits with EXIT_PREEMPTED = 75 (EX_TEMPFAIL of sysexits.h: "try again later").
A scheduler that sees 75 should rerun the same command; it resumes from that checkpoint, and
under --deterministic ends on the same bytes as a run never interrupted. A stop checkpoint
taken between --save_every points is not counted as one of the run's saves (the checkpoint's
save counter is left as it was), so it changes no byte of the later checkpoints; it does count
among the last --keep_checkpoints kept.

A second SIGTERM or SIGINT while stopping exits at once with status 128 + the signal (130 for
SIGINT, 143 for SIGTERM), whatever the main thread is doing (a watcher thread sees the signal
as it arrives); checkpoints and best/ are published atomically, so what was published stays
valid and the rerun resumes from the last published checkpoint, as after a SIGKILL.

Handlers are installed only from the main thread (elsewhere `watch` does nothing) and the
previous handlers (and wakeup fd) are restored when the block ends, so trainers can run in one
process many times. Outside the trainer's loop the process keeps Python's defaults: Ctrl-C is a
KeyboardInterrupt, which the entry scripts turn into one line and status 130
(data_utils/cli_app.py); SIGTERM ends the process (nothing half-written is ever published).

Several hosts (multi-worker): a signal reaches one host or all. The hosts agree at every
host-loop boundary (one scalar all-reduce, multi-client runs only): if any host was asked to
stop, all write the checkpoint together (the chief publishes it) and all exit with 75. A host
evaluates to the end there (abandoning could leave the hosts out of step), and a signal
during a save is acted on at the next boundary. A host that is killed outright (or whose
grace period ends first) leaves the others blocked in a collective or failing with an error;
the rerun resumes from the last published checkpoint. A TPU run has one Python process (the
controller): the rules of a single host apply to it.
"""

import contextlib
import os
import signal
import threading
import time

EXIT_PREEMPTED = 75                   # EX_TEMPFAIL: rerun the same command to resume
SIGNALS = (signal.SIGTERM, signal.SIGINT)
STOPPED_LINE = "stopped at step {step}; checkpoint written; rerun the same command to resume"


class Stopped(SystemExit):
  """Raised by the trainer once its stop checkpoint is published: exit status EXIT_PREEMPTED
  (a SystemExit, so that no `except Exception` on the way out swallows it)."""

  def __init__(self, step):
    super().__init__(EXIT_PREEMPTED)
    self.step = step


class Abandoned(BaseException):
  """Raised inside `Watch.abandonable()` when a stop is requested (an evaluation cut short)."""


class Watch:
  """One training run's view of the signals: `requested` once a first signal came."""

  def __init__(self):
    self.signum = None           # the first signal received
    self._count = 0
    self._abandonable = False
    self._lock = threading.RLock()    # the Python handler may interrupt its own holder

  @property
  def requested(self):
    return self.signum is not None

  def _received(self, signum):
    """Counts a signal (from the watcher thread or the Python handler); the second exits."""
    with self._lock:
      self._count += 1
      if self.signum is None:
        self.signum = signum
      second = self._count >= 2
    if second:
      _exit_now(signum)

  @contextlib.contextmanager
  def abandonable(self):
    """A block a stop request cuts short with Abandoned (at once if one is pending)."""
    if self.requested:
      raise Abandoned()
    self._abandonable = True
    try:
      yield
    finally:
      self._abandonable = False

  def sleep(self, seconds):
    """time.sleep(seconds), ended early by a stop request (the trainers' test pauses)."""
    deadline = time.time() + seconds
    while not self.requested and time.time() < deadline:
      time.sleep(0.05)


_active = []                   # the Watch of the running trainer(s), innermost last


def active():
  """The innermost running trainer's Watch, or None."""
  return _active[-1] if _active else None


def sleep(seconds):
  """Test pauses: time.sleep, ended early when the running trainer is asked to stop."""
  if active():
    active().sleep(seconds)
  else:
    time.sleep(seconds)


def _exit_now(signum):
  """A second signal: one line straight to fd 2 (no lock a busy main thread could hold), then
  exit with 128 + signum without unwinding anything."""
  try:
    os.write(2, f"second {signal.Signals(signum).name}: exiting at once; the last published "
                "checkpoint is kept\n".encode())
  finally:
    os._exit(128 + signum)  # pylint: disable=protected-access


@contextlib.contextmanager
def watch():
  """Installs the handlers for the block (main thread only; elsewhere a Watch no signal
  reaches) and yields the Watch; restores the previous handlers afterwards."""
  stop = Watch()
  if threading.current_thread() is not threading.main_thread():
    _active.append(stop)
    try:
      yield stop
    finally:
      _active.remove(stop)
    return
  watcher, read_fd, write_fd, old_wakeup = None, None, None, None
  try:
    # The wakeup fd receives each signal's number as it arrives, even while the main thread
    # is inside a long TensorFlow call (the Python handler runs only when it returns): the
    # watcher thread counts from there, so a second signal exits at once. Another user of
    # the wakeup fd (an asyncio loop) keeps it; the Python handler then counts alone.
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    if old_wakeup != -1:
      signal.set_wakeup_fd(old_wakeup)
      old_wakeup = None
    else:
      watcher = threading.Thread(target=_watch_fd, args=(read_fd, stop), daemon=True,
                                 name="preemption-watcher")
      watcher.start()
  except (OSError, ValueError):
    pass

  def handler(signum, frame):
    del frame
    if watcher is None:
      stop._received(signum)   # pylint: disable=protected-access
    elif stop.signum is None:      # the watcher has not read the byte yet
      stop.signum = signum
    if stop._abandonable:      # pylint: disable=protected-access
      stop._abandonable = False      # pylint: disable=protected-access
      raise Abandoned()

  previous = {s: signal.signal(s, handler) for s in SIGNALS}
  _active.append(stop)
  try:
    yield stop
  finally:
    _active.remove(stop)
    for s, h in previous.items():
      signal.signal(s, h if h is not None else signal.SIG_DFL)
    if old_wakeup is not None:
      signal.set_wakeup_fd(old_wakeup)
    for fd in (write_fd,):          # EOF ends the watcher
      if fd is not None:
        os.close(fd)
    if watcher is not None:
      watcher.join(5)
    if read_fd is not None:
      os.close(read_fd)


def _watch_fd(read_fd, stop):
  signals = {int(s) for s in SIGNALS}
  while True:
    try:
      data = os.read(read_fd, 64)
    except OSError:
      return
    if not data:
      return
    for signum in data:
      if signum in signals:
        stop._received(signum)   # pylint: disable=protected-access


def stopped_line(step):
  return STOPPED_LINE.format(step=step)


def stop(step, log):
  """Logs the one line and raises Stopped (exit status EXIT_PREEMPTED)."""
  log(stopped_line(step))
  raise Stopped(step)

