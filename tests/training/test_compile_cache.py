"""XLA's persistent compilation cache (training/compile_cache.py): a second run of the same
program loads it (the run summary's count, not a timing), a changed program or TensorFlow does
not, concurrent runs sharing a cache both finish right, a damaged entry is ignored with a
warning. The reference results come from the same program run with the cache off."""

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests import warm
from tests.hang_guard import HANG_GUARD
from training import compile_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Jit-compiled programs, one per size in argv[2] ("8,12"); prints their results and the
# cache's count.
PROGRAM = r"""
from data_utils import cli_app; cli_app.skip_keras_optional_imports()   # as a script starts
import json, sys
from training import compile_cache
cache = compile_cache.enable(sys.argv[1])
import tensorflow as tf
step = tf.function(lambda x, lr: tf.reduce_sum(tf.tanh(tf.matmul(x, x) * lr), axis=0),
                   jit_compile=True)
out = {}
for n in map(int, sys.argv[2].split(",")):
  x = tf.reshape(tf.range(n * n, dtype=tf.float32), [n, n]) / float(n * n)
  out[n] = step(x, tf.constant(0.5)).numpy().tolist()
loaded, compiled = cache.counts() if cache else (None, None)
print(json.dumps({"out": out, "loaded": loaded, "compiled": compiled}))
"""
SIZES = (8, 12, 16)


def run(cache, sizes=(8,), env=None, wait=True):
  proc = warm.popen([sys.executable, "-c", PROGRAM, cache, ",".join(map(str, sizes))],
                          cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {})))
  return finish(proc) if wait else proc


def finish(proc):
  out, err = proc.communicate(timeout=HANG_GUARD)
  assert proc.returncode == 0, err[-3000:]
  result = json.loads(out.strip().splitlines()[-1])
  result["out"] = {int(n): v for n, v in result["out"].items()}
  return result, err


def entries(base):
  return sorted(glob.glob(os.path.join(base, "*", compile_cache.PREFIX + "__*.pb")))


@pytest.fixture(scope="module")
def reference():
  """The programs' results with the cache off, per size."""
  return run("off", SIZES)[0]["out"]


def test_second_run_is_served_from_the_cache(tmp_path, reference):
  base = str(tmp_path / "cache")
  first, _ = run(base)
  assert (first["loaded"], first["compiled"]) == (0, 1)
  assert len(entries(base)) == 1 and os.path.exists(entries(base)[0] + compile_cache.SIDECAR)
  second, _ = run(base)
  assert (second["loaded"], second["compiled"]) == (1, 0)
  assert second["out"][8] == first["out"][8] == reference[8]
  other, _ = run(base, (12,))                     # another shape: another program
  assert (other["loaded"], other["compiled"]) == (0, 1) and other["out"][12] == reference[12]
  assert len(entries(base)) == 2
  # XLA_FLAGS change how XLA compiles the same program: a directory of their own
  flagged, _ = run(base, (8,), env={"XLA_FLAGS": "--xla_cpu_enable_fast_min_max=false"})
  assert (flagged["loaded"], flagged["compiled"]) == (0, 1) and flagged["out"][8] == reference[8]
  assert len({os.path.dirname(p) for p in entries(base)}) == 2


def test_key_covers_tensorflow_version_and_flags(monkeypatch, tmp_path):
  base = str(tmp_path)
  here = compile_cache.key_dir(base)
  assert compile_cache.key_dir(base) == here
  assert os.path.basename(here).startswith(f"tf{tf.__version__}-")
  monkeypatch.setattr(tf, "__version__", "2.99.0")
  other = compile_cache.key_dir(base)
  assert other != here and os.path.basename(other).startswith("tf2.99.0-")
  monkeypatch.undo()
  monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_persistent_cache_directory=/elsewhere")
  assert compile_cache.key_dir(base) == here        # the cache's own flags are not the key
  monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_min_cluster_size=4")
  assert compile_cache.key_dir(base) != here


def test_concurrent_runs_sharing_a_cache_both_finish_right(tmp_path, reference):
  base = str(tmp_path / "cache")
  procs = [run(base, (8, 12), wait=False), run(base, (8, 12), wait=False)]
  results = [finish(p)[0] for p in procs]
  assert all(r["out"] == {8: reference[8], 12: reference[12]} for r in results)
  assert len(entries(base)) == 2
  assert not [p for p in glob.glob(os.path.join(base, "*", "*")) if ".tmp" in p]
  again, _ = run(base, (8, 12))
  assert (again["loaded"], again["compiled"]) == (2, 0)


def test_a_damaged_entry_is_ignored_with_a_warning(tmp_path, reference):
  """Three entries damaged three ways (truncated; bits flipped at the same size, so only the
  sidecar's digest tells; no sidecar and not a protocol buffer); files of others untouched."""
  base = str(tmp_path / "cache")
  first, _ = run(base, SIZES)
  paths = entries(base)
  assert first["compiled"] == 3 and len(paths) == 3
  for path, damage in zip(paths, ("truncated", "bits_flipped", "unsealed_garbage")):
    data = bytearray(open(path, "rb").read())
    if damage == "truncated":
      data = data[:len(data) // 3]
    elif damage == "bits_flipped":
      for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0x5A
    else:
      os.remove(path + compile_cache.SIDECAR)
      data = bytearray(b"\xff" * 4096)
    with open(path, "wb") as f:
      f.write(bytes(data))
  key = os.path.dirname(paths[0])
  theirs = {"notes.txt": b"mine", "xla_compile_cache__1__2__XLA_CPU_JIT.pb": b"\xff\xff"}
  for name, data in theirs.items():
    with open(os.path.join(key, name), "wb") as f:
      f.write(data)
  result, err = run(base, SIZES)
  assert result["out"] == reference
  assert (result["loaded"], result["compiled"]) == (0, 3)
  warnings = [l for l in err.splitlines() if "damaged entry" in l]
  assert len(warnings) == 3 and all(l.startswith("warning:") for l in warnings), err
  assert sorted(p for l in warnings for p in paths if p in l) == paths
  healed, err = run(base, SIZES)                  # compiled again, sound again
  assert (healed["loaded"], healed["compiled"]) == (3, 0) and "damaged" not in err
  for name, data in theirs.items():
    assert open(os.path.join(key, name), "rb").read() == data


def test_a_child_run_replaces_the_cache_flags_its_parent_run_set(tmp_path):
  """A run started by a run of ours inherits its TF_XLA_FLAGS: the cache part is the parent's,
  not the user's, so the child uses its own directory. A user's own cache flag is left alone."""
  parent, child, users = (str(tmp_path / name) for name in ("parent", "child", "users"))
  ours = (f"--tf_xla_persistent_cache_directory={parent}/tf-x "
          f"--tf_xla_persistent_cache_prefix={compile_cache.PREFIX}")
  inherited = {"TF_XLA_FLAGS": f"--tf_xla_min_cluster_size=1 {ours}",
               "XLNET_COMPILE_CACHE_SET": ours}
  result, _ = run(child, env=inherited)
  assert (result["loaded"], result["compiled"]) == (0, 1)
  assert len(entries(child)) == 1 and not os.path.exists(parent)
  result, _ = run(child, env={"TF_XLA_FLAGS": f"--tf_xla_persistent_cache_directory={users}",
                              "XLNET_COMPILE_CACHE_SET": ours})
  assert (result["loaded"], result["compiled"]) == (None, None)
  assert os.listdir(users) and len(entries(child)) == 1


def test_enabling_after_tensorflow_started_changes_nothing(monkeypatch, tmp_path):
  """TensorFlow reads TF_XLA_FLAGS once, when it sets up its devices: a cache named after that
  would never be used, so none is reported and no flag is left for child processes."""
  tf.constant(1.0)                                 # TensorFlow is running in this process
  monkeypatch.setattr(compile_cache, "_active", None)
  monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
  lines = []
  assert compile_cache.enable(str(tmp_path / "cache"), log=lines.append) is None
  assert "TF_XLA_FLAGS" not in os.environ and not os.path.exists(tmp_path / "cache")
  assert len(lines) == 1 and lines[0].startswith("note: XLA compile cache not used")


def test_well_formed_against_protobuf_serializations():
  example = tf.train.Example(features=tf.train.Features(feature={
      "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(300)))),
      "w": tf.train.Feature(float_list=tf.train.FloatList(value=np.linspace(0, 1, 50)))}))
  data = example.SerializeToString()
  assert compile_cache.well_formed(data)
  graph = tf.function(lambda x: x * 2.0).get_concrete_function(tf.TensorSpec([3])).graph
  assert compile_cache.well_formed(graph.as_graph_def().SerializeToString())
  assert not any(compile_cache.well_formed(data[:k]) for k in range(1, len(data)))
  assert not compile_cache.well_formed(b"")
  assert not compile_cache.well_formed(b"\x07" + data)     # wire type 7 does not exist


def test_directory_from_flag_environment_or_default(monkeypatch, tmp_path):
  monkeypatch.delenv(compile_cache.ENV, raising=False)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
  assert compile_cache.resolve() == os.path.join(str(tmp_path), "xlnet-tf", "xla")
  monkeypatch.setenv(compile_cache.ENV, "/from/env")
  assert compile_cache.resolve() == "/from/env"
  assert compile_cache.resolve("/from/flag") == "/from/flag"
  for off in ("off", "OFF", "none", ""):
    assert compile_cache.resolve(off) is None
  monkeypatch.setenv(compile_cache.ENV, "off")
  assert compile_cache.resolve() is None


def test_loading_an_entry_is_quiet_but_a_machine_mismatch_is_not():
  """The two lines TensorFlow 2.21 logs on every load (its text-format attempt; LLVM tuning
  hints named as CPU features) are start-up noise; an instruction-set mismatch is not."""
  import re
  from data_utils import cli_app
  noise = re.compile("|".join(f"(?:{p})" for p in cli_app.NATIVE_NOISE))
  stamp = "E0000 00:00:1795862525.637034     945 "
  loader = ("cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. Target machine feature {} is "
            "not  supported on the host machine. Machine type used for XLA:CPU compilation "
            "doesn't match the machine type for execution.")
  assert noise.match(stamp + "text_format.cc:378] Error parsing text-format "
                     "tensorflow.XlaSerializedCacheEntry: 2:1: Expected identifier, got: +")
  assert noise.match(stamp + loader.format("+prefer-no-scatter"))
  assert noise.match(stamp + loader.format("+prefer-no-gather"))
  assert not noise.match(stamp + loader.format("+avx512f"))
  assert not noise.match(stamp + "text_format.cc:378] Error parsing text-format tensorflow.GraphDef")
