"""Golden outputs: run the entry scripts of a checkout on tiny fixed data, hash what they write.

Evidence for a behaviour-unchanged change: run this on a checkout from before and
one from after, then compare the two manifests.

  python tools/golden_outputs.py --repo /tmp/before --out before.json [--work_dir W]
  python tools/golden_outputs.py --repo /work/main --out after.json
  python tools/golden_outputs.py --compare before.json after.json   # exit 1 on any difference

What runs (each a subprocess of `python SCRIPT` with cwd=--repo and PYTHONPATH=--repo, so the
scripts and modules of THAT checkout run, an old commit's clone included; the tool itself
imports nothing of the repository). The inputs are built by this tool from fixed seeds, so
they are the same bytes for every checkout (a few KB of generated English, GLUE SST-2 TSVs, a
SQuAD 2.0 JSON, a RACE folder, an XLNet config of 2 layers, d_model 32, an MPNet config):
  tokenizer          data_utils/train_tokenizer.py (SentencePiece, uncased)
  records-bi         data_utils/create_pretrain_data.py, bi_data on (XLNet's plm/mlm runs)
  records-uni        the same with --nobi_data (MPNet's run and the quickstart's layout)
  pretrain-plm       run_pretrain.py --objective=plm, 4 steps, save_every 2, --deterministic
                     --xla=off, --sp_model (SavedModel export), --export_hf_dir
  pretrain-mlm       the same with --objective=mlm
  pretrain-mpnet     --objective=mpnet (Hugging Face style MPNet config.json, records-uni)
  pretrain-plm-xla   pretrain-plm with --xla=full
  classifier-xlnet   run_classifier.py --task_name=sst-2 from pretrain-plm's export, 4 steps,
                     --do_eval --do_predict, --export_dir, --export_hf_dir
  classifier-mpnet   the same with --model_type=mpnet from pretrain-mpnet's export
  squad              run_squad.py (SQuAD 2.0) from pretrain-mlm's export, --do_predict, exports
  race               run_race.py from pretrain-plm's export, --do_eval, exports
  quickstart         python quickstart.py --preset=tiny (off with --no-quickstart)
All fine-tuning runs use --deterministic --xla=off (the XLA path is covered by
pretrain-plm-xla; the quickstart runs every script with its defaults, --xla=full).

The manifest (JSON) holds, for --repo's commit (`git rev-parse HEAD`, plus whether the tree
was dirty) and environment (Python, TensorFlow versions):
  files        every output file under the work directory's out/: sha256 and size (of the
               bytes after the normalisation below)
  checkpoints  every checkpoint (a `.index` file; TF2 object-based, the release's TF1 names,
               SavedModel variables): per key, dtype, shape and sha256 of the tensor's bytes
               read with tf.train.load_checkpoint. A key-naming change that leaves the values
               alone shows as the same multiset of value hashes under other keys.
  safetensors  every .safetensors file: per tensor, dtype, shape, sha256 of its bytes
  saved_models every SavedModel: its serving_default outputs (dtype, shape, sha256 of the
               numpy bytes; strings as UTF-8) on a fixed list of inputs chosen by input name
  json         every .json output: sha256 of its canonical form (sorted keys), so a change of
               key order is told apart from a change of content
  stdout       per step, the stdout lines that are JSON objects (the scripts' metrics), verbatim,
               and the lines with the runs' numbers (trainer step and evaluation lines, best
               checkpoint, init, the writer's and readers' counts) with timing cut out
  quickstart   its results.json without the timing fields, and the report's numbers

Excluded or normalised, because they legitimately differ run to run:
  - TensorBoard event files (events.out.tfevents.*: wall times, host name): excluded.
  - logs and stdout beyond the lines above (rates, ETAs, durations): not recorded.
  - run.json's "created" (the run's start time): removed before hashing.
  - the `checkpoint` state file's all_model_checkpoint_timestamps / last_preserved_timestamp
    lines: removed before hashing.
  - absolute paths of the work directory and of --repo inside text/JSON/binary files:
    replaced by <WORK> / <REPO> before hashing (two runs use two work directories).
  - the feature cache's file name carries a stamp of its source's path and mtime
    (`.src-XXXXXXXX.`): the name is normalised to `.src-STAMP.`; its bytes are hashed.
  - SavedModel fingerprint.pb: its random `uuid` field is cleared before hashing (its hashes of
    the graph, signatures, object graph and variables are kept).
  - the quickstart's timing: stages/*.json "seconds", logs/, run.json's ETA figures,
    results.json / report.md timing fields and plots (PNG): not hashed; its numbers are.
Each excluded file is listed in the manifest under "excluded" with the reason.

Determinism: two runs on the same checkout in two work directories give identical manifests
(the quickstart included: its scripts run without --deterministic at --xla=full and are
byte-identical too). The subprocesses get
PYTHONHASHSEED=0, no GPU, and no TF_XLA_FLAGS from the caller; the input files a fixed mtime.
--rehash re-hashes a finished --work_dir without running anything.
"""

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")   # before TensorFlow loads (hashing)
MANIFEST_VERSION = 1
STEPS_PER_RUN = 4
FIXED_MTIME = 1_700_000_000          # data files get this mtime (the feature cache stamps it)


# ---- inputs built by the tool (fixed seeds; the same bytes for every checkout) ---------------
WORDS = ("the a one old new small large red blue green black white river house garden city "
         "village road bridge tower market school library museum station harbour island "
         "mountain forest valley field farm castle church window door table chair letter book "
         "story song picture map clock lamp boat train car bicycle horse dog cat bird fish "
         "teacher doctor farmer sailor painter writer student child friend mother father king "
         "queen walked talked wrote painted built found opened closed carried watched heard "
         "saw left reached crossed visited remembered believed explained learned taught sold "
         "bought gave took made kept quickly slowly quietly happily carefully early late "
         "always never often today yesterday tomorrow because although while after before "
         "during under over near behind across through with without about every many few "
         "some several bright dark warm cold quiet loud heavy light long short ancient modern "
         "famous simple strange beautiful").split()
NAMES = ("Anna Bruno Céline Dmitri Élodie Farid Greta Hiro Ingrid José Kofi Lena Mateo Nadia "
         "Oskar Priya Zürich Kraków Lisbon Oslo Nairobi Quito").split()


def _sentence(rng):
  words = [rng.choice(WORDS) for _ in range(rng.randint(6, 14))]
  if rng.random() < 0.4:
    words.insert(rng.randrange(len(words)), rng.choice(NAMES))
  if rng.random() < 0.2:
    words.insert(rng.randrange(len(words)), f"{rng.randint(1, 9)},{rng.randint(100, 999)}")
  text = " ".join(words)
  return text[0].upper() + text[1:] + rng.choice([".", ".", ".", "!", "?"])


def corpus_text(seed=0, n_docs=60):
  rng = random.Random(seed)
  docs = [" ".join(_sentence(rng) for _ in range(rng.randint(1, 2))) + "\n" +
          "\n".join(_sentence(rng) for _ in range(rng.randint(2, 6))) for _ in range(n_docs)]
  return "\n\n".join(docs) + "\n"


def _sst_sentence(rng, label):
  words = rng.sample(WORDS, 8)
  words.insert(rng.randrange(9), rng.choice(["excellent", "wonderful"] if label else
                                            ["terrible", "awful"]))
  return " ".join(words)


def write_sst2(d, rng):
  os.makedirs(d, exist_ok=True)
  for split, n in (("train", 48), ("dev", 24)):
    rows = [(_sst_sentence(rng, l), l) for l in [rng.randrange(2) for _ in range(n)]]
    _write(os.path.join(d, f"{split}.tsv"),
           "sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in rows))
  _write(os.path.join(d, "test.tsv"), "index\tsentence\n" + "".join(
      f"{i}\t{_sst_sentence(rng, i % 2)}\n" for i in range(12)))


COLOURS = "red blue green black white pink gold grey brown".split()


def write_squad(path, rng, n):
  data = []
  for k in range(n):
    c = rng.choice(COLOURS)
    context = (f"The old house near the river was painted {c} last summer. "
               f"{_sentence(rng)} Many people walked past it every day.")
    qa = {"id": f"q{k}", "question": "What colour was the house painted?",
          "answers": [{"text": c, "answer_start": context.index(f" {c} ") + 1}],
          "is_impossible": k % 4 == 0}
    if qa["is_impossible"]:
      qa["question"], qa["answers"] = "Who owned the boat?", []
    data.append({"title": f"t{k}", "paragraphs": [{"context": context, "qas": [qa]}]})
  _write(path, json.dumps({"version": "2.0", "data": data}))


def write_race(d, rng):
  filler = "we walked to the old house near the river and talked for a while".split()
  for split, n in (("train", 6), ("dev", 3)):
    for level in ("middle", "high"):
      os.makedirs(os.path.join(d, split, level), exist_ok=True)
      for k in range(n):
        options = rng.sample(COLOURS, 4)
        answer = rng.randrange(4)
        article = " ".join(rng.sample(filler, 2) + ["the", "door", "was", options[answer]] +
                           rng.sample(filler, 4)) + " " + _sentence(rng)
        doc = {"id": f"{k}.txt", "article": article, "questions": ["the door was _ ."],
               "options": [options], "answers": ["ABCD"[answer]]}
        _write(os.path.join(d, split, level, f"{k}.txt"), json.dumps(doc))


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8", newline="\n") as f:
    f.write(text)


def build_inputs(data):
  """The tool's own inputs under DATA (corpus, tokenizer text, SST-2, SQuAD, RACE)."""
  rng = random.Random(1)
  _write(os.path.join(data, "corpus.txt"), corpus_text())
  write_sst2(os.path.join(data, "sst-2"), rng)
  write_squad(os.path.join(data, "squad", "train-v2.0.json"), rng, 24)
  write_squad(os.path.join(data, "squad", "dev-v2.0.json"), rng, 12)
  write_race(os.path.join(data, "RACE"), rng)
  # the tokenizer learns from the corpus and every task's text
  parts = [corpus_text()]
  for root, _, files in sorted(os.walk(data)):
    for name in sorted(files):
      if name != "corpus.txt" and not name.startswith("tokenizer"):
        with open(os.path.join(root, name), encoding="utf-8") as f:
          parts.append(f.read().replace("\t", " "))
  _write(os.path.join(data, "tokenizer-text.txt"), "\n".join(parts))
  for root, _, files in os.walk(data):
    for name in files:
      os.utime(os.path.join(root, name), (FIXED_MTIME, FIXED_MTIME))


def write_configs(data, vocab):
  xlnet = {"n_layer": 2, "d_model": 32, "n_head": 4, "d_head": 8, "d_inner": 64,
           "ff_activation": "gelu", "untie_r": True, "n_token": vocab}
  mpnet = {"model_type": "mpnet", "vocab_size": vocab, "hidden_size": 32,
           "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
           "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
           "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 72,
           "relative_attention_num_buckets": 32, "layer_norm_eps": 1e-12, "pad_token_id": 5}
  for name, config in (("xlnet_config.json", xlnet), ("mpnet_config.json", mpnet)):
    _write(os.path.join(data, name), json.dumps(config, indent=1) + "\n")


# ---- the commands -------------------------------------------------------------------------------
def steps(data, out, quickstart):
  """[(name, argv)] in order; argv after `python`."""
  sp = f"{out}/tokenizer/spiece.model"
  rec = ["--seq_len=32", "--reuse_len=16", "--num_lanes=4", "--num_predict=5", "--uncased",
         f"--sp_model={sp}", f"--input_glob={data}/corpus.txt"]
  train = [f"--train_steps={STEPS_PER_RUN}", "--save_every=2", "--steps_per_loop=2",
           "--learning_rate=1e-3", "--warmup_steps=1", "--deterministic", "--seed=0"]

  def pretrain(name, objective, records, config, xla="off", extra=()):
    model_dir = f"{out}/pretrain/{name}"
    return (f"pretrain-{name}", [
        "run_pretrain.py", f"--objective={objective}", f"--record_dir={out}/records/{records}",
        f"--model_config_path={data}/{config}", f"--model_dir={model_dir}",
        f"--mem_len={0 if objective == 'mpnet' else 16}", f"--xla={xla}", *train,
        f"--export_hf_dir={model_dir}/hf", *extra])

  xlnet_sp = [f"--sp_model={sp}", "--uncased"]

  def finetune(name, script, init, task_flags, model_type="xlnet"):
    model_dir = f"{out}/finetune/{name}"
    if model_type == "mpnet":
      export = f"{out}/pretrain/{init}/export"
      model = ["--model_type=mpnet", f"--model_config_path={export}/config.json",
               f"--init_checkpoint={export}"]
    else:
      model = [f"--model_config_path={out}/pretrain/{init}/export/xlnet_config.json",
               f"--init_checkpoint={out}/pretrain/{init}/export/xlnet_model.ckpt"]
    return (name, [script, *task_flags, *xlnet_sp, *model, f"--model_dir={model_dir}", *train,
                   "--xla=off", f"--export_dir={model_dir}/serving",
                   f"--export_hf_dir={model_dir}/hf"])

  cls = ["--task_name=sst-2", f"--data_dir={data}/sst-2", "--max_seq_length=32",
         "--train_batch_size=8", "--eval_batch_size=8", "--do_train", "--do_eval",
         "--do_predict"]
  out_steps = [
      ("tokenizer", ["data_utils/train_tokenizer.py", f"--input_glob={data}/tokenizer-text.txt",
                     f"--model_prefix={out}/tokenizer/spiece", "--vocab_size=240",
                     "--uncased"]),
      ("configs", None),     # written by the tool: n_token = the tokenizer's size
      ("records-bi", ["data_utils/create_pretrain_data.py", *rec,
                      f"--output_dir={out}/records/bi"]),
      ("records-uni", ["data_utils/create_pretrain_data.py", *rec, "--nobi_data",
                       f"--output_dir={out}/records/uni"]),
      pretrain("plm", "plm", "bi", "xlnet_config.json", extra=xlnet_sp),
      pretrain("mlm", "mlm", "bi", "xlnet_config.json", extra=xlnet_sp),
      pretrain("mpnet", "mpnet", "uni", "mpnet_config.json"),
      pretrain("plm-xla", "plm", "bi", "xlnet_config.json", xla="full", extra=xlnet_sp),
      finetune("classifier-xlnet", "run_classifier.py", "plm", cls),
      finetune("classifier-mpnet", "run_classifier.py", "mpnet", cls, model_type="mpnet"),
      finetune("squad", "run_squad.py", "mlm", [
          "--do_train", "--do_predict", f"--train_file={data}/squad/train-v2.0.json",
          f"--predict_file={data}/squad/dev-v2.0.json", "--max_seq_length=48",
          "--max_query_length=12", "--doc_stride=16", "--train_batch_size=8",
          "--predict_batch_size=8", "--start_n_top=3", "--end_n_top=3",
          "--lr_layer_decay_rate=1.0"]),
      finetune("race", "run_race.py", "plm", [
          f"--data_dir={data}/RACE", "--max_seq_length=48", "--max_qa_length=12",
          "--train_batch_size=2", "--eval_batch_size=2", "--do_train", "--do_eval"]),
  ]
  if quickstart:
    out_steps.append(("quickstart", ["quickstart.py", "--preset=tiny",
                                     f"--output_dir={out}/quickstart"]))
  return out_steps


_NUMBER_LINE = re.compile(r"^(step \d+/\d+ |eval at step |new best |using the best |init from |"
                          r"done: |\S+: used \d+ )")
_LINE_TIMING = (
    (re.compile(r" [\d.]+s/step .*$"), ""),                    # trainer: s/step, tokens/s, ETA
    (re.compile(r" [\d.]+s for \d+ steps?.*$"), ""),          # trainer: a loop's wall time
    (re.compile(r" in [\d.]+s \([\d,.]+ tokens/s\)"), ""),      # writer's done line
)


def stdout_numbers(text, work):
  """The stdout lines that are JSON objects (verbatim); and the lines that carry the runs'
  numbers (the trainer's step and evaluation lines, best-checkpoint and init lines, the
  writer's and readers' counts) with their timing cut out and the work directory as <WORK>."""
  json_lines, number_lines = [], []
  for line in text.splitlines():
    s = line.strip()
    if s.startswith("{") and s.endswith("}"):
      try:
        json.loads(s)
      except ValueError:
        continue
      json_lines.append(s)
    elif _NUMBER_LINE.match(s):
      for pattern, repl in _LINE_TIMING:
        s = pattern.sub(repl, s)
      number_lines.append(s.replace(work, "<WORK>"))
  return json_lines, number_lines


def run_steps(repo, work, quickstart, log):
  data, out, logs = (os.path.join(work, d) for d in ("data", "out", "logs"))
  for d in (data, out, logs):
    os.makedirs(d, exist_ok=True)
  build_inputs(data)
  env = dict(os.environ, PYTHONPATH=repo, PYTHONHASHSEED="0", CUDA_VISIBLE_DEVICES="",
             TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
  env.pop("TF_XLA_FLAGS", None)
  check_imports(repo, env)
  results = {}
  for name, argv in steps(data, out, quickstart):
    t0 = time.time()
    if argv is None:
      with open(os.path.join(out, "tokenizer", "spiece.vocab"), encoding="utf-8") as f:
        vocab = sum(1 for _ in f)
      write_configs(data, vocab)
      results[name] = {"argv": None, "vocab": vocab}
      continue
    log(f"[{name}] python {' '.join(argv)}")
    proc = subprocess.run([sys.executable, *argv], cwd=repo, env=env, capture_output=True,
                          text=True, errors="replace")
    seconds = time.time() - t0
    for stream in ("stdout", "stderr"):
      with open(os.path.join(logs, f"{name}.{stream}"), "w", encoding="utf-8") as f:
        f.write(getattr(proc, stream))
    if proc.returncode != 0:
      tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
      raise SystemExit(f"golden_outputs: step {name} failed (exit {proc.returncode}); logs in "
                       f"{logs}/{name}.std*:\n{tail}")
    json_lines, number_lines = stdout_numbers(proc.stdout, work)
    results[name] = {"argv": [a.replace(work, "<WORK>") for a in argv],
                     "seconds": round(seconds, 1), "json_lines": json_lines,
                     "number_lines": number_lines}
    log(f"[{name}] done in {seconds:.0f}s")
  with open(os.path.join(work, "steps.json"), "w", encoding="utf-8") as f:
    json.dump(results, f, indent=1)
  return results


def check_imports(repo, env):
  """The repository's packages must import from --repo (not an installed copy elsewhere)."""
  code = ("import importlib, json, sys\nout = {}\nfor m in sys.argv[1:]:\n"
          "  try:\n    out[m] = importlib.import_module(m).__file__\n"
          "  except ImportError:\n    pass\nprint(json.dumps(out))")
  proc = subprocess.run([sys.executable, "-c", code, "data_utils", "modeling", "training",
                         "finetuning", "serving"], cwd=repo, env=env, capture_output=True,
                        text=True, check=True)
  found = json.loads(proc.stdout.strip().splitlines()[-1])
  outside = {m: f for m, f in found.items()
             if not os.path.realpath(f).startswith(os.path.realpath(repo) + os.sep)}
  if outside:
    raise SystemExit(f"golden_outputs: with cwd and PYTHONPATH={repo}, {outside} import from "
                     "outside the checkout")


# ---- hashing ------------------------------------------------------------------------------------
def sha256(data):
  return hashlib.sha256(data).hexdigest()


_TIMESTAMP_LINE = re.compile(rb"^(all_model_checkpoint_timestamps|last_preserved_timestamp):.*\n",
                             re.M)
_STAMP = re.compile(r"\.src-[0-9a-f]{8}\.")
QUICKSTART_UNHASHED = ("logs/", "plots/", "report.md", "results.json", "run.json", "stages/")


def exclusion(rel):
  name = os.path.basename(rel)
  if name.startswith("events.out.tfevents"):
    return "TensorBoard event file: wall times and host name"
  if rel.startswith("quickstart/"):
    inner = rel[len("quickstart/"):]
    if inner.startswith(QUICKSTART_UNHASHED):
      return ("quickstart timing, logs or plots (its numbers are recorded under "
              "'quickstart')")
  return None


def normalised_bytes(path, rel, work, repo):
  """The file's bytes with run-dependent parts replaced; and which were."""
  with open(path, "rb") as f:
    data = f.read()
  notes = []
  if os.path.basename(rel) == "fingerprint.pb":
    from tensorflow.core.protobuf import fingerprint_pb2
    proto = fingerprint_pb2.FingerprintDef.FromString(data)
    if proto.uuid:
      proto.ClearField("uuid")
      data, notes = proto.SerializeToString(deterministic=True), ["uuid"]
  if os.path.basename(rel) == "run.json":      # its creation time: a wall clock
    record = json.loads(data)
    if isinstance(record, dict) and record.pop("created", None) is not None:
      data, notes = json.dumps(record, sort_keys=True).encode(), notes + ["created"]
  if os.path.basename(rel) == "checkpoint":
    new = _TIMESTAMP_LINE.sub(b"", data)
    if new != data:
      data, notes = new, notes + ["timestamps"]
  for text, token in ((work, b"<WORK>"), (repo, b"<REPO>")):
    for variant in {text, os.path.realpath(text)}:
      needle = variant.encode()
      if needle in data:
        data = data.replace(needle, token)
        notes.append(token.decode())
  return data, sorted(set(notes))


def tensor_entry(array):
  import numpy as np
  if array.dtype == object or array.dtype.kind in "SU":
    flat = [v if isinstance(v, bytes) else str(v).encode("utf-8") for v in
            np.asarray(array, object).reshape(-1)]
    digest = sha256(b"".join(len(v).to_bytes(8, "little") + v for v in flat))
    return {"dtype": "string", "shape": list(array.shape), "sha256": digest}
  array = np.ascontiguousarray(array)
  return {"dtype": str(array.dtype), "shape": list(array.shape), "sha256": sha256(array.tobytes())}


def checkpoint_variables(prefix, work, repo):
  import tensorflow as tf
  reader = tf.train.load_checkpoint(prefix)
  out = {}
  for key in sorted(reader.get_variable_to_shape_map()):
    value = reader.get_tensor(key)
    if key == "_CHECKPOINTABLE_OBJECT_GRAPH":
      # the object graph: a serialized proto naming every object (key naming, not values)
      data = value if isinstance(value, bytes) else bytes(value)
      data = data.replace(work.encode(), b"<WORK>").replace(repo.encode(), b"<REPO>")
      out[key] = {"dtype": "string", "shape": [], "sha256": sha256(data)}
    else:
      out[key] = tensor_entry(value)
  return out


def safetensors_tensors(path):
  with open(path, "rb") as f:
    data = f.read()
  n = int.from_bytes(data[:8], "little")
  header = json.loads(data[8:8 + n])
  body = data[8 + n:]
  out = {}
  for name, info in sorted(header.items()):
    if name == "__metadata__":
      out[name] = {"metadata": info}
      continue
    start, end = info["data_offsets"]
    out[name] = {"dtype": info["dtype"], "shape": info["shape"],
                 "sha256": sha256(body[start:end])}
  return out


# Fixed inputs of the served signatures, by input name (raw text, hostile bits included).
TEXTS = ["The old house near the river was painted blue last summer.",
         "Café Müller in Zürich sold 1,250 books, wonderful!", "", "  tabs\tand\u00a0spaces  ",
         "terrible awful story " * 30]
SERVING_INPUTS = {
    "sentence": TEXTS,
    "sentence_b": TEXTS[2:] + TEXTS[:2],
    "question": ["What colour was the house painted?", "Who owned the boat?",
                 "the door was _ .", "", "Where is Zürich?"],
    "context": [TEXTS[0] + " Many people walked past it every day.",
                "The old house near the river was painted red. " * 6, TEXTS[1], TEXTS[3],
                "Zürich is in Switzerland, 1,000 km away."],
    "article": ["we walked to the old house the door was green and talked", TEXTS[0], TEXTS[1],
                "", TEXTS[4]],
    "options": [["red", "green", "blue", "gold"], ["a", "b", "c", "d"],
                ["Zürich", "", "1,000", "x y"], ["", "", "", ""],
                ["white", "black", "pink", "grey"]],
}


def served_outputs(directory):
  import numpy as np
  import tensorflow as tf
  import tensorflow_text  # noqa: F401  (registers the ops the graphs use)
  loaded = tf.saved_model.load(directory)
  out = {}
  for sig_name in sorted(loaded.signatures):
    fn = loaded.signatures[sig_name]
    names = sorted(fn.structured_input_signature[1])
    missing = [n for n in names if n not in SERVING_INPUTS]
    if missing:
      out[sig_name] = {"inputs": names, "error": f"no fixed inputs for {missing}"}
      continue
    got = fn(**{n: tf.constant(SERVING_INPUTS[n]) for n in names})
    out[sig_name] = {"inputs": names, "outputs": {
        k: tensor_entry(np.asarray(v.numpy())) for k, v in sorted(got.items())}}
  return out


def canonical_json(data):
  try:
    value = json.loads(data)
  except ValueError:
    return None
  return sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8"))


TIMING_KEY = re.compile(r"^(seconds|times?|eta|duration|elapsed|wall_time|date)$|_s$|_seconds$",
                        re.I)   # tokens_per_s, the preset's ETA figures (overhead_s, ...)


def strip_timing(value):
  if isinstance(value, dict):
    return {k: strip_timing(v) for k, v in value.items() if not TIMING_KEY.search(str(k))}
  if isinstance(value, list):
    return [strip_timing(v) for v in value]
  return value


_TIMING_TEXT = re.compile(r"(\d+h)?\d+m\d\ds|\d+(\.\d+)?\s*(s|ms|min|minutes|seconds)\b|"
                          r"[\d,.]+ (tokens|steps|examples)/s|\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


def report_numbers(text):
  """report.md's lines that hold a digit, with timing as <time>: durations and rates in the
  text, and whole table columns headed by a time or a rate (e.g. "tokens/s", "time")."""
  lines, timing_columns, in_table = [], set(), False
  for line in text.splitlines():
    line = line.rstrip()
    if line.startswith("|"):
      cells = line.strip("|").split("|")
      if not in_table:                             # a header: which columns are timing
        timing_columns = {i for i, c in enumerate(cells)
                          if re.search(r"\btime\b|/s\b|second", c.strip(), re.I)}
      elif not all(set(c.strip()) <= set("-: ") for c in cells):   # not the header's rule
        line = "|" + "|".join(" <time> " if i in timing_columns else c
                              for i, c in enumerate(cells)) + "|"
    in_table = line.startswith("|")
    if re.search(r"\d", line):
      lines.append(_TIMING_TEXT.sub("<time>", line))
  return lines


def quickstart_numbers(qs):
  """results.json without timing fields; the report's lines with numbers, timing cut out."""
  out = {}
  path = os.path.join(qs, "results.json")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      out["results"] = strip_timing(json.load(f))
  path = os.path.join(qs, "report.md")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      out["report_lines"] = report_numbers(f.read())
  stages = {}
  for name in sorted(os.listdir(os.path.join(qs, "stages"))) if os.path.isdir(
      os.path.join(qs, "stages")) else []:
    with open(os.path.join(qs, "stages", name), encoding="utf-8") as f:
      stages[name[:-len(".json")]] = strip_timing(json.load(f).get("results"))
  out["stages"] = stages
  return out


def build_manifest(repo, work, step_results, log):
  out_dir = os.path.join(work, "out")
  files, excluded, checkpoints, tensors, saved, js = {}, {}, {}, {}, {}, {}
  for root, dirs, names in os.walk(out_dir):
    dirs.sort()
    for name in sorted(names):
      path = os.path.join(root, name)
      rel = os.path.relpath(path, out_dir)
      why = exclusion(rel)
      key = _STAMP.sub(".src-STAMP.", rel)
      if why:
        if name.startswith("events.out.tfevents"):   # the name holds a time and a pid
          key = os.path.join(os.path.dirname(key), "events.out.tfevents.*")
          why = excluded.get(key, why + ": 0 files").rsplit(": ", 1)
          why = f"{why[0]}: {int(why[1].split()[0]) + 1} files"
        excluded[key] = why
        continue
      data, notes = normalised_bytes(path, rel, work, repo)
      entry = {"sha256": sha256(data), "size": len(data)}   # both after normalisation
      if notes:
        entry["normalised"] = notes
      files[key] = entry
      if name.endswith(".index"):
        prefix = path[:-len(".index")]
        checkpoints[key[:-len(".index")]] = checkpoint_variables(prefix, work, repo)
      elif name.endswith(".safetensors"):
        tensors[key] = safetensors_tensors(path)
      elif name.endswith(".json"):
        js[key] = canonical_json(data)
      elif name == "saved_model.pb":
        log(f"serving {os.path.dirname(rel)}")
        saved[os.path.dirname(key)] = served_outputs(os.path.dirname(path))
  qs = os.path.join(out_dir, "quickstart")
  return {"files": files, "excluded": excluded, "checkpoints": checkpoints,
          "safetensors": tensors, "saved_models": saved, "json": js,
          "stdout": {k: {"json_lines": v.get("json_lines", []),
                         "number_lines": v.get("number_lines", [])}
                     for k, v in step_results.items() if v.get("argv")},
          "quickstart": quickstart_numbers(qs) if os.path.isdir(qs) else None}


def git_info(repo):
  def git(*args):
    r = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None
  status = git("status", "--porcelain", "--untracked-files=no")
  return {"commit": git("rev-parse", "HEAD"), "subject": git("log", "-1", "--format=%s"),
          "dirty": bool(status) if status is not None else None}


def make(args):
  repo = os.path.realpath(args.repo)
  if not os.path.isfile(os.path.join(repo, "run_pretrain.py")):
    raise SystemExit(f"golden_outputs: --repo={args.repo}: no run_pretrain.py there")
  work = os.path.realpath(args.work_dir) if args.work_dir else tempfile.mkdtemp(
      prefix="golden-")
  if args.rehash:
    if not args.work_dir or not os.path.exists(os.path.join(work, "steps.json")):
      raise SystemExit("golden_outputs: --rehash needs --work_dir of a finished run")
  elif os.path.exists(os.path.join(work, "out")):
    raise SystemExit(f"golden_outputs: --work_dir={work} already holds out/: give an empty one")
  start = time.time()

  def log(message):
    print(f"golden_outputs {time.time() - start:5.0f}s {message}", flush=True)

  log(f"repo {repo}, work {work}")
  if args.rehash:
    with open(os.path.join(work, "steps.json"), encoding="utf-8") as f:
      step_results = json.load(f)
    for name, result in step_results.items():   # the numbers again, from the saved stdout
      if result.get("argv"):
        with open(os.path.join(work, "logs", f"{name}.stdout"), encoding="utf-8") as f:
          result["json_lines"], result["number_lines"] = stdout_numbers(f.read(), work)
  else:
    step_results = run_steps(repo, work, args.quickstart, log)
  log("hashing")
  manifest = {"manifest_version": MANIFEST_VERSION, "repo": repo, **git_info(repo),
              "environment": environment(),
              "steps": {k: {"argv": v["argv"], "seconds": v.get("seconds")}
                        for k, v in step_results.items()},
              **build_manifest(repo, work, step_results, log)}
  manifest["seconds"] = round(time.time() - start, 1)
  manifest["rehashed"] = bool(args.rehash)
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  tmp = args.out + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(manifest, f, indent=1, sort_keys=True, ensure_ascii=False)
    f.write("\n")
  os.replace(tmp, args.out)
  log(f"wrote {args.out}: {len(manifest['files'])} files, {len(manifest['checkpoints'])} "
      f"checkpoints, {len(manifest['saved_models'])} SavedModels (commit {manifest['commit']})")
  if not args.work_dir and not args.keep_work_dir and not args.rehash:
    shutil.rmtree(work, ignore_errors=True)


def environment():
  import numpy as np
  import tensorflow as tf
  out = {"python": sys.version.split()[0], "tensorflow": tf.__version__, "numpy": np.__version__}
  for name in ("sentencepiece", "tensorflow_text", "keras"):
    try:
      out[name] = __import__(name).__version__
    except (ImportError, AttributeError):
      out[name] = None
  return out


# ---- compare ------------------------------------------------------------------------------------
def flatten(manifest):
  """{(section, item, detail): value}: every compared fact of a manifest."""
  flat = {}
  for rel, e in manifest["files"].items():
    flat[("file", rel, "")] = (e["sha256"], e["size"])
  for prefix, variables in manifest["checkpoints"].items():
    for key, e in variables.items():
      flat[("checkpoint", prefix, key)] = e
  for rel, tensors in manifest["safetensors"].items():
    for key, e in tensors.items():
      flat[("safetensors", rel, key)] = e
  for directory, sigs in manifest["saved_models"].items():
    for sig, e in sigs.items():
      flat[("served", directory, f"{sig} inputs")] = e.get("inputs")
      if "error" in e:
        flat[("served", directory, f"{sig} error")] = e["error"]
      for key, v in (e.get("outputs") or {}).items():
        flat[("served", directory, f"{sig}:{key}")] = v
  for rel, digest in manifest["json"].items():
    flat[("json", rel, "")] = digest
  for step, e in manifest["stdout"].items():
    for kind, lines in e.items():
      flat[("stdout", step, kind)] = lines
  qs = manifest.get("quickstart")
  if qs is not None:
    for key, value in qs.items():
      if key == "stages":
        for stage, v in value.items():
          flat[("quickstart", "stage", stage)] = v
      else:
        flat[("quickstart", key, "")] = value
  for rel, why in manifest["excluded"].items():
    flat[("excluded", rel, "")] = why
  return flat


def _values(variables):
  return sorted((e["dtype"], tuple(e["shape"]), e["sha256"]) for e in variables.values())


def compare(path_a, path_b):
  with open(path_a, encoding="utf-8") as f:
    a = json.load(f)
  with open(path_b, encoding="utf-8") as f:
    b = json.load(f)
  print(f"A: {path_a}: commit {a.get('commit')} ({'dirty' if a.get('dirty') else 'clean'}) "
        f"{(a.get('subject') or '')[:70]!r}")
  print(f"B: {path_b}: commit {b.get('commit')} ({'dirty' if b.get('dirty') else 'clean'}) "
        f"{(b.get('subject') or '')[:70]!r}")
  if a.get("environment") != b.get("environment"):
    print(f"NOTE environments differ: {a.get('environment')} vs {b.get('environment')}")
  if a.get("manifest_version") != b.get("manifest_version"):
    print("NOTE manifest versions differ")
  if [s for s in a["steps"]] != [s for s in b["steps"]]:
    print(f"NOTE steps differ: {list(a['steps'])} vs {list(b['steps'])}")
  fa, fb = flatten(a), flatten(b)
  sections = sorted({k[0] for k in fa} | {k[0] for k in fb})
  differences = 0
  for section in sections:
    ka = {k for k in fa if k[0] == section}
    kb = {k for k in fb if k[0] == section}
    same = sorted(k for k in ka & kb if fa[k] == fb[k])
    changed = sorted(k for k in ka & kb if fa[k] != fb[k])
    only_a, only_b = sorted(ka - kb), sorted(kb - ka)
    n_diff = len(changed) + len(only_a) + len(only_b)
    differences += n_diff
    status = "identical" if not n_diff else "DIFFER"
    print(f"{section:12s} {status}: {len(same)} identical, {len(changed)} changed, "
          f"{len(only_a)} only in A, {len(only_b)} only in B")
    for tag, keys in (("changed  ", changed), ("only in A", only_a), ("only in B", only_b)):
      for k in keys[:40]:
        detail = f" [{k[2]}]" if k[2] else ""
        print(f"  {tag} {k[1]}{detail}")
      if len(keys) > 40:
        print(f"  ... and {len(keys) - 40} more {tag.strip()}")
  # checkpoints: a naming change with identical values, told apart from a numeric change
  for prefix in sorted(set(a["checkpoints"]) | set(b["checkpoints"])):
    va, vb = a["checkpoints"].get(prefix), b["checkpoints"].get(prefix)
    if va is None or vb is None or va == vb:
      continue
    strip = lambda v: {k: e for k, e in v.items() if k != "_CHECKPOINTABLE_OBJECT_GRAPH"}
    if _values(strip(va)) == _values(strip(vb)):
      verdict = "same tensor values, different keys or object graph (naming only)"
    else:
      same_keys = [k for k in va if k in vb and va[k] == vb[k]]
      verdict = (f"VALUES differ ({len(same_keys)} of {len(va)} keys identical in value)")
    print(f"checkpoint {prefix}: {verdict}")
  print("RESULT: identical" if not differences else f"RESULT: {differences} differences")
  return 1 if differences else 0


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog=__doc__.split("\n\n", 1)[1])
  parser.add_argument("--repo", help="checkout whose scripts run (cwd and PYTHONPATH of every "
                      "step)")
  parser.add_argument("--out", help="manifest JSON to write")
  parser.add_argument("--work_dir", help="where inputs, outputs and logs go (must not hold out/ "
                      "yet; default: a temporary directory, removed afterwards)")
  parser.add_argument("--keep_work_dir", action="store_true",
                      help="keep the default temporary work directory")
  parser.add_argument("--rehash", action="store_true",
                      help="do not run anything: hash the outputs of the finished run in "
                      "--work_dir again (same --repo), e.g. after changing what is normalised")
  parser.add_argument("--quickstart", action=argparse.BooleanOptionalAction, default=True,
                      help="also run quickstart.py --preset=tiny (default: on)")
  parser.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                      help="compare two manifests; exit 1 on any difference")
  args = parser.parse_args(argv)
  if args.compare:
    return compare(*args.compare)
  if not args.repo or not args.out:
    parser.error("--repo and --out are required (or --compare A.json B.json)")
  make(args)
  return 0


if __name__ == "__main__":
  sys.exit(main())
