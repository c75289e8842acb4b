"""data_utils/fileio.py on TensorFlow's in-memory file system (the gs:// code path)."""

import os

import pytest

from data_utils import fileio
from tests.hang_guard import HANG_GUARD


def test_text_reads_with_universal_newlines_and_strict_decoding():
  fileio.write_atomic("ram://fileio/a/t.txt", b"one\r\ntwo\rthree\n\xc3\xa9\n")
  assert fileio.read_text("ram://fileio/a/t.txt") == "one\ntwo\nthree\n\u00e9\n"
  with fileio.open_text("ram://fileio/a/t.txt") as f:
    assert [line for line in f] == ["one\n", "two\n", "three\n", "\u00e9\n"]
  fileio.write_atomic("ram://fileio/a/bad.txt", b"ok\n\xff\n")
  with pytest.raises(UnicodeDecodeError):
    fileio.read_text("ram://fileio/a/bad.txt")
  assert fileio.read_text("ram://fileio/a/bad.txt", errors="replace") == "ok\n\ufffd\n"


def test_large_binary_reads_in_pieces():
  data = bytes(range(256)) * 20000   # 5 MB: several buffer fills
  fileio.write_atomic("ram://fileio/big.bin", data)
  with fileio.open_binary("ram://fileio/big.bin") as f:
    parts = iter(lambda: f.read(777_777), b"")
    assert b"".join(parts) == data
  assert fileio.size("ram://fileio/big.bin") == len(data)


def test_atomic_write_publishes_whole_or_nothing():
  with pytest.raises(RuntimeError):
    with fileio.atomic_write("ram://fileio/b/out.json") as f:
      f.write("{half")
      raise RuntimeError("killed")
  assert fileio.listdir("ram://fileio/b") == []
  fileio.write_atomic("ram://fileio/b/out.json", "{}")
  fileio.write_atomic("ram://fileio/b/out.json", '{"x": 1}')   # replaces
  assert fileio.listdir("ram://fileio/b") == ["out.json"]
  assert fileio.read_text("ram://fileio/b/out.json") == '{"x": 1}'


def test_listing_glob_and_stale_tmp_cleanup():
  for name in ("s-2.rec", "s-1.rec", "s-3.rec" + fileio.TMP_MARK + "99-abc", "other.txt"):
    fileio.write_atomic(fileio.join("ram://fileio/c", name), b"x")
  assert fileio.glob("ram://fileio/c/s-*.rec") == ["ram://fileio/c/s-1.rec",
                                                   "ram://fileio/c/s-2.rec"]
  assert fileio.remove_stale_tmp("ram://fileio/c", prefix="s-") == 1
  assert fileio.listdir("ram://fileio/c") == ["other.txt", "s-1.rec", "s-2.rec"]
  assert fileio.basename("gs://b/x/y/") == "y" and fileio.dirname("gs://b/x/y") == "gs://b/x"
  assert fileio.join("gs://b", "x", "y.json") == "gs://b/x/y.json"


@pytest.mark.parametrize("root", ["local", "ram://fileio/light"])
def test_light_functions_local_and_url(tmp_path, root):
  """The `*_light` functions (local paths without TensorFlow) behave alike on both."""
  import sys
  root = str(tmp_path) if root == "local" else root
  d = fileio.join(root, "d")
  fileio.makedirs_light(d)
  fileio.write_atomic_light(fileio.join(d, "a.txt"), b"one\r\ntwo\n")
  fileio.write_atomic_light(fileio.join(d, "a.txt"), b"one\r\ntwo\nthree\n")   # replaces
  fileio.write_atomic_light(fileio.join(d, "b.txt"), "text \u00e9")
  fileio.makedirs_light(fileio.join(d, "sub.txt"))                              # a directory
  assert fileio.listdir_light(d) == ["a.txt", "b.txt", "sub.txt"]
  assert fileio.read_bytes_light(fileio.join(d, "a.txt")) == b"one\r\ntwo\nthree\n"
  assert fileio.size_light(fileio.join(d, "a.txt")) == 15
  with fileio.open_read_light(fileio.join(d, "a.txt")) as f:
    f.seek(5)
    assert f.read(3) == b"two"
  with fileio.open_text_light(fileio.join(d, "a.txt")) as f:
    assert f.read() == "one\ntwo\nthree\n"
  with fileio.open_text_light(fileio.join(d, "b.txt")) as f:
    assert f.read() == "text \u00e9"
  pattern = fileio.join(d, "*.txt") + "," + fileio.join(d, "a*")
  assert fileio.glob_files_light(pattern) == [fileio.join(d, "a.txt"), fileio.join(d, "b.txt")]
  with pytest.raises(FileNotFoundError):
    fileio.read_bytes_light(fileio.join(d, "a"))          # a prefix of a.txt is not a file
  with pytest.raises(FileNotFoundError):
    fileio.read_bytes_light(fileio.join(d, "missing.txt"))
  fileio.remove_light(fileio.join(d, "b.txt"))
  assert fileio.listdir_light(d) == ["a.txt", "sub.txt"]
  assert not [n for n in fileio.listdir_light(d) if fileio.TMP_MARK in n]
  if root.startswith("ram://"):
    assert "tensorflow" in sys.modules


def test_light_functions_keep_local_paths_off_tensorflow(tmp_path):
  import subprocess
  import sys
  code = ("import sys; from data_utils import fileio\n"
          f"d = fileio.join({str(tmp_path)!r}, 'x')\n"
          "fileio.makedirs_light(d); p = fileio.join(d, 'f.bin')\n"
          "fileio.write_atomic_light(p, b'abc'); assert fileio.read_bytes_light(p) == b'abc'\n"
          "assert fileio.glob_files_light(d + '/*') == [p] and fileio.size_light(p) == 3\n"
          "fileio.open_read_light(p).close(); fileio.open_text_light(p).close()\n"
          "fileio.remove_light(p); assert fileio.listdir_light(d) == []\n"
          "assert 'tensorflow' not in sys.modules\n")
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  subprocess.run([sys.executable, "-c", code], cwd=root, check=True, timeout=HANG_GUARD)
