"""THE pretraining record format: features, file names, record-info, checks.

Writer (data_utils/writer.py) and reader (data_utils/pipeline.py) both use this
module and nothing else to agree on what a record holds.

One record = one example of one batch lane, seq_len positions, laid out
`[reuse part (reuse_len)] + [A, <sep>, B, <sep>, <cls>]`. Every feature is a
fixed-size little-endian byte string, so every record of a run has the same
size (and the writer can build them as one array):

  input_ids  uint16 [seq_len] (uint32 when vocab > 65535)   token ids
  perm       uint8  [seq_len] (uint16 when perm_size > 256) factorization order:
             the rank of each position inside its perm_size block; blocks are
             ordered, and the reuse half and the new half are ordered apart
  is_masked  uint8  [seq_len / 8] bit-packed (little bit order): the
             positions chosen for prediction (never <sep> or <cls>)
  meta       uint16 [2]: a_len (tokens of segment A), label (1 = B is the true
             continuation, 0 = a random span)

Segment ids follow from a_len: reuse + A + first <sep> = 0, B + second
<sep> = 1, <cls> = 2. Targets are the input tokens at the masked positions.
Records are written step by step: record k belongs to lane k % bsz_per_host (the
lanes, named after the release's flag), and consecutive records of a lane continue each other
(memory needs that). The lanes are chosen for the data, not the hardware: the reader assembles
any layout they can serve (data_utils/lanes.py). Records of earlier versions written for
num_core_per_host > 1 interleave their bi_data pairs per core and keep their `bsz-N.cores-C`
file names; they are read the same way.
"""

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import re

import numpy as np

from data_utils import fileio, tfrecord

FEATURES = ("input_ids", "perm", "is_masked", "meta")
SPAN_MODES = ("word", "piece", "single")
RECORD_SUFFIX = ".tfrecord"
INFO_PREFIX = "record_info-"


@dataclasses.dataclass(frozen=True)
class RecordParams:
  """Everything about records that training must agree with."""
  seq_len: int = 512
  reuse_len: int = 256
  perm_size: int = 256
  num_predict: int = 85
  bsz_per_host: int = 32          # lanes: record k of a file is lane k % bsz_per_host
  num_core_per_host: int = 1      # 1; earlier versions interleaved the lanes per core
  bi_data: bool = True
  mask_alpha: int = 6
  mask_beta: int = 1
  span_mode: str = "word"     # "word" (whole words), "piece" (the release's bug), "single"
  uncased: bool = False
  use_eod: bool = True
  vocab_size: int = 32000

  def validate(self):
    """Raises ValueError (one line, naming the flag) for impossible settings."""
    def need(cond, message):
      if not cond:
        raise ValueError(message)
    need(self.seq_len % 8 == 0, f"--seq_len={self.seq_len} must be a multiple of 8")
    need(0 < self.reuse_len < self.seq_len - 3,
         f"--reuse_len={self.reuse_len} must be in [1, seq_len - 4 = {self.seq_len - 4}]")
    new_len = self.seq_len - self.reuse_len
    need(self.perm_size > 0 and self.reuse_len % self.perm_size == 0
         and new_len % self.perm_size == 0,
         f"--perm_size={self.perm_size} must divide reuse_len={self.reuse_len} and "
         f"seq_len - reuse_len={new_len}")
    n0, n1 = self.num_predict_split()
    need(self.num_predict > 0, f"--num_predict={self.num_predict} must be positive")
    need(n0 <= self.reuse_len and n1 <= new_len - 3,
         f"--num_predict={self.num_predict} cannot fit: {n0} targets in the reuse part of "
         f"{self.reuse_len} tokens and {n1} in the new part of {new_len - 3} tokens "
         f"(<sep>, <sep>, <cls> are never targets)")
    need(self.bsz_per_host >= 1, f"--num_lanes={self.bsz_per_host} must be at least 1")
    need(self.num_core_per_host >= 1,
         f"--num_core_per_host={self.num_core_per_host} must be at least 1")
    need(self.bsz_per_host % self.num_core_per_host == 0,
         f"--num_lanes={self.bsz_per_host} must be a multiple of "
         f"--num_core_per_host={self.num_core_per_host}")
    need(not self.bi_data or self.bsz_per_host % (2 * self.num_core_per_host) == 0,
         f"--bi_data needs --num_lanes={self.bsz_per_host} to be " + (
             "even (forward and backward pairs)" if self.num_core_per_host == 1 else
             f"a multiple of 2 x --num_core_per_host = {2 * self.num_core_per_host}"))
    need(self.mask_alpha > 0 and self.mask_beta > 0, "--mask_alpha and --mask_beta must be > 0")
    need(self.span_mode in SPAN_MODES, f"--span_mode must be one of {SPAN_MODES}")
    return self

  def num_predict_split(self):
    """(targets in the reuse half, targets in the new half), as the release."""
    return self.num_predict - self.num_predict // 2, self.num_predict // 2

  # ---- byte layout -------------------------------------------------------
  def id_dtype(self):
    return np.dtype("<u2") if self.vocab_size <= 65536 else np.dtype("<u4")

  def perm_dtype(self):
    return np.dtype("u1") if self.perm_size <= 256 else np.dtype("<u2")

  def feature_bytes(self):
    """{feature: byte length}, in the order records store them."""
    return {"input_ids": self.seq_len * self.id_dtype().itemsize,
            "perm": self.seq_len * self.perm_dtype().itemsize,
            "is_masked": self.seq_len // 8,
            "meta": 4}

  # ---- names -------------------------------------------------------------
  def tag(self):
    """The part of every file name that carries the parameters."""
    return (f"seqlen-{self.seq_len}.reuse-{self.reuse_len}.perm-{self.perm_size}."
            f"np-{self.num_predict}.{self.lanes_tag()}."
            f"{'bi' if self.bi_data else 'uni'}.alpha-{self.mask_alpha}.beta-{self.mask_beta}."
            f"{self.span_mode}.{'uncased' if self.uncased else 'cased'}."
            f"{'eod' if self.use_eod else 'noeod'}.vocab-{self.vocab_size}")

  def lanes_tag(self):
    """`lanes-N`; records interleaved per core by earlier versions: `bsz-N.cores-C`."""
    if self.num_core_per_host == 1:
      return f"lanes-{self.bsz_per_host}"
    return f"bsz-{self.bsz_per_host}.cores-{self.num_core_per_host}"

  def record_name(self, split, shard):
    return f"{split}-{shard:05d}.{self.tag()}{RECORD_SUFFIX}"

  def info_name(self, split, shard):
    return f"{INFO_PREFIX}{split}-{shard:05d}.{self.tag()}.json"


def sha256(path, chunk=8 << 20):
  """Hex SHA-256 of a file (local, or any tf.io.gfile URL)."""
  h = hashlib.sha256()
  with fileio.open_read_light(path) as f:
    for block in iter(lambda: f.read(chunk), b""):
      h.update(block)
  return h.hexdigest()


# A writer's own files, by name: `record_name`, `info_name`, either with a `.tmp-` suffix (an
# unfinished write). Groups: info prefix or not, split, shard index, tag.
_TAG = (r"seqlen-\d+\.reuse-\d+\.perm-\d+\.np-\d+\.(?:lanes-\d+|bsz-\d+\.cores-\d+)\."
        r"(?:bi|uni)\.alpha-\d+\.beta-\d+\.(?:word|piece|single)\.(?:cased|uncased)\."
        r"(?:eod|noeod)\.vocab-\d+")
_WRITER_FILE = re.compile(rf"(?P<info>{INFO_PREFIX})?(?P<split>train|valid|test)-(?P<shard>\d{{5,}})"
                          rf"\.(?P<tag>{_TAG})(?P<ext>\.json|{re.escape(RECORD_SUFFIX)})"
                          rf"(?P<tmp>\.tmp-[^/]*)?")


_MANIFEST_FILE = re.compile(rf"manifest-(?P<split>train|valid|test)\.(?P<tag>{_TAG})\.json"
                            rf"(?P<tmp>\.tmp-[^/]*)?")


def manifest_file(name):
  """(split, tag, is_tmp) when NAME is a record set's manifest (data_utils/manifest.py) or its
  temporary, else None."""
  m = _MANIFEST_FILE.fullmatch(name)
  return (m["split"], m["tag"], m["tmp"] is not None) if m else None


def writer_file(name):
  """(kind "info" / "record", split, shard, tag, is_tmp) when NAME is one of the writer's own
  file names (a record file, a record-info, or either's temporary), else None."""
  m = _WRITER_FILE.fullmatch(name)
  if m is None or bool(m["info"]) != (m["ext"] == ".json"):
    return None
  return ("info" if m["info"] else "record", m["split"], int(m["shard"]), m["tag"],
          m["tmp"] is not None)


def make_source(pieces, sp_model_sha256, seed):
  """What a shard was made from, besides its params and split (both in the info already): the
  byte ranges of text it read ({"path", "start", "end", "sha256" of those bytes, and "line", the
  line number of "start", when the range holds undecodable lines: their messages name it}), the
  SentencePiece model's sha256 and the seed. Equal sources, equal records and infos."""
  return {"pieces": pieces, "sp_model_sha256": sp_model_sha256, "seed": seed}


def info_source(info):
  """A record-info's `make_source` dict; None in infos of earlier versions (made from unknown
  inputs: a rerun rewrites them)."""
  source = info.get("source") if isinstance(info, dict) else None
  return source if isinstance(source, dict) else None


def make_info(params, split, shard, record_name, data, num_batch, extra, source=None):
  """The record-info of one shard whose record file (named `record_name`) holds `data` (the
  file's bytes; None when the shard was too short for one batch and has no file); `source`:
  `make_source`'s dict."""
  return {"params": dataclasses.asdict(params), "split": split, "shard": shard,
          "record_file": record_name or None, "num_batch": num_batch,
          "num_records": num_batch * params.bsz_per_host,
          "bytes": None if data is None else len(data),
          "sha256": None if data is None else hashlib.sha256(data).hexdigest(), **extra,
          **({"source": source} if source is not None else {})}


def info_text(info):
  return json.dumps(info, indent=1, sort_keys=True)


def read_info(path):
  """A record-info as written (no checks: see load_info); local path or URL."""
  return json.loads(fileio.read_text(path))


# Parameters of the data that training must agree with (its own flags); the lanes
# (bsz_per_host) and their earlier per-core interleave only say how the reader assembles rows
# (data_utils/lanes.py), and the rest (alpha, beta, span mode, eod, case) how targets were drawn.
TRAINING_KEYS = ("seq_len", "reuse_len", "num_predict", "bi_data", "vocab_size")

# ---- training side: finding and checking records ----------------------------------------------
# Every path here may be gs://...: file access goes through data_utils/fileio.py (TensorFlow is
# imported on first use, so that the writer above stays free of it).

VERIFY_MODES = ("auto", "sha256", "size")
AUTO_SHA256_BYTES = 4 << 30      # --verify_records=auto hashes totals up to this (~3 s at 1.4 GB/s)
REWRITE = "delete it and rerun data_utils/create_pretrain_data.py to rewrite it"
_PARAM_TYPES = {f.name: type(f.default) for f in dataclasses.fields(RecordParams)}


def framed_record_bytes(params):
  """Bytes of one record in a TFRecord file: length, its CRC, the Example, its CRC."""
  return 16 + tfrecord.ExampleLayout(params.feature_bytes()).record_bytes


def load_info(path):
  """Reads and checks one record-info JSON: returns (info dict, RecordParams).

  Raises ValueError with one line naming `path` when the JSON is unreadable, truncated, or
  inconsistent with itself (params missing or of the wrong type, counts that do not add up).
  """
  import tensorflow as tf
  try:
    info = json.loads(fileio.read_bytes(path).decode("utf-8"))
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: record-info is not valid JSON ({e.msg} at line {e.lineno} "
                     f"column {e.colno}; truncated?); {REWRITE}") from None
  except UnicodeDecodeError:
    raise ValueError(f"{path}: record-info is not UTF-8 text; {REWRITE}") from None
  except (tf.errors.OpError, OSError) as e:
    message = e.message if isinstance(e, tf.errors.OpError) else str(e)
    raise ValueError(f"{path}: record-info unreadable ({message.splitlines()[0]})") from None

  def bad(what):
    raise ValueError(f"{path}: record-info {what}; {REWRITE}")

  if not isinstance(info, dict) or not isinstance(info.get("params"), dict):
    bad("has no \"params\" object")
  raw = info["params"]
  missing = [k for k in _PARAM_TYPES if k not in raw]
  unknown = sorted(set(raw) - set(_PARAM_TYPES))
  if missing or unknown:
    bad("params " + "; ".join(part for part in (
        missing and f"lack {', '.join(missing)}", unknown and f"have unknown {', '.join(unknown)}")
        if part))
  wrong = [f"{k}={v!r}" for k, v in raw.items()
           if type(v) is not _PARAM_TYPES[k]]     # bool is not int, int is not float
  if wrong:
    bad(f"params of the wrong type: {', '.join(wrong)}")
  params = RecordParams(**raw)
  try:
    params.validate()
  except ValueError as e:
    bad(f"params impossible ({e})")
  num_batch = info.get("num_batch")
  if type(num_batch) is not int or num_batch < 0:
    bad(f"num_batch={num_batch!r} is not a count")
  if num_batch == 0:
    return info, params                          # a shard too short for one batch: no file
  record_file, sha = info.get("record_file"), info.get("sha256")
  if not isinstance(record_file, str) or not record_file or "/" in record_file:
    bad(f"record_file={record_file!r} is not a file name")
  if info.get("num_records") != num_batch * params.bsz_per_host:
    bad(f"num_records={info.get('num_records')!r} is not num_batch x bsz_per_host = "
        f"{num_batch} x {params.bsz_per_host}")
  expected = num_batch * params.bsz_per_host * framed_record_bytes(params)
  if info.get("bytes") != expected:
    bad(f"bytes={info.get('bytes')!r} but {info['num_records']} records of "
        f"{framed_record_bytes(params)} bytes make {expected}")
  if not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha)):
    bad(f"sha256={sha!r} is not a SHA-256 digest")
  return info, params


def verify_records(files_and_infos, mode="auto"):
  """Checks record files against their record-info (see find_records for `mode`).

  Raises FileNotFoundError / ValueError with one line naming the file.
  """
  if mode not in VERIFY_MODES:
    raise ValueError(f"--verify_records={mode}: expected one of {', '.join(VERIFY_MODES)}")
  total = 0
  for path, info_path, info in files_and_infos:
    if not fileio.exists(path):
      raise FileNotFoundError(f"{path}: listed in {fileio.basename(info_path)} but not found; "
                              "rerun data_utils/create_pretrain_data.py to rewrite it")
    size = fileio.size(path)
    if size != info["bytes"]:
      raise ValueError(f"{path}: {size:,} bytes but {fileio.basename(info_path)} says "
                       f"{info['bytes']:,} ({'truncated' if size < info['bytes'] else 'altered'}); "
                       f"{REWRITE}")
    total += size
  if mode == "size" or (mode == "auto" and total > AUTO_SHA256_BYTES):
    return
  jobs = [(path, info_path, info["sha256"]) for path, info_path, info in files_and_infos]
  with concurrent.futures.ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
    digests = list(pool.map(lambda job: sha256(job[0]), jobs))   # hashlib frees the GIL
  for (path, info_path, want), got in zip(jobs, digests):
    if got != want:
      raise ValueError(f"{path}: sha256 {got[:12]}... differs from its record-info's "
                       f"({want[:12]}...): the file (or its info) is corrupted; {REWRITE}")


def info_paths(record_dir, split="train"):
  """The record-info files of `split` in `record_dir`; FileNotFoundError (one line) if none."""
  infos = fileio.glob(fileio.join(record_dir, f"{INFO_PREFIX}{split}-*.json"))
  if not infos:
    raise FileNotFoundError(
        f"{record_dir}: no {INFO_PREFIX}{split}-*.json (was data_utils/create_pretrain_data.py "
        f"run with --output_dir={record_dir} --split={split}?)")
  return infos


def _none_matching(record_dir, num_infos, path, diff):
  return (f"{record_dir}: {num_infos} record files, none matching: "
          f"{fileio.basename(path)} has {', '.join(diff)}")


def find_records(record_dir, split="train", verify="size", per_file=False, **expected):
  """Record files and infos in `record_dir` whose params match `expected`.

  Every record-info of the split is read and checked (load_info), every matching shard's file
  must exist with the size its info says (a truncated shard never trains a partial epoch), and
  a record file of the matching parameters without its info is an error. `verify`: "size"
  (that only), "sha256" (also hash every file against its info: catches any altered byte, at
  ~1.4 GB/s per core), "auto" (sha256 when the files total at most AUTO_SHA256_BYTES).
  Returns (params, [record paths in shard order], total steps, or with `per_file` each
  file's steps). Raises FileNotFoundError or ValueError with
  one line saying what is there and what differs.
  """
  infos = info_paths(record_dir, split)
  matching, first_diff = [], None
  for path in infos:
    info, params = load_info(path)
    diff = [f"{k}={getattr(params, k)!r} (asked {v!r})" for k, v in expected.items()
            if getattr(params, k) != v]
    if diff:
      first_diff = first_diff or (path, diff)
    elif info["num_batch"]:           # shards too short for one batch have no file
      matching.append((path, info, params))
  if not matching and first_diff is None:
    raise ValueError(f"{record_dir}: every shard was too short for one batch")
  if not matching:
    raise ValueError(_none_matching(record_dir, len(infos), *first_diff))
  if len({p for _, _, p in matching}) > 1:
    raise ValueError(f"{record_dir}: matching record files disagree on parameters; "
                     "keep one record set per directory")
  params = matching[0][2]
  files = [fileio.join(record_dir, info["record_file"]) for _, info, _ in matching]
  verify_records([(f, p, info) for f, (p, info, _) in zip(files, matching)], verify)
  listed = {fileio.basename(f) for f in files}
  for path in fileio.glob(fileio.join(record_dir, f"{split}-*.{params.tag()}{RECORD_SUFFIX}")):
    if fileio.basename(path) not in listed:   # its shard would silently not be trained on
      raise ValueError(f"{path}: record file without a record-info (an interrupted writer?); "
                       f"{REWRITE}")
  steps = [info["num_batch"] for _, info, _ in matching]
  return params, files, steps if per_file else sum(steps)


# ---- training side: parameters not given default to the records' ------------------------------
# What chooses each training parameter in run_pretrain.py (vocab_size: the model config).
_CHOSEN_BY = {"seq_len": "--seq_len", "reuse_len": "--reuse_len", "num_predict": "--num_predict",
              "bi_data": "--bi_data/--nobi_data", "vocab_size": "the model config's vocabulary"}


@dataclasses.dataclass(frozen=True)
class ResolvedParams:
  """resolve_training_params' answer: `values` {key: value} for every TRAINING_KEYS key,
  `from_records` the keys taken from the records (the rest were given), `info_files` the
  record-info files of the record set they come from."""
  values: dict
  from_records: tuple
  info_files: tuple
  params: RecordParams = None     # the chosen record set's

  def summary(self):
    """One line naming the values taken from the records ("" when every value was given)."""
    if not self.from_records:
      return ""
    taken = " ".join(f"{k}={self.values[k]}" for k in self.from_records)
    more = f" and {len(self.info_files) - 1} more" if len(self.info_files) > 1 else ""
    return f"records: {taken} (from {fileio.basename(self.info_files[0])}{more})"


def _alternatives(values):
  values = [str(v) for v in sorted(values)]
  return ", ".join(values[:-1]) + " or " + values[-1]


def resolve_training_params(record_dir, split="train", **given):
  """Every training parameter (TRAINING_KEYS): the given ones, and the records' for the rest.

  `given`: {key: value} fixed by the caller (flags passed on the command line; None = not
  given). A record set is the shards of `split` in `record_dir` that share their RecordParams;
  the given values select the sets that have them (sets with data before sets whose every shard
  was too short for one batch), and each key not given takes the value of the one set left.
  The shards themselves are checked later, by find_records. Returns a ResolvedParams. Raises
  FileNotFoundError (no record-info) or ValueError, one line: a broken record-info (load_info);
  no set has the given values (what differs in the nearest set, as find_records says it);
  several sets are left (the values that differ and the flags that choose).
  """
  unknown = sorted(set(given) - set(TRAINING_KEYS))
  if unknown:
    raise TypeError(f"resolve_training_params: not a training parameter: {', '.join(unknown)}")
  given = {k: given[k] for k in TRAINING_KEYS if given.get(k) is not None}
  infos = info_paths(record_dir, split)
  loaded = [load_info(infos[0])]
  with concurrent.futures.ThreadPoolExecutor(min(16, len(infos))) as pool:   # gs://: latency
    loaded += pool.map(load_info, infos[1:])
  sets, with_data = {}, set()                     # {RecordParams: [its infos]}, in name order
  for path, (info, params) in zip(infos, loaded):
    sets.setdefault(params, []).append(path)
    if info["num_batch"]:
      with_data.add(params)

  def diff(params):
    return [f"{k}={getattr(params, k)!r} (asked {v!r})" for k, v in given.items()
            if getattr(params, k) != v]

  matching = [p for p in sets if not diff(p)]
  if not matching:
    nearest = min(sets, key=lambda p: len(diff(p)))
    raise ValueError(_none_matching(record_dir, len(infos), sets[nearest][0], diff(nearest)))
  matching = [p for p in matching if p in with_data] or matching
  if len(matching) > 1:
    differ = {f.name: {getattr(p, f.name) for p in matching}
              for f in dataclasses.fields(RecordParams)}
    differ = {k: v for k, v in differ.items() if len(v) > 1}
    choose = [_CHOSEN_BY[k] for k in differ if k in _CHOSEN_BY]
    fit = f" with {' '.join(f'{k}={v}' for k, v in given.items())}" if given else ""
    raise ValueError(
        f"{record_dir}: {len(matching)} record sets{fit}, differing in "
        + ", ".join(f"{k} ({_alternatives(v)})" for k, v in differ.items()) + "; "
        + (f"pass {' and '.join(choose)} to choose one" if choose else
           "no training flag chooses between them: keep one record set per directory"))
  params = matching[0]
  return ResolvedParams(values={k: given.get(k, getattr(params, k)) for k in TRAINING_KEYS},
                        from_records=tuple(k for k in TRAINING_KEYS if k not in given),
                        info_files=tuple(sets[params]), params=params)


_DATA_LOSS = re.compile(r"(corrupted|truncated) record at (\d+)")


def explain_data_loss(record_dir, split, message):
  """tf.data's DataLossError names a byte offset, not the file ("corrupted record at N").

  Finds the record file(s) of `record_dir` whose record around byte N fails its length or
  data CRC32C (one record read per file) and returns a one-line message naming the file;
  None when `message` is not a record error.
  """
  match = _DATA_LOSS.search(message)
  if not match:
    return None
  offset = int(match.group(2))
  candidates = []
  for info_path in fileio.glob(fileio.join(record_dir, f"{INFO_PREFIX}{split}-*.json")):
    try:
      info, params = load_info(info_path)
    except ValueError:
      continue
    if info["num_batch"]:
      candidates.append((fileio.join(record_dir, info["record_file"]), params))
  bad, rows = [], {}              # rows: {framed size: [(path, start, raw bytes)]}
  for path, params in candidates:
    size = framed_record_bytes(params)
    start = offset // size * size
    try:
      with fileio.gfile().GFile(path, "rb") as f:     # (seekable)
        f.seek(start)
        raw = f.read(size)
    except Exception:           # noqa: BLE001 (a file that cannot be read is a suspect too)
      bad.append((path, start, size))
      continue
    if len(raw) == size:
      rows.setdefault(size, []).append((path, start, raw))
    elif raw:                   # (empty: this file is shorter than the offset)
      bad.append((path, start, size))
  for size, group in rows.items():   # one lockstep CRC pass per record size
    block = np.frombuffer(b"".join(raw for _, _, raw in group), np.uint8).reshape(-1, size)
    ok = tfrecord.intact(block)
    bad.extend((path, start, size) for (path, start, _), good in zip(group, ok) if not good)
  order = {path: k for k, (path, _) in enumerate(candidates)}
  bad.sort(key=lambda item: order[item[0]])
  if not bad:
    return (f"{record_dir}: a {split} record file has a corrupted record at byte {offset} "
            f"(TensorFlow does not say which, and none of the {len(candidates)} files fails its "
            f"checksum there now); run with --verify_records=sha256 to find it")
  path, start, size = bad[0]
  more = f" (and {len(bad) - 1} other files at the same offset)" if len(bad) > 1 else ""
  return (f"{path}: record {start // size} (bytes {start}-{start + size - 1}) fails its CRC32C "
          f"checksum{more}: the file is corrupted; {REWRITE}")
