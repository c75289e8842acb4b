"""The tokenizer that travels with a model: its files in every export, a record of which one it
is, and the check that a fine-tuning run reads its text with the tokenizer its checkpoint
learned.

A tokenizer is a `Source`: a SentencePiece model (`--sp_model`, with `--uncased`) or a
WordPiece vocab.txt (`--vocab_file`, MPNet's released vocabulary, always lower-cased). An export
directory holds a copy of the file (`spiece.model` / `vocab.txt`), the Hugging Face tokenizer
files that make `transformers.AutoTokenizer.from_pretrained(dir)` give this project's ids, and
`INFO` (JSON: kind, file, sha256 of its bytes, uncased), written last.

Hugging Face's side, per family and tokenizer:
  xlnet + SentencePiece   XLNetTokenizer (spiece.model; do_lower_case = uncased): the release's
                          normalisation (quotes, NFKD without accents, lower-casing) and
                          `A <sep> B <sep> <cls>`, left padded, as data_utils/layouts.py.
                          Differences: transformers 5 drops the release's digit-comma split
                          ("1,000," -> "1,000" ","), so a piece ending in a digit and a comma is
                          kept whole there; every other text gives the same ids.
  mpnet + WordPiece       MPNetTokenizer (vocab.txt, lower-cased): `<s> A </s></s> B </s>`.
  mpnet + SentencePiece   no transformers class joins XLNet's pieces and MPNet's rows, so the
                          export writes `tokenizer.json` (the `tokenizers` library's format:
                          XLNetTokenizer's normalisation and Unigram pieces with MPNet's
                          template, <s> = 1, </s> = 2, <pad> = 5) loaded as a
                          PreTrainedTokenizerFast; same digit-comma difference as above.
"""

import base64
import dataclasses
import json

from data_utils import fileio
from data_utils.fingerprint import file_sha256

INFO = "tokenizer_info.json"
SENTENCEPIECE, WORDPIECE = "sentencepiece", "wordpiece"
FILE_NAMES = {SENTENCEPIECE: "spiece.model", WORDPIECE: "vocab.txt"}
FLAG = {SENTENCEPIECE: "--sp_model", WORDPIECE: "--vocab_file"}
# XLNet's SentencePiece symbols (data_utils/tokenization.py puts them at ids 0-8).
_XLNET_SPECIALS = dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>", sep_token="<sep>",
                       pad_token="<pad>", cls_token="<cls>", mask_token="<mask>",
                       additional_special_tokens=["<eop>", "<eod>"])


@dataclasses.dataclass(frozen=True)
class Source:
  """One tokenizer: `kind` (SENTENCEPIECE | WORDPIECE), the file's `path`, `uncased`."""
  kind: str
  path: str
  uncased: bool = False

  @classmethod
  def of(cls, sp_model=None, vocab_file=None, uncased=False):
    """The tokenizer the flags name (--vocab_file first, as layouts.make_tokenizer), or None."""
    if vocab_file:
      return cls(WORDPIECE, vocab_file, True)
    if sp_model:
      return cls(SENTENCEPIECE, sp_model, bool(uncased))
    return None

  @property
  def flag(self):
    return FLAG[self.kind]

  def sha256(self):
    return file_sha256(self.path)

  def vocab_size(self):
    """Pieces of the SentencePiece model / lines of vocab.txt."""
    if self.kind == WORDPIECE:
      return len([line for line in fileio.read_text(self.path).split("\n") if line.strip()])
    from data_utils.tokenization import read_model_bytes
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(read_model_bytes(self.path))
    return sp.GetPieceSize()

  def describe(self, sha=None):
    sha = sha or self.sha256()
    case = ", uncased" if self.uncased and self.kind == SENTENCEPIECE else ""
    return f"{self.path} (sha256 {sha[:12]}{case})"


# ---- writing ------------------------------------------------------------------------------------
def write(directory, source, family=None, log=None):
  """Copies `source`'s file into `directory` (spiece.model / vocab.txt), writes the Hugging Face
  tokenizer files of `family` ("xlnet" | "mpnet"; None: none) and INFO last, each atomically.
  Returns the names written."""
  name = FILE_NAMES[source.kind]
  data = fileio.read_bytes(source.path)
  fileio.write_atomic(fileio.join(directory, name), data)
  written = [name]
  if family is not None:
    for file_name, content in hf_files(source, family, data).items():
      fileio.write_atomic(fileio.join(directory, file_name), content)
      written.append(file_name)
  import hashlib
  info = {"kind": source.kind, "file": name, "sha256": hashlib.sha256(data).hexdigest(),
          "uncased": source.uncased}
  fileio.write_atomic(fileio.join(directory, INFO), json.dumps(info, indent=2) + "\n")
  if log:
    log(f"tokenizer {source.describe(info['sha256'])} written with the model: "
        f"{', '.join(written)}")
  return written + [INFO]


def hf_files(source, family, data):
  """{file name: text} of the Hugging Face tokenizer files of `family` for `source` (its file's
  bytes `data` already copied beside them)."""
  if family == "xlnet":
    if source.kind != SENTENCEPIECE:
      raise ValueError("an XLNet model's tokenizer is a SentencePiece model (--sp_model)")
    config = dict(tokenizer_class="XLNetTokenizer", do_lower_case=source.uncased,
                  remove_space=True, keep_accents=False, padding_side="left",
                  **_XLNET_SPECIALS)
  elif source.kind == WORDPIECE:
    unk = "[UNK]" if "[UNK]" in data.decode("utf-8").split("\n") else "<unk>"
    config = dict(tokenizer_class="MPNetTokenizer", do_lower_case=True,
                  tokenize_chinese_chars=True, strip_accents=None, bos_token="<s>",
                  eos_token="</s>", sep_token="</s>", cls_token="<s>", unk_token=unk,
                  pad_token="<pad>", mask_token="<mask>")
  else:    # MPNet rows over XLNet's SentencePiece symbols
    config = dict(tokenizer_class="PreTrainedTokenizerFast", bos_token="<s>", eos_token="</s>",
                  sep_token="</s>", cls_token="<s>", unk_token="<unk>", pad_token="<pad>",
                  mask_token="<mask>", padding_side="right")
    return {"tokenizer_config.json": _dump(config),
            "special_tokens_map.json": _dump(_specials(config)),
            "tokenizer.json": mpnet_sentencepiece_json(data, source.uncased)}
  return {"tokenizer_config.json": _dump(config),
          "special_tokens_map.json": _dump(_specials(config))}


def written_names(source, family=None):
  """The names `write` puts into a directory for `source` (and `family`'s HF files)."""
  names = [FILE_NAMES[source.kind]]
  if family is not None:
    names += ["tokenizer_config.json", "special_tokens_map.json"]
    if family == "mpnet" and source.kind == SENTENCEPIECE:
      names.append("tokenizer.json")
  return names + [INFO]


ALL_NAMES = ("spiece.model", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
             "tokenizer.json", INFO)


def remove_stale(directory, keep=()):
  """Removes the tokenizer files of an earlier export from `directory` (one of this project's
  exports: only these names) except `keep`, so a directory never holds two tokenizers."""
  for name in ALL_NAMES:
    path = fileio.join(directory, name)
    if name not in keep and fileio.exists(path):
      fileio.remove(path)


def hf_files_check(source, family):
  """ValueError (one line) when `family`'s Hugging Face export cannot carry `source`."""
  if family == "xlnet" and source.kind != SENTENCEPIECE:
    raise ValueError(f"{source.flag}: an XLNet model's tokenizer is a SentencePiece model "
                     "(--sp_model)")


def _specials(config):
  return {k: v for k, v in config.items() if k.endswith("_token") or k.endswith("_tokens")}


def _dump(data):
  return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def mpnet_sentencepiece_json(model_bytes, uncased):
  """tokenizer.json (the `tokenizers` library's format) of a SentencePiece model with XLNet's
  symbols read as MPNet's rows: XLNetTokenizer's normaliser, pre-tokeniser and Unigram pieces
  (scores from the model), the template `<s> A </s>` / `<s> A </s></s> B </s>`."""
  import sentencepiece as spm
  from sentencepiece import sentencepiece_model_pb2
  sp = spm.SentencePieceProcessor()
  sp.LoadFromSerializedProto(model_bytes)
  proto = sentencepiece_model_pb2.ModelProto()
  proto.ParseFromString(model_bytes)
  n = sp.GetPieceSize()
  vocab = [[sp.IdToPiece(i), float(sp.GetScore(i))] for i in range(n)]
  specials = [i for i in range(n) if sp.IsControl(i) or sp.IsUnknown(i)
              or sp.IdToPiece(i) in ("<eop>", "<eod>")]
  normalizers = [{"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
                 {"type": "Replace", "pattern": {"String": "''"}, "content": '"'},
                 {"type": "NFKD"}, {"type": "StripAccents"}]
  if uncased:
    normalizers.append({"type": "Lowercase"})
  charsmap = proto.normalizer_spec.precompiled_charsmap
  if charsmap:
    normalizers.append({"type": "Precompiled",
                        "precompiled_charsmap": base64.b64encode(charsmap).decode("ascii")})
  metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
               "split": True}

  def special(token):
    return {"SpecialToken": {"id": token, "type_id": 0}}

  def sequence(name):
    return {"Sequence": {"id": name, "type_id": 0}}

  bos, eos = sp.IdToPiece(1), sp.IdToPiece(2)
  data = {
      "version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [{"id": i, "content": sp.IdToPiece(i), "single_word": False,
                        "lstrip": False, "rstrip": False, "normalized": False, "special": True}
                       for i in specials],
      "normalizer": {"type": "Sequence", "normalizers": normalizers},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                                              metaspace]},
      "post_processor": {
          "type": "TemplateProcessing",
          "single": [special(bos), sequence("A"), special(eos)],
          "pair": [special(bos), sequence("A"), special(eos), special(eos), sequence("B"),
                   special(eos)],
          "special_tokens": {bos: {"id": bos, "ids": [1], "tokens": [bos]},
                             eos: {"id": eos, "ids": [2], "tokens": [eos]}}},
      "decoder": dict(metaspace),
      "model": {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": False}}
  return json.dumps(data, ensure_ascii=False) + "\n"


# ---- reading --------------------------------------------------------------------------------------
def model_directory(path):
  """The directory of an --init_checkpoint: itself when a directory, else the prefix's."""
  path = str(path).rstrip("/")
  return path if fileio.isdir(path) else fileio.dirname(path)


def read(path):
  """(Source, sha256) recorded beside the checkpoint `path` (a pretraining export, a Hugging
  Face directory this project wrote, or a checkpoint prefix in one), or None (a release)."""
  directory = model_directory(path)
  if not directory:
    return None
  # a pretraining run's MODEL_DIR (or a checkpoint in its ckpt/): its export records it
  run_dir = fileio.dirname(directory) if fileio.basename(directory) == "ckpt" else directory
  candidates = [directory, fileio.join(run_dir, "export")]
  info_path = next((fileio.join(d, INFO) for d in candidates
                    if fileio.exists(fileio.join(d, INFO))), None)
  if info_path is None:
    return None
  directory = fileio.dirname(info_path)
  try:
    info = json.loads(fileio.read_text(info_path))
    source = Source(info["kind"], fileio.join(directory, info["file"]), bool(info["uncased"]))
    sha = info["sha256"]
  except (ValueError, KeyError, TypeError) as e:
    raise ValueError(f"{info_path}: not a tokenizer record of this project ({e})") from None
  if source.kind not in FILE_NAMES or not fileio.exists(source.path):
    raise ValueError(f"{info_path}: names {source.path}, which is missing")
  return source, sha


# ---- fine-tuning: which tokenizer --------------------------------------------------------------------
def resolve(init_checkpoint, given, uncased_given, vocab_size=None, log=print):
  """The tokenizer a fine-tuning run must use.

  init_checkpoint: --init_checkpoint (or None); given: the Source of --sp_model / --vocab_file
  (or None); uncased_given: whether --uncased was on the command line; vocab_size: the model
  config's vocabulary size (n_token / vocab_size).

  A checkpoint with a recorded tokenizer: that tokenizer when none is given (and its case when
  --uncased is not given); a different file, or --uncased against it, is refused (ValueError,
  one line naming both). A checkpoint without one (a release): the given tokenizer's size must
  be the config's. Returns the Source to use (None when there is none)."""
  recorded = read(init_checkpoint) if init_checkpoint else None
  if recorded is None:
    if given is not None and init_checkpoint and vocab_size is not None:
      size = given.vocab_size()
      if size != vocab_size:
        raise ValueError(f"{given.flag}={given.path} has {size} tokens but the model config of "
                         f"--init_checkpoint={init_checkpoint} has a vocabulary of {vocab_size}: "
                         "not the tokenizer this checkpoint was trained with")
    return given
  source, sha = recorded
  if given is None:
    log(f"tokenizer: {source.describe(sha)}, recorded with --init_checkpoint")
    return source
  given_sha = given.sha256()
  if given.kind != source.kind or given_sha != sha:
    raise ValueError(f"{given.flag}={given.describe(given_sha)} is not the tokenizer "
                     f"--init_checkpoint={init_checkpoint} was trained with: "
                     f"{source.describe(sha)}; leave {given.flag} out to use it")
  if given.kind == SENTENCEPIECE and given.uncased != source.uncased:
    if uncased_given:
      raise ValueError(f"--{'' if given.uncased else 'no'}uncased: --init_checkpoint="
                       f"{init_checkpoint} was trained {'un' if source.uncased else ''}cased "
                       f"({source.describe(sha)}); leave --uncased out to use its case")
    return dataclasses.replace(given, uncased=source.uncased)
  return given
