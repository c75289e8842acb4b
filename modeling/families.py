"""The model families, keyed by --model_type: what differs between XLNet and MPNet when a task
builds and initialises its model, so that the tasks never ask which family they hold.

  family = families.get(model_type)      # "xlnet" | "mpnet"; anything else: a one-line error
  family.config_from_json(path)          # XLNetConfig | MPNetConfig (HF config.json), checked:
                                         # unknown keys, ranges, the other family's file
  family.check_rows(config, seq_len, flag, pad_id, vocab_size, source)   # the config against
                                         # the longest row and the tokenizer (one-line errors)
  family.vocab_size(config)              # its vocabulary size (n_token | vocab_size)
  family.classifier(model_config, run_config, n_class, task_name, regression, summary_type,
                    use_proj)            # [B, n_class] logits ([B] for regression)
  family.race_model(model_config, run_config, summary_type, use_proj)   # [B, 4] logits
  family.squad_model(model_config, run_config, start_n_top, end_n_top)  # SQuAD beam outputs
  family.with_head(model_config, run_config, spec)   # the encoder under any head of
                                         # modeling/heads.py ({"type": "token_tagger", ...})
  family.initialize(model, path, log)    # --init_checkpoint into a task model
  family.encode_rows(encoder, input_ids, seg_ids, input_mask)  # (hidden, pooled token)
  family.hf                              # its Hugging Face module: architecture(model),
                                         # export_hf(model, path, log, labels)

A model says its family (`model.family`, a class attribute of each family's models), so
  families.hf_architecture(model)        # the transformers class of an export, or ValueError
  families.export_hf(model, path, log, labels)
need no question about which family they hold.

XLNet's models take the release's summary settings and a RunConfig (dropout, attention
dropout, ...); MPNet's take their own config (its dropout lives there, as in HF) and, of the
RunConfig, only `recompute` (a constructor argument).
Adding a family: one class here with these methods and one line in FAMILIES.
"""

from data_utils import outputs
from modeling import loading
from modeling import tokenizer_files
from modeling.mpnet import hf as mpnet_hf
from modeling.mpnet import models as mpnet_models
from modeling.mpnet.config import MPNetConfig
from modeling.xlnet import hf as xlnet_hf
from modeling.xlnet import models
from modeling.xlnet.config import XLNetConfig


class XLNet:
  name = "xlnet"
  hf = xlnet_hf

  @staticmethod
  def config_from_json(path):
    return XLNetConfig.from_json(path)

  @staticmethod
  def vocab_size(config):
    return config.n_token

  @staticmethod
  def check_rows(config, seq_len=None, flag="--max_seq_length", pad_id=None, vocab_size=None,
                 source=None):
    """XLNet's positions are relative (no table to outgrow) and any pad id works: only the
    tokenizer's vocabulary must fit the embedding."""
    del seq_len, flag, pad_id
    _check_vocab_size(config.n_token, "n_token", vocab_size, source)

  @staticmethod
  def classifier(model_config, run_config, n_class, task_name, regression, summary_type,
                 use_proj):
    return models.XLNetClassifier(model_config, run_config, n_class=n_class, task_name=task_name,
                                  regression=regression, summary_type=summary_type,
                                  use_proj=use_proj)

  @staticmethod
  def race_model(model_config, run_config, summary_type, use_proj):
    return models.XLNetRaceModel(model_config, run_config, summary_type=summary_type,
                                 use_proj=use_proj)

  @staticmethod
  def squad_model(model_config, run_config, start_n_top, end_n_top):
    return models.XLNetSquadModel(model_config, run_config, start_n_top=start_n_top,
                                  end_n_top=end_n_top)

  @staticmethod
  def with_head(model_config, run_config, spec):
    return models.XLNetWithHead(model_config, run_config, head=spec)

  @staticmethod
  def encode_rows(encoder, input_ids, seg_ids, input_mask):
    """(hidden [B, L, D], summary [B, D]): the content stream and its <cls> (last: the rows
    are left padded), what the "last" summary pools."""
    h = encoder(input_ids, seg_ids=seg_ids, input_mask=input_mask, training=False)
    return h["content_output"], h["content_output"][:, -1]

  @staticmethod
  def initialize(model, path, log):
    """A release / native checkpoint or a Hugging Face XLNet directory (loading.py)."""
    log(f"init from {path}: {loading.load_checkpoint(model, path)}")


class MPNet:
  name = "mpnet"
  hf = mpnet_hf

  @staticmethod
  def config_from_json(path):
    return MPNetConfig.from_json(path)

  @staticmethod
  def vocab_size(config):
    return config.vocab_size

  @staticmethod
  def check_rows(config, seq_len=None, flag="--max_seq_length", pad_id=None, vocab_size=None,
                 source=None):
    """The position table must hold the longest row (`seq_len` tokens, numbered from the pad id
    on), the config's pad id must be the tokenizer's (`pad_id`: it numbers every position),
    the tokenizer's vocabulary must fit the embedding."""
    where = f"{source}: " if source else ""
    if pad_id is not None and config.pad_token_id != pad_id:
      raise ValueError(f"{where}pad_token_id={config.pad_token_id} but the tokenizer pads with "
                       f"id {pad_id} (SentencePiece: <pad> = 5; MPNet's vocab.txt: 1), and the "
                       f"pad id numbers every position: set \"pad_token_id\": {pad_id}")
    if seq_len:
      config.check_seq_len(seq_len, flag, source)
    _check_vocab_size(config.vocab_size, "vocab_size", vocab_size, source)

  @staticmethod
  def classifier(model_config, run_config, n_class, task_name, regression, summary_type,
                 use_proj):
    del task_name, summary_type, use_proj   # <s> pooled; dropout in the config
    return mpnet_models.MPNetClassifier(model_config, n_class=n_class, regression=regression,
                                        recompute=_recompute(run_config))

  @staticmethod
  def race_model(model_config, run_config, summary_type, use_proj):
    del summary_type, use_proj
    return mpnet_models.MPNetRaceModel(model_config, recompute=_recompute(run_config))

  @staticmethod
  def squad_model(model_config, run_config, start_n_top, end_n_top):
    return mpnet_models.MPNetSquadModel(model_config, start_n_top=start_n_top,
                                        end_n_top=end_n_top, recompute=_recompute(run_config))

  @staticmethod
  def with_head(model_config, run_config, spec):
    return mpnet_models.MPNetWithHead(model_config, head=spec, recompute=_recompute(run_config))

  @staticmethod
  def encode_rows(encoder, input_ids, seg_ids, input_mask):
    """(hidden [B, L, D], summary [B, D]): the encoder's output and its <s> (first), what
    MPNetClassifier pools; seg_ids are not used."""
    del seg_ids
    h = encoder(input_ids, input_mask=input_mask, training=False)
    return h, h[:, 0]

  @staticmethod
  def initialize(model, path, log):
    """A Hugging Face MPNet directory fills the encoder; else a checkpoint (loading.py)."""
    loading.initialize_mpnet(model, path, log)


def _check_vocab_size(size, key, vocab_size, source):
  if vocab_size is not None and vocab_size > size:
    where = f"{source}: " if source else ""
    raise ValueError(f"{where}{key}={size} but the tokenizer has {vocab_size} tokens")


def check_pretraining(model_type, config, seq_len, source=None):
  """Before pretraining: the records are SentencePiece with XLNet's symbols (<pad> = 5), rows of
  `seq_len` tokens (run_pretrain.py's --seq_len)."""
  from data_utils.tokenization import PAD_ID
  get(model_type).check_rows(config, seq_len, "--seq_len", pad_id=PAD_ID, source=source)


def _recompute(run_config):
  """RunConfig.recompute (False without a RunConfig, as XLNet's models default)."""
  return bool(run_config is not None and run_config.recompute)


FAMILIES = {family.name: family for family in (XLNet, MPNet)}


def get(model_type):
  """The family of --model_type (ValueError naming the flag and the choices otherwise)."""
  try:
    return FAMILIES[model_type]
  except KeyError:
    raise ValueError(f"--model_type={model_type}: expected one of "
                     f"{', '.join(FAMILIES)}") from None


def of(model):
  """The family of a model instance (its `family` attribute); ValueError for a model of none."""
  family = FAMILIES.get(getattr(model, "family", None))
  if family is None:
    raise ValueError(f"{type(model).__name__} is not a model of a registered family "
                     f"({', '.join(FAMILIES)})")
  return family


def hf_architecture(model):
  """The transformers class an --export_hf_dir of `model` loads into; ValueError (one line)
  when its layout has none. Needs no weights (a check before training)."""
  try:
    family = of(model)
  except ValueError:
    raise ValueError(f"--export_hf_dir: no Hugging Face layout for {type(model).__name__}") \
        from None
  return family.hf.architecture(model)


def export_hf(model, path, log=print, labels=None, tokenizer=None):
  """`model` in the Hugging Face layout in directory `path` (its family's hf.export_hf), with
  its tokenizer's files (`tokenizer`: a modeling/tokenizer_files.Source; None: the export has
  none, said in the log). `path` follows the output rule (data_utils/outputs.py): absent,
  empty or an earlier Hugging Face export of this project, else a one-line ValueError."""
  hf_architecture(model)
  family = of(model)
  if tokenizer is not None:
    tokenizer_files.hf_files_check(tokenizer, family.name)
  outputs.prepare_dir(path, "export_hf_dir", outputs.HF)
  tokenizer_files.remove_stale(path, () if tokenizer is None else
                               tokenizer_files.written_names(tokenizer, family.name))
  family.hf.export_hf(model, path, log, labels=labels)
  if tokenizer is None:
    log(f"{path}: no tokenizer files (none given: --sp_model / --vocab_file)")
  else:
    tokenizer_files.write(path, tokenizer, family.name, log)
  return path
