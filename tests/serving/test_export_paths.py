"""Where a SavedModel export may go (serving/export.py: check_export_dir, save, publish_dir):
nothing the project did not write is ever deleted. Files of every kind at an export path (a
run's directory, a folder of user data, a file, a file above the path, an unmarked export with
other files) survive a refused export, refused in one line before anything is written and again
right before publishing; an earlier export of ours (marked, or an earlier version's unmarked one)
is replaced cleanly, its other files left alone. Local paths and ram:// alike.

The exports are a tiny string module (no model), so each takes a fraction of a second."""

import re
import uuid

import numpy as np
import pytest
import tensorflow as tf

from data_utils import fileio, outputs
from serving import export
from tests.path_helpers import refusal, tree

PROBES = {"sentence": np.array(["ab", "Cd"], object)}


class _Echo(tf.Module):
  """serving_default: `sentence` -> `upper` (or `lower`), one variable, an optional asset."""

  def __init__(self, upper=True, asset=None):
    super().__init__()
    self.weight = tf.Variable(1.0)
    if asset:
      self.asset = tf.saved_model.Asset(asset)
    fn = tf.strings.upper if upper else tf.strings.lower
    key = "upper" if upper else "lower"
    self.serving_default = tf.function(lambda sentence: {key: fn(sentence)},
                                       input_signature=[tf.TensorSpec([None], tf.string,
                                                                      name="sentence")])


def _save(path, upper=True, asset=None):
  key, fn = ("upper", str.upper) if upper else ("lower", str.lower)
  expected = {key: np.array([fn(s) for s in PROBES["sentence"]], object)}
  return export.save(_Echo(upper, asset), path, PROBES, expected, log=lambda _: None)


def _served(path):
  out = tf.saved_model.load(path).signatures["serving_default"](
      sentence=tf.constant(["xY"]))
  return {k: v.numpy()[0].decode() for k, v in out.items()}


@pytest.fixture(params=["local", "ram"])
def root(request, tmp_path):
  """A fresh directory: local, or on TF's in-memory filesystem (a name no other test's is a
  prefix of: ram:// answers exists() for prefixes of existing names)."""
  if request.param == "local":
    (tmp_path / "root").mkdir()
    yield str(tmp_path / "root")
    return
  path = f"ram://export_paths_{uuid.uuid4().hex}"
  fileio.makedirs(path)
  yield path
  fileio.rmtree(path)


def _write(path, data=b"x"):
  fileio.makedirs(fileio.dirname(path))
  fileio.write_atomic(path, data)


def _run_dir(d, marked):
  for name, data in (("checkpoint", b"model_checkpoint_path: 'ckpt-2'"),
                     ("ckpt-2.index", b"i"), ("ckpt-2.data-00000-of-00001", b"w" * 100),
                     ("best/best.json", b'{"step": 2}'), ("best/step-2/ckpt.index", b"i"),
                     ("train/events.out.tfevents.1.host", b"e"), ("optimizer.json", b"{}")):
    _write(fileio.join(d, name), data)
  if marked:
    outputs.claim_dir(d, outputs.RUN)


def _user_data(d, marked):
  del marked
  _write(fileio.join(d, "notes.txt"), b"my notes")
  _write(fileio.join(d, "data", "train.csv"), b"a,b\n1,2\n")


def _unmarked_export_with_more(d, marked):
  del marked     # an earlier version's export plus a file of somebody else's: not ours
  _write(fileio.join(d, "saved_model.pb"), b"pb")
  _write(fileio.join(d, "variables", "variables.index"), b"i")
  _write(fileio.join(d, "README.md"), b"mine")


@pytest.mark.parametrize("make", [
    pytest.param(lambda d: _run_dir(d, True), id="run_dir_marked"),
    pytest.param(lambda d: _run_dir(d, False), id="run_dir_unmarked"),
    pytest.param(lambda d: _user_data(d, False), id="user_data"),
    pytest.param(lambda d: _unmarked_export_with_more(d, False), id="export_plus_a_file"),
])
def test_a_directory_not_ours_survives_a_refused_export(root, make):
  target = fileio.join(root, "target")
  make(target)
  before = tree(root)
  message = refusal(lambda: _save(target))
  assert tree(root) == before          # nothing deleted, nothing added (no temporary export)
  assert message.startswith(f"--export_dir={target}: ") and "\n" not in message
  with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
    export.check_export_dir(target)     # the same line, before any training


def test_a_file_at_the_path_or_above_it_survives(root):
  _write(fileio.join(root, "model.bin"), b"weights")
  before = tree(root)
  for target, why in ((fileio.join(root, "model.bin"), "is an existing file"),
                      (fileio.join(root, "model.bin", "export"), "is a file, not a directory")):
    message = refusal(lambda: _save(target))
    assert tree(root) == before
    assert re.match(f"^--export_dir={re.escape(target)}: .*{why}", message), message


def test_the_run_directory_itself_is_refused_before_training(tmp_path):
  run = tmp_path / "run"
  with pytest.raises(ValueError, match=f"^--export_dir={run}: is --model_dir"):
    export.check_export_dir(str(run), model_dir=str(run))             # absent as yet
  with pytest.raises(ValueError, match=f"^--export_dir={tmp_path}: holds --model_dir"):
    export.check_export_dir(str(tmp_path), model_dir=str(run))
  assert export.check_export_dir(str(run / "export"), model_dir=str(run)) == "new"
  assert list(tmp_path.iterdir()) == []


def test_an_earlier_export_is_replaced_and_other_files_kept(root, tmp_path):
  asset = tmp_path / "vocab.txt"
  asset.write_text("a b c\n")
  target = fileio.join(root, "serving")
  _save(target, upper=True, asset=str(asset))
  first = tree(target)
  assert "saved_model.pb" in first and "assets/vocab.txt" in first
  _write(fileio.join(target, "NOTES.md"), b"kept")     # somebody's file in our export
  _save(target, upper=False)                          # no asset this time
  second = tree(target)
  assert "assets/vocab.txt" not in second             # the earlier export's own file: gone
  assert second["NOTES.md"] == b"kept"                # not an export's entry: never touched
  assert _served(target) == {"lower": "xy"}
  assert outputs.kind_of(target) == outputs.SAVED_MODEL
  assert sorted(fileio.listdir(root)) == ["serving"]  # no temporary export left


def test_an_earlier_versions_unmarked_export_is_replaced(root):
  target = fileio.join(root, "old_export")
  _save(target)
  marker = fileio.join(target, outputs.OUTPUT_MARKER)
  if fileio.exists(marker):
    fileio.remove(marker)                             # as an earlier version left it
  _save(target, upper=False)
  assert _served(target) == {"lower": "xy"}
  assert outputs.kind_of(target) == outputs.SAVED_MODEL
  fileio.remove(marker)
  assert export.is_earlier_export(target) and export.check_export_dir(target) == "earlier"


def test_checked_again_right_before_publishing(root, monkeypatch):
  """Files that appear at the path while the export is written and checked (a training run
  of hours) are not deleted: the export is refused in one line and its temporary copy removed."""
  target = fileio.join(root, "late")
  compare = export._compare

  def meanwhile(*args):
    if not fileio.exists(fileio.join(target, "theirs.txt")):
      _write(fileio.join(target, "theirs.txt"), b"arrived during training")
    return compare(*args)

  monkeypatch.setattr(export, "_compare", meanwhile)
  message = refusal(lambda: _save(target))
  assert tree(root) == {"late/": None, "late/theirs.txt": b"arrived during training"}
  assert message.startswith(f"--export_dir={target}: holds files this project did not write")
