"""run_squad.py: alignment, windows, SQuAD 1.1 without is_impossible, end-to-end files."""

import json
import os
import random
import sys

import numpy as np
import pytest

from data_utils import tokenization
from finetuning import squad, squad_features
from tests import warm
from tests.hang_guard import HANG_GUARD

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_normalisation_offsets_match_preprocess_text():
  rng = random.Random(0)
  alphabet = list("ab Cd  \t``''é,.0") + ["ﬁ", "Σ", "\u00a0", "İ", "ǅ"]
  for _ in range(300):
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))
    for lower in (False, True):
      norm, origin = squad_features.normalize_with_offsets(text, lower)
      assert norm == tokenization.preprocess_text(text, lower=lower)
      assert len(origin) == len(norm) and all(0 <= o < max(len(text), 1) for o in origin)
      assert origin == sorted(origin)


def test_piece_offsets_recover_the_original_text(text_and_sp):
  _, sp = text_and_sp
  tok = tokenization.Tokenizer(sp, lower=True)
  text = "Café Müller, founded in 2000, sold 1,000 ``pastries''   to the Élysée."
  ids, starts, ends = squad_features.tokenize_with_offsets(tok, text)
  assert ids == tok.encode(text)                              # same pieces as everywhere else
  for k in range(len(ids)):
    surface = tok.id_to_piece(ids[k]).replace("\u2581", "")
    original = text[starts[k]:ends[k]].strip()
    assert tokenization.preprocess_text(original, lower=True).replace(" ", "") == surface \
        or surface in ("", '"'), (k, surface, original)
  assert starts == sorted(starts)


def _squad(path, rng, n, v2):
  colours = "red blue green black white pink gold grey brown".split()
  data = []
  for k in range(n):
    c = rng.choice(colours)
    context = (f"The old house near the river was painted {c} last summer. "
               f"Many people walked past it every day.")
    qa = {"id": f"q{k}", "question": "What colour was the house painted?",
          "answers": [{"text": c, "answer_start": context.index(f" {c} ") + 1}]}
    if v2:
      qa["is_impossible"] = k % 4 == 0
      if qa["is_impossible"]:
        qa["question"], qa["answers"] = "Who owned the boat?", []
    data.append({"title": "t", "paragraphs": [{"context": context, "qas": [qa]}]})
  path.write_text(json.dumps({"version": "2.0" if v2 else "1.1", "data": data}))
  return path


def test_windows_and_training_targets(tmp_path, text_and_sp):
  _, sp = text_and_sp
  tok = tokenization.Tokenizer(sp, lower=True)
  path = _squad(tmp_path / "train.json", random.Random(1), 5, v2=False)   # 1.1: no is_impossible
  examples, skipped = squad_features.read_squad(path, is_training=True)
  assert skipped == 0 and len(examples) == 5
  arrays, infos = squad_features.make_features(tok, examples, max_seq_length=24, doc_stride=6,
                                               max_query_length=8, is_training=True)
  assert len(infos) > len(examples)                            # long contexts give windows
  for f, info in enumerate(infos):
    ex = examples[info["example_index"]]
    ids = arrays["input_ids"][f]
    cls = arrays["cls_index"][f]
    assert ids[cls] == 3 and arrays["p_mask"][f, cls] == 0
    s, e = arrays["start_positions"][f], arrays["end_positions"][f]
    if arrays["is_impossible"][f] == 0:
      text = ex.context[info["starts"][s]:info["ends"][e]].strip()
      assert text == ex.answer_text
      assert arrays["p_mask"][f, s] == 0 and arrays["p_mask"][f, e] == 0
    else:
      assert s == e == cls
  assert (arrays["is_impossible"] == 0).sum() >= len(examples)


@pytest.mark.slow
def test_train_predict_write_files_and_score(tmp_path, text_and_sp):
  _, sp = text_and_sp
  rng = random.Random(2)
  train = _squad(tmp_path / "train.json", rng, 160, v2=True)
  dev = _squad(tmp_path / "dev.json", rng, 40, v2=True)
  cfg = tmp_path / "c.json"
  vocab = tokenization.Tokenizer(sp, lower=True).vocab_size
  cfg.write_text(json.dumps({"n_layer": 2, "d_model": 32, "n_head": 4, "d_head": 8,
                             "d_inner": 64, "n_token": vocab}))
  args = [sys.executable, "run_squad.py", "--do_train", "--do_predict", f"--train_file={train}",
          f"--predict_file={dev}", f"--sp_model={sp}", "--uncased", f"--model_config_path={cfg}",
          f"--model_dir={tmp_path}/m", "--max_seq_length=48", "--max_query_length=12",
          "--doc_stride=16",
          "--train_batch_size=16", "--learning_rate=3e-3", "--train_steps=200",
          "--warmup_steps=20", "--save_every=200", "--steps_per_loop=20", "--dropout=0",
          "--dropatt=0", "--lr_layer_decay_rate=1.0", "--start_n_top=3", "--end_n_top=3"]
  r = warm.run(args, cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD,
                     env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
  assert r.returncode == 0, r.stderr[-3000:]
  out = tmp_path / "m"
  preds = json.loads((out / "predictions.json").read_text())
  nbest = json.loads((out / "nbest_predictions.json").read_text())
  odds = json.loads((out / "null_odds.json").read_text())
  assert set(preds) == set(nbest) == set(odds) == {f"q{k}" for k in range(40)}
  assert all(abs(sum(c["probability"] for c in v) - 1) < 1e-5 for v in nbest.values())
  result = json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
  assert {"exact", "f1", "HasAns_exact", "NoAns_exact", "best_f1"} <= set(result)
  assert result["HasAns_f1"] > 50, result                     # learned to find the colour
  # the files round-trip through the evaluator alone
  again = warm.run([sys.executable, "run_squad.py", "--do_eval_only",
                          f"--predict_file={dev}", f"--predictions={out}/predictions.json",
                          f"--null_odds={out}/null_odds.json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=HANG_GUARD)
  assert json.loads(again.stdout) == pytest.approx(result)


@pytest.mark.parametrize("model_type", ["xlnet", "mpnet"])
def test_window_flags_that_cannot_tile_a_paragraph_are_one_line_errors(model_type):
  specials = squad_features.SPECIAL_TOKENS[model_type]
  check = lambda *a: squad_features.check_window_flags(*a, model_type=model_type)
  check(64 + specials + 1, 1, 64)                  # one paragraph piece per window: fine
  check(64 + specials + 5, 5, 64)                  # stride == paragraph part: fine
  cases = [((64 + specials, 1, 64), r"--max_seq_length=\d+ leaves no room for the paragraph"),
           ((32, 128, 64), r"--max_seq_length=32 leaves no room"),
           ((128, 0, 64), r"--doc_stride=0: must be at least 1"),
           ((128, -5, 64), r"--doc_stride=-5: must be at least 1"),
           ((128, 1, 0), r"--max_query_length=0: must be at least 1"),
           ((128, 128, 64), rf"--doc_stride=128 is longer .* use --doc_stride<={64 - specials}")]
  for args, message in cases:
    with pytest.raises(ValueError, match=message) as err:
      check(*args)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("model_type", ["xlnet", "mpnet"])
def test_windows_are_bounded_and_cover_the_paragraph(text_and_sp, model_type):
  """The reported hang: a 64-piece question and max_seq_length 32 looped forever; now
  the settings are refused, and any accepted settings give at most ceil(n / stride) + 1
  windows whose paragraph parts cover every piece."""
  _, sp = text_and_sp
  tok = tokenization.Tokenizer(sp, lower=True)
  if model_type == "mpnet":
    tok.bos_id, tok.eos_id, tok.pad_id = 0, 2, 1
  rng = random.Random(3)
  words = "the old house near river was painted blue many people walked past it".split()
  long_question = " ".join(rng.choice(words) for _ in range(200))
  examples = [squad_features.SquadExample(f"q{k}", long_question if k % 2 else "why?",
                                          " ".join(rng.choice(words) for _ in range(n)))
              for k, n in enumerate([0, 1, 7, 60, 300])]
  with pytest.raises(ValueError, match="leaves no room"):
    squad_features.make_features(tok, examples, max_seq_length=32, doc_stride=128,
                                 max_query_length=64, model_type=model_type)
  for seq, stride, query in [(32, 1, 20), (32, 3, 8), (40, 40 - 8 - 4, 8), (24, 5, 2)]:
    _, infos = squad_features.make_features(tok, examples, max_seq_length=seq, doc_stride=stride,
                                            max_query_length=query, model_type=model_type)
    for k, ex in enumerate(examples):
      n = len(squad_features.tokenize_with_offsets(tok, ex.context)[0])
      mine = [i for i in infos if i["example_index"] == k]
      assert 1 <= len(mine) <= -(-n // stride) + 1, (seq, stride, query, n, len(mine))
      covered = set()
      for i in mine:
        covered.update(range(i["span_start"], i["span_start"] + i["length"]))
      assert covered == set(range(n))
