"""--model_type=mpnet fine-tuning: layouts, heads equal to Hugging Face's, toy tasks learn."""

import json
import os
import random
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from data_utils import tokenization
from data_utils import layouts
from finetuning import squad_features
from modeling.mpnet import encoder as mpnet
from modeling.mpnet import hf as mpnet_hf
from modeling.mpnet import models as mpnet_models
from tests import warm
from tests.finetuning.test_classifier import sst2  # noqa: F401  (fixture)
from tests.finetuning.test_race import race_dir  # noqa: F401  (fixture)
from tests.finetuning.test_squad import _squad
from tests.hang_guard import HANG_GUARD
from tests.reference_libs import require

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPM_IDS = types.SimpleNamespace(bos_id=1, eos_id=2, pad_id=5)
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")


def _config(vocab, **kw):
  return mpnet.MPNetConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=64,
                           max_position_embeddings=80, **kw)


def test_mpnet_rows_exact():
  ids, seg, mask, a_at, b_at = layouts.pack("mpnet", SPM_IDS, [10, 11, 12], [20, 21], 10)
  assert ids.tolist() == [1, 10, 11, 12, 2, 2, 20, 21, 2, 5]
  assert mask.tolist() == [0] * 9 + [1] and seg.tolist() == [0] * 10 and (a_at, b_at) == (1, 6)
  ids, _, mask, _, _ = layouts.pack("mpnet", SPM_IDS, [10, 11], None, 6)
  assert ids.tolist() == [1, 10, 11, 2, 5, 5] and mask.tolist() == [0, 0, 0, 0, 1, 1]
  a, b = [1, 2, 3, 4, 5], [6, 7, 8]
  layouts.truncate_pair(a, b, 10 - layouts.special_count("mpnet", True), "mpnet")
  assert (a, b) == ([1, 2, 3], [6, 7, 8])


def test_python_rows_equal_the_in_graph_packing():
  """data_utils/layouts.py (features) and data_utils/wordpiece.py (in-graph, = Hugging Face's
  MPNetTokenizer, see tests/data_utils/test_wordpiece.py) cut and lay out pairs identically."""
  from data_utils import wordpiece
  import tensorflow as tf
  pairs = [(la, lb) for la in range(0, 9) for lb in range(0, 9)]
  a_rows = [list(range(10, 10 + la)) for la, _ in pairs]
  b_rows = [list(range(50, 50 + lb)) for _, lb in pairs]
  for max_len in (4, 7, 10, 13):
    want = wordpiece.pack_pair(tf.ragged.constant(a_rows, tf.int32),
                               tf.ragged.constant(b_rows, tf.int32), max_len, 1, 2, 5)
    for k in range(len(pairs)):
      a, b = list(a_rows[k]), list(b_rows[k])
      layouts.truncate_pair(a, b, max_len - 4, "mpnet")
      ids, _, mask, _, _ = layouts.pack("mpnet", SPM_IDS, a, b, max_len)
      assert ids.tolist() == want["input_ids"][k].numpy().tolist(), (pairs[k], max_len)
      assert mask.tolist() == want["input_mask"][k].numpy().tolist()
  ids, seg, mask, a_at, b_at = layouts.pack("xlnet", None, [10, 11], [20], 7)   # unchanged
  assert ids.tolist() == [0, 10, 11, 4, 20, 4, 3] and seg.tolist() == [4, 0, 0, 0, 1, 1, 2]
  assert mask.tolist() == [1, 0, 0, 0, 0, 0, 0] and (a_at, b_at) == (1, 4)


def _random_heads(model, seed=0):
  rng = np.random.default_rng(seed)
  for v in model.trainable_variables:
    v.assign(rng.normal(0, 0.2, v.shape).astype(np.float32))


@pytest.mark.parametrize("kind", ["classifier", "regression", "multiple_choice"])
def test_heads_equal_hugging_face(tmp_path, kind):
  torch = require("torch")
  transformers = require("transformers")
  config = _config(60)
  ids = np.array([[0, 9, 10, 11, 12, 2], [0, 13, 2, 2, 14, 2], [0, 15, 2, 1, 1, 1]])
  mask = (ids == config.pad_token_id).astype(np.float32)
  if kind == "multiple_choice":
    ours = mpnet_models.MPNetRaceModel(config).ensure_built()
    ids, mask = np.stack([ids, ids[::-1]], 1), np.stack([mask, mask[::-1]], 1)
    arch, extra = "MPNetForMultipleChoice", {}
  else:
    n = 1 if kind == "regression" else 3
    ours = mpnet_models.MPNetClassifier(config, n_class=n, regression=n == 1).ensure_built()
    arch, extra = "MPNetForSequenceClassification", {"num_labels": n}
  _random_heads(ours)
  mpnet_hf.save_hf_weights(ours.hf_variable_map(), config, str(tmp_path), arch, **extra)
  hf = getattr(transformers, arch).from_pretrained(str(tmp_path)).eval()
  with torch.no_grad():
    want = hf(torch.tensor(ids), attention_mask=torch.tensor(1 - mask).long()).logits.numpy()
  got = ours({"input_ids": ids, "input_mask": mask}).numpy()
  np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-5, atol=1e-5)


def test_squad_windows_map_back_in_the_mpnet_layout(tmp_path, text_and_sp):
  _, sp = text_and_sp
  tok = tokenization.Tokenizer(sp, lower=True)
  examples, _ = squad_features.read_squad(_squad(tmp_path / "t.json", random.Random(1), 5, False),
                                          is_training=True)
  arrays, infos = squad_features.make_features(tok, examples, 24, 6, 8, True, "mpnet")
  assert len(infos) > len(examples)
  for f, info in enumerate(infos):
    ids, off = arrays["input_ids"][f], info["doc_offset"]
    assert ids[0] == tok.bos_id and arrays["cls_index"][f] == 0 and arrays["p_mask"][f, 0] == 0
    assert ids[off - 2] == ids[off - 1] == tok.eos_id and ids[off + info["length"]] == tok.eos_id
    assert (arrays["p_mask"][f, off:off + info["length"]] == 0).all()
    assert arrays["p_mask"][f, 1:off].all() and arrays["p_mask"][f, off + info["length"]:].all()
    s, e = arrays["start_positions"][f], arrays["end_positions"][f]
    if arrays["is_impossible"][f] == 0:
      ex = examples[info["example_index"]]
      assert ex.context[info["starts"][s - off]:info["ends"][e - off]].strip() == ex.answer_text
    else:
      assert s == e == 0


def _write_config(path, vocab, pad_id=5):
  data = dict(_config(vocab, pad_token_id=pad_id).to_dict(), hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0)
  path.write_text(json.dumps(data))
  return path


@pytest.mark.slow
def test_classifier_learns_and_checks_the_pad_id(sst2, tmp_path):  # noqa: F811
  d, sp, _ = sst2
  base = [sys.executable, "run_classifier.py", "--model_type=mpnet", "--task_name=sst-2",
          f"--data_dir={d}", f"--sp_model={sp}", "--uncased", "--max_seq_length=48",
          "--train_batch_size=16", "--learning_rate=1e-3", "--train_steps=150",
          "--warmup_steps=15", "--save_every=75", "--steps_per_loop=15", "--do_train",
          "--do_eval"]
  bad = _write_config(tmp_path / "bad.json", 120, pad_id=1)
  r = warm.run(base + [f"--model_config_path={bad}", f"--model_dir={tmp_path}/bad"],
                     cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD, env=ENV)
  assert r.returncode == 1 and "pad_token_id=1" in r.stderr.strip().splitlines()[-1]
  short = tmp_path / "short.json"
  short.write_text(json.dumps(dict(json.loads(_write_config(short, 120).read_text()),
                                   max_position_embeddings=40)))
  r = warm.run(base + [f"--model_config_path={short}", f"--model_dir={tmp_path}/short"],
                     cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD, env=ENV)
  assert r.returncode == 1
  assert "max_position_embeddings=40" in r.stderr.strip().splitlines()[-1], r.stderr[-500:]
  cfg = _write_config(tmp_path / "config.json", 120)
  r = warm.run(base + [f"--model_config_path={cfg}", f"--model_dir={tmp_path}/m"],
                     cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD, env=ENV)
  assert r.returncode == 0, r.stderr[-3000:]
  result = json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
  assert result["accuracy"] > 0.85, r.stdout


@pytest.mark.slow
def test_race_learns(race_dir, tmp_path):  # noqa: F811
  d, sp, _ = race_dir
  cfg = _write_config(tmp_path / "config.json", 80)
  args = [sys.executable, "run_race.py", "--model_type=mpnet", f"--data_dir={d}",
          f"--sp_model={sp}", "--uncased", f"--model_config_path={cfg}",
          f"--model_dir={tmp_path}/run", "--max_seq_length=64", "--max_qa_length=12",
          "--train_batch_size=16", "--learning_rate=1e-3", "--train_steps=200",
          "--warmup_steps=20", "--save_every=100", "--steps_per_loop=20", "--do_train",
          "--do_eval"]
  r = warm.run(args, cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD, env=ENV)
  assert r.returncode == 0, r.stderr[-3000:]
  result = json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
  assert result["accuracy"] > 0.6, r.stdout          # chance is 0.25


def test_wordpiece_features_equal_hugging_face(tmp_path):
  """run_classifier's rows from a WordPiece vocab.txt (--vocab_file) are what Hugging Face's
  MPNetTokenizer gives for the same pairs (truncation included)."""
  transformers = require("transformers")
  from finetuning.classifier_task import ClassifierConfig, ClassifierTask
  from finetuning import classifier_features
  from tests.data_utils.test_wordpiece import SENTENCES
  vocab = tmp_path / "vocab"
  vocab.mkdir()
  words = sorted({w for s in SENTENCES for w in s.lower().replace(",", " ").split()})
  pieces = (["<s>", "<pad>", "</s>", "<unk>", "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            + list(".,!?") + words + ["##s", "##ing"] + ["<mask>"])
  (vocab / "vocab.txt").write_text("".join(p + "\n" for p in dict.fromkeys(pieces)))
  rng = random.Random(0)
  rows = [(" ".join(rng.choices(words, k=rng.randrange(1, 12))) + ".",
           " ".join(rng.choices(words, k=rng.randrange(1, 12))) + "!") for _ in range(20)]
  data = tmp_path / "rte"
  data.mkdir()
  (data / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n" + "".join(
      f"{i}\t{a}\t{b}\tentailment\n" for i, (a, b) in enumerate(rows)))
  config = ClassifierConfig(task_name="rte", data_dir=str(data), sp_model=None,
                            vocab_file=str(vocab / "vocab.txt"), model_type="mpnet",
                            cache_dir=str(tmp_path / "cache"), max_seq_length=16)
  task = ClassifierTask(config, _config(len(dict.fromkeys(pieces))), None)
  feats = classifier_features.parse(
      tf.constant(list(tf.data.TFRecordDataset(task.features_path("dev")).as_numpy_iterator())),
      16, False)
  hf = transformers.MPNetTokenizer.from_pretrained(str(vocab), local_files_only=True)
  want = hf([a for a, _ in rows], [b for _, b in rows], truncation="longest_first",
            max_length=16, padding="max_length")
  np.testing.assert_array_equal(feats["input_ids"].numpy(), np.array(want["input_ids"]))
  np.testing.assert_array_equal(feats["input_mask"].numpy(),
                                1 - np.array(want["attention_mask"]))
