"""`--export_dir` for each task: the serving module plus the Python path's answers on the
self-check inputs (serving/export.py publishes only when the two agree).

The Python path is what the scripts themselves run: the task's tokenizer, its feature code
(classifier_features.encode, race.encode, squad_features.make_features) and the model. Its raw
texts may be bytes or str: each is first decoded as the serving graph decodes a request
(serving/utf8.py: invalid UTF-8 -> U+FFFD), so the two give the same outputs on the same bytes.
"""

import numpy as np
import tensorflow as tf

from data_utils import fileio
from finetuning import classifier_data, classifier_features, race, squad, squad_features
from serving import export, utf8

_LONG = " ".join(export.PROBE_TEXTS) * 12        # longer than any window


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _forward(model, arrays):
  out = model({k: tf.constant(v) for k, v in arrays.items()}, training=False)
  if isinstance(out, dict):
    return {k: v.numpy() for k, v in out.items()}
  return out.numpy().astype(np.float64)


def is_pair_task(spec):
  """Whether a classification task's examples have a second text."""
  return any(cols[1] is not None for cols in spec.columns.values())


def classifier_outputs(task, model, texts, texts_b=None):
  """The Python path's classifier outputs on raw texts (texts_b None: single-text task)."""
  c, spec = task.config, task.spec
  texts = utf8.python_texts(texts)
  texts_b = utf8.python_texts(texts_b) if texts_b is not None else [None] * len(texts)
  examples = [classifier_data.Example(str(k), a, b)
              for k, (a, b) in enumerate(zip(texts, texts_b))]
  feats = classifier_features.encode(task.tokenizer, examples, c.max_seq_length, spec.labels,
                                     c.model_type)
  logits = _forward(model, {k: feats[k] for k in ("input_ids", "seg_ids", "input_mask")})
  if spec.is_regression:
    return {"score": logits}
  return {"logits": logits, "probabilities": _softmax(logits),
          "label": np.array([spec.labels[i] for i in logits.argmax(-1)], object)}


def export_classifier(task, model, export_dir, log=print, padding=None, xla=False):
  c, spec = task.config, task.spec
  pair = is_pair_task(spec)
  texts = list(export.PROBE_TEXTS) + [_LONG]
  texts_b = texts[2:] + texts[:2] if pair else None
  probes = {"sentence": np.array(texts, object)}
  if pair:
    probes["sentence_b"] = np.array(texts_b, object)
  module = export.classifier_module(model, task.tokenizer, c.model_type, c.max_seq_length,
                                    spec.labels, pair, padding=padding, xla=xla)
  return export.save(module, export_dir, probes, classifier_outputs(task, model, texts, texts_b),
                     log=log)


def race_outputs(task, model, articles, questions, options):
  """The Python path's RACE outputs (options: 4 strings per question)."""
  c = task.config
  articles, questions, options = map(utf8.python_texts, (articles, questions, options))
  items = [("middle", a, q, list(o), 0) for a, q, o in zip(articles, questions, options)]
  feats = race.encode(task.tokenizer, items, c.max_seq_length, task.max_qa_length, c.model_type)
  logits = _forward(model, {k: feats[k] for k in ("input_ids", "seg_ids", "input_mask")})
  return {"logits": logits, "probabilities": _softmax(logits),
          "answer": np.array([export.RACE_ANSWERS[i] for i in logits.argmax(-1)], object)}


def export_race(task, model, export_dir, log=print, padding=None, xla=False):
  c = task.config
  articles = [_LONG, export.PROBE_TEXTS[0]]
  questions = ["Who sold the _ to the Élysée?", "What is true? 1,000"]
  options = [["pastries", "$1 \\1 cakes", "東京", ""], ["a_b", "   ", "½", "Tokyo!"]]
  probes = {"article": np.array(articles, object), "question": np.array(questions, object),
            "options": np.array(options, object)}
  module = export.race_module(model, task.tokenizer, c.model_type, c.max_seq_length,
                              task.max_qa_length, padding=padding, xla=xla)
  return export.save(module, export_dir, probes,
                     race_outputs(task, model, articles, questions, options), log=log)


def squad_python_path(task, model, questions, contexts):
  """run_squad's prediction on (question, context) pairs -> dict answer, start, end, score,
  no_answer_probability (numpy), from predictions / nbest / null odds as the files hold them."""
  c = task.c
  questions, contexts = utf8.python_texts(questions), utf8.python_texts(contexts)
  examples = [squad_features.SquadExample(f"q{k}", q, ctx)
              for k, (q, ctx) in enumerate(zip(questions, contexts))]
  arrays, infos = squad_features.make_features(task.tokenizer, examples, c.max_seq_length,
                                               c.doc_stride, c.max_query_length, False,
                                               c.model_type)
  outs = _forward(model, arrays)
  preds, nbest, null_odds = squad.extract_answers(examples, infos, outs, c.start_n_top,
                                                  c.end_n_top, c.max_answer_length, 1)
  top = [nbest[ex.qas_id][0] for ex in examples]
  return {"answer": np.array([preds[ex.qas_id] for ex in examples], object),
          "start": np.array([t.get("start", -1) for t in top], np.int64),
          "end": np.array([t.get("end", -1) for t in top], np.int64),
          "score": np.array([t["log_score"] for t in top], np.float64),
          "no_answer_probability": 1 / (1 + np.exp(-np.array(
              [null_odds[ex.qas_id] for ex in examples], np.float64)))}


def export_squad(task, model, export_dir, v2=True, log=print, padding=None, xla=False):
  contexts = [_LONG, export.PROBE_TEXTS[0], export.PROBE_TEXTS[1]]
  questions = ["Who sold 1,000 pastries?", "When was Café Müller founded?", ""]
  expected = squad_python_path(task, model, questions, contexts)
  if not v2:
    del expected["no_answer_probability"]
  probes = {"question": np.array(questions, object), "context": np.array(contexts, object)}
  module = export.squad_module(model, task.tokenizer, task.c.model_type, task.c, v2=v2,
                               padding=padding, xla=xla)
  return export.save(module, export_dir, probes, expected, log=log)


def encoder_outputs(model, tokenizer, max_seq_length, texts):
  """The Python path's encoder rows (the classifier's single-text rows, `A <sep> <cls>`) and
  content-stream output."""
  texts = utf8.python_texts(texts)
  examples = [classifier_data.Example(str(k), text) for k, text in enumerate(texts)]
  feats = classifier_features.encode(tokenizer, examples, max_seq_length, (), "xlnet")
  arrays = {k: feats[k] for k in ("input_ids", "seg_ids", "input_mask")}
  out = _forward(model, arrays)
  return {"input_ids": arrays["input_ids"], "input_mask": arrays["input_mask"],
          "sequence_output": out["content_output"]}


def export_encoder(model, tokenizer, max_seq_length, export_dir, log=print):
  texts = list(export.PROBE_TEXTS) + [_LONG]
  module = export.encoder_module(model, tokenizer, max_seq_length)
  return export.save(module, export_dir, {"sentence": np.array(texts, object)},
                     encoder_outputs(model, tokenizer, max_seq_length, texts), log=log)


def export_pretrained(task, model_dir, sp_model, uncased=False, log=print):
  """MODEL_DIR/export/saved_model: the encoder of a finished XLNet pretraining run (read back
  from its release-named export, run without memory, bi_data or dropout) on raw text."""
  import dataclasses
  from data_utils.tokenization import Tokenizer
  from modeling import checkpoint
  from modeling.models import XLNetPretrainModel
  run_config = dataclasses.replace(task.run_config, bi_data=False, mem_len=0, reuse_len=0,
                                   dropout=0.0, dropatt=0.0)
  model = XLNetPretrainModel(task.model_config, run_config)
  export_root = fileio.join(model_dir, "export")
  checkpoint.load_tf1_checkpoint(model, fileio.join(export_root, "xlnet_model.ckpt"))
  return export_encoder(model, Tokenizer(sp_model, lower=uncased), task.config.seq_len,
                        fileio.join(export_root, "saved_model"), log)


def squad_v2(task, version=None):
  """Whether a SQuAD export also answers no_answer_probability: --version when given, else
  whether the data the task read held unanswerable questions (True when it read none)."""
  return {"1.1": False, "2.0": True}.get(version, getattr(task, "saw_impossible", True))


def export_task(task, model, export_dir, log=print, v2=True, padding=None, xla=False):
  """The SavedModel of a fine-tuning task (ClassifierTask, RaceTask or SquadTask; `v2`: the
  SQuAD signature also returns no_answer_probability; padding, xla: export.classifier_module)."""
  options = dict(log=log, padding=padding, xla=xla)
  if isinstance(task, race.RaceTask):
    return export_race(task, model, export_dir, **options)
  if isinstance(task, squad.SquadTask):
    return export_squad(task, model, export_dir, v2=v2, **options)
  return export_classifier(task, model, export_dir, **options)
