"""Writes fixed-size tf.train.Example records as a TFRecord file, without TensorFlow.

All records of a pretraining shard have the same byte size (record_format.py),
so the protobuf framing is one constant header per feature and the TFRecord
CRC32C checksums are computed record by record by `google-crc32c` (the C library TensorFlow's
and Google Cloud's Python clients use: the CPU's CRC32 instruction, ~1 ms per 1.6 MB shard) when it
is installed, else for all records at once in numpy (lockstep over byte columns, ~10x slower;
same values). Reading back with `tf.data.TFRecordDataset` verifies both.
"""

import numpy as np

try:
  import google_crc32c as _google_crc32c
  if _google_crc32c.implementation != "c":      # its pure-Python fallback is slower than numpy
    _google_crc32c = None
except ImportError:
  _google_crc32c = None

_CRC_TABLE = None


def _crc_table():
  global _CRC_TABLE
  if _CRC_TABLE is None:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
      table = np.where(table & 1, (table >> 1) ^ np.uint32(0x82F63B78), table >> 1)
    _CRC_TABLE = table.astype(np.uint32)
  return _CRC_TABLE


def crc32c(rows, native=True):
  """CRC32C (Castagnoli) of each row of a uint8 [N, M] array -> uint32 [N].

  `native=False` uses numpy even when google-crc32c is installed (the tests compare the two)."""
  rows = np.asarray(rows, np.uint8)
  n, m = rows.shape
  if native and _google_crc32c is not None and m:
    data = rows.tobytes()
    cuts = range(0, n * m, m)
    return np.fromiter(map(_google_crc32c.value, map(data.__getitem__, map(
        slice, cuts, range(m, n * m + 1, m)))), np.uint32, count=n)
  if n < 64:                      # a few rows: the plain byte-at-a-time loop
    table = _crc_table()
    crc = np.full(n, 0xFFFFFFFF, np.uint32)
    for k in range(m):
      crc = table[(crc ^ rows[:, k]) & 0xFF] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)
  # CRC is affine in the data: crc(row) = crc(M zero bytes) ^ XOR_k T_k[row[k]], where T_k[b]
  # is byte b's contribution from position k. Columns equal in every row (the constant protobuf
  # headers) fold into the constant; the others cost one gather and one XOR each.
  tables, zero = _position_tables(m)
  same = (rows == rows[:1]).all(axis=0)
  crc = np.full(n, zero ^ np.bitwise_xor.reduce(tables[np.flatnonzero(same), rows[0, same]]),
                np.uint32)
  cols = np.ascontiguousarray(rows[:, ~same].T)
  for table, col in zip(tables[~same], cols):
    crc ^= table[col]
  return crc


_POSITION_TABLES = {}


def _position_tables(m):
  """(uint32 [M, 256] contribution of each byte value at each position, CRC of M zeros)."""
  if m not in _POSITION_TABLES:
    table = _crc_table()
    tables = np.empty([m, 256], np.uint32)
    t = table.copy()                   # a byte at the last position: one table step
    for k in range(m - 1, -1, -1):
      tables[k] = t
      t = table[t & 0xFF] ^ (t >> np.uint32(8))    # one more zero byte after it
    zero = np.uint32(0xFFFFFFFF)
    for _ in range(m):
      zero = table[(zero ^ 0) & 0xFF] ^ (zero >> np.uint32(8))
    _POSITION_TABLES.clear()
    _POSITION_TABLES[m] = (tables, np.uint32(zero ^ np.uint32(0xFFFFFFFF)))
  return _POSITION_TABLES[m]


def masked_crc32c(rows, native=True):
  crc = crc32c(rows, native).astype(np.uint64)
  masked = ((crc >> 15) | (crc << 17)) + 0xA282EAD8
  return (masked & 0xFFFFFFFF).astype(np.uint32)


def _varint(value):
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    out.append(byte | (0x80 if value else 0))
    if not value:
      return bytes(out)


def _field(number, payload_len):
  """Tag (wire type 2, length-delimited) and length of one protobuf field."""
  return _varint(number << 3 | 2) + _varint(payload_len)


class ExampleLayout:
  """The byte layout of an Example whose features are all fixed-size bytes.

  `layout.serialize({name: uint8 [N, size]})` returns uint8 [N, record_bytes].
  """

  def __init__(self, feature_sizes):
    self.sizes = dict(feature_sizes)
    self.pieces = []          # (constant header bytes, feature name) in order
    body = 0
    for name, size in self.sizes.items():
      key = name.encode()
      bytes_list = _field(1, size)                          # BytesList.value
      feature = _field(1, len(bytes_list) + size)           # Feature.bytes_list
      entry_body = (_field(1, len(key)) + key + _field(2, len(feature) + len(bytes_list) + size))
      entry_len = len(entry_body) + len(feature) + len(bytes_list) + size
      header = _field(1, entry_len) + entry_body + feature + bytes_list  # Features.feature
      self.pieces.append((header, name))
      body += len(header) + size
    self.prefix = _field(1, body)                           # Example.features
    self.record_bytes = len(self.prefix) + body

  def serialize(self, features):
    n = len(next(iter(features.values())))
    out = np.empty([n, self.record_bytes], np.uint8)
    pos = len(self.prefix)
    out[:, :pos] = np.frombuffer(self.prefix, np.uint8)
    for header, name in self.pieces:
      out[:, pos:pos + len(header)] = np.frombuffer(header, np.uint8)
      pos += len(header)
      size = self.sizes[name]
      values = features[name]
      if values.shape != (n, size):
        raise ValueError(f"feature {name}: got {values.shape}, layout says ({n}, {size})")
      out[:, pos:pos + size] = values
      pos += size
    return out


def frame(records):
  """uint8 [N, M] serialized records -> the bytes of a TFRecord file."""
  n, m = records.shape
  length = np.frombuffer(np.uint64(m).tobytes(), np.uint8)
  length_crc = masked_crc32c(length[None, :])[0]
  out = np.empty([n, 12 + m + 4], np.uint8)
  out[:, :8] = length
  out[:, 8:12] = np.frombuffer(np.uint32(length_crc).tobytes(), np.uint8)
  out[:, 12:12 + m] = records
  out[:, 12 + m:] = masked_crc32c(records).astype("<u4").view(np.uint8).reshape(n, 4)
  return out.tobytes()


def intact(rows):
  """uint8 [N, 16 + M] framed records -> bool [N]: length field says M, both CRC32Cs match."""
  m = rows.shape[1] - 16
  stored = rows[:, [8, 9, 10, 11, -4, -3, -2, -1]].copy().view("<u4")
  return ((rows[:, :8].copy().view("<u8")[:, 0] == m)
          & (masked_crc32c(rows[:, :8]) == stored[:, 0])
          & (masked_crc32c(rows[:, 12:-4]) == stored[:, 1]))


def unframe(data, record_bytes):
  """The bytes of a TFRecord file of `record_bytes`-byte records -> uint8 [N, record_bytes].

  Checks the framing and both CRC32Cs of every record (what `frame` writes); raises
  ValueError saying which record is damaged, or that the size is not a whole number
  of records (a truncated file).
  """
  framed = 12 + record_bytes + 4
  if len(data) % framed:
    raise ValueError(f"{len(data):,} bytes is not a whole number of {framed}-byte records "
                     "(truncated?)")
  rows = np.frombuffer(data, np.uint8).reshape(-1, framed)
  bad = np.flatnonzero(~intact(rows))
  if bad.size:
    raise ValueError(f"record {bad[0]} of {len(rows)} fails its length or CRC32C check")
  return rows[:, 12:12 + record_bytes]
