"""SavedModels that take raw text: tokenization, row packing, model and answer in one graph.

Each export is a `tf.Module` whose `serving_default` signature takes strings ([N] batches):

- classifier: `sentence` (+ `sentence_b` for pair tasks) -> `logits` [N, C], `probabilities`
  [N, C], `label` [N] (the task's label strings); regression: `score` [N];
- race: `article`, `question` [N], `options` [N, 4] -> `logits` [N, 4], `probabilities`
  [N, 4], `answer` [N] ("A"-"D");
- squad: `question`, `context` [N] -> `answer` [N], `start`, `end` [N] (character offsets of
  the answer in the context, end exclusive; -1 for no answer), `score` [N]; SQuAD 2.0 also
  `no_answer_probability` [N];
- encoder (pretraining): `sentence` [N] -> `input_ids` [N, L], `input_mask` [N, L] (1.0 on
  padding), `sequence_output` [N, L, D].

Tokenization is the Python path's, in-graph: XLNet's SentencePiece model is stored as an asset
and applied with tensorflow_text, whose op keeps the same bytes as a graph attribute
(data_utils/sp_graph.py, the release's normalisation included);
MPNet's WordPiece vocab through data_utils/wordpiece.py. Rows are packed by serving/packing.py
(classifier, RACE) and serving/squad_graph.py (doc-stride windows and the beam). A loader needs
only TensorFlow and tensorflow_text. Before any of that, every string input is decoded once,
at the door (serving/utf8.py: invalid UTF-8 -> U+FFFD, as Python's errors="replace").

`save` publishes atomically: the SavedModel is written under a temporary name, loaded back and
checked against the Python path (tokenizer, feature code, model) on a few built-in inputs, and
only then moved into place, `saved_model.pb` last (a reader sees the old export, none, or the
new one). A failed check leaves nothing behind and names the export directory. An export never
deletes what the project did not write: it goes to an absent or empty directory, or replaces an
earlier SavedModel export of ours (data_utils/outputs.py's marker), removing only that export's
own entries; anything else at the path is refused in one line (check_export_dir), before
training by the scripts and again right before publishing.
"""

import functools
import uuid

import numpy as np
import tensorflow as tf

from data_utils import fileio, layouts, outputs
from serving import packing, utf8
from training import task as task_lib

SIGNATURE = "serving_default"
RACE_ANSWERS = ("A", "B", "C", "D")
# The self-check's inputs: accents, CJK, quotes, digits with commas, odd spaces, an empty text.
PROBE_TEXTS = ("Café Müller, founded in 2000, sold 1,000 ``pastries'' to the Élysée.",
               "東京は日本の首都です。 Tokyo!", "  tabs\tand\u00a0spaces  ", "",
               "The QUICK brown fox -- 3,5 km/h -- jumps; \"over\" the dog's ½ bone.")


def graph_tokenizer(tokenizer):
  """The in-graph twin of a Python tokenizer: SentencePiece -> sp_graph; WordPiece (already
  TensorFlow ops) is returned as is."""
  if hasattr(tokenizer, "sp"):
    from data_utils import sp_graph
    return sp_graph.SentencePieceGraphTokenizer.from_tokenizer(tokenizer)
  return tokenizer


class _Serving(tf.Module):
  """Holds the tokenizer (its tables and asset), the model's variables and the signature.

  The Keras model itself is reached through a closure, not tracked: Keras 3 models add default
  signatures of their own to a SavedModel, which would be traced with float inputs.
  """

  def __init__(self, model, tokenizer, fn, input_signature, name):
    super().__init__(name=name)
    self.tokenizer = tokenizer
    # the tf.Variables under the Keras variables: tracking those lets TF1-style loaders (TF
    # Serving's C++ LoadSavedModel, `saved_model_cli run`) restore what the graph reads
    self.model_weights = [w.value for w in model.weights]
    # autograph off: the serving code is plain TensorFlow ops (Python control flow on a
    # tensor would fail the trace, not change it), so its conversion is time for nothing
    self.serving_default = tf.function(_decoded_at_the_door(fn), input_signature=input_signature,
                                       autograph=False)


def _decoded_at_the_door(fn):
  """`fn` on its string inputs decoded once (serving/utf8.py: invalid UTF-8 -> U+FFFD), so
  everything after (tokenizers, offsets, answers) works on valid UTF-8 text."""
  @functools.wraps(fn)
  def serve(*texts):
    return fn(*map(utf8.decode, texts))
  return serve


def _strings(name, shape=(None,)):
  return tf.TensorSpec(list(shape), tf.string, name=name)


def check_padding(padding, xla):
  """The padding a module is exported with: `padding` (packing.PADDINGS; trim_padding refuses
  any other) or, None, "buckets" under XLA (a few shapes to compile) and "longest" without."""
  return padding or ("buckets" if xla else "longest")


def model_call(model, xla):
  """rows -> model outputs (inference). Without `xla`, the function evaluation traced
  (training/task.inference_fn): an export after training traces the model no more. With
  `xla`, compiled by XLA (once per batch shape, which padding="buckets" keeps to a few per
  batch size)."""
  if xla:
    return tf.function(lambda rows: model(rows, training=False), jit_compile=True)
  return task_lib.inference_fn(model)


def classifier_module(model, tokenizer, model_type, max_seq_length, labels, pair, padding=None,
                      xla=False):
  """`sentence` (+ `sentence_b`) -> logits, probabilities, label (regression: score).

  Args:
    model: XLNetClassifier or MPNetClassifier (built).
    tokenizer: the Python tokenizer the task used (SentencePiece Tokenizer or WordPiece).
    labels: the task's label strings; () for regression.
    pair: whether the task takes two texts.
    padding: how long a batch's rows are (packing.trim_padding; None: check_padding).
    xla: compile the model's call with XLA (model_call).
  """
  tok = graph_tokenizer(tokenizer)
  label_table = tf.constant(list(labels) or [""])
  padding, call = check_padding(padding, xla), model_call(model, xla)

  def outputs(rows):
    rows = packing.trim_padding(rows, max_seq_length, layouts.rows(model_type).left_padded,
                                   padding)
    logits = tf.cast(call(rows), tf.float32)
    if not labels:
      return {"score": logits}
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, -1),
            "label": tf.gather(label_table, tf.argmax(logits, -1))}

  if pair:
    def serve(sentence, sentence_b):
      return outputs(packing.pack_rows(model_type, tok, tok.tokenize(sentence),
                                       tok.tokenize(sentence_b), max_seq_length))
    signature = [_strings("sentence"), _strings("sentence_b")]
  else:
    def serve(sentence):
      return outputs(packing.pack_rows(model_type, tok, tok.tokenize(sentence), None,
                                       max_seq_length))
    signature = [_strings("sentence")]
  return _Serving(model, tok, serve, signature, "classifier")


def race_question_option(question, options):
  """race.encode's question+option texts: each "_" of the question replaced by the option, or
  "question option" when it has none.

  Args:
    question: tf.string [N].
    options: tf.string [N, 4].

  Returns:
    tf.string [N * 4], row-major (question n's options at 4n .. 4n + 3).
  """
  n_choice = len(RACE_ANSWERS)
  q = tf.repeat(question, n_choice)
  option = tf.reshape(options, [-1])
  parts = tf.strings.split(q, "_")                              # [4N, (k)]
  row = parts.value_rowids()
  last = tf.gather(parts.row_splits[1:] - 1, row) == tf.range(tf.size(parts.flat_values),
                                                                  dtype=row.dtype)
  filled = tf.where(last, parts.flat_values, parts.flat_values + tf.gather(option, row))
  joined = tf.strings.reduce_join(parts.with_flat_values(filled), axis=1)
  return tf.where(parts.row_lengths() > 1, joined, q + " " + option)


def race_module(model, tokenizer, model_type, max_seq_length, max_qa_length, padding=None,
                xla=False):
  """`article`, `question` [N], `options` [N, 4] -> logits [N, 4], probabilities, answer
  (padding, xla: as classifier_module)."""
  tok = graph_tokenizer(tokenizer)
  padding, call = check_padding(padding, xla), model_call(model, xla)
  answers = tf.constant(list(RACE_ANSWERS))
  n_choice = len(RACE_ANSWERS)

  def serve(article, question, options):
    context = tok.tokenize(article)
    context = tf.gather(context, tf.repeat(tf.range(tf.shape(article)[0]), n_choice))
    qa = tok.tokenize(race_question_option(question, options))
    rows = packing.race_rows(model_type, tok, context, qa, max_seq_length, max_qa_length)
    rows = packing.trim_padding(rows, max_seq_length, layouts.rows(model_type).left_padded,
                                   padding)
    rows = {k: tf.reshape(v, [-1, n_choice, tf.shape(v)[1]]) for k, v in rows.items()}
    logits = tf.cast(call(rows), tf.float32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits, -1),
            "answer": tf.gather(answers, tf.argmax(logits, -1))}

  return _Serving(model, tok, serve, [_strings("article"), _strings("question"),
                                      _strings("options", (None, n_choice))], "race")


def squad_module(model, tokenizer, model_type, config, v2=True, padding=None, xla=False):
  """`question`, `context` -> answer, start, end, score (+ no_answer_probability for v2.0),
  with run_squad's windows (max_seq_length, doc_stride, max_query_length) and beam
  (start_n_top, end_n_top, max_answer_length) taken from `config` (a SquadConfig); padding,
  xla: as classifier_module (the windows are right padded, so positions do not move)."""
  from serving import squad_graph
  tok = graph_tokenizer(tokenizer)
  padding, call = check_padding(padding, xla), model_call(model, xla)
  c = config
  offsets = (tok.tokenize_with_offsets if hasattr(tok, "tokenize_with_offsets")
             else tok.tokenize_words_with_offsets)

  def serve(question, context):
    query = tok.tokenize(question)
    doc_ids, doc_starts, doc_ends = offsets(context)
    windows = squad_graph.make_windows(
        query, doc_ids, c.max_seq_length, c.doc_stride, c.max_query_length, model_type,
        getattr(tok, "bos_id", 1), getattr(tok, "eos_id", 2), getattr(tok, "pad_id", 5))
    rows = {k: windows[k] for k in ("input_ids", "seg_ids", "input_mask", "p_mask",
                                    "cls_index")}
    out = call(packing.trim_padding(rows, c.max_seq_length, False, padding))
    out = {k: tf.cast(v, tf.float32) if v.dtype.is_floating else v for k, v in out.items()}
    best = squad_graph.extract_best(out, windows, doc_starts, doc_ends, context, c.start_n_top,
                                    c.end_n_top, c.max_answer_length)
    keys = ("answer", "start", "end", "score") + (("no_answer_probability",) if v2 else ())
    return {k: best[k] for k in keys}

  return _Serving(model, tok, serve, [_strings("question"), _strings("context")], "squad")


def encoder_module(model, tokenizer, max_seq_length):
  """Pretraining export: `sentence` -> input_ids, input_mask, sequence_output (the content
  stream's last layer, [N, L, D]; rows `A <sep> <cls>` left padded). Always at L: its outputs
  are per position, and clients index them at the fixed length."""
  tok = graph_tokenizer(tokenizer)

  def serve(sentence):
    rows = packing.pack_rows("xlnet", tok, tok.tokenize(sentence), None, max_seq_length)
    out = model(rows, training=False)
    return {"input_ids": rows["input_ids"], "input_mask": rows["input_mask"],
            "sequence_output": tf.cast(out["content_output"], tf.float32)}

  return _Serving(model, tok, serve, [_strings("sentence")], "encoder")


# ---- saving ---------------------------------------------------------------------------------
def _compare(export_dir, got, expected, atol):
  """ValueError naming export_dir when an output differs from the Python path's."""
  for key, want in expected.items():
    have = got[key].numpy()
    if np.asarray(want).dtype.kind in "OSU":
      have = np.array([v.decode("utf-8") for v in have.reshape(-1)], object).reshape(have.shape)
      bad = np.flatnonzero(have.reshape(-1) != np.asarray(want, object).reshape(-1))
      if bad.size:
        k = int(bad[0])
        raise ValueError(f"{export_dir}: export check failed: {key}[{k}] is "
                         f"{have.reshape(-1)[k]!r}, the Python path gives "
                         f"{np.asarray(want, object).reshape(-1)[k]!r}")
      continue
    want = np.asarray(want, np.float64)
    err = float(np.max(np.abs(have - want))) if want.size else 0.0
    if have.shape != want.shape or err > atol * max(1.0, float(np.max(np.abs(want)))):
      raise ValueError(f"{export_dir}: export check failed: {key} differs from the Python path "
                       f"(shape {list(have.shape)} vs {list(want.shape)}, max difference "
                       f"{err:.3g})")


# ---- where an export may go ----------------------------------------------------------------
# What a SavedModel export consists of (the top level of its directory): all that replacing an
# earlier export removes, and all that an unmarked directory may hold to count as one.
EXPORT_NAMES = ("saved_model.pb", "saved_model.pbtxt", "fingerprint.pb", "keras_metadata.pb",
                "variables", "assets", "assets.extra")


def _earlier_export_names(names):
  """Whether an unmarked directory's entries are an earlier version's export: saved_model.pb
  and variables/ and nothing but EXPORT_NAMES (any other entry is somebody else's)."""
  names = set(names)
  return {"saved_model.pb", "variables"} <= names and names <= set(EXPORT_NAMES)


def is_earlier_export(path):
  """Whether directory PATH, without the project's marker, is an export of an earlier version
  of this project (`_earlier_export_names`): such a directory may be replaced."""
  if outputs.read_marker(path) is not None or not fileio.isdir(path):
    return False
  return _earlier_export_names(fileio.listdir_light(path))


def check_export_dir(path, flag="export_dir", model_dir=None):
  """Whether a SavedModel export may be written at PATH; writes nothing.

  Accepted: an absent path, an empty directory, an earlier export of ours (the marker of kind
  outputs.SAVED_MODEL, or an unmarked earlier version's: is_earlier_export). Anything else
  (a file, a path under a file, a run's directory, a folder of somebody's files) is a one-line
  ValueError naming `flag` and PATH, so a caller refuses before any training; `save` asks again
  right before publishing (the path may have changed meanwhile). With `model_dir`, PATH may be
  neither the run's directory nor one holding it (the run would write into the export).

  Returns:
    outputs.check_dir's answer ("new", "empty", "saved_model"), or "earlier" for an unmarked
    earlier export.
  """
  path = str(path).rstrip("/") or str(path)
  name = flag if flag.startswith("--") or " " in flag else f"--{flag}"
  if model_dir:
    here, run = outputs.same_place_key(path), outputs.same_place_key(model_dir)
    if here == run or run.startswith(here.rstrip("/") + "/"):
      what = "is" if here == run else "holds"
      raise ValueError(f"{name}={path}: {what} --model_dir={model_dir}; pass a directory of its "
                       "own for the export (nothing was written or deleted)")
  return outputs.check_dir(path, flag, outputs.SAVED_MODEL, earlier=_earlier_export_names)


def _remove_export(export_dir, names):
  """Removes an earlier export's entries among `names` from `export_dir`, saved_model.pb first
  (from then on a reader sees no export); other entries are never touched."""
  present = set(fileio.listdir(export_dir)) & set(names)
  for name in sorted(present, key=lambda n: n != "saved_model.pb"):
    path = fileio.join(export_dir, name)
    if fileio.isdir(path):
      fileio.rmtree(path)
    else:
      fileio.remove(path)


def publish_dir(tmp, export_dir, flag="export_dir"):
  """Moves the SavedModel at `tmp` to `export_dir`, file by file (gs:// has no directory
  rename), `saved_model.pb` last, so a reader sees the old export, none, or the new one.

  `export_dir` is checked first (check_export_dir: ValueError, nothing moved) and marked as an
  export (data_utils/outputs.py); an earlier export there is invalidated (its saved_model.pb
  removed) and its entries removed (EXPORT_NAMES and the new export's names), never others.
  """
  state = check_export_dir(export_dir, flag)
  outputs.claim_dir(export_dir, outputs.SAVED_MODEL)
  new_names = fileio.listdir(tmp)
  if state not in ("new", "empty"):
    _remove_export(export_dir, set(EXPORT_NAMES) | set(new_names))
  dirs = sorted(d for d, _, _ in fileio.walk(tmp))
  files = sorted(fileio.join(d, f) for d, _, fs in fileio.walk(tmp) for f in fs)
  files.sort(key=lambda f: f == fileio.join(tmp, "saved_model.pb"))
  for d in dirs:      # empty ones too (assets/)
    fileio.makedirs(fileio.join(export_dir, d[len(tmp):].lstrip("/")))
  for src in files:
    fileio.rename(src, fileio.join(export_dir, src[len(tmp):].lstrip("/")))
  fileio.rmtree(tmp)


def save(module, export_dir, probes, expected, atol=1e-4, log=print, flag="export_dir"):
  """Writes `module` as a SavedModel at `export_dir` after checking it.

  `export_dir` must be absent, empty or an earlier export (check_export_dir, asked before
  anything is written and again right before publishing); nothing else there is deleted.

  Args:
    module: a `_Serving` module (classifier_module, race_module, ...).
    export_dir: local path or tf.io.gfile URL.
    flag: the flag (or words) naming `export_dir` in a refusal.
    probes: {input name: array of strings}: inputs of the self-check, checked as one batch
      and each row alone (then padded only to its own length, see packing.trim_padding).
    expected: {output name: array}: what the Python path gives on `probes` (strings compared
      exactly, numbers to `atol` relative to the largest magnitude).

  Returns:
    export_dir.

  Raises:
    ValueError naming export_dir when the reloaded export disagrees with `expected`, or when
    `export_dir` may not receive an export (check_export_dir; the temporary export removed).
  """
  export_dir = export_dir.rstrip("/")
  check_export_dir(export_dir, flag)
  tmp = f"{export_dir}.tmp-{uuid.uuid4().hex[:8]}"
  try:
    # traced here, not inside tf.saved_model.save, whose context is part of tf.function's
    # cache key: so the model's call in it is the function evaluation already traced
    # (model_call); the module keeps the traced signature, which is what is saved
    if hasattr(module.serving_default, "get_concrete_function"):   # not yet traced
      module.serving_default = module.serving_default.get_concrete_function()
    tf.saved_model.save(module, tmp, signatures={SIGNATURE: module.serving_default})
    serve = tf.saved_model.load(tmp).signatures[SIGNATURE]
    got = serve(**{k: tf.constant(v) for k, v in probes.items()})
    _compare(export_dir, got, expected, atol)
    for k in range(len(next(iter(probes.values())))):   # alone, each row is padded less
      _compare(export_dir, serve(**{n: tf.constant(v[k:k + 1]) for n, v in probes.items()}),
               {n: np.asarray(v)[k:k + 1] for n, v in expected.items()}, atol)
    publish_dir(tmp, export_dir, flag)
  finally:
    if fileio.exists(tmp):
      fileio.rmtree(tmp)
  log(f"exported a SavedModel ({SIGNATURE}: {', '.join(probes)} -> "
      f"{', '.join(sorted(got))}) to {export_dir}")
  return export_dir
