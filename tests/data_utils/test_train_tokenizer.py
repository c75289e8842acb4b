"""train_tokenizer.py's --model_prefix rules (one-line refusals, nothing written; an existing
model only replaced never, reruns with the same settings complete) and its warning for a corpus
that gives fewer pieces than asked."""

import os

import pytest

from tests import script_helpers


def _main(capsys, **flag_values):
  """The script's main in this process: (SystemExit message or None, stdout)."""
  code = script_helpers.main_exit("data_utils/train_tokenizer.py", **flag_values)
  return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def small_text(tmp_path_factory):
  """~6 KB of text: far fewer distinct pieces than 5000."""
  path = tmp_path_factory.mktemp("tok") / "text.txt"
  words = ("the quick brown fox jumps over the lazy dog while seven wizards quietly "
           "vex a jolly king and pack my box with five dozen liquor jugs").split()
  lines = [" ".join(words[(i * 7) % len(words):] + words[:(i * 7) % len(words)])
           for i in range(60)]
  path.write_text("\n".join(lines) + "\n")
  return str(path)


def test_fewer_pieces_than_asked_is_one_warning_line(tmp_path, capsys, small_text):
  code, out = _main(capsys, input_glob=small_text, model_prefix=tmp_path / "sp",
                    vocab_size=5000)
  assert code is None
  warning = [line for line in out.splitlines() if line.startswith("warning:")]
  assert len(warning) == 1 and warning[0].startswith("warning: asked for 5000 pieces, the "
                                                     "corpus gave ")
  got = int(warning[0].split("the corpus gave ")[1].split(":")[0])
  assert 9 < got < 5000 and f"({got} pieces" in out
  code, out = _main(capsys, input_glob=small_text, model_prefix=tmp_path / "sp2", vocab_size=50)
  assert code is None and "warning" not in out


def test_rerun_same_settings_completes_other_settings_refused(tmp_path, capsys, small_text):
  prefix = tmp_path / "m" / "sp"
  assert _main(capsys, input_glob=small_text, model_prefix=prefix, vocab_size=50)[0] is None
  written = {n: (tmp_path / "m" / n).read_bytes() for n in os.listdir(tmp_path / "m")}
  assert sorted(written) == ["sp.json", "sp.model", "sp.vocab"]
  code, out = _main(capsys, input_glob=small_text, model_prefix=prefix, vocab_size=50)
  assert code is None and "already complete" in out
  code, _ = _main(capsys, input_glob=small_text, model_prefix=prefix, vocab_size=55, seed=1)
  assert code.startswith("train_tokenizer.py: --model_prefix=") and "\n" not in code
  assert "--vocab_size=55 (the model's: 50)" in code and "--seed=1 (the model's: 0)" in code
  other = tmp_path / "other.txt"
  other.write_text(open(small_text).read() + "one more line\n")
  code, _ = _main(capsys, input_glob=other, model_prefix=prefix, vocab_size=50)
  assert "the input text" in code and "differs" in code
  (tmp_path / "m" / "sp.model").write_bytes(written["sp.model"] + b"x")     # not ours any more
  code, _ = _main(capsys, input_glob=small_text, model_prefix=prefix, vocab_size=50)
  assert "changed since this script wrote it" in code
  assert (tmp_path / "m" / "sp.model").read_bytes() == written["sp.model"] + b"x"
  assert {n: (tmp_path / "m" / n).read_bytes() for n in ["sp.json", "sp.vocab"]} == \
      {n: written[n] for n in ["sp.json", "sp.vocab"]}


def test_model_prefix_that_cannot_be_used_is_refused(tmp_path, capsys, small_text):
  (tmp_path / "d").mkdir()
  (tmp_path / "afile").write_text("precious")
  (tmp_path / "theirs.model").write_bytes(b"someone's model")
  (tmp_path / "x.model").mkdir()
  cases = {"d": "is a directory", "afile/sp": "afile is a file, not a directory",
           "theirs": "was not written by this script", "x": "is an existing directory"}
  for prefix, message in cases.items():
    code, _ = _main(capsys, input_glob=small_text, model_prefix=tmp_path / prefix,
                    vocab_size=50)
    assert code.startswith("train_tokenizer.py: ") and message in code, (prefix, code)
    assert "\n" not in code
  assert sorted(os.listdir(tmp_path)) == ["afile", "d", "theirs.model", "x.model"]
  assert os.listdir(tmp_path / "d") == [] and os.listdir(tmp_path / "x.model") == []
  assert (tmp_path / "theirs.model").read_bytes() == b"someone's model"
  # a failed training writes nothing
  code, _ = _main(capsys, input_glob=small_text, model_prefix=tmp_path / "new" / "sp",
                  vocab_size=5)
  assert code.startswith("train_tokenizer.py: SentencePiece failed") and "\n" not in code
  assert not (tmp_path / "new").exists() or os.listdir(tmp_path / "new") == []
