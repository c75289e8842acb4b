"""The quickstart's diagnostics: what pretraining put into the weights, without fine-tuning.

    python -m reproduction.diagnostics --output_dir=output/quickstart --preset=small

Reads the quickstart's pretraining checkpoints (every `save_every` steps) and prints one JSON
line {"diagnostics": ...} with:
- heldout: each objective's loss on held-out records (the dev documents, never trained on), at
  every checkpoint, dropout off, memory carried as in training: does pretraining generalise, or
  does it memorise the few records it repeats?
- mpnet_modes: the final MPNet weights' held-out loss when the same weights predict in MPNet's
  three modes (mpnet, plm = - position compensation, mlm), and with the predictions in
  position order: what each piece of information is worth to this model.
- probe: a frozen-encoder linear probe per arm and checkpoint on the module-classification
  task: features = [summary token's state, mean of the last layer over real tokens], a softmax
  regression whose L2 strength is chosen on the dev split; test accuracy reported once. No
  fine-tuning learning rate is involved, so it measures what the representation carries. The
  same probe on the summary token's state alone ("summary") reads only what the fine-tuned
  classifier's head reads, the like-for-like yardstick for fine-tuning.
- cloze: zero-shot cloze (pretraining/cloze.py) on the RACE-format dev and test questions, each
  objective's random weights and final checkpoint, both scorings (sum and mean of the option's
  log-probabilities); the report chooses the scoring on dev.
- pairs: the same scorer on the minimal pairs (data/pairs).
- accept_zero_shot: each objective's random and final weights judge the CoLA-layout dev and
  test sentences with no fine-tuning: a sentence's pseudo-log-likelihood per token, or its SLOR
  (less the unigram log-probability), cut at a threshold; variant and threshold chosen on dev
  by MCC, test read once. What the language model itself knows of single sentences, beside
  what the acceptability fine-tuning draws out of it.
"""

import json
import os
import sys

import numpy as np

from reproduction import pipeline as pipeline_lib

L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1)
HELDOUT_BATCHES = 40


def softmax_regression(x, y, n_class, l2, steps=400, lr=0.05, seed=0):
  """Multinomial logistic regression by full-batch Adam (numpy, deterministic).
  x [N, F] (standardised), y int [N] -> (W [F, C], b [C])."""
  rng = np.random.default_rng(seed)
  w = rng.normal(0, 0.01, [x.shape[1], n_class])
  b = np.zeros(n_class)
  onehot = np.eye(n_class)[y]
  m = [np.zeros_like(w), np.zeros_like(b)]
  v = [np.zeros_like(w), np.zeros_like(b)]
  for t in range(1, steps + 1):
    z = x @ w + b
    z -= z.max(1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(1, keepdims=True)
    grad_z = (p - onehot) / len(x)
    grads = [x.T @ grad_z + l2 * w, grad_z.sum(0)]
    for i, (param, g) in enumerate(((w, grads[0]), (b, grads[1]))):
      m[i] = 0.9 * m[i] + 0.1 * g
      v[i] = 0.999 * v[i] + 0.001 * g * g
      param -= lr * (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8)
  return w, b


def linear_probe(feats, labels, n_class):
  """feats/labels: {"train", "dev", "test"} -> {"l2", "dev", "test", "train"} accuracies."""
  mean, std = feats["train"].mean(0), feats["train"].std(0) + 1e-6
  x = {k: (v - mean) / std for k, v in feats.items()}
  acc = lambda w, b, k: float(((x[k] @ w + b).argmax(1) == labels[k]).mean())
  best = None
  for l2 in L2_GRID:
    w, b = softmax_regression(x["train"], labels["train"], n_class, l2)
    dev = acc(w, b, "dev")
    if best is None or dev > best[1]:
      best = (l2, dev, w, b)
  l2, dev, w, b = best
  return {"l2": l2, "train": acc(w, b, "train"), "dev": dev, "test": acc(w, b, "test")}


def summary_part(feats):
  """{split: [N, 2 * d_model] probe features} -> {split: [N, d_model]}: the summary token's
  state alone (Diagnostics.features puts it first), the one input of the fine-tuned classifier's
  head; the probe on both halves also reads the mean of the token states."""
  return {k: v[:, :v.shape[1] // 2] for k, v in feats.items()}


def best_threshold(scores, labels):
  """(threshold, mcc): the cut "acceptable when score >= threshold" of highest MCC on these
  scores [N] and 0/1 labels [N] (midpoints between distinct scores; ties go to the lower)."""
  from finetuning import metrics
  values = np.unique(scores)
  cuts = np.concatenate([[values[0] - 1.0], (values[1:] + values[:-1]) / 2, [values[-1] + 1.0]])
  best = max(cuts, key=lambda t: (metrics.matthews_corrcoef(labels, scores >= t), -t))
  return float(best), metrics.matthews_corrcoef(labels, scores >= best)


def acceptability_judgement(dev, test):
  """A zero-shot acceptability judge from sentence scores, chosen on dev and read once on test.
  dev, test: {variant: scores [N]} and "label" [N] (0/1); variants: "mean" (the
  pseudo-log-likelihood per token) and "slor" (minus the tokens' unigram log-probability,
  per token: Lau et al. 2017's SLOR, which takes word frequency and length out). -> {"variant",
  "threshold", "dev": {"mcc", "accuracy", "n"}, "test": {...}}."""
  from finetuning import metrics
  fits = {v: best_threshold(np.asarray(dev[v]), np.asarray(dev["label"]))
          for v in ("mean", "slor")}
  variant = max(fits, key=lambda v: fits[v][1])
  threshold = fits[variant][0]
  out = {"variant": variant, "threshold": threshold}
  for name, split in (("dev", dev), ("test", test)):
    labels, preds = np.asarray(split["label"]), np.asarray(split[variant]) >= threshold
    out[name] = {"mcc": metrics.matthews_corrcoef(labels, preds),
                 "accuracy": float((labels == preds).mean()), "n": int(len(labels))}
  return out


class Diagnostics:
  """Everything is read from the quickstart's directories (reproduction.pipeline.Pipeline)."""

  def __init__(self, pipe):
    import tensorflow as tf
    self.tf, self.pipe, self.p = tf, pipe, pipe.p
    # One task per setting and one model per task, loaded at each checkpoint in turn: what is
    # traced on a model (the held-out step, compiled by XLA; the probe's forward) is traced
    # once per task, not once per checkpoint.
    self._tasks, self._models, self._functions = {}, {}, {}

  def _function(self, key, make):
    if key not in self._functions:
      self._functions[key] = make()
    return self._functions[key]

  # ---- models -------------------------------------------------------------------------------
  def task(self, objective, mode="mpnet", permute=True, split_dir=None):
    key = (objective, mode, permute, split_dir)
    if key not in self._tasks:
      self._tasks[key] = self._new_task(*key)
    return self._tasks[key]

  def _new_task(self, objective, mode, permute, split_dir):
    from modeling import families
    from modeling.run_config import RunConfig
    from pretraining import objectives
    from pretraining.task import PretrainConfig, PretrainTask
    p, pipe = self.p, self.pipe
    family = objectives.get(objective).family
    model_config = families.get(family).config_from_json(
        os.path.join(pipe.models, f"{family}_config.json"))
    # the task drops the memory of an objective that carries none (MPNet)
    run_config = RunConfig(dropout=0.0, dropatt=0.0, mem_len=p.mem_len, reuse_len=p.reuse_len)
    config = PretrainConfig(record_dir=split_dir or pipe.records, seq_len=p.seq_len,
                            reuse_len=p.reuse_len, num_predict=p.num_predict,
                            bsz_per_host=p.batch, bi_data=False, objective=objective,
                            mpnet_mode=mode, mpnet_permute=permute, seed=self.pipe.seed)
    return PretrainTask(config, model_config, run_config)

  def model(self, task, step, run=None):
    """The pretraining model at checkpoint `step` (0 = fresh weights, seeded) of the run
    `run` (default: the task's objective)."""
    import keras
    from modeling import checkpoint
    keras.utils.set_random_seed(self.pipe.seed)
    if id(task) not in self._models:
      model = task.build_model()
      model.ensure_built()
      self._models[id(task)] = (model, [v.numpy() for v in model.variables])
    model, fresh = self._models[id(task)]
    for variable, value in zip(model.variables, fresh):   # the seeded fresh weights, then
      variable.assign(value)                                # the checkpoint's over them
    if step:
      objective = task.config.objective
      prefix = os.path.join(self.pipe.pretrain_dir(run or objective), "ckpt", f"ckpt-{step}")
      checkpoint.read_checkpoint(self.tf.train.Checkpoint(**checkpoint.native_objects(model)),
                                 prefix, partial=True)     # a bad file: one line naming it
    return model

  # ---- held-out loss ------------------------------------------------------------------------
  def heldout_loss(self, task, model):
    from data_utils import pipeline
    from modeling import losses
    tf, c = self.tf, task.config
    ds, _, _ = pipeline.pretrain_dataset(c.record_dir, c.seq_len, c.reuse_len, c.num_predict,
                                         c.bsz_per_host, False, split="valid", repeat=False)
    state = task.initial_state()

    def make():
      @tf.function(jit_compile=True)
      def step(batch, state, i):
        logits, target, mask, _, new_state = task.predict(model, batch, state, i,
                                                          training=False)
        return losses.lm_loss(logits, target, mask), tf.cast(new_state, state.dtype)
      return step

    step = self._function(("heldout", id(task), id(model)), make)

    total = []
    with pipeline.named_record_errors(c.record_dir, "valid"):   # tf.data names no file
      for i, batch in enumerate(ds.take(HELDOUT_BATCHES)):
        loss, state = step(batch, state, tf.constant(i, tf.int64))
        total.append(float(loss))
    return float(np.mean(total))

  # ---- probe --------------------------------------------------------------------------------
  def rows(self, model_type):
    from data_utils import layouts
    from finetuning import classifier_data, classifier_features
    spec = classifier_data.get_task("dbpedia")
    tokenizer = layouts.make_tokenizer(model_type, self.pipe.spm)
    data_dir = os.path.join(self.pipe.data, "classify")
    return {split: classifier_features.encode(
        tokenizer, classifier_data.read_split(spec, data_dir, split), self.p.cls_seq_len,
        spec.labels, model_type) for split in ("train", "dev", "test")}, len(spec.labels)

  def features(self, model, rows, model_type):
    from modeling import families
    tf = self.tf
    encoder = model.encoder
    family = families.get(model_type)

    def make():
      @tf.function(reduce_retracing=True)
      def forward(ids, seg, mask):
        h, summary = family.encode_rows(encoder, ids, seg, mask)
        real = 1.0 - mask[:, :, None]
        mean = tf.reduce_sum(h * real, 1) / tf.maximum(tf.reduce_sum(real, 1), 1.0)
        return tf.concat([summary, mean], -1)
      return forward

    forward = self._function(("features", id(model), model_type), make)

    out = []
    for i in range(0, len(rows["input_ids"]), 128):
      out.append(forward(tf.constant(rows["input_ids"][i:i + 128]),
                         tf.constant(rows["seg_ids"][i:i + 128]),
                         tf.constant(rows["input_mask"][i:i + 128], tf.float32)).numpy())
    return np.concatenate(out)      # [N, 2 * d_model]: summary token's state, then the mean

  # ---- zero-shot cloze ----------------------------------------------------------------------
  def cloze(self, log=print):
    """{objective: {step: {split: {scoring: accuracy dict}}}} for step 0 and the last: the
    RACE-format questions' four options at the blank."""
    from finetuning import race
    return self._zero_shot({split: race.read_split(os.path.join(self.pipe.data, "RACE"), split,
                                                   report=lambda _: None)
                            for split in ("dev", "test")}, "cloze", log)

  def pairs(self, log=print):
    """The same for the minimal pairs (tasks.minimal_pairs: real words or damaged ones at the
    blank of a held-out sentence); {} when the data stage wrote none."""
    items = {}
    for split in ("dev", "test"):
      path = os.path.join(self.pipe.data, "pairs", f"{split}.json")
      if not os.path.exists(path):
        return {}
      with open(path, encoding="utf-8") as f:
        items[split] = [("pairs", "", d["question"], d["options"], d["label"])
                        for d in json.load(f)]
    return self._zero_shot(items, "pairs", log)

  def _zero_shot(self, items, what, log):
    from data_utils import tokenization
    from pretraining import cloze, objectives
    p = self.p
    tokenizer = tokenization.Tokenizer(self.pipe.spm, lower=False)   # the run's is cased
    out = {}
    for name in [o for o in pipeline_lib.OBJECTIVES if o in p.arms]:
      task = self.task(name)
      for step in (0, p.pretrain_steps):
        model = self.model(task, step)
        result = {split: cloze.evaluate(objectives.get(name), task, model, tokenizer, rows,
                                        p.seq_len) for split, rows in items.items()}
        out.setdefault(name, {})[step] = result
        log(f"{what} {name} step {step}: " + "; ".join(
            f"{split} " + ", ".join(f"{k} {v['accuracy']:.3f}" for k, v in r.items())
            for split, r in result.items()))
    return out

  # ---- zero-shot acceptability --------------------------------------------------------------
  def acceptability_sentences(self):
    """{split: (sentences, 0/1 labels)} of the CoLA-layout dev and test splits, the first
    `accept_zero_shot` of each that hold no "_" (the scorer's blank); {} without the set."""
    from reproduction import tasks
    cola = os.path.join(self.pipe.data, "CoLA")
    if not self.p.accept_zero_shot or not os.path.exists(os.path.join(cola, "dev.tsv")):
      return {}
    with open(os.path.join(cola, "dev.tsv"), encoding="utf-8") as f:
      dev = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    test = zip(tasks.read_tsv_column(os.path.join(cola, "test.tsv"), "sentence"),
               tasks.read_tsv_column(os.path.join(cola, "test-labels.tsv"), "label"))
    out = {}
    for split, pairs in (("dev", [(r[3], r[1]) for r in dev]), ("test", test)):
      pairs = [(s, int(label)) for s, label in pairs if "_" not in s][:self.p.accept_zero_shot]
      out[split] = ([s for s, _ in pairs], np.array([label for _, label in pairs]))
    return out

  def unigram_log_probs(self, tokenizer):
    """[vocab] log-probabilities of the pretraining corpus's tokens (add-one)."""
    import sentencepiece as spm
    counts = np.ones(spm.SentencePieceProcessor(model_file=self.pipe.spm).get_piece_size())
    with open(os.path.join(self.pipe.data, "corpus.txt"), encoding="utf-8") as f:
      for line in f:
        if line.strip():
          np.add.at(counts, list(tokenizer.encode(line)), 1)
    return np.log(counts / counts.sum())

  def acceptability(self, log=print):
    """{objective: {step: acceptability_judgement}} for each objective's random (0) and final
    weights: each sentence's pseudo-log-likelihood (cloze.sentence_scores), no fine-tuning."""
    from data_utils import tokenization
    from pretraining import cloze, objectives
    data = self.acceptability_sentences()
    if not data:
      return {}
    tokenizer = tokenization.Tokenizer(self.pipe.spm, lower=False)
    unigram = self.unigram_log_probs(tokenizer)
    for split, (sentences, labels) in data.items():   # a word longer than a row: left out
      keep = [cloze.scorable(tokenizer, s, self.p.seq_len) for s in sentences]
      data[split] = ([s for s, k in zip(sentences, keep) if k], labels[np.array(keep, bool)])
    out = {}
    for name in [o for o in pipeline_lib.OBJECTIVES if o in self.p.arms]:
      task = self.task(name)
      for step in (0, self.p.pretrain_steps):
        model = self.model(task, step)
        splits = {}
        for split, (sentences, labels) in data.items():
          pll, ids = cloze.sentence_scores(objectives.get(name), task, model, tokenizer,
                                           sentences, self.p.seq_len)
          n = np.array([len(t) for t in ids], np.float64)
          uni = np.array([unigram[t].sum() for t in ids])
          splits[split] = {"mean": pll / n, "slor": (pll - uni) / n, "label": labels}
        result = acceptability_judgement(splits["dev"], splits["test"])
        out.setdefault(name, {})[step] = result
        log(f"acceptability zero-shot {name} step {step}: {result['variant']}, dev MCC "
            f"{result['dev']['mcc']:.3f}, test MCC {result['test']['mcc']:.3f}")
    return out

  # ---- everything ---------------------------------------------------------------------------
  def run(self, log=print):
    p = self.p
    steps = list(range(p.pretrain_save_every, p.pretrain_steps + 1, p.pretrain_save_every))
    out = {"checkpoints": steps, "heldout": {}, "probe": {}, "mpnet_modes": {}, "cloze": {}}
    rows = {}
    for arm in p.arms:
      objective = pipeline_lib.ARM_OBJECTIVE.get(arm, arm)
      model_type = pipeline_lib.OBJECTIVE_MODEL[objective][0]
      if model_type not in rows:
        rows[model_type] = self.rows(model_type)
      (split_rows, n_class) = rows[model_type]
      task = self.task(objective)
      out["probe"][arm] = {}
      for step in ([0] if arm.startswith("none") else steps):
        model = self.model(task, step)
        feats = {k: self.features(model, v, model_type) for k, v in split_rows.items()}
        labels = {k: v["label"] for k, v in split_rows.items()}
        probe = linear_probe(feats, labels, n_class)
        # what the fine-tuned classifier reads: the summary token's state alone
        probe["summary"] = linear_probe(summary_part(feats), labels, n_class)
        out["probe"][arm][step] = probe
        line = (f"probe {arm} step {step}: dev {probe['dev']:.3f} test {probe['test']:.3f} "
                f"(l2 {probe['l2']:g}); summary token alone: dev "
                f"{probe['summary']['dev']:.3f} test {probe['summary']['test']:.3f}")
        if not arm.startswith("none"):
          loss = self.heldout_loss(task, model)
          out["heldout"].setdefault(arm, {})[step] = loss
          line += f"; held-out {arm} loss {loss:.3f}"
        log(line)
    out["cloze"] = self.cloze(log)
    out["pairs"] = self.pairs(log)
    out["accept_zero_shot"] = self.acceptability(log)
    if "mpnet" in p.arms:
      for name, mode, permute in (("mpnet", "mpnet", True), ("plm", "plm", True),
                                  ("mlm", "mlm", True), ("mpnet, position order", "mpnet",
                                                         False)):
        task = self.task("mpnet", mode, permute)
        out["mpnet_modes"][name] = self.heldout_loss(task, self.model(task, p.pretrain_steps))
        log(f"MPNet weights, {name} mode: held-out loss {out['mpnet_modes'][name]:.3f}")
    if os.path.isdir(os.path.join(self.pipe.pretrain_dir("mpnet-mlm"), "ckpt")):
      task = self.task("mpnet", "mlm")
      loss = self.heldout_loss(task, self.model(task, p.pretrain_steps, run="mpnet-mlm"))
      out["mpnet_mlm"] = loss
      log(f"MPNet's architecture pretrained on mlm: held-out loss {loss:.3f}")
    return out


def main():
  import argparse
  from reproduction.presets import PRESETS
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--output_dir", required=True, help="The quickstart's output directory.")
  parser.add_argument("--preset", default="small", choices=sorted(PRESETS),
                      help="The preset that run used.")
  parser.add_argument("--seed", type=int, default=0, help="The seed that run used.")
  args = parser.parse_args()
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  pipe = pipeline_lib.Pipeline(PRESETS[args.preset], args.output_dir, seed=args.seed)
  try:
    result = Diagnostics(pipe).run(log=lambda m: print(m, flush=True))
  except (FileNotFoundError, ValueError) as e:   # a missing or corrupted record / checkpoint file
    sys.exit(f"reproduction/diagnostics.py: {e}")
  print(json.dumps({"diagnostics": result}))


if __name__ == "__main__":
  from data_utils import cli_app
  cli_app.skip_keras_optional_imports()     # before main imports TensorFlow
  main()
