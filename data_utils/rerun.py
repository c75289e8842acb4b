"""What a rerun of the records writer (data_utils/writer.py) keeps, rewrites and removes.

Every record-info names what its shard was made from (record_format.make_source): the byte
range of each input file it read with the sha256 of those bytes, the SentencePiece model's
sha256 and the seed; its file name and params carry the rest. A rerun plans the shards afresh
from the inputs as they are now and then, for its split and parameter set:

  - skips a shard whose info says it was made from exactly this shard's source (the same ranges
    of the same files holding the same bytes, the same model and seed);
  - rewrites every other shard of its task (text changed, a file added or dropped so that the
    plan moved, another model or seed, an info of an earlier version without a source);
  - removes the files of shards whose index the plan no longer has (fewer shards than before),
    recognised as the writer's own by name and by their info (or, for a record file whose info
    was never written, by a size that is a whole number of this set's records) - never another
    file, never another split's or parameter set's records (a directory may hold several).

So after a rerun (of every task) the directory holds, for that split and parameter set, the
same bytes as a run into an empty directory. With --num_tasks > 1 every task plans the same
shards from the same inputs, so each rewrites only its own shards (another machine may be
writing the others) and any task may remove the shards beyond the plan: no task of the same
plan writes them. All tasks must therefore see the same inputs; a task started before an input
changed may rewrite shards the others removed (rerun it).

Hashing is exact and reads the text once more: sha256 runs at about disk speed on a CPU with
SHA instructions (one thread per --num_workers), a small part of the cost of tokenizing and
writing the same text; the hash is taken only when every cheaper field (names, ranges, sizes,
model, seed) agrees. A moved or renamed corpus plans other paths and is rewritten.
"""

import dataclasses
import hashlib
import json

from data_utils import fileio, outputs, record_format


def line_number(path, offset):
  """The line number (from 1) of byte OFFSET of PATH."""
  count, left = 0, offset
  with fileio.open_read_light(path) as f:
    while left > 0:
      block = f.read(min(left, 1 << 22))
      if not block:
        break
      count += block.count(b"\n")
      left -= len(block)
  return count + 1


def _range_sha256(path, start, end):
  """sha256 (hex) of bytes [start, end) of PATH, read in 4 MiB blocks."""
  digest = hashlib.sha256()
  with fileio.open_read_light(path) as f:
    f.seek(start)
    left = end - start
    while left > 0:
      block = f.read(min(left, 1 << 22))
      if not block:
        break
      digest.update(block)
      left -= len(block)
  return digest.hexdigest()


def shard_state(params, output_dir, split, shard, sp_sha, seed):
  """"done" when the shard's record file and info exist, agree, and the info's source is this
  shard's now (same byte ranges holding the same bytes, same SentencePiece model and seed: a
  rerun skips it); "outdated" when an info exists but any of that differs (an earlier version's
  info without a source included); "missing" otherwise. Cheap checks first: the text is hashed
  only when everything else agrees."""
  info_path = fileio.join(output_dir, params.info_name(split, shard.index))
  record_path = fileio.join(output_dir, params.record_name(split, shard.index))
  try:
    info = json.loads(fileio.read_bytes_light(info_path).decode("utf-8"))
  except Exception:     # noqa: BLE001 (missing, unreadable or half-written: write it again)
    return "missing"
  try:
    if info.get("num_batch") != 0 and not (
        info.get("record_file") == fileio.basename(record_path)
        and info.get("bytes") == fileio.size_light(record_path)):
      return "outdated"
    source = record_format.info_source(info)
    if source is None or info.get("params") != dataclasses.asdict(params) or \
        info.get("split") != split or info.get("shard") != shard.index or \
        source.get("sp_model_sha256") != sp_sha or source.get("seed") != seed:
      return "outdated"
    pieces = source.get("pieces")
    if not isinstance(pieces, list) or \
        [(p.get("path"), p.get("start"), p.get("end")) for p in pieces] != \
        [tuple(piece) for piece in shard.pieces]:
      return "outdated"
    for piece in pieces:
      if _range_sha256(piece["path"], piece["start"], piece["end"]) != piece.get("sha256") or \
          ("line" in piece and line_number(piece["path"], piece["start"]) != piece["line"]):
        return "outdated"
  except Exception:     # noqa: BLE001 (a record file gone, an info of another shape: rewrite)
    return "outdated"
  return "done"


def check_output_dir(output_dir):
  """Refuses (ValueError, one line) an --output_dir that cannot hold records: a file, a path
  under a file, another kind's output, a folder of files the writer did not write
  (data_utils/outputs.py). A directory of an earlier version (no marker, every entry a record,
  record-info or temporary of this writer) is accepted: `create` claims it. Writes nothing."""
  return outputs.check_dir(output_dir, "output_dir", outputs.RECORDS,
                           earlier=lambda names: all(record_format.writer_file(n) or
                                                     record_format.manifest_file(n)
                                                     for n in names))


def stale_shards(output_dir, params, split, num_shards):
  """This writer's files of `split` and `params` whose shard index the plan does not have
  (index >= num_shards): a record file named by its info or, without an info, a whole number
  of this set's records (what a killed run leaves); an info of this set and shard; temporaries.
  Files of this set under an earlier version's name (`bsz-N.cores-1`, not `lanes-N`) are stale
  whatever their index: the rerun writes them under today's name."""
  tag, found = params.tag(), {}
  legacy = tag.replace(f".{params.lanes_tag()}.",
                       f".bsz-{params.bsz_per_host}.cores-{params.num_core_per_host}.")
  for name in fileio.listdir_light(output_dir):
    parsed = record_format.writer_file(name)
    if parsed and parsed[1] == split and (
        (parsed[3] == tag and parsed[2] >= num_shards) or (parsed[3] == legacy != tag)):
      found[name] = parsed
  stale = []
  for name, (kind, _, index, name_tag, tmp) in sorted(found.items()):
    path = fileio.join(output_dir, name)
    try:
      if tmp:
        ours = True
      elif kind == "info":
        info = json.loads(fileio.read_bytes_light(path).decode("utf-8"))
        ours = info.get("params") == dataclasses.asdict(params) and info.get("shard") == index
      else:
        info_name = params.info_name(split, index).replace(tag, name_tag)
        if info_name in found:
          info = json.loads(fileio.read_bytes_light(fileio.join(output_dir, info_name)))
          ours = info.get("record_file") == name
        else:
          ours = fileio.size_light(path) % record_format.framed_record_bytes(params) == 0
    except Exception:     # noqa: BLE001 (unreadable: not recognisably ours, kept)
      ours = False
    if ours:
      stale.append(path)
  return stale


