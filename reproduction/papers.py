"""The report's comparison with the papers' ablation tables (XLNet Table 6, MPNet's ablation):
their gaps between objectives next to this run's."""

from reproduction import language_report
from reproduction.pipeline import BASELINE, OBJECTIVES

# The papers' ablations (/work/shared/reference): XLNet Table 6 rows 3 (XLNet-Base K=7) and 2
# (DAE + Transformer-XL); MPNet's ablation rows MPNet, - position compensation (= PLM), - both.
PAPER_XLNET = {"plm": {"RACE": 66.05, "SQuAD2.0 F1": 81.33, "MNLI-m": 85.84, "SST-2": 92.66},
               "mlm": {"RACE": 65.03, "SQuAD2.0 F1": 79.56, "MNLI-m": 84.88, "SST-2": 92.60}}
PAPER_MPNET = {"mpnet": {"SQuAD2.0 F1": 83.3, "MNLI": 86.2, "SST-2": 94.0},
               "plm": {"SQuAD2.0 F1": 81.0, "MNLI": 85.6, "SST-2": 93.4},
               "mlm": {"SQuAD2.0 F1": 79.8, "MNLI": 85.6, "SST-2": 93.3}}


def _gap(paper, hi, lo):
  return "; ".join(f"{k} {paper[hi][k] - paper[lo][k]:+.2f}" for k in paper[hi])


def section(agg, scale, usable):
  """The papers' gaps between objectives next to this run's, pair by pair (tasks on which no
  arm beats the trivial answer are left out: "excl."). The sign count reads the gaps, not
  their rounded cells (+0.04 is shown as +0.0 and has the papers' sign)."""
  gaps = []

  def here(hi, lo):
    cells = []
    for key, metric in (("classify", None), ("squad", "f1"), ("race", "accuracy")):
      if not usable.get(key, True):
        cells.append("excl.")
        continue
      a, b = agg[key].get(hi), agg[key].get(lo)
      if metric:
        a, b = a and a.get(metric), b and b.get(metric)
      if a and b:
        gaps.append((a["mean"] - b["mean"]) * 100)
        cells.append(f"{gaps[-1]:+.1f}")
      else:
        cells.append("n/a")
    return cells

  rows = [("plm − mlm", "XLNet Table 6 (XLNet-Base K=7 − DAE + Transformer-XL): "
           + _gap(PAPER_XLNET, "plm", "mlm"), *here("plm", "mlm")),
          ("mpnet − plm", "MPNet ablation (MPNet − its PLM row): "
           + _gap(PAPER_MPNET, "mpnet", "plm"), *here("mpnet", "plm")),
          ("mpnet − mlm", "MPNet ablation (MPNet − MLM): " + _gap(PAPER_MPNET, "mpnet", "mlm"),
           *here("mpnet", "mlm"))]
  rows += [(f"{a} − {BASELINE[a]}", "not in the tables (pretraining is their premise)",
            *here(a, BASELINE[a])) for a in OBJECTIVES]
  lines = language_report.table(["pair", "papers (points, full scale)", "here: classification", "here: SQuAD F1",
                  "here: RACE"], rows)
  agree = sum(g > 0 for g in gaps)
  lines += ["", f"In this run {agree} of {len(gaps)} measured gaps have the papers' sign "
            "(positive = the first objective ahead). The papers' ablations use BERT-base-size "
            "models on Wikipedia + BooksCorpus (XLNet) or 16 GB of text for 1M steps of batch "
            "256 (MPNet), where the objectives differ by one to two points; here "
            f"{scale}, so a difference of a few points on small evaluation sets is noise "
            "unless the classification spread says otherwise. The MPNet paper's PLM row is "
            "MPNet's own code without position compensation; the plm arm here is XLNet "
            "(two-stream relative attention with memory), the XLNet paper's setting."]
  return lines
