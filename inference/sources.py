"""What a path given to `inference.from_pretrained` holds, read from its files alone (nothing is
downloaded; local paths and tf.io.gfile URLs such as gs://).

  a fine-tuning run directory   run.json (written by run_classifier.py / run_race.py /
                                run_squad.py): the family (--model_type), the model config's
                                contents, the task (labels), the tokenizer (by its recorded
                                fingerprint) and the row length; weights from best/, else the
                                last checkpoint in ckpt/
  a pretraining run directory   run.json of run_pretrain.py: read through its export/
  a pretraining export          export.json beside xlnet_config.json + xlnet_model.ckpt.* (XLNet)
                                or config.json + model.safetensors (MPNet); its step and the
                                tokenizer it records
  a Hugging Face directory      config.json (model_type xlnet | mpnet) + model.safetensors or
                                pytorch_model.bin: a *ForSequenceClassification head (id2label)
                                or a base / pretraining model (an encoder)
  a released XLNet checkpoint   xlnet_config.json + xlnet_model.ckpt.* + spiece.model

`describe(path, overrides)` returns a `Found`: everything needed to build the model and its
tokenizer, and nothing loaded yet. Every refusal is one ValueError / FileNotFoundError line
naming the path.
"""

import dataclasses

from data_utils import fileio
from finetuning import classifier_data
from finetuning import tagging
from modeling import checkpoint, hf_io, tokenizer_files

RUN_FILE = "run.json"
EXPORT_FILE = "export.json"
TASK_FILE = "task.json"          # a classification run's task: finetuning/classifier_task.py
FINETUNING_SCRIPTS = ("run_classifier.py", "run_race.py", "run_squad.py", "run_tagger.py",
                      "run_pairs.py")
# Hugging Face classifiers this project reads: architecture -> a weight its head must hold.
HF_CLASSIFIERS = {"XLNetForSequenceClassification": "logits_proj.weight",
                  "MPNetForSequenceClassification": "classifier.out_proj.weight"}
RELEASE_CONFIG = "xlnet_config.json"
# How far above a fine-tuning run its tokenizer file is looked for (by its recorded sha256):
# the quickstart keeps it at OUT/tokenizer/, runs at OUT/finetune/TASK/ARM/seedN.
TOKENIZER_SEARCH_LEVELS = 4


@dataclasses.dataclass
class Found:
  """What `describe` read. `config`: the model config (a dict of its keys, or a file path);
  `weights`: a checkpoint prefix, a Hugging Face directory or a release prefix; `head`:
  "classifier" when the weights hold a classification / regression head, else None (only the
  encoder is used); `labels`: class names in the head's output order (() for regression)."""
  family: str
  kind: str                        # words for the log line
  config: object
  weights: str
  tokenizer: object                # modeling/tokenizer_files.Source
  head: str = None
  labels: tuple = ()
  regression: bool = False
  step: int = None
  run_settings: dict = dataclasses.field(default_factory=dict)   # XLNet's RunConfig keys
  summary_type: str = "last"
  use_proj: bool = True
  max_length: int = None
  native: bool = False             # weights are a native TF2 checkpoint of the task model
  task_model: str = "classifier"   # the fine-tuning task's model: classifier | race | squad
  head_spec: dict = None           # a model of modeling/heads.py: its head's spec ("tagger",
                                   # "embedder" in `head`)
  squad_top: tuple = (5, 5)


def _json(path, what):
  data = fileio.read_json(path, what)
  if not isinstance(data, dict):
    raise ValueError(f"{path}: not a JSON object")
  return data


def describe(path, overrides=None):
  """The `Found` of PATH (see the module docstring); `overrides`: from_pretrained's keyword
  arguments (sp_model, vocab_file, uncased, max_length, model_type)."""
  overrides = dict(overrides or {})
  path = str(path).rstrip("/") or str(path)
  if not fileio.exists(path):
    raise FileNotFoundError(f"{path}: not found")
  if not fileio.isdir(path):
    raise ValueError(f"{path}: a file; pass a directory (a run directory, an export, a Hugging "
                     "Face model directory or a released XLNet checkpoint directory)")
  if fileio.exists(fileio.join(path, RUN_FILE)):
    found = _run_dir(path, overrides)
  elif fileio.exists(fileio.join(path, "saved_model.pb")):
    raise ValueError(f"{path}: a SavedModel export, which names no label set; pass the run "
                     "directory or Hugging Face export it was made from, or call "
                     "tf.saved_model.load(PATH).signatures['serving_default'] on raw strings")
  elif hf_io.is_model_dir(path):
    found = _hf_dir(path, overrides)
  elif fileio.exists(fileio.join(path, RELEASE_CONFIG)):
    found = _release_dir(path, overrides)
  else:
    raise ValueError(f"{path}: not a model directory this project reads (no run.json, "
                     "config.json + model.safetensors / pytorch_model.bin, or xlnet_config.json "
                     "+ a checkpoint)")
  if overrides.get("max_length"):
    found.max_length = int(overrides["max_length"])
  return found


# ---- tokenizers ---------------------------------------------------------------------------------
def _given_tokenizer(overrides):
  return tokenizer_files.Source.of(overrides.get("sp_model"), overrides.get("vocab_file"),
                                   overrides.get("uncased", False))


def _directory_tokenizer(path, overrides, uncased_default=False):
  """The tokenizer of a model directory: given (sp_model= / vocab_file=), recorded
  (tokenizer_info.json of this project's exports), else spiece.model (its case from a Hugging
  Face tokenizer_config.json's do_lower_case) or vocab.txt beside the weights."""
  given = _given_tokenizer(overrides)
  if given is not None:
    return given
  recorded = tokenizer_files.read(path)
  if recorded is not None:
    source = recorded[0]
    if "uncased" in overrides and source.kind == tokenizer_files.SENTENCEPIECE:
      source = dataclasses.replace(source, uncased=bool(overrides["uncased"]))
    return source
  config_path = fileio.join(path, "tokenizer_config.json")
  uncased = uncased_default
  if fileio.exists(config_path):
    uncased = bool(_json(config_path, "tokenizer config").get("do_lower_case", uncased))
  uncased = bool(overrides.get("uncased", uncased))
  for kind, name in ((tokenizer_files.SENTENCEPIECE, "spiece.model"),
                     (tokenizer_files.WORDPIECE, "vocab.txt")):
    file = fileio.join(path, name)
    if fileio.exists(file):
      return tokenizer_files.Source(kind, file, uncased or kind == tokenizer_files.WORDPIECE)
  raise ValueError(f"{path}: no tokenizer (tokenizer_info.json, spiece.model or vocab.txt); pass "
                   "sp_model=PATH (SentencePiece) or vocab_file=PATH (MPNet's WordPiece)")


def _find_by_fingerprint(run_dir, name, fingerprint):
  """A file called NAME whose size and sha256 are FINGERPRINT's, in RUN_DIR or a directory up
  to TOKENIZER_SEARCH_LEVELS above it, or one level below either; None when there is none."""
  from data_utils.fingerprint import file_sha256
  directory = run_dir
  for _ in range(TOKENIZER_SEARCH_LEVELS + 1):
    for candidate in sorted(set(fileio.glob(fileio.join(directory, name))
                                + fileio.glob(fileio.join(directory, "*", name)))):
      if fileio.size(candidate) == fingerprint.get("size") and \
         file_sha256(candidate) == fingerprint.get("sha256"):
        return candidate
    parent = fileio.dirname(directory)
    if not parent or parent == directory:
      break
    directory = parent
  return None


def _run_tokenizer(run_dir, record, settings, overrides):
  """A fine-tuning run's tokenizer: given, or the file its run.json names (`paths`) or
  fingerprints (found beside the run or above it, e.g. the quickstart's OUT/tokenizer/)."""
  given = _given_tokenizer(overrides)
  if given is not None:
    return given
  uncased = bool(overrides.get("uncased", settings.get("uncased", False)))
  paths = record.get("paths") if isinstance(record.get("paths"), dict) else {}
  for flag, kind, name in (("vocab_file", tokenizer_files.WORDPIECE, "vocab.txt"),
                           ("sp_model", tokenizer_files.SENTENCEPIECE, "spiece.model")):
    fingerprint = settings.get(flag)
    if not isinstance(fingerprint, dict):
      continue
    from data_utils.fingerprint import file_sha256
    named = paths.get(flag)
    if named and fileio.exists(named) and file_sha256(named) == fingerprint.get("sha256"):
      return tokenizer_files.Source(kind, named, uncased or kind == tokenizer_files.WORDPIECE)
    file = _find_by_fingerprint(run_dir, name, fingerprint)
    if file is None and name == "spiece.model":
      file = _find_by_fingerprint(run_dir, "*.model", fingerprint)
    if file is not None:
      return tokenizer_files.Source(kind, file, uncased or kind == tokenizer_files.WORDPIECE)
    raise ValueError(f"{fileio.join(run_dir, RUN_FILE)}: the run's --{flag} (sha256 "
                     f"{fingerprint.get('sha256', '?')[:12]}) is not beside the run; pass "
                     f"{flag}=PATH")
  raise ValueError(f"{fileio.join(run_dir, RUN_FILE)}: records no tokenizer; pass sp_model=PATH "
                   "or vocab_file=PATH")


# ---- run directories ------------------------------------------------------------------------------
def _read_run(run_dir):
  from training import run_record
  record = run_record.read(run_dir)
  return record, record["settings"]


def _run_dir(run_dir, overrides):
  record, settings = _read_run(run_dir)
  script = record.get("script")
  if script == "run_pretrain.py":
    export = fileio.join(run_dir, "export")
    if not fileio.exists(fileio.join(export, EXPORT_FILE)):
      raise ValueError(f"{run_dir}: a pretraining run without its export/ (written when the run "
                       "ends); pass one of its checkpoints as --init_checkpoint to a fine-tuning "
                       "script, or let the run finish")
    found = _hf_dir(export, overrides) if hf_io.is_model_dir(export) else \
        _release_dir(export, overrides)
    found.kind = "pretraining run (its export/)"
    return found
  if script not in FINETUNING_SCRIPTS:
    raise ValueError(f"{fileio.join(run_dir, RUN_FILE)}: written by {script!r}, not one of "
                     f"{', '.join(FINETUNING_SCRIPTS + ('run_pretrain.py',))}")
  family = overrides.get("model_type") or settings.get("model_type") or "xlnet"
  config = settings.get("model_config")
  if not isinstance(config, dict):
    raise ValueError(f"{fileio.join(run_dir, RUN_FILE)}: holds no model_config")
  weights, step = _run_weights(run_dir)
  found = Found(family=family, kind=f"fine-tuning run ({script})", config=dict(config),
                weights=weights, step=step,
                tokenizer=_run_tokenizer(run_dir, record, settings, overrides),
                run_settings={k: settings[k] for k in ("attn_type", "clamp_len", "same_length")
                              if k in settings},
                summary_type=settings.get("summary_type") or "last",
                use_proj=bool(settings.get("use_summ_proj", True)),
                max_length=settings.get("max_seq_length"), native=True)
  if script == "run_classifier.py":
    found.head = "classifier"
    found.labels, found.regression = _run_labels(run_dir, settings)
  elif script == "run_tagger.py":
    labels_file = fileio.join(run_dir, tagging.LABELS_FILE)
    if not fileio.exists(labels_file):
      raise ValueError(f"{run_dir}: a tagging run without its {tagging.LABELS_FILE} (written "
                       "when training ends)")
    labels = fileio.read_json(labels_file, "tagging labels")
    if not isinstance(labels, list) or not labels:
      raise ValueError(f"{labels_file}: not a list of labels")
    _tagger(found, [str(l) for l in labels])
  elif script == "run_pairs.py":
    found.head, found.task_model = "embedder", "head"
    found.head_spec = {"type": "sentence_pooler", "mode": settings.get("pooling") or "mean"}
  else:          # RACE / SQuAD: their task model is built to read the checkpoint; encoder only
    found.task_model = "race" if script == "run_race.py" else "squad"
    found.squad_top = (settings.get("start_n_top", 5), settings.get("end_n_top", 5))
  return found


def _run_labels(run_dir, settings):
  """(labels, regression) of a classification run: its task.json's (written at the end of
  training by finetuning/classifier_task.write_task_file: the labels in the model's output
  order, your own data's too), else run.json's --labels, else its --task_name's."""
  task_file = fileio.join(run_dir, TASK_FILE)
  if fileio.exists(task_file):
    task = _json(task_file, "task record")
    if isinstance(task.get("labels"), list):
      return tuple(str(l) for l in task["labels"]), bool(task.get("regression"))
  labels = settings.get("labels")
  if isinstance(labels, str):
    labels = [l for l in labels.split(",") if l]
  if isinstance(labels, (list, tuple)) and labels:
    return tuple(str(l) for l in labels), False
  if settings.get("regression"):
    return (), True
  try:
    spec = classifier_data.get_task(str(settings.get("task_name")))
  except ValueError as e:
    raise ValueError(f"{fileio.join(run_dir, RUN_FILE)}: {e}; its labels are unknown") from None
  return tuple(spec.labels), spec.is_regression


def _run_weights(run_dir):
  """(checkpoint prefix, step): best/'s, else the last in ckpt/ (checkpoint.run_checkpoint,
  the rule --init_checkpoint=RUN_DIR follows)."""
  found = checkpoint.run_checkpoint(run_dir)
  if found is None:
    raise ValueError(f"{run_dir}: a run directory with no checkpoint yet (neither best/ nor "
                     f"{checkpoint.CHECKPOINT_DIR}/)")
  record, best = checkpoint.read_best(fileio.join(run_dir, "best"))
  return found[0], (record.get("step") if best == found[0] else checkpoint.latest_step(run_dir))


# ---- exports, Hugging Face and release directories --------------------------------------------------
def _export_step(path):
  file = fileio.join(path, EXPORT_FILE)
  return _json(file, "export record").get("step") if fileio.exists(file) else None


def _hf_dir(path, overrides):
  config = hf_io.read_config(path)
  family = overrides.get("model_type") or config.get("model_type")
  if family not in ("xlnet", "mpnet"):
    raise ValueError(f"{fileio.join(path, 'config.json')}: model_type {family!r}; this project "
                     "reads XLNet and MPNet models")
  architecture = (config.get("architectures") or [None])[0]
  is_export = fileio.exists(fileio.join(path, EXPORT_FILE))
  found = Found(family=family, config=fileio.join(path, "config.json"), weights=path,
                kind="pretraining export" if is_export else
                f"Hugging Face directory ({architecture or 'no architecture named'})",
                tokenizer=_directory_tokenizer(path, overrides), step=_export_step(path),
                run_settings={k: config[k] for k in ("attn_type", "clamp_len", "same_length")
                              if config.get(k) is not None},
                summary_type=config.get("summary_type") or "last",
                use_proj=bool(config.get("summary_use_proj", True)))
  if architecture in HF_CLASSIFIERS:
    weights = hf_io.read_weights(path)
    if not any(k.endswith(HF_CLASSIFIERS[architecture]) for k in weights):
      raise ValueError(f"{hf_io.weights_file(path)}: an {architecture} without its head's "
                       f"{HF_CLASSIFIERS[architecture]}")
    found.head = "classifier"
    found.regression = config.get("problem_type") == "regression"
    found.labels = () if found.regression else tuple(hf_io.config_labels(config))
  elif architecture and architecture.endswith("ForTokenClassification"):
    _tagger(found, hf_io.config_labels(config))
  return found


def _tagger(found, labels):
  """`found` as a token tagger over `labels` (modeling/heads.TokenTagger)."""
  found.head, found.task_model, found.labels = "tagger", "head", tuple(labels)
  found.head_spec = {"type": "token_tagger", "n_class": len(labels), "labels": list(labels)}


def _release_dir(path, overrides):
  prefixes = sorted(p[:-len(".index")] for p in fileio.glob(fileio.join(path, "*.ckpt.index")))
  if not prefixes:
    raise ValueError(f"{path}: {RELEASE_CONFIG} but no checkpoint (*.ckpt.index)")
  if len(prefixes) > 1:
    raise ValueError(f"{path}: holds {len(prefixes)} checkpoints "
                     f"({', '.join(fileio.basename(p) for p in prefixes)}); pass a directory "
                     "holding one")
  is_export = fileio.exists(fileio.join(path, EXPORT_FILE))
  return Found(family=overrides.get("model_type") or "xlnet",
               kind="pretraining export" if is_export else "released XLNet checkpoint",
               config=fileio.join(path, RELEASE_CONFIG), weights=prefixes[0],
               tokenizer=_directory_tokenizer(path, overrides), step=_export_step(path))
