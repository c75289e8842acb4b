"""XLNet weights in and out of the Hugging Face layout (modeling/xlnet/hf.py) against
transformers' PyTorch XLNet: HF directories load through the scripts' path
(`XLNetConfig.from_json` + `loading.load_checkpoint`) and give HF's numbers; our
models exported by `export_hf` load with `from_pretrained` (no missing or unexpected keys)
and give ours."""

import json
import sys

import numpy as np
import pytest
import tensorflow as tf

from modeling import families, loading
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.models import (XLNetClassifier, XLNetPretrainModel, XLNetRaceModel,
                             XLNetSquadModel)
from tests.reference import rel_err
from tests.script_helpers import run_main
from tests.reference_libs import require

torch = require("torch")
transformers = require("transformers")

HF_SIZE = dict(vocab_size=61, d_model=16, n_layer=2, n_head=2, d_inner=24)
TOL = 1e-5
RUN = RunConfig(dropout=0.0, dropatt=0.0)
BATCH, SEQ, N_CHOICE = 3, 9, 2


def _rows(seed, batch=BATCH, seq_len=SEQ):
  """Classification rows: LEFT padded unevenly, A <sep> B <sep> <cls> (cls last)."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(9, HF_SIZE["vocab_size"], [batch, seq_len]).astype(np.int32)
  seg = np.zeros([batch, seq_len], np.int32)
  mask = np.zeros([batch, seq_len], np.float32)
  for b in range(batch):
    n_pad = (0, 3, 5, 1)[b % 4]
    ids[b, :n_pad], seg[b, :n_pad], mask[b, :n_pad] = 5, 4, 1.0
    seg[b, n_pad + 2:] = 1
  ids[:, -1], seg[:, -1] = 3, 2
  return {"input_ids": ids, "seg_ids": seg, "input_mask": mask}


def _squad_rows(seed):
  """paragraph <sep> question <sep> <cls>, RIGHT padded unevenly, with p_mask / cls_index."""
  rows = _rows(seed, seq_len=12)
  ids, seg, mask = rows["input_ids"], rows["seg_ids"], rows["input_mask"]
  p_mask, cls_index = np.zeros_like(mask), np.zeros([BATCH], np.int32)
  for b, n_real in enumerate([12, 10, 8]):
    seg[b], mask[b] = 0, 0.0
    seg[b, 6:n_real] = 1
    ids[b, n_real - 1], seg[b, n_real - 1], cls_index[b] = 3, 2, n_real - 1
    p_mask[b, 6:n_real - 1] = 1.0
    ids[b, n_real:], seg[b, n_real:] = 5, 3
    p_mask[b, n_real:] = mask[b, n_real:] = 1.0
  return dict(rows, p_mask=p_mask, cls_index=cls_index)


def _hf_inputs(rows):
  """HF's names: attention_mask is 1 on real tokens (our input_mask is 1 on padding)."""
  t = lambda a: torch.tensor(np.asarray(a)).long()
  out = {"input_ids": t(rows["input_ids"]), "token_type_ids": t(rows["seg_ids"]),
         "attention_mask": torch.tensor(1.0 - np.asarray(rows["input_mask"]))}
  if "p_mask" in rows:
    out.update(p_mask=torch.tensor(rows["p_mask"]), cls_index=t(rows["cls_index"]))
  return out


def _to_release_beam(a, start_n_top, end_n_top):
  """HF's beam [B, end_n_top * start_n_top] (end-major) -> the release's start-major."""
  return a.reshape(len(a), end_n_top, start_n_top).transpose(0, 2, 1).reshape(len(a), -1)


# Each case: HF class, its extra config, our model (from our XLNetConfig), how to compare.
def _ours_and_hf(kind, ours, hf_model, rows):
  """(our outputs, HF's) as comparable numpy arrays."""
  with torch.no_grad():
    if kind == "race":
      flat = {k: v.reshape(BATCH, N_CHOICE, -1) for k, v in rows.items()}
      out = hf_model(**_hf_inputs(flat))
      return [ours(flat)], [out.logits.numpy()]
    out = hf_model(**_hf_inputs(rows))
  got = ours(rows)
  if kind == "base":
    return [got["content_output"]], [out.last_hidden_state.numpy()]
  if kind == "lm":
    return [got["logits"]], [out.logits.numpy()]
  if kind in ("cls", "reg"):
    return [got], [out.logits.numpy()[:, 0] if kind == "reg" else out.logits.numpy()]
  s, e = ours.start_n_top, ours.end_n_top
  np.testing.assert_array_equal(got["start_top_index"], out.start_top_index.numpy())
  np.testing.assert_array_equal(got["end_top_index"],
                                _to_release_beam(out.end_top_index.numpy(), s, e))
  return ([got["start_top_log_probs"], got["end_top_log_probs"], got["cls_logits"]],
          [np.log(out.start_top_log_probs.numpy()),
           np.log(_to_release_beam(out.end_top_log_probs.numpy(), s, e)),
           out.cls_logits.numpy()])


CASES = {   # kind: (transformers class, HF config extras, our model builder, rows)
    "base": ("XLNetModel", {}, lambda c: XLNetPretrainModel(c, RUN), _rows),
    "lm": ("XLNetLMHeadModel", {}, lambda c: XLNetPretrainModel(c, RUN), _rows),
    "cls": ("XLNetForSequenceClassification", {"num_labels": 3},
            lambda c: XLNetClassifier(c, RUN, n_class=3, task_name="sst-2"), _rows),
    "reg": ("XLNetForSequenceClassification", {"num_labels": 1},
            lambda c: XLNetClassifier(c, RUN, task_name="sts-b", regression=True), _rows),
    "race": ("XLNetForMultipleChoice", {}, lambda c: XLNetRaceModel(c, RUN),
             lambda seed: _rows(seed, batch=BATCH * N_CHOICE)),
    "squad": ("XLNetForQuestionAnswering", {"start_n_top": 3, "end_n_top": 2},
              lambda c: XLNetSquadModel(c, RUN, start_n_top=3, end_n_top=2), _squad_rows),
}


def _random_hf(kind, activation, seed):
  cls_name, extra, _, _ = CASES[kind]
  config = transformers.XLNetConfig(**HF_SIZE, ff_activation=activation, dropout=0.0,
                                    summary_last_dropout=0.0, **extra)
  torch.manual_seed(seed)
  model = getattr(transformers, cls_name)(config).eval()
  with torch.no_grad():
    for _, p in model.named_parameters():
      p.copy_(torch.randn_like(p) * 0.3)
  return model


# Each case has its own seed (the seeds a serial run used to draw), so no case's weights depend
# on which tests ran before it in the same process.
@pytest.mark.parametrize("kind,activation,fmt,seed", [
    ("base", "gelu", "safetensors", 0), ("lm", "gelu_new", "bin", 1),
    ("cls", "gelu", "safetensors", 3), ("reg", "gelu_new", "safetensors", 5),
    ("race", "gelu_new", "safetensors", 7), ("squad", "gelu", "safetensors", 9)])
@pytest.mark.slow
def test_hf_dir_loads_and_exports_with_hf_numbers(tmp_path, kind, activation, fmt, seed):
  """HF dir -> ours == HF; then ours -> export_hf -> from_pretrained: all keys, == ours."""
  hf = _random_hf(kind, activation, seed=seed)
  src = tmp_path / "hf"
  if fmt == "bin":   # transformers 5 writes only safetensors: the zip .bin by torch.save
    src.mkdir()
    hf.config.save_pretrained(str(src))
    torch.save(hf.state_dict(), str(src / "pytorch_model.bin"))
  else:
    hf.save_pretrained(str(src))
  names = set(json.loads((src / "config.json").read_text()))
  assert "vocab_size" in names
  config = XLNetConfig.from_json(str(src / "config.json"))   # --model_config_path=HF config
  assert config.ff_activation == {"gelu": "gelu_erf", "gelu_new": "gelu"}[activation]
  _, _, build, make_rows = CASES[kind]
  ours = build(config)
  ours.ensure_built()
  summary = loading.load_checkpoint(ours, str(src))      # what --init_checkpoint runs
  assert "0 initialised fresh" in summary or kind == "base", summary
  assert "0 in the checkpoint unused" in summary, summary
  rows = make_rows(10)
  got, want = _ours_and_hf(kind, ours, hf, rows)
  err = max(rel_err(g, w) for g, w in zip(got, want))
  assert err < TOL, err

  if kind == "base":
    return   # XLNetModel has no class of ours to export to (XLNetPretrainModel -> LMHead)
  out = tmp_path / "export"
  families.export_hf(ours, str(out), log=lambda _: None)
  back, info = getattr(transformers, CASES[kind][0]).from_pretrained(
      str(out), output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  got, want = _ours_and_hf(kind, ours, back.eval(), rows)
  err = max(rel_err(g, w) for g, w in zip(got, want))
  assert err < TOL, err


@pytest.mark.parametrize("kind", ["lm", "cls", "race", "squad"])
def test_our_random_model_exports_with_our_numbers(tmp_path, kind):
  """Our weights (random, untie_r false: shared biases copied to every layer; gelu_erf) ->
  export_hf -> from_pretrained with no missing/unexpected keys -> the same outputs; and back
  in through load_checkpoint."""
  config = XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=24, n_token=61,
                       untie_r=False, ff_activation="gelu_erf")
  ours = CASES[kind][2](config).ensure_built()
  rng = np.random.default_rng(7)
  for var in ours.weights:
    var.assign(rng.standard_normal(var.shape).astype(np.float32) * 0.3)
  families.export_hf(ours, str(tmp_path), log=lambda _: None, labels=("a", "b", "c"))
  hf, info = getattr(transformers, CASES[kind][0]).from_pretrained(
      str(tmp_path), output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  assert hf.config.ff_activation == "gelu"   # HF's erf form
  assert XLNetConfig.from_json(str(tmp_path / "config.json")) == XLNetConfig(
      **{**config.to_dict(), "untie_r": True})   # HF's XLNet is always per layer
  if kind == "cls":
    assert hf.config.id2label == {0: "a", 1: "b", 2: "c"}
  rows = CASES[kind][3](11)
  got, want = _ours_and_hf(kind, ours, hf.eval(), rows)
  err = max(rel_err(g, w) for g, w in zip(got, want))
  assert err < TOL, err
  again = CASES[kind][2](config).ensure_built()
  loading.load_checkpoint(again, str(tmp_path))
  for a, b in zip(ours.weights, again.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_errors_are_one_line_naming_the_file(tmp_path):
  hf = _random_hf("cls", "gelu_new", seed=3)
  hf.save_pretrained(str(tmp_path / "cls"))
  config = XLNetConfig.from_json(str(tmp_path / "cls" / "config.json"))
  # 2 labels in our model, 3 in the file: the head's shape.
  model = XLNetClassifier(config, RUN, n_class=2).ensure_built()
  with pytest.raises(ValueError, match=r"model.safetensors: .*logits_proj.weight"):
    loading.load_checkpoint(model, str(tmp_path / "cls"))
  # A RACE model from a classifier: the encoder and summary load, logits_proj stays fresh.
  race = XLNetRaceModel(config, RUN).ensure_built()
  summary = loading.load_checkpoint(race, str(tmp_path / "cls"))
  assert "2 initialised fresh (logits/dense" in summary and "2 in the checkpoint unused" in summary
  # Fewer layers in the model than in the file.
  small = XLNetClassifier(XLNetConfig(**{**config.to_dict(), "n_layer": 1}), RUN, n_class=3)
  with pytest.raises(ValueError, match="model.safetensors: has 2 layers, the model 1"):
    loading.load_checkpoint(small.ensure_built(), str(tmp_path / "cls"))
  # Not XLNet: an MPNet config, or weights without an XLNet embedding.
  (tmp_path / "mp").mkdir()
  (tmp_path / "mp" / "config.json").write_text('{"model_type": "mpnet"}')
  (tmp_path / "mp" / "model.safetensors").write_bytes(
      (tmp_path / "cls" / "model.safetensors").read_bytes())
  with pytest.raises(ValueError, match=r"mp/config.json: a Hugging Face 'mpnet' model"):
    loading.load_checkpoint(model, str(tmp_path / "mp"))
  with pytest.raises(ValueError, match=r"config.json: a Hugging Face 'mpnet' config"):
    XLNetConfig.from_json(str(tmp_path / "mp" / "config.json"))
  from safetensors.numpy import save_file
  (tmp_path / "odd").mkdir()
  save_file({"foo.weight": np.zeros([2], np.float32)}, str(tmp_path / "odd" / "model.safetensors"))
  with pytest.raises(ValueError, match="odd/model.safetensors: not a Hugging Face XLNet layout"):
    loading.load_checkpoint(model, str(tmp_path / "odd"))
  # Layouts Hugging Face has no class for.
  attn = XLNetClassifier(config, RUN, summary_type="attn")
  with pytest.raises(ValueError, match="summary_type 'attn' has no Hugging Face equivalent"):
    families.export_hf(attn, str(tmp_path / "x"))
  odd_heads = XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=4, d_inner=8, n_token=61)
  with pytest.raises(ValueError, match="d_head = d_model / n_head"):
    families.export_hf(XLNetPretrainModel(odd_heads, RUN), str(tmp_path / "y"))
  # The released xlnet_config.json keeps its meaning ("gelu" = tanh).
  release = tmp_path / "xlnet_config.json"
  release.write_text(json.dumps({"n_layer": 2, "d_model": 16, "n_head": 2, "d_head": 8,
                                 "d_inner": 24, "ff_activation": "gelu", "untie_r": True,
                                 "n_token": 61}))
  assert XLNetConfig.from_json(str(release)).ff_activation == "gelu"


@pytest.mark.slow
def test_run_classifier_from_hf_dir_exports_hf(tmp_path, capsys):
  """run_classifier.py --model_config_path=<HF config.json> --init_checkpoint=<HF dir>
  --export_hf_dir: evaluates the HF weights, exports them unchanged (no training), then
  trains 2 steps and exports the trained model, which transformers loads whole."""
  from data_utils import tokenization
  from safetensors.numpy import load_file
  data = tmp_path / "sst2"
  data.mkdir()
  rng = np.random.default_rng(0)
  words = "good bad film story music long short fine awful great".split()
  line = lambda: " ".join(rng.choice(words, 6))
  for split in ("train", "dev"):
    (data / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(
        f"{line()}\t{i % 2}\n" for i in range(8)))
  (data / "text.txt").write_text("\n".join(line() for _ in range(200)))
  sp = tokenization.train_sentencepiece([str(data / "text.txt")], str(data / "sp"), 40,
                                        lower=True)
  n_token = tokenization.Tokenizer(sp, lower=True).vocab_size   # the corpus gives 39 of 40
  config = transformers.XLNetConfig(**{**HF_SIZE, "vocab_size": n_token}, num_labels=2,
                                    dropout=0.0)
  hf = transformers.XLNetForSequenceClassification(config)
  hf.save_pretrained(str(tmp_path / "hf"))
  common = dict(task_name="sst-2", data_dir=str(data), sp_model=sp, uncased=True,
                model_config_path=str(tmp_path / "hf" / "config.json"),
                init_checkpoint=str(tmp_path / "hf"), max_seq_length=16, train_batch_size=4,
                eval_batch_size=4, dropout=0.0, dropatt=0.0, xla="off")
  run_main("run_classifier.py", model_dir=str(tmp_path / "eval"), do_eval=True,
              export_hf_dir=str(tmp_path / "out"), **common)
  assert '"accuracy"' in capsys.readouterr().out
  want, got = load_file(str(tmp_path / "hf" / "model.safetensors")), \
      load_file(str(tmp_path / "out" / "model.safetensors"))
  assert set(got) == set(want)
  for name in want:
    np.testing.assert_array_equal(got[name], want[name], err_msg=name)
  assert json.loads((tmp_path / "out" / "config.json").read_text())["id2label"] == \
      {"0": "0", "1": "1"}
  run_main("run_classifier.py", model_dir=str(tmp_path / "train"), do_train=True,
              train_steps=2, steps_per_loop=1, save_every=2, learning_rate=1e-2,
              export_hf_dir=str(tmp_path / "trained"), **common)
  back, info = transformers.XLNetForSequenceClassification.from_pretrained(
      str(tmp_path / "trained"), output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  trained = load_file(str(tmp_path / "trained" / "model.safetensors"))
  assert not np.array_equal(trained["logits_proj.weight"], want["logits_proj.weight"])


def test_pretrain_on_end_and_mpnet_export(tmp_path):
  """PretrainTask.on_end writes --export_hf_dir (XLNetLMHeadModel) beside its release-named
  export; MPNet models export through modeling/mpnet/encoder.py's names."""
  from modeling.mpnet import encoder as mpnet
  from modeling.mpnet import models as mpnet_models
  from pretraining.task import PretrainConfig, PretrainTask
  config = XLNetConfig(n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=24, n_token=61)
  task = PretrainTask(PretrainConfig(seq_len=8, reuse_len=4, num_predict=2, bsz_per_host=2,
                                     bi_data=False), config, RUN,   # no records needed
                      export_hf_dir=str(tmp_path / "hf"))
  task.on_end(XLNetPretrainModel(config, RUN).ensure_built(), str(tmp_path / "run"),
              lambda _: None)
  _, info = transformers.XLNetLMHeadModel.from_pretrained(str(tmp_path / "hf"),
                                                         output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  assert (tmp_path / "run" / "export" / "xlnet_config.json").exists()
  # Through tf.io.gfile URLs too (ram:// here, as gs://): export, then load back.
  ours = XLNetPretrainModel(config, RUN).ensure_built()
  families.export_hf(ours, "ram://hf-xlnet-export/lm", log=lambda _: None)
  again = XLNetPretrainModel(config, RUN).ensure_built()
  assert "0 initialised fresh" in loading.load_checkpoint(again, "ram://hf-xlnet-export/lm")
  for a, b in zip(ours.weights, again.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  mp = mpnet.MPNetConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                         num_attention_heads=2, intermediate_size=24, max_position_embeddings=20)
  for model, cls in ((mpnet_models.MPNetClassifier(mp, n_class=3),
                      "MPNetForSequenceClassification"),
                     (mpnet_models.MPNetRaceModel(mp), "MPNetForMultipleChoice")):
    out = str(tmp_path / cls)
    families.export_hf(model, out, log=lambda _: None)
    _, info = getattr(transformers, cls).from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], (cls, info)
  with pytest.raises(ValueError, match="SQuAD head on MPNet"):
    families.export_hf(mpnet_models.MPNetSquadModel(mp), str(tmp_path / "x"))


def test_tolerance_has_a_margin_and_catches_the_other_gelu(tmp_path, capsys):
  """The parity tests' measure (relative max difference of the outputs < TOL) is not vacuous:
  an HF classifier read through the scripts' path (HF config.json -> XLNetConfig.from_json,
  load_checkpoint) is within TOL of HF, printed with its margin; the same weights run with
  the other GELU (HF's gelu_new = tanh approximation, read as the erf form) are far outside
  TOL. Builds its own models: no dependence on other tests or their order."""
  hf = _random_hf("cls", "gelu_new", seed=5)
  hf.save_pretrained(str(tmp_path))
  config = XLNetConfig.from_json(str(tmp_path / "config.json"))
  assert config.ff_activation == "gelu"   # the release's name of the tanh form
  rows = _rows(12)
  errs = {}
  for activation in ("gelu", "gelu_erf"):
    ours = CASES["cls"][2](XLNetConfig(**{**config.to_dict(), "ff_activation": activation}))
    ours.ensure_built()
    loading.load_checkpoint(ours, str(tmp_path))
    got, want = _ours_and_hf("cls", ours, hf, rows)
    errs[activation] = rel_err(got[0], want[0])
  with capsys.disabled():
    sys.stdout.write(f"\n  HF XLNetForSequenceClassification (gelu_new) vs ours: max rel diff "
                     f"{errs['gelu']:.2e} (TOL {TOL:.0e}); read with gelu_erf: "
                     f"{errs['gelu_erf']:.2e}\n")
  assert errs["gelu"] < TOL, errs
  assert errs["gelu_erf"] > 10 * TOL, errs
