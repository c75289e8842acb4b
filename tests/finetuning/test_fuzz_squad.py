"""Fuzz suite (hypothesis) over the SQuAD readers: training and prediction files
through read_squad -> make_features (-> extract_answers), and --do_eval_only's
data / predictions / null-odds files through evaluate_files.

Inputs are valid SQuAD files with random hostile text (any code point, lone
surrogates, NUL, combining marks, CJK, RTL, CRLF), randomly mutated (keys
deleted, values replaced by any JSON value), serialised with or without ASCII
escapes, then sometimes damaged as bytes (truncated, a byte changed, a BOM).
Window flags are drawn too, including impossible ones. Contract: every file is
first judged by this test's own model of read_squad's documented rules
(squad_model, from the parsed bytes): the reader refuses (one line naming the
file) exactly where the model refuses, else returns exactly the model's
examples in order (id, question, context, answer, start, is_impossible, all
answers) and skip count; make_features refuses (naming the flag) exactly the
flags check_window_flags' rule rejects, else its windows tile every piece of
every paragraph; never another exception, never a hang (an alarm fails the
example after 60 s). Unedited files (a separate test) are read whole against
the generator's own questions.
The evaluator must give exactly the numbers of an independent transcription
of the official v1.1 / v2.0 scripts (below) whenever it gives numbers, must
refuse (one line, naming a file) every input on which the official script
crashes, and may refuse where the official script gives numbers only for a
data file that was mutated or damaged out of the layout.

Inputs per run (fixed seed, derandomized): 120 training files, 80 prediction
files, 60 unedited files, 300 evaluation triples.
"""
import collections
import json
import math
import re
import string

import numpy as np
import pytest
from hypothesis import event, example, given, strategies as st

from finetuning import squad, squad_features, squad_metrics
from tests.fuzz_helpers import ERRORS, each_input_bounded, fuzz_settings

pytestmark = pytest.mark.slow   # a long system test (pyproject.toml)

# ---- strategies ------------------------------------------------------------------------
_ANY_CHAR = st.characters(exclude_categories=())      # lone surrogates included
_WORDS = ("the a an blue whale river 1,000 café Σίσυφος 東京 مرحبا e\u0301 ``q'' \x00 \t \r\n "
          "\ud800 x\udfff \ufeff \u202e").split(" ")


def hostile_text(max_size):
  words = st.lists(st.sampled_from(_WORDS + ["", " ", "...", "-"]), max_size=max_size // 4).map(
      " ".join)
  return st.one_of(words, st.text(_ANY_CHAR, max_size=max_size),
                   st.text(st.sampled_from("ab ,.\u00a0\u3000é\ud800"), max_size=max_size))


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
              st.floats(allow_nan=True, allow_infinity=True), hostile_text(20)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=6)


def _slots(obj, out):
  """Every (container, key) inside obj, for mutations."""
  items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
  for k, v in list(items):
    out.append((obj, k))
    _slots(v, out)
  return out


@st.composite
def squad_like(draw, max_questions=6, mutate=True, report=False):
  """A SQuAD 2.0 dict (answers drawn right, misplaced, all-normalising-to-"", none), mutated
  (unless mutate=False). report=True: (dict, [(kind, qa) per question], mutations)."""
  articles, n, drawn = [], 0, []
  few = st.sampled_from([1, 1, 1, 2, 2, 3])             # empty lists come from mutations
  for _ in range(draw(st.sampled_from([0, 1, 1, 1, 1, 2, 2, 2]))):
    paragraphs = []
    for _ in range(draw(few)):
      context = draw(hostile_text(300))
      qas = []
      for _ in range(draw(few)):
        n += 1
        if n > max_questions:
          break
        kind = draw(st.sampled_from(["span", "span", "misplaced", "empty_norm", "none"]))
        qa = {"id": draw(st.sampled_from([f"q{n}", f"q{n}", "dup", "é\u0301"])),
              "question": draw(hostile_text(120)), "answers": [],
              "is_impossible": kind == "none"}
        if kind != "none":
          a = draw(st.integers(0, len(context)))
          b = draw(st.integers(a, min(len(context), a + 40)))
          text = {"span": context[a:b], "misplaced": context[a:b] + "x",
                  "empty_norm": draw(st.sampled_from(["the", "...", "an", " "]))}[kind]
          qa["answers"] = [{"text": text, "answer_start": a}]
        qas.append(qa)
        drawn.append((kind, qa))
      paragraphs.append({"context": context, "qas": qas})
    articles.append({"title": "t", "paragraphs": paragraphs})
  data = {"version": "v2.0", "data": articles}
  mutations = draw(st.sampled_from([0, 0, 0, 1, 2])) if mutate else 0
  for _ in range(mutations):                                         # structural mutations
    slots = _slots(data, [])
    container, key = slots[draw(st.integers(0, len(slots) - 1))]
    if draw(st.booleans()) and isinstance(container, dict):
      del container[key]
    else:
      container[key] = draw(_JSON)
  return (data, drawn, mutations) if report else data


@st.composite
def file_bytes(draw, obj, report=False):
  """obj as JSON bytes, sometimes with raw non-UTF-8, a BOM, a cut or a changed byte.
  report=True: (bytes, the damage's name)."""
  ascii_only = draw(st.booleans())
  raw = json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
  damage = draw(st.sampled_from(["none"] * 5 + ["bom", "truncate", "byte", "garbage"]))
  if damage == "bom":
    raw = b"\xef\xbb\xbf" + raw
  elif damage == "truncate":
    raw = raw[:draw(st.integers(0, len(raw)))]
  elif damage == "byte" and raw:
    i = draw(st.integers(0, len(raw) - 1))
    raw = raw[:i] + bytes([draw(st.integers(0, 255))]) + raw[i + 1:]
  elif damage == "garbage":
    raw = draw(st.binary(max_size=200))
  return (raw, damage) if report else raw


# ---- the contract --------------------------------------------------------------------------
def assert_clear_error(error, *names):
  """check_error, for an error that may name any of several files, or a flag."""
  message = str(error)
  assert isinstance(error, ERRORS) and "\n" not in message, repr(error)
  assert any(message.startswith(f"{n}:") for n in names) or message.startswith("--"), message


_SURROGATE = re.compile("[\ud800-\udfff]")


def squad_model(data, is_training):
  """read_squad's documented rules applied by this test to a parsed file: None where it must
  refuse (not the layout: data[].paragraphs[] of a string context and qas[] of string id and
  question, answers a list of {"text": string} (and, to train on an answerable question, an
  integer answer_start); a lone surrogate in a context or question; no usable question), else
  (examples as tuples, skipped): every question, in order, except training questions whose
  answer text is not at its answer_start (skipped and counted). is_impossible: optional, its
  truth value."""
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    return None
  out, skipped = [], 0
  for article in data["data"]:
    if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
      return None
    for paragraph in article["paragraphs"]:
      if not (isinstance(paragraph, dict) and isinstance(paragraph.get("context"), str)
              and isinstance(paragraph.get("qas"), list)):
        return None
      context = paragraph["context"]
      if _SURROGATE.search(context):
        return None
      for qa in paragraph["qas"]:
        if not (isinstance(qa, dict) and isinstance(qa.get("id"), str)
                and isinstance(qa.get("question"), str)):
          return None
        answers = qa.get("answers", [])
        if not (isinstance(answers, list) and all(
            isinstance(x, dict) and isinstance(x.get("text"), str) for x in answers)):
          return None
        if _SURROGATE.search(qa["question"]):
          return None
        impossible = bool(qa.get("is_impossible", False))
        text, start = "", -1
        if is_training and not impossible:
          if not answers:
            return None
          text, start = answers[0]["text"], answers[0].get("answer_start")
          if not isinstance(start, int) or isinstance(start, bool):
            return None
          if start < 0 or context[start:start + len(text)] != text:
            skipped += 1
            continue
        out.append((qa["id"], qa["question"], context, text, start, impossible,
                    [x["text"] for x in answers]))
  return (out, skipped) if out else None


def _as_tuples(examples):
  return [(e.qas_id, e.question, e.context, e.answer_text, e.answer_start, e.is_impossible,
           e.all_answers) for e in examples]


def flags_ok(seq, stride, query):
  """check_window_flags' documented rule (XLNet: 3 special tokens)."""
  return min(seq, stride, query) >= 1 and stride <= seq - query - 3


def _read(tmp_path, raw, is_training, tok, seq, stride, query):
  """read_squad -> make_features on `raw`, each checked against the test's model: refused
  exactly where the model refuses (one line naming the file, or the flag), else exactly the
  model's examples and skip count; every paragraph piece in some window."""
  path = str(tmp_path / "squad.json")
  with open(path, "wb") as f:
    f.write(raw)
  try:
    model = squad_model(json.loads(raw.decode("utf-8-sig")), is_training)
  except (ValueError, RecursionError):        # not UTF-8, not JSON, nested too deep
    model = None
  try:
    examples, skipped = squad_features.read_squad(path, is_training)
  except Exception as e:  # noqa: BLE001 - the contract is about every exception
    assert_clear_error(e, path)
    assert model is None, f"refused a file the model reads ({len(model[0])} questions): {e}"
    return None
  assert model is not None, ("read a file the model refuses", _as_tuples(examples))
  assert (_as_tuples(examples), skipped) == model
  event("training questions skipped" if skipped else "every question used")
  try:
    arrays, infos = squad_features.make_features(tok, examples, seq, stride, query,
                                                 is_training)
  except Exception as e:  # noqa: BLE001
    assert_clear_error(e, path)
    assert not flags_ok(seq, stride, query), e
    assert str(e).startswith("--"), e
    return None
  assert flags_ok(seq, stride, query), "impossible window flags accepted"
  for k, ex in enumerate(examples):
    n = len(squad_features.tokenize_with_offsets(tok, ex.context)[0])
    windows = [i for i in infos if i["example_index"] == k]
    assert 1 <= len(windows) <= math.ceil(n / stride) + 1
    covered = 0                  # windows tile the paragraph's pieces, in order, no gap
    for w in windows:
      assert w["span_start"] <= covered, (covered, w["span_start"])
      covered = max(covered, w["span_start"] + w["length"])
    assert covered == n
    assert all(0 <= s <= e <= len(ex.context) for i in windows
               for s, e in zip(i["starts"], i["ends"]))
  assert [i["example_index"] for i in infos] == sorted(i["example_index"] for i in infos)
  assert arrays["input_ids"].shape == (len(infos), seq)
  return examples, arrays, infos


_FLAGS = st.tuples(st.integers(4, 48), st.integers(-1, 40), st.integers(0, 24))


@fuzz_settings(120)
@given(data=squad_like(), flags=_FLAGS, raw=st.data())
@each_input_bounded
def test_fuzz_squad_training_files(tmp_path, tok, data, flags, raw):
  if raw.draw(st.booleans()):      # one lone surrogate refuses the file: half the files have none
    data = _valid_text(data)
  out = _read(tmp_path, raw.draw(file_bytes(data)), True, tok, *flags)
  if out is None:
    return
  examples, arrays, infos = out
  for f, info in enumerate(infos):
    s, e, cls = (arrays[k][f] for k in ("start_positions", "end_positions", "cls_index"))
    if arrays["is_impossible"][f] == 0:
      ex = examples[info["example_index"]]
      text = ex.context[info["starts"][s]:info["ends"][e]]
      assert arrays["p_mask"][f, s] == arrays["p_mask"][f, e] == 0 and s <= e
      assert ex.answer_text.strip() in text or not ex.answer_text.strip(), (text, ex.answer_text)
    else:
      assert s == e == cls


@fuzz_settings(80)
@given(data=squad_like(), flags=_FLAGS, raw=st.data(), seed=st.integers(0, 2**16))
@each_input_bounded
def test_fuzz_squad_prediction_files(tmp_path, tok, data, flags, raw, seed):
  if raw.draw(st.booleans()):      # one lone surrogate refuses the file: half the files have none
    data = _valid_text(data)
  out = _read(tmp_path, raw.draw(file_bytes(data)), False, tok, *flags)
  if out is None:
    return
  examples, arrays, infos = out
  rng, n, seq = np.random.default_rng(seed), len(infos), flags[0]
  outs = {"cls_logits": rng.normal(size=n),
          "start_top_index": rng.integers(0, seq, (n, 3)),
          "end_top_index": rng.integers(0, seq, (n, 9)),
          "start_top_log_probs": rng.normal(size=(n, 3)),
          "end_top_log_probs": rng.normal(size=(n, 9))}
  preds, nbest, odds = squad.extract_answers(examples, infos, outs, 3, 3, 8, 4)
  assert set(preds) == set(nbest) == set(odds) == {ex.qas_id for ex in examples}
  contexts = collections.defaultdict(list)
  for ex in examples:
    contexts[ex.qas_id].append(ex.context)
  for qid, text in preds.items():
    assert any(text in c for c in contexts[qid]) and math.isfinite(odds[qid])


def _valid_text(obj):
  """obj with every lone surrogate replaced by U+FFFD (one character for one: offsets hold)."""
  if isinstance(obj, str):
    return _SURROGATE.sub("\ufffd", obj)
  if isinstance(obj, list):
    return [_valid_text(v) for v in obj]
  if isinstance(obj, dict):
    return {k: _valid_text(v) for k, v in obj.items()}
  return obj


@fuzz_settings(60)
@given(drawn=squad_like(mutate=False, report=True), is_training=st.booleans(),
       ascii_only=st.booleans())
@each_input_bounded
def test_squad_unedited_files_are_read_whole(tmp_path, tok, drawn, is_training, ascii_only):
  """Zero edits (valid Unicode, no mutation, no damage): read without error, every question an
  example in order, as the generator wrote it; in training, exactly those whose answer is not
  at its answer_start skipped (every drawn span kept). Refused only without usable questions."""
  data, questions, _ = drawn
  data = _valid_text(data)
  questions = [(kind, _valid_text(qa)) for kind, qa in questions]
  path = tmp_path / "squad.json"
  path.write_bytes(json.dumps(data, ensure_ascii=ascii_only).encode("utf-8"))
  contexts = [p["context"] for a in data["data"] for p in a["paragraphs"] for _ in p["qas"]]
  expected, skipped = [], 0
  for (kind, qa), context in zip(questions, contexts):
    answers = [x["text"] for x in qa["answers"]]
    if is_training and not qa["is_impossible"]:
      text, start = answers[0], qa["answers"][0]["answer_start"]
      if context[start:start + len(text)] != text:
        assert kind != "span"
        skipped += 1
        continue
    else:
      text, start = "", -1
    expected.append((qa["id"], qa["question"], context, text, start, qa["is_impossible"],
                     answers))
  try:
    examples, got_skipped = squad_features.read_squad(str(path), is_training)
  except ValueError as e:
    assert not expected and f"no usable questions ({skipped} skipped)" in str(e), e
    event("no usable question drawn")
    return
  assert (_as_tuples(examples), got_skipped) == (expected, skipped)
  event("training questions skipped" if skipped else "every question used")
  assert squad_model(data, is_training) == (expected, skipped)       # and the model agrees


def test_squad_reader_refuses_paragraphs_that_are_not_a_list(tmp_path):
  """Found by the model above: {} and "" as an article's paragraphs were read as no paragraphs
  (other non-lists were refused)."""
  good = {"paragraphs": [{"context": "abc", "qas": [{"id": "1", "question": "q"}]}]}
  for paragraphs in ({}, "", "ab", None):
    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"data": [good, {"paragraphs": paragraphs}]}))
    with pytest.raises(ValueError, match=r"squad.json: data\[1\]: not the SQuAD layout"):
      squad_features.read_squad(str(path), False)
  path.write_text(json.dumps({"data": [good, {"paragraphs": []}]}))
  assert len(squad_features.read_squad(str(path), False)[0]) == 1


# ---- --do_eval_only: the official scripts, transcribed independently ------------------------
def _norm(s):
  s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
  return " ".join(re.sub(r"\b(a|an|the)\b", " ", s, flags=re.UNICODE).split())


def _f1(gold, pred, v2):
  g = (_norm(gold).split() if gold else []) if v2 else _norm(gold).split()
  p = (_norm(pred).split() if pred else []) if v2 else _norm(pred).split()
  if v2 and (not g or not p):
    return int(g == p)
  same = sum((collections.Counter(g) & collections.Counter(p)).values())
  return 0 if same == 0 else 2 * (same / len(p)) * (same / len(g)) / (same / len(p) +
                                                                      same / len(g))


def official_v1(dataset, preds):
  em = f1 = total = 0
  for article in dataset:
    for p in article["paragraphs"]:
      for qa in p["qas"]:
        total += 1
        if qa["id"] not in preds:
          continue
        golds = [a["text"] for a in qa["answers"]]
        em += max(int(_norm(preds[qa["id"]]) == _norm(g)) for g in golds)
        f1 += max(_f1(g, preds[qa["id"]], False) for g in golds)
  return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1 / total}


def official_v2(dataset, preds, na_probs):
  qas = [qa for article in dataset for p in article["paragraphs"] for qa in p["qas"]]
  has_ans = {qa["id"]: bool(qa["answers"]) for qa in qas}
  exact_raw, f1_raw = {}, {}
  for qa in qas:
    golds = [a["text"] for a in qa["answers"] if _norm(a["text"])] or [""]
    if qa["id"] in preds:
      exact_raw[qa["id"]] = max(int(_norm(g) == _norm(preds[qa["id"]])) for g in golds)
      f1_raw[qa["id"]] = max(_f1(g, preds[qa["id"]], True) for g in golds)
  probs = na_probs if na_probs is not None else {k: 0.0 for k in preds}
  cut = lambda raw: {q: float(not has_ans[q]) if probs[q] > 1.0 else v for q, v in raw.items()}
  ex, f1 = cut(exact_raw), cut(f1_raw)
  out = {"exact": 100.0 * sum(ex.values()) / len(ex), "f1": 100.0 * sum(f1.values()) / len(f1),
         "total": len(ex)}
  for name, ids in (("HasAns", [q for q, v in has_ans.items() if v]),
                    ("NoAns", [q for q, v in has_ans.items() if not v])):
    if ids:
      out.update({f"{name}_exact": 100.0 * sum(ex[q] for q in ids) / len(ids),
                  f"{name}_f1": 100.0 * sum(f1[q] for q in ids) / len(ids),
                  f"{name}_total": len(ids)})
  if na_probs is not None:
    for key, raw in (("exact", exact_raw), ("f1", f1_raw)):
      score = best = sum(1 for v in has_ans.values() if not v)
      thresh = 0.0
      for q in sorted(probs, key=lambda k: probs[k]):
        if q not in raw:
          continue
        score += raw[q] if has_ans[q] else (-1 if preds[q] else 0)
        if score > best:
          best, thresh = score, probs[q]
      out[f"best_{key}"], out[f"best_{key}_thresh"] = 100.0 * best / len(raw), thresh
  return out


@st.composite
def eval_inputs(draw):
  data, _, mutations = draw(squad_like(max_questions=8, report=True))
  as_list = lambda x: x if isinstance(x, list) else []
  qids = [qa.get("id") for a in as_list(data.get("data")) if isinstance(a, dict)
          for p in as_list(a.get("paragraphs")) if isinstance(p, dict)
          for qa in as_list(p.get("qas")) if isinstance(qa, dict)]
  qids = [q for q in qids if isinstance(q, str)]
  preds = {q: draw(st.sampled_from(["", "the", "blue whale", "whale", "x y z", "..."]))
           for q in qids if draw(st.integers(0, 19))}      # 1 in 20 missing
  if draw(st.integers(0, 9)) == 0:
    preds[draw(st.text(max_size=3))] = draw(_JSON)          # an extra entry of any type
  tied = draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5]), min_size=len(preds),
                       max_size=len(preds)))
  odds = dict(zip(preds, tied))
  if odds and draw(st.integers(0, 9)) == 0:
    odds[draw(st.sampled_from(sorted(odds)))] = draw(_JSON)
  return data, preds, (odds if draw(st.booleans()) else None), draw(st.sampled_from(["1.1",
                                                                                    "2.0"])), mutations


@fuzz_settings(300)
@given(inputs=eval_inputs(), raw=st.data())
@each_input_bounded
def test_fuzz_eval_only_equals_the_official_scripts(tmp_path, inputs, raw):
  data, preds, odds, version, mutations = inputs
  files, damaged = {}, set()
  for name, obj in (("data", data), ("predictions", preds), ("null_odds", odds)):
    if obj is not None:
      files[name] = str(tmp_path / f"{name}.json")
      content, damage = (raw.draw(file_bytes(obj, report=True)) if raw.draw(st.integers(0, 7)) == 0
                         else (json.dumps(obj).encode("utf-8", "surrogatepass"), "none"))
      if damage != "none":
        damaged.add(name)
      with open(files[name], "wb") as f:
        f.write(content)
  try:      # what the official script does with the files as they are on disk
    loaded = {k: json.loads(open(v, "rb").read().decode("utf-8-sig")) for k, v in files.items()}
    expected = (official_v1(loaded["data"]["data"], loaded["predictions"]) if version == "1.1"
                else official_v2(loaded["data"]["data"], loaded["predictions"],
                                 loaded.get("null_odds")))
  except Exception:  # noqa: BLE001 - any crash of the official script
    expected = None
  event("official numbers" if expected is not None else "the official script crashes")
  try:
    got = squad_metrics.evaluate_files(files["data"], files["predictions"],
                                       files.get("null_odds"), version)
  except Exception as e:  # noqa: BLE001
    assert_clear_error(e, *files.values())
    # refusing is allowed where the official script crashes, or for a data file that was
    # mutated or damaged out of the layout (the official script reads some of those), never
    # for a data file as generated
    assert expected is None or (
        (mutations or "data" in damaged) and str(e).startswith(files["data"] + ":")
        and ("not the SQuAD layout" in str(e) or "no questions" in str(e))), e
    return
  assert expected is not None, got
  assert got.keys() == expected.keys()
  for k in got:
    assert got[k] == pytest.approx(expected[k], abs=1e-9, nan_ok=True), k
