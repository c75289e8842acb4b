"""The training log's arithmetic and wording: durations as h:mm:ss, the rate and the ETA of a
run measured without the compile, the model's size and where its weights come from in one
line. Pure: times come in as arguments, so the tests give crafted ones.

The first host loop of a run, and of every resumed run, includes tracing the step and XLA's
compilation (seconds to minutes); a rate or ETA from it would be off by orders of magnitude on
short loops. `Progress` therefore sets the first loop aside ("with compile" in the log, no rate,
no ETA, no TensorBoard throughput) and measures the loops after it:
  rate  = steps of a loop / seconds of that loop (the host call alone),
  ETA   = steps left x wall seconds per step since the end of the first loop (checkpoints and
          evaluations included: they recur at the same pace until the end).
"""

import dataclasses

import numpy as np


def hms(seconds):
  """Seconds as h:mm:ss ("0:04:05", "27:46:40"); None (not known yet) as "-:--:--"."""
  if seconds is None or not np.isfinite(seconds):
    return "-:--:--"
  total = int(round(max(seconds, 0.0)))
  hours, rest = divmod(total, 3600)
  minutes, secs = divmod(rest, 60)
  return f"{hours}:{minutes:02d}:{secs:02d}"


def count(n):
  """A parameter count for people: 117_300_000 -> "117.3M", 45_600 -> "45.6K", 950 -> "950"."""
  for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
    if n >= scale:
      return f"{n / scale:.1f}{suffix}"
  return str(int(n))


def parameters(model):
  """Number of values in the model's weights (trainable or not; the dropout generators' states
  are not weights)."""
  return int(sum(int(np.prod(v.shape)) for v in model.weights))


def describe_model(model, model_config=None, family=None):
  """"117.3M parameters (xlnet, 12 layers, d_model 768)": the size, then what the config says
  of the family, depth and width (XLNetConfig: n_layer / d_model; MPNetConfig:
  num_hidden_layers / hidden_size); the parts not known are left out."""
  family = getattr(model, "family", None) or family
  parts = [family] if family else []
  layers = getattr(model_config, "n_layer", None) or getattr(model_config, "num_hidden_layers",
                                                             None)
  if layers:
    parts.append(f"{layers} layers")
  if getattr(model_config, "d_model", None):
    parts.append(f"d_model {model_config.d_model}")
  elif getattr(model_config, "hidden_size", None):
    parts.append(f"hidden {model_config.hidden_size}")
  detail = f" ({', '.join(parts)})" if parts else ""
  n = parameters(model)
  return f"{count(n)} parameter{'' if n == 1 else 's'}{detail}"


def start_line(task, model, resuming=None):
  """The run's first line, "model: 1.2M parameters (xlnet, 2 layers, d_model 32), random
  weights (seed 0, no --init_checkpoint)": the model's size and where its weights come from,
  `resuming` (a checkpoint of this run), the task's init_checkpoint, or random weights."""
  what = describe_model(model, getattr(task, "model_config", None), getattr(task, "family", None))
  init = getattr(task, "init_checkpoint", None)
  if resuming:
    source = f"resuming from {resuming}"
  elif init:
    source = f"weights from {init}"
  else:
    source = f"random weights (seed {getattr(task, 'seed', 0)}, no --init_checkpoint)"
  return f"model: {what}, {source}"


def pace_text(loop, steps, tokens_per_step):
  """The step line's timing: "12.3s for 10 steps, with compile" on the first loop of a run,
  then "0.25s/step 4,096 tokens/s ETA 0:04:05"."""
  if loop.compile:
    return f"{loop.seconds:.1f}s for {steps} step{'s' if steps > 1 else ''}, with compile"
  return (f"{loop.per_step:.2f}s/step {tokens_per_step * loop.per_second:,.0f} tokens/s "
          f"ETA {hms(loop.eta)}")


@dataclasses.dataclass
class Loop:
  """What one host loop's log line says. compile: the first loop of this run (its seconds
  include tracing and compiling: no rate, no ETA). per_step: seconds per step of the loop;
  per_second: steps per second of the loop; eta: seconds to the last step."""
  step: int
  seconds: float
  compile: bool
  per_step: float = None
  per_second: float = None
  eta: float = None


class Progress:
  """The rate and ETA of a run from `start_step` (0, or a resume's step) to `train_steps`.

  Call `loop(step, seconds, now)` after every host loop: `step` the step reached, `seconds` the
  loop's own duration, `now` the wall clock at its end (any clock, in seconds)."""

  def __init__(self, start_step, train_steps):
    self.last_step, self.train_steps = start_step, train_steps
    self.measured_from = None       # (time, step) at the end of the first loop

  def loop(self, step, seconds, now):
    steps, self.last_step = step - self.last_step, step
    if self.measured_from is None:
      self.measured_from = (now, step)
      return Loop(step, seconds, compile=True)
    since, since_step = self.measured_from
    per_step = (now - since) / (step - since_step)
    return Loop(step, seconds, compile=False, per_step=seconds / steps,
                per_second=steps / max(seconds, 1e-9),
                eta=per_step * (self.train_steps - step))
