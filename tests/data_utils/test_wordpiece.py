"""In-graph WordPiece tokenization and MPNet packing equal Hugging Face's MPNetTokenizer."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from data_utils import wordpiece
from tests.reference_libs import require

transformers = require("transformers")

WORDS = ("the a an of to and in is it was for on with as by at from that this be are not but "
         "or his her they we you he she cafe naive resume hello world new york city play run "
         "walk talk jump read write token model train test data text word piece un able ing "
         "ed er est ly ness x y z strasse straße ο δ σ ς fi paris france capital day year time "
         "people way man woman child life hand part place case week company system program "
         "question work government number night point home water room mother area money story "
         "fact month lot right study book eye job business issue side kind head house service "
         "friend father power hour game line end member law car name president team minute idea "
         "kid body information back parent face others level office door health person art war "
         "history party result change morning reason research girl guy moment air teacher force "
         "education foot boy age policy music market sense nation plan college interest death "
         "experience effect class control care field development role effort rate heart drug "
         "show leader light voice wife police mind price report decision son view relationship "
         "town road arm difference value building action season society tax director position "
         "player record paper space ground form event official matter center couple site project "
         "activity star table need court american oil situation cost industry figure street "
         "image phone").split()
SUFFIXES = ("##s ##ed ##ing ##er ##est ##ly ##ness ##able ##aff ##ize ##ation "
            "##o ##δ ##σ ##ς").split()
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("¿¡«»—–…·")
LETTERS = list("bcdefghjklmnopqrstuvw")       # one-piece words for the truncation sweep
SENTENCES = [
    "Hello, world!",
    "Café naïve résumé",                                    # accents stripped
    "  The   new\tYork \n city  ",                          # extra whitespace
    "unaffable playing talked walkers",                     # multi-piece words
    "xylophone zebra quux",                                 # unknown words -> [UNK]
    "北京 is a city 京",                                     # CJK: one word per ideograph
    "¿Qué? ¡Sí! «a» — b… c·d",                              # Unicode punctuation
    "(a) [b] {c} <d> 'e' \"f\" a-b a/b a_b a.b.c",          # ASCII punctuation
    "",                                                     # empty
    "   ",                                                  # whitespace only
    "Straße STRASSE ΟΔΟΣ οδος",                             # no case folding; no final sigma
    "a\u200bb a\u00a0b a\u3000b a\x0bb \ufffd",             # zero-width, Unicode spaces, control
    "x" * 100 + " " + "x" * 101 + " " + "é" * 101,          # words over 100 characters -> [UNK]
    "Paris is the <mask> of France.</s><s>[UNK] <MASK>",    # special-token strings
    "THE TOKEN MODEL trains; the data tests it.",
    "ﬁ Ａ ² ½",                                             # compatibility characters (no NFKC)
]


def write_vocab(path, pieces):
  path.write_text("".join(p + "\n" for p in pieces), encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def vocab_dir(tmp_path_factory):
  """A vocab.txt laid out like microsoft/mpnet-base's: fairseq symbols, BERT's, pieces, <mask>."""
  directory = tmp_path_factory.mktemp("mpnet_vocab")
  pieces = (["<s>", "<pad>", "</s>", "<unk>", "[PAD]"] + [f"[unused{i}]" for i in range(3)]
            + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + PUNCT + WORDS + LETTERS + SUFFIXES
            + ["北", "京", "é"])
  pieces = list(dict.fromkeys(pieces)) + ["<mask>"]
  write_vocab(directory / "vocab.txt", pieces)
  return directory


@pytest.fixture(scope="module")
def tok(vocab_dir):
  return wordpiece.WordPieceTokenizer(str(vocab_dir / "vocab.txt"))


@pytest.fixture(scope="module")
def hf(vocab_dir):
  return transformers.MPNetTokenizer.from_pretrained(str(vocab_dir), local_files_only=True)


def test_special_ids(tok, hf):
  assert (tok.bos_id, tok.pad_id, tok.eos_id) == (0, 1, 2)
  assert tok.unk_id == hf.unk_token_id == 8
  assert tok.mask_id == hf.mask_token_id == tok.vocab_size - 1
  assert (tok.bos_id, tok.eos_id, tok.pad_id) == (hf.cls_token_id, hf.sep_token_id,
                                                  hf.pad_token_id)


@pytest.mark.parametrize("lower_case", [True, False])
def test_tokenize_matches_hf(vocab_dir, tok, hf, lower_case):
  if not lower_case:
    tok = wordpiece.WordPieceTokenizer(str(vocab_dir / "vocab.txt"), lower_case=False)
    hf = transformers.MPNetTokenizer.from_pretrained(str(vocab_dir), local_files_only=True,
                                                     do_lower_case=False)
  want = [hf(s, add_special_tokens=False)["input_ids"] for s in SENTENCES]
  assert tok.encode_lines(SENTENCES) == want
  if lower_case:           # the cases the sentences are there for really happen
    flat = set(itertools.chain.from_iterable(want))
    assert {tok.unk_id, tok.mask_id, tok.bos_id} <= flat
    assert want[1] == [hf.convert_tokens_to_ids(w) for w in ("cafe", "naive", "resume")]
    assert len(want[3]) > 4 and want[8] == want[9] == []


def test_encode_lines_contract(tok):
  assert tok.encode_lines([]) == []
  assert tok.encode_lines([None, "hello", ""]) == [[], tok.encode("hello"), []]
  many = SENTENCES * 70                                   # more than one batch
  assert tok.encode_lines(many) == tok.encode_lines(SENTENCES) * 70
  assert all(type(i) is int for i in tok.encode("hello world"))


def test_vocab_on_a_bucket_gives_the_same_ids(vocab_dir, tok):
  """vocab.txt at a tf.io.gfile URL (ram://, the gs:// code path) loads to the same tokenizer."""
  from data_utils import fileio
  url = "ram://wordpiece-bucket/vocab.txt"
  fileio.write_atomic(url, (vocab_dir / "vocab.txt").read_bytes())
  assert wordpiece.WordPieceTokenizer(url).encode_lines(SENTENCES) == tok.encode_lines(SENTENCES)
  with pytest.raises(ValueError, match="ram://wordpiece-bucket/nope.txt: vocab file not found"):
    wordpiece.WordPieceTokenizer("ram://wordpiece-bucket/nope.txt")


def texts_of(lengths):
  return [" ".join(LETTERS[:n]) for n in lengths]


def test_pack_pair_matches_hf_truncation(tok, hf):
  """Every (len_a, len_b) in 0..9 x 0..9 at lengths 4..16: no cut, A only, B only, both, ties."""
  pairs = list(itertools.product(range(10), repeat=2))
  texts_a, texts_b = texts_of([a for a, _ in pairs]), texts_of([b for _, b in pairs])
  ids_a, ids_b = tok.tokenize(texts_a), tok.tokenize(texts_b)
  np.testing.assert_array_equal(ids_a.row_lengths(), [a for a, _ in pairs])
  for max_len in range(4, 17):
    want = hf(texts_a, texts_b, truncation="longest_first", max_length=max_len,
              padding="max_length")
    got = wordpiece.pack_pair(ids_a, ids_b, max_len, tok.bos_id, tok.eos_id, tok.pad_id)
    np.testing.assert_array_equal(got["input_ids"], want["input_ids"], err_msg=f"L={max_len}")
    np.testing.assert_array_equal(got["input_mask"], 1 - np.array(want["attention_mask"]))
    assert got["input_ids"].dtype == tf.int32 and got["input_mask"].dtype == tf.float32


def test_longest_first_rule():
  """The tokenizers-library rule, pinned: odd budgets favour the longer side, B on a tie."""
  cases = {(6, 10, 11): (5, 6), (10, 6, 11): (6, 5), (8, 8, 11): (5, 6), (8, 8, 10): (5, 5),
           (3, 9, 10): (3, 7), (9, 3, 10): (7, 3), (1, 9, 1): (0, 1), (2, 3, 5): (2, 3)}
  for (len_a, len_b, budget), want in cases.items():
    keep_a, keep_b = wordpiece._longest_first(tf.constant([len_a]), tf.constant([len_b]), budget)
    assert (int(keep_a[0]), int(keep_b[0])) == want, (len_a, len_b, budget)


def test_pack_single_matches_hf(tok, hf):
  texts = texts_of(range(13)) + SENTENCES
  for max_len in (2, 5, 8, 32):
    want = hf(texts, truncation="longest_first", max_length=max_len, padding="max_length")
    got = tok.pack(texts, max_len=max_len)
    np.testing.assert_array_equal(got["input_ids"], want["input_ids"], err_msg=f"L={max_len}")
    np.testing.assert_array_equal(got["input_mask"], 1 - np.array(want["attention_mask"]))


def test_pack_strings_matches_hf(tok, hf):
  texts_a = SENTENCES
  texts_b = SENTENCES[::-1]
  want = hf(texts_a, texts_b, truncation="longest_first", max_length=24, padding="max_length")
  got = tok.pack(texts_a, texts_b, max_len=24)
  np.testing.assert_array_equal(got["input_ids"], want["input_ids"])
  np.testing.assert_array_equal(got["input_mask"], 1 - np.array(want["attention_mask"]))


@pytest.mark.slow
def test_graph_equals_eager(tok):
  texts_a, texts_b = tf.constant(SENTENCES), tf.constant(SENTENCES[::-1])
  spec = tf.TensorSpec([None], tf.string)
  tokenize = tf.function(tok.tokenize, input_signature=[spec])
  pack = tf.function(lambda a, b: tok.pack(a, b, max_len=20), input_signature=[spec, spec])
  assert tokenize(texts_a).to_list() == tok.tokenize(texts_a).to_list()
  got, want = pack(texts_a, texts_b), tok.pack(texts_a, texts_b, max_len=20)
  assert got["input_ids"].shape.as_list() == [len(SENTENCES), 20]
  for key in want:
    np.testing.assert_array_equal(got[key], want[key])
  # the packing alone also compiles with XLA
  ids_a, ids_b = tok.tokenize(texts_a), tok.tokenize(texts_b)
  jit = tf.function(lambda a, b: wordpiece.pack_pair(a, b, 20, 0, 2, 1), jit_compile=True)
  np.testing.assert_array_equal(jit(ids_a, ids_b)["input_ids"], want["input_ids"])


@pytest.mark.slow
def test_saved_model_serves_the_same(tok, tmp_path):
  """pack in an exported signature: the vocab table travels with the SavedModel."""
  class Serving(tf.Module):

    def __init__(self, tokenizer):
      super().__init__()
      self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def serve(self, texts_a, texts_b):
      return self.tokenizer.pack(texts_a, texts_b, max_len=16)

  path = str(tmp_path / "serving")
  tf.saved_model.save(Serving(tok), path)
  texts_a, texts_b = tf.constant(SENTENCES[:4]), tf.constant(SENTENCES[-4:])
  got = tf.saved_model.load(path).serve(texts_a, texts_b)
  want = tok.pack(texts_a, texts_b, max_len=16)
  for key in want:
    np.testing.assert_array_equal(got[key], want[key])


def test_bad_vocab(tmp_path):
  missing = str(tmp_path / "nope.txt")
  with pytest.raises(ValueError, match="nope.txt"):
    wordpiece.WordPieceTokenizer(missing)
  no_mask = write_vocab(tmp_path / "no_mask.txt", ["<s>", "<pad>", "</s>", "[UNK]", "a"])
  with pytest.raises(ValueError, match=r"no_mask\.txt.*<mask>"):
    wordpiece.WordPieceTokenizer(no_mask)
  no_unk = write_vocab(tmp_path / "no_unk.txt", ["<s>", "<pad>", "</s>", "a", "<mask>"])
  with pytest.raises(ValueError, match=r"no_unk\.txt.*\[UNK\] or <unk>"):
    wordpiece.WordPieceTokenizer(no_unk)
  fairseq_unk = write_vocab(tmp_path / "unk.txt", ["<s>", "<pad>", "</s>", "<unk>", "a", "<mask>"])
  assert wordpiece.WordPieceTokenizer(fairseq_unk).encode("a b") == [4, 3]
  with pytest.raises(ValueError, match="max_len=3"):
    wordpiece.pack_pair(tf.ragged.constant([[5]]), tf.ragged.constant([[6]]), 3, 0, 2, 1)
