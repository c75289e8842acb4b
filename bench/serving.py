"""Serving benchmark: an XLNet-Base classifier on raw text, ours against Hugging
Face, each with rows padded to --max_seq_length and to the batch's longest row.

Model: XLNet-Base sizes (12 layers, d_model 768, 12 heads of 64, d_inner 3072, GELU), float32,
a sentence-pair-free binary classifier head, random weights; ours exported as a SavedModel
(serving/export.py: SentencePiece in the graph) and the same weights written in the Hugging
Face layout (modeling/families.export_hf) and loaded by transformers' PyTorch
XLNetForSequenceClassification with its XLNetTokenizer on the same SentencePiece model.
Tokenization is included in every arm: raw strings in, logits out.

Sentences: lines of the local corpus (Python's stdlib docstrings, data_utils/corpus.py) of
20-50 pieces, ~33 on average (short sentences), max_seq_length 128.

Arms (one SavedModel per padding of ours; `max` is padding to the longest length allowed):
  ours_max        every row padded to 128
  ours_longest    each batch padded to its longest row
  ours_buckets    XLA-compiled forward pass, each batch padded to 16/32/64/128
  hf_max          tokenizer(padding="max_length", max_length=128)
  hf_longest      tokenizer(padding="longest")

Every round runs each arm once over the same batches (the order rotated each round); a
figure is the median over rounds of the arm's time, and a ratio is the median over rounds of
the two arms' times in that round (so a neighbour on a shared machine slows both sides of a
ratio alike).

  python bench/serving.py [--rounds 5] [--batches 4] [--work_dir /tmp/xlnet_serving_bench]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

# run as `python bench/serving.py`, this file's directory comes first on sys.path and its name
# would hide the project's `serving` package from the imports below
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
  sys.path.pop(0)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from data_utils import corpus, tokenization  # noqa: E402

MAX_LEN, LABELS = 128, ("0", "1")
ARMS = ("ours_max", "ours_longest", "ours_buckets", "hf_max", "hf_longest")


def sentences(work_dir, n, vocab):
  """n corpus lines of 20-50 pieces (with the SentencePiece model trained on the corpus)."""
  text = os.path.join(work_dir, "corpus.txt")
  if not os.path.exists(text):
    corpus.write_corpus(text, max_bytes=3_000_000)
  sp = os.path.join(work_dir, f"sp{vocab}.model")
  if not os.path.exists(sp):
    tokenization.train_sentencepiece([text], sp[:-6], vocab, lower=False)
  tok = tokenization.Tokenizer(sp)
  with open(text, encoding="utf-8") as f:
    lines = [l.strip() for l in f if l.strip()]
  lengths = [len(ids) for ids in tok.encode_lines(lines[:20000])]
  kept = [l for l, k in zip(lines, lengths) if 20 <= k <= 50]
  rng = np.random.default_rng(0)
  picked = [kept[i] for i in rng.choice(len(kept), n, replace=False)]
  return picked, tok, float(np.mean([len(ids) for ids in tok.encode_lines(picked)]))


def build(work_dir, tok, vocab):
  """(ours: {arm: serving fn}, hf: (tokenizer, model)), the same random weights."""
  import types

  from finetuning import classifier_data, classifier_task
  from modeling import families
  from modeling.run_config import RunConfig
  from modeling.xlnet.config import XLNetConfig
  from modeling.xlnet.models import XLNetClassifier

  tf.keras.utils.set_random_seed(0)
  config = XLNetConfig(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072,
                       n_token=vocab, ff_activation="gelu", untie_r=True)
  model = XLNetClassifier(config, RunConfig(dropout=0.0, dropatt=0.0), n_class=2,
                          task_name="sst-2").ensure_built()
  task = types.SimpleNamespace(config=types.SimpleNamespace(max_seq_length=MAX_LEN,
                                                            model_type="xlnet"),
                               spec=classifier_data.get_task("sst-2"), tokenizer=tok)
  quiet = lambda _: None
  ours = {}
  for arm, padding, xla in (("ours_max", "max", False), ("ours_longest", "longest", False),
                            ("ours_buckets", "buckets", True)):
    path = classifier_task.export_classifier(task, model, os.path.join(work_dir, arm), log=quiet,
                                   padding=padding, xla=xla)
    ours[arm] = tf.saved_model.load(path).signatures["serving_default"]
  hf_dir = families.export_hf(model, os.path.join(work_dir, "hf"), quiet, labels=LABELS)
  shutil.copyfile(tok.model_path, os.path.join(hf_dir, "spiece.model"))   # its tokenizer's file
  return ours, HFWorker(hf_dir)


class HFWorker:
  """Hugging Face's model in a process of its own (torch and TensorFlow in one process slow
  torch down ~10x here: their thread pools compete); each call is timed inside the worker."""

  def __init__(self, hf_dir):
    self.proc = subprocess.Popen([sys.executable, __file__, "--hf_worker", hf_dir],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

  def __call__(self, padding, batches):
    self.proc.stdin.write(json.dumps({"padding": padding, "batches": batches}) + "\n")
    self.proc.stdin.flush()
    reply = json.loads(self.proc.stdout.readline())
    return reply["seconds"], np.array(reply["logits"])


def hf_worker(hf_dir):
  import torch
  import transformers
  torch.set_num_threads(os.cpu_count())
  tok = transformers.XLNetTokenizer.from_pretrained(hf_dir)
  model = transformers.XLNetForSequenceClassification.from_pretrained(hf_dir).eval()
  for line in sys.stdin:
    request = json.loads(line)
    start, logits = time.perf_counter(), None
    for batch in request["batches"]:
      enc = tok(batch, padding=request["padding"], max_length=MAX_LEN, truncation=True,
                return_tensors="pt")
      with torch.inference_mode():
        logits = model(**enc).logits.numpy()
    print(json.dumps({"seconds": time.perf_counter() - start, "logits": logits.tolist()}),
          flush=True)


def runners(ours, hf):
  """arm -> run(batches): (seconds, logits of the last batch)."""
  def our(arm):
    fn = ours[arm]

    def run(batches):
      start = time.perf_counter()
      for batch in batches:
        logits = fn(sentence=tf.constant(batch))["logits"].numpy()
      return time.perf_counter() - start, logits
    return run

  return {"ours_max": our("ours_max"), "ours_longest": our("ours_longest"),
          "ours_buckets": our("ours_buckets"),
          "hf_max": lambda batches: hf("max_length", batches),
          "hf_longest": lambda batches: hf("longest", batches)}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--work_dir", default="/tmp/xlnet_serving_bench")
  parser.add_argument("--vocab", type=int, default=8000, help="SentencePiece pieces (the "
                      "release's 32000 changes only the embedding lookup)")
  parser.add_argument("--batch_sizes", default="32,1")
  parser.add_argument("--batches", type=int, default=4, help="batches per arm per round")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--out", default=None, help="also write the results here (JSON)")
  parser.add_argument("--hf_worker", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.hf_worker:
    return hf_worker(args.hf_worker)
  os.makedirs(args.work_dir, exist_ok=True)
  sizes = [int(b) for b in args.batch_sizes.split(",")]
  texts, tok, mean_pieces = sentences(args.work_dir, max(sizes) * args.batches, args.vocab)
  ours, hf = build(args.work_dir, tok, args.vocab)
  run = runners(ours, hf)
  check = {arm: run[arm]([texts[:8]])[1] for arm in ARMS}
  results = {"mean_pieces": mean_pieces, "max_seq_length": MAX_LEN, "cpus": os.cpu_count(),
             "max_logit_difference_vs_ours_max": {
                 arm: float(np.max(np.abs(check[arm] - check["ours_max"]))) for arm in ARMS}}
  for size in sizes:
    batches = [texts[k * size:(k + 1) * size] for k in range(args.batches)]
    for arm in ARMS:                                     # warm-up: traces, XLA compiles
      run[arm](batches)
    times = {arm: [] for arm in ARMS}
    for r in range(args.rounds):
      for arm in ARMS[r % len(ARMS):] + ARMS[:r % len(ARMS)]:
        times[arm].append(run[arm](batches)[0] / len(batches))
    row = {arm: {"ms_per_batch": 1e3 * statistics.median(t),
                 "sentences_per_s": size / statistics.median(t)} for arm, t in times.items()}
    for arm in ARMS:
      for peer in ("hf_max", "hf_longest", "ours_max"):
        if arm != peer:
          row[arm][f"speed_vs_{peer}"] = statistics.median(
              p / a for a, p in zip(times[arm], times[peer]))
    results[f"batch_{size}"] = row
    print(f"batch {size}:")
    for arm in ARMS:
      print(f"  {arm:13s} {row[arm]['ms_per_batch']:8.1f} ms/batch "
            f"{row[arm]['sentences_per_s']:7.1f} sentences/s  "
            + " ".join(f"{k[9:]} {v:.2f}x" for k, v in row[arm].items()
                       if k.startswith("speed_vs_")), flush=True)
  print(json.dumps(results, indent=1))
  if args.out:
    with open(args.out, "w") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
