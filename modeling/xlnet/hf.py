"""XLNet weights in and out of the Hugging Face layout (transformers' XLNet* classes).

Hugging Face state-dict names are mapped to the release names each model's `tf1_variables()`
returns (modeling/xlnet/release_names.py), so loading goes through the same checks as a release
checkpoint (`release_checkpoint.assign_named`). The correspondence (HF -> release, `transformer.`
prefix on every class but XLNetModel):

  word_embedding.weight [V, D]            model/transformer/word_embedding/lookup_table
  mask_emb [1, 1, D]                      model/transformer/mask_emb/mask_emb
  layer.{l}.rel_attn.{q,k,v,o,r} [D,H,d]  .../layer_{l}/rel_attn/{q,k,v,o,r}/kernel
  layer.{l}.rel_attn.r_{w,r,s}_bias [H,d] .../r_{w,r,s}_bias[l] (HF is always per layer)
  layer.{l}.rel_attn.seg_embed [2, H, d]  .../seg_embed[l]
  layer.{l}.rel_attn.layer_norm, ff.layer_norm      .../rel_attn/LayerNorm, ff/LayerNorm
  layer.{l}.ff.layer_{1,2} (weight [out, in])       .../ff/layer_{1,2} (kernel [in, out])
  lm_loss.bias (weight tied)              model/lm_loss/bias                 XLNetLMHeadModel
  sequence_summary.summary + logits_proj  sequnece_summary/summary + classification_/
                                          regression_{task}/logit  (ForSequenceClassification)
                                          or logits/dense (RACE; ForMultipleChoice)
  start_logits.dense, end_logits.{dense_0, LayerNorm, dense_1}, answer_class.{dense_0,
  dense_1}                                the SQuAD head's scopes (ForQuestionAnswering)

Activations: HF's "gelu" is the erf form (ours "gelu_erf"), "gelu_new" the tanh form the
release calls "gelu" (modeling/xlnet/config.py HF_ACTIVATIONS). MPNet's are
modeling/mpnet/hf.py.
"""

import numpy as np

from data_utils import fileio
from modeling import checkpoint, hf_io
from modeling.xlnet import hf_names
from modeling.xlnet.config import HF_ACTIVATIONS, TO_HF_ACTIVATIONS
from modeling.xlnet import release_checkpoint

PREFIX = hf_names.PREFIX


# ---- names ---------------------------------------------------------------------------------
encoder_rows = hf_names.encoder_rows


def head_rows(model, source_architecture=None):
  """Rows (as encoder_rows, HF names at the top level) of `model`'s head that has a Hugging
  Face equivalent: what the model declares (`hf_head_rows`), so a task model of any head is
  read and written without this module knowing its class."""
  rows = getattr(model, "hf_head_rows", None)
  if rows is None:
    raise ValueError(f"{type(model).__name__} is not an XLNet model of this project")
  return rows(source_architecture)


def architecture(model):
  """The transformers class an export of `model` loads into; ValueError (one line) when its
  layout has none. Needs no weights (a check before training)."""
  model.check_hf_export()
  c = model.config
  if c.d_head * c.n_head != c.d_model:
    raise ValueError(f"--export_hf_dir: Hugging Face's XLNet needs d_head = d_model / n_head "
                     f"(here {c.d_head} x {c.n_head} != {c.d_model})")
  return model.hf_architecture


# ---- loading -------------------------------------------------------------------------------
class HFLoadReport(checkpoint.LoadReport):
  """LoadReport with HF names for what was not used, and notes (config differences)."""

  def __init__(self, report, notes):
    super().__init__(report.loaded, report.fresh, report.unused)
    self.notes = notes

  def summary(self):
    return super().summary() + "".join(f"; {note}" for note in self.notes)


def _strip_prefix(weights, path):
  if f"{PREFIX}word_embedding.weight" in weights:
    return {k[len(PREFIX):] if k.startswith(PREFIX) else k: v for k, v in weights.items()}
  if "word_embedding.weight" in weights:
    return dict(weights)
  raise ValueError(f"{path}: not a Hugging Face XLNet layout (no word_embedding.weight or "
                   f"transformer.word_embedding.weight)")


def _to_release(weights, rows, untie_r, path):
  """{release name: array} from HF `weights` (prefix stripped); returns it and the HF names
  used. A layered variable is present only when every layer is."""
  arrays, used, layered = {}, set(), {}
  for hf, release, layer, transpose in rows:
    if hf not in weights:
      continue
    value = np.asarray(weights[hf], np.float32)
    if layer is None:
      arrays[release] = value.T if transpose else value
      used.add(hf)
    else:
      layered.setdefault(release, {})[layer] = (hf, value)
  n_layer = sum(1 for r in rows if r[1] == f"{hf_names.T}/seg_embed")
  for release, per_layer in layered.items():
    if len(per_layer) != n_layer:
      continue
    used.update(hf for hf, _ in per_layer.values())
    stacked = np.stack([per_layer[i][1] for i in range(n_layer)])
    if not untie_r and not release.endswith("seg_embed"):
      if not all(np.array_equal(stacked[0], s) for s in stacked[1:]):
        raise ValueError(f"{path}: the layers' {release.rsplit('/', 1)[1]} differ, but the "
                         "model's config has untie_r false (use untie_r true)")
      stacked = stacked[0]
    arrays[release] = stacked
  return arrays, used


def _notes(model, config):
  notes = []
  act = config.get("ff_activation")
  if act is not None and HF_ACTIVATIONS.get(act) != model.config.ff_activation:
    notes.append(f"config.json's ff_activation {act!r} (ours {HF_ACTIVATIONS.get(act)!r}) "
                 f"differs from the model's {model.config.ff_activation!r}: outputs will "
                 "differ from Hugging Face's (pass its config.json as --model_config_path)")
  summary = getattr(model, "summary_type", None)
  if summary and config.get("summary_type", summary) != summary:
    notes.append(f"config.json's summary_type {config['summary_type']!r} differs from the "
                 f"model's {summary!r}")
  return notes


def load_hf(model, path, require_all=False):
  """Loads a Hugging Face XLNet directory (config.json + model.safetensors or
  pytorch_model.bin; XLNetModel, XLNetLMHeadModel or an XLNetFor* head) into `model`.

  The encoder must be complete; heads without a counterpart in the file are left initialised
  and listed (unless `require_all`). Mis-shaped weights, a different layer count and files
  that are not an XLNet layout are one-line ValueErrors naming the file. Returns an
  HFLoadReport (`unused` holds HF names).
  """
  config = hf_io.read_config(path)
  if config.get("model_type", "xlnet") != "xlnet":
    raise ValueError(f"{fileio.join(path, 'config.json')}: a Hugging Face "
                     f"{config['model_type']!r} model, not XLNet")
  source = hf_io.weights_file(path)
  weights = _strip_prefix(hf_io.read_weights(path), source)
  model.ensure_built()
  n_layer = model.config.n_layer
  if f"layer.{n_layer}.ff.layer_1.weight" in weights:
    extra = sum(1 for k in weights if k.endswith(".ff.layer_1.weight"))
    raise ValueError(f"{source}: has {extra} layers, the model {n_layer}")
  architectures = config.get("architectures") or [None]
  rows = encoder_rows(n_layer) + head_rows(model, architectures[0])
  arrays, used = _to_release(weights, rows, model.config.untie_r, source)
  labels = {}
  for hf, release, layer, _ in rows:
    if layer is None:
      labels[release] = hf
    else:
      labels.setdefault(release, hf.replace(f"layer.{layer}.", "layer.*."))
  report = release_checkpoint.assign_named(model, {k: v.shape for k, v in arrays.items()},
                                   arrays.__getitem__, source, require_all,
                                   label=lambda n: labels.get(n, n))
  tied = weights.get("lm_loss.weight")
  if tied is not None and np.array_equal(tied, weights["word_embedding.weight"]):
    used.add("lm_loss.weight")
  report.unused = sorted(set(weights) - used)
  report.fresh = [labels.get(n, n) for n in report.fresh]
  return HFLoadReport(report, _notes(model, config))


# ---- export --------------------------------------------------------------------------------
def hf_config(model, arch, labels=None):
  """config.json keys of transformers' XLNetConfig for `model` (architecture `arch`)."""
  c, r = model.config, model.run_config
  data = dict(model_type="xlnet", architectures=[arch], vocab_size=c.n_token, d_model=c.d_model,
              n_layer=c.n_layer, n_head=c.n_head, d_inner=c.d_inner,
              ff_activation=TO_HF_ACTIVATIONS[c.ff_activation], attn_type=r.attn_type,
              initializer_range=r.init_std, layer_norm_eps=1e-12, dropout=r.dropout,
              mem_len=r.mem_len or None, reuse_len=r.reuse_len or None, bi_data=False,
              clamp_len=r.clamp_len, same_length=r.same_length, pad_token_id=5,
              bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)
  data.update(model.hf_config_keys(labels))
  return data


def export_hf(model, path, log=print, labels=None):
  """Writes `model` to directory `path` in the Hugging Face layout: config.json +
  model.safetensors (atomically), loadable by transformers' `architecture(model)` class with
  no missing and no unexpected keys. `labels`: class names of a classifier (id2label).
  Returns `path`."""
  arch = architecture(model)
  model.ensure_built()
  variables = model.tf1_variables()
  values = {name: np.asarray(var.numpy(), np.float32) for name, var in variables.items()}
  tensors, exported = {}, set()
  for rows, prefix in ((encoder_rows(model.config.n_layer), model.hf_encoder_prefix),
                       (head_rows(model), "")):
    for hf, release, layer, transpose in rows:
      value = values[release]
      if layer is not None and (model.config.untie_r or release.endswith("seg_embed")):
        value = value[layer]      # this layer's row (shared biases are copied to every layer)
      tensors[prefix + hf] = value.T if transpose else value
      exported.add(release)
  hf_io.write_model_dir(path, tensors, hf_config(model, arch, labels))
  left = sorted(set(variables) - exported)
  log(f"exported {arch} (Hugging Face layout) to {path}"
      + (f"; not exported (no Hugging Face equivalent): {', '.join(left)}" if left else ""))
  return path
