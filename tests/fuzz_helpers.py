"""Shared pieces of the fuzz suites over every reader of user files (issues #21, #31):
tests/data_utils/test_fuzz_pretrain_text.py, test_fuzz_classifier.py, test_fuzz_race.py, test_fuzz_squad.py.

Every generated input is first judged by the suite's own model of the reader's documented rules,
built by the test from the file's bytes (never from the reader): which rows are used, which are
skipped and counted, or where the file must be refused. The reader must then do exactly that:
refuse with ValueError / FileNotFoundError, one line naming the file (and the line the model
names), the two types the entry scripts catch and print as `run_xxx.py: <message>`, exactly
where the model refuses; else return exactly the model's rows in order (ids, texts, labels,
answers; for pretraining each shard's token stream and the records cut from it), with the
model's counts in its summary line. A reader that refuses every file, or drops a row while
printing a summary that agrees with it, fails. Each suite also has a test over unedited files
(zero edits: read without error, every row used), checked against the generator's own rows.
Any other exception, a hang (`no_hang`'s guard) or a wrong row fails the test; how long an
input takes never does (no hypothesis deadline: a busy machine is not a hung reader).

Inputs are valid tiny files put through random edits (hostile text inserted: combining marks,
CJK, RTL, NUL, lone surrogates, BOM, CRLF, lone CR, tabs, quotes, huge lines; bytes flipped,
lines dropped or duplicated, files truncated), raw bytes, empty and header-only files, and for
JSON documents of the wrong shape (lists for objects, missing keys, null, numbers for strings,
wrong option counts, deep nesting, huge numbers). Inputs are bounded (< 1 MB), seeds fixed
(derandomize), no example database.

Inputs per reader (max_examples, plus the @example regressions of the bugs this suite found),
and the seconds each took (2 shared cores; per file: pretrain_text 41 s and 1.1 GB peak RSS,
classifier 31 s, race 24 s, squad 18 s, start-up included):
  pretraining text -> records (writer.create; every shard's counts and token stream
    against the model, its records' lanes; pipeline.parse and expand over all)  100    28 s
  unedited text, LF and CRLF (2 shard sizes x bi_data)                           4     0.6 s
  stdlib docstring corpus (corpus.documents over hostile .py files)             200     3.1 s
  GLUE TSV, every task and split of classifier_data.GLUE (+ encode)             800    10 s
  unedited GLUE files (6 per task and split)                                    114     2.5 s
  text-classification CSV: Yelp-2/5, Amazon-2/5, DBpedia, AG News (+ encode)    400     5.5 s
  unedited CSV files (10 per task)                                               60     0.6 s
  IMDB (aclImdb folders; + encode)                                              150     3.0 s
  RACE JSON (+ race.encode with tiny and odd max_seq_length / max_qa_length)    600    12 s
  unedited RACE files                                                            60     2.5 s
  SQuAD training files (read_squad -> make_features, drawn window flags)         120     1.4 s
  SQuAD prediction files (+ extract_answers on random beams)                      80     0.8 s
  unedited SQuAD files (training and prediction)                                 60     0.5 s
  --do_eval_only data / predictions / null-odds files (against the official
    scripts' numbers, transcribed independently in test_fuzz_squad.py)          300     6.0 s

  python -m pytest tests/*/test_fuzz_*.py
"""
import contextlib
import functools
import io
import re
import signal

from hypothesis import HealthCheck, currently_in_test_context, settings
from hypothesis import event as _event
from hypothesis import strategies as st

from tests.hang_guard import HANG_GUARD

ERRORS = (ValueError, FileNotFoundError)


def fuzz_settings(n):
  """n inputs, fixed seed (derandomize), no example database, no per-input deadline (a speed
  check a loaded machine could fail; `each_input_bounded` guards against hangs instead)."""
  return settings(max_examples=n, derandomize=True, database=None, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.large_base_example,
                                         HealthCheck.function_scoped_fixture])


def event(value):
  """hypothesis.event, a no-op outside a hypothesis test (the deterministic tests share checks)."""
  if currently_in_test_context():
    _event(value)


class ReaderHang(BaseException):
  """Not an Exception: hypothesis stops at once instead of shrinking (each try would hang)."""


def each_input_bounded(test, seconds=HANG_GUARD):
  """Decorator (under @given): every input runs under no_hang."""
  @functools.wraps(test)
  def run(*args, **kwargs):
    with no_hang(seconds):
      return test(*args, **kwargs)
  return run


@contextlib.contextmanager
def no_hang(seconds=HANG_GUARD):
  """Fails a reader still running after `seconds` (a deadline only fires once it returns)."""
  def fail(*_):
    raise ReaderHang(f"reader still running after {seconds} s")
  old = signal.signal(signal.SIGALRM, fail)
  signal.setitimer(signal.ITIMER_REAL, seconds)
  try:
    yield
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


# ---- hostile text and edits ---------------------------------------------------------------------

SNIPPETS = ["\x00", "\ufeff", "\r", "\r\n", "\n", "\n\n", "\t", "\t\t", '"', '""', "'", ",",
            "\\", "\\n", "e\u0301", "\u0301\u0302\u0303", "中文字", "日本語の文", "한국어",
            "مرحبا بالعالم", "שלום", "\u202e", "\u200b", "\u2028", "\x85", "\x0b\x0c\x1c",
            "\U0001F600", "\ud800", "\udfff", "nan", "inf", "-inf", "1e309", "-1", "0", "1",
            "2", "5.5", "entailment", "neutral", "pos", "neg", "A", "E", " ", "", "_",
            "<br />", "null", "{}", "[]", "9" * 5000]
_NASTY_ALPHABET = "ab \t\r\n\"',\x00é中\u0301\ufeff\u202e\ud800"
HOSTILE = st.one_of(st.sampled_from(SNIPPETS),
                    st.text(st.characters(exclude_categories=()), max_size=12),
                    st.text(_NASTY_ALPHABET, max_size=24))
PLAIN = st.text("abcdefghij ", min_size=1, max_size=12).filter(lambda s: s.strip())


def to_bytes(text):
  return text.encode("utf-8", "surrogatepass")   # lone surrogates -> invalid UTF-8


_EDITS = ("insert", "insert", "field", "field", "bytes", "delete", "truncate", "bom", "crlf",
          "cr", "tab", "newline", "quote", "dup_line", "drop_line", "huge")


@st.composite
def edited(draw, data, max_edits=5):
  """`data` (bytes) after up to `max_edits` random edits."""
  data = bytearray(data)
  for _ in range(draw(st.integers(0, max_edits))):
    op = draw(st.sampled_from(_EDITS))
    pos = draw(st.integers(0, len(data)))
    if op == "insert":
      data[pos:pos] = to_bytes(draw(HOSTILE))
    elif op == "bytes":
      data[pos:pos] = draw(st.binary(min_size=1, max_size=6))
    elif op == "delete":
      del data[pos:pos + draw(st.integers(1, 30))]
    elif op == "truncate":    # keep 10-90% (drawing the cut point itself often cut it all)
      del data[len(data) * draw(st.integers(1, 9)) // 10:]
    elif op == "bom":
      data[:0] = b"\xef\xbb\xbf"
    elif op == "crlf":
      data = bytearray(bytes(data).replace(b"\n", b"\r\n"))
    elif op == "cr":
      data = bytearray(bytes(data).replace(b"\n", b"\r"))
    elif op in ("tab", "newline", "quote"):
      data[pos:pos] = {"tab": b"\t", "newline": b"\n", "quote": b'"'}[op]
    elif op == "field":       # one field of one line replaced (wrong label, number, empty...)
      lines = bytes(data).split(b"\n")
      k = draw(st.integers(0, len(lines) - 1))
      sep = b"\t" if b"\t" in lines[k] else b","
      fields = lines[k].split(sep)
      fields[draw(st.integers(0, len(fields) - 1))] = to_bytes(draw(HOSTILE))
      lines[k] = sep.join(fields)
      data = bytearray(b"\n".join(lines))
    elif op in ("dup_line", "drop_line"):
      lines = bytes(data).split(b"\n")
      k = draw(st.integers(0, len(lines) - 1))
      lines[k:k + 1] = [lines[k]] * (2 if op == "dup_line" else 0)
      data = bytearray(b"\n".join(lines))
    else:   # a huge line
      data[pos:pos] = b"word " * draw(st.sampled_from([2000, 60_000]))
  return bytes(data)


@st.composite
def file_bytes(draw, valid):
  """Hostile contents around one valid file: mostly edits of it; raw bytes, empty, header only."""
  branch = draw(st.integers(0, 8))    # (st.one_of does not weight a repeated branch)
  if branch < 6:
    return draw(edited(valid))
  return draw([st.binary(max_size=300), st.just(b""),
               st.just(valid.split(b"\n")[0] + b"\n")][branch - 6])


def check_error(err, path, n_lines=None):
  """The error contract: one line, names `path`, a line number (if any) inside the file."""
  assert type(err) in ERRORS, f"{type(err).__name__}: {err}"
  message = str(err)
  event("error: " + re.sub(r"[\d']+.*", "", message.split(": ", 2)[-1])[:40])
  assert len(message.splitlines()) == 1, repr(message)
  assert str(path) in message, message
  m = re.match(re.escape(str(path)) + r":(\d+):", message)
  if m and n_lines is not None:
    assert 1 <= int(m.group(1)) <= n_lines, message


def physical_lines(text):
  """Lines as csv (and universal newlines) cut them."""
  return re.split(r"\r\n|\r|\n", text)


@contextlib.contextmanager
def captured():
  buf = io.StringIO()
  with contextlib.redirect_stdout(buf):
    yield buf


def check_summary(out, path, used, *parts):
  """Readers print one summary line naming the file and the count they used (and, when given,
  each of `parts`: the totals and skip counts the test expects, as substrings). Returns it."""
  event("read" if used else "read nothing")
  lines = [l for l in out.getvalue().splitlines() if l.strip()]
  assert len(lines) == 1 and str(path) in lines[0], lines
  assert f"used {used:,} " in lines[0], lines[0]
  for part in parts:
    assert part in lines[0], (part, lines[0])
  return lines[0]


def check_refusal(err, path, line=None, n_lines=None):
  """`err` is the clean refusal the test's own model of the file predicted: check_error, and the
  message names `path:line:` when the model knows the offending line."""
  check_error(err, path, n_lines)
  if line is not None:
    assert str(err).startswith(f"{path}:{line}:"), (line, str(err))


def split_lines(data):
  """The physical lines of `data` (bytes) as csv and universal newlines cut them: \r\n, \r
  and \n end a line; the terminator of the last line does not open another."""
  lines = re.split(rb"\r\n|\r|\n", data)
  return lines[:-1] if lines[-1] == b"" else lines


def strip_bom(data):
  """utf-8-sig's rule: one BOM opening the bytes is not text."""
  return data[3:] if data.startswith(b"\xef\xbb\xbf") else data
