"""The tokenizer travels with every model: Hugging Face exports load with
`transformers.AutoTokenizer` and give this project's ids (XLNet: SentencePiece; MPNet: its
vocab.txt, or a SentencePiece model with XLNet's symbols), the pretraining export records the
step all its parts were made from, and fine-tuning from an export uses its tokenizer and refuses
another one."""

import json
import os

import numpy as np
import pytest
from absl import flags as absl_flags

from data_utils import layouts
from data_utils.tokenization import Tokenizer
from modeling import families, tokenizer_files
from modeling import flags as model_flags
from modeling.mpnet import models as mpnet_models
from modeling.mpnet.config import MPNetConfig
from modeling.run_config import RunConfig
from modeling.xlnet import models
from modeling.xlnet.config import XLNetConfig
from tests.reference_libs import require

SENTENCES = ["Hello World, this is a test.", "The ``quoted'' text  costs 3 dollars!",
             "Café naïve résumé: Über-fancy accents.", "  the   end of   a line  ",
             "Numbers 1999 and 2000 were years."]


def _auto_tokenizer(path):
  transformers = require("transformers")
  return transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def _mpnet_config(vocab, pad):
  return MPNetConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
                     pad_token_id=pad)


@pytest.fixture(scope="module")
def cased_sp(tmp_path_factory, text_and_sp):
  from tests import data_fixtures
  directory = str(tmp_path_factory.mktemp("cased"))
  return data_fixtures.make_sp_model(directory, text_and_sp[0], vocab_size=600, uncased=False)


@pytest.mark.parametrize("uncased", [True, False])
def test_xlnet_hf_export_gives_our_ids(tmp_path, text_and_sp, cased_sp, uncased):
  """Before: no tokenizer files, AutoTokenizer could not give the model's ids."""
  sp = text_and_sp[1] if uncased else cased_sp
  ours = Tokenizer(sp, lower=uncased)
  model = models.XLNetPretrainModel(
      XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                  n_token=ours.vocab_size), RunConfig(dropout=0.0, dropatt=0.0))
  out = tmp_path / "hf"
  families.export_hf(model, str(out), log=lambda m: None,
                     tokenizer=tokenizer_files.Source.of(sp, None, uncased))
  hf = _auto_tokenizer(out)
  for text in SENTENCES:
    assert hf.encode(text, add_special_tokens=False) == list(ours.encode_lines([text])[0]), text
  row = layouts.encode_texts(ours, [SENTENCES[0]], [SENTENCES[1]], 48, "xlnet")
  want = hf(SENTENCES[0], SENTENCES[1], padding="max_length", max_length=48)
  real = row["input_mask"][0] == 0         # left padded, <cls> last; the release pads with id 0
  np.testing.assert_array_equal(real, np.array(want["attention_mask"]) == 1)
  np.testing.assert_array_equal(row["input_ids"][0][real], np.array(want["input_ids"])[real])
  config = json.loads((out / "config.json").read_text())
  for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
    assert config[key] == getattr(hf, key), key
  assert (hf.pad_token_id, hf.cls_token_id, hf.sep_token_id) == (5, 3, 4)


def test_mpnet_wordpiece_export_gives_our_ids(tmp_path):
  """Before: AutoTokenizer on the MPNet export raised."""
  from data_utils.wordpiece import WordPieceTokenizer
  words = sorted({w.strip(".,!?:").lower() for s in SENTENCES for w in s.split()} - {""})
  pieces = (["<s>", "<pad>", "</s>", "<unk>", "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            + list(".,!?:-`'") + words + ["##s", "##ing"] + ["<mask>"])
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("".join(p + "\n" for p in dict.fromkeys(pieces)))
  ours = WordPieceTokenizer(str(vocab))
  model = mpnet_models.MPNetClassifier(_mpnet_config(ours.vocab_size, 1), n_class=2)
  out = tmp_path / "hf"
  families.export_hf(model, str(out), log=lambda m: None,
                     tokenizer=tokenizer_files.Source.of(None, str(vocab)))
  hf = _auto_tokenizer(out)
  rows = layouts.encode_texts(ours, SENTENCES[:3], SENTENCES[2:], 40, "mpnet")
  want = hf(SENTENCES[:3], SENTENCES[2:], padding="max_length", max_length=40)
  np.testing.assert_array_equal(rows["input_ids"], np.array(want["input_ids"]))
  config = json.loads((out / "config.json").read_text())
  assert (config["pad_token_id"], config["bos_token_id"], config["eos_token_id"]) == \
      (hf.pad_token_id, hf.bos_token_id, hf.eos_token_id) == (1, 0, 2)


def test_mpnet_sentencepiece_export_gives_our_ids(tmp_path, text_and_sp):
  """An MPNet model on this project's SentencePiece (pad 5): MPNet's rows over XLNet's
  pieces, through tokenizer.json."""
  sp = text_and_sp[1]
  ours = Tokenizer(sp, lower=True)
  model = mpnet_models.MPNetClassifier(_mpnet_config(ours.vocab_size, 5), n_class=2)
  out = tmp_path / "hf"
  families.export_hf(model, str(out), log=lambda m: None,
                     tokenizer=tokenizer_files.Source.of(sp, None, True))
  hf = _auto_tokenizer(out)
  for text in SENTENCES:
    assert hf.encode(text, add_special_tokens=False) == list(ours.encode_lines([text])[0]), text
  rows = layouts.encode_texts(ours, SENTENCES[:3], SENTENCES[2:], 48, "mpnet")
  want = hf(SENTENCES[:3], SENTENCES[2:], padding="max_length", max_length=48)
  np.testing.assert_array_equal(rows["input_ids"], np.array(want["input_ids"]))
  config = json.loads((out / "config.json").read_text())
  assert (config["pad_token_id"], config["bos_token_id"], config["eos_token_id"]) == \
      (hf.pad_token_id, hf.bos_token_id, hf.eos_token_id) == (5, 1, 2)


# ---- the pretraining export ------------------------------------------------------------------
def _checkpoint_state(model_dir, step):
  """A `checkpoint` state file naming ckpt-STEP where the trainer's last save leaves it
  (MODEL_DIR/ckpt/)."""
  ckpt = os.path.join(model_dir, "ckpt")
  os.makedirs(ckpt, exist_ok=True)
  open(os.path.join(ckpt, f"ckpt-{step}.index"), "wb").close()
  with open(os.path.join(ckpt, "checkpoint"), "w") as f:
    f.write(f'model_checkpoint_path: "ckpt-{step}"\n')


def test_pretraining_export_records_its_step_and_is_never_half_stale(tmp_path, text_and_sp):
  """A rerun that moved on (step 100 -> 110) re-exports every part; an export whose record is
  current is kept; one without its record (a run killed mid-export) is rewritten whole."""
  from pretraining.task import PretrainConfig, PretrainTask
  sp = text_and_sp[1]
  vocab = Tokenizer(sp, lower=True).vocab_size
  config = PretrainConfig(seq_len=16, reuse_len=8, num_predict=4, bsz_per_host=2,
                          objective="mpnet", bi_data=False, sp_model=sp, uncased=True)
  task = PretrainTask(config, _mpnet_config(vocab, 5), RunConfig())
  model = task.build_model()
  model.ensure_built() if hasattr(model, "ensure_built") else None
  model_dir = str(tmp_path / "run")
  export = os.path.join(model_dir, "export")
  logs = []
  _checkpoint_state(model_dir, 100)
  task.on_end(model, model_dir, logs.append)
  record = json.loads(open(os.path.join(export, "export.json")).read())
  assert record["step"] == 100 and record["tokenizer"] == tokenizer_files.Source.of(
      sp, None, True).sha256()
  assert {"config.json", "model.safetensors", "spiece.model", "tokenizer.json"} <= \
      set(record["parts"]) and all(os.path.exists(os.path.join(export, p))
                                   for p in record["parts"])
  weights = open(os.path.join(export, "model.safetensors"), "rb").read()
  task.on_end(model, model_dir, logs.append)              # same step: nothing rewritten
  assert logs[-1].endswith("the export of step 100 is current")
  for var in model.trainable_variables[:1]:
    var.assign(var + 1.0)
  _checkpoint_state(model_dir, 110)                       # the rerun trained on
  task.on_end(model, model_dir, logs.append)
  assert json.loads(open(os.path.join(export, "export.json")).read())["step"] == 110
  assert open(os.path.join(export, "model.safetensors"), "rb").read() != weights
  os.remove(os.path.join(export, "export.json"))          # killed between parts
  task.on_end(model, model_dir, logs.append)
  assert json.loads(open(os.path.join(export, "export.json")).read())["step"] == 110
  assert "the export of step 110 is current" not in logs[-1]
  hf = _auto_tokenizer(export)                            # the export is an HF directory
  assert hf.encode(SENTENCES[0], add_special_tokens=False) == \
      list(Tokenizer(sp, lower=True).encode_lines([SENTENCES[0]])[0])


# ---- fine-tuning from an export --------------------------------------------------------------
def _flag_values(argv):
  fv = absl_flags.FlagValues()
  absl_flags.DEFINE_string("init_checkpoint", None, "", flag_values=fv)
  absl_flags.DEFINE_string("model_config_path", None, "", flag_values=fv)
  absl_flags.DEFINE_string("model_type", "xlnet", "", flag_values=fv)
  absl_flags.DEFINE_string("sp_model", None, "", flag_values=fv)
  absl_flags.DEFINE_string("vocab_file", None, "", flag_values=fv)
  absl_flags.DEFINE_bool("uncased", False, "", flag_values=fv)
  fv(["prog"] + argv)
  return fv


@pytest.fixture(scope="module")
def xlnet_export(tmp_path_factory, text_and_sp):
  """An XLNet Hugging Face export (uncased 800-piece tokenizer) and its config path."""
  sp = text_and_sp[1]
  model = models.XLNetPretrainModel(
      XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, n_token=800),
      RunConfig(dropout=0.0, dropatt=0.0))
  out = str(tmp_path_factory.mktemp("export") / "hf")
  families.export_hf(model, out, log=lambda m: None,
                     tokenizer=tokenizer_files.Source.of(sp, None, True))
  return out


def test_fine_tuning_uses_the_exports_tokenizer_by_default(xlnet_export):
  fv = _flag_values([f"--init_checkpoint={xlnet_export}",
                     f"--model_config_path={xlnet_export}/config.json"])
  source = model_flags.resolve_tokenizer(fv, log=lambda m: None)
  assert fv.sp_model == os.path.join(xlnet_export, "spiece.model") and fv.uncased
  assert source.uncased and source.kind == "sentencepiece"


def test_fine_tuning_refuses_another_tokenizer(xlnet_export, text_and_sp, cased_sp):
  """Before: fine-tuning with another SentencePiece model trained without a word."""
  fv = _flag_values([f"--init_checkpoint={xlnet_export}", f"--sp_model={cased_sp}"])
  with pytest.raises(ValueError) as e:
    model_flags.resolve_tokenizer(fv, log=lambda m: None)
  message = str(e.value)
  assert "\n" not in message and cased_sp in message and \
      os.path.join(xlnet_export, "spiece.model") in message and message.count("sha256") == 2
  same = _flag_values([f"--init_checkpoint={xlnet_export}", f"--sp_model={text_and_sp[1]}",
                       "--nouncased"])                    # the same file read cased
  with pytest.raises(ValueError, match=r"^--nouncased: .* was trained uncased"):
    model_flags.resolve_tokenizer(same, log=lambda m: None)
  fine = _flag_values([f"--init_checkpoint={xlnet_export}", f"--sp_model={text_and_sp[1]}"])
  assert model_flags.resolve_tokenizer(fine, log=lambda m: None).uncased and fine.uncased


def test_a_pretraining_runs_directory_or_checkpoint_uses_its_exports_tokenizer(
    tmp_path, xlnet_export, cased_sp):
  """--init_checkpoint=MODEL_DIR of a pretraining run, or MODEL_DIR/ckpt/ckpt-N: the tokenizer
  its export/ records (copied here from the HF export, which records it the same way)."""
  import shutil
  run = tmp_path / "run"
  shutil.copytree(xlnet_export, run / "export")
  (run / "ckpt").mkdir()
  for init in (str(run), str(run / "ckpt" / "ckpt-10")):
    fv = _flag_values([f"--init_checkpoint={init}"])
    model_flags.resolve_tokenizer(fv, log=lambda m: None)
    assert fv.sp_model == str(run / "export" / "spiece.model") and fv.uncased
    other = _flag_values([f"--init_checkpoint={init}", f"--sp_model={cased_sp}"])
    with pytest.raises(ValueError, match="is not the tokenizer"):
      model_flags.resolve_tokenizer(other, log=lambda m: None)


def test_released_checkpoint_vocabulary_size_is_checked(tmp_path, text_and_sp, cased_sp):
  """A release records no tokenizer: the given one's size must be the config's n_token."""
  release = tmp_path / "release"
  release.mkdir()
  (release / "xlnet_model.ckpt.index").write_bytes(b"")
  config = release / "xlnet_config.json"
  config.write_text(XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                                n_token=800).to_json())
  fv = _flag_values([f"--init_checkpoint={release}/xlnet_model.ckpt",
                     f"--model_config_path={config}", f"--sp_model={cased_sp}"])
  with pytest.raises(ValueError, match=r"^--sp_model=.* has 600 tokens but the model config "
                                       r"of --init_checkpoint=.* has a vocabulary of 800"):
    model_flags.resolve_tokenizer(fv, log=lambda m: None)
  fv = _flag_values([f"--init_checkpoint={release}/xlnet_model.ckpt",
                     f"--model_config_path={config}", f"--sp_model={text_and_sp[1]}"])
  assert model_flags.resolve_tokenizer(fv, log=lambda m: None).path == text_and_sp[1]


@pytest.mark.slow
def test_xlnet_pretraining_export_holds_every_part_of_one_step(tmp_path, text_and_sp):
  """plm: checkpoint, config, tokenizer and encoder SavedModel exported together under one
  record; the run's later export_encoder call (run_pretrain.py) then has nothing to do."""
  from pretraining.task import PretrainConfig, PretrainTask
  sp = text_and_sp[1]
  config = PretrainConfig(seq_len=16, reuse_len=8, num_predict=4, bsz_per_host=2,
                          objective="plm", bi_data=False, sp_model=sp, uncased=True)
  task = PretrainTask(config, XLNetConfig(n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32,
                                          n_token=800), RunConfig(dropout=0.0, dropatt=0.0))
  model = task.build_model()
  model.ensure_built()
  model_dir = str(tmp_path / "run")
  _checkpoint_state(model_dir, 100)
  logs = []
  task.on_end(model, model_dir, logs.append)
  export = os.path.join(model_dir, "export")
  record = json.loads(open(os.path.join(export, "export.json")).read())
  assert record["step"] == 100 and {"saved_model", "spiece.model", "xlnet_model.ckpt.index"} <= \
      set(record["parts"])
  assert os.path.exists(os.path.join(export, "saved_model", "saved_model.pb"))
  task.objective.export_encoder(task, model_dir, sp, True, logs.append)
  assert logs[-1].endswith("saved_model: current (step 100)")
