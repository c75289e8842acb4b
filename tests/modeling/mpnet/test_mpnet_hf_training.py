"""Our MPNet's masked-LM pretraining steps (run_pretrain.py --objective=mpnet --mpnet_mode=mlm:
PretrainTask, the trainer's XLA step through training/stepper.py, the release's TF1 Adam with
clipping and warmup) against Hugging Face's MPNetForMaskedLM trained step by step from the same
weights on the same batches, with the update rule and the batch conversion of
tools/mpnet_hf_side.py (the HF side of tools/mpnet_hf_curve.py, which compares the
quickstart's whole run): the same losses,
gradient norms and final weights to float rounding.

The records' rows here are padded unevenly with <pad> = 5 (fairseq's is 1, which HF MPNet
hard-codes for its position ids): the pretraining path masks no key (the quickstart's records
hold no padding; a pad is an ordinary visible token on both sides), so what the padding pins is
that positions come from the position (pad_token_id + 1 + i, passed to HF explicitly), not from
where the pads are.
"""

import numpy as np
import pytest

from tests.reference_libs import require

torch = require("torch")
transformers = require("transformers")

from modeling.mpnet.config import MPNetConfig  # noqa: E402
from modeling.run_config import RunConfig  # noqa: E402
from pretraining.task import PretrainConfig, PretrainTask  # noqa: E402
from tools import mpnet_hf_side as tool  # noqa: E402
from training.stepper import Stepper  # noqa: E402

STEPS, LENGTH, PREDICT, PAD = 6, 12, 3, 5
SEP, CLS = 4, 3
SEGMENTS = ((5, 4), (3, 2))     # (len A, len B) per row: [A <sep> B <sep> <cls>] + <pad>s


def _task():
  config = MPNetConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=64,
                       max_position_embeddings=LENGTH + PAD + 2, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0, pad_token_id=PAD)
  pretrain = PretrainConfig(seq_len=LENGTH, reuse_len=LENGTH // 2, num_predict=PREDICT,
                            bsz_per_host=len(SEGMENTS), bi_data=False, objective="mpnet",
                            mpnet_mode="mlm", train_steps=STEPS, learning_rate=1e-2,
                            warmup_steps=2, decay_method="linear", min_lr_ratio=0.0,
                            optimizer="release", adam_beta1=0.9, adam_beta2=0.999,
                            adam_epsilon=1e-6, weight_decay=0.0, clip=1.0, seed=0)
  return PretrainTask(pretrain, config, RunConfig(dropout=0.0, dropatt=0.0))


def _batches():
  """Records' rows as data_utils/pipeline.expand gives them to the mpnet objective: input_ids
  in the records' layout [A <sep> B <sep> <cls>], here right padded to LENGTH unevenly (row 0
  full, row 1 with 4 <pad>), is_masked (PREDICT tokens of A or B per row), rank (the
  factorization order); two batches in turn, so that the model learns them."""
  rng = np.random.default_rng(0)
  out = []
  for _ in range(2):
    ids = np.full([len(SEGMENTS), LENGTH], PAD, np.int32)
    masked = np.zeros([len(SEGMENTS), LENGTH], bool)
    for row, (a, b) in enumerate(SEGMENTS):
      tokens = list(rng.integers(9, 60, a)) + [SEP] + list(rng.integers(9, 60, b)) + [SEP, CLS]
      ids[row, :len(tokens)] = tokens
      words = [i for i, t in enumerate(tokens) if t >= 9]
      masked[row, rng.choice(words, PREDICT, replace=False)] = True
    rank = np.stack([rng.permutation(LENGTH) for _ in SEGMENTS]).astype(np.int32)
    out.append({"input_ids": ids, "is_masked": masked, "rank": rank})
  return [out[k % 2] for k in range(STEPS)]


@pytest.fixture
def one_torch_thread():
  """torch's own threads fight TensorFlow's on a small shared CPU (6 HF steps: 5 s, not 0.02)."""
  threads = torch.get_num_threads()
  torch.set_num_threads(1)
  yield
  torch.set_num_threads(threads)


@pytest.mark.slow
def test_mlm_pretraining_steps_follow_hugging_face(one_torch_thread):
  task = _task()
  # The trainer's step without XLA (its compile would take most of the time budget; the tool
  # compares the XLA step on the quickstart's run); the inputs are captured from task.predict
  # compiled the same way, so the 80/10/10 draws are the step's.
  stepper = Stepper(task, xla="off")
  model = stepper.model
  state = tool.hf_state(model)
  batches = _batches()
  hf_batches = tool.hf_batches(task, model, enumerate(batches), jit_compile=False)
  ours = [stepper.step(b) for b in batches]

  hf = tool.hf_model(task.model_config, state).train()
  settings = task.optimizer_settings()
  opt = tool.TF1Adam(hf.parameters(), settings["adam_beta1"], settings["adam_beta2"],
                     settings["adam_epsilon"], settings["clip"])
  lr_at = tool.lr_schedule(settings)
  ref, norms = [], []
  for step, batch in enumerate(hf_batches):
    loss = tool.hf_loss(hf, batch, full_logits=True)      # HF's own forward with labels
    hf.zero_grad(set_to_none=True)
    loss.backward()
    norms.append(opt.step(float(lr_at(step))))
    ref.append(float(loss.detach()))

  assert ref[-1] < ref[0] - 0.3, ref       # it learns: not a comparison of flat lines
  np.testing.assert_allclose([o["loss"] for o in ours], ref, rtol=0, atol=2e-5)
  np.testing.assert_allclose([o["grad_norm"] for o in ours], norms, rtol=1e-4)
  np.testing.assert_allclose([o["learning_rate"] for o in ours],
                             [float(lr_at(s)) for s in range(STEPS)], rtol=1e-6)
  trained = tool.our_weights(model, hf.state_dict())
  for name, value in stepper.weights().items():
    np.testing.assert_allclose(value, trained[name], rtol=0, atol=2e-5, err_msg=name)

  # HF's default position ids (from its padding_idx 1: 2, 3, ...) are not ours (6, 7, ...).
  fresh = tool.hf_model(task.model_config, state).eval()
  t = {k: torch.from_numpy(hf_batches[0][k]) for k in ("input_ids", "labels")}
  with torch.no_grad():
    default = float(fresh(input_ids=t["input_ids"], labels=t["labels"]).loss)
    explicit = float(tool.hf_loss(fresh, hf_batches[0], full_logits=True))
  assert abs(default - explicit) > 1e-4 and abs(explicit - ours[0]["loss"]) < 2e-5
