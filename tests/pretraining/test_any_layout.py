"""One record set, many training layouts (data_utils/lanes.py), shown from what is read and
trained, not from the reader's bookkeeping.

Records of 8 lanes with bi_data are written once (create_pretrain_data.py, several shards) and:
- read by 1 replica of 8 rows, 2 replicas of 4, 2 hosts of 4, 1 replica of 4 (two passes over
  each file) and 2 replicas of 8 (two files side by side): every row of the batches is the
  record the rule names (record k of a file: step k // 8, lane k % 8; pairs 0..3 forward at
  lanes 0..3, their reversed twins at 4..7), each row continues its own text from step to step
  (seen in the tokens: a record's segment A is where its lane's next record begins) up to a
  lane's end, and each replica's second half is its first half's text reversed;
- trained without rewriting by run_pretrain.py on 1 replica, 2 replicas (MirroredStrategy over
  2 logical CPUs) and 2 workers (multi-worker on localhost) at global batch 8, and at global
  batch 4 on 1 and 2 replicas, memory carried, dropout off: the same losses and final weights
  at the same global batch, and every lane's memory in the row that reads it;
- a layout they cannot serve is refused in one line naming the rule, before any step.
Records of the earlier per-core layout (--num_core_per_host=2) are read in the same rows.
A run resumed on another layout at the same global batch goes on as if uninterrupted (each
lane's memory moved to the row now reading it), and one resumed with --nocheckpoint_memory
starts from empty memory.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from data_utils import lanes, pipeline, record_format
from tests import warm
from tests.hang_guard import HANG_GUARD
from tests.training.test_multiworker import REFERENCE as MIRRORED   # 2 logical CPUs
from tests.training.test_multiworker import clean_env, event_losses, free_ports

pytestmark = pytest.mark.slow   # 13 run_pretrain.py processes (4 steps), 2 of them workers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARD_MB = 0.0572   # ~60 KB of the ~200 KB corpus a shard: 4 files of ~300, ~290, ~280, ~100 steps
SEQ, REUSE, NP, LANES = 32, 16, 5, 8
STEPS = 4
TF_LOG = re.compile(r"^(WARNING: All log messages before absl::InitializeLog|[IWEF]\d{4} |"
                    r"To enable the following instructions)")


def write_records(text, sp, out, *extra):
  return warm.popen(
      [sys.executable, "data_utils/create_pretrain_data.py", f"--input_glob={text}",
       f"--sp_model={sp}", f"--output_dir={out}", f"--seq_len={SEQ}", f"--reuse_len={REUSE}",
       f"--num_predict={NP}", "--bi_data", "--uncased", f"--shard_mb={SHARD_MB}", *extra],
      cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env())


def wait(procs, timeout=HANG_GUARD):
  """[(returncode, stdout, stderr)] of every process; none is left running."""
  try:
    outs = [p.communicate(timeout=timeout) for p in procs]
  finally:
    for p in procs:
      p.kill()
  return [(p.returncode, out, err) for p, (out, err) in zip(procs, outs)]


@pytest.fixture(scope="module")
def records(tmp_path_factory, text_and_sp):
  """(base dir, records of 8 lanes for any layout, the same text in the earlier 2-core layout,
  model config path)."""
  text, sp = text_and_sp
  base = tmp_path_factory.mktemp("any_layout")
  new, old = str(base / "lanes8"), str(base / "cores2")
  done = wait([write_records(text, sp, new, "--num_lanes=8"),
               write_records(text, sp, old, "--bsz_per_host=8", "--num_core_per_host=2")])
  for code, _, err in done:
    assert code == 0, err[-3000:]
  from data_utils.tokenization import Tokenizer
  cfg = base / "config.json"
  cfg.write_text(json.dumps({"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8,
                             "d_inner": 32, "n_token": Tokenizer(sp, lower=True).vocab_size}))
  return base, new, old, str(cfg)


def raw_steps(record_dir):
  """Each file's records read raw in file order, [file steps, lanes, ...] per feature."""
  params, files, steps = record_format.find_records(record_dir, per_file=True)
  assert params.bsz_per_host == LANES and len(files) >= 3, files
  out = []
  for f, n in zip(files, steps):
    batch = tf.stack(list(tf.data.TFRecordDataset(f)))
    parsed = pipeline.parse(batch, params)
    out.append({k: v.numpy().reshape(n, LANES, *v.shape[1:]) for k, v in parsed.items()})
  return out


def host_steps(record_dir, bsz_per_host, cores, num_hosts, host_id, steps):
  """The first `steps` steps of one host as the batches give them: [steps, bsz_per_host]
  input_ids and a_len, the host's replicas' rows side by side (replica r: [r*b, (r+1)*b))."""
  ds, _, _ = pipeline.pretrain_dataset(
      record_dir, SEQ, REUSE, NP, bsz_per_host, True, cores, expand_records=False,
      host_id=host_id, num_hosts=num_hosts)
  ids, a_len = [], []
  for element in ds.take(steps * cores):
    assert element["input_ids"].shape == (bsz_per_host // cores, SEQ)   # static, per replica
    ids.append(element["input_ids"].numpy())
    a_len.append(element["a_len"].numpy())
  return (np.stack(ids).reshape(steps, bsz_per_host, SEQ),
          np.stack(a_len).reshape(steps, bsz_per_host))


def expected_steps(raw, passes, streams, steps):
  """The hand rule, read independently of data_utils/lanes.py: `passes` lists, per pass over a
  file, each row's (stream, lane); files are read in order (each `len(passes)` times, one pass
  after the other), stream s reading files s, s + streams, ... (repeated). Returns
  ([steps, rows] input_ids, [steps, rows] bool: True where the row starts a new lane)."""
  position = []                # per stream: an endless walk of (file, pass, step in file)
  for s in range(streams):
    walk = []
    while len(walk) < steps:
      for f in range(s, len(raw), streams):
        for g in range(len(passes)):
          walk += [(f, g, t) for t in range(raw[f]["input_ids"].shape[0])]
    position.append(walk[:steps])
  ids, new_lane = [], []
  for n in range(steps):
    g = position[0][n][1]
    ids.append([raw[position[s][n][0]]["input_ids"][position[s][n][2], lane]
                for s, lane in passes[g]])
    new_lane.append([n == 0 or position[s][n][2] == 0 for s, _ in passes[g]])
  return np.stack(ids), np.array(new_lane)


def continues(before_ids, before_a_len, after_ids):
  """[rows] bool: the record `after` continues `before`'s lane: a record's segment A starts
  where its lane's text goes on (A is taken from just after the reuse part), so the next
  record's reuse part begins with it."""
  n = np.minimum(before_a_len, REUSE)
  return np.array([np.array_equal(b[REUSE:REUSE + k], a[:k])
                   for b, a, k in zip(before_ids, after_ids, n)])


def reversed_twin(forward, backward):
  """Whether the reuse parts of `backward`'s records [steps, SEQ], concatenated, are the text of
  `forward`'s read backwards from the lane's end: forward reads t[0:m], its twin t[T-m:T]
  reversed (T, the lane's length, unknown here): they must agree on an overlap of >= 4 blocks."""
  f = forward[:, :REUSE].reshape(-1)
  b = backward[:, :REUSE].reshape(-1)[::-1]
  m = len(f)
  return any(np.array_equal(f[o:], b[:m - o]) for o in range(0, m - 4 * REUSE))


# Hand-derived rows of each layout over 8 lanes (pairs 0..3 forward at lanes 0..3, their twins
# at 4..7): per pass, each row's (stream, lane) for the host's replicas in order; a replica's rows
# are its pairs' forward lanes, then their twins.
LAYOUTS = {
    # name: (bsz_per_host, replicas per host, hosts, host, passes, streams)
    "1 replica x 8": (8, 1, 1, 0, [[(0, k) for k in range(8)]], 1),
    "2 replicas x 4": (8, 2, 1, 0, [[(0, 0), (0, 1), (0, 4), (0, 5),
                                     (0, 2), (0, 3), (0, 6), (0, 7)]], 1),
    "host 0 of 2 x 4": (4, 1, 2, 0, [[(0, 0), (0, 1), (0, 4), (0, 5)]], 1),
    "host 1 of 2 x 4": (4, 1, 2, 1, [[(0, 2), (0, 3), (0, 6), (0, 7)]], 1),
    "batch 4: 2 passes": (4, 1, 1, 0, [[(0, 0), (0, 1), (0, 4), (0, 5)],
                                       [(0, 2), (0, 3), (0, 6), (0, 7)]], 1),
    "batch 16: 2 replicas x 8, 2 streams": (16, 2, 1, 0,
                                            [[(0, k) for k in range(8)]
                                             + [(1, k) for k in range(8)]], 2),
    "host 1 of 2 x 8, 2 streams": (8, 1, 2, 1, [[(1, k) for k in range(8)]], 2),
}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_row_reads_one_lane_in_order(records, name):
  _, new, _, _ = records
  bsz, cores, hosts, host, passes, streams = LAYOUTS[name]
  raw = raw_steps(new)
  file_steps = [r["input_ids"].shape[0] for r in raw]
  # far enough to cross the first file's end in every stream (and, batch 4, both passes)
  steps = max(file_steps[:streams]) * len(passes) + 3
  ids, a_len = host_steps(new, bsz, cores, hosts, host, steps)
  want, new_lane = expected_steps(raw, passes, streams, steps)
  np.testing.assert_array_equal(ids, want)
  # From the tokens alone: every row continues its lane at every step but where the rule says
  # a lane ends (the file's end, or the end of a pass), and there it starts another text.
  joined = np.array([continues(ids[n], a_len[n], ids[n + 1]) for n in range(steps - 1)])
  starts = new_lane[1:]
  assert joined[~starts].all()
  boundaries = np.flatnonzero(starts.any(axis=1))
  assert len(boundaries) >= 1
  for n in boundaries:            # (a row may by chance start with its A's first tokens)
    assert not joined[n][starts[n]].all(), n
  # bi_data: in each replica, row j + b/2 is row j's lane read backwards (over the first lane).
  per = bsz // cores
  first = file_steps[0]
  for r in range(cores):
    stream_steps = file_steps[passes[0][r * per][0]]
    rows = ids[:min(first, stream_steps), r * per:(r + 1) * per]
    for j in range(per // 2):
      assert reversed_twin(rows[:, j], rows[:, j + per // 2]), (name, r, j)
    if per >= 4:     # and not another pair's
      assert not reversed_twin(rows[:, 0], rows[:, 1 + per // 2])


def test_earlier_per_core_records_give_the_same_lanes_in_the_same_rows(records):
  """Records written for --num_core_per_host=2 interleave each core's pairs; read by 1 replica
  of 8 or 2 replicas of 4, every row holds the same text as the same row of the records for any
  layout (the reuse part: the lane's text; segments, targets and orders are drawn in the order
  records are written, so the rest of a moved lane's records differs)."""
  _, new, old, _ = records
  for bsz, cores in ((8, 1), (8, 2), (4, 1)):
    steps = 320                       # across the first file's end (and batch 4's pass)
    a, _ = host_steps(new, bsz, cores, 1, 0, steps)
    b, _ = host_steps(old, bsz, cores, 1, 0, steps)
    np.testing.assert_array_equal(a[:, :, :REUSE], b[:, :, :REUSE])
  raw_new, raw_old = raw_steps(new), raw_steps(old)
  # as written, lanes 2..5 moved: core 0 holds pairs 0, 1 and their twins, core 1 pairs 2, 3 ...
  np.testing.assert_array_equal(raw_old[0]["input_ids"][:, [0, 1, 4, 5, 2, 3, 6, 7], :REUSE],
                                raw_new[0]["input_ids"][:, :, :REUSE])
  assert not np.array_equal(raw_old[0]["input_ids"][:, 2], raw_new[0]["input_ids"][:, 4])


# ---- training ----------------------------------------------------------------------------------

def command(record_dir, cfg, model_dir, *extra):
  return ["--record_dir=" + record_dir, f"--model_config_path={cfg}", f"--model_dir={model_dir}",
          f"--mem_len={2 * REUSE}", "--dropout=0", "--dropatt=0", "--learning_rate=3e-3",
          "--warmup_steps=2", f"--train_steps={STEPS}", "--steps_per_loop=1",
          f"--save_every={STEPS}", "--xla=off", *extra]


def launch(args, mirrored=False, env=None):
  head = [sys.executable, "-c", MIRRORED] if mirrored else [sys.executable, "run_pretrain.py"]
  return warm.popen(head + args, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env or clean_env())


def checkpoint(model_dir):
  """{name: value} of the last checkpoint's variables (model, optimizer slots, step and the
  memory "state" [replicas, layers, rows per replica, mem_len, d_model])."""
  reader = tf.train.load_checkpoint(os.path.join(model_dir, "ckpt"))
  return {name.split("/")[0]: reader.get_tensor(name)
          for name in reader.get_variable_to_shape_map()
          if name.split("/")[0] not in ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter")}


@pytest.fixture(scope="module")
def runs(records):
  """Every run at once (2 cores): {name: (returncode, stdout, stderr, model_dir)}."""
  base, new, old, cfg = records
  workers = [f"127.0.0.1:{p}" for p in free_ports(2)]
  plan = {   # name: (record dir, mirrored over 2 CPUs, extra flags, TF_CONFIG task or None)
      "1x8": (new, False, [], None),
      "2x4": (new, True, [], None),              # --bsz_per_host: the records' 8 lanes
      "worker0": (new, False, ["--bsz_per_host=4"], 0),
      "worker1": (new, False, ["--bsz_per_host=4"], 1),
      "1x4": (new, False, ["--bsz_per_host=4"], None),
      "2x2": (new, True, ["--bsz_per_host=4"], None),
      "old 1x8": (old, False, [], None),
      "old 2x4": (old, True, [], None),
      "1x8 first 2 steps": (new, False, ["--train_steps=2", "--save_every=2"], None),
      "refused 6": (new, False, ["--bsz_per_host=6"], None),
      "refused 2x1": (new, True, ["--bsz_per_host=2"], None),   # 1 row per replica, bi_data
  }
  procs, dirs = [], []
  for name, (record_dir, mirrored, extra, task) in plan.items():
    model_dir = base / ("mw" if task is not None else name.replace(" ", "_"))
    env = None
    if task is not None:
      extra = extra + ["--distribution_strategy=multi_worker_mirrored"]
      env = clean_env(TF_CONFIG=json.dumps({"cluster": {"worker": workers},
                                            "task": {"type": "worker", "index": task}}))
    procs.append(launch(command(record_dir, cfg, model_dir, *extra), mirrored, env))
    dirs.append(str(model_dir))
  return {name: (*done, d) for name, done, d in zip(plan, wait(procs), dirs)}


def trained(runs, name):
  code, out, err, model_dir = runs[name]
  assert code == 0, (name, err[-3000:])
  losses = event_losses(model_dir)
  assert sorted(losses) == list(range(1, STEPS + 1)), (name, losses)
  return np.array([losses[s] for s in sorted(losses)]), checkpoint(model_dir)


def assert_same_run(runs, name, reference, rows):
  """`name` trained as `reference` (one replica): the same losses at every step, the same
  weights and optimizer slots, and every lane's memory where `rows` (per replica of `name`, the
  reference's rows holding the same lanes) says it is."""
  losses, got = trained(runs, name)
  ref_losses, want = trained(runs, reference)
  np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-5, err_msg=name)
  assert sorted(got) == sorted(want) and len(got) > 30
  assert got["step"] == want["step"] == STEPS
  for key in got:
    if key != "state":
      np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5, err_msg=(name, key))
  memory = want["state"][0]                                  # [layers, rows, mem, d]
  assert got["state"].shape[0] == len(rows) and np.abs(memory).max() > 0.1
  np.testing.assert_allclose(got["state"], np.stack([memory[:, r] for r in rows]),
                             rtol=1e-5, atol=1e-5, err_msg=(name, "memory"))


# Which rows of the one-replica run hold replica r's lanes (hand rule): at batch 8, replica
# (or host) 0 reads pairs 0, 1 (forward, then twins), replica 1 pairs 2, 3; the one replica reads
# the four forward lanes, then the four twins. At batch 4 (each pass: two pairs a, b) the one
# replica's rows are fa, fb, ba, bb, replica 0's fa, ba, replica 1's fb, bb.
BATCH_8_ROWS = [[0, 1, 4, 5], [2, 3, 6, 7]]
BATCH_4_ROWS = [[0, 2], [1, 3]]


def test_two_replicas_train_as_one_at_global_batch_8(runs):
  assert "8 lanes: --bsz_per_host=8 (1 host(s) x 8 rows, 2 replica(s) per host)" in runs["2x4"][1]
  assert_same_run(runs, "2x4", "1x8", BATCH_8_ROWS)


def test_two_workers_train_as_one_replica_at_global_batch_8(runs):
  code, out, err, _ = runs["worker1"]
  assert code == 0, err[-3000:]
  assert_same_run(runs, "worker0", "1x8", BATCH_8_ROWS)


def test_global_batch_4_on_one_and_two_replicas(runs):
  assert_same_run(runs, "2x2", "1x4", BATCH_4_ROWS)
  # another global batch trains on other rows: not the batch-8 run
  assert not np.allclose(trained(runs, "1x4")[0], trained(runs, "1x8")[0], rtol=1e-3)


def test_earlier_per_core_records_train_on_one_replica(runs):
  """Records of --num_core_per_host=2 on 1 replica of 8 train as on the 2 replicas they were
  written for. (Not as the records for any layout of the same text: the lanes are the same, in
  the same rows, but segments, targets and factorization orders were drawn in write order.)"""
  assert_same_run(runs, "old 2x4", "old 1x8", BATCH_8_ROWS)
  assert np.all(np.isfinite(trained(runs, "old 1x8")[0]))


@pytest.mark.parametrize("name, why", [
    ("refused 6", "a global batch of 6 from records of 8 lanes"),
    ("refused 2x1", "1 rows per replica with bi_data"),
])
def test_a_layout_the_records_cannot_serve_is_refused_in_one_line(runs, name, why):
  code, out, err, model_dir = runs[name]
  assert code != 0
  assert "Traceback" not in err and "Traceback" not in out
  # stderr: the one line, besides TensorFlow's own start-up log lines (its C++ runtime's)
  ours = [line for line in err.splitlines() if line and not TF_LOG.match(line)]
  assert len(ours) == 1 and ours[0].startswith("run_pretrain.py: "), err[-3000:]
  assert why in ours[0] and lanes.RULE in ours[0], ours
  assert not os.path.exists(model_dir)       # refused before anything was written


def resume(runs, records, into, *extra, mirrored=False):
  """Steps 3-4 from a copy of the 2-step one-replica run's directory: (code, stdout, stderr,
  model_dir)."""
  base, new, _, cfg = records
  code, _, err, first = runs["1x8 first 2 steps"]
  assert code == 0, err[-3000:]
  assert sorted(event_losses(first)) == [1, 2]
  model_dir = str(base / into)
  shutil.copytree(first, model_dir)
  (code, out, err), = wait([launch(command(new, cfg, model_dir, *extra), mirrored=mirrored)])
  return code, out, err, model_dir


def test_a_run_resumes_on_another_layout_with_every_lanes_memory(records, runs):
  """Records serve any layout, so a run may go on on other hardware: 2 steps on 1 replica of 8,
  then steps 3-4 on 2 replicas of 4 give the uninterrupted one-replica run's losses and weights
  (each lane's memory carried to the replica row now reading that lane). Steps 1-2 update with
  the warmup's learning rates, which do not depend on --train_steps."""
  code, out, err, model_dir = resume(runs, records, "resumed_2x4", "--allow_changed_settings",
                                     mirrored=True)   # (--train_steps 2 -> 4)
  assert code == 0, err[-3000:]
  assert "at step 2" in out, out[-2000:]
  # the same global batch on other hardware is not a changed setting (run.json)
  assert "--train_steps 2 -> 4" in out and "--num_core_per_host" not in out, out[-2000:]
  assert "restored as [2, 2, 4, 32, 16]" in out, out[-2000:]
  assert_same_run(dict(runs, resumed=(code, out, err, model_dir)), "resumed", "1x8",
                  BATCH_8_ROWS)


def test_a_resume_without_the_checkpointed_memory_starts_from_empty_memory(records, runs):
  """--nocheckpoint_memory (its help: "a resume then starts from empty memory"), the way to leave
  a checkpoint's memory behind, e.g. for another layout: the run goes on from step 2."""
  code, out, err, model_dir = resume(runs, records, "resumed_no_memory",
                                     "--allow_changed_settings", "--nocheckpoint_memory")
  assert code == 0, err[-3000:]
  assert "at step 2" in out, out[-2000:]
  assert "is not restored: it starts empty" not in out   # it holds none: nothing to say
  assert sorted(event_losses(model_dir)) == [1, 2, 3, 4]
