"""run_pairs.py and finetuning/pairs_task.py against sentence-transformers 6.2.0 on tiny Hugging
Face directories of both families (XLNet left padded, MPNet right padded; 2 layers, d 16):

  - the loss of a training batch (anchors, positives, hard negatives; uneven lengths) equals
    MultipleNegativesRankingLoss of the SentenceTransformer (Transformer, Pooling, Normalize)
    built from the same initial weights on the same texts, to 1e-5; a 3-step run's logged
    first-step loss equals it on a batch holding every pair (the mean is order-free);
  - three plain-SGD steps side by side, ours (PairsTask.loss under a GradientTape) and torch's
    (MultipleNegativesRankingLoss.backward, torch.optim.SGD), each side updating its own
    weights: every step's loss and every parameter's gradient agree (ours written in Hugging
    Face's names by exporting a twin model that holds the gradients as its weights);
  - after that run, SentenceTransformer(--export_st_dir).encode equals the trained checkpoint's
    embeddings through the task's Python path to 1e-5 (and they moved from the initial ones),
    and so does the --export_dir SavedModel on the same texts;
    the run wrote best/, eval/last.json and pairs_eval.json with the retrieval and STS metrics,
    those equal to retrieval_metrics / scipy on the reference's embeddings, and --do_eval
    alone on the run directory gives them again;
  - refusals are one line, before MODEL_DIR is written: a missing column, an empty file,
    --train_batch_size=1.
"""

import json
import re

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.slow     # tiny models on both sides, a 3-step run per family

import inference
from finetuning import classifier_task
from finetuning import retrieval_metrics
from finetuning.pairs_data import PairColumns
from finetuning.pairs_task import PairsConfig, PairsTask
from modeling import checkpoint
from modeling import families
from modeling import pooling
from modeling import hf_io
from modeling.run_config import RunConfig
from tests import hf_dirs
from tests.reference_libs import require
from tests.script_helpers import main_exit

torch = require("torch")
require("transformers")
stats = require("scipy.stats")
require("sentence_transformers")
from sentence_transformers import SentenceTransformer  # noqa: E402
from sentence_transformers.sentence_transformer import losses as st_losses  # noqa: E402
from sentence_transformers.sentence_transformer import modules as st_modules  # noqa: E402

TOL = 1e-5
HIDDEN = 16
MAX_LEN = 16
LR = 0.5                          # plain SGD's rate: the weights move visibly in three steps
ANCHORS = ["A short one.", "A much longer sentence, with many more words than the others",
           "Mid length text is here", "x", "the second text"]
POSITIVES = ["and a second text", "b", "the second text of the third pair is longer", "yes",
             "a much longer one"]
NEGATIVES = ["no", "many more words here and there", "short", "the others have words", "mid"]
STS = [("A short one.", "a short one", 4.5), ("x", "many more words", 0.5),
       ("Mid length text", "the third pair", 2.0), ("yes", "and yes", 3.0)]


def _write_pairs(path, negatives=True):
  with open(path, "w") as f:
    f.write("anchor\tpositive" + ("\tnegative" if negatives else "") + "\n")
    for row in zip(ANCHORS, POSITIVES, NEGATIVES):
      f.write("\t".join(row if negatives else row[:2]) + "\n")
  return str(path)


@pytest.fixture(scope="module")
def setups(tmp_path_factory):
  root = tmp_path_factory.mktemp("pairs")
  sp_model = hf_dirs.train_sp_model(tmp_path_factory.mktemp("sp"))
  hf_dirs.xlnet_dir(root / "xlnet", sp_model, "XLNetModel")
  hf_dirs.mpnet_dir(root / "mpnet", "MPNetModel", hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)
  vocab = root / "mpnet" / "vocab.txt"   # filled to the config's size, as a release's is
  pieces = vocab.read_text().splitlines()
  size = json.loads((root / "mpnet" / "config.json").read_text())["vocab_size"]
  vocab.write_text("".join(p + "\n" for p in pieces + [f"[unused{k}]"
                                                       for k in range(size - len(pieces))]))
  data = root / "data"
  data.mkdir()
  with open(data / "sts.tsv", "w") as f:
    f.write("index\tsentence1\tsentence2\tscore\n")
    f.writelines(f"{k}\t{a}\t{b}\t{s}\n" for k, (a, b, s) in enumerate(STS))
  files = {"train": _write_pairs(data / "train.tsv"),
           "train_plain": _write_pairs(data / "plain.tsv", negatives=False),
           "sts": str(data / "sts.tsv")}
  tokenizer = {"xlnet": dict(sp_model=sp_model, uncased=True),
               "mpnet": dict(vocab_file=str(root / "mpnet" / "vocab.txt"))}
  return {f: {"dir": str(root / f), "tokenizer": tokenizer[f], **files}
          for f in ("xlnet", "mpnet")} | {"root": root}


def _reference(directory, mode="mean"):
  transformer = st_modules.Transformer(directory, max_seq_length=MAX_LEN)
  return SentenceTransformer(modules=[transformer, st_modules.Pooling(HIDDEN, mode),
                                      st_modules.Normalize()], device="cpu").eval()


def _st_loss(reference, columns):
  loss = st_losses.MultipleNegativesRankingLoss(reference, scale=20.0)
  features = [reference.preprocess(texts) for texts in columns]
  with torch.no_grad():
    return float(loss(features, None))


def _task(setup, family, train_file, batch, negatives=True, **extra):
  c = PairsConfig(train_file=train_file, columns=PairColumns(
      negative="negative" if negatives else None), model_type=family,
      max_seq_length=MAX_LEN, train_batch_size=batch, eval_batch_size=2, seed=1,
      **setup["tokenizer"], **extra)
  fam = families.get(family)
  config = fam.config_from_json(f"{setup['dir']}/config.json")
  return PairsTask(c, config, RunConfig(dropout=0.0, dropatt=0.0), setup["dir"])


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_batch_loss_equals_sentence_transformers_mnrl(setups, family):
  setup = setups[family]
  task = _task(setup, family, setup["train"], batch=3)
  model = task.build_model().ensure_built()
  task.initialize(model, log=lambda _: None)
  batch = next(iter(task.dataset(None)))
  lengths = set((batch["anchor_input_mask"].numpy() == 0).sum(1).tolist())
  assert len(lengths) >= 2, "uneven lengths in the batch"
  index = batch["index"].numpy().tolist()
  loss, _, _ = task.loss(model, batch, task.initial_state(), 0, training=True)
  reference = _reference(setup["dir"])
  expected = _st_loss(reference, [[ANCHORS[i] for i in index], [POSITIVES[i] for i in index],
                                  [NEGATIVES[i] for i in index]])
  assert abs(float(loss) - expected) < TOL, (float(loss), expected)
  # without the negatives it is another number: they are in the softmax
  no_neg = {k: v for k, v in batch.items() if not k.startswith("negative_")}
  loss_plain = float(task.loss(model, no_neg, task.initial_state(), 0)[0])
  assert abs(loss_plain - _st_loss(reference, [[ANCHORS[i] for i in index],
                                               [POSITIVES[i] for i in index]])) < TOL
  assert abs(loss_plain - float(loss)) > 1e-3


@pytest.mark.parametrize("family", ["xlnet", "mpnet"])
def test_sgd_steps_loss_and_gradients_equal_sentence_transformers(setups, family, tmp_path):
  setup = setups[family]
  task = _task(setup, family, setup["train"], batch=3)
  model = task.build_model().ensure_built()
  task.initialize(model, log=lambda _: None)
  twin = task.build_model().ensure_built()        # holds our gradients, to export them
  reference = _reference(setup["dir"])            # eval(): no dropout, as ours (rate 0)
  params = dict(reference[0].auto_model.named_parameters())
  sgd = torch.optim.SGD(reference.parameters(), lr=LR)
  mnrl = st_losses.MultipleNegativesRankingLoss(reference, scale=20.0)
  batches, losses = iter(task.dataset(None)), []
  for step in range(3):
    batch = next(batches)
    index = batch["index"].numpy().tolist()
    with tf.GradientTape() as tape:
      loss = task.loss(model, batch, task.initial_state(), step)[0]
    grads = tape.gradient(loss, model.trainable_variables)
    sgd.zero_grad()
    expected = mnrl([reference.preprocess([texts[i] for i in index])
                     for texts in (ANCHORS, POSITIVES, NEGATIVES)], None)
    expected.backward()
    assert abs(float(loss) - float(expected)) < TOL, (step, float(loss), float(expected))
    losses.append(float(loss))
    for var, grad in zip(twin.trainable_variables, grads):
      var.assign(tf.zeros_like(var) if grad is None else tf.convert_to_tensor(grad))
    ours = hf_io.read_weights(families.export_hf(twin, str(tmp_path / f"grad{step}"),
                                                 log=lambda _: None))
    unused = {n for n, p in params.items() if p.grad is None}   # MPNetModel's pooler
    assert set(params) - unused <= set(ours), set(params) - unused - set(ours)
    for name, param in params.items():
      if name not in ours:
        continue
      want = np.zeros(param.shape) if param.grad is None else param.grad.numpy()
      err = np.abs(np.asarray(ours[name], np.float64) - want).max()
      assert err <= 1e-4 * np.abs(want).max() + 1e-7, (step, name, err, np.abs(want).max())
    for var, grad in zip(model.trainable_variables, grads):
      if grad is not None:
        var.assign_sub(LR * tf.convert_to_tensor(grad))
    sgd.step()
  assert len({round(x, 4) for x in losses}) == 3, losses


@pytest.mark.parametrize("family,mode", [("xlnet", "last"), ("mpnet", "mean")])
def test_run_exports_what_sentence_transformers_loads(setups, family, mode, capsys):
  setup, root = setups[family], setups["root"]
  model_dir, st_dir = root / f"run-{family}", root / f"st-{family}"
  saved_dir = root / f"saved-{family}"
  code = main_exit("run_pairs.py", model_type=family,
                   model_config_path=f"{setup['dir']}/config.json", init_checkpoint=setup["dir"],
                   train_file=setup["train_plain"],
                   dev_file=setup["train_plain"], sts_file=setup["sts"], model_dir=str(model_dir),
                   export_st_dir=str(st_dir), export_dir=str(saved_dir), max_seq_length=MAX_LEN,
                   train_batch_size=len(ANCHORS), eval_batch_size=2, train_steps=3,
                   save_every=3, steps_per_loop=1, learning_rate=2e-3, warmup_steps=0,
                   pooling=mode, dropout=0.0, dropatt=0.0, do_train=True, do_eval=True,
                   **setup["tokenizer"])
  out = capsys.readouterr().out
  assert code in (None, 0), code
  st_mode = pooling.ST_MODES[mode]
  initial = _reference(setup["dir"], st_mode)
  first = float(re.search(r"step 1/3 loss ([0-9.]+)", out).group(1))
  assert abs(first - _st_loss(initial, [ANCHORS, POSITIVES])) < 6e-5   # logged to 4 decimals
  # the export, through sentence-transformers, is the trained model through our path
  exported = SentenceTransformer(str(st_dir), device="cpu")
  assert exported.max_seq_length == MAX_LEN
  texts = ANCHORS + POSITIVES
  got = exported.encode(texts, batch_size=3, convert_to_numpy=True)
  task = _task(setup, family, None, batch=2, negatives=False, pooling=mode,
               dev_file=setup["train_plain"], sts_file=setup["sts"])
  model = task.build_model().ensure_built()
  checkpoint.load_native_checkpoint(model, classifier_task.trained_checkpoint(str(model_dir)))
  ours = task.encode(model, texts)
  assert np.abs(ours - got).max() < TOL
  serve = tf.saved_model.load(str(saved_dir)).signatures["serving_default"]
  served = serve(sentence=tf.constant(texts))["embedding"].numpy()
  assert np.abs(served - got).max() < TOL
  # the Python API on the run directory: its best checkpoint, its pooling
  loaded = inference.from_pretrained(str(model_dir), log=None)
  assert loaded.head == "embedder"
  assert np.abs(loaded.embed(texts) - got).max() < TOL
  before = initial.encode(texts, convert_to_numpy=True)
  assert np.abs(before - got).max() > 1e-3, "training changed the embeddings"
  # the evaluation's metrics, recomputed from the export's embeddings
  n = len(ANCHORS)
  expected = retrieval_metrics.retrieval_metrics(got[:n] @ got[n:].T)
  sts_a = exported.encode([a for a, _, _ in STS], convert_to_numpy=True)
  sts_b = exported.encode([b for _, b, _ in STS], convert_to_numpy=True)
  expected["spearman"] = stats.spearmanr(np.sum(sts_a * sts_b, 1),
                                         [s for _, _, s in STS]).statistic
  written = json.loads((model_dir / "pairs_eval.json").read_text())
  for key, value in expected.items():
    assert written[key] == pytest.approx(value, abs=1e-6), key
  last = json.loads((model_dir / "eval" / "last.json").read_text())
  assert last["step"] == 3 and "mrr@10" in last and (model_dir / "best").is_dir()
  # --do_eval alone on the run directory evaluates its best checkpoint again
  (model_dir / "pairs_eval.json").unlink()
  code = main_exit("run_pairs.py", model_type=family, model_dir=str(model_dir),
                   model_config_path=f"{setup['dir']}/config.json", dev_file=setup["train_plain"],
                   sts_file=setup["sts"], max_seq_length=MAX_LEN, eval_batch_size=3,
                   pooling=mode, do_eval=True, **setup["tokenizer"])
  assert code in (None, 0), code
  again = json.loads((model_dir / "pairs_eval.json").read_text())
  for key, value in expected.items():
    assert again[key] == pytest.approx(value, abs=1e-6), key


def test_refusals_are_one_line_before_any_write(setups, tmp_path, capsys):
  setup = setups["mpnet"]
  base = dict(model_type="mpnet", model_config_path=f"{setup['dir']}/config.json",
              init_checkpoint=setup["dir"], max_seq_length=MAX_LEN, train_steps=1,
              do_train=True, **setup["tokenizer"])
  missing = tmp_path / "m.jsonl"
  missing.write_text('{"anchor": "a", "other": "b"}\n')
  empty = tmp_path / "e.tsv"
  empty.write_text("")
  cases = [
      (dict(train_file=str(missing), train_batch_size=2),
       r"^run_pairs.py: .*m.jsonl:1: no 'positive' \(--positive_column\); keys: 'anchor', "
       r"'other'$"),
      (dict(train_file=str(empty), train_batch_size=2),
       r"^run_pairs.py: .*e.tsv: empty file"),
      (dict(train_file=setup["train_plain"], train_batch_size=1),
       r"^run_pairs.py: --train_batch_size=1: in-batch negatives need at least 2 pairs per "
       r"batch$"),
      (dict(train_file=setup["train_plain"], train_batch_size=2, pooling="first",
            negative_column="nope"),
       r"^run_pairs.py: .*plain.tsv: no column 'nope' \(--negative_column\)"),
  ]
  for k, (flags, pattern) in enumerate(cases):
    model_dir = tmp_path / f"run{k}"
    code = main_exit("run_pairs.py", model_dir=str(model_dir), **base, **flags)
    assert isinstance(code, str) and "\n" not in code and re.search(pattern, code), code
    assert not model_dir.exists() or not any(model_dir.iterdir()), code
  no_tokenizer = {k: v for k, v in base.items() if k not in setup["tokenizer"]}
  code = main_exit("run_pairs.py", model_dir=str(tmp_path / "runT"), **no_tokenizer,
                   train_file=setup["train_plain"], train_batch_size=2)
  assert isinstance(code, str) and re.search(r"^run_pairs.py: no tokenizer: pass --sp_model", code)
  assert not (tmp_path / "runT").exists() or not any((tmp_path / "runT").iterdir())
