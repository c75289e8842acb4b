"""The offline writer behind data_utils/create_pretrain_data.py.

Input text is cut into shards at document boundaries (about `shard_bytes`
each; small files are packed together). A shard is the unit of work: its text
becomes one token stream, cut into batch lanes, and written as one TFRecord file
plus its JSON record-info. A shard's bytes depend only on its text, the
parameters and (seed, shard index), never on how many workers or tasks ran.

Paths may be local or any tf.io.gfile URL (gs://, ram://). Every access goes through
data_utils/fileio.py's light functions (`*_light`): local paths without TensorFlow, so that a
local run never imports it (3.5 s of start-up, and not fork-safe for the worker processes).
Publication: the record file is written under a temporary name and renamed, the record-info JSON
is written the same way after it, so a shard is complete exactly when its info exists and names
the record file's size; a killed run leaves `.tmp-` objects, which the next run of the same shards
deletes.

--output_dir is checked first (data_utils/outputs.py, kind RECORDS: a file, a path under a file or
a folder of someone else's files is a one-line refusal, nothing written) and marked as a records
directory once the inputs have passed their checks. Each record-info names the text, model and
seed its shard was made from; a rerun skips the shards made from exactly what it would use,
rewrites the others and removes the shards the plan no longer has (data_utils/rerun.py: the rule,
and why it is safe with --num_tasks), so the directory ends as a run into an empty one would
leave it. Once every planned shard of the split is complete, the run (with --num_tasks: the task)
that finds them so writes the set's manifest last (data_utils/manifest.py); a run about to
rewrite or remove shards removes it first. `prepare` (checks, plan, claim, clean-up) is shared
with the Apache Beam runner (data_utils/beam_writer.py), which writes each shard with
`write_shard` too.
"""


import concurrent.futures
import contextlib
import dataclasses
import gc
import hashlib
import json
import logging

import numpy as np

from data_utils import (fileio, fingerprint, manifest, outputs, record_format, rerun, sampling,
                        tfrecord)
from data_utils.tokenization import CLS_ID, EOD_ID, SEP_ID, Tokenizer

log = logging.getLogger("create_pretrain_data")


@dataclasses.dataclass
class Shard:
  index: int
  pieces: list          # [(path, byte start, byte end)]

  def size(self):
    return sum(end - start for _, start, end in self.pieces)


def _next_document_break(f, offset, size, window=1 << 16):
  """First offset >= `offset` just after a blank line ("\\n\\n", or "\\n\\r\\n" in CRLF
  files), or after a newline if no blank line comes within 1 MiB; `size` if none."""
  f.seek(offset)
  scanned, fallback = 0, None
  tail = b""
  while offset + scanned < size:
    block = f.read(window)
    if not block:
      break
    buf = tail + block
    hits = [(i + len(sep)) for sep in (b"\n\n", b"\n\r\n") for i in [buf.find(sep)] if i >= 0]
    if hits:
      return offset + scanned - len(tail) + min(hits)
    if fallback is None and block.find(b"\n") >= 0:
      fallback = offset + scanned + block.find(b"\n") + 1
    scanned += len(block)
    tail = buf[-2:]
    if scanned >= (1 << 20) and fallback is not None:
      return fallback
  return size


def plan_shards(paths, shard_bytes):
  """Cuts the files into shards of about `shard_bytes`, at document ends.

  Returns (shards, empty files). Deterministic for the same files.
  """
  pieces, empty = [], []
  for path in paths:
    size = fileio.size_light(path)
    if size < (1 << 20):
      if not fileio.read_bytes_light(path).strip():
        empty.append(path)
        continue
    with fileio.open_read_light(path) as f:
      start = 0
      while start < size:
        end = size if size - start <= shard_bytes else _next_document_break(
            f, start + shard_bytes, size)
        pieces.append((path, start, end))
        start = end
  shards, current, current_size = [], [], 0
  for piece in pieces:
    current.append(piece)
    current_size += piece[2] - piece[1]
    if current_size >= shard_bytes:
      shards.append(Shard(len(shards), current))
      current, current_size = [], 0
  if current:
    shards.append(Shard(len(shards), current))
  return shards, empty


def read_block(shard, sources=None):
  """The shard's text as one bytes object: its lines joined by "\n" (UTF-8), an empty line
  after each piece (= document end).

  Returns (block, bad_lines, first_bad): lines that are not UTF-8 are skipped, counted, and the
  first is reported as "path:line". A BOM opening a file is dropped. SOURCES (a list), if given,
  receives each piece's fingerprint of the very bytes read (record_format.make_source).
  """
  parts, bad, first_bad = [], 0, None
  for path, start, end in shard.pieces:
    with fileio.open_read_light(path) as f:
      f.seek(start)
      data = f.read(end - start)
    if sources is not None:
      sources.append({"path": path, "start": start, "end": end,
                      "sha256": hashlib.sha256(data).hexdigest()})
    if start == 0 and data.startswith(b"\xef\xbb\xbf"):
      data = data[3:]
    try:
      if not data.isascii():
        data.decode("utf-8")
      parts.append(data)
    except UnicodeDecodeError:
      line_base = rerun.line_number(path, start)
      if sources is not None:
        sources[-1]["line"] = line_base
      good = []
      for k, raw in enumerate(data.split(b"\n")):
        try:
          raw.decode("utf-8")
          good.append(raw)
        except UnicodeDecodeError:
          bad += 1
          first_bad = first_bad or f"{path}:{line_base + k}"
      parts.append(b"\n".join(good))
    parts.append(b"")
  return b"\n".join(parts), bad, first_bad


def read_lines(shard):
  """`read_block` as a list of lines (str): (lines, bad_lines, first_bad)."""
  block, bad, first_bad = read_block(shard)
  return block.decode("utf-8").split("\n"), bad, first_bad


def build_stream(tokenizer, lines, use_eod=True):
  """Lines -> (token stream int32 [N], sentence ids bool [N], counts: sentences, documents,
  lines).

  LINES: a list of str, or `read_block`'s bytes (the lines joined by "\n"). Every sentence is
  a unit with its own sentence id; a run of blank lines ends a document, whose <eod> joins its
  last sentence (as the release). A line that encodes to nothing is neither.
  """
  if isinstance(lines, bytes):
    block = lines
  else:
    lines = [line.replace("\n", " ") if "\n" in line else line for line in lines]
    block = "\n".join(lines).encode("utf-8", "surrogatepass")
  flat, per_line, blank = tokenizer.encode_block(block)
  events = np.flatnonzero((per_line > 0) | blank)         # sentences and blank lines, in order
  is_unit = per_line[events] > 0
  # a blank line right after a sentence ends a document (later blank lines of a run do not)
  ends_doc = np.append(is_unit[:-1] & ~is_unit[1:], False)[is_unit]     # per sentence
  unit_len = per_line[events[is_unit]]
  if use_eod and ends_doc.any():
    flat = np.insert(flat, np.cumsum(unit_len)[ends_doc], EOD_ID)
    unit_len = unit_len + ends_doc
  sent = np.repeat((np.arange(len(unit_len)) % 2).astype(bool), unit_len)
  return flat, sent, {"sentences": len(unit_len), "documents": int(ends_doc.sum()),
                      "lines": len(per_line)}


def build_records(rng, stream, sent, params, start_piece):
  """A shard's token stream -> its records as feature arrays, in write order.

  Returns ({feature: uint8 [N, bytes]}, num_batch, stats).
  """
  p = params
  bsz, seq_len, reuse = p.bsz_per_host, p.seq_len, p.reuse_len
  data, sent_rows, rev = sampling.lanes(stream, sent, bsz, p.num_core_per_host, p.bi_data)
  row_len = data.shape[1]
  steps = np.arange(0, max(row_len - seq_len + 1, 0), reuse)
  tot_len = seq_len - reuse - 3
  splits = sampling.split_a_b_rows(rng, sent_rows, steps + reuse, tot_len)   # [bsz, steps]
  ok = splits["ok"].all(axis=0) if len(steps) else np.zeros(0, bool)
  n_steps = int(np.argmin(ok)) if not ok.all() else len(steps)
  if n_steps == 0:
    return None, 0, {"records": 0}
  # [n_steps, bsz] per-record scalars, step-major = write order.
  col = lambda key: splits[key][:, :n_steps].T.reshape(-1, 1)
  a_begin, a_end, b_begin, label = col("a_begin"), col("a_end"), col("b_begin"), col("label")
  a_len = a_end - a_begin
  row = np.tile(np.arange(bsz), n_steps)[:, None]
  start = np.repeat(steps[:n_steps], bsz)[:, None]
  # [reuse: data from start] [A: data from a_begin] <sep> [B: data from b_begin] ... <sep> <cls>,
  # positions past a lane's end reading its last token (clipped), as one gather of int32 indices.
  tokens = np.empty([len(row), seq_len], data.dtype)
  tokens[:, :reuse] = np.lib.stride_tricks.sliding_window_view(data, reuse, axis=1)[
      row[:, 0], start[:, 0]]                 # (start + reuse <= row_len: no clipping needed)
  q = np.arange(seq_len - reuse, dtype=np.int32)
  a32 = a_len.astype(np.int32)
  src = np.where(q < a32, a_begin.astype(np.int32) + q, (b_begin - a_len - 1).astype(np.int32) + q)
  np.clip(src, 0, row_len - 1, out=src)
  src += (row * row_len).astype(np.int32)
  new = data.reshape(-1).take(src)
  new[np.arange(len(new)), a_len[:, 0]] = SEP_ID
  new[:, -2], new[:, -1] = SEP_ID, CLS_ID
  tokens[:, reuse:] = new

  flipped = np.flatnonzero(rev[row[:, 0]])         # records of reversed lanes
  codes = _piece_codes(start_piece).take(tokens)          # bit 0: word start, bit 1: <sep>/<cls>
  is_masked = np.empty(tokens.shape, bool)
  for (lo, hi), goal in zip(((0, reuse), (reuse, seq_len)), p.num_predict_split()):
    half = codes[:, lo:hi].copy()
    half[flipped] = half[flipped, ::-1]                    # sample in text order
    half_start, half_func = (half & 1).view(bool), (half >> 1).view(bool)
    mask = sampling.sample_targets(rng, half_start, half_func, goal, p.mask_alpha,
                                   p.mask_beta, p.span_mode)
    mask[flipped] = mask[flipped, ::-1]
    is_masked[:, lo:hi] = mask
  ranks = sampling.permutation_ranks(rng, len(tokens), seq_len, p.perm_size)
  features = {
      "input_ids": tokens.astype(p.id_dtype()).view(np.uint8),
      "perm": ranks.astype(p.perm_dtype()).view(np.uint8),
      "is_masked": np.packbits(is_masked, axis=1, bitorder="little"),
      "meta": np.concatenate([a_len, label], axis=1).astype("<u2").view(np.uint8),
  }
  return features, n_steps, {"records": len(tokens), "true_next": int(label.sum())}


_PIECE_CODES = {}


def _piece_codes(start_piece):
  """uint8 [vocab]: 1 for a piece that begins a word, + 2 for <sep> and <cls> (never targets;
  spans stop there); one lookup gives both for every token."""
  key = start_piece.tobytes()
  if key not in _PIECE_CODES:
    codes = np.zeros(max(len(start_piece), SEP_ID + 1, CLS_ID + 1), np.uint8)
    codes[:len(start_piece)] = start_piece
    codes[[SEP_ID, CLS_ID]] += 2
    _PIECE_CODES[key] = codes
  return _PIECE_CODES[key]


_TOKENIZERS = {}
_MALLOC_TUNED = []


def _tune_malloc():
  """glibc: keep freed memory for reuse instead of returning each large numpy temporary to the
  kernel (by default one above ~128 KB-32 MB is a fresh mmap, so every array of a shard page-faults
  again: measured 1.5-2x on the sampling and ranking steps). Once per process; no-op elsewhere."""
  if _MALLOC_TUNED:
    return
  _MALLOC_TUNED.append(True)
  try:
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-3, 32 << 20)     # M_MMAP_THRESHOLD: the largest glibc allows
    libc.mallopt(-1, 512 << 20)    # M_TRIM_THRESHOLD
  except (OSError, AttributeError):
    pass


def _tokenizer(sp_model, uncased):
  key = (sp_model, uncased)
  if key not in _TOKENIZERS:
    _TOKENIZERS[key] = Tokenizer(sp_model, lower=uncased)
  return _TOKENIZERS[key]


def _ignore_sigint():
  import signal  # noqa: PLC0415
  signal.signal(signal.SIGINT, signal.SIG_IGN)


def write_shard(job):
  """Writes one shard (a worker's unit of work); returns its record-info dict."""
  with _gc_paused():
    return _write_shard(job)


@contextlib.contextmanager
def _gc_paused():
  """Python's cyclic garbage collector off while a shard is written: SentencePiece returns one
  list per line (~10k per shard, 2M ids), and the collections their allocation triggers
  traverse every id of every list still alive, a few per cent of the writer's CPU. Nothing here makes reference cycles; whatever else does is
  collected after the shard, when the collector is back on."""
  if not gc.isenabled():
    yield
    return
  gc.disable()
  try:
    yield
  finally:
    gc.enable()


def _write_shard(job):
  shard, params, sp_model, output_dir, split, seed, sp_sha = job
  _tune_malloc()
  tokenizer = _tokenizer(sp_model, params.uncased)
  pieces = []
  block, bad, first_bad = read_block(shard, pieces)
  stream, sent, counts = build_stream(tokenizer, block, params.use_eod)
  rng = np.random.default_rng([seed, shard.index])
  stats = {"input_bytes": shard.size(), "tokens": int(len(stream)),
           "lines": counts.pop("lines"),              # (= block.count(b"\n") + 1)
           "bad_lines": bad, "first_bad_line": first_bad, **counts,
           "inputs": [f"{p}[{s}:{e}]" for p, s, e in shard.pieces], "seed": seed}
  features, num_batch, more = build_records(rng, stream, sent, params, tokenizer.start_piece)
  stats.update(more)
  record_name = params.record_name(split, shard.index)
  info_path = fileio.join(output_dir, params.info_name(split, shard.index))
  if features is None:   # recorded, so that a rerun does not try again
    stats["skipped"] = "too little text for one batch"
    data = None
    with contextlib.suppress(FileNotFoundError):     # an earlier version's file of this shard
      fileio.remove_light(fileio.join(output_dir, record_name))
  else:
    layout = tfrecord.ExampleLayout(params.feature_bytes())
    data = tfrecord.frame(layout.serialize(features))
    _write_atomic(fileio.join(output_dir, record_name), data)        # the records first,
  info = record_format.make_info(params, split, shard.index, data is not None and record_name,
                                 data, num_batch, stats,
                                 record_format.make_source(pieces, sp_sha, seed))
  _write_atomic(info_path, record_format.info_text(info).encode("utf-8"))   # the info last
  return info


def _write_atomic(path, data):
  """`fileio.write_atomic_light` (one name, so that a test can kill a run between two writes)."""
  fileio.write_atomic_light(path, data)


def _names(params, split, shard):
  return params.record_name(split, shard.index), params.info_name(split, shard.index)


@dataclasses.dataclass
class Plan:
  """What a run writes, once `prepare` has checked and cleaned: every shard of the split (the
  same plan for every task and runner), this task's, and those of them still to write."""
  params: record_format.RecordParams    # vocab_size from the SentencePiece model
  shards: list
  mine: list
  todo: list
  sp_model: str
  sp_sha: str
  output_dir: str
  split: str
  seed: int
  paths: list          # the input files
  empty: list
  outdated: int
  stale: list

  def job(self, shard):
    """`write_shard`'s argument for SHARD."""
    return (shard, self.params, self.sp_model, self.output_dir, self.split, self.seed,
            self.sp_sha)


def prepare(input_glob, sp_model, output_dir, params, split="train", seed=0, num_tasks=1,
            task=0, num_workers=1, shard_bytes=32 << 20, progress=print):
  """Checks the flags, inputs and --output_dir (FileNotFoundError / ValueError, one line, before
  anything is written), plans the shards, claims --output_dir and clears what this task's rerun
  replaces: leftovers of its shards, infos of the shards it rewrites, shards no longer planned,
  and the set's manifest if any of that changes the set. Returns a Plan. Both runners (local
  processes: `create`; Apache Beam: data_utils/beam_writer.py) start here."""
  if not 0 <= task < num_tasks:
    raise ValueError(f"--task={task} must be in [0, --num_tasks={num_tasks})")
  if num_workers < 1:
    raise ValueError(f"--num_workers={num_workers} must be >= 1")
  rerun.check_output_dir(output_dir)
  paths = fileio.glob_files_light(input_glob)
  if not paths:
    raise FileNotFoundError(f"--input_glob={input_glob} matched no files")
  tokenizer = _tokenizer(sp_model, params.uncased)
  params = dataclasses.replace(params, vocab_size=tokenizer.vocab_size).validate()
  shards, empty = plan_shards(paths, shard_bytes)
  for path in empty:
    progress(f"skipped empty or all-blank file {path}")
  if not shards:
    raise ValueError(f"--input_glob={input_glob}: all {len(paths)} files are empty")
  outputs.claim_dir(output_dir, outputs.RECORDS)
  sp_sha = fingerprint.file_sha256(sp_model)
  mine = [s for s in shards if s.index % num_tasks == task]
  with concurrent.futures.ThreadPoolExecutor(num_workers) as pool:   # hashlib frees the GIL
    states = list(pool.map(
        lambda s: rerun.shard_state(params, output_dir, split, s, sp_sha, seed), mine))
  todo = [s for s, state in zip(mine, states) if state != "done"]
  stale = rerun.stale_shards(output_dir, params, split, len(shards))
  if todo or stale:      # the manifest first: it never describes shards that are not there
    manifest.remove(output_dir, params, split)
  # Leftovers of an interrupted run of these shards (never another task's): temporary objects,
  # and the info of a shard about to be rewritten (so no info ever describes another file).
  # Then the shards the plan no longer has (every task's plan has the same shards).
  remove_temporaries(output_dir, [name for s in mine for name in _names(params, split, s)]
                     + [manifest.manifest_name(params, split)])
  for s in todo:
    with contextlib.suppress(Exception):
      fileio.remove_light(fileio.join(output_dir, params.info_name(split, s.index)))
  for path in stale:
    with contextlib.suppress(Exception):
      fileio.remove_light(path)
  return Plan(params, shards, mine, todo, sp_model, sp_sha, output_dir, split, seed, paths, empty,
              states.count("outdated"), stale)


def remove_temporaries(output_dir, names):
  """Removes the temporaries (`NAME` + fileio.TMP_MARK...) of NAMES that writes which died left
  in OUTPUT_DIR; returns how many."""
  prefixes = tuple(name + fileio.TMP_MARK for name in names)
  removed = 0
  for name in fileio.listdir_light(output_dir):
    if name.startswith(prefixes):
      with contextlib.suppress(Exception):
        fileio.remove_light(fileio.join(output_dir, name))
        removed += 1
  return removed


def create(input_glob, sp_model, output_dir, params, split="train", seed=0, num_tasks=1, task=0,
           num_workers=1, shard_bytes=32 << 20, progress=print):
  """Writes the records of this task's shards, then the manifest if every shard of the split is
  complete (data_utils/manifest.py); returns a summary dict.

  Raises FileNotFoundError / ValueError with a one-line message for bad flags, inputs or
  --output_dir (check_output_dir), before anything is written. Afterwards `output_dir` holds,
  for this split and parameter set, exactly what a run into an empty directory would write
  (once every task has run): see the module docstring.
  """
  import time
  plan = prepare(input_glob, sp_model, output_dir, params, split, seed, num_tasks, task,
                 num_workers, shard_bytes, progress)
  params, shards, mine, todo, stale = plan.params, plan.shards, plan.mine, plan.todo, plan.stale
  paths, empty, outdated = plan.paths, plan.empty, plan.outdated
  if num_workers > 1 and (output_dir.startswith("ram://")
                          or any(p.startswith("ram://") for p in paths)):
    num_workers = 1      # ram:// lives in one process's memory: workers would not see it
  progress(f"{len(paths)} files, {len(shards)} shards; task {task}/{num_tasks} has {len(mine)}, "
           f"{len(mine) - len(todo)} already complete, {len(todo)} to write"
           + (f" ({outdated} made from other inputs or settings)" if outdated else "")
           + (f", {len(stale)} stale file(s) of shards no longer planned removed"
              if stale else "")
           + f" with {num_workers} worker(s) -> {output_dir}")
  jobs = [plan.job(s) for s in todo]
  total = sum(s.size() for s in todo)
  done_bytes, summary, start = 0, {"shards": 0, "records": 0, "tokens": 0, "bad_lines": 0,
                                   "skipped_shards": 0}, time.time()
  if num_workers == 1 or len(jobs) <= 1:
    results = map(write_shard, jobs)
    pool = None
  else:
    import multiprocessing
    import sys
    # fork is quick; spawn when TensorFlow (not fork-safe) is already loaded.
    method = "spawn" if "tensorflow" in sys.modules else "fork"
    # workers ignore Ctrl-C: the parent alone answers it (one line, data_utils/cli_app.py); a
    # shard a worker was writing stays a `.tmp-` file, which the rerun removes
    pool = multiprocessing.get_context(method).Pool(min(num_workers, len(jobs)),
                                                    initializer=_ignore_sigint)
    results = pool.imap_unordered(write_shard, jobs)
  try:
    for info in results:
      stats = info.get("inputs") and info
      done_bytes += stats["input_bytes"]
      summary["shards"] += "skipped" not in stats
      summary["skipped_shards"] += "skipped" in stats
      summary["records"] += stats.get("records", 0)
      summary["tokens"] += stats["tokens"]
      summary["bad_lines"] += stats["bad_lines"]
      if stats["bad_lines"]:
        progress(f"skipped {stats['bad_lines']} undecodable line(s), first at "
                 f"{stats['first_bad_line']}")
      if "skipped" in stats:
        progress(f"shard {stats['inputs'][0]}...: {stats['skipped']} (skipped)")
      elapsed = time.time() - start
      rate = summary["tokens"] / max(elapsed, 1e-9)
      eta = elapsed / max(done_bytes, 1) * (total - done_bytes)
      progress(f"{summary['shards'] + summary['skipped_shards']}/{len(jobs)} shards, "
               f"{summary['records']:,} records, {summary['tokens']:,} tokens, "
               f"{rate:,.0f} tokens/s, ETA {eta:.0f}s")
  finally:
    if pool is not None:
      pool.close()
      pool.join()
  manifest.write_when_complete(plan, {s.index for s in mine}, num_workers, progress)
  summary.update(seconds=time.time() - start, params=params, empty_files=len(empty),
                 total_shards=len(shards), already_complete=len(mine) - len(todo),
                 outdated=outdated, removed=len(stale))
  return summary
