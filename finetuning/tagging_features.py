"""Words with tags -> rows of token ids for token tagging (named entities), in each family's layout.

The rules (shared by training, evaluation and serving/tagging_graph.py, which imports
`encode_words`):

- Each word is tokenized alone (as Hugging Face's `is_split_into_words`: a SentencePiece word
  gets its own leading "▁"), then the words' pieces are laid out in order in a row of the
  family's layout (data_utils/layouts.py: xlnet `A <sep> <cls>` LEFT padded, mpnet
  `<s> A </s>` RIGHT padded). A word's label goes on its FIRST piece; its other pieces, the
  special tokens and padding are not scored (label weight 0).
- A word that yields no piece (e.g. a lone control character) has no position
  (`first_piece` -1): it is predicted O and still counted by the evaluation.
- A sentence whose pieces do not fit one row (max_seq_length minus the layout's 2 special
  tokens) is split into consecutive windows of whole words, each its own row, so every word
  of every sentence is predicted once; a word is never cut in two across rows. A single word
  longer than a row gets a row of its own, cut to the row (its first piece, the one scored,
  is kept).
- The prediction of a word is the argmax of its first piece's logits (`word_predictions`).

Masks follow the project's convention: input_mask is 1.0 on padding, 0.0 on tokens.
"""

import numpy as np

from data_utils import layouts


def row_budget(max_seq_length, model_type):
  """Pieces one row holds (max_seq_length minus the layout's special tokens); ValueError
  naming --max_seq_length when no piece fits."""
  budget = max_seq_length - layouts.special_count(model_type, False)
  if budget < 1:
    raise ValueError(f"--max_seq_length={max_seq_length}: a {model_type} row needs "
                     f"{max_seq_length - budget} special tokens and at least one piece; use "
                     f"--max_seq_length>={max_seq_length - budget + 1}")
  return budget


def windows(piece_counts, budget):
  """[(first word, end word)] of consecutive word windows of at most `budget` pieces each
  (a word longer than `budget` alone in its window; words of no piece join the current one).
  piece_counts: pieces of each word. Empty for no words."""
  out, start, used = [], 0, 0
  for k, n in enumerate(piece_counts):
    if used > 0 and used + n > budget:
      out.append((start, k))
      start, used = k, 0
    used += n
  if piece_counts:
    out.append((start, len(piece_counts)))
  return out


def encode_words(tokenizer, words, max_seq_length, model_type):
  """One sentence's words -> its rows (module docstring for the rules).

  Args:
    tokenizer: data_utils.tokenization.Tokenizer or data_utils.wordpiece.WordPieceTokenizer
      (anything with `encode_lines(list of str) -> list of id lists` and, for mpnet,
      bos_id / eos_id / pad_id).
    words: list of str, the sentence's words.
    max_seq_length: L, the row length.
    model_type: "xlnet" or "mpnet" (the row layout).

  Returns:
    list of rows (one per word window, none for no words), each a dict:
      input_ids int32 [L], seg_ids int32 [L], input_mask float32 [L] (1.0 on padding),
      first_piece int32 [n_words_in_row] (row column of each word's first piece, -1 for a
      word with no piece), word_start int (index in `words` of the row's first word).
  """
  budget = row_budget(max_seq_length, model_type)
  pieces = [list(p) for p in tokenizer.encode_lines(list(words))] if words else []
  rows = []
  for start, end in windows([len(p) for p in pieces], budget):
    ids, first = [], []
    for p in pieces[start:end]:
      first.append(len(ids) if p else -1)
      ids.extend(p)
    ids = ids[:budget]                 # only a lone word longer than a row is cut
    input_ids, seg_ids, input_mask, offset, _ = layouts.pack(
        model_type, tokenizer, ids, None, max_seq_length)
    first = np.array(first, np.int32)
    first[first >= 0] += offset
    rows.append({"input_ids": input_ids, "seg_ids": seg_ids, "input_mask": input_mask,
                 "first_piece": first, "word_start": start})
  return rows


def label_arrays(row, tag_ids, max_seq_length):
  """A row's training targets: (label_ids int32 [L], label_weight float32 [L]), the tag id of
  each word of the row on its first piece (weight 1.0), 0 with weight 0.0 elsewhere.
  tag_ids: the tag ids of the whole sentence (the row's words start at row["word_start"])."""
  label_ids = np.zeros([max_seq_length], np.int32)
  weight = np.zeros([max_seq_length], np.float32)
  first = row["first_piece"]
  tags = np.asarray(tag_ids, np.int32)[row["word_start"]:row["word_start"] + len(first)]
  keep = first >= 0
  label_ids[first[keep]] = tags[keep]
  weight[first[keep]] = 1.0
  return label_ids, weight


def encode_sentences(tokenizer, sentences, max_seq_length, model_type, labels):
  """Sentences (finetuning/conll.Sentence) -> (features, index).

  features: dict of stacked arrays over all rows R: input_ids int32 [R, L], seg_ids int32
    [R, L], input_mask float32 [R, L], label_ids int32 [R, L], label_weight float32 [R, L].
  index: one (sentence number, word_start, first_piece) per row, what `word_predictions`
    needs to map the rows' logits back to each sentence's words.
  labels: the label list (id = position); a tag outside it is a KeyError naming it.
  """
  label_id = {label: k for k, label in enumerate(labels)}
  cols = {k: [] for k in ("input_ids", "seg_ids", "input_mask", "label_ids", "label_weight")}
  index = []
  for n, sentence in enumerate(sentences):
    tag_ids = [label_id[t] for t in sentence.tags]
    for row in encode_words(tokenizer, list(sentence.words), max_seq_length, model_type):
      label_ids, weight = label_arrays(row, tag_ids, max_seq_length)
      for key in ("input_ids", "seg_ids", "input_mask"):
        cols[key].append(row[key])
      cols["label_ids"].append(label_ids)
      cols["label_weight"].append(weight)
      index.append((n, row["word_start"], row["first_piece"]))
  empty = {"input_ids": np.int32, "seg_ids": np.int32, "input_mask": np.float32,
           "label_ids": np.int32, "label_weight": np.float32}
  features = {k: (np.stack(v) if v else np.zeros([0, max_seq_length], empty[k]))
              for k, v in cols.items()}
  return features, index


def word_predictions(logits, index, sentence_lengths, labels):
  """Rows' logits -> one predicted tag list per sentence.

  logits: float [R, L, n_class], the rows of `encode_sentences` in order.
  index: its per-row (sentence number, word_start, first_piece).
  sentence_lengths: words of each sentence. A word's tag is labels[argmax of its first piece's
  logits]; a word of no piece is "O"."""
  out = [["O"] * n for n in sentence_lengths]
  for row_logits, (n, start, first) in zip(logits, index):
    for k, col in enumerate(first):
      if col >= 0:
        out[n][start + k] = labels[int(np.argmax(row_logits[col]))]
  return out
