"""Which records each row of a training batch reads: one record set serves many layouts.

The writer cuts the text of a shard into `lanes` (record_format.RecordParams.bsz_per_host, the
release's name): record k of a file belongs to lane k % lanes, and consecutive records of a lane
continue each other. With bi_data the lanes are pairs, a forward lane and the same text read
backwards. Nothing in a file depends on the hardware that trains on it; this module maps the
lanes onto the run's rows (pure numpy, no TensorFlow):

  global batch G = hosts x replicas per host x rows per replica.
  G <= lanes: G must divide lanes; each file is read lanes/G times, pass g giving the rows lanes
      [g*G, (g+1)*G) (bi_data: pairs [g*G/2, (g+1)*G/2)).
  G >  lanes: G must be a multiple of lanes; G/lanes files are read side by side ("streams":
      stream s reads files s, s + G/lanes, ...), so there must be at least that many files.
  Replica q (host h holds replicas h*R .. h*R + R-1) takes the next rows-per-replica lanes of the
  step, with bi_data the next rows/2 pairs: first their forward lanes, then the same lanes'
  backward twins (the model's bi_data positions: first half forward, second half backward).

So a row reads one lane from its first record to its last, and the next lane only when that one
ends (as at a file boundary). Records written by earlier versions for --num_core_per_host=C
interleave the pairs per core (each core's forward lanes, then their twins): `file_order` reads
that order back, so they serve every layout too. Record sets of the release's layout for H hosts
(one file stream per host) are read as H streams: the same rows as before.
"""

import dataclasses

import numpy as np

RULE = ("records of N lanes in F files serve a global batch G = hosts x replicas x rows per "
        "replica when G divides N, or G is a multiple of N with G/N <= F; with bi_data, rows "
        "per replica must be even")


@dataclasses.dataclass(frozen=True)
class Layout:
  """How a run reads a record set.

  streams: files read side by side for one step (their steps concatenated: streams x lanes
    records); groups: passes over each file (each pass gives different lanes); rows:
    int [groups, hosts, replicas_per_host * rows_per_replica], for pass g and host h the
    positions, in the step's concatenated records, of the rows of that host's replicas in
    order (replica r's rows are [r*rows, (r+1)*rows)).
  """
  lanes: int
  streams: int
  groups: int
  rows: np.ndarray

  def host_streams(self, host):
    """The streams whose records host `host` uses (the others it need not read)."""
    return sorted(set((self.rows[:, host] // self.lanes).ravel().tolist()))


def file_order(lanes, cores=1, bi_data=True):
  """Positions of the lanes inside one step of a file.

  Returns (forward [lanes/2], backward [lanes/2]) with bi_data: pair i's forward lane and its
  backward twin; else (order [lanes], None). `cores`: the per-core interleave the writer used
  (1 for records written for any layout).
  """
  if not bi_data:
    return np.arange(lanes), None
  per_core = lanes // cores // 2
  pair = np.arange(lanes // 2)
  forward = (pair // per_core) * 2 * per_core + pair % per_core
  return forward, forward + per_core


def check(lanes, num_files, global_batch, rows_per_replica, bi_data):
  """None when the layout can read the record set, else a one-line reason (with RULE)."""
  def no(why):
    return f"{why}: {RULE}"
  if global_batch < 1 or rows_per_replica < 1:
    return no(f"a global batch of {global_batch} rows")
  if bi_data and rows_per_replica % 2:
    return no(f"{rows_per_replica} rows per replica with bi_data (forward and backward halves)")
  if global_batch <= lanes:
    if lanes % global_batch:
      return no(f"a global batch of {global_batch} from records of {lanes} lanes")
  elif global_batch % lanes:
    return no(f"a global batch of {global_batch} from records of {lanes} lanes")
  elif global_batch // lanes > num_files:
    return no(f"a global batch of {global_batch} from {num_files} file(s) of {lanes} lanes "
              f"needs {global_batch // lanes} files read side by side (write smaller shards: "
              "create_pretrain_data.py --shard_mb)")
  return None


def plan(lanes, num_files, num_hosts, replicas_per_host, rows_per_replica, bi_data=True,
         cores=1):
  """The Layout of a run of `num_hosts` x `replicas_per_host` replicas of `rows_per_replica`
  rows over records of `lanes` lanes in `num_files` files written with the per-core interleave
  `cores`; ValueError (one line, check's) when they cannot serve it."""
  global_batch = num_hosts * replicas_per_host * rows_per_replica
  why = check(lanes, num_files, global_batch, rows_per_replica, bi_data)
  if why:
    raise ValueError(why)
  streams = max(1, global_batch // lanes)
  groups = max(1, lanes // global_batch)
  forward, backward = file_order(lanes, cores, bi_data)
  unit = len(forward)                        # pairs (bi_data) or lanes of one file step
  per_replica = rows_per_replica // 2 if bi_data else rows_per_replica
  rows = []
  for g in range(groups):
    # the step's units in order: stream s's units, or pass g's share of one file's
    units = (np.arange(streams * unit) if groups == 1
             else g * (global_batch // (2 if bi_data else 1)) + np.arange(
                 global_batch // (2 if bi_data else 1)))
    stream, k = units // unit, units % unit
    fwd = stream * lanes + forward[k]
    bwd = stream * lanes + backward[k] if bi_data else None
    replica_rows = []
    for q in range(num_hosts * replicas_per_host):
      part = slice(q * per_replica, (q + 1) * per_replica)
      replica_rows.append(np.concatenate([fwd[part], bwd[part]]) if bi_data else fwd[part])
    rows.append(np.stack(replica_rows).reshape(num_hosts, -1))
  return Layout(lanes=lanes, streams=streams, groups=groups, rows=np.stack(rows))


def steps_per_epoch(layout, file_steps):
  """Steps one pass over the files gives (`file_steps`: each file's steps of `lanes` records, in
  file order): with streams, the shortest stream's; with passes, every file once per pass."""
  if layout.streams > 1:
    return min(sum(file_steps[s::layout.streams]) for s in range(layout.streams))
  return sum(file_steps) * layout.groups
