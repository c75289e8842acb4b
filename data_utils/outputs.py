"""Where the project may write: the one rule every output flag of every script follows.

Nothing outside a run's own files is ever deleted or overwritten. Every directory the project
creates as an output holds a marker, `OUTPUT_MARKER` (JSON: {"kind": KIND, "by": PROJECT}),
written before anything else goes in. An output flag then accepts

  - an absent path (created, marker first) or an empty directory (marker written);
  - a directory whose marker names the same kind: an earlier output of this kind, which the
    caller may resume or replace (only its own files, by name);

and refuses, in one line naming the flag and the path, before any work:

  - an existing file where a directory is wanted (or a directory where a file is wanted, or a
    path under an existing file);
  - a non-empty directory without the marker (somebody else's files) or with another kind's
    marker (e.g. `--export_dir` pointed at a run's `--model_dir`).

Kinds: RUN (a training script's --model_dir / --output_dir), SAVED_MODEL (--export_dir and a
pretraining run's export/saved_model), HF (--export_hf_dir: a Hugging Face model directory),
RECORDS (create_pretrain_data.py's --output_dir), FEATURES (a fine-tuning feature cache),
QUICKSTART (quickstart.py's --output_dir).

Local paths are checked with `os` (no TensorFlow: the records writer and the tokenizer trainer
stay light), URLs through data_utils/fileio (tf.io.gfile).
"""

import json
import os

from data_utils import fileio

OUTPUT_MARKER = ".xlnet-mpnet-tf2.json"
PROJECT = "xlnet-mpnet-tf2"

RUN = "run"
SAVED_MODEL = "saved_model"
HF = "hugging_face"
RECORDS = "records"
FEATURES = "features"
QUICKSTART = "quickstart"


# ---- light path queries (local: os, URL: fileio) -------------------------------------------------
def exists(path):
  """Whether PATH exists (a dangling symlink too), without TensorFlow for a local path."""
  return os.path.lexists(path) if not fileio.is_url(path) else fileio.exists(path)


def isdir(path):
  """Whether PATH is a directory, without TensorFlow for a local path."""
  return os.path.isdir(path) if not fileio.is_url(path) else fileio.isdir(path)


def _listdir(path):
  return fileio.listdir_light(path)


def _file_above(path):
  """The nearest existing ancestor of PATH that is a file, or None."""
  parent = fileio.dirname(path)
  while parent and parent not in ("/", ".") and not parent.endswith(":/") and \
      not parent.endswith("://"):
    if exists(parent):
      return None if isdir(parent) else parent
    up = fileio.dirname(parent)
    if up == parent:
      break
    parent = up
  return None


def read_marker(directory):
  """The marker's dict of DIRECTORY, or None (absent, unreadable, not ours)."""
  path = fileio.join(directory, OUTPUT_MARKER)
  try:
    if not exists(path):
      return None
    data = json.loads(fileio.read_bytes_light(path).decode("utf-8"))
  except (OSError, ValueError, UnicodeDecodeError):
    return None
  return data if isinstance(data, dict) and data.get("by") == PROJECT else None


def kind_of(directory):
  """The kind its marker names, or None."""
  marker = read_marker(directory)
  return marker.get("kind") if marker else None


def _name(flag):
  return flag if flag.startswith("--") or " " in flag else f"--{flag}"


# ---- the checks ------------------------------------------------------------------------------------
def check_dir(path, flag, kind, also=(), earlier=None):
  """Raises ValueError (one line: the flag, the path, what to do) unless PATH may hold an output
  of `kind` (or of a kind in `also`): absent, an empty directory, or one marked so; or, with
  `earlier` (a predicate on the sorted entry names of an unmarked directory), an earlier
  version's output of this kind, made before the markers. Returns "new", "empty", the kind
  its marker names or "earlier". Writes nothing."""
  path = str(path).rstrip("/") or str(path)
  flag = _name(flag)
  above = _file_above(path)
  if above:
    raise ValueError(f"{flag}={path}: {above} is a file, not a directory")
  if not exists(path):
    return "new"
  if not isdir(path):
    raise ValueError(f"{flag}={path}: is an existing file; pass a directory (new or empty)")
  names = _listdir(path)
  if not names:
    return "empty"
  found = kind_of(path)
  if found is not None and (found == kind or found in also):
    return found
  if found is None and earlier is not None and earlier(names):
    return "earlier"
  if found is not None:
    what = {RUN: "a training run's directory", SAVED_MODEL: "a SavedModel export",
            HF: "a Hugging Face export", RECORDS: "a directory of pretraining records",
            FEATURES: "a feature cache", QUICKSTART: "a quickstart's output"}.get(
                found, f"an output of kind {found}")
    raise ValueError(f"{flag}={path}: is {what} of this project, not {kind.replace('_', ' ')} "
                     "output; pass another path (nothing was written)")
  shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
  raise ValueError(f"{flag}={path}: holds files this project did not write ({len(names)} "
                   f"entries: {shown}); pass a new or empty directory (nothing was written or "
                   "deleted)")


def claim_dir(path, kind):
  """Creates PATH if needed and writes its marker (kind `kind`) unless it has one already.
  Call after `check_dir` passed, before writing anything else into PATH."""
  fileio.makedirs_light(path)
  if read_marker(path) is None:
    fileio.write_atomic_light(fileio.join(path, OUTPUT_MARKER),
                              json.dumps({"kind": kind, "by": PROJECT}) + "\n")


def prepare_dir(path, flag, kind, also=()):
  """`check_dir` then `claim_dir`: PATH exists and is marked as `kind`. Returns check_dir's
  answer."""
  state = check_dir(path, flag, kind, also)
  claim_dir(path, kind if state in ("new", "empty") else state)
  return state


def check_file(path, flag):
  """Raises ValueError (one line) unless PATH can be written as a file: not a directory, not
  under a file. Whether an existing file may be replaced is the caller's rule."""
  path = str(path)
  flag = _name(flag)
  above = _file_above(path)
  if above:
    raise ValueError(f"{flag}={path}: {above} is a file, not a directory")
  if exists(path) and isdir(path):
    raise ValueError(f"{flag}={path}: is an existing directory; pass a file name")


def same_place_key(path):
  """PATH as compared with another path: URLs as written, local paths made absolute (so
  `run` and `./run` are one place)."""
  path = str(path).rstrip("/") or str(path)
  return path if fileio.is_url(path) else os.path.abspath(path)


def check_distinct(paths):
  """ValueError when two output flags name the same path (`paths`: {flag: path or None}). One
  inside the other is left to `check_dir`: the outer one is then not empty."""
  items = [(_name(f), p, same_place_key(p)) for f, p in paths.items() if p]
  for i, (fa, pa, ka) in enumerate(items):
    for fb, pb, kb in items[i + 1:]:
      if ka == kb:
        raise ValueError(f"{fa}={pa} and {fb}={pb} name the same path; pass two different "
                         "paths")
