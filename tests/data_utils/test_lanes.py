"""data_utils/lanes.py: which record of a step each row of any layout reads.

Every expected position below is worked out by hand from the rule in lanes.py's docstring, not
computed by the module. Positions are indices into one step of a file (record k of a file is
lane k % lanes), or into the concatenated steps of the files read side by side. Records written
for any layout (cores=1) with bi_data hold the forward lanes of the pairs first, then their
reversed twins in the same order: 8 lanes = pairs 0..3 at positions 0..3, twins at 4..7.
A replica's rows: its pairs' forward lanes, then the same pairs' twins.
"""

import numpy as np
import pytest

from data_utils import lanes


def rows(layout):
  return layout.rows.tolist()


# ---- records written for any layout (cores=1), bi_data ----------------------------------------

def test_one_replica_of_all_lanes_reads_the_step_as_written():
  layout = lanes.plan(8, 1, num_hosts=1, replicas_per_host=1, rows_per_replica=8)
  assert (layout.lanes, layout.streams, layout.groups) == (8, 1, 1)
  assert rows(layout) == [[[0, 1, 2, 3, 4, 5, 6, 7]]]
  assert layout.host_streams(0) == [0]


def test_two_replicas_each_take_two_pairs_forward_then_backward():
  layout = lanes.plan(8, 1, 1, 2, 4)
  assert (layout.streams, layout.groups) == (1, 1)
  # replica 0: pairs 0, 1 -> forward 0, 1, twins 4, 5; replica 1: pairs 2, 3 -> 2, 3, 6, 7
  assert rows(layout) == [[[0, 1, 4, 5, 2, 3, 6, 7]]]


def test_two_hosts_of_one_replica_split_the_pairs():
  layout = lanes.plan(8, 1, 2, 1, 4)
  assert (layout.streams, layout.groups) == (1, 1)
  assert rows(layout) == [[[0, 1, 4, 5], [2, 3, 6, 7]]]
  assert layout.host_streams(0) == layout.host_streams(1) == [0]


def test_global_batch_4_reads_each_file_twice_in_two_passes():
  layout = lanes.plan(8, 1, 1, 1, 4)
  assert (layout.streams, layout.groups) == (1, 2)
  # pass 0: pairs 0, 1; pass 1: pairs 2, 3
  assert rows(layout) == [[[0, 1, 4, 5]], [[2, 3, 6, 7]]]


def test_passes_with_two_hosts_of_two_rows():
  layout = lanes.plan(8, 1, 2, 1, 2)          # G = 4: 2 passes, one pair per host and pass
  assert rows(layout) == [[[0, 4], [1, 5]], [[2, 6], [3, 7]]]


def test_global_batch_16_reads_two_files_side_by_side():
  # one replica of 16 rows: stream 0's pairs 0..3 then stream 1's (positions 8.. in the
  # concatenated step); then all their twins
  layout = lanes.plan(8, 2, 1, 1, 16)
  assert (layout.streams, layout.groups) == (2, 1)
  assert rows(layout) == [[[0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15]]]
  assert layout.host_streams(0) == [0, 1]
  # two replicas of 8: each one whole stream, as written
  assert rows(lanes.plan(8, 3, 1, 2, 8)) == [[list(range(16))]]
  # two hosts of 8 rows (the release's multi-host layout): host h reads stream h only
  two_hosts = lanes.plan(8, 2, 2, 1, 8)
  assert rows(two_hosts) == [[list(range(8)), list(range(8, 16))]]
  assert (two_hosts.host_streams(0), two_hosts.host_streams(1)) == ([0], [1])


def test_three_streams_split_between_two_replicas():
  # 4 lanes (pairs 0, 1 at 0, 1; twins at 2, 3), G = 12 = 3 streams; 2 replicas of 6 rows take
  # 3 pairs each: replica 0 stream 0's pairs and stream 1's pair 0, replica 1 the rest
  layout = lanes.plan(4, 3, 1, 2, 6)
  assert (layout.streams, layout.groups) == (3, 1)
  assert rows(layout) == [[[0, 1, 4, 2, 3, 6, 5, 8, 9, 7, 10, 11]]]


# ---- records of earlier versions (interleaved per core) ----------------------------------------

def test_file_order_of_cores():
  forward, backward = lanes.file_order(8, cores=1)
  assert (forward.tolist(), backward.tolist()) == ([0, 1, 2, 3], [4, 5, 6, 7])
  # 2 cores of 4: core 0 holds pairs 0, 1 then their twins, core 1 pairs 2, 3 then theirs
  forward, backward = lanes.file_order(8, cores=2)
  assert (forward.tolist(), backward.tolist()) == ([0, 1, 4, 5], [2, 3, 6, 7])
  forward, backward = lanes.file_order(8, cores=4)
  assert (forward.tolist(), backward.tolist()) == ([0, 2, 4, 6], [1, 3, 5, 7])
  order, none = lanes.file_order(6, cores=3, bi_data=False)
  assert order.tolist() == list(range(6)) and none is None


def test_old_records_with_two_cores_serve_other_layouts():
  # 1 replica of 8: pairs 0..3 forward (0, 1, 4, 5), then their twins (2, 3, 6, 7)
  assert rows(lanes.plan(8, 1, 1, 1, 8, cores=2)) == [[[0, 1, 4, 5, 2, 3, 6, 7]]]
  # 2 replicas of 4: what they were written for, each core's block as it is
  assert rows(lanes.plan(8, 1, 1, 2, 4, cores=2)) == [[[0, 1, 2, 3, 4, 5, 6, 7]]]
  # batch 4 in two passes: pass g reads core g's block
  assert rows(lanes.plan(8, 1, 1, 1, 4, cores=2)) == [[[0, 1, 2, 3]], [[4, 5, 6, 7]]]
  # 4 replicas of 2: one pair each
  assert rows(lanes.plan(8, 1, 1, 4, 2, cores=2)) == [[[0, 2, 1, 3, 4, 6, 5, 7]]]


@pytest.mark.parametrize("bi_data", [True, False])
def test_old_layout_read_with_its_own_flags_is_contiguous_per_replica(bi_data):
  """Records written with bsz_per_host=B, num_core_per_host=C and read with the same B, C on one
  host: replica c reads positions [c*B/C, (c+1)*B/C) of each step, what earlier versions read."""
  seen = 0
  for b in (2, 4, 6, 8, 12, 16, 32):
    for c in range(1, b + 1):
      if b % c or (bi_data and (b // c) % 2):
        continue
      layout = lanes.plan(b, 1, 1, c, b // c, bi_data, cores=c)
      assert (layout.streams, layout.groups) == (1, 1)
      per = b // c
      for replica in range(c):
        assert layout.rows[0, 0, replica * per:(replica + 1) * per].tolist() == list(
            range(replica * per, (replica + 1) * per)), (b, c, replica)
      seen += 1
  assert seen >= 15


# ---- without bi_data ---------------------------------------------------------------------------

def test_without_bi_data_replicas_take_consecutive_lanes():
  assert rows(lanes.plan(8, 1, 1, 2, 4, bi_data=False)) == [[[0, 1, 2, 3, 4, 5, 6, 7]]]
  assert rows(lanes.plan(8, 1, 1, 1, 4, bi_data=False)) == [[[0, 1, 2, 3]], [[4, 5, 6, 7]]]
  assert rows(lanes.plan(8, 1, 1, 8, 1, bi_data=False)) == [[list(range(8))]]   # odd: fine
  assert rows(lanes.plan(6, 1, 3, 1, 1, bi_data=False)) == [
      [[0], [1], [2]], [[3], [4], [5]]]                   # G = 3 of 6 lanes: 2 passes
  layout = lanes.plan(4, 3, 1, 3, 4, bi_data=False)        # G = 12: 3 streams, one per replica
  assert (layout.streams, rows(layout)) == (3, [[list(range(12))]])


# ---- refusals ----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, why", [
    ((8, 4, 1, 1, 6), "a global batch of 6 from records of 8 lanes"),        # 6 does not divide 8
    ((8, 4, 1, 2, 3), "3 rows per replica with bi_data"),                     # odd halves
    ((8, 4, 1, 8, 1), "1 rows per replica with bi_data"),                     # G = 8 would do
    ((8, 1, 1, 1, 16), "needs 2 files read side by side"),                  # 1 file, 2 streams
    ((8, 4, 1, 1, 12), "a global batch of 12 from records of 8 lanes"),      # not a multiple
    ((8, 2, 3, 1, 8), "needs 3 files read side by side"),
])
def test_layouts_the_records_cannot_serve_are_refused_with_the_rule(args, why):
  with pytest.raises(ValueError) as e:
    lanes.plan(*args)
  message = str(e.value)
  assert why in message and lanes.RULE in message and "\n" not in message
  lanes_, files, hosts, replicas, per = args
  assert lanes.check(lanes_, files, hosts * replicas * per, per, True) == message


def test_check_accepts_what_the_rule_allows():
  assert lanes.check(8, 1, 8, 8, True) is None
  assert lanes.check(8, 1, 2, 2, True) is None
  assert lanes.check(8, 2, 16, 2, True) is None
  assert lanes.check(8, 1, 6, 3, False) is not None          # 6 does not divide 8
  assert lanes.check(8, 1, 4, 1, False) is None              # odd rows without bi_data
  assert lanes.check(8, 1, 0, 1, False) is not None


# ---- steps of one pass over the files -----------------------------------------------------------

def test_steps_per_epoch():
  file_steps = [10, 7, 5]
  # one stream, one pass: every step of every file
  assert lanes.steps_per_epoch(lanes.plan(8, 3, 1, 1, 8), file_steps) == 22
  # two passes over each file
  assert lanes.steps_per_epoch(lanes.plan(8, 3, 1, 1, 4), file_steps) == 44
  # two streams: files 0, 2 (15 steps) and file 1 (7 steps) side by side: the shorter
  assert lanes.steps_per_epoch(lanes.plan(8, 3, 1, 1, 16), file_steps) == 7
  assert lanes.steps_per_epoch(lanes.plan(8, 3, 1, 1, 16), [3, 7, 5]) == 7   # 8 and 7
