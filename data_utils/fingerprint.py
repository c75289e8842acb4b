"""Fingerprints of the files a result depends on (tokenizers, data, configs): what a run
directory, a record shard or an export records so that a rerun can tell whether its inputs are
the ones it was made from. Light: local files are read with `open` (no TensorFlow), URLs
through data_utils/fileio."""

import hashlib

from data_utils import fileio

CHUNK = 1 << 22


def file_sha256(path):
  """The sha256 (hex) of PATH's bytes, read in 4 MiB chunks."""
  digest = hashlib.sha256()
  with fileio.open_read_light(path) as f:
    while True:
      block = f.read(CHUNK)
      if not block:
        break
      digest.update(block)
  return digest.hexdigest()


def file_fingerprint(path):
  """{"name", "size", "sha256"} of PATH (the name without its directory: a moved file keeps its
  fingerprint)."""
  return {"name": fileio.basename(path), "size": fileio.size_light(path),
          "sha256": file_sha256(path)}


def files_digest(paths):
  """One sha256 over the fingerprints of PATHS (sorted by name): equal iff the same names hold
  the same bytes."""
  digest = hashlib.sha256()
  for fp in sorted((file_fingerprint(p) for p in paths), key=lambda f: f["name"]):
    digest.update(f"{fp['name']}\0{fp['size']}\0{fp['sha256']}\n".encode("utf-8"))
  return digest.hexdigest()
