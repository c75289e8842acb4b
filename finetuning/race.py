"""RACE: reader (official JSON directory layout), features, and its trainer task.

Layout per option: (context, question+option) as a pair in the model type's
layout (finetuning/layouts.py; XLNet's release: `context <sep> question+option
<sep> <cls>`, LEFT padded). The question+option text keeps its
last `max_qa_length` tokens; the context is cut to fit. A question containing
"_" has the option written into the blank. Each option is built from fresh
copies (the release's list aliasing let options accumulate into the context).
"""

import glob
import json
import os

import numpy as np
import tensorflow as tf

from finetuning import classifier_data, classifier_task, layouts, metrics
from modeling import mpnet_models
from modeling.models import XLNetRaceModel

LEVELS = ("middle", "high")
N_CHOICE = 4


def read_split(data_dir, split, levels=LEVELS):
  """[(level, article, question, [4 options], label index)] from RACE/{split}/{level}/*.txt."""
  out = []
  for level in levels:
    files = sorted(glob.glob(os.path.join(data_dir, split, level, "*.txt")))
    for path in files:
      try:
        with open(path, encoding="utf-8") as f:
          doc = json.load(f)
        article = doc["article"]
        for k, (question, options, answer) in enumerate(
            zip(doc["questions"], doc["options"], doc["answers"])):
          if len(options) != N_CHOICE or answer not in "ABCD" or len(answer) != 1:
            raise ValueError(f"question {k}: need 4 options and an answer in A-D")
          out.append((level, article, question, list(options), "ABCD".index(answer)))
      except (KeyError, ValueError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a RACE file ({e})") from None
  if not out:
    raise FileNotFoundError(f"{os.path.join(data_dir, split)}: no {'/'.join(levels)}/*.txt files")
  return out


def encode(tokenizer, items, max_seq_length, max_qa_length=128, model_type="xlnet"):
  """-> input_ids / seg_ids / input_mask [N, 4, L], label [N], level [N] (0 middle, 1 high)."""
  n = len(items)
  ids = np.zeros([n, N_CHOICE, max_seq_length], np.int32)
  seg = np.zeros([n, N_CHOICE, max_seq_length], np.int32)
  mask = np.ones([n, N_CHOICE, max_seq_length], np.float32)
  budget = max_seq_length - layouts.special_count(model_type, pair=True)
  contexts = tokenizer.encode_lines([it[1] for it in items])
  qa_texts = []
  for _, _, question, options, _ in items:
    for option in options:
      qa_texts.append(question.replace("_", option) if "_" in question
                      else f"{question} {option}")
  qas = tokenizer.encode_lines(qa_texts)
  for i in range(n):
    for c in range(N_CHOICE):
      qa = list(qas[i * N_CHOICE + c])[-max_qa_length:]
      context = list(contexts[i])[:max(budget - len(qa), 0)]
      ids[i, c], seg[i, c], mask[i, c], _, _ = layouts.pack(model_type, tokenizer, context, qa,
                                                            max_seq_length)
  return {"input_ids": ids, "seg_ids": seg, "input_mask": mask,
          "label": np.array([it[4] for it in items], np.int32),
          "level": np.array([LEVELS.index(it[0]) for it in items], np.int32)}


class RaceTask(classifier_task.ClassifierTask):
  """Multiple choice over 4 options; accuracy on middle, high and all."""

  def __init__(self, config, model_config, run_config, init_checkpoint=None, max_qa_length=128):
    self.max_qa_length = max_qa_length
    self._cache = {}
    spec = classifier_data.TaskSpec("race", ("A", "B", "C", "D"), {}, {})
    super().__init__(config, model_config, run_config, init_checkpoint, spec=spec)
    self.main_metric = "accuracy"
    self.tokens_per_step = config.train_batch_size * N_CHOICE * config.max_seq_length

  def _features(self, split):
    if split not in self._cache:
      items = read_split(self.config.data_dir, split)
      self._cache[split] = encode(self.tokenizer, items, self.config.max_seq_length,
                                  self.max_qa_length, self.config.model_type)
    return self._cache[split]

  def _dataset(self, split, batch_size, train):
    feats = self._features(split)
    ds = tf.data.Dataset.from_tensor_slices({k: v for k, v in feats.items() if k != "level"})
    if train:
      ds = ds.shuffle(10_000, seed=self.config.seed).repeat()
    return ds.batch(batch_size, drop_remainder=train)

  def build_model(self):
    if self.config.model_type == "mpnet":
      return mpnet_models.MPNetRaceModel(self.model_config)
    return XLNetRaceModel(self.model_config, self.run_config,
                          summary_type=self.config.summary_type, use_proj=self.config.use_proj)

  def evaluate(self, model, split=None):
    split = split or self.config.eval_split
    preds, labels = self.predict(model, split)
    level = self._features(split)["level"]
    out = {"accuracy": metrics.accuracy(labels, preds)}
    for k, name in enumerate(LEVELS):
      if (level == k).any():
        out[f"accuracy_{name}"] = metrics.accuracy(labels[level == k], preds[level == k])
    return out
