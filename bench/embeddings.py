"""Sentence-embedding benchmark: sentences/s on CPU, ours against sentence-transformers.

Raw text in, unit vectors out: ours (the embedding SavedModel and the Python model path)
against SentenceTransformer.encode on the same weights and sentences, each padded two ways.

Model: a small encoder, 4 layers, d_model 256, 4 heads, d_inner 1024, float32, random weights
(seeded), under the sentence_pooler head (mean pooling, normalised; modeling/heads.py), built
locally: nothing is downloaded. --model_type xlnet uses a SentencePiece model trained on the
corpus, mpnet a WordPiece vocabulary of the corpus's words. Ours exported as SavedModels
(serving/embedding_graph.py: tokenization in the graph) and as sentence-transformers' layout
(finetuning/st_export.py), which SentenceTransformer(dir) loads in a worker process of its own
(torch and TensorFlow in one process compete for threads).

Sentences: lines of the local corpus (Python's stdlib docstrings, data_utils/corpus.py) of
20-50 pieces, --max_seq_length 128.

Arms (`max`: every row padded to --max_seq_length; `longest`: each batch to its longest row):
  saved_max, saved_longest     the SavedModel (--export_padding max / longest)
  python_max, python_longest   the Python path: tokenizer, data_utils/layouts rows, the model
                               (tf.function), padding cut by serving/packing.trim_padding
  st_max, st_longest           SentenceTransformer.encode (padding "max_length" / its default)

Every round runs each arm once over the same batches (the order rotated each round); a figure
is the median over rounds of the arm's time, a ratio the median over rounds of the two arms'
times in that round (a neighbour on a shared machine slows both sides of a ratio alike). The
vectors of every arm are compared with saved_max's first (max difference, printed).

  python bench/embeddings.py [--model_type xlnet] [--rounds 5] [--batches 4] [--threads 0]
      [--out FILE]
"""

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

# this directory holds bench/serving.py, which would shadow the project's serving package
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
  sys.path.pop(0)

ARMS = ("saved_max", "saved_longest", "python_max", "python_longest", "st_max", "st_longest")
SIZE = dict(layers=4, d_model=256, heads=4, d_inner=1024)


def corpus_lines(work_dir):
  from data_utils import corpus
  text = os.path.join(work_dir, "corpus.txt")
  if not os.path.exists(text):
    corpus.write_corpus(text, max_bytes=3_000_000)
  with open(text, encoding="utf-8") as f:
    return text, [line.strip() for line in f if line.strip()]


def wordpiece_vocab(path, lines, size):
  """A WordPiece vocab.txt (MPNet's specials at their ids, pad 1) of the corpus's most frequent
  lower-cased words, every single character and its ## continuation."""
  counts = collections.Counter(w for line in lines for w in re.findall(r"[a-z]+", line.lower()))
  chars = sorted({c for line in lines for c in line.lower() if not c.isspace()})
  pieces = ["<s>", "<pad>", "</s>", "<unk>", "[UNK]", "<mask>"] + chars + [f"##{c}" for c in chars]
  pieces += [w for w, _ in counts.most_common(size) if w not in set(pieces)]
  with open(path, "w", encoding="utf-8") as f:
    f.writelines(p + "\n" for p in dict.fromkeys(pieces[:size]))
  return path


def setup(work_dir, model_type, vocab, max_len, n):
  """(texts, tokenizer Source, Python tokenizer, mean pieces): n corpus lines of 20-50 pieces."""
  from data_utils import layouts
  from modeling import tokenizer_files
  text, lines = corpus_lines(work_dir)
  if model_type == "xlnet":
    from data_utils import tokenization
    sp = os.path.join(work_dir, f"sp{vocab}.model")
    if not os.path.exists(sp):
      tokenization.train_sentencepiece([text], sp[:-6], vocab, lower=False)
    source = tokenizer_files.Source(tokenizer_files.SENTENCEPIECE, sp, False)
  else:
    path = wordpiece_vocab(os.path.join(work_dir, f"vocab{vocab}.txt"), lines, vocab)
    source = tokenizer_files.Source(tokenizer_files.WORDPIECE, path, True)
  tok = layouts.make_tokenizer(model_type, *((None, source.path) if model_type == "mpnet"
                                             else (source.path, None)), source.uncased)
  lengths = [len(ids) for ids in tok.encode_lines(lines[:20000])]
  kept = [l for l, k in zip(lines, lengths) if 20 <= k <= min(50, max_len - 3)]
  picked = [kept[i] for i in np.random.default_rng(0).choice(len(kept), n, replace=False)]
  mean = float(np.mean([len(ids) for ids in tok.encode_lines(picked)]))
  return picked, source, tok, mean


def build(work_dir, model_type, source, tok, max_len):
  """(ours: {arm: fn(batch) -> vectors}, directory of the sentence-transformers export)."""
  import tensorflow as tf
  from data_utils import layouts
  from finetuning import st_export
  from modeling import families
  from modeling.mpnet.config import MPNetConfig
  from modeling.run_config import RunConfig
  from modeling.xlnet.config import XLNetConfig
  from serving import embedding_graph, packing

  tf.keras.utils.set_random_seed(0)
  vocab = source.vocab_size()
  s = SIZE
  if model_type == "xlnet":
    config = XLNetConfig(n_layer=s["layers"], d_model=s["d_model"], n_head=s["heads"],
                         d_head=s["d_model"] // s["heads"], d_inner=s["d_inner"], n_token=vocab,
                         ff_activation="gelu", untie_r=True)
  else:
    config = MPNetConfig(vocab_size=vocab, hidden_size=s["d_model"],
                         num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                         intermediate_size=s["d_inner"], hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0, max_position_embeddings=max_len + 2)
  spec = {"type": "sentence_pooler", "mode": "mean", "normalize": True}
  model = families.get(model_type).with_head(config, RunConfig(dropout=0.0, dropatt=0.0), spec)
  model.ensure_built()
  quiet = lambda _: None
  ours = {}
  for padding in ("max", "longest"):
    path = embedding_graph.export_embeddings(model, tok, model_type, max_len,
                                             os.path.join(work_dir, f"saved_{padding}"),
                                             log=quiet, padding=padding)
    serve = tf.saved_model.load(path).signatures["serving_default"]
    ours[f"saved_{padding}"] = (
        lambda batch, serve=serve: serve(sentence=tf.constant(batch))["embedding"].numpy())
  forward = tf.function(lambda rows: model(rows, training=False), reduce_retracing=True)
  left = layouts.rows(model_type).left_padded
  for padding in ("max", "longest"):
    def python_path(batch, padding=padding):
      rows = layouts.one_segment(layouts.encode_texts(tok, batch, None, max_len, model_type))
      rows = packing.trim_padding({k: tf.constant(v) for k, v in rows.items()}, max_len, left,
                                  padding)
      return forward(rows).numpy()
    ours[f"python_{padding}"] = python_path
  st_dir = os.path.join(work_dir, "st")
  st_export.export(model, st_dir, source, max_len, log=quiet)
  return ours, st_dir


class STWorker:
  """SentenceTransformer(st_dir) in a process of its own; each call is timed inside it."""

  def __init__(self, st_dir, max_len, threads):
    self.proc = subprocess.Popen([sys.executable, __file__, "--st_worker", st_dir,
                                  "--max_seq_length", str(max_len), "--threads", str(threads)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    self.length = {}

  def __call__(self, padding, batches):
    self.proc.stdin.write(json.dumps({"padding": padding, "batches": batches}) + "\n")
    self.proc.stdin.flush()
    reply = json.loads(self.proc.stdout.readline())
    self.length[padding] = reply["length"]      # the rows' length of the last batch
    return reply["seconds"], np.array(reply["vectors"])

  def close(self):
    self.proc.stdin.close()
    self.proc.wait()


def st_worker(st_dir, max_len, threads):
  import torch
  from sentence_transformers import SentenceTransformer
  torch.set_num_threads(threads or os.cpu_count())
  model = SentenceTransformer(st_dir, device="cpu")
  padded = {"max": {"text": {"padding": "max_length", "max_length": max_len}}, "longest": {}}
  for line in sys.stdin:
    request = json.loads(line)
    model[0].processing_kwargs = padded[request["padding"]]
    start, vectors = time.perf_counter(), None
    for batch in request["batches"]:
      vectors = model.encode(batch, batch_size=len(batch), convert_to_numpy=True)
    seconds = time.perf_counter() - start
    length = int(model[0].preprocess(request["batches"][-1])["input_ids"].shape[1])
    print(json.dumps({"seconds": seconds, "vectors": vectors.tolist(), "length": length}),
          flush=True)


def runners(ours, st):
  """arm -> run(batches): (seconds, vectors of the last batch)."""
  def our(fn):
    def run(batches):
      start = time.perf_counter()
      for batch in batches:
        vectors = fn(batch)
      return time.perf_counter() - start, vectors
    return run
  arms = {arm: our(fn) for arm, fn in ours.items()}
  arms["st_max"] = lambda batches: st("max", batches)
  arms["st_longest"] = lambda batches: st("longest", batches)
  return arms


def table(results, sizes):
  lines = ["| arm | " + " | ".join(f"batch {b}: sentences/s | vs st same padding"
                                   for b in sizes) + " |",
           "|---|" + "---|---|" * len(sizes)]
  for arm in ARMS:
    cells = []
    for b in sizes:
      row = results[f"batch_{b}"][arm]
      peer = "st_" + arm.split("_", 1)[1]
      ratio = row.get(f"speed_vs_{peer}")
      cells += [f"{row['sentences_per_s']:,.1f}", "1" if ratio is None else f"{ratio:.2f}x"]
    lines.append(f"| {arm} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model_type", choices=("xlnet", "mpnet"), default="xlnet",
                      help="the encoder family (its tokenizer and row layout)")
  parser.add_argument("--work_dir", default="/tmp/embedding_bench",
                      help="corpus, tokenizer, exports (reused by a rerun)")
  parser.add_argument("--vocab", type=int, default=8000, help="tokenizer pieces")
  parser.add_argument("--max_seq_length", type=int, default=128, help="tokens per row")
  parser.add_argument("--batch_sizes", default="32,1", help="comma-separated batch sizes")
  parser.add_argument("--batches", type=int, default=4, help="batches per arm per round")
  parser.add_argument("--rounds", type=int, default=5, help="rounds (medians over them)")
  parser.add_argument("--threads", type=int, default=0, help="threads of each side's "
                      "operations (TensorFlow intra-op, torch.set_num_threads); 0: every core. "
                      "1 keeps a loaded machine from slowing one side's thread pool more")
  parser.add_argument("--out", default=None, help="also write the results here (JSON)")
  parser.add_argument("--st_worker", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.st_worker:
    return st_worker(args.st_worker, args.max_seq_length, args.threads)
  if args.threads:
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
  work_dir = os.path.join(args.work_dir, args.model_type)
  os.makedirs(work_dir, exist_ok=True)
  sizes = [int(b) for b in args.batch_sizes.split(",")]
  texts, source, tok, mean_pieces = setup(work_dir, args.model_type, args.vocab,
                                          args.max_seq_length, max(sizes) * args.batches)
  ours, st_dir = build(work_dir, args.model_type, source, tok, args.max_seq_length)
  st = STWorker(st_dir, args.max_seq_length, args.threads)
  run = runners(ours, st)
  check = {arm: run[arm]([texts[:8]])[1] for arm in ARMS}
  results = {"model_type": args.model_type, **SIZE, "mean_pieces": mean_pieces,
             "max_seq_length": args.max_seq_length, "cpus": os.cpu_count(),
             "threads": args.threads or os.cpu_count(),
             "max_difference_vs_saved_max": {
                 arm: float(np.max(np.abs(check[arm] - check["saved_max"]))) for arm in ARMS},
             "st_row_length": dict(st.length)}
  for size in sizes:
    batches = [texts[k * size:(k + 1) * size] for k in range(args.batches)]
    for arm in ARMS:                                     # warm-up: traces
      run[arm](batches)
    times = {arm: [] for arm in ARMS}
    for r in range(args.rounds):
      for arm in ARMS[r % len(ARMS):] + ARMS[:r % len(ARMS)]:
        times[arm].append(run[arm](batches)[0] / len(batches))
    row = {arm: {"ms_per_batch": 1e3 * statistics.median(t),
                 "sentences_per_s": size / statistics.median(t)} for arm, t in times.items()}
    for arm in ARMS:
      for peer in ("st_max", "st_longest", "saved_max"):
        if arm != peer:
          row[arm][f"speed_vs_{peer}"] = statistics.median(
              p / a for a, p in zip(times[arm], times[peer]))
    results[f"batch_{size}"] = row
  st.close()
  print(json.dumps(results, indent=1))
  print(table(results, sizes))
  if args.out:
    with open(args.out, "w") as f:
      json.dump(results, f, indent=1)


if __name__ == "__main__":
  main()
