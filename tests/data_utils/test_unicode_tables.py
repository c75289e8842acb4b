"""sp_graph's Unicode tables, built from the assigned code points only, against a scan of every
code point (the reference below: Python's own NFKD, lower, isspace and final-sigma rule on each
of the 0x110000 less the surrogates)."""

import unicodedata

from data_utils import sp_graph


def _full_scan():
  nfkd, lower, props = {}, {}, {}
  for cp in range(0x110000):
    if 0xD800 <= cp < 0xE000:
      continue
    c = chr(cp)
    if not c.isascii():
      d = "".join(x for x in unicodedata.normalize("NFKD", c) if not unicodedata.combining(x))
      if d != c:
        nfkd[cp] = [ord(x) for x in d]
    if c.lower() != c and c != "\u03a3":
      lower[cp] = [ord(x) for x in c.lower()]
    bits = sp_graph._SPACE_BIT if c.isspace() else 0
    if (c + "\u03a3").lower()[-1] == "\u03c2":
      bits |= sp_graph._CASED_BIT
    elif ("A" + c + "\u03a3").lower()[-1] == "\u03c2":
      bits |= sp_graph._IGNORABLE_BIT
    if bits:
      props[cp] = bits
  return {"nfkd": nfkd, "lower": lower, "props": props}


def test_tables_equal_a_scan_of_every_code_point():
  tables = sp_graph._unicode_tables()
  reference = _full_scan()
  assert tables == reference
  for name in ("nfkd", "lower", "props"):      # the same order too (the tables' keys)
    assert list(tables[name]) == list(reference[name])
  assert tables["nfkd"][0xFB01] == [ord("f"), ord("i")]          # the ligature "ﬁ"
  assert tables["lower"][0x130] == [ord("i"), 0x307]             # "İ"
  assert tables["props"][0x3000] == sp_graph._SPACE_BIT
