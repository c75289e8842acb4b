"""The quickstart reproduction: resumable stages, each through the entry script a user would call.

Stages, in order (Pipeline.stages):
  data                    derive the corpus and the three task sets from the stdlib docstrings
  tokenizer               data_utils/train_tokenizer.py (SentencePiece, XLNet symbols)
  records                 data_utils/create_pretrain_data.py (one record set for all objectives;
                          the corpus `passes` times, fresh targets and orders in each pass)
  records-valid           the same from the dev documents (held-out loss)
  configs                 xlnet_config.json and an MPNet config.json of comparable size
  pretrain-ARM            run_pretrain.py --objective=ARM, for the arms plm, mlm, mpnet
  pretrain-mpnet-mlm      MPNet's architecture on the mlm objective (with mpnet and mlm arms;
                          diagnostics only: separates architecture from objective)
  diagnostics             python -m reproduction.diagnostics, once the pretraining runs are
                          done (beside the fine-tuning runs): held-out loss per checkpoint,
                          linear probes per arm and checkpoint, MPNet's loss per mode, the
                          zero-shot cloze, minimal pairs and acceptability
  then for each arm (none = XLNet without pretraining, none-mpnet = MPNet without pretraining,
  plm, mlm, mpnet):
  TASK-ARM-lrLR           fine-tuning at each learning rate of the preset's grid, seed 0,
                          evaluated on the DEV split (only when the grid has several values)
  TASK-ARM-sSEED          fine-tuning at the learning rate that scored best on dev, evaluated
                          once on the TEST split; TASK = classify (run_classifier.py
                          --task_name=dbpedia / cola), squad (run_squad.py), race
                          (run_race.py)
  report                  report.md + plots (always rewritten)

The pretraining, diagnostics and fine-tuning stages may run `jobs` at a time (quickstart --jobs;
each after the stages it reads: a fine-tuning run after its arm's pretraining, a test run after
its dev runs, the diagnostics after every pretraining run); the others are barriers.
reproduction/scheduler.py runs them: a script stage's stdout
and stderr go to OUTPUT_DIR/logs/STAGE.log; when it succeeds, its parsed results go to
OUTPUT_DIR/stages/STAGE.json (written atomically), and a rerun skips every stage that has that
file. A failing stage stops the run with StageError: one line naming the stage and its log.
"""

import json
import os
import re
import sys

from reproduction import tasks
from reproduction.scheduler import STEP_LINE, Stage, StageError, format_duration, run_stages

__all__ = ["Pipeline", "Stage", "StageError", "format_duration"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARMS = ("none", "none-mpnet", "plm", "mlm", "mpnet")
BASELINE = {"plm": "none", "mlm": "none", "mpnet": "none-mpnet"}   # same model, random weights
OBJECTIVES = ("plm", "mlm", "mpnet")
# What each objective trains: its model family (config file models/{family}_config.json) and
# whether it carries Transformer-XL memory. The objectives' registry (pretraining/objectives.py)
# says the same (tests/reproduction/test_quickstart.py checks); this process imports no TensorFlow.
OBJECTIVE_MODEL = {"plm": ("xlnet", True), "mlm": ("xlnet", True), "mpnet": ("mpnet", False)}
ARM_OBJECTIVE = {"none": "plm", "none-mpnet": "mpnet"}   # random-weight arms: whose model
# Per family: the flag choosing it in the fine-tuning scripts (none: their default), and what a
# pretraining run's export/ holds for fine-tuning (config file, init path; "" = the directory).
FAMILY_RUNS = {"xlnet": ([], "xlnet_config.json", "xlnet_model.ckpt"),
               "mpnet": (["--model_type=mpnet"], "config.json", "")}
TASKS = ("classify", "squad", "race")   # the tasks of the orderings (acceptability: language_report)
MAIN_METRIC = {"classify": "accuracy", "accept": "mcc", "squad": "f1", "race": "accuracy"}


# The release script each stage stands for (training/recipes.py's names).
TASK_SCRIPT = {"classify": "classifier", "accept": "classifier", "squad": "squad",
               "race": "race"}


def release_epsilon(script):
  """Adam's epsilon of the XLNet release's script (training/recipes.py, "release"): 1e-8 in
  train.py and run_classifier.py, 1e-6 in run_squad.py and run_race.py. It matters here: a
  random-weights MPNet's gradients are small enough that 1e-6 stalls its classifier."""
  from training import recipes
  return f"{recipes.defaults('xlnet', script)['adam_epsilon']:g}"


# ---- parsing of the scripts' output ---------------------------------------------------------
def training_curve(text):
  """[(step, loss)] from the trainer's log lines ("step N/T loss X ...")."""
  curve = []
  for line in text.splitlines():
    m = STEP_LINE.match(line.strip())
    if m:
      curve.append((int(m.group(1)), float(m.group(3))))
  return curve


def last_json(text, key):
  """The last line of `text` that is a JSON object holding `key`."""
  for line in reversed(text.splitlines()):
    line = line.strip()
    if line.startswith("{") and line.endswith("}"):
      try:
        data = json.loads(line)
      except json.JSONDecodeError:
        continue
      if key in data:
        return data
  return None


def parse_records(text):
  m = re.search(r"([\d,]+) records, ([\d,]+) tokens", text)
  return {"records": int(m.group(1).replace(",", "")),
          "tokens": int(m.group(2).replace(",", ""))} if m else {}


def optimizer_used(text):
  """The update rule and its settings a training log names (the trainer's "optimizer: RULE |
  SCHEDULE" line), or None."""
  match = re.search(r"^optimizer: (.*?)(?: \| .*)?$", text, re.M)
  return match.group(1) if match else None


def parse_pretrain(text):
  curve = training_curve(text)
  rates = [float(m.group(1).replace(",", "")) for m in re.finditer(r"([\d,]+) tokens/s", text)]
  return {"curve": curve, "final_loss": curve[-1][1] if curve else None,
          "tokens_per_s": sorted(rates)[len(rates) // 2] if rates else None,
          "optimizer": optimizer_used(text)}


def _parse_finetune(key):
  def parse(text):
    return {"curve": training_curve(text), "metrics": last_json(text, key),
            "optimizer": optimizer_used(text)}
  return parse


def parse_diagnostics(text):
  return (last_json(text, "diagnostics") or {}).get("diagnostics", {})


def lr_name(lr):
  return f"{lr:g}"


def chosen_lr(results, task, arm, grid):
  """The grid's learning rate with the best dev score (ties: the smaller rate); a one-value
  grid needs no dev run. Returns (lr, {lr name: dev score})."""
  if len(grid) == 1:
    return grid[0], {}
  scores = {}
  for lr in grid:
    metrics = (results.get(f"{task}-{arm}-lr{lr_name(lr)}") or {}).get("metrics") or {}
    if MAIN_METRIC[task] in metrics:
      scores[lr_name(lr)] = metrics[MAIN_METRIC[task]]
  if not scores:
    raise StageError(f"no dev result for {task} {arm}: rerun the quickstart")
  best = max(grid, key=lambda lr: (scores.get(lr_name(lr), float("-inf")), -lr))
  return best, scores


# ---- parameter counts (formulas; the XLNet one equals the release's 116,750,336 for Base) ------
def xlnet_params(p):
  d_head = p.d_model // p.n_head
  per_layer = (5 * p.d_model * p.n_head * d_head + 2 * p.d_model * p.d_inner + p.d_inner
               + p.d_model + 4 * p.d_model)
  return (p.vocab_size * p.d_model + p.d_model + 5 * p.n_layer * p.n_head * d_head
          + p.n_layer * per_layer + p.vocab_size)


def mpnet_params(p, max_positions, buckets=32):
  d = p.d_model
  per_layer = 4 * (d * d + d) + 2 * d + 2 * d * p.d_inner + p.d_inner + d + 2 * d
  head = d * d + d + 2 * d + p.vocab_size        # LM head: dense, LayerNorm, bias (tied)
  return p.vocab_size * d + max_positions * d + 2 * d + buckets * p.n_head + (
      p.n_layer * per_layer) + head


class Pipeline:
  """Builds the stage list for a preset and runs it (resuming), printing progress and ETA."""

  def __init__(self, preset, output_dir, seed=0, log=None, python=sys.executable, jobs=1,
               warm=False):
    self.p, self.seed, self.python, self.jobs, self.warm = preset, seed, python, jobs, warm
    self.out = os.path.abspath(output_dir)
    self.log = log or (lambda stage, message: print(f"[{stage}] {message}", flush=True))
    self.data = os.path.join(self.out, "data")
    self.spm = os.path.join(self.out, "tokenizer", "spiece.model")
    self.records = os.path.join(self.out, "records")
    self.models = os.path.join(self.out, "models")
    # MPNet's absolute positions start after the pad id (5): room for the longest sequence
    # of pretraining and fine-tuning (fine-tuning rows are longer than pretraining ones here).
    self.mpnet_max_positions = max(preset.seq_len, preset.cls_seq_len, preset.qa_seq_len) + 8

  # ---- paths ----------------------------------------------------------------------------
  def path(self, *parts):
    return os.path.join(self.out, *parts)

  def pretrain_dir(self, objective):
    return self.path("pretrain", objective)

  def finetune_dir(self, task, arm, seed):
    return self.path("finetune", task, arm, f"seed{seed}")

  def stage_file(self, name):
    return self.path("stages", f"{name}.json")

  def log_file(self, name):
    return self.path("logs", f"{name}.log")

  # ---- the stages -----------------------------------------------------------------------
  def stages(self):
    p = self.p
    out = [
        Stage("data", "derive the pretraining corpus and the three task sets", 15,
              fn=self._make_data),
        Stage("tokenizer", f"SentencePiece, {p.vocab_size} pieces", 10, argv=[
            "data_utils/train_tokenizer.py", f"--input_glob={self.data}/corpus.txt",
            f"--model_prefix={self.spm[:-len('.model')]}", f"--vocab_size={p.vocab_size}",
            f"--seed={self.seed}"], parse=lambda text: {}),
        Stage("records", f"pretraining records, seq_len {p.seq_len}, {p.num_predict} targets",
              10, argv=[
                  "data_utils/create_pretrain_data.py", f"--input_glob={self.data}/corpus.txt",
                  f"--sp_model={self.spm}", f"--output_dir={self.records}",
                  f"--seq_len={p.seq_len}", f"--reuse_len={p.reuse_len}",
                  f"--num_lanes={p.batch}", f"--num_predict={p.num_predict}", "--nobi_data",
                  f"--seed={self.seed}"], parse=parse_records),
        Stage("records-valid", "held-out records from the dev documents", 5, argv=[
            "data_utils/create_pretrain_data.py", f"--input_glob={self.data}/corpus-valid.txt",
            f"--sp_model={self.spm}", f"--output_dir={self.records}", "--split=valid",
            f"--seq_len={p.seq_len}", f"--reuse_len={p.reuse_len}",
            f"--num_lanes={p.batch}", f"--num_predict={p.num_predict}", "--nobi_data",
            f"--seed={self.seed}"], parse=parse_records),
        Stage("configs", "model configs of comparable size", 1, fn=self._make_configs),
    ]
    # pretraining, then fine-tuning: script stages that may share the machine (jobs), each
    # after the runs it reads
    for arm in p.arms:
      if arm in OBJECTIVES:
        out.append(self._pretrain_stage(arm))
      if arm == "mpnet" and "mlm" in p.arms:   # same objective as mlm, MPNet's architecture
        out.append(self._pretrain_stage("mpnet", mode="mlm"))
    # the diagnostics read the pretraining runs only: they share the machine with the
    # fine-tuning runs, first in line once the last pretraining run ends
    out.append(Stage("diagnostics", "held-out losses, probes, zero-shot measures, MPNet's modes",
                     p.overhead_s * 3 + 4 * p.pretrain_steps * p.pretrain_step_s,
                     argv=["-m", "reproduction.diagnostics", f"--output_dir={self.out}",
                           f"--preset={p.name}", f"--seed={self.seed}"],
                     parse=parse_diagnostics, parallel=True,
                     after=tuple(s.name for s in out if s.name.startswith("pretrain-"))))
    for arm in p.arms:
      for task, arms in (("classify", p.arms), ("accept", p.arms if p.accept_train else ()),
                         ("squad", p.squad_arms), ("race", p.race_arms)):
        if arm not in arms:
          continue
        grid, seeds = self.grid_and_seeds(task)
        if len(grid) > 1:
          out += [self._finetune_stage(task, arm, 0, lr=lr) for lr in grid]
        out += [self._finetune_stage(task, arm, s) for s in seeds]
    return out

  def _pretrain_stage(self, objective, mode=None):
    """run_pretrain.py for one objective; mode: MPNet's --mpnet_mode when not "mpnet" (the
    run is then named objective-mode and trains no fine-tuning arm)."""
    p = self.p
    name = f"{objective}-{mode}" if mode else objective
    family, memory = OBJECTIVE_MODEL[objective]
    config = os.path.join(self.models, f"{family}_config.json")
    argv = ["run_pretrain.py", f"--objective={objective}", f"--record_dir={self.records}",
            f"--model_config_path={config}", f"--model_dir={self.pretrain_dir(name)}",
            f"--sp_model={self.spm}",   # the export carries its tokenizer (inference, fine-tuning)
            # the held-out loss at every checkpoint (log, TensorBoard, best/): the dev documents'
            # records ("valid"), a few batches (the diagnostics stage measures it in full)
            f"--eval_record_dir={self.records}", "--eval_batches=20",
            f"--seq_len={p.seq_len}", f"--reuse_len={p.reuse_len}", f"--bsz_per_host={p.batch}",
            f"--num_predict={p.num_predict}", "--nobi_data",
            f"--mem_len={p.mem_len if memory else 0}",
            f"--train_steps={p.pretrain_steps}", f"--learning_rate={p.pretrain_lr}",
            f"--warmup_steps={p.warmup}", f"--save_every={p.pretrain_save_every}",
            f"--steps_per_loop={p.steps_per_loop}", f"--dropout={p.dropout}",
            f"--dropatt={p.dropout}", f"--seed={self.seed}", *p.optimizer_flags,
            f"--adam_epsilon={release_epsilon('pretrain')}"] + (
                [f"--mpnet_mode={mode}"] if mode else [])
    return Stage(f"pretrain-{name}", f"{p.pretrain_steps} steps of {name}",
                 p.overhead_s + p.pretrain_steps * p.pretrain_step_s, argv=argv,
                 parse=parse_pretrain, parallel=True)

  def _model_flags(self, arm):
    """Flags that pick the model and its initialisation for a fine-tuning arm."""
    family = OBJECTIVE_MODEL[ARM_OBJECTIVE.get(arm, arm)][0]
    family_flags, config, init = FAMILY_RUNS[family]
    if arm in ARM_OBJECTIVE:           # random weights: the configs stage's file
      return family_flags + [f"--model_config_path={self.models}/{family}_config.json"]
    export = os.path.join(self.pretrain_dir(arm), "export")
    return family_flags + [f"--model_config_path={export}/{config}",
                           f"--init_checkpoint={os.path.join(export, init) if init else export}"]

  def _finetune_flags(self, task, arm, seed, steps, lr, model_dir=None):
    p = self.p
    # One evaluation, at the end (save_every = steps): no checkpoint is picked on the
    # evaluation split.
    model_dir = model_dir or self.finetune_dir(task, arm, seed)
    return ([f"--sp_model={self.spm}", f"--model_dir={model_dir}",
             f"--train_steps={steps}", f"--warmup_steps={max(1, steps // 10)}",
             f"--learning_rate={lr}", f"--save_every={steps}",
             f"--steps_per_loop={min(p.steps_per_loop, steps)}", f"--dropout={p.dropout}",
             f"--dropatt={p.dropout}", f"--seed={seed}", *p.optimizer_flags,
             f"--adam_epsilon={release_epsilon(TASK_SCRIPT[task])}"]
            + self._model_flags(arm))

  def _task_flags(self, task, split):
    """The script and its task flags; split "dev" (learning-rate choice) or "test"."""
    p = self.p
    if task == "classify":
      return ["run_classifier.py", "--task_name=dbpedia", f"--data_dir={self.data}/classify",
              f"--eval_split={split}", f"--max_seq_length={p.cls_seq_len}",
              f"--train_batch_size={p.cls_batch}", "--do_train", "--do_eval"], p.cls_steps
    if task == "accept":    # the test split is unlabelled (GLUE's): CoLA.tsv, scored here
      return ["run_classifier.py", "--task_name=cola", f"--data_dir={self.data}/CoLA",
              f"--eval_split={split}", f"--max_seq_length={p.cls_seq_len}",
              f"--train_batch_size={p.cls_batch}", "--do_train",
              "--do_eval" if split == "dev" else "--do_predict"], p.accept_steps
    if task == "squad":
      return ["run_squad.py", "--do_train", "--do_predict",
              f"--train_file={self.data}/squad/train-v2.0.json",
              f"--predict_file={self.data}/squad/{split}-v2.0.json",
              f"--max_seq_length={p.qa_seq_len}", f"--doc_stride={p.qa_seq_len // 2 - 4}",
              f"--max_query_length={p.qa_seq_len // 2}", f"--train_batch_size={p.qa_batch}",
              "--lr_layer_decay_rate=1.0"], p.qa_steps
    return ["run_race.py", f"--data_dir={self.data}/RACE", f"--eval_split={split}",
            f"--max_seq_length={p.qa_seq_len}", f"--max_qa_length={p.qa_seq_len // 2}",
            f"--train_batch_size={max(1, p.qa_batch // 4)}", "--do_train", "--do_eval"], p.qa_steps

  def grid_and_seeds(self, task):
    """(learning-rate grid chosen from on dev, seeds of the test runs) of a fine-tuning task."""
    p = self.p
    return {"classify": (p.cls_lrs, p.seeds),
            "accept": (p.accept_grid, p.accept_test_seeds),
            "squad": (p.qa_lrs, p.qa_seeds), "race": (p.qa_lrs, p.qa_seeds)}[task]

  def _finetune_stage(self, task, arm, seed, lr=None):
    """lr given: a dev run of the learning-rate grid; else a test run at the chosen rate."""
    p = self.p
    grid, _ = self.grid_and_seeds(task)
    split = "dev" if lr is not None else "test"
    argv, steps = self._task_flags(task, split)
    what = {"classify": "module classification", "accept": "acceptability (CoLA layout)",
            "squad": "SQuAD 2.0 format", "race": "RACE format"}[task]
    if lr is not None:
      name, what = f"{task}-{arm}-lr{lr_name(lr)}", f"{what}, {arm}, lr {lr:g} on dev"
      argv = argv + self._finetune_flags(task, arm, 0, steps, lr, model_dir=self.path(
          "finetune", task, arm, f"dev-lr{lr_name(lr)}"))
    else:
      name, what = f"{task}-{arm}-s{seed}", f"{what}, {arm}, seed {seed}, test"

      def argv(results, base=argv, steps=steps):
        lr, _ = chosen_lr(results, task, arm, grid)
        return base + self._finetune_flags(task, arm, seed, steps, lr)
    scale = p.qa_seq_len / p.cls_seq_len if task in ("squad", "race") else 1.0
    key = {"classify": "accuracy", "accept": "mcc", "squad": "exact", "race": "split"}[task]
    parse = _parse_finetune(key)
    if task == "accept" and lr is None:
      parse = self._parse_acceptability(self.finetune_dir(task, arm, seed))
    after = () if arm in ARM_OBJECTIVE else (f"pretrain-{arm}",)
    if lr is None and len(grid) > 1:
      after += tuple(f"{task}-{arm}-lr{lr_name(g)}" for g in grid)
    return Stage(name, what, p.overhead_s + steps * p.finetune_step_s * scale, argv=argv,
                 parse=parse, parallel=True, after=after)

  def _parse_acceptability(self, model_dir):
    """A test run's parse: its CoLA.tsv predictions scored against test-labels.tsv (read
    here, once), {"metrics": {"mcc", "accuracy", "n"}} like a dev run's."""
    def parse(text):
      out = _parse_finetune("mcc")(text)
      preds = tasks.read_tsv_column(os.path.join(model_dir, "CoLA.tsv"), "prediction")
      labels = tasks.read_tsv_column(os.path.join(self.data, "CoLA", "test-labels.tsv"),
                                     "label")
      out["metrics"] = tasks.acceptability_scores(labels, preds)
      return out
    return parse

  # ---- in-process stages ------------------------------------------------------------------
  def _make_data(self):
    p = self.p
    docs = tasks.load_documents()
    splits = tasks.split_documents(docs, self.seed)
    n_docs, n_bytes = tasks.write_pretrain_corpus(splits["train"],
                                                  os.path.join(self.data, "corpus.txt"),
                                                  passes=p.passes, seed=self.seed)
    tasks.write_pretrain_corpus(splits["dev"], os.path.join(self.data, "corpus-valid.txt"))
    classify = tasks.write_classification(splits, os.path.join(self.data, "classify"),
                                          self.seed, p.train_per_class, p.test_per_class)
    squad = tasks.write_squad(splits, os.path.join(self.data, "squad"), self.seed,
                              p.squad_train, p.squad_eval, p.context_chars)
    race = tasks.write_race(splits, os.path.join(self.data, "RACE"), self.seed, p.race_train,
                            p.race_eval, p.context_chars)
    accept = (tasks.write_acceptability(splits, os.path.join(self.data, "CoLA"), self.seed,
                                        p.accept_train, p.accept_eval) if p.accept_train
              else {})
    pairs = (tasks.write_minimal_pairs(splits, os.path.join(self.data, "pairs"), self.seed,
                                       p.pairs_eval) if p.pairs_eval else {})
    return {"documents": len(docs), "splits": {k: len(v) for k, v in splits.items()},
            "corpus": {"documents": n_docs, "bytes": n_bytes}, "classify": classify,
            "squad": squad, "race": race, "accept": accept, "pairs": pairs}

  def _make_configs(self):
    import sentencepiece as spm
    p = self.p
    sp = spm.SentencePieceProcessor(model_file=self.spm)
    vocab, pad = sp.get_piece_size(), sp.piece_to_id("<pad>")
    if vocab != p.vocab_size or pad != 5:
      raise ValueError(f"{self.spm}: {vocab} pieces, <pad> at {pad}; expected {p.vocab_size}, 5")
    xlnet = {"n_layer": p.n_layer, "d_model": p.d_model, "n_head": p.n_head,
             "d_head": p.d_model // p.n_head, "d_inner": p.d_inner, "ff_activation": "gelu",
             "untie_r": True, "n_token": vocab}
    mpnet = {"model_type": "mpnet", "vocab_size": vocab, "hidden_size": p.d_model,
             "num_hidden_layers": p.n_layer, "num_attention_heads": p.n_head,
             "intermediate_size": p.d_inner, "hidden_act": "gelu",
             "hidden_dropout_prob": p.dropout, "attention_probs_dropout_prob": p.dropout,
             "max_position_embeddings": self.mpnet_max_positions,
             "relative_attention_num_buckets": 32, "layer_norm_eps": 1e-5, "pad_token_id": pad}
    # layer_norm_eps: the MPNet release's (fairseq's LayerNorm default, microsoft/mpnet-base's
    # config.json); Hugging Face's MPNetConfig defaults to 1e-12
    for name, config in (("xlnet_config.json", xlnet), ("mpnet_config.json", mpnet)):
      tasks.atomic_write(os.path.join(self.models, name), json.dumps(config, indent=1) + "\n")
    return {"xlnet": xlnet, "mpnet": mpnet, "xlnet_params": xlnet_params(p),
            "mpnet_params": mpnet_params(p, self.mpnet_max_positions)}

  # ---- running ----------------------------------------------------------------------------
  def _check_run_file(self):
    """OUTPUT_DIR/run.json records the preset and seed; another preset there is an error."""
    run = {"preset": self.p.to_dict(), "seed": self.seed}
    path = self.path("run.json")
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        old = json.load(f)
      def strip(r):   # the ETA figures change no result
        eta_only = ("overhead_s", "pretrain_step_s", "finetune_step_s")
        return {**r, "preset": {k: v for k, v in r["preset"].items() if k not in eta_only}}
      if strip(json.loads(json.dumps(run))) != strip(old):
        raise StageError(f"{self.out} holds a run made with other settings (preset "
                         f"{old['preset']['name']} as defined then, seed {old['seed']}): pass "
                         "another --output_dir or delete that one")
    else:
      tasks.atomic_write(path, json.dumps(run, indent=1) + "\n")

  def run(self, finish=None):
    """Runs every stage not done yet (scheduler.run_stages: up to self.jobs script stages at
    once); then `finish(pipeline, results, times)` (the report). Returns (results by stage,
    seconds by stage)."""
    os.makedirs(self.out, exist_ok=True)
    self._check_run_file()
    results, times = run_stages(self.stages(), self.out, self.python, self.log, jobs=self.jobs,
                                warm=self.warm)
    if finish:
      finish(self, results, times)
    return results, times
