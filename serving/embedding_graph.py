"""Sentence embeddings as a SavedModel on raw text: `sentence` [N] (strings, any bytes) ->
`embedding` [N, D] float32, the model's vectors (unit length when its pooler normalises).

The model is a family's encoder under modeling/heads.SentencePooler (`families.get(model_type)
.with_head(..., {"type": "sentence_pooler", ...})`, what run_pairs.py trains). The graph runs
the Python path's steps as ops, as every export of serving/export.py does: the request decoded
at the door (serving/utf8.py: invalid UTF-8 -> U+FFFD), the tokenizer's in-graph twin
(export.graph_tokenizer), the family's single-text rows at --max_seq_length
(serving/packing.pack_rows: XLNet `A <sep> <cls>` left padded, MPNet `<s> A </s>` right
padded; a longer text keeps its first pieces) in one segment (`layouts.one_segment`), then cut
to the batch's longest row (packing.trim_padding; the pooler reads only real tokens, so the
vectors do not change), then the model. `export_embeddings` publishes through export.save, which reloads the SavedModel and
checks it against `python_embeddings` (layouts.encode_texts and the model at the fixed length).
"""

import numpy as np
import tensorflow as tf

from data_utils import layouts
from serving import export, packing, tasks, utf8

OUTPUT = "embedding"


# the self-check's inputs beyond export.PROBE_TEXTS: invalid UTF-8 (a cut two-byte character,
# a stray byte), and a text longer than any row
PROBE_BYTES = (b"caf\xc3 and \xff bytes \xe6\x9d", tasks.LONG_PROBE.encode("utf-8"))


def embedding_module(model, tokenizer, model_type, max_seq_length, padding=None, xla=False):
  """`sentence` [N] -> `embedding` [N, D] float32.

  Args:
    model: a family's model with the sentence_pooler head (built): rows -> [B, D].
    tokenizer: the Python tokenizer the model was trained with (SentencePiece or WordPiece).
    model_type: "xlnet" | "mpnet" (the row layout).
    max_seq_length: tokens per row, special tokens included.
    padding: how long a batch's rows are (packing.trim_padding; None: export.check_padding).
    xla: compile the model's call with XLA (export.model_call).
  """
  tok = export.graph_tokenizer(tokenizer)
  padding, call = export.check_padding(padding, xla), export.model_call(model, xla)
  left = layouts.rows(model_type).left_padded

  def serve(sentence):
    rows = packing.pack_rows(model_type, tok, tok.tokenize(sentence), None, max_seq_length)
    rows = packing.trim_padding(layouts.one_segment(rows), max_seq_length, left, padding)
    return {OUTPUT: tf.cast(call(rows), tf.float32)}

  return export._Serving(model, tok, serve, [export._strings("sentence")],   # noqa: SLF001
                         "embedding")


def python_embeddings(model, tokenizer, model_type, max_seq_length, texts, batch_size=64):
  """The Python path: texts (str or bytes, decoded as the graph decodes them) -> rows at the
  fixed length (data_utils/layouts.encode_texts, one_segment) -> the model. Returns float64
  [N, D]."""
  texts = utf8.python_texts(list(texts))
  out = []
  for start in range(0, len(texts), batch_size):
    rows = layouts.encode_texts(tokenizer, texts[start:start + batch_size], None,
                                max_seq_length, model_type)
    out.append(tasks.forward(model, layouts.one_segment(rows)))
  return np.concatenate(out) if out else np.zeros([0, 0])


def export_embeddings(model, tokenizer, model_type, max_seq_length, export_dir, log=print,
                      padding=None, xla=False, atol=1e-5):
  """Writes the embedding SavedModel at `export_dir` (export.save: checked against
  python_embeddings on export.PROBE_TEXTS and PROBE_BYTES, as one batch and row by row, to
  `atol`; published atomically). Returns export_dir."""
  texts = list(export.PROBE_TEXTS) + list(PROBE_BYTES)
  module = embedding_module(model, tokenizer, model_type, max_seq_length, padding, xla)
  expected = {OUTPUT: python_embeddings(model, tokenizer, model_type, max_seq_length, texts)}
  return export.save(module, export_dir, {"sentence": np.array(texts, object)}, expected,
                     atol=atol, log=log)
