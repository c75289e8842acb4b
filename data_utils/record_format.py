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
Records are written batch by batch: record k belongs to lane k % bsz_per_host,
and consecutive records of a lane continue each other (memory needs that).
"""

import dataclasses
import glob
import hashlib
import json
import os

import numpy as np

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
  bsz_per_host: int = 32
  num_core_per_host: int = 1
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
    need(self.bsz_per_host % self.num_core_per_host == 0,
         f"--bsz_per_host={self.bsz_per_host} must be a multiple of "
         f"--num_core_per_host={self.num_core_per_host}")
    need(not self.bi_data or self.bsz_per_host % (2 * self.num_core_per_host) == 0,
         f"--bi_data needs --bsz_per_host={self.bsz_per_host} to be a multiple of "
         f"2 x num_core_per_host = {2 * self.num_core_per_host}")
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
            f"np-{self.num_predict}.bsz-{self.bsz_per_host}.cores-{self.num_core_per_host}."
            f"{'bi' if self.bi_data else 'uni'}.alpha-{self.mask_alpha}.beta-{self.mask_beta}."
            f"{self.span_mode}.{'uncased' if self.uncased else 'cased'}."
            f"{'eod' if self.use_eod else 'noeod'}.vocab-{self.vocab_size}")

  def record_name(self, split, shard):
    return f"{split}-{shard:05d}.{self.tag()}{RECORD_SUFFIX}"

  def info_name(self, split, shard):
    return f"{INFO_PREFIX}{split}-{shard:05d}.{self.tag()}.json"


def sha256(path, chunk=1 << 20):
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(chunk), b""):
      h.update(block)
  return h.hexdigest()


def write_info(path, params, split, shard, record_file, num_batch, extra):
  """The JSON record-info of one shard (written atomically)."""
  info = {"params": dataclasses.asdict(params), "split": split, "shard": shard,
          "record_file": record_file and os.path.basename(record_file), "num_batch": num_batch,
          "num_records": num_batch * params.bsz_per_host,
          "bytes": record_file and os.path.getsize(record_file),
          "sha256": record_file and sha256(record_file), **extra}
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "w") as f:
    json.dump(info, f, indent=1, sort_keys=True)
  os.replace(tmp, path)
  return info


def read_info(path):
  with open(path) as f:
    return json.load(f)


# Parameters that training sets through its own flags; the rest (alpha, beta,
# span mode, eod, case) only describe how targets were drawn.
TRAINING_KEYS = ("seq_len", "reuse_len", "num_predict", "bsz_per_host", "num_core_per_host",
                 "bi_data", "vocab_size")


def find_records(record_dir, split="train", **expected):
  """Record files and infos in `record_dir` whose params match `expected`.

  Returns (params, [record paths], total batches). Raises FileNotFoundError or
  ValueError with one line saying what is there and what differs.
  """
  infos = sorted(glob.glob(os.path.join(record_dir, f"{INFO_PREFIX}{split}-*.json")))
  if not infos:
    raise FileNotFoundError(
        f"{record_dir}: no {INFO_PREFIX}{split}-*.json (was data_utils/create_pretrain_data.py "
        f"run with --output_dir={record_dir} --split={split}?)")
  matching, first_diff = [], None
  for path in infos:
    info = read_info(path)
    diff = [f"{k}={info['params'].get(k)!r} (asked {v!r})" for k, v in expected.items()
            if info["params"].get(k) != v]
    if diff:
      first_diff = first_diff or (path, diff)
    elif info["num_batch"]:           # shards too short for one batch have no file
      matching.append(info)
  if not matching and first_diff is None:
    raise ValueError(f"{record_dir}: every shard was too short for one batch")
  if not matching:
    path, diff = first_diff
    raise ValueError(f"{record_dir}: {len(infos)} record files, none matching: "
                     f"{os.path.basename(path)} has {', '.join(diff)}")
  params = {json.dumps(i["params"], sort_keys=True) for i in matching}
  if len(params) > 1:
    raise ValueError(f"{record_dir}: matching record files disagree on parameters; "
                     "pass the differing ones explicitly")
  files = [os.path.join(record_dir, i["record_file"]) for i in matching]
  missing = [f for f in files if not os.path.exists(f)]
  if missing:
    raise FileNotFoundError(f"{missing[0]}: listed in its record-info but not found")
  return (RecordParams(**matching[0]["params"]), files,
          sum(i["num_batch"] for i in matching))
