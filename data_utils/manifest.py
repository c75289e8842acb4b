"""The manifest of a record set: one JSON file naming every shard of a split and parameter set.

Written by the records writer (data_utils/writer.py, and data_utils/beam_writer.py on Apache
Beam) LAST: only when every planned shard of the split is complete, atomically (temporary name,
rename), so a manifest never describes a shard that is not there. A run that is about to rewrite
or remove shards removes the manifest first; a run (or, with --num_tasks, a task) that finds
shards still missing leaves none; a rerun rewrites it only when its bytes would change.

Name: `manifest-SPLIT.TAG.json` (TAG: RecordParams.tag(), as in the record and info names), so
that the several record sets a directory may hold (data_utils/rerun.py) each have their own. It
is neither a record file nor a record-info: record_format.writer_file does not match it, so
rerun.stale_shards never removes it and record_format.info_paths never reads it.

Contents (sorted keys, no timestamps, nothing about the machine or the run: the same shards
give the same bytes, whoever wrote them, local processes or any Beam runner):

  manifest_version  1
  split, tag        as in the file names
  params            the RecordParams (as in every record-info)
  sp_model_sha256   the SentencePiece model's sha256; seed: the writer's --seed
  counts            shards (planned), shards_with_records, records, steps (batches of all lanes,
                    summed over the shards), tokens (of the input text), input_bytes
  shards            per shard, in order: shard, record_file (null: too short for one batch),
                    bytes and sha256 of the record file, info_file and info_sha256 (the sha256 of
                    the record-info file's bytes), num_batch, num_records, tokens, input_bytes,
                    pieces (the source byte ranges with their sha256, as the record-info's
                    source has them: {path, start, end, sha256[, line]})
"""

import concurrent.futures
import dataclasses
import hashlib
import json

from data_utils import fileio, rerun

VERSION = 1
PREFIX = "manifest-"


def manifest_name(params, split):
  """`manifest-SPLIT.TAG.json`."""
  return f"{PREFIX}{split}.{params.tag()}.json"


def manifest_path(output_dir, params, split):
  return fileio.join(output_dir, manifest_name(params, split))


def remove(output_dir, params, split):
  """Removes the manifest of `split` and `params` if there is one (call before any shard of the
  set is rewritten or removed). Returns whether one was removed."""
  path = manifest_path(output_dir, params, split)
  if fileio.is_url(path) and not fileio.exists(path):
    return False
  try:
    fileio.remove_light(path)
  except FileNotFoundError:
    return False
  return True


def build(params, split, infos):
  """The manifest dict from the record-infos of every planned shard of the set.

  INFOS: [(info dict, the info file's bytes)] for shards 0..N-1, in order. Raises ValueError
  when they are not exactly those shards of this split and parameter set, or disagree on the
  SentencePiece model or seed."""
  shards, models, seeds = [], set(), set()
  for index, (info, raw) in enumerate(infos):
    if info.get("shard") != index or info.get("split") != split or \
        info.get("params") != dataclasses.asdict(params):
      raise ValueError(f"{params.info_name(split, index)}: not the record-info of shard "
                       f"{index} of this record set")
    source = info.get("source") or {}
    models.add(source.get("sp_model_sha256"))
    seeds.add(source.get("seed"))
    shards.append({
        "shard": index, "record_file": info.get("record_file"), "bytes": info.get("bytes"),
        "sha256": info.get("sha256"), "info_file": params.info_name(split, index),
        "info_sha256": hashlib.sha256(raw).hexdigest(), "num_batch": info.get("num_batch"),
        "num_records": info.get("num_records"), "tokens": info.get("tokens"),
        "input_bytes": info.get("input_bytes"), "pieces": source.get("pieces")})
  if len(models) > 1 or len(seeds) > 1:
    raise ValueError(f"the shards of {split} were made with different SentencePiece models or "
                     "seeds")
  return {
      "manifest_version": VERSION, "split": split, "tag": params.tag(),
      "params": dataclasses.asdict(params),
      "sp_model_sha256": models.pop() if models else None,
      "seed": seeds.pop() if seeds else None,
      "counts": {
          "shards": len(shards),
          "shards_with_records": sum(1 for s in shards if s["num_batch"]),
          "records": sum(s["num_records"] or 0 for s in shards),
          "steps": sum(s["num_batch"] or 0 for s in shards),
          "tokens": sum(s["tokens"] or 0 for s in shards),
          "input_bytes": sum(s["input_bytes"] or 0 for s in shards)},
      "shards": shards}


def text(manifest):
  """The manifest's bytes: JSON, sorted keys, one space indent, a final newline."""
  return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")


def read_infos(output_dir, params, split, num_shards):
  """[(info dict, info bytes)] of shards 0..num_shards-1, each checked against the record file
  it names (present, of the size the info says). Raises ValueError (one line) otherwise."""
  infos = []
  for index in range(num_shards):
    path = fileio.join(output_dir, params.info_name(split, index))
    raw = fileio.read_bytes_light(path)
    info = json.loads(raw.decode("utf-8"))
    if info.get("num_batch"):
      record = fileio.join(output_dir, info.get("record_file") or "")
      if fileio.size_light(record) != info.get("bytes"):
        raise ValueError(f"{record}: not the size its record-info says")
    infos.append((info, raw))
  return infos


def write(output_dir, params, split, num_shards):
  """Writes the manifest of shards 0..num_shards-1 (every one complete: the caller checked) unless
  the same bytes are there already. Returns (path, "written" or "unchanged", manifest dict)."""
  manifest = build(params, split, read_infos(output_dir, params, split, num_shards))
  data = text(manifest)
  path = manifest_path(output_dir, params, split)
  try:
    if fileio.read_bytes_light(path) == data:
      return path, "unchanged", manifest
  except (OSError, ValueError):
    pass
  fileio.write_atomic_light(path, data)
  return path, "written", manifest


def read(output_dir, params, split):
  """The manifest dict of `split` and `params` in OUTPUT_DIR (FileNotFoundError if none)."""
  return json.loads(fileio.read_bytes_light(manifest_path(output_dir, params, split)))


def write_when_complete(plan, done, num_workers=1, progress=print):
  """Writes the manifest of PLAN's record set (data_utils/writer.py's Plan) when every planned
  shard is complete, else removes any manifest of the set (so none describes a shard that is
  not there). DONE: the indices the caller knows complete (its own shards, just written or
  found complete); the others (other tasks') must be rerun.shard_state "done". Returns the
  manifest dict, or None while shards are missing."""
  params, out, split = plan.params, plan.output_dir, plan.split
  others = [s for s in plan.shards if s.index not in done]
  with concurrent.futures.ThreadPoolExecutor(num_workers) as pool:   # hashlib frees the GIL
    states = list(pool.map(
        lambda s: rerun.shard_state(params, out, split, s, plan.sp_sha, plan.seed), others))
  missing = len(states) - states.count("done")
  if missing:
    remove(out, params, split)
    progress(f"{missing} of {len(plan.shards)} shards not complete (another task's?): no "
             f"manifest yet; the run that completes the set writes it")
    return None
  path, what, manifest = write(out, params, split, len(plan.shards))
  progress(f"manifest {what}: {path}")
  return manifest
