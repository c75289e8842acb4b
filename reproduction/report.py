"""The quickstart's report: Markdown + PNG plots, every sentence generated from the numbers.

write_report(pipeline, results, times) -> path of OUTPUT_DIR/report.md; also writes
OUTPUT_DIR/results.json (the aggregated numbers) and OUTPUT_DIR/plots/*.png.
"""

import collections
import json
import math
import os

from reproduction import diagnosis_report, language_report, papers, tasks
from reproduction.pipeline import ARMS, BASELINE, OBJECTIVES, format_duration

ARM_TITLES = {"none": "XLNet without pretraining (random init)",
              "none-mpnet": "MPNet without pretraining (random init)", "plm": "XLNet PLM",
              "mlm": "XLNet MLM (DAE + Transformer-XL)", "mpnet": "MPNet"}
PAPER_ORDER = (("plm", "mlm"), ("mpnet", "plm"), ("mpnet", "mlm"), ("plm", "none"),
               ("mlm", "none"), ("mpnet", "none-mpnet"))
# What compare() and the verdicts say when a side has one fine-tuning seed (the tiny preset).
NO_SPREAD = "one seed each: no spread to judge by"


stats = language_report.stats


def _fmt(s, scale=100.0, digits=1):
  if s is None:
    return "n/a"
  text = f"{s['mean'] * scale:.{digits}f}"
  if s["n"] > 1:
    text += f" ± {s['std'] * scale:.{digits}f}"
  return text


def compare(name_a, a, name_b, b, scale=100.0, unit=" points"):
  """One sentence: is a above b, by how much, and is it beyond the seed spread (the sum of the
  two standard deviations)? Returns (sentence, a - b, clear): clear is True beyond the spread,
  False within it, None when a side has one seed (no spread to judge by)."""
  diff = (a["mean"] - b["mean"]) * scale
  word = "above" if diff > 0 else "below" if diff < 0 else "equal to"
  sentence = f"{name_a} is {abs(diff):.1f}{unit} {word} {name_b}"
  if a["n"] > 1 and b["n"] > 1:
    spread = (a["std"] + b["std"]) * scale
    clear = abs(diff) > spread
    sentence += (f" ({'beyond' if clear else 'within'} the seed spread, sum of the standard "
                 f"deviations {spread:.1f})")
    return sentence, diff, clear
  return sentence + f" ({NO_SPREAD})", diff, None


def unigram_loss(pipeline):
  """Cross-entropy (nats per token) of the corpus under its own unigram distribution: what a
  model that ignores every context would score."""
  import sentencepiece as spm
  sp = spm.SentencePieceProcessor(model_file=pipeline.spm)
  with open(os.path.join(pipeline.data, "corpus.txt"), encoding="utf-8") as f:
    lines = [l for l in f.read().splitlines() if l.strip()]
  counts = collections.Counter(i for ids in sp.encode(lines) for i in ids)
  total = sum(counts.values())
  return -sum(c / total * math.log(c / total) for c in counts.values())


def aggregate(pipeline, results):
  p = pipeline.p
  out = {"pretrain": {}, "classify": {}, "squad": {}, "race": {}}
  for obj in OBJECTIVES:
    r = results.get(f"pretrain-{obj}")
    if r:
      out["pretrain"][obj] = r
  for arm in ARMS:
    cls = [results.get(f"classify-{arm}-s{s}") for s in p.seeds]
    cls = [r["metrics"]["accuracy"] for r in cls if r and r.get("metrics")]
    out["classify"][arm] = stats(cls)
    squad = [results.get(f"squad-{arm}-s{s}") for s in p.qa_seeds]
    squad = [r["metrics"] for r in squad if r and r.get("metrics")]
    if squad:
      out["squad"][arm] = {k: stats([m[k] / 100.0 for m in squad])
                           for k in ("exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1")
                           if k in squad[0]}
    race = [results.get(f"race-{arm}-s{s}") for s in p.qa_seeds]
    race = [r["metrics"] for r in race if r and r.get("metrics")]
    if race:
      out["race"][arm] = {k: stats([m[k] for m in race]) for k in race[0] if k != "split"}
  out["accept"] = language_report.aggregate(p, results)
  out["sweep"] = diagnosis_report.sweeps(pipeline, results)
  out["diagnostics"] = dict(results.get("diagnostics") or {})
  hf_check = pipeline.path("mpnet_hf_curve.json")     # tools/mpnet_hf_curve.py, if it ran
  if os.path.exists(hf_check):
    with open(hf_check, encoding="utf-8") as f:
      out["diagnostics"]["mpnet_hf"] = diagnosis_report.hf_check_summary(json.load(f))
  return out


# ---- plots ------------------------------------------------------------------------------------
def _plots(pipeline, agg, unigram, data):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  plot_dir = pipeline.path("plots")
  os.makedirs(plot_dir, exist_ok=True)
  paths = {}

  def save(fig, name):
    path = os.path.join(plot_dir, name)
    tmp = f"{path}.tmp-{os.getpid()}.png"
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)
    os.replace(tmp, path)
    paths[name] = path

  fig, ax = plt.subplots(figsize=(6.4, 4))
  for obj, r in agg["pretrain"].items():
    if r["curve"]:
      steps, losses = zip(*r["curve"])
      ax.plot(steps, losses, marker=".", label=ARM_TITLES[obj])
  if unigram:
    ax.axhline(unigram, color="gray", linestyle="--", label=f"unigram (context-free) {unigram:.2f}")
  ax.set_xlabel("pretraining step")
  ax.set_ylabel("training loss (nats per predicted token)")
  ax.set_title("Pretraining loss, same records and budget")
  ax.legend(fontsize=8)
  save(fig, "pretrain_loss.png")

  arms = [a for a in ARMS if agg["classify"].get(a)]
  if arms:
    fig, ax = plt.subplots(figsize=(6.4, 4))
    means = [agg["classify"][a]["mean"] * 100 for a in arms]
    stds = [agg["classify"][a]["std"] * 100 for a in arms]
    ax.bar(range(len(arms)), means, yerr=stds, capsize=6, color="#7aa6d6")
    for k, a in enumerate(arms):
      ax.scatter([k] * agg["classify"][a]["n"], [v * 100 for v in agg["classify"][a]["values"]],
                 color="black", s=12, zorder=3)
    n_labels = len(data["classify"]["labels"])
    ax.axhline(100 / n_labels, color="gray", linestyle="--", label=f"chance (1/{n_labels})")
    ax.set_xticks(range(len(arms)), [a.replace("none", "none\n(scratch)").replace("-", "\n")
                                     for a in arms], fontsize=8)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Module classification: mean ± std over fine-tuning seeds")
    ax.legend(fontsize=8)
    save(fig, "classification.png")

  qa_arms = [a for a in ARMS if a in agg["squad"] or a in agg["race"]]
  if qa_arms:
    fig, ax = plt.subplots(figsize=(6.4, 4))
    width = 0.38
    for j, (key, label) in enumerate((("squad", "SQuAD 2.0 format: F1"),
                                      ("race", "RACE format: accuracy"))):
      vals = []
      for a in qa_arms:
        r = agg[key].get(a)
        s = r and (r.get("f1") if key == "squad" else r.get("accuracy"))
        vals.append(s["mean"] * 100 if s else 0.0)
      ax.bar([k + (j - 0.5) * width for k in range(len(qa_arms))], vals, width, label=label)
    ax.axhline(25, color="gray", linestyle=":", label="RACE chance (25%)")
    ev = data["squad"]["test-v2.0.json"]
    ax.axhline(100 * ev["impossible"] / ev["questions"], color="C0", linestyle="--",
               label="SQuAD F1 of answering \"no answer\" everywhere")
    ax.set_xticks(range(len(qa_arms)), qa_arms)
    ax.set_ylabel("%")
    ax.set_title("SQuAD / RACE-format sets (small, generated)")
    ax.legend(fontsize=8)
    save(fig, "qa.png")

  curves = (agg["diagnostics"].get("mpnet_hf") or {}).get("curves") or {}
  if {"replay", "hf"} <= set(curves):    # tools/mpnet_hf_curve.py ran on this output
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 1]})
    ours = dict(map(tuple, curves["replay"]))
    for key, label in (("replay", "ours"), ("hf", "Hugging Face MPNetForMaskedLM")):
      top.plot(*zip(*curves[key]), label=label)
    for key, label, color in (("hf", "HF - ours", "C1"),
                              ("null", "ours, other dropout masks - ours", "C2")):
      if key in curves:
        bottom.plot(*zip(*[(s, v - ours[s]) for s, v in curves[key] if s in ours]),
                    label=label, color=color)
    bottom.axhline(0, color="gray", linewidth=0.8)
    top.set_ylabel("training loss (nats)")
    bottom.set_ylabel("difference")
    bottom.set_xlabel("step (mean of the 50 steps up to it)")
    top.set_title("MPNet's architecture on mlm: the same batches in two implementations")
    top.legend(fontsize=8)
    bottom.legend(fontsize=8)
    save(fig, "mpnet_hf_curve.png")
  return paths


# ---- the Markdown ----------------------------------------------------------------------------
def _direction(diff):
  return "same direction" if diff > 0 else "opposite direction" if diff < 0 else "no difference"


def _ranking(values):
  """'a (x) > b (y) = c (y)' from {name: value}, highest first."""
  items = sorted(values.items(), key=lambda kv: -kv[1])
  text = f"{items[0][0]} ({items[0][1]:.1f})"
  for (_, prev), (name, value) in zip(items, items[1:]):
    text += f" {'=' if round(value, 1) == round(prev, 1) else '>'} {name} ({value:.1f})"
  return text


def _classification_text(agg, data):
  cls = agg["classify"]
  arms = [a for a in ARMS if cls.get(a)]
  if not arms:
    return ["No classification run finished."]
  n_labels = len(data["classify"]["labels"])
  test_counts = data["classify"]["counts"]["test"]
  majority = max(test_counts.values()) / sum(test_counts.values())
  top = max(cls[a]["mean"] for a in arms)
  best = [a for a in arms if cls[a]["mean"] == top]
  lines = [f"Highest mean accuracy: **{' and '.join(best)}** ({_fmt(cls[best[0]])}% over "
           f"{cls[best[0]]['n']} seed{'s' if cls[best[0]]['n'] > 1 else ''}); chance is "
           f"{100 / n_labels:.1f}% and the majority class {100 * majority:.1f}% of the test set."]
  lines.append("Ranking by mean accuracy: "
               + _ranking({a: cls[a]["mean"] * 100 for a in arms}) + ".")
  for a in arms:
    base = BASELINE.get(a)
    if base in arms:
      sentence, _, _ = compare(a, cls[a], f"the same model without pretraining ({base})",
                               cls[base])
      lines.append(sentence + ".")
  agree, total = 0, 0
  for hi, lo in PAPER_ORDER:
    if cls.get(hi) and cls.get(lo):
      total += 1
      _, diff, clear = compare(hi, cls[hi], lo, cls[lo])
      agree += diff > 0
      spread = (f" ({NO_SPREAD})" if clear is None else ", beyond the seed spread" if clear
                else ", within the seed spread")
      lines.append(f"Expected {hi} > {lo}; here {hi} − {lo} = {diff:+.1f} points: "
                   f"{_direction(diff)}{spread}.")
  if total:
    lines.append(f"{agree} of {total} orderings that the papers' ablations (and the premise of "
                 "pretraining) predict hold in this run on this task.")
  return lines


def _qa_text(agg, data, p):
  lines = []
  f1 = {a: r["f1"]["mean"] * 100 for a, r in agg["squad"].items() if r.get("f1")}
  if f1:
    ev = data["squad"]["test-v2.0.json"]
    no_answer = 100 * ev["impossible"] / ev["questions"]
    above = [a for a in f1 if f1[a] > no_answer]
    lines.append(f"SQuAD-format F1: {_ranking(f1)}; answering \"no answer\" everywhere scores "
                 f"{no_answer:.1f}, which {len(above)} of {len(f1)} arms exceed"
                 f"{' (' + ', '.join(above) + ')' if above else ''}.")
    best = {a: r["best_f1"]["mean"] * 100 for a, r in agg["squad"].items() if r.get("best_f1")}
    if best:
      lines.append("F1 scores the predictions file, which holds a span for every question (the "
                   "release's format: no-answer is a threshold on null_odds.json). At the "
                   "threshold best on the test set itself (best_f1, an upper bound): "
                   + _ranking(best) + f"; {sum(v > no_answer + 1e-9 for v in best.values())} "
                   f"of {len(best)} arms beat the all-no-answer {no_answer:.1f}.")
  acc = {a: r["accuracy"]["mean"] * 100 for a, r in agg["race"].items() if r.get("accuracy")}
  if acc:
    above = [a for a in acc if acc[a] > 25.0]
    band = 100 * diagnosis_report.noise(0.25, sum(data["race"]["test"].values()))
    lines.append(f"RACE-format accuracy: {_ranking(acc)}; chance is 25%, which {len(above)} of "
                 f"{len(acc)} arms exceed{' (' + ', '.join(above) + ')' if above else ''}; "
                 f"two standard errors of this test set are ±{band:.1f} points.")
  n = len(p.qa_seeds)
  if lines:
    sizes = (data["squad"]["test-v2.0.json"]["questions"], sum(data["race"]["test"].values()))
    lines.append(f"{'One seed per arm' if n == 1 else f'{n} seeds per arm'} and evaluation sets "
                 f"of {sizes[0]} (SQuAD) and {sizes[1]} (RACE) questions: differences of a few "
                 "points are within noise. "
                 "These sets mainly show that the scripts train, predict and score in the "
                 "official formats.")
  return lines


def _pretrain_text(agg, unigram, p):
  lines = []
  for obj, r in agg["pretrain"].items():
    if not r["curve"]:
      continue
    first, last = r["curve"][0][1], r["curve"][-1][1]
    tail = [l for _, l in r["curve"][-3:]]
    end = sum(tail) / len(tail)
    where = ""
    if unigram:
      where = (f"; {unigram - end:.2f} nats below the unigram loss ({unigram:.2f})"
               if end < unigram else
               f"; still at or above the unigram loss ({unigram:.2f}): the model has not yet "
               "learnt to use context beyond token frequencies")
    lines.append(f"- {obj}: loss {first:.2f} at the first log, {end:.2f} (mean of the last "
                 f"{len(tail)} logs) after {r['curve'][-1][0]} steps{where}.")
  lines.append("The three losses are not directly comparable: each is the cross-entropy of a "
               "different prediction (PLM: a target given the tokens before it in a random "
               "order; MLM: a corrupted token given everything else; MPNet: PLM plus the "
               "positions of all predicted tokens).")
  return lines


def _summary(agg, unigram, data):
  """The findings in a few bullets, each computed from the numbers below it."""
  lines = []
  ends = {o: sum(l for _, l in r["curve"][-3:]) / len(r["curve"][-3:])
          for o, r in agg["pretrain"].items() if r["curve"]}
  near, above = [], []     # ended less than 0.2 nats below the unigram loss; at or above it
  if unigram and ends:
    parts = []
    for o, end in ends.items():
      below = unigram - end
      if below > 0:
        parts.append(f"{o} ended {below:.2f} nats below the unigram loss")
        if below < 0.2:
          near.append(o)
      else:
        parts.append(f"{o} ended {-below:.2f} nats above the unigram loss" if below < 0 else
                     f"{o} ended at the unigram loss")
        above.append(o)
    lines.append("Pretraining: " + ", ".join(parts)
                 + (f"; {' and '.join(near)} stayed within 0.2 nats below it (barely past "
                    "predicting token frequencies)" if near else "")
                 + (f"; {' and '.join(above)} did not get past it (not yet using context "
                    "beyond token frequencies)" if above else "") + ".")
  cls = {a: s for a, s in agg["classify"].items() if s}
  if cls and data:
    chance = 100 / len(data["classify"]["labels"])
    best = max(cls, key=lambda a: cls[a]["mean"])
    lines.append(f"Module classification: best {best} at {_fmt(cls[best])}% (chance "
                 f"{chance:.1f}%).")
    verdicts = {}
    for a in cls:
      base = BASELINE.get(a)
      if base in cls:
        _, diff, clear = compare(a, cls[a], base, cls[base])
        word = "above" if diff > 0 else "below" if diff < 0 else "equal to"
        if clear is None:
          verdicts[a] = f"{a} {word} {base} ({diff:+.1f} points; {NO_SPREAD})"
        else:
          verdicts[a] = (f"{a} {word} {base} beyond the seed spread" if clear
                         else f"{a} within the seed spread of {base}")
          verdicts[a] += f" ({diff:+.1f} points)"
    if verdicts:
      lines.append("Pretrained against the same model without pretraining: "
                   + "; ".join(verdicts.values()) + ".")
    pairs = [(hi, lo) for hi, lo in PAPER_ORDER if hi in cls and lo in cls]
    if pairs:
      held = [f"{hi} > {lo}" for hi, lo in pairs if cls[hi]["mean"] > cls[lo]["mean"]]
      lines.append(f"Of the {len(pairs)} orderings the papers' ablations (and the premise of "
                   f"pretraining) predict, {len(held)} hold on this task"
                   + (f" ({', '.join(held)})" if held else "") + "; see the comparison below.")
    for a in near + above:
      base = cls.get(BASELINE[a])
      if a in cls and cls[a]["mean"] * 100 < 2 * chance and base and (
          base["mean"] * 100 > 2 * chance):
        where = "near" if a in near else "at or above"
        lines.append(f"{a}: pretraining ended {where} the unigram loss and fine-tuning from it "
                     f"stays near chance ({_fmt(cls[a])}%) with the shared recipe, while the "
                     f"same model from random weights reaches {_fmt(base)}%: consistent with a "
                     "model stopped on that plateau holding representations that carry little "
                     "of the input.")
  return [f"- {l}" for l in lines]


def _optimizer_lines(results):
  """Which optimizer semantics each training stage used, as its log names them."""
  used = {}
  for name, r in results.items():
    if isinstance(r, dict) and r.get("optimizer"):
      used.setdefault(r["optimizer"], []).append(name)
  if not used:
    return []
  if len(used) == 1:
    (rule, stages), = used.items()
    return [f"- Optimizer, the same for all {len(stages)} training runs (pretraining and every "
            f"fine-tuning arm, XLNet and MPNet alike): {rule}. The quickstart pins it so that "
            "arms differ by objective and architecture only; the scripts' defaults differ by "
            "family (MPNet's is fairseq's Adam: README, 'Optimizer semantics and recipes')."]
  kinds = lambda stages: ", ".join(sorted({n.split("-")[0] for n in stages}))
  return ["- Optimizers used, as each run's log names them (the same for every arm, XLNet and "
          "MPNet alike, so that arms differ by objective and architecture only; epsilon is "
          "each XLNet release script's own):"] + [
      f"  - {rule}: {len(stages)} runs ({kinds(stages)})" for rule, stages in sorted(used.items())]


_table = language_report.table


def write_report(pipeline, results, times):
  p = pipeline.p
  data = results.get("data") or {}
  configs = results.get("configs") or {}
  agg = aggregate(pipeline, results)
  try:
    unigram = unigram_loss(pipeline)
  except (OSError, RuntimeError):
    unigram = None
  plots = _plots(pipeline, agg, unigram, data) if data else {}
  tokens = p.pretrain_steps * p.batch * p.seq_len
  n_records = (results.get("records") or {}).get("records")
  passes = (f", {p.pretrain_steps * p.batch / n_records:.1f} passes over the "
            f"{n_records:,} records" if n_records else "")
  md = [f"# Quickstart reproduction report (preset `{p.name}`)", "",
        "Generated by `python quickstart.py` from the numbers this run measured; nothing in "
        "the text below is fixed in advance. Small models, minutes of CPU: read the numbers as "
        "a demonstration that every piece works end to end, not as a reproduction of the "
        "papers' results.", "", "## What this run shows", ""]
  md += _summary(agg, unigram, data)
  md += [f"- {l}" for l in diagnosis_report.summary_lines(agg, data)
         + [language_report.summary_line(agg["accept"]), language_report.zero_shot_accept_summary(
             agg["diagnostics"].get("accept_zero_shot"))] if l] + ["", "## Setup", ""]
  if data:
    labels = data["classify"]["labels"]
    md += [f"- Corpus: the docstrings of this Python's standard library, {data['documents']:,} "
           f"distinct documents split by document (seed {pipeline.seed}) into "
           + ", ".join(f"{k} {v:,}" for k, v in data["splits"].items())
           + f". Pretraining reads only the train documents ({data['corpus']['bytes']:,} bytes).",
           f"- Module classification in the DBpedia CSV layout (`run_classifier.py "
           f"--task_name=dbpedia --eval_split=test`): which of the {len(labels)} packages with "
           "the most docstrings a docstring belongs to; labels "
           + ", ".join(f"{k} = {v}" for k, v in labels.items())
           + f". Train {sum(data['classify']['counts']['train'].values())} examples (at most "
           f"{p.train_per_class} per label), test "
           f"{sum(data['classify']['counts']['test'].values())} (at most {p.test_per_class}).",
           f"- SQuAD 2.0 format: cloze questions over docstring paragraphs, "
           + ", ".join(f"{k}: {v['questions']} questions ({v['impossible']} unanswerable)"
                       for k, v in data["squad"].items()) + ".",
           "- RACE format: cloze questions with four options, "
           + "; ".join(f"{k}: " + ", ".join(f"{n} {lvl}" for lvl, n in v.items())
                       for k, v in data["race"].items()) + "."]
  if configs:
    md += [f"- Model: {p.n_layer} layer{'s' if p.n_layer > 1 else ''}, d_model {p.d_model}, "
           f"{p.n_head} heads, d_inner "
           f"{p.d_inner}, vocabulary {p.vocab_size} (SentencePiece with the XLNet symbols). "
           f"Parameters: XLNet {configs['xlnet_params']:,}, MPNet {configs['mpnet_params']:,} "
           "(with their LM heads; MPNet's absolute positions and biases against XLNet's "
           "relative-position weights)."]
  md += [f"- Pretraining, the same for every objective: {p.pretrain_steps} steps, batch "
         f"{p.batch}, seq_len {p.seq_len} ({tokens:,} token positions{passes}), peak learning rate "
         f"{p.pretrain_lr}, dropout {p.dropout}, all three reading THE SAME records: "
         f"{p.num_predict} predicted tokens per sequence ({100 * p.num_predict / p.seq_len:.0f}%"
         " of seq_len, MPNet's rate; XLNet's paper uses about 1 in 7), forward text only "
         f"(--nobi_data). XLNet arms keep {p.mem_len} tokens of memory; MPNet has none. The "
         "MPNet ablation pretrains 1M steps of batch 256 (up to 512 tokens), about "
         f"{1e6 * 256 * 512 / tokens:,.0f} times the positions seen here.",
         f"- Fine-tuning, the same recipe for every arm: classification {p.cls_steps} steps, batch "
         f"{p.cls_batch}, length {p.cls_seq_len}, learning rate chosen per arm on the dev split "
         f"from {{{', '.join(f'{lr:g}' for lr in p.cls_lrs)}}} (seed 0), then test runs at that "
         f"rate with seeds {', '.join(map(str, p.seeds))}; SQuAD and RACE {p.qa_steps} steps, "
         f"length {p.qa_seq_len}, learning rate chosen on dev from "
         f"{{{', '.join(f'{lr:g}' for lr in p.qa_lrs)}}}, test seeds "
         f"{', '.join(map(str, p.qa_seeds))}. Each run is evaluated once, at its end (no "
         "checkpoint is picked on an evaluation set); the test split is read only by the "
         "final runs. The spread is over fine-tuning seeds only: each objective is pretrained "
         "once."]
  md += _optimizer_lines(results)
  md += ["", "## Pretraining", ""]
  if agg["pretrain"]:
    md += _table(["objective", "final loss", "tokens/s", "time"],
                 [(o, f"{r['final_loss']:.3f}", f"{r['tokens_per_s'] or 0:,.0f}",
                   format_duration(times.get(f"pretrain-{o}", 0)))
                  for o, r in agg["pretrain"].items()]) + [""]
    md += _pretrain_text(agg, unigram, p) + ["", "![pretraining loss](plots/pretrain_loss.png)",
                                            ""]
  md += ["## Module classification (test accuracy, %)", ""]
  md += _table(["arm", "mean ± std", "min – max", "per seed"],
               [(f"{a} — {ARM_TITLES[a]}", _fmt(s),
                 f"{s['min'] * 100:.1f} – {s['max'] * 100:.1f}",
                 ", ".join(f"{v * 100:.1f}" for v in s["values"]))
                for a, s in agg["classify"].items() if s]) + [""]
  md += _classification_text(agg, data) if data else []
  if "classification.png" in plots:
    md += ["", "![classification accuracy](plots/classification.png)"]
  md += [""] + language_report.section(agg["accept"], data, p)
  md += language_report.zero_shot_accept_lines(agg["diagnostics"].get("accept_zero_shot"),
                                               agg["accept"])
  md += ["## SQuAD 2.0 and RACE formats", ""]
  if agg["squad"] or agg["race"]:
    rows = []
    for a in [a for a in ARMS if a in agg["squad"] or a in agg["race"]]:
      s, r = agg["squad"].get(a, {}), agg["race"].get(a, {})
      rows.append((a, _fmt(s.get("exact"), 100), _fmt(s.get("f1"), 100),
                   _fmt(s.get("HasAns_f1"), 100), _fmt(s.get("NoAns_f1"), 100),
                   _fmt(r.get("accuracy")), _fmt(r.get("accuracy_middle")),
                   _fmt(r.get("accuracy_high"))))
    md += _table(["arm", "SQuAD EM", "F1", "HasAns F1", "NoAns F1", "RACE acc", "middle",
                  "high"], rows)
    md += [""] + (_qa_text(agg, data, p) if data else [])
    if "qa.png" in plots:
      md += ["", "![SQuAD and RACE](plots/qa.png)"]
  scale = (f"models of {configs.get('xlnet_params', 0):,} (XLNet) and "
           f"{configs.get('mpnet_params', 0):,} (MPNet) parameters see "
           f"{data.get('corpus', {}).get('bytes', 0):,} bytes of docstrings for "
           f"{p.pretrain_steps} steps")
  md += [""] + diagnosis_report.section(agg, data)
  md += ["## How this compares with the papers", ""] + papers.section(
      agg, scale, diagnosis_report.usable_tasks(agg, data))
  md += ["", "## Stages", ""]
  md += _table(["stage", "time"], [(k, format_duration(v)) for k, v in times.items()])
  md += ["", f"Total (stages, this and earlier runs): {format_duration(sum(times.values()))}."]
  md += ["", "Every stage's command line is the first line of its log in `logs/`; results per "
         "stage are in `stages/`, the aggregated numbers in `results.json`."]
  tasks.atomic_write(pipeline.path("results.json"), json.dumps(
      {"preset": p.to_dict(), "unigram_loss": unigram, "aggregate": agg, "times": times},
      indent=1) + "\n")
  return tasks.atomic_write(pipeline.path("report.md"), "\n".join(md) + "\n")
