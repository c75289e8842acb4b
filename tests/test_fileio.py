"""data_utils/fileio.py on TensorFlow's in-memory file system (the gs:// code path)."""

import pytest

from data_utils import fileio


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
