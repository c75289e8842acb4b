"""The report's measures of what pretraining taught about language: the zero-shot cloze and
minimal pairs (no fine-tuning; the Diagnosis section) and the acceptability task (fine-tuned).

Acceptability:

The set (reproduction/tasks.write_acceptability, GLUE CoLA's layout): real prose sentences of
the held-out docstrings (label 1) against sentences with two words swapped or one replaced
(label 0), balanced; a train set too small to learn the language from. Each arm fine-tunes
with the classification recipe (learning rate chosen on dev by MCC, seed 0), then the preset's
seeds predict the unlabelled test split once (CoLA.tsv), scored against test-labels.tsv by the
pipeline. Noise of an arm's mean: the test set's sampling (binomial for accuracy, (1 - r^2) /
(n - 2) for a correlation) plus the seed spread (std^2 / seeds); a pretrained arm beats its
random-weights twin when its mean is above by more than two standard errors of the difference.
"""

import math

from reproduction.pipeline import ARMS, BASELINE, OBJECTIVES

METRICS = ("mcc", "accuracy")


def table(header, rows):
  """A Markdown table (the report's sections share it)."""
  out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
  return out


def stats(values):
  """{n, mean, std (n - 1), min, max, values} of the non-None values; None if there are none."""
  values = [v for v in values if v is not None]
  if not values:
    return None
  n = len(values)
  mean = sum(values) / n
  std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
  return {"n": n, "mean": mean, "std": std, "min": min(values), "max": max(values),
          "values": values}


def aggregate(p, results):
  """{arm: {"mcc": stats, "accuracy": stats, "n_test": n}} over the test seeds' runs."""
  out = {}
  for arm in ARMS:
    runs = [(results.get(f"accept-{arm}-s{s}") or {}).get("metrics")
            for s in p.accept_test_seeds]
    runs = [m for m in runs if m and "mcc" in m and "accuracy" in m]
    if runs:
      out[arm] = {k: stats([m[k] for m in runs]) for k in METRICS}
      out[arm]["n_test"] = runs[0]["n"]
  return out


def standard_error(metric, s, n_test):
  """Standard error of an arm's mean `metric`: the test set's sampling plus the seed spread."""
  m = s["mean"]
  sampling = (m * (1 - m) / n_test if metric == "accuracy"
              else (1 - m * m) / max(1, n_test - 2))
  return math.sqrt(sampling + s["std"] ** 2 / s["n"])


def verdict(acc, arm, base, metric="mcc"):
  """(difference arm - base, two standard errors of it, beyond?)"""
  a, b = acc[arm], acc[base]
  diff = a[metric]["mean"] - b[metric]["mean"]
  two_se = 2 * math.hypot(standard_error(metric, a[metric], a["n_test"]),
                          standard_error(metric, b[metric], b["n_test"]))
  return diff, two_se, abs(diff) > two_se


def _fmt(s, scale=100.0):
  text = f"{s['mean'] * scale:.1f}"
  return text + (f" ± {s['std'] * scale:.1f}" if s["n"] > 1 else "")


def summary_line(acc):
  """One line for "What this run shows", or None without acceptability runs."""
  parts = []
  for obj in OBJECTIVES:
    base = BASELINE[obj]
    if obj in acc and base in acc:
      diff, two_se, beyond = verdict(acc, obj, base)
      parts.append(f"{obj} {diff * 100:+.1f} MCC points over {base} "
                   f"({'beyond' if beyond else 'within'} the noise, ±{two_se * 100:.1f})")
  if not parts:
    return None
  return ("Acceptability (real sentence or damaged copy, fine-tuned on a small train set, "
          "test read once): " + "; ".join(parts) + ".")


def _rate_words(grid):
  if len(grid) == 1:
    return f"learning rate {grid[0]:g}, fixed by the preset"
  return f"learning rate chosen on dev by MCC from {{{', '.join(f'{g:g}' for g in grid)}}}"


def section(acc, data, p):
  """Markdown lines of the report's acceptability section."""
  if not acc:
    return []
  counts = (data.get("accept") or {}).get("test", {})
  n = sum(counts.values())
  lines = ["## Acceptability (CoLA layout; test MCC and accuracy, %)", "",
           f"Real prose sentences of the held-out docstrings against copies with two words "
           f"swapped or one word replaced, GLUE CoLA's TSV layout (`run_classifier.py "
           f"--task_name=cola`): train {sum((data['accept'].get('train') or {}).values())}, "
           f"dev {sum((data['accept'].get('dev') or {}).values())}, test {n} sentences "
           f"(labels {counts}). The train set is too small to learn English from: a lead "
           "over the random-weights twin can only come from pretraining. Classification's recipe "
           f"({p.accept_steps} steps, {_rate_words(p.accept_grid)}, seeds "
           f"{', '.join(map(str, p.accept_test_seeds))}); the test split has no labels "
           "in its file and "
           "is scored once from each run's CoLA.tsv. Chance: MCC 0, accuracy 50%.", "",
           "| arm | MCC | accuracy | per seed (MCC) |", "|---|---|---|---|"]
  for arm, s in acc.items():
    lines.append(f"| {arm} | {_fmt(s['mcc'])} | {_fmt(s['accuracy'])} | "
                 + ", ".join(f"{v * 100:.1f}" for v in s["mcc"]["values"]) + " |")
  lines.append("")
  for obj in OBJECTIVES:
    base = BASELINE[obj]
    if obj in acc and base in acc:
      diff, two_se, beyond = verdict(acc, obj, base)
      d_acc, two_se_acc, beyond_acc = verdict(acc, obj, base, "accuracy")
      lines.append(f"- {obj} against its random-weights twin {base}: MCC {diff * 100:+.1f} "
                   f"points ({'beyond' if beyond else 'within'} two standard errors, "
                   f"±{two_se * 100:.1f}); accuracy {d_acc * 100:+.1f} "
                   f"({'beyond' if beyond_acc else 'within'} ±{two_se_acc * 100:.1f}).")
  done = [o for o in OBJECTIVES if o in acc]
  if len(done) > 1:
    order = sorted(done, key=lambda o: -acc[o]["mcc"]["mean"])
    pairs = []
    for hi, lo in zip(order, order[1:]):
      diff, two_se, beyond = verdict(acc, hi, lo)
      pairs.append(f"{hi} > {lo} by {diff * 100:.1f} ({'beyond' if beyond else 'within'} "
                   f"±{two_se * 100:.1f})")
    lines.append("- Ordering of the objectives by test MCC: " + "; ".join(pairs) + ".")
  return lines + [""]


# ---- zero-shot: the cloze and the minimal pairs -------------------------------------------
def cloze_choice(cloze):
  """{objective: (scoring, random {split: acc dict}, final {split: acc dict})}: the scoring
  whose dev gap (final minus random weights) is larger, chosen on dev before test is read."""
  out = {}
  for objective, by_step in cloze.items():
    steps = sorted(by_step, key=int)
    random, final = by_step[steps[0]], by_step[steps[-1]]
    scoring = max(random["dev"], key=lambda k: final["dev"][k]["accuracy"] -
                  random["dev"][k]["accuracy"])
    out[objective] = (scoring, {s: r[scoring] for s, r in random.items()},
                      {s: r[scoring] for s, r in final.items()})
  return out


CLOZE_TEXT = ("### Zero-shot cloze",
              "Each objective's final pretraining weights and its random weights, with no "
              "fine-tuning, pick the most probable of the four options at the blank of the "
              "RACE-format questions (the option's tokens predicted as the objective predicts "
              "its targets; score: sum or mean of their log-probabilities, chosen on dev by the "
              "gap). Accuracy (%), chance 25.")
PAIRS_TEXT = ("### Zero-shot minimal pairs",
              "Held-out prose sentences against their damaged copies (two words swapped or one "
              "replaced, as in the acceptability set), scored the same way with no fine-tuning: "
              "the blank is where the two differ, the options the real and the damaged words. "
              "Chosen because it asks for word order and word choice in context, what a "
              "language model learns first, with no training set at all. Accuracy (%), chance "
              "50.")


def cloze_lines(cloze, text=CLOZE_TEXT):
  """The zero-shot table and one verdict per objective (test gap against two standard errors
  of the difference); text: (heading, explanation)."""
  lines = [text[0], "", text[1], ""]
  rows, verdicts = [], []
  for objective, (scoring, random, final) in cloze_choice(cloze).items():
    rows.append((objective, scoring, *[f"{100 * d[s]['accuracy']:.1f}"
                                       for d in (random, final) for s in ("dev", "test")]))
    a, b = final["test"], random["test"]
    gap = a["accuracy"] - b["accuracy"]
    se = (a["se"] ** 2 + b["se"] ** 2) ** 0.5
    verdict = ("beats its random weights beyond the noise" if gap > 2 * se else
               "is not told apart from its random weights" if gap > -2 * se else
               "scores below its random weights beyond the noise")
    verdicts.append(f"- {objective}: test {100 * a['accuracy']:.1f}% against "
                    f"{100 * b['accuracy']:.1f}% ({100 * gap:+.1f} points, "
                    f"{gap / se if se else 0:.1f} standard errors of the difference, n "
                    f"{a['n']}): {verdict}.")
  lines += table(["objective", "scoring", "random dev", "random test", "pretrained dev",
                   "pretrained test"], rows) + [""] + verdicts + [""]
  return lines


def zero_shot_summary(diag):
  """One bullet: each objective's test gap over its random weights on the zero-shot measures,
  and the objectives' order on each; None without them."""
  parts = []
  for key, name in (("cloze", "cloze (chance 25%)"), ("pairs", "minimal pairs (chance 50%)")):
    if not diag.get(key):
      continue
    gaps, finals = [], {}
    for objective, (_, random, final) in cloze_choice(diag[key]).items():
      a, b = final["test"], random["test"]
      se = (a["se"] ** 2 + b["se"] ** 2) ** 0.5
      gap = a["accuracy"] - b["accuracy"]
      finals[objective] = a["accuracy"]
      gaps.append(f"{objective} {100 * gap:+.1f} ({'beyond' if abs(gap) > 2 * se else 'within'}"
                  f" ±{200 * se:.1f})")
    order = " > ".join(f"{o} {100 * v:.1f}" for o, v in sorted(finals.items(),
                                                                key=lambda kv: -kv[1]))
    parts.append(f"{name}: " + ", ".join(gaps) + f"; pretrained: {order}")
  if not parts:
    return None
  return ("Zero-shot, no fine-tuning (test points over the same model's random weights, two "
          "standard errors of the difference): " + "; ".join(parts) + ".")


# ---- acceptability judged zero-shot ----------------------------------------------------------
def _mcc_se(r, n):
  return math.sqrt((1 - r * r) / max(1, n - 2))


def zero_shot_accept_verdicts(zs):
  """{objective: (random test, final test, difference, two SE of it, two SE of the final's
  MCC around chance 0, beyond?)}: beyond when the pretrained weights' test MCC is above both
  their random weights' and chance by more than two standard errors ((1 - r^2) / (n - 2) per
  MCC). Random weights can land below chance (a frequency cue the threshold reads backwards),
  so beating them alone is not enough."""
  out = {}
  for objective, by_step in zs.items():
    steps = sorted(by_step, key=int)
    random, final = by_step[steps[0]]["test"], by_step[steps[-1]]["test"]
    se_r, se_f = _mcc_se(random["mcc"], random["n"]), _mcc_se(final["mcc"], final["n"])
    diff, two_se = final["mcc"] - random["mcc"], 2 * math.hypot(se_r, se_f)
    out[objective] = (random["mcc"], final["mcc"], diff, two_se, 2 * se_f,
                      diff > two_se and final["mcc"] > 2 * se_f)
  return out


def zero_shot_accept_lines(zs, acc=None):
  """The acceptability section's zero-shot part: table and one verdict per objective, set
  against the fine-tuned arms' verdicts (acc: aggregate()'s) where those exist."""
  if not zs:
    return []
  acc = acc or {}
  lines = ["### The language models' own judgement (zero-shot)", "",
           "Each objective's random and final pretraining weights, with no fine-tuning, judge "
           "the dev and test sentences above (those without '_') by their pseudo-log-likelihood "
           "(every word predicted from the rest of the sentence, as the objective predicts "
           "its targets), per token or as SLOR (less the tokens' unigram log-probability: "
           "frequency and length taken out), cut at a threshold; variant and threshold are "
           "chosen on dev by MCC and test is read once. MCC (%).", ""]
  rows = []
  for objective, by_step in zs.items():
    steps = sorted(by_step, key=int)
    rows.append((objective, *[x for step in (steps[0], steps[-1]) for x in (
        by_step[step]["variant"], f"{100 * by_step[step]['dev']['mcc']:.1f}",
        f"{100 * by_step[step]['test']['mcc']:.1f}")]))
  lines += table(["objective", "random: variant", "dev", "test", "pretrained: variant", "dev",
                  "test"], rows) + [""]
  for objective, (r, f, diff, two_se, two_chance, beyond) in zero_shot_accept_verdicts(
      zs).items():
    text = (f"- {objective}: test MCC {100 * f:.1f} against {100 * r:.1f} for its random "
            f"weights ({100 * diff:+.1f}, two standard errors ±{100 * two_se:.1f}; chance 0"
            f" ±{100 * two_chance:.1f}): {_zs_words(f, diff, two_se, two_chance)}.")
    if beyond and objective in acc and BASELINE[objective] in acc and not verdict(
        acc, objective, BASELINE[objective])[2]:
      text += (" Fine-tuned, the same weights are not told apart from their random twin: "
               "what the model knows shows in its word predictions, which the classifier "
               "never reads (it reads the summary token), and the fine-tuning set does not "
               "draw it out (README: a dev sweep of train size, steps, rates and heads).")
    lines.append(text)
  return lines + [""]


def _zs_words(final, diff, two_se, two_chance):
  above_random, above_chance = diff > two_se, final > two_chance
  if above_random and above_chance:
    return "the pretrained model judges single sentences beyond the noise, with no training set"
  if above_chance:
    return "above chance, but not beyond the noise of its random weights' score"
  if above_random:
    return "above its random weights (which fall below chance), not beyond chance"
  return "not told apart from its random weights or chance"


def zero_shot_accept_summary(zs):
  """One bullet for "What this run shows", or None."""
  if not zs:
    return None
  return ("Acceptability judged zero-shot by the language models themselves (test MCC points "
          "over the same model's random weights, two standard errors): " + "; ".join(
              f"{o} {100 * diff:+.1f} (±{100 * two_se:.1f}; {_zs_words(f, diff, two_se, tc)})"
              for o, (_, f, diff, two_se, tc, _) in zero_shot_accept_verdicts(zs).items())
          + ".")
