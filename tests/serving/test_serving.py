"""SavedModel exports on raw text: a fresh process that imports only tensorflow and
tensorflow_text gets the Python path's predictions (classifier, RACE, SQuAD, the pretraining
encoder; XLNet cased and uncased, MPNet with WordPiece), through tf.saved_model.load and, for
three of them, through a TF1 session (how TF Serving and saved_model_cli load a SavedModel);
publication is atomic and checked."""

import functools
import json
import os
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from data_utils import fileio, tokenization, wordpiece
from finetuning import classifier_data, classifier_features, classifier_task, race, squad
from finetuning.squad import SquadConfig, SquadTask
from modeling.mpnet import encoder as mpnet
from modeling.mpnet import models as mpnet_models
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet import release_checkpoint
from modeling.xlnet.models import (XLNetClassifier, XLNetPretrainModel, XLNetRaceModel,
                                   XLNetSquadModel)
from serving import export, tasks
from tests import warm
from tests import data_fixtures
from tests.data_utils import test_wordpiece
from tests.hang_guard import HANG_GUARD

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
ENV.pop("PYTHONPATH", None)
LONG = ("The committee met in Zürich on 3 March 2000, and again, after 1,250 days, in Kraków. "
        * 14)
TEXTS = ["Café Müller, founded in 2000, sold 1,000 ``pastries'' to the Élysée.",
         "東京は日本の首都です。Tokyo, 2,000 km away!", "  tabs\tand\u00a0odd   spaces ",
         "", 'She said "no" -- it wasn\'t ½ or ² of 10,5 €.', LONG,
         "ΟΔΟΣ ΣΟΦΟΣ naïve İstanbul ﬁne", "<sep> <cls> <eop> spelled out"]
PAIRS = TEXTS[3:] + TEXTS[:3]          # the empty text meets a non-empty one, and vice versa
_CHECK = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops the graphs use)
requests = json.load(open(sys.argv[1]))
out = {}
for name, request in requests.items():
  fn = tf.saved_model.load(request["dir"]).signatures["serving_default"]
  got = fn(**{k: tf.constant(v) for k, v in request["inputs"].items()})
  out[name] = {k: (np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(v.numpy()).tolist()
                   if v.dtype == tf.string else v.numpy().tolist()) for k, v in got.items()}
# TF Serving's way (C++ LoadSavedModel: a TF1 session, variables restored by the saver_def)
sessions = {}
for name in json.load(open(sys.argv[3])):
  request = requests[name]
  with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
    meta = tf.compat.v1.saved_model.load(sess, ["serve"], request["dir"])
    sig = meta.signature_def["serving_default"]
    got = sess.run({k: v.name for k, v in sig.outputs.items()},
                   {sig.inputs[k].name: v for k, v in request["inputs"].items()})
  sessions[name] = {k: (np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(v).tolist()
                        if v.dtype == object else v.tolist()) for k, v in got.items()}
ours = sorted(m for m in sys.modules
              if m.split(".")[0] in ("data_utils", "modeling", "serving", "finetuning",
                                     "training", "tests"))
json.dump({"outputs": out, "sessions": sessions, "modules": ours}, open(sys.argv[2], "w"))
"""


def _randomize(model, seed):
  rng = np.random.default_rng(seed)
  for v in model.trainable_variables:
    v.assign(rng.normal(0, 0.3, v.shape).astype(np.float32))
  return model


def _xlnet_config(vocab):
  return XLNetConfig(n_layer=2, d_model=32, n_head=2, d_head=16, d_inner=64, n_token=vocab)


RUN = RunConfig(dropout=0.0, dropatt=0.0)


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory, text_and_sp):
  """uncased: the session's 800-piece model; cased: a model with digit-comma pieces."""
  directory = str(tmp_path_factory.mktemp("serving_sp"))
  text = open(text_and_sp[0], encoding="utf-8").read()[:60_000]
  cased = data_fixtures.make_digit_comma_model(
      directory, text + "\nIn 2000, sold 1,000 of them; 3,5 and 10,5.\n" * 50, 500,
      ["▁2000,", "000,"])
  vocab = tmp_path_factory.mktemp("serving_vocab") / "vocab.txt"
  pieces = (["<s>", "<pad>", "</s>", "<unk>", "[UNK]"] + test_wordpiece.PUNCT
            + test_wordpiece.WORDS + test_wordpiece.LETTERS + test_wordpiece.SUFFIXES)
  test_wordpiece.write_vocab(vocab, list(dict.fromkeys(pieces)) + ["<mask>"])
  return {"uncased": tokenization.Tokenizer(text_and_sp[1], lower=True),
          "cased": tokenization.Tokenizer(cased), "wordpiece": wordpiece.WordPieceTokenizer(
              str(vocab))}


def _squad_task(tmp_path, tok, model_config, model_type="xlnet"):
  config = SquadConfig(model_dir=str(tmp_path), max_seq_length=40, doc_stride=12,
                       max_query_length=10, max_answer_length=8, start_n_top=3, end_n_top=3,
                       n_best_size=3, model_type=model_type)
  return SquadTask(config, model_config, RUN, tok)


def _squad_file(path, questions, contexts):
  data = [{"title": "t", "paragraphs": [{"context": c, "qas": [{"id": f"q{k}", "question": q,
                                                                  "answers": []}]}]}
          for k, (q, c) in enumerate(zip(questions, contexts))]
  path.write_text(json.dumps({"version": "2.0", "data": data}, ensure_ascii=False),
                  encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tokenizers):
  """Every kind of export, with the Python path's answers on the same raw inputs."""
  root = tmp_path_factory.mktemp("exports")
  cased, uncased, wp = tokenizers["cased"], tokenizers["uncased"], tokenizers["wordpiece"]
  cases = {}

  def add(name, module_export, inputs, expected):
    cases[name] = {"dir": module_export(str(root / name)), "inputs": inputs,
                   "expected": expected}

  # classifier, pair task, cased; regression, uncased
  for name, tok, task_name, seed in (("mnli", cased, "mnli", 1), ("stsb", uncased, "sts-b", 2)):
    spec = classifier_data.get_task(task_name)
    model = _randomize(XLNetClassifier(_xlnet_config(tok.vocab_size), RUN,
                                       n_class=max(len(spec.labels), 1), task_name=task_name,
                                       regression=spec.is_regression).ensure_built(), seed)
    task = types.SimpleNamespace(config=types.SimpleNamespace(max_seq_length=24,
                                                              model_type="xlnet"),
                                 spec=spec, tokenizer=tok)
    add(name, lambda d, t=task, m=model: classifier_task.export_classifier(t, m, d, log=lambda _: None),
        {"sentence": TEXTS, "sentence_b": PAIRS},
        classifier_task.classifier_outputs(task, model, TEXTS, PAIRS))
  # MPNet + WordPiece, single sentences
  mconfig = mpnet.MPNetConfig(vocab_size=wp.vocab_size, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=64,
                              max_position_embeddings=80)
  model = _randomize(mpnet_models.MPNetClassifier(mconfig, n_class=2).ensure_built(), 3)
  task = types.SimpleNamespace(config=types.SimpleNamespace(max_seq_length=20,
                                                            model_type="mpnet"),
                               spec=classifier_data.get_task("sst-2"), tokenizer=wp)
  add("sst2_mpnet", lambda d: classifier_task.export_classifier(task, model, d, log=lambda _: None),
      {"sentence": TEXTS}, classifier_task.classifier_outputs(task, model, TEXTS, None))
  # RACE, uncased
  race_model = _randomize(XLNetRaceModel(_xlnet_config(uncased.vocab_size), RUN).ensure_built(), 4)
  race_task = types.SimpleNamespace(config=types.SimpleNamespace(max_seq_length=32,
                                                                 model_type="xlnet"),
                                    tokenizer=uncased, max_qa_length=12)
  articles, questions = [LONG, TEXTS[0], ""], ["Where did _ meet?", "Who sold 1,000?", "_"]
  options = [["Zürich", "Kraków", "", "東京"], ["Café", "the Élysée", "½", "x_y"],
             ["a", "b", "c", "d"]]
  add("race", lambda d: race.export_race(race_task, race_model, d, log=lambda _: None),
      {"article": articles, "question": questions, "options": options},
      race.race_outputs(race_task, race_model, articles, questions, options))
  # SQuAD v2, cased (XLNet) and WordPiece (MPNet): the scripts' prediction files
  contexts = [LONG, TEXTS[0], TEXTS[1], TEXTS[4], "  " + TEXTS[6]]
  questions = ["When did the committee meet?", "Who sold 1,000 pastries?", "", "½ of what?",
               "ΣΟΦΟΣ?"]
  for name, tok, make in (
      ("squad", cased, lambda: XLNetSquadModel(_xlnet_config(cased.vocab_size), RUN,
                                               start_n_top=3, end_n_top=3)),
      ("squad_mpnet", wp, lambda: mpnet_models.MPNetSquadModel(
          mpnet.MPNetConfig(**{**mconfig.to_dict(), "vocab_size": wp.vocab_size}),
          start_n_top=3, end_n_top=3))):
    model = _randomize(make().ensure_built(), 5)
    out_dir = root / f"{name}_files"
    out_dir.mkdir()
    sq_task = _squad_task(out_dir, tok, model.config, "mpnet" if "mpnet" in name else "xlnet")
    sq_task.predict(model, _squad_file(out_dir / "dev.json", questions, contexts), str(out_dir))
    preds = json.loads((out_dir / "predictions.json").read_text(encoding="utf-8"))
    nbest = json.loads((out_dir / "nbest_predictions.json").read_text(encoding="utf-8"))
    odds = json.loads((out_dir / "null_odds.json").read_text(encoding="utf-8"))
    ids = [f"q{k}" for k in range(len(questions))]
    expected = {"answer": [preds[i] for i in ids],
                "start": [nbest[i][0].get("start", -1) for i in ids],
                "end": [nbest[i][0].get("end", -1) for i in ids],
                "score": [nbest[i][0]["log_score"] for i in ids],
                "no_answer_probability": [1 / (1 + np.exp(-odds[i])) for i in ids]}
    assert sum(bool(a) for a in expected["answer"]) >= 3, expected["answer"]
    add(name, lambda d, t=sq_task, m=model: squad.export_squad(t, m, d, log=lambda _: None),
        {"question": questions, "context": contexts}, expected)
  # the pretraining encoder, cased
  enc = _randomize(XLNetPretrainModel(_xlnet_config(cased.vocab_size), RUN).ensure_built(), 6)
  add("encoder", lambda d: tasks.export_encoder(enc, cased, 24, d, log=lambda _: None),
      {"sentence": TEXTS}, tasks.encoder_outputs(enc, cased, 24, TEXTS))
  return root, cases


def test_a_fresh_process_gets_the_python_paths_predictions(exported):
  root, cases = exported
  request = root / "requests.json"
  request.write_text(json.dumps({k: {"dir": c["dir"], "inputs": c["inputs"]}
                                 for k, c in cases.items()}, ensure_ascii=False),
                     encoding="utf-8")
  in_sessions = root / "sessions.json"
  in_sessions.write_text(json.dumps(["mnli", "sst2_mpnet", "squad"]))
  r = warm.run([sys.executable, "-c", _CHECK, str(request), str(root / "out.json"),
                      str(in_sessions)],
                     cwd=str(root), env=ENV, capture_output=True, text=True, timeout=HANG_GUARD)
  assert r.returncode == 0, r.stderr[-3000:]
  result = json.loads((root / "out.json").read_text(encoding="utf-8"))
  assert result["modules"] == []            # none of this project's code was needed
  runs = [(name, result["outputs"][name]) for name in cases]
  runs += [(name, got) for name, got in result["sessions"].items()]
  assert len(runs) == len(cases) + 3
  for name, got in runs:
    case = cases[name]
    assert set(case["expected"]) <= set(got), (name, sorted(got))
    for key, want in case["expected"].items():
      have = got[key]
      if isinstance(np.asarray(want, object).reshape(-1)[0], str):
        assert have == list(np.asarray(want, object).tolist()), (name, key)
      elif key in ("start", "end", "input_ids"):
        np.testing.assert_array_equal(have, want, err_msg=f"{name} {key}")
      else:
        np.testing.assert_allclose(have, want, rtol=0, err_msg=f"{name} {key}",
                                   atol=1e-5 * max(1.0, float(np.max(np.abs(want)))))


def test_squad_offsets_point_at_the_answer(exported):
  _, cases = exported
  for name in ("squad", "squad_mpnet"):
    case = cases[name]
    for context, answer, start, end in zip(case["inputs"]["context"], case["expected"]["answer"],
                                           case["expected"]["start"], case["expected"]["end"]):
      if answer:
        assert context[start:end] == answer, (name, answer, start, end)


def test_signatures_are_on_strings(exported):
  _, cases = exported
  loaded = tf.saved_model.load(cases["mnli"]["dir"])
  spec = loaded.signatures["serving_default"].structured_input_signature[1]
  assert {k: (v.dtype, v.shape.as_list()) for k, v in spec.items()} == {
      "sentence": (tf.string, [None]), "sentence_b": (tf.string, [None])}
  assert os.listdir(os.path.join(cases["squad"]["dir"], "assets"))   # spiece.model travels


def _xlnet_classifier_task(tok, task_name, max_seq_length, seed):
  """(a task namespace as classifier_task.export_classifier reads it, a random XLNetClassifier)."""
  spec = classifier_data.get_task(task_name)
  model = _randomize(XLNetClassifier(_xlnet_config(tok.vocab_size), RUN, n_class=len(spec.labels),
                                     task_name=task_name).ensure_built(), seed)
  task = types.SimpleNamespace(config=types.SimpleNamespace(max_seq_length=max_seq_length,
                                                            model_type="xlnet"),
                               spec=spec, tokenizer=tok)
  return task, model


def test_a_failed_check_publishes_nothing_and_a_rerun_replaces(tmp_path, tokenizers):
  tok = tokenizers["uncased"]
  task, model = _xlnet_classifier_task(tok, "sst-2", 16, 7)
  spec = task.spec
  module = export.classifier_module(model, tok, "xlnet", 16, spec.labels, pair=False)
  target = f"{tmp_path}/export"
  wrong = classifier_task.classifier_outputs(task, model, TEXTS[:2], None)
  wrong["logits"] = wrong["logits"] + 1.0
  with pytest.raises(ValueError, match=f"{target}: export check failed: logits"):
    export.save(module, target, {"sentence": np.array(TEXTS[:2], object)}, wrong,
                log=lambda _: None)
  assert os.listdir(tmp_path) == []                 # no export, no temporary leftovers
  classifier_task.export_classifier(task, model, target, log=lambda _: None)
  first = sorted(os.listdir(target))
  classifier_task.export_classifier(task, model, target, log=lambda _: None)   # over an existing one
  assert sorted(os.listdir(target)) == first and "saved_model.pb" in first
  assert os.listdir(tmp_path) == ["export"]


def test_squad_exports_no_answer_probability_for_squad_2_data(tmp_path, tokenizers):
  tok = tokenizers["cased"]
  task = _squad_task(tmp_path, tok, _xlnet_config(tok.vocab_size))
  assert squad.squad_v2(task) and not squad.squad_v2(task, "1.1")    # nothing read yet
  v1 = tmp_path / "v1.json"
  qa = {"id": "a", "question": "Colour?", "answers": [{"text": "red", "answer_start": 13}]}
  v1.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": [
      {"context": "The door was red.", "qas": [qa]}]}]}))
  task._features(str(v1), True)
  assert not squad.squad_v2(task) and squad.squad_v2(task, "2.0")
  task._features(_squad_file(tmp_path / "v2.json", ["q"], ["c"]), False)   # no answers: not 2.0
  assert not squad.squad_v2(task)


def test_run_classifier_exports_from_init_checkpoint_without_data(tmp_path, tokenizers):
  """--export_dir alone (no --do_*, no --data_dir): the SavedModel of the --init_checkpoint."""
  from tests.script_helpers import run_main
  tok = tokenizers["uncased"]
  config = _xlnet_config(tok.vocab_size)
  (tmp_path / "config.json").write_text(config.to_json())
  model = _randomize(XLNetClassifier(config, RUN, n_class=2, task_name="sst-2").ensure_built(), 8)
  release_checkpoint.save_tf1_checkpoint(model, str(tmp_path / "ckpt" / "model.ckpt"))
  run_main("run_classifier.py", task_name="sst-2", sp_model=tok.model_path, uncased=True,
           model_config_path=str(tmp_path / "config.json"), max_seq_length=16,
           init_checkpoint=str(tmp_path / "ckpt" / "model.ckpt"), model_dir=str(tmp_path / "m"),
           export_dir=str(tmp_path / "serving"), dropout=0.0, dropatt=0.0)
  served = tf.saved_model.load(str(tmp_path / "serving")).signatures["serving_default"](
      sentence=tf.constant(TEXTS))
  task = types.SimpleNamespace(config=types.SimpleNamespace(max_seq_length=16,
                                                            model_type="xlnet"),
                               spec=classifier_data.get_task("sst-2"), tokenizer=tok)
  want = classifier_task.classifier_outputs(task, model, TEXTS)
  np.testing.assert_allclose(served["logits"].numpy(), want["logits"], atol=1e-5)
  assert [v.decode() for v in served["label"].numpy()] == want["label"].tolist()


def test_xla_exports_pad_to_buckets_and_give_the_python_paths_outputs(tmp_path, tokenizers):
  """export_xla: the forward pass compiled by XLA, rows padded to 16/32/40 (packing.
  length_buckets); export.save's check (the probes as a batch and each alone) passes, and so do
  other batches, for a pair classifier and RACE (whose rows are reshaped [N, 4, T])."""
  tok = tokenizers["cased"]
  task, model = _xlnet_classifier_task(tok, "mnli", 40, 9)
  target = classifier_task.export_classifier(task, model, str(tmp_path / "cls"), log=lambda _: None,
                                   xla=True)
  assert b"_XlaMustCompile" in (tmp_path / "cls" / "saved_model.pb").read_bytes()
  fn = tf.saved_model.load(target).signatures["serving_default"]
  for rows in (slice(0, 3), slice(3, 5), slice(5, 6), slice(0, 8)):
    got = fn(sentence=tf.constant(TEXTS[rows]), sentence_b=tf.constant(PAIRS[rows]))
    want = classifier_task.classifier_outputs(task, model, TEXTS[rows], PAIRS[rows])
    np.testing.assert_allclose(got["logits"].numpy(), want["logits"], atol=1e-5)
  race_model = _randomize(XLNetRaceModel(_xlnet_config(tok.vocab_size), RUN).ensure_built(), 10)
  race_task = types.SimpleNamespace(config=types.SimpleNamespace(max_seq_length=40,
                                                                 model_type="xlnet"),
                                    tokenizer=tok, max_qa_length=12)
  race.export_race(race_task, race_model, str(tmp_path / "race"), log=lambda _: None, xla=True)


def _count_traces(monkeypatch, model_type):
  """[n]: how many times `model_type`'s call is traced (run inside a tf.function's graph)."""
  traces, call = [0], model_type.call

  @functools.wraps(call)          # Keras reads the call's signature
  def counting(self, *args, **kwargs):
    traces[0] += tf.inside_function()
    return call(self, *args, **kwargs)
  monkeypatch.setattr(model_type, "call", counting)
  return traces


def test_an_export_after_evaluation_traces_the_model_no_more(tmp_path, tokenizers, monkeypatch):
  """The export's model call (no XLA) is the function the run's evaluation and predictions
  traced (training/task.inference_fn: the model's inputs alone, any batch and sequence
  length), so exporting after them adds no trace of the model: SQuAD (predictions, then the
  export) and a classifier (evaluation batches with their labels, then the export)."""
  tok = tokenizers["cased"]
  model = _randomize(XLNetSquadModel(_xlnet_config(tok.vocab_size), RUN, start_n_top=3,
                                     end_n_top=3).ensure_built(), 8)
  traces = _count_traces(monkeypatch, XLNetSquadModel)      # from here on: building traces too
  sq_task = _squad_task(tmp_path, tok, model.config)
  sq_task.predict(model, _squad_file(tmp_path / "dev.json", ["Who sold 1,000?", "When?"],
                                     [TEXTS[0], LONG]), str(tmp_path))
  assert traces == [1]
  squad.export_squad(sq_task, model, str(tmp_path / "squad"), log=lambda _: None)
  assert traces == [1]

  task, model = _xlnet_classifier_task(tok, "mnli", 24, 9)
  traces = _count_traces(monkeypatch, XLNetClassifier)
  feats = classifier_features.encode(
      tok, [classifier_data.Example(str(k), a, b) for k, (a, b) in enumerate(zip(TEXTS, PAIRS))],
      24, task.spec.labels, "xlnet")
  batches = tf.data.Dataset.from_tensor_slices(
      {k: feats[k] for k in ("input_ids", "seg_ids", "input_mask", "label")}).batch(3)
  classifier_task.ClassifierTask._forward(None, model, batches)   # pylint: disable=protected-access
  assert traces == [1]
  classifier_task.export_classifier(task, model, str(tmp_path / "cls"), log=lambda _: None)
  assert traces == [1]


def test_a_task_type_without_an_export_is_refused_before_training():
  from finetuning import runner
  from training.task import Task

  class NoExport(Task):          # the three methods the contract requires, and no export
    build_model = dataset = loss = lambda self, *args, **kwargs: None

  with pytest.raises(ValueError, match="--export_dir: NoExport has no SavedModel export"):
    runner.check_export(NoExport())
  for task_type in (classifier_task.ClassifierTask, race.RaceTask, squad.SquadTask):
    assert task_type.export is not Task.export, task_type
  with pytest.raises(TypeError, match="abstract"):   # the contract: build_model, dataset, loss
    type("Incomplete", (Task,), {"build_model": lambda self: None})()
