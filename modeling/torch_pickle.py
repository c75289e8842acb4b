"""Reads a PyTorch state dict (`pytorch_model.bin`, the zip format of torch >= 1.6) into numpy
arrays without importing torch.

The file is a zip archive: `<name>/data.pkl` pickles the dict, whose tensors refer (pickle
"persistent ids") to raw little-endian storages `<name>/data/<key>`; each tensor is rebuilt by
`torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)`. The unpickler below
allows exactly those globals (and OrderedDict), so the file cannot run code, and builds
numpy views instead of tensors. The legacy (pre-1.6, non-zip) format is refused with a one-line
error.
"""

import collections
import io
import pickle
import zipfile

import numpy as np

from data_utils import fileio

_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
    "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
    "BFloat16Storage": "bfloat16"}


class _StorageType:
  def __init__(self, name):
    self.name = name


def _rebuild_tensor(storage, offset, size, stride, *unused):
  if not size:
    return storage[offset:offset + 1].reshape(())
  itemsize = storage.dtype.itemsize
  return np.lib.stride_tricks.as_strided(storage[offset:], shape=tuple(size),
                                         strides=tuple(s * itemsize for s in stride)).copy()


def _rebuild_parameter(data, requires_grad, backward_hooks, *unused):
  return data


class _Unpickler(pickle.Unpickler):

  def __init__(self, file, archive, prefix):
    super().__init__(file)
    self.archive, self.prefix = archive, prefix

  def find_class(self, module, name):
    if module == "torch._utils" and name == "_rebuild_tensor_v2":
      return _rebuild_tensor
    if module == "torch._utils" and name == "_rebuild_parameter":
      return _rebuild_parameter
    if module == "torch" and name in _STORAGE_DTYPES:
      return _StorageType(name)
    if module == "collections" and name == "OrderedDict":
      return collections.OrderedDict
    raise pickle.UnpicklingError(f"unsupported object {module}.{name}")

  def persistent_load(self, pid):
    kind, storage_type, key = pid[0], pid[1], pid[2]
    if kind != "storage":
      raise pickle.UnpicklingError(f"unsupported persistent id {kind!r}")
    raw = self.archive.read(f"{self.prefix}/data/{key}")
    dtype = _STORAGE_DTYPES[storage_type.name]
    if dtype == "bfloat16":     # widen to float32: bf16 bits are the high half of a float32
      bits = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
      return bits.view(np.float32)
    return np.frombuffer(raw, dtype)


def load_state_dict(path):
  """{name: numpy array} of a PyTorch zip-format state dict file."""
  data = io.BytesIO(fileio.read_bytes(path))
  if not zipfile.is_zipfile(data):
    raise ValueError(f"{path}: not a zip-format PyTorch file (legacy format: needs torch)")
  with zipfile.ZipFile(data) as archive:
    pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
    if not pickles:
      raise ValueError(f"{path}: no data.pkl in the archive")
    prefix = pickles[0][:-len("/data.pkl")]
    with archive.open(pickles[0]) as f:
      try:
        state = _Unpickler(f, archive, prefix).load()
      except (pickle.UnpicklingError, KeyError) as e:
        raise ValueError(f"{path}: {e}") from None
  return dict(state)
