"""How one example becomes a row of token ids, per model type: the one module of row layouts
that fine-tuning (finetuning/) and serving (serving/) both import.

xlnet (the release's): `A <sep> [B <sep>] <cls>`, LEFT padded so `<cls>` is
  last; segment ids A = 0, B = 1, <cls> = 2, padding 4; the summary reads the
  last position.
mpnet (Hugging Face's MPNet/RoBERTa): `<s> A </s>` or `<s> A </s></s> B </s>`,
  RIGHT padded with the tokenizer's pad id; no segment ids (all 0); the
  classifier reads the first position.

input_mask is 1 on padding (the project's mask convention). Pairs too long are
cut from the end: xlnet one token at a time from the longer text (B on a tie),
as its release; mpnet as Hugging Face's MPNetTokenizer (the shorter text keeps
min(its length, budget // 2), the longer the rest; A counts as shorter on a tie;
data_utils/wordpiece.py does the same in-graph).
"""

import numpy as np

from data_utils.tokenization import CLS_ID, SEP_ID

SEG_PAD = 4
# SQuAD windows (finetuning/squad_features.py, serving/squad_graph.py): xlnet
# `doc <sep> q <sep> <cls>` right padded with segment 3, mpnet `<s> q </s></s> doc </s>`
SQUAD_SEG_PAD = 3
# What a fine-tuned model reads of a row, whatever the family and task (SQuAD's windows use
# all five); a batch's other keys (labels, example indices) are the task's.
MODEL_INPUTS = ("input_ids", "seg_ids", "input_mask", "p_mask", "cls_index")


def model_inputs(batch):
  """The fine-tuned model's inputs of a batch (MODEL_INPUTS), its labels and indices left out:
  what a SavedModel gives the model, so that evaluation and export share one trace
  (training/task.inference_fn)."""
  return {k: batch[k] for k in MODEL_INPUTS if k in batch}


class XLNetRows:
  """The release's rows: `A <sep> [B <sep>] <cls>`, left padded (segment SEG_PAD)."""
  name = "xlnet"
  left_padded = True
  squad_specials = 3                 # `doc <sep> q <sep> <cls>`
  takes_vocab_file = False           # SentencePiece only

  @staticmethod
  def special_count(pair):
    return 3 if pair else 2

  @staticmethod
  def truncate_pair(a, b, budget):
    while len(a) + len(b) > budget:
      if len(a) > len(b):
        a.pop()
      else:
        b.pop()

  @staticmethod
  def pack(tokenizer, a, b, max_len):
    ids = np.zeros([max_len], np.int32)
    tokens = a + [SEP_ID] + (b + [SEP_ID] if b is not None else []) + [CLS_ID]
    segs = [0] * (len(a) + 1) + ([1] * (len(b) + 1) if b is not None else []) + [2]
    start = max_len - len(tokens)
    seg = np.full([max_len], SEG_PAD, np.int32)
    mask = np.ones([max_len], np.float32)
    ids[start:], seg[start:], mask[start:] = tokens, segs, 0.0
    return ids, seg, mask, start, start + len(a) + 1

  @staticmethod
  def squad_window(tokenizer, doc, query):
    """A SQuAD window before padding: (tokens, seg, p_mask, cls_index, doc offset, pad id,
    padding segment); `doc <sep> query <sep> <cls>`, p_mask 0 on doc pieces and <cls>."""
    tokens = doc + [SEP_ID] + query + [SEP_ID, CLS_ID]
    seg = [0] * (len(doc) + 1) + [1] * (len(query) + 1) + [2]
    p_mask = [0] * len(doc) + [1] * (len(query) + 2) + [0]
    return tokens, seg, p_mask, len(tokens) - 1, 0, 0, SQUAD_SEG_PAD


class MPNetRows:
  """Hugging Face's MPNet/RoBERTa rows: `<s> A </s>[</s> B </s>]`, right padded."""
  name = "mpnet"
  left_padded = False
  squad_specials = 4                 # `<s> q </s></s> doc </s>`
  takes_vocab_file = True            # WordPiece vocab.txt of released MPNet weights

  @staticmethod
  def special_count(pair):
    return 4 if pair else 2

  @staticmethod
  def truncate_pair(a, b, budget):
    if len(a) + len(b) > budget:
      a_short = len(a) <= len(b)
      keep_short = min(len(a) if a_short else len(b), budget // 2)
      del a[keep_short if a_short else budget - keep_short:]
      del b[budget - keep_short if a_short else keep_short:]

  @staticmethod
  def pack(tokenizer, a, b, max_len):
    ids = np.zeros([max_len], np.int32)
    bos, eos = tokenizer.bos_id, tokenizer.eos_id
    tokens = [bos] + a + [eos] + ([eos] + b + [eos] if b is not None else [])
    ids[:] = tokenizer.pad_id
    ids[:len(tokens)] = tokens
    mask = np.ones([max_len], np.float32)
    mask[:len(tokens)] = 0.0
    return ids, np.zeros([max_len], np.int32), mask, 1, len(a) + 3

  @staticmethod
  def squad_window(tokenizer, doc, query):
    """As XLNetRows.squad_window: `<s> query </s></s> doc </s>`, p_mask 0 on <s> and doc."""
    bos, eos = tokenizer.bos_id, tokenizer.eos_id
    tokens = [bos] + query + [eos, eos] + doc + [eos]
    offset = len(query) + 3
    p_mask = [0] + [1] * (offset - 1) + [0] * len(doc) + [1]
    return tokens, [0] * len(tokens), p_mask, 0, offset, tokenizer.pad_id, 0


ROWS = {rows.name: rows for rows in (XLNetRows, MPNetRows)}   # the registry, by --model_type


def rows(model_type):
  """The row layout of --model_type (ValueError naming the flag otherwise)."""
  try:
    return ROWS[model_type]
  except KeyError:
    raise ValueError(f"--model_type={model_type}: expected one of {', '.join(ROWS)}") from None


def truncate_pair(a, b, budget, model_type="xlnet"):
  """Cuts lists a / b (in place) to len(a) + len(b) <= budget (rule: module docstring)."""
  rows(model_type).truncate_pair(a, b, budget)


def special_count(model_type, pair):
  """Special tokens the layout adds around one or two texts."""
  return rows(model_type).special_count(pair)


def pack(model_type, tokenizer, a, b, max_len):
  """One example -> (ids [L], seg_ids [L], input_mask [L], offset of A, offset of B).

  a, b: lists of ids (b None for single texts), already cut to fit (see truncate_pair
  and special_count). Offsets are the row positions of the first token of A and B.
  """
  return rows(model_type).pack(tokenizer, a, b, max_len)


def encode_texts(tokenizer, texts_a, texts_b, max_len, model_type="xlnet"):
  """Texts -> rows: dict input_ids int32 [N, L], seg_ids int32 [N, L], input_mask float32
  [N, L] (1.0 on padding), each text tokenized, cut to fit (truncate_pair for pairs, the first
  pieces of a single text) and packed (pack). texts_b: None, or one text or None per row."""
  n = len(texts_a)
  ids = np.zeros([n, max_len], np.int32)
  seg = np.zeros([n, max_len], np.int32)
  mask = np.ones([n, max_len], np.float32)
  texts_b = [None] * n if texts_b is None else list(texts_b)
  pieces_a = tokenizer.encode_lines(list(texts_a))
  pieces_b = iter(tokenizer.encode_lines([b for b in texts_b if b is not None]))
  for k, a in enumerate(pieces_a):
    a = list(a)
    b = list(next(pieces_b)) if texts_b[k] is not None else None
    budget = max_len - special_count(model_type, b is not None)
    if b is not None:
      truncate_pair(a, b, budget, model_type)
    else:
      a = a[:budget]
    ids[k], seg[k], mask[k], _, _ = pack(model_type, tokenizer, a, b, max_len)
  return {"input_ids": ids, "seg_ids": seg, "input_mask": mask}


def one_segment(rows):
  """The rows a sentence embedder reads: every seg_id 0 (numpy arrays or tensors, [N, L]).

  sentence-transformers runs XLNetModel without token_type_ids, so Hugging Face's XLNet adds no
  segment term to attention. XLNet's segment term only compares two positions' segments, so with
  one segment for the whole row it is the same for every key of a query and cancels in the
  softmax: the model then computes what sentence-transformers computes (the rows above give
  <cls> segment 2, which differs once seg_embed is trained). MPNet reads no seg_ids.
  """
  return {**rows, "seg_ids": rows["seg_ids"] * 0}


def make_tokenizer(model_type, sp_model=None, vocab_file=None, uncased=False):
  """SentencePiece (--sp_model) or, for released MPNet weights, WordPiece (--vocab_file,
  in-graph through tensorflow-text; MPNet's vocabulary is uncased, so it lower-cases)."""
  if vocab_file:
    if not rows(model_type).takes_vocab_file:
      raise ValueError("--vocab_file (WordPiece) goes with --model_type=mpnet")
    from data_utils.wordpiece import WordPieceTokenizer
    return WordPieceTokenizer(vocab_file, lower_case=True)
  if not sp_model:
    raise ValueError("--sp_model (or, for MPNet, --vocab_file) is required")
  from data_utils.tokenization import Tokenizer
  return Tokenizer(sp_model, lower=uncased)


def check_vocab(model_config, tokenizer, max_seq_length=None):
  """The model's vocabulary, pad id and positions must fit the tokenizer and the rows
  (one-line error otherwise: an MPNet position past its table would fail only later)."""
  size = getattr(model_config, "n_token", None) or model_config.vocab_size
  if size < tokenizer.vocab_size:
    raise ValueError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model config "
                     f"only {size}")
  pad = getattr(model_config, "pad_token_id", None)
  if pad is not None and pad != tokenizer.pad_id:
    raise ValueError(f"the MPNet config has pad_token_id={pad} but the tokenizer's pad id is "
                     f"{tokenizer.pad_id}: set pad_token_id in its config.json")
  positions = getattr(model_config, "max_position_embeddings", None)
  if positions is not None and max_seq_length and max_seq_length + pad + 1 > positions:
    raise ValueError(f"--max_seq_length={max_seq_length} needs {max_seq_length + pad + 1} "
                     f"positions but the MPNet config has max_position_embeddings={positions}")


def check_window_flags(max_seq_length, doc_stride, max_query_length, model_type="xlnet"):
  """One-line ValueError, naming the flags, for window settings that cannot tile a paragraph.

  A window holds the special tokens (3 for XLNet, 4 for MPNet), up to
  max_query_length question pieces and the rest of the paragraph; consecutive
  windows start doc_stride pieces apart, so doc_stride must fit in the smallest
  paragraph part (else text between windows would be skipped). Then an example
  of n paragraph pieces gets at most ceil(n / doc_stride) + 1 windows.
  """
  specials = SQUAD_SPECIAL_TOKENS[model_type]
  for name, value in (("max_seq_length", max_seq_length), ("doc_stride", doc_stride),
                      ("max_query_length", max_query_length)):
    if value < 1:
      raise ValueError(f"--{name}={value}: must be at least 1")
  room = max_seq_length - max_query_length - specials
  if room < 1:
    raise ValueError(f"--max_seq_length={max_seq_length} leaves no room for the paragraph: a "
                     f"window holds {specials} special tokens and up to --max_query_length="
                     f"{max_query_length} question pieces; raise --max_seq_length above "
                     f"{max_query_length + specials} or lower --max_query_length")
  if doc_stride > room:
    raise ValueError(f"--doc_stride={doc_stride} is longer than the paragraph part of a window "
                     f"({room} pieces = --max_seq_length={max_seq_length} - --max_query_length="
                     f"{max_query_length} - {specials} special tokens), so windows would skip "
                     f"text: use --doc_stride<={room}")


MODEL_TYPES = tuple(ROWS)
SQUAD_SPECIAL_TOKENS = {name: r.squad_specials for name, r in ROWS.items()}
