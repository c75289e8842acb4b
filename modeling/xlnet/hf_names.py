"""The rows that pair Hugging Face XLNet state-dict names with the release's variable names:
the encoder's here, each task model's head in its own `hf_head_rows` (modeling/xlnet/models.py),
read by modeling/xlnet/hf.py in both directions (its docstring has the table).

A row is (HF name, release name, layer index or None, transpose?); a layer index means the HF
array is row `layer` of the release variable.
"""

from modeling.xlnet import release_names

T = release_names.ENCODER_SCOPE
PREFIX = "transformer."                  # the encoder's prefix in every XLNetFor* class
_LAYERED = ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")
SUMMARY = "model/sequnece_summary/summary"
EXPORTABLE_SUMMARIES = ("last", "first", "mean")


def dense(hf, release, bias=True):
  rows = [(f"{hf}.weight", f"{release}/kernel", None, True)]
  return rows + ([(f"{hf}.bias", f"{release}/bias", None, False)] if bias else [])


def layer_norm(hf, release):
  return [(f"{hf}.weight", f"{release}/gamma", None, False),
          (f"{hf}.bias", f"{release}/beta", None, False)]


def encoder_rows(n_layer):
  """The encoder's rows, HF names without `transformer.`."""
  rows = [("word_embedding.weight", f"{T}/word_embedding/lookup_table", None, False),
          ("mask_emb", f"{T}/mask_emb/mask_emb", None, False)]
  for i in range(n_layer):
    h, p = f"layer.{i}", f"{T}/layer_{i}"
    rows += [(f"{h}.rel_attn.{n}", f"{p}/rel_attn/{n}/kernel", None, False) for n in "qkvor"]
    rows += [(f"{h}.rel_attn.{n}", f"{T}/{n}", i, False) for n in _LAYERED]
    rows += layer_norm(f"{h}.rel_attn.layer_norm", f"{p}/rel_attn/LayerNorm")
    rows += layer_norm(f"{h}.ff.layer_norm", f"{p}/ff/LayerNorm")
    rows += dense(f"{h}.ff.layer_1", f"{p}/ff/layer_1") + dense(f"{h}.ff.layer_2",
                                                                 f"{p}/ff/layer_2")
  return rows


def check_summary(summary_type):
  """ValueError (one line) when Hugging Face's SequenceSummary has no `summary_type`."""
  if summary_type not in EXPORTABLE_SUMMARIES:
    raise ValueError(f"--export_hf_dir: summary_type {summary_type!r} has no Hugging Face "
                     f"equivalent (one of {', '.join(EXPORTABLE_SUMMARIES)})")
