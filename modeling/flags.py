"""absl flags shared by the entry scripts: the model and run configuration."""

from absl import flags

from modeling import families
from modeling import tokenizer_files
from modeling.run_config import RunConfig


def define_model_flags(record_defaults=False):
  """Flags every script that builds an XLNet accepts.

  record_defaults (run_pretrain.py): --reuse_len and --bi_data are also parameters of the
  pretraining records; not given, they take the records' values (the script tells them apart
  with FLAGS[name].present), so their help says so instead of showing the defaults below, which
  stay those of the fine-tuning scripts.
  """
  records = ("; default: the records' value (checked against them when given)."
             if record_defaults else ".")
  flags.DEFINE_string("model_config_path", None,
                      "xlnet_config.json of the model (released or written by this project), or "
                      "a Hugging Face XLNet config.json.")
  flags.DEFINE_string("init_checkpoint", None,
                      "Checkpoint to start from: a released TF1 checkpoint prefix, a directory "
                      "holding one, a native TF2 checkpoint written by this project, a "
                      "training run's directory (its best/, else its last checkpoint in ckpt/; "
                      "the log says which), or a Hugging Face XLNet directory (config.json + "
                      "model.safetensors or pytorch_model.bin; base model or any XLNetFor* "
                      "head).")
  flags.DEFINE_string("export_hf_dir", None,
                      "Also write the model in the Hugging Face layout here (config.json + "
                      "model.safetensors, loadable by transformers' XLNet*/MPNet* classes).")
  flags.DEFINE_float("dropout", 0.1, "Dropout rate on embeddings, attention output and FFN.")
  flags.DEFINE_float("dropatt", 0.1, "Dropout rate on attention probabilities.")
  flags.DEFINE_integer("mem_len", 0, "Tokens of memory cached per layer (0 = none).")
  flags.DEFINE_integer("reuse_len", 0, "Only the first reuse_len tokens of a segment are "
                       "cached as memory" + (" (the records' reuse part)" if record_defaults
                                             else " (0 = all)") + records)
  flags.DEFINE_bool("bi_data", False, "Forward positions for the first half of the batch, "
                    "backward for the second (batch must be even)" + records)
  if record_defaults:    # absl would print "(default: ...)": not what run_pretrain.py uses
    for name in ("reuse_len", "bi_data"):
      flags.FLAGS[name].default_as_str = None
  flags.DEFINE_integer("clamp_len", -1, "Clip relative positions to [-clamp_len, clamp_len] "
                       "(-1 = no clipping).")
  flags.DEFINE_bool("same_length", False, "(uni only) every query sees the same number of keys.")
  flags.DEFINE_enum("attn_type", "bi", ["bi", "uni"], "Bidirectional or causal attention.")
  flags.DEFINE_enum("init", "normal", ["normal", "uniform"], "Initializer of new weights.")
  flags.DEFINE_float("init_std", 0.02, "Standard deviation of the normal initializer.")
  flags.DEFINE_float("init_range", 0.1, "Half-width of the uniform initializer.")
  flags.DEFINE_bool("recompute", False, "Activation recomputation: each layer's activations "
                    "are not kept for the backward pass but recomputed there (XLNet and MPNet, "
                    "every task), trading one more forward pass per layer (about a third more "
                    "compute per step) for the memory of the layers' intermediate tensors. Same "
                    "dropout masks and gradients as without it.")
  flags.DEFINE_bool("use_bfloat16", False, "Mixed precision: bfloat16 compute, float32 weights. "
                    "For TPUs, and GPUs / CPUs with bf16 units (A100 and later, CPUs with AMX or "
                    "AVX512-BF16); float32's range, no loss scaling.")
  flags.DEFINE_bool("use_float16", False, "Mixed precision: float16 compute, float32 weights, "
                    "dynamic loss scaling (steps whose gradients overflow are skipped and counted "
                    "in the log). For GPUs without bf16 (T4, V100); excludes --use_bfloat16.")


def define_model_type_flags():
  """The fine-tuning scripts' choice of encoder and tokenizer."""
  flags.DEFINE_enum("model_type", "xlnet", ["xlnet", "mpnet"],
                    "xlnet: --model_config_path is an xlnet_config.json; mpnet: a Hugging Face "
                    "MPNet config.json, rows `<s> A </s></s> B </s>` right padded, <s> pooled, "
                    "--init_checkpoint a directory with model.safetensors (a release or "
                    "run_pretrain.py --objective=mpnet's MODEL_DIR/export).")
  flags.DEFINE_string("export_dir", None,
                      "Write a SavedModel here (after training, or from --init_checkpoint): a "
                      "serving_default signature on raw strings with tokenization in-graph, "
                      "for TF Serving, saved_model_cli and tf.saved_model.load.")
  flags.DEFINE_enum("export_padding", None, ["longest", "buckets", "max"],
                    "How long the --export_dir model's rows are: 'longest' pads each batch to "
                    "its longest row, 'buckets' to the smallest of 16, 32, 64, ... "
                    "--max_seq_length that holds it (a few shapes for XLA), 'max' to "
                    "--max_seq_length. Outputs are the same (padding is masked). Default: "
                    "'buckets' with --export_xla, else 'longest'.")
  flags.DEFINE_bool("export_xla", False, "Compile the --export_dir model's forward pass with "
                    "XLA (jit_compile; once per batch shape).")
  flags.DEFINE_string("vocab_file", None, "WordPiece vocab.txt of released MPNet weights, "
                      "instead of --sp_model (tokenized in-graph by tensorflow-text, "
                      "lower-cased).")


def model_config_from_flags(flag_values=flags.FLAGS):
  """The --model_type family's config (modeling/families.py): XLNetConfig, or MPNetConfig,
  checked (one-line ValueError naming the file): its keys and ranges, the other family's file,
  and, with --max_seq_length, an MPNet position table too short for the rows."""
  if not flag_values.model_config_path:
    raise flags.ValidationError("--model_config_path is required")
  family = families.get(getattr(flag_values, "model_type", "xlnet"))
  config = family.config_from_json(flag_values.model_config_path)
  family.check_rows(config, getattr(flag_values, "max_seq_length", None), "--max_seq_length",
                    source=flag_values.model_config_path)
  return config


def resolve_tokenizer(flag_values=flags.FLAGS, log=print):
  """The fine-tuning scripts' tokenizer, before anything reads text: with an --init_checkpoint
  that records its tokenizer (this project's exports), --sp_model / --vocab_file / --uncased
  default to it and a different one is refused in one line naming both; with one that does not
  (a release), the given tokenizer's size must be the config's vocabulary. Sets the flags to
  the tokenizer to use (modeling/tokenizer_files.py). ValueError (one line) otherwise."""
  f = flag_values
  given = tokenizer_files.Source.of(getattr(f, "sp_model", None), getattr(f, "vocab_file", None),
                                    getattr(f, "uncased", False))
  vocab_size = None
  if given is not None and f.init_checkpoint and f.model_config_path:
    family = families.get(getattr(f, "model_type", "xlnet"))
    vocab_size = family.vocab_size(family.config_from_json(f.model_config_path))
  uncased_given = "uncased" in f and f["uncased"].present
  source = tokenizer_files.resolve(f.init_checkpoint, given, uncased_given, vocab_size, log)
  if source is None or source == given:
    return source
  if source.kind == tokenizer_files.WORDPIECE:
    f.vocab_file = source.path
  else:
    f.sp_model = source.path
    if "uncased" in f:
      f.uncased = source.uncased
  return source


def tokenizer_source(flag_values=flags.FLAGS):
  """The Source of --sp_model / --vocab_file / --uncased (None without one): what an export
  (--export_hf_dir) copies beside the weights."""
  f = flag_values
  return tokenizer_files.Source.of(getattr(f, "sp_model", None), getattr(f, "vocab_file", None),
                                   getattr(f, "uncased", False))


def run_config_from_flags(flag_values=flags.FLAGS):
  f = flag_values
  return RunConfig(dropout=f.dropout, dropatt=f.dropatt, mem_len=f.mem_len,
                   reuse_len=f.reuse_len, bi_data=f.bi_data, clamp_len=f.clamp_len,
                   same_length=f.same_length, attn_type=f.attn_type, init=f.init,
                   init_range=f.init_range, init_std=f.init_std, recompute=f.recompute)
