"""SQuAD inputs: reading, character-to-piece alignment, doc-stride windows.

Alignment: the release's normalisation is applied character by character,
recording for every normalised character the original character it came from;
SentencePiece's own offsets then map each piece to a normalised span, hence to
an original span. Linear in the text length, exact on non-ASCII text (when the
per-character result differs from the whole-string one, e.g. a final sigma, a
difflib alignment takes over).

XLNet layout (paragraph first): `paragraph <sep> question <sep> <cls>`, right
padded; segment ids paragraph 0, question 1, <cls> 2, padding 3; p_mask 1 for
question, separators and padding (answers come from the paragraph or <cls>).
"""

import dataclasses
import difflib
import math
import re
import unicodedata

import numpy as np
from sentencepiece import sentencepiece_pb2

from data_utils import layouts
from data_utils.tokenization import SPIECE_UNDERLINE, preprocess_text
from finetuning import squad_metrics

SEG_PAD = layouts.SQUAD_SEG_PAD
SPECIAL_TOKENS = layouts.SQUAD_SPECIAL_TOKENS   # `doc <sep> q <sep> <cls>`; `<s> q </s></s> doc </s>`
check_window_flags = layouts.check_window_flags


@dataclasses.dataclass
class SquadExample:
  qas_id: str
  question: str
  context: str
  answer_text: str = ""
  answer_start: int = -1        # character offset in context; -1 = none
  is_impossible: bool = False
  all_answers: list = None


def _layout_error(path, where):
  return ValueError(f"{path}: {where}: not the SQuAD layout (data[].paragraphs[] with a string "
                    "'context' and qas[] of string 'id' and 'question', 'answers' of "
                    "{'text': string, 'answer_start': integer})")


def _check_unicode(path, where, what, text):
  """JSON escapes can spell lone surrogates, which no tokenizer can encode."""
  try:
    text.encode("utf-8")
  except UnicodeEncodeError as e:
    raise ValueError(f"{path}: {where}: the {what} holds a lone surrogate "
                     f"U+{ord(text[e.start]):04X} at character {e.start}: not valid "
                     "Unicode") from None


def read_squad(path, is_training):
  """Examples of a SQuAD 1.1 or 2.0 file (is_impossible is optional).

  Returns (examples, skipped): training questions whose answer text is not at
  its answer_start are skipped and counted. Every other departure from the
  layout is a one-line ValueError naming the file and the question.
  """
  data = squad_metrics.load_json(path, "SQuAD file")
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    raise ValueError(f"{path}: not a SQuAD file (no 'data' list)")
  examples, skipped, where = [], 0, "data"
  try:
    for a, article in enumerate(data["data"]):
      where = f"data[{a}]"
      if not isinstance(article["paragraphs"], list):   # ({} and "" iterated as no paragraphs)
        raise TypeError
      for p, paragraph in enumerate(article["paragraphs"]):
        where = f"data[{a}].paragraphs[{p}]"
        context = paragraph["context"]
        if not isinstance(context, str) or not isinstance(paragraph["qas"], list):
          raise TypeError
        _check_unicode(path, where, "context", context)
        for qa in paragraph["qas"]:
          where = f"question {qa.get('id')!r} of data[{a}].paragraphs[{p}]"
          impossible = bool(qa.get("is_impossible", False))
          answers = qa.get("answers", [])
          if (not isinstance(qa["id"], str) or not isinstance(qa["question"], str)
              or not isinstance(answers, list)
              or not all(isinstance(x["text"], str) for x in answers)):
            raise TypeError
          _check_unicode(path, where, "question", qa["question"])
          ex = SquadExample(qa["id"], qa["question"], context, is_impossible=impossible,
                            all_answers=[x["text"] for x in answers])
          if is_training and not impossible:
            if not answers:
              raise ValueError(f"{path}: question {qa['id']!r} has no answer and no "
                               "is_impossible")
            answer = answers[0]
            start = answer["answer_start"]
            if not isinstance(start, int) or isinstance(start, bool):
              raise TypeError
            if start < 0 or context[start:start + len(answer["text"])] != answer["text"]:
              skipped += 1          # the answer is not where the file says: counted, skipped
              continue
            ex.answer_text, ex.answer_start = answer["text"], start
          examples.append(ex)
  except (KeyError, TypeError, AttributeError):
    raise _layout_error(path, where) from None
  if not examples:
    raise ValueError(f"{path}: no usable questions ({skipped} skipped)")
  return examples, skipped


def normalize_with_offsets(text, lower=False, keep_accents=False):
  """(preprocess_text(text), [original index of each normalised character])."""
  chars, origin = [], []
  pending_space = False
  for i, c in enumerate(text):
    if c.isspace():
      pending_space = bool(chars)
      continue
    if pending_space:
      chars.append(" ")
      origin.append(i - 1)
      pending_space = False
    chars.append(c)
    origin.append(i)
  s = "".join(chars)
  for pair in ("``", "''"):                 # str.replace semantics, left to right
    out, out_origin, k = [], [], 0
    while k < len(s):
      if s.startswith(pair, k):
        out.append('"')
        out_origin.append(origin[k])
        k += 2
      else:
        out.append(s[k])
        out_origin.append(origin[k])
        k += 1
    s, origin = "".join(out), out_origin
  out, out_origin = [], []
  for c, o in zip(s, origin):
    pieces = c
    if not keep_accents and not c.isascii():
      pieces = "".join(x for x in unicodedata.normalize("NFKD", c) if not unicodedata.combining(x))
    if lower:
      pieces = pieces.lower()
    out.extend(pieces)
    out_origin.extend([o] * len(pieces))
  result = "".join(out)
  expected = preprocess_text(text, lower=lower, keep_accents=keep_accents)
  if result != expected:                    # rare context-dependent cases
    matcher = difflib.SequenceMatcher(None, result, expected, autojunk=False)
    mapped = [0] * len(expected)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
      for j in range(j1, j2):
        src = i1 + min(j - j1, max(i2 - i1 - 1, 0)) if i2 > i1 else min(i1, len(out_origin) - 1)
        mapped[j] = out_origin[src] if out_origin else 0
    return expected, mapped
  return result, out_origin


def tokenize_with_offsets(tokenizer, text):
  """(ids, starts, ends): each piece's span [start, end) in the ORIGINAL text."""
  normalized, origin = normalize_with_offsets(text, tokenizer.lower, tokenizer.keep_accents)
  # the serialized proto: begin/end in bytes of `normalized` (the immutable proto of
  # sentencepiece 0.2.1 reports characters, its `encode(return_type="proto")` is 0.2.3's only)
  proto = sentencepiece_pb2.SentencePieceText.FromString(
      tokenizer.sp.EncodeAsSerializedProto(normalized))
  byte_to_char = np.zeros(len(normalized.encode("utf-8")) + 1, np.int64)
  pos = 0
  for k, ch in enumerate(normalized):
    n = len(ch.encode("utf-8"))
    byte_to_char[pos:pos + n] = k
    pos += n
  byte_to_char[pos] = len(normalized)
  origin = list(origin) + [len(text)]
  ids, starts, ends = [], [], []
  for piece in proto.pieces:
    b, e = int(byte_to_char[piece.begin]), int(byte_to_char[piece.end])
    surface = piece.piece
    if len(surface) > 1 and surface[-1] == "," and surface[-2].isdigit():
      # the release's split: digits pieces over [b, e - 1), "," at e - 1
      pos = b + (1 if surface[0] == SPIECE_UNDERLINE and e - b > len(surface) - 1 else 0)
      for sub in tokenizer.split_digit_comma(surface):
        width = len(sub.replace(SPIECE_UNDERLINE, ""))
        ids.append(tokenizer.sp.PieceToId(sub))
        starts.append(origin[min(pos, len(origin) - 2)])
        ends.append(origin[min(pos + width, len(origin) - 1) - 1] + 1 if width else starts[-1])
        pos += width
      continue
    ids.append(piece.id)
    if e <= b:                               # e.g. a lone "▁": zero width
      starts.append(origin[min(b, len(origin) - 1)])
      ends.append(starts[-1])
      continue
    starts.append(origin[b])
    ends.append(origin[e - 1] + 1)
  return ids, starts, ends


def words_with_offsets(tokenizer, text):
  """(ids, starts, ends) for a WordPiece tokenizer: BERT's SQuAD recipe, each
  whitespace-separated word tokenized alone, every piece spanning its whole word."""
  words, spans = [], []
  for m in re.finditer(r"\S+", text):
    words.append(m.group())
    spans.append((m.start(), m.end()))
  ids, starts, ends = [], [], []
  for pieces, (b, e) in zip(tokenizer.encode_lines(words) if words else [], spans):
    ids.extend(pieces)
    starts.extend([b] * len(pieces))
    ends.extend([e] * len(pieces))
  return ids, starts, ends


def make_features(tokenizer, examples, max_seq_length=512, doc_stride=128,
                  max_query_length=64, is_training=False, model_type="xlnet"):
  """Doc-stride windows of every example -> (arrays dict, per-feature info list).

  xlnet: `doc <sep> query <sep> <cls>`, right padded, <cls> the null answer;
  mpnet: `<s> query </s></s> doc </s>`, right padded, <s> the null answer.
  infos[f]["doc_offset"] is the row position of the window's first document token.
  An example of n paragraph pieces gets at most ceil(n / doc_stride) + 1 windows
  (check_window_flags first rejects settings that cannot tile a paragraph).
  """
  check_window_flags(max_seq_length, doc_stride, max_query_length, model_type)
  rows, infos = [], []
  sentencepiece = hasattr(tokenizer, "sp")
  queries = tokenizer.encode_lines([ex.question for ex in examples])
  for ex_index, ex in enumerate(examples):
    query = list(queries[ex_index])[:max_query_length]
    ids, starts, ends = (tokenize_with_offsets(tokenizer, ex.context) if sentencepiece
                         else words_with_offsets(tokenizer, ex.context))
    tok_start = tok_end = None
    if is_training and not ex.is_impossible:
      a0, a1 = ex.answer_start, ex.answer_start + len(ex.answer_text)
      covering = [k for k in range(len(ids)) if starts[k] < a1 and ends[k] > a0]
      if covering:
        tok_start, tok_end = covering[0], covering[-1]
    max_doc = max_seq_length - len(query) - SPECIAL_TOKENS[model_type]   # >= doc_stride
    span_start, windows = 0, 0
    while True:
      windows += 1
      if windows > math.ceil(len(ids) / doc_stride) + 1:     # cannot happen: a guard, not a rule
        raise AssertionError(f"question {ex.qas_id}: more windows than ceil(n / doc_stride) + 1")
      length = min(len(ids) - span_start, max_doc)
      doc = ids[span_start:span_start + length]
      tokens, seg, p_mask, cls_index, offset, pad_id, seg_pad = layouts.rows(
          model_type).squad_window(tokenizer, doc, query)
      pad = max_seq_length - len(tokens)
      row = {"input_ids": tokens + [pad_id] * pad, "seg_ids": seg + [seg_pad] * pad,
             "input_mask": [0.0] * len(tokens) + [1.0] * pad, "p_mask": p_mask + [1] * pad,
             "cls_index": cls_index}
      if is_training:
        inside = tok_start is not None and span_start <= tok_start and tok_end < span_start + length
        row["start_positions"] = tok_start - span_start + offset if inside else cls_index
        row["end_positions"] = tok_end - span_start + offset if inside else cls_index
        row["is_impossible"] = 0.0 if inside else 1.0
      rows.append(row)
      infos.append({"example_index": ex_index, "span_start": span_start, "length": length,
                    "doc_offset": offset,
                    "starts": starts[span_start:span_start + length],
                    "ends": ends[span_start:span_start + length]})
      if span_start + length >= len(ids):
        break
      span_start += doc_stride
  arrays = {k: np.array([r[k] for r in rows],
                        np.float32 if k in ("input_mask", "p_mask", "is_impossible") else np.int32)
            for k in rows[0]} if rows else {}
  return arrays, infos
