"""Offline data sets derived from the standard library's docstrings, in official layouts.

One document = one docstring (data_utils/corpus.py). Identical docstrings are kept once, then
every document is assigned to exactly one of train / dev / test (seeded), and every set below
draws its examples from the documents of the matching split, so no text is shared between a
training file and an evaluation file. The pretraining corpus holds the train documents only.

- Module classification, DBpedia CSV layout (`"label","title","content"`, labels "1".."N"):
  which top-level package (the N <= 14 with the most documents) a docstring belongs to; title =
  the class/function name ("" for a module's own docstring, whose name would give the answer).
- SQuAD 2.0 JSON: cloze questions (a context sentence with one word replaced by "what"); the
  answer is that word, a span of the context at answer_start; about a third of the questions
  come from another document's sentence and are unanswerable (is_impossible, answers []).
- RACE JSON layout (RACE/{train,dev,test}/{middle,high}/N.txt): the same cloze with "_" for the
  blank (sentences holding an "_" of their own are not used) and four options (the answer +
  words of the same article, else of other articles); "middle" = articles of at most 3
  sentences, "high" = longer.
- Acceptability, GLUE CoLA TSV layout (train.tsv / dev.tsv: source, label, "*" when
  unacceptable, sentence; test.tsv: index, sentence, with its labels apart in test-labels.tsv):
  a real sentence (1) or one sentence of the same split damaged (0): two of its words swapped,
  or one word replaced by another word of the split; each source sentence used once, the two
  labels balanced. Telling them apart needs word order and word choice, which a model can learn
  from the pretraining text but hardly from a few hundred labelled sentences.

Same seed, same bytes (on the same Python's standard library).
"""

import collections
import csv
import dataclasses
import io
import json
import os
import re
import shutil

import numpy as np

from data_utils import corpus

SPLITS = ("train", "dev", "test")
_WORD = re.compile(r"(?<![\w.])[A-Za-z][a-z]{3,}(?![\w(]|\.\w)")
_STOP = frozenset("""
about above after again also always another anything because been before being between both
cannot could default does doing done each either else every from have here however into itself
just like made make many might more most much must need never none only other otherwise over
same should since some such than that their them then there these they this those through thus
under until upon used uses using very were what when where whether which while will with within
without would your""".split())


@dataclasses.dataclass(frozen=True)
class Document:
  module: str          # e.g. "email.mime.text"
  name: str            # class/function name, or the module name for a module docstring
  sentences: tuple

  @property
  def package(self):
    return self.module.split(".")[0]

  @property
  def text(self):
    return " ".join(self.sentences)

  @property
  def is_module_doc(self):
    return self.name == self.module


def load_documents(stdlib_dir=None):
  """Every distinct docstring of the standard library, in corpus.documents()'s fixed order."""
  seen, docs = set(), []
  for module, name, sentences in corpus.documents(stdlib_dir):
    key = "\n".join(sentences)
    if key not in seen:
      seen.add(key)
      docs.append(Document(module, name, tuple(sentences)))
  return docs


def split_documents(docs, seed, dev_fraction=0.1, test_fraction=0.15):
  """{"train", "dev", "test"} -> documents; each document in exactly one split (seeded)."""
  order = np.random.default_rng([seed, 1]).permutation(len(docs))
  n_test, n_dev = int(len(docs) * test_fraction), int(len(docs) * dev_fraction)
  parts = {"test": order[:n_test], "dev": order[n_test:n_test + n_dev],
           "train": order[n_test + n_dev:]}
  return {k: [docs[i] for i in sorted(v)] for k, v in parts.items()}


# ---- atomic writes -------------------------------------------------------------------------
def atomic_write(path, text):
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "w", encoding="utf-8", newline="") as f:
    f.write(text)
  os.replace(tmp, path)
  return path


def _json(data):
  return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=False) + "\n"


def write_pretrain_corpus(docs, path, passes=1, seed=0):
  """Sentence per line, blank line between documents; -> (documents, bytes of one pass).
  passes > 1 writes the documents that many times, each pass in its own seeded order, so that
  the writer draws fresh targets and factorization orders for every pass (BERT's dupe_factor):
  records store those draws, so a run that repeats one pass would repeat them too."""
  one = "".join("\n".join(d.sentences) + "\n\n" for d in docs)
  text = one
  for k in range(1, passes):
    order = np.random.default_rng([seed, 5, k]).permutation(len(docs))
    text += "".join("\n".join(docs[i].sentences) + "\n\n" for i in order)
  atomic_write(path, text)
  return len(docs), len(one.encode("utf-8"))


# ---- module classification (DBpedia CSV layout) --------------------------------------------
def top_packages(docs, n_labels=14):
  """The n_labels packages with the most documents (ties by name), most frequent first."""
  counts = collections.Counter(d.package for d in docs)
  return [p for p, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n_labels]]


def classification_rows(docs, packages, max_per_class, rng):
  """[(label "1".."N", title, content)], at most max_per_class per label, in a seeded order."""
  label_of = {p: str(i + 1) for i, p in enumerate(packages)}
  by_label = collections.defaultdict(list)
  for d in docs:
    if d.package in label_of:
      by_label[label_of[d.package]].append(d)
  rows = []
  for label in sorted(by_label, key=int):
    group = by_label[label]
    keep = sorted(rng.permutation(len(group))[:max_per_class])
    rows += [(label, "" if group[i].is_module_doc else group[i].name, group[i].text)
             for i in keep]
  return [rows[i] for i in rng.permutation(len(rows))]


def _csv(rows):
  buf = io.StringIO()
  writer = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
  writer.writerows(rows)
  return buf.getvalue()


def write_classification(splits, out_dir, seed, train_per_class, test_per_class, n_labels=14):
  """train.csv / dev.csv / test.csv (DBpedia layout; dev.csv for choosing settings) +
  labels.json; -> the labels.json content."""
  packages = top_packages(splits["train"] + splits["dev"] + splits["test"], n_labels)
  counts = {}
  for split, per_class in (("train", train_per_class), ("dev", test_per_class),
                           ("test", test_per_class)):
    rows = classification_rows(splits[split], packages, per_class,
                               np.random.default_rng([seed, 2, SPLITS.index(split)]))
    atomic_write(os.path.join(out_dir, f"{split}.csv"), _csv(rows))
    counts[split] = dict(sorted(collections.Counter(r[0] for r in rows).items(),
                                key=lambda kv: int(kv[0])))
  info = {"layout": "DBpedia CSV (label, title, content), run_classifier.py --task_name=dbpedia",
          "labels": {str(i + 1): p for i, p in enumerate(packages)}, "counts": counts}
  atomic_write(os.path.join(out_dir, "labels.json"), _json(info))
  return info


# ---- cloze questions (SQuAD 2.0 and RACE) ---------------------------------------------------
def _candidates(sentence, context):
  """(start in sentence, word) for content words occurring once, as a whole word, in context."""
  out = []
  for m in _WORD.finditer(sentence):
    word = m.group()
    if word.lower() in _STOP:
      continue
    if len(re.findall(rf"(?<![\w]){re.escape(word)}(?![\w])", context)) == 1:
      out.append((m.start(), word))
  return out


def _context(doc, max_chars):
  """Leading sentences of doc joined by spaces, at most max_chars (at least one sentence)."""
  kept, size = [], 0
  for s in doc.sentences:
    if kept and size + len(s) + 1 > max_chars:
      break
    kept.append(s)
    size += len(s) + 1
  return kept


def _cloze(sentence, start, word, blank):
  text = sentence[:start] + blank + sentence[start + len(word):]
  return text.rstrip(" .!?:;") + ("?" if blank == "what" else ".")


def squad_data(docs, seed_seq, max_chars, max_questions, version="v2.0"):
  """One SQuAD 2.0 dataset dict: a paragraph per document, cloze questions, ~1/3 impossible."""
  rng = np.random.default_rng(seed_seq)
  articles, n_questions = [], 0
  pool = [d for d in docs if len(d.sentences) >= 2]
  for doc_index in rng.permutation(len(pool)):
    if n_questions >= max_questions:
      break
    doc = pool[doc_index]
    sentences = _context(doc, max_chars)
    context = " ".join(sentences)
    qas, offset = [], 0
    choices = []
    for s in sentences:
      choices += [(s, offset + st, st, w) for st, w in _candidates(s, context)]
      offset += len(s) + 1
    if not choices:
      continue
    s, answer_start, st, word = choices[rng.integers(len(choices))]
    assert context[answer_start:answer_start + len(word)] == word
    qid = f"{doc_index:05d}"
    qas.append({"id": f"{qid}-a", "question": _cloze(s, st, word, "what"),
                "answers": [{"text": word, "answer_start": answer_start}], "is_impossible": False})
    if rng.random() < 0.5:   # an unanswerable question from another document's sentence
      other = pool[rng.integers(len(pool))]
      o_sentence = other.sentences[rng.integers(len(other.sentences))]
      o_choices = _candidates(o_sentence, other.text)
      if other is not doc and o_choices and o_sentence not in context:
        o_st, o_word = o_choices[rng.integers(len(o_choices))]
        if o_word not in context:
          qas.append({"id": f"{qid}-u", "question": _cloze(o_sentence, o_st, o_word, "what"),
                      "answers": [], "is_impossible": True})
    n_questions += len(qas)
    articles.append({"title": doc.module, "paragraphs": [{"context": context, "qas": qas}]})
  return {"version": version, "data": articles}


def write_squad(splits, out_dir, seed, n_train, n_eval, max_chars):
  """train-v2.0.json (train documents), dev-v2.0.json (dev documents, for choosing settings),
  test-v2.0.json (test documents, the reported numbers); -> question counts."""
  counts = {}
  for split, name, n in (("train", "train-v2.0.json", n_train), ("dev", "dev-v2.0.json", n_eval),
                         ("test", "test-v2.0.json", n_eval)):
    data = squad_data(splits[split], [seed, 3, SPLITS.index(split)], max_chars, n)
    atomic_write(os.path.join(out_dir, name), _json(data))
    qas = [q for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
    counts[name] = {"questions": len(qas),
                    "impossible": sum(q["is_impossible"] for q in qas)}
  return counts


def race_articles(docs, seed_seq, max_chars, max_questions, questions_per_article=2):
  """[(level, {"answers", "options", "questions", "article", "id"})] in the RACE layout."""
  rng = np.random.default_rng(seed_seq)
  pool = [d for d in docs if len(d.sentences) >= 2]
  vocabulary = sorted({w for d in pool for w in _WORD.findall(d.text) if w.lower() not in _STOP})
  out, n_questions, numbers = [], 0, collections.Counter()
  for doc_index in rng.permutation(len(pool)):
    if n_questions >= max_questions:
      break
    sentences = _context(pool[doc_index], max_chars)
    article = " ".join(sentences)
    words = sorted({w for s in sentences for _, w in _candidates(s, article)})
    # "_" marks the blank (run_race.py writes each option into every "_"): skip sentences
    # that already hold one (identifiers like font_size)
    choices = [(s, st, w) for s in sentences if "_" not in s for st, w in _candidates(s, article)]
    if not choices:
      continue
    doc = {"answers": [], "options": [], "questions": [], "article": article}
    for k in rng.permutation(len(choices))[:questions_per_article]:
      s, st, word = choices[k]
      distractors = [w for w in words if w.lower() != word.lower() and w not in s]
      distractors = [distractors[i] for i in rng.permutation(len(distractors))[:3]]
      for _ in range(1000):
        if len(distractors) == 3:
          break
        w = vocabulary[rng.integers(len(vocabulary))]
        if w not in article and w not in distractors and w.lower() != word.lower():
          distractors.append(w)
      if len(distractors) < 3:
        continue
      options = [word] + distractors
      order = rng.permutation(4)
      doc["options"].append([options[i] for i in order])
      doc["answers"].append("ABCD"[int(np.argmin(order))])
      doc["questions"].append(_cloze(s, st, word, "_"))
    if not doc["questions"]:
      continue
    level = "middle" if len(sentences) <= 3 else "high"
    numbers[level] += 1
    doc["id"] = f"{level}{numbers[level]}.txt"
    n_questions += len(doc["questions"])
    out.append((level, doc))
  return out


def write_race(splits, out_dir, seed, n_train, n_eval, max_chars):
  """OUT_DIR/{train,dev,test}/{middle,high}/N.txt (written to a temporary directory, then
  renamed); -> question counts per split and level."""
  tmp = f"{out_dir}.tmp-{os.getpid()}"
  shutil.rmtree(tmp, ignore_errors=True)
  counts = {}
  for split in SPLITS:
    n = n_train if split == "train" else n_eval
    articles = race_articles(splits[split], [seed, 4, SPLITS.index(split)], max_chars, n)
    counts[split] = collections.Counter()
    for level, doc in articles:
      atomic_write(os.path.join(tmp, split, level, doc["id"][len(level):]), _json(doc))
      counts[split][level] += len(doc["questions"])
    counts[split] = dict(sorted(counts[split].items()))
  shutil.rmtree(out_dir, ignore_errors=True)
  os.replace(tmp, out_dir)
  return counts


# ---- acceptability (GLUE CoLA layout) -------------------------------------------------------
_TOKEN = re.compile(r"\S+")


def _acceptable_sentences(docs):
  """[(document index, sentence)]: prose sentences (a capital first, a full stop last, 6 to 30
  words, at least 6 of them alphabetic, no tab), not code or signatures."""
  out = []
  for k, d in enumerate(docs):
    for s in d.sentences:
      words = _TOKEN.findall(s)
      if (6 <= len(words) <= 30 and "\t" not in s and s[0].isupper() and s.endswith(".")
          and len(re.findall(r"[A-Za-z]{2,}", s)) >= 6 and len(set(words[1:-1])) >= 2):
        out.append((k, s))
  return out


def damage(sentence, rng, vocabulary):
  """The sentence with two different words swapped, or one word replaced by another
  vocabulary word (half each); the words keep their spacing. The first and the last word stay
  where they are (a capital first, a full stop last) and a replacement takes the case of the
  word it replaces, so no surface rule tells a damaged sentence from a real one: only the
  words in between do. The sentence has at least two different words in between."""
  spans = [m.span() for m in _TOKEN.finditer(sentence)]
  words = [sentence[a:b] for a, b in spans]
  inside = np.arange(1, len(words) - 1)
  if rng.random() < 0.5:
    while True:
      i, j = sorted(rng.choice(inside, 2, replace=False))
      if words[i] != words[j]:
        break
    words[i], words[j] = words[j], words[i]
  else:
    i = int(rng.choice(inside))
    while True:
      new = vocabulary[int(rng.integers(len(vocabulary)))]
      new = (new[0].upper() if words[i][0].isupper() else new[0].lower()) + new[1:]
      if new != words[i]:
        break
    words[i] = new
  out, last = [], 0
  for (a, b), w in zip(spans, words):
    out += [sentence[last:a], w]
    last = b
  return "".join(out) + sentence[last:]


def acceptability_rows(docs, rng, n):
  """[(source, label "0"/"1", sentence)] of at most n sentences of `docs`, labels balanced."""
  pool = _acceptable_sentences(docs)
  vocabulary = sorted({w for _, s in pool for w in _WORD.findall(s) if w.lower() not in _STOP})
  rows = []
  for rank, i in enumerate(rng.permutation(len(pool))[:n]):
    k, s = pool[i]
    if rank % 2:
      rows.append((f"doc{k}", "1", s))
    else:
      rows.append((f"doc{k}", "0", damage(s, rng, vocabulary)))
  return [rows[i] for i in rng.permutation(len(rows))]


def write_acceptability(splits, out_dir, seed, n_train, n_eval):
  """OUT_DIR/{train,dev,test}.tsv in GLUE CoLA's layout + test-labels.tsv (index, label);
  -> {split: {label: count}}."""
  counts = {}
  for split in SPLITS:
    rows = acceptability_rows(splits[split], np.random.default_rng([seed, 6, SPLITS.index(split)]),
                              n_train if split == "train" else n_eval)
    counts[split] = dict(sorted(collections.Counter(r[1] for r in rows).items()))
    if split == "test":
      atomic_write(os.path.join(out_dir, "test.tsv"), "index\tsentence\n" + "".join(
          f"{i}\t{s}\n" for i, (_, _, s) in enumerate(rows)))
      atomic_write(os.path.join(out_dir, "test-labels.tsv"), "index\tlabel\n" + "".join(
          f"{i}\t{label}\n" for i, (_, label, _) in enumerate(rows)))
    else:
      atomic_write(os.path.join(out_dir, f"{split}.tsv"), "".join(
          f"{src}\t{label}\t{'*' if label == '0' else ''}\t{s}\n" for src, label, s in rows))
  return counts


def read_tsv_column(path, column):
  """One named column of a TSV file with a header line (CoLA.tsv, test-labels.tsv)."""
  with open(path, encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
  if not rows or column not in rows[0]:
    raise ValueError(f"{path}: no '{column}' column in its header")
  k = rows[0].index(column)
  return [r[k] for r in rows[1:]]


def acceptability_scores(labels, preds):
  """{"mcc", "accuracy", "n"} of CoLA-style "0"/"1" predictions against the test labels."""
  from finetuning import metrics   # numpy only
  if len(labels) != len(preds):
    raise ValueError(f"{len(preds)} predictions for {len(labels)} test sentences")
  y, p = np.array(labels, object), np.array(preds, object)
  return {"mcc": float(metrics.matthews_corrcoef(y, p)), "accuracy": float((y == p).mean()),
          "n": len(labels)}


# ---- minimal pairs (zero-shot acceptability) ----------------------------------------------
def minimal_pairs(docs, rng, n):
  """[(question, [option, option], label)] from at most n prose sentences of `docs`: the
  sentence with "_" where it and its damaged copy (`damage`) differ (from the first to the last
  changed word), the options the real and the damaged words there in a random order, label the
  real one's index. A zero-shot model picks the option it finds more probable in the sentence:
  the cloze scorer with two options (chance 50%). Sentences holding "_" are left out."""
  pool = [(k, s) for k, s in _acceptable_sentences(docs) if "_" not in s]
  vocabulary = sorted({w for _, s in pool for w in _WORD.findall(s) if w.lower() not in _STOP})
  out = []
  for i in rng.permutation(len(pool))[:n]:
    s = pool[i][1]
    d = damage(s, rng, vocabulary)
    spans_s = [m.span() for m in _TOKEN.finditer(s)]
    spans_d = [m.span() for m in _TOKEN.finditer(d)]
    changed = [k for k, (a, b) in enumerate(zip(spans_s, spans_d))
               if s[a[0]:a[1]] != d[b[0]:b[1]]]
    lo, hi = changed[0], changed[-1]
    real, bad = s[spans_s[lo][0]:spans_s[hi][1]], d[spans_d[lo][0]:spans_d[hi][1]]
    label = int(rng.integers(2))
    options = [bad, real] if label else [real, bad]
    out.append((s[:spans_s[lo][0]] + "_" + s[spans_s[hi][1]:], options, label))
  return out


def write_minimal_pairs(splits, out_dir, seed, n):
  """OUT_DIR/{dev,test}.json: [{"question", "options", "label"}] -> {split: pairs}."""
  counts = {}
  for split in ("dev", "test"):
    pairs = minimal_pairs(splits[split], np.random.default_rng([seed, 7, SPLITS.index(split)]),
                          n)
    atomic_write(os.path.join(out_dir, f"{split}.json"), _json(
        [{"question": q, "options": o, "label": l} for q, o, l in pairs]))
    counts[split] = len(pairs)
  return counts
