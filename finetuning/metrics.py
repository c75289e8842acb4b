"""Classification and regression metrics as GLUE defines them (numpy only).

CoLA: Matthews correlation; SST-2, MNLI, QNLI, RTE, WNLI: accuracy; MRPC, QQP:
F1 of the positive class and accuracy; STS-B: Pearson and Spearman correlation.
Text classification (IMDB, Yelp, DBpedia, AG News, Amazon): accuracy and error rate.
Your own data (`custom`): accuracy and macro F1 for classes; Pearson and Spearman (as STS-B)
for a real-valued target.
"""

import numpy as np


def accuracy(labels, preds):
  labels, preds = np.asarray(labels), np.asarray(preds)
  return float((labels == preds).mean()) if len(labels) else 0.0


def f1_binary(labels, preds, positive=1):
  labels, preds = np.asarray(labels) == positive, np.asarray(preds) == positive
  tp = float((labels & preds).sum())
  if tp == 0:
    return 0.0
  precision, recall = tp / preds.sum(), tp / labels.sum()
  return 2 * precision * recall / (precision + recall)


def macro_f1(labels, preds):
  """The mean over classes of each class's F1 (that class as the positive one), over the
  classes present in `labels` or `preds` (scikit-learn's f1_score(average="macro")); a class
  never predicted correctly counts 0."""
  labels, preds = np.asarray(labels), np.asarray(preds)
  classes = np.union1d(labels, preds)
  if not len(classes):
    return 0.0
  return float(np.mean([f1_binary(labels, preds, positive=c) for c in classes]))


def matthews_corrcoef(labels, preds):
  """Binary or multi-class MCC (scikit-learn's definition); 0 when undefined."""
  labels, preds = np.asarray(labels), np.asarray(preds)
  classes = np.union1d(labels, preds)
  index = {c: i for i, c in enumerate(classes)}
  conf = np.zeros([len(classes)] * 2)
  for t, p in zip(labels, preds):
    conf[index[t], index[p]] += 1
  t_sum, p_sum = conf.sum(1), conf.sum(0)
  n, correct = conf.sum(), np.trace(conf)
  cov_ytyp = correct * n - t_sum @ p_sum
  cov_ypyp = n * n - p_sum @ p_sum
  cov_ytyt = n * n - t_sum @ t_sum
  denom = np.sqrt(cov_ytyt * cov_ypyp)
  return float(cov_ytyp / denom) if denom else 0.0


def pearson(x, y):
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  x, y = x - x.mean(), y - y.mean()
  denom = np.sqrt((x * x).sum() * (y * y).sum())
  return float((x * y).sum() / denom) if denom else 0.0


def _ranks(x):
  """Average ranks (ties share the mean rank), as scipy.stats.rankdata."""
  x = np.asarray(x)
  order = np.argsort(x, kind="stable")
  ranks = np.empty(len(x))
  sorted_x = x[order]
  i = 0
  while i < len(x):
    j = i
    while j + 1 < len(x) and sorted_x[j + 1] == sorted_x[i]:
      j += 1
    ranks[order[i:j + 1]] = (i + j) / 2.0 + 1
    i = j + 1
  return ranks


def spearman(x, y):
  return pearson(_ranks(x), _ranks(y))


GLUE_METRICS = {
    "cola": lambda y, p: {"mcc": matthews_corrcoef(y, p)},
    "mrpc": lambda y, p: {"f1": f1_binary(y, p), "accuracy": accuracy(y, p)},
    "qqp": lambda y, p: {"f1": f1_binary(y, p), "accuracy": accuracy(y, p)},
    "sts-b": lambda y, p: {"pearson": pearson(y, p), "spearman": spearman(y, p)},
}


CUSTOM = "custom"      # your own data (finetuning/table_data.py)


def task_metrics(task, labels, preds, regression=False):
  """The metrics of a GLUE task (accuracy for the rest, plus error rate); for your own data
  (`custom`), accuracy and macro F1, or with `regression` Pearson and Spearman."""
  task = task.lower()
  if task == CUSTOM:
    if regression:
      return GLUE_METRICS["sts-b"](labels, preds)
    return {"accuracy": accuracy(labels, preds), "macro_f1": macro_f1(labels, preds)}
  if task in GLUE_METRICS:
    return GLUE_METRICS[task](labels, preds)
  acc = accuracy(labels, preds)
  return {"accuracy": acc, "error_rate": 1.0 - acc}
