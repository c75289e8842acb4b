"""The report's "Diagnosis" section: learning-rate sweeps, linear probes, held-out losses and
MPNet's modes, every sentence computed from the numbers (reproduction/diagnostics.py and the
dev runs of reproduction/pipeline.py).
"""

from reproduction import language_report
from reproduction.pipeline import ARMS, BASELINE, OBJECTIVES, TASKS, chosen_lr

# Dev scores as stored: classification and RACE accuracy as fractions, SQuAD F1 in percent
# (the official script's unit).
SCORE_SCALE = {"classify": 100, "squad": 1, "race": 100}
TASK_TITLES = {"classify": "module classification (accuracy)", "squad": "SQuAD 2.0 format (F1)",
               "race": "RACE format (accuracy)"}


def sweeps(pipeline, results):
  """{task: {arm: {"scores": {lr: dev score}, "chosen": lr}}} for the arms that ran."""
  p = pipeline.p
  out = {}
  for task, grid, arms in (("classify", p.cls_lrs, p.arms), ("squad", p.qa_lrs, p.squad_arms),
                           ("race", p.qa_lrs, p.race_arms)):
    for arm in arms:
      try:
        lr, scores = chosen_lr(results, task, arm, grid)
      except Exception:   # dev runs missing (an interrupted run): nothing to report
        continue
      out.setdefault(task, {})[arm] = {"scores": scores, "chosen": f"{lr:g}"}
  return out


def trivial_baselines(data):
  """Score of the trivial answer on each test set (fraction)."""
  out = {"race": 0.25}
  squad = (data.get("squad") or {}).get("test-v2.0.json")
  if squad:
    out["squad"] = squad["impossible"] / squad["questions"]
  counts = ((data.get("classify") or {}).get("counts") or {}).get("test")
  if counts:
    out["classify"] = max(counts.values()) / sum(counts.values())
  return out


def test_sizes(data):
  """{task: number of test examples / questions} (what the noise of a test score rests on)."""
  out = {}
  if "test" in _split_sizes(data):
    out["classify"] = _split_sizes(data)["test"]
  squad = (data.get("squad") or {}).get("test-v2.0.json")
  if squad:
    out["squad"] = squad["questions"]
  race = (data.get("race") or {}).get("test")
  if race:
    out["race"] = sum(race.values())
  return out


def exclusions(agg, data):
  """{task: why it is left out of the orderings, or None when it enters them}.

  A task enters only when (1) each arm's learning rate was chosen on dev (a one-value grid
  makes no dev runs: the arms then share a rate nobody chose for them) and (2) some arm's test
  score is above the trivial answer by more than two binomial standard errors of the test set
  (a smaller margin is the luck of the draw)."""
  base, sizes = trivial_baselines(data), test_sizes(data)
  metric = {"classify": None, "squad": "f1", "race": "accuracy"}
  out = {}
  for task in TASKS:
    scores = []
    for r in agg[task].values():
      s = r if metric[task] is None else (r or {}).get(metric[task])
      if s:
        scores.append(s["mean"])
    if not scores or task not in base:
      continue
    swept = (agg.get("sweep") or {}).get(task) or {}
    margin = noise(base[task], sizes.get(task))
    if swept and not any(a["scores"] for a in swept.values()):
      out[task] = (f"every arm ran at one learning rate ({next(iter(swept.values()))['chosen']}"
                   ", no dev choice), so the runs show that the scripts train, predict and "
                   "score, not how the objectives compare")
    elif max(scores) <= base[task] + margin:
      out[task] = (f"no arm beats the trivial answer ({100 * base[task]:.1f}) by more than the "
                   f"test set's noise (±{100 * margin:.1f} points), so differences between "
                   "arms there measure nothing about the objectives")
    else:
      out[task] = None
  return out


def usable_tasks(agg, data):
  """{task: True if it enters the orderings} (see exclusions)."""
  return {task: why is None for task, why in exclusions(agg, data).items()}


def _probe_rows(diag):
  steps = diag.get("checkpoints", [])
  rows = []
  for arm in ARMS:
    probe = diag.get("probe", {}).get(arm)
    if not probe:
      continue
    cells = []
    for step in ([0] if arm.startswith("none") else steps):
      r = probe.get(str(step)) or probe.get(step)
      cells.append(f"{100 * r['dev']:.1f} / {100 * r['test']:.1f}" if r else "n/a")
    if arm.startswith("none"):
      cells = cells + ["(random weights)"] * (len(steps) - 1)
    alone = (_final_probe(diag, arm) or {}).get("summary")
    cells.append(f"{100 * alone['dev']:.1f} / {100 * alone['test']:.1f}" if alone else "n/a")
    rows.append((arm, *cells))
  return steps, rows


def _final_probe(diag, arm):
  probe = diag.get("probe", {}).get(arm) or {}
  if not probe:
    return None
  key = max(probe, key=int)
  return probe[key]


def section(agg, data):
  """Markdown lines of the Diagnosis section."""
  lines = ["## Diagnosis", "",
           "What the fine-tuning table alone cannot say: is a gap due to the representation "
           "pretraining made, or to a fine-tuning recipe that suits one arm better than another? "
           "Each experiment below could have come out either way.", ""]
  sweep = agg.get("sweep") or {}
  lines += ["### Learning-rate choice on dev", ""]
  if sweep:
    for task, arms in sweep.items():
      grid = sorted({lr for a in arms.values() for lr in a["scores"]}, key=float)
      if not grid:
        continue
      scale = SCORE_SCALE[task]
      rows = [(arm, *[f"{scale * a['scores'][lr]:.1f}" if lr in a["scores"] else "n/a"
                      for lr in grid], a["chosen"]) for arm, a in arms.items()]
      lines += [f"{TASK_TITLES[task]}, dev split, seed 0:", ""]
      lines += _table(["arm", *[f"lr {lr}" for lr in grid], "chosen"], rows) + [""]
      chosen = {a["chosen"] for a in arms.values()}
      edge = [arm for arm, a in arms.items() if a["chosen"] in (grid[0], grid[-1])
              and len(grid) > 2]
      if len(chosen) > 1:
        text = (f"The arms chose {len(chosen)} different learning rates "
                f"({', '.join(sorted(chosen, key=float))}): one fixed rate for every arm would "
                "have favoured some of them.")
      else:
        text = (f"Every arm chose the same rate ({next(iter(chosen))}): on this task a shared "
                "rate was not what separated them.")
      if edge:
        text += (f" {', '.join(edge)} chose a rate at the edge of the grid, so a wider grid "
                 "might move them further.")
      lines += [text, ""]
  else:
    lines += ["The preset's grids have one value each: no dev runs.", ""]

  diag = agg.get("diagnostics") or {}
  if diag.get("probe"):
    steps, rows = _probe_rows(diag)
    lines += ["### Linear probes of the frozen encoders", "",
              "A softmax regression on [summary token, mean of the last layer] of the encoder "
              "as pretraining left it (no fine-tuning), L2 strength chosen on dev; dev / test "
              "accuracy (%) at each pretraining checkpoint (the pretraining-length curve).", ""]
    lines += _table(["arm", *[f"step {s}" for s in steps], "summary token alone, last"],
                    rows) + [""]
    lines += probe_text(diag, steps, _split_sizes(data))
    lines += finetune_vs_probe(diag, agg.get("classify") or {}, _split_sizes(data).get("test"))
    lines += [""]
  if diag.get("heldout"):
    steps = diag.get("checkpoints", [])
    lines += ["### Held-out pretraining loss", "",
              "Each objective's own loss on records written from the dev documents (never "
              "trained on), dropout off, at each checkpoint.", ""]
    lines += _table(["objective", *[f"step {s}" for s in steps]],
                    [(o, *[f"{v:.3f}" for v in _by_step(diag["heldout"][o], steps)])
                     for o in OBJECTIVES if o in diag["heldout"]]) + [""]
    for o in OBJECTIVES:
      if o in diag["heldout"]:
        vals = _by_step(diag["heldout"][o], steps)
        best = min(range(len(vals)), key=lambda k: vals[k])
        lines.append(f"- {o}: " + ("falls at every checkpoint" if all(
            b < a for a, b in zip(vals, vals[1:])) else
            f"lowest at step {steps[best]} ({vals[best]:.3f}), {vals[-1]:.3f} at the end")
            + ".")
    lines.append("")
  if diag.get("cloze"):
    lines += language_report.cloze_lines(diag["cloze"])
  if diag.get("pairs"):
    lines += language_report.cloze_lines(diag["pairs"], language_report.PAIRS_TEXT)
  modes = diag.get("mpnet_modes")
  if modes:
    lines += ["### MPNet's weights in its three modes", "",
              "The final MPNet weights, held-out loss when they predict with the information "
              "of each mode (the weights were trained in mpnet mode only).", ""]
    lines += _table(["mode", "held-out loss"], [(m, f"{v:.3f}") for m, v in modes.items()])
    lines += [""] + mode_text(modes, diag) + [""]
  return lines


def _by_step(values, steps):
  return [values.get(str(s), values.get(s)) for s in steps]


def _split_sizes(data):
  """{split: number of classification examples} (empty when the data stage did not run)."""
  counts = ((data or {}).get("classify") or {}).get("counts") or {}
  return {k: sum(v.values()) for k, v in counts.items()}


def noise(acc, n):
  """Two binomial standard errors of an accuracy `acc` measured on `n` examples (fraction):
  differences smaller than this are not told apart from the luck of the draw."""
  return 2 * (acc * (1 - acc) / n) ** 0.5 if n else 0.0


def _probe_gaps(finals, n):
  """{objective: (final probe test accuracy - its random weights', two standard errors of the
  test set at their mean)} for the objectives whose random-weight arm was probed too."""
  out = {}
  for arm in OBJECTIVES:
    if arm in finals and BASELINE[arm] in finals:
      a, b = finals[arm]["test"], finals[BASELINE[arm]]["test"]
      out[arm] = (a - b, noise((a + b) / 2, n))
  return out


def probe_text(diag, steps, sizes=None):
  sizes = sizes or {}
  out = []
  finals = {arm: _final_probe(diag, arm) for arm in ARMS if _final_probe(diag, arm)}
  if finals:
    ranking = sorted(finals, key=lambda a: -finals[a]["test"])
    out.append("Final-checkpoint probe test accuracy: " + " > ".join(
        f"{a} ({100 * finals[a]['test']:.1f})" for a in ranking) + ".")
  gaps = _probe_gaps(finals, sizes.get("test"))
  for arm in OBJECTIVES:
    if arm in gaps:
      diff, band = gaps[arm]
      verdict = ("" if not band else " (beyond" if abs(diff) > band else " (within")
      if verdict:
        verdict += f" the test set's noise of ±{100 * band:.1f} points)"
      out.append(f"{arm}'s representation is {100 * abs(diff):.1f} points "
                 f"{'above' if diff > 0 else 'below'} the same model's random weights "
                 f"({BASELINE[arm]}) under the probe{verdict}.")
    probe = diag["probe"].get(arm)
    if probe and len(steps) > 1:
      vals = [(_by_step(probe, steps)[k] or {}).get("dev") for k in range(len(steps))]
      if None not in vals:
        out.append(f"{arm}: probe dev accuracy " + ", ".join(
            f"{100 * v:.1f} (step {s})" for v, s in zip(vals, steps))
            + ": " + trend(vals, steps, sizes.get("dev")) + ".")
  return [f"- {l}" for l in out]


def finetune_vs_probe(diag, cls, n):
  """Bullets setting each arm's fine-tuned test accuracy against its last probe twice: on the
  summary token alone (what the classifier's head reads) and on summary + mean. A fine-tuned
  arm below the full probe but not below the summary probe has not lost information: the
  rest is in the other tokens' states, which fine-tuning must first move into the summary.
  Noise of a difference: two standard errors, the test set's sampling of both (binomial) plus
  the fine-tuning seeds' spread (std^2 / seeds)."""
  out = []
  for arm in ARMS:
    probe, ft = _final_probe(diag, arm), cls.get(arm)
    if not probe or not ft or "summary" not in probe or not n:
      continue
    tuned, both, alone = ft["mean"], probe["test"], probe["summary"]["test"]
    spread = ft.get("std", 0.0) ** 2 / ft.get("n", 1)
    band_of = lambda p: 2 * (tuned * (1 - tuned) / n + spread + p * (1 - p) / n) ** 0.5
    band = band_of(both)
    if tuned >= both - band:
      why = "not below the probe"
    elif tuned >= alone - band_of(alone):
      why = ("below the probe on both, not below the probe on what its head reads: the "
             "missing accuracy is in the other tokens' states, which the fine-tuning's few steps "
             "did not route into the summary token, not information its path lost")
    else:
      why = ("below even the probe on the summary token it reads: the fine-tuning fell short "
             "of what its own input holds")
    out.append(f"- {arm}: fine-tuned {100 * tuned:.1f}; probe on the summary token alone "
               f"{100 * alone:.1f}, on summary and mean {100 * both:.1f} (test, ±"
               f"{100 * band:.1f}): {why}.")
  return out


def trend(vals, steps, n):
  """Words for a curve of accuracies: rises / falls / level, against the dev set's noise."""
  band = noise(sum(vals) / len(vals), n)
  d = vals[-1] - vals[0]
  spread = max(vals) - min(vals)
  where = f" (±{100 * band:.1f} points is the dev set's noise)" if band else ""
  if band and spread <= band:
    return f"level within noise from step {steps[0]} to step {steps[-1]}{where}"
  peak = max(range(len(vals)), key=lambda k: vals[k])
  if d > band and peak == len(vals) - 1:
    return f"rises with pretraining length{where}"
  if d < -band:
    return f"falls with pretraining length{where}"
  return (f"peaks at step {steps[peak]}, {100 * (vals[peak] - vals[-1]):.1f} points above the "
          f"end{where}")


def _architecture_split(diag):
  """Final held-out losses {plm, mlm, mpnet, arch = MPNet's architecture on mlm} and `share`,
  the part of MPNet's gap to PLM that the same objective (mlm) shows between the two
  architectures (None when it cannot be computed); None without the runs."""
  heldout, steps = diag.get("heldout", {}), diag.get("checkpoints", [])
  if not steps or not {"plm", "mpnet"} <= set(heldout):
    return None
  out = {o: _by_step(heldout[o], steps)[-1] for o in ("plm", "mlm", "mpnet") if o in heldout}
  out["arch"], out["share"] = diag.get("mpnet_mlm"), None
  if out["arch"] is not None and "mlm" in out and out["mpnet"] > out["plm"]:
    out["share"] = min(1.0, max(0.0, (out["arch"] - out["mlm"]) / (out["mpnet"] - out["plm"])))
  return out


def mode_text(modes, diag):
  out = []
  if "mpnet" in modes and "plm" in modes:
    d = modes["plm"] - modes["mpnet"]
    out.append(f"Without position compensation (plm mode) the same weights score "
               f"{abs(d):.3f} nats {'worse' if d > 0 else 'better'} than with it: "
               + ("the positions of the predicted tokens carry information the model uses."
                  if d > 0 else "the model did not learn to use them."))
  if "mpnet" in modes and "mlm" in modes:
    d = modes["mlm"] - modes["mpnet"]
    out.append(f"In mlm mode (no dependency among predictions) it scores {abs(d):.3f} nats "
               f"{'worse' if d > 0 else 'better'}.")
  split = _architecture_split(diag)
  if split:
    plm, mp, arch = split["plm"], split["mpnet"], split["arch"]
    text = (f"Held-out at the end: MPNet {mp:.3f} against XLNet PLM {plm:.3f} "
            f"({mp - plm:+.3f}); the two differ in architecture (absolute positions + one "
            "shared relative bias and no memory, against relative attention with memory)")
    if arch is not None and "mlm" in split:
      mlm = split["mlm"]
      text += (f". Same objective (mlm), same records, the two architectures: MPNet's "
               f"{arch:.3f}, XLNet's {mlm:.3f} ({arch - mlm:+.3f}), so "
               + (f"{split['share']:.0%} of the MPNet-PLM gap is the architecture's, not the "
                  "objective's." if split["share"] else
                  "the architecture does not explain the MPNet-PLM gap."))
    else:
      text += ", so this gap mixes objective and model."
    out.append(text)
    if arch is not None:
      out.append(hf_check_text(diag.get("mpnet_hf")))
  return [f"- {l}" for l in out]


def hf_check_summary(curve):
  """The numbers the report quotes from tools/mpnet_hf_curve.py's JSON."""
  c = curve["comparisons"]
  return {"exact_max": c["exact_ours_vs_hf"]["max_abs_diff"],
          "exact_steps": c["exact_ours_vs_hf"]["steps"],
          "replay_vs_log": c["replay_vs_log"]["max_abs_diff"],
          "hf_minus_ours": -c["replay_vs_hf"]["last"]["mean_diff"],
          "null_minus_ours": -c["replay_vs_null"]["last"]["mean_diff"]
          if "replay_vs_null" in c else None,
          "heldout": curve.get("heldout", {}),
          # [[step, mean loss of the 50 steps up to it]] per arm: ours (the replay), HF, and
          # ours with other dropout masks (null), for the report's plot
          "curves": {k: curve["arms"][k]["curve"] for k in ("replay", "hf", "null")
                     if curve.get("arms", {}).get(k, {}).get("curve")}}


def hf_check_text(check):
  """MPNet's architecture on mlm against a second implementation (Hugging Face's
  MPNetForMaskedLM on exactly the run's batches), or how to run that check."""
  if not check:
    return ("A second implementation can be set against this run: `python "
            "tools/mpnet_hf_curve.py --output_dir=OUTPUT_DIR --out=OUTPUT_DIR/mpnet_hf_curve.json`"
            " trains Hugging Face's MPNetForMaskedLM on exactly its batches from the same "
            "weights (about 20 minutes on 2 cores); a rerun of the quickstart then quotes it here.")
  held = check["heldout"]
  yardstick = check["null_minus_ours"]
  text = (f"Second implementation: Hugging Face's MPNetForMaskedLM trained on exactly this "
          f"run's batches from the same weights (`tools/mpnet_hf_curve.py`; our replay equals "
          f"the run's log to {check['replay_vs_log']:.0e}; without dropout the two agree to "
          f"{check['exact_max']:.0e} over {check['exact_steps']} steps): over the last 500 "
          f"steps HF's mean loss is {check['hf_minus_ours']:+.4f} nats from ours")
  if yardstick is not None:
    text += f", where ours with other dropout masks is {yardstick:+.4f}"
  if "hf" in held and "replay" in held:
    text += f"; held-out {held['hf']:.3f} (HF) against {held['replay']:.3f} (ours)"
  agree = yardstick is not None and abs(check["hf_minus_ours"]) <= 3 * max(abs(yardstick), 1e-3)
  text += (": the two implementations agree, so the gap is the architecture's." if agree
           else ": see the tool's JSON before reading the gap as the architecture's.")
  if {"replay", "hf"} <= set(check.get("curves") or {}):
    text += (" Both loss curves, and their differences: "
             "![MPNet's architecture on mlm, ours against Hugging Face's]"
             "(plots/mpnet_hf_curve.png)")
  return text


def summary_lines(agg, data):
  """Bullets for the report's opening summary."""
  out = []
  diag = agg.get("diagnostics") or {}
  if language_report.zero_shot_summary(diag):
    out.append(language_report.zero_shot_summary(diag))
  finals = {arm: _final_probe(diag, arm) for arm in ARMS if _final_probe(diag, arm)}
  cls = {a: s for a, s in (agg.get("classify") or {}).items() if s}
  if finals:
    probe_order = sorted(finals, key=lambda a: -finals[a]["test"])
    ft = [a for a in sorted(cls, key=lambda a: -cls[a]["mean"]) if a in finals]
    out.append("Linear probes (frozen encoders, no fine-tuning learning rate): "
               + " > ".join(f"{a} {100 * finals[a]['test']:.1f}" for a in probe_order)
               + "; fine-tuning orders the same arms "
               + ("the same way." if ft == [a for a in probe_order if a in ft] else
                  " > ".join(ft) + "."))
    out += _probe_verdict(finals, _split_sizes(data).get("test"))
  out += _sweep_verdict(agg.get("sweep") or {})
  out += _architecture_verdict(diag, cls)
  for task, why in exclusions(agg, data).items():
    if why:
      out.append(f"Left out of the orderings: {TASK_TITLES[task]}: {why}.")
  return out


def _probe_verdict(finals, n):
  """Does pretraining put more into the representation than random weights hold?"""
  gaps = _probe_gaps(finals, n)
  if not gaps or not n:
    return []
  beyond = [a for a, (diff, band) in gaps.items() if abs(diff) > band]
  listed = ", ".join(f"{a} {100 * diff:+.1f}" for a, (diff, _) in gaps.items())
  if not beyond:
    return [f"Why the fine-tuned arms differ: under the probe no pretrained encoder is told "
            f"apart from its own random weights ({listed} points, each within the test set's "
            f"noise of about ±{100 * max(b for _, b in gaps.values()):.1f}): on this task pretraining put no "
            "label information into the representation that a linear probe can read, so gaps "
            "between fine-tuned arms reflect how well each starting point fine-tunes in a "
            "few steps, not features the objectives taught."]
  return [f"Under the probe, pretrained against random weights: {listed} points; beyond the "
          f"test set's noise: {', '.join(beyond)}."]


def _sweep_verdict(sweep):
  cls = {arm: a for arm, a in (sweep.get("classify") or {}).items() if a["scores"]}
  if not cls:
    return []
  chosen = {a["chosen"] for a in cls.values()}
  if len(chosen) == 1:
    return [f"Learning rate: on dev every arm chose the same rate ({next(iter(chosen))}) for "
            "classification, so a shared rate is not what separates the arms there."]
  return ["Learning rate: the arms chose different rates on dev for classification ("
          + ", ".join(f"{arm} {a['chosen']}" for arm, a in cls.items())
          + "); each test run uses its arm's choice."]


def _architecture_verdict(diag, cls):
  """MPNet's architecture against XLNet's on the same objective, and without pretraining."""
  split = _architecture_split(diag)
  if not split or split["arch"] is None or "mlm" not in split:
    return []
  plm, mlm, mp, arch, share = (split[k] for k in ("plm", "mlm", "mpnet", "arch", "share"))
  mostly = share is not None and share >= 0.5
  text = (f"Why MPNet learns slower here: trained on the mlm objective, MPNet's architecture "
          f"ends at {arch:.3f} held-out against XLNet's {mlm:.3f} ({arch - mlm:+.3f} nats), "
          f"{share:.0%} of MPNet's gap to XLNet PLM ({mp:.3f} against {plm:.3f}, "
          f"{mp - plm:+.3f})" if mostly else
          f"MPNet's architecture on the mlm objective: {arch:.3f} held-out against XLNet's "
          f"{mlm:.3f}; MPNet {mp:.3f} against XLNet PLM {plm:.3f}")
  if mostly:
    text += (": the gap belongs to the architecture (no memory, learned absolute positions, "
             "one shared relative bias), not to the masked-and-permuted objective")
  if "none" in cls and "none-mpnet" in cls:
    text += (f"; without any pretraining the same architectures fine-tune to "
             f"{100 * cls['none-mpnet']['mean']:.1f}% (MPNet) and "
             f"{100 * cls['none']['mean']:.1f}% (XLNet) on classification")
  return [text + "."]


_table = language_report.table
