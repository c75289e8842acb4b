"""Hugging Face's side of tools/mpnet_hf_curve.py: the inputs our run's MPNet step built
(captured from the step itself), laid out for transformers' MPNetForMaskedLM; weights between
the two layouts; the release's TF1 Adam and learning-rate schedule written out in torch; the
HF training and held-out loops. torch and transformers are imported inside the functions.
"""

import math
import time

import numpy as np

# ---- the batches in Hugging Face's layout ------------------------------------------------------
INPUT_KEYS = ("content_ids", "content_pos", "query_pos", "targets", "kind")


class CapturedInputs:
  """The MPNet inputs the run's own step builds: task.predict (the objective's predict:
  pretraining/mpnet.py, with whatever it does to the records' rows first) compiled with XLA as
  the trainer compiles it, its call of modeling/mpnet/pretrain.build_inputs recorded while it is
  traced. XLA matters: TensorFlow's stateless random ops draw other numbers under XLA than
  eagerly on CPU (tf.random.stateless_uniform([16, 19], [0, 0]) differs by up to 0.94, philox
  or auto_select alike), so an eager build_inputs would not draw the run's 80/10/10; and
  capturing, not re-deriving, keeps the comparison on the trainer's inputs if the objective
  changes how it lays out the rows.

  call(batch, step) -> {content_ids, content_pos, query_pos, targets, kind} as numpy."""

  def __init__(self, task, model, jit_compile=True):
    import tensorflow as tf
    from modeling.mpnet import pretrain as mpnet_pretrain

    def run(batch, step):
      captured = []
      original = mpnet_pretrain.build_inputs

      def recording(*args, **kwargs):
        out = original(*args, **kwargs)
        captured.append(out)
        return out
      mpnet_pretrain.build_inputs = recording
      try:
        _, target, _, _, _ = task.predict(model, batch, task.initial_state(), step,
                                          training=False)
      finally:
        mpnet_pretrain.build_inputs = original
      if len(captured) != 1:
        raise ValueError(f"task.predict called build_inputs {len(captured)} times, not once")
      out = {k: captured[0][k] for k in INPUT_KEYS}
      out["predicted_target"] = target
      return out
    self._run = tf.function(run, jit_compile=jit_compile)

  def __call__(self, batch, step):
    import tensorflow as tf
    out = {k: v.numpy() for k, v in self._run(batch, tf.constant(step, tf.int64)).items()}
    if not np.array_equal(out.pop("predicted_target"), out["targets"]):
      raise ValueError("the targets task.predict scores are not build_inputs' targets")
    return out


def hf_layout(inputs, pad_token_id, mode="mlm"):
  """Our --mpnet_mode=mlm inputs (CapturedInputs) as MPNetForMaskedLM sees them.

  Ours: the tokens permuted (predicted last, by rank), the c predicted ones replaced by their
  80/10/10 copies, absolute positions content_pos + pad_token_id + 1 and relative positions
  content_pos (modeling/mpnet/pretrain.py, MPNetPretrainModel.call). Attention is
  permutation-equivariant, so every token put back at its position gives HF the same
  computation with positions 0..L-1 (its relative bias uses 0..L-1).

  Returns numpy int64: input_ids [B, L] (copies at the predicted positions), position_ids
  [B, L] (pad_token_id + 1 + position, to be passed explicitly: HF's default counts from its
  hard-coded padding_idx 1), pred_pos [B, c] (the predicted positions, in our prediction
  order), targets [B, c], labels [B, L] (-100 except at pred_pos: HF's masked-LM labels),
  kind [B, c] (the 80/10/10 draw).
  """
  if mode != "mlm":
    raise ValueError(f"--mpnet_mode={mode}: MPNetForMaskedLM is one stream; only mlm compares")
  content = inputs["content_ids"].astype(np.int64)
  perm = inputs["content_pos"].astype(np.int64)
  if content.shape != perm.shape:
    raise ValueError(f"content ids {content.shape} and positions {perm.shape} differ: not mlm")
  ids = np.empty_like(content)
  np.put_along_axis(ids, perm, content, axis=1)
  length = ids.shape[1]
  pred = inputs["query_pos"].astype(np.int64)
  targets = inputs["targets"].astype(np.int64)
  labels = np.full_like(ids, -100)
  np.put_along_axis(labels, pred, targets, axis=1)
  positions = np.broadcast_to(np.arange(length, dtype=np.int64) + pad_token_id + 1, ids.shape)
  return {"input_ids": ids, "position_ids": np.ascontiguousarray(positions), "pred_pos": pred,
          "targets": targets, "labels": labels, "kind": inputs["kind"].astype(np.int64)}


def hf_batches(task, model, batches, jit_compile=True):
  """[hf_layout dict] of [(step, batch)] (the records' batches, as pipeline.expand gives them):
  what the run's step `step` fed its model, in HF's layout. jit_compile: as the step was
  compiled (--xla=full: True; --xla=off: False)."""
  capture = CapturedInputs(task, model, jit_compile)
  return [hf_layout(capture(batch, step), task.model_config.pad_token_id,
                    task.config.mpnet_mode) for step, batch in batches]


# ---- weights between the two layouts -----------------------------------------------------------
def hf_state(model, weights=None):
  """{HF state-dict name: float32 array} of our MPNetPretrainModel (weights: {reference name:
  array} in our layout, default the model's own), kernels transposed; the tied
  lm_head.decoder.bias is lm_head.bias."""
  out = {}
  for name, (var, transpose) in model.hf_variable_map().items():
    value = np.asarray(var.numpy() if weights is None else weights[name], np.float32)
    out[name] = np.ascontiguousarray(value.T if transpose else value)
  out["lm_head.decoder.bias"] = out["lm_head.bias"]
  return out


def our_weights(model, state):
  """The inverse of hf_state: {reference name: array in our layout} from an HF state dict."""
  out = {}
  for name, (_, transpose) in model.hf_variable_map().items():
    value = np.asarray(state[name].detach().cpu().numpy() if hasattr(state[name], "detach")
                       else state[name], np.float32)
    out[name] = np.ascontiguousarray(value.T if transpose else value)
  return out


def hf_config(model_config, dropout=None):
  import transformers
  data = dict(model_config.to_dict())
  if dropout is not None:
    data.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
  return transformers.MPNetConfig(**data)


def hf_model(model_config, state=None, dropout=None):
  """MPNetForMaskedLM of our config (float32), loaded with `state` (all keys) if given."""
  import torch
  import transformers
  model = transformers.MPNetForMaskedLM(hf_config(model_config, dropout)).float()
  if state is not None:
    missing, unexpected = model.load_state_dict(
        {k: torch.tensor(v) for k, v in state.items()}, strict=False)
    if missing or unexpected:
      raise ValueError(f"HF state dict: missing {missing}, unexpected {unexpected}")
  # HF's MPNetEmbeddings gives its word embedding padding_idx = 1 whatever the config's pad id,
  # and torch never updates that row through the lookup. Id 1 is this project's <s>
  # (data_utils/tokenization.py), which MPNet's pretraining rows may start with
  # (pretraining/mpnet.py), and our model trains it (as fairseq's MPNet trains its own <s>):
  # the row is left trainable here, as in ours (our pad id 5 has no frozen row either).
  model.mpnet.embeddings.word_embeddings.padding_idx = None
  emb = model.mpnet.embeddings.word_embeddings.weight
  if not (model.lm_head.decoder.weight is emb and model.lm_head.decoder.bias is model.lm_head.bias):
    raise ValueError("MPNetForMaskedLM's decoder is not tied to the embeddings and lm_head.bias")
  return model


def hf_loss(model, batch, full_logits=False):
  """Mean cross entropy of the predicted positions. full_logits: HF's own forward with labels
  (logits of all L positions); else the LM head on the c predicted positions only (the same
  number, a fraction of the work)."""
  import torch
  t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in batch.items() if k != "kind"}
  if full_logits:
    return model(input_ids=t["input_ids"], position_ids=t["position_ids"],
                 labels=t["labels"]).loss
  hidden = model.mpnet(input_ids=t["input_ids"], position_ids=t["position_ids"])[0]
  pred = t["pred_pos"][:, :, None].expand(-1, -1, hidden.shape[-1])
  logits = model.lm_head(torch.gather(hidden, 1, pred))
  return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           t["targets"].reshape(-1))


# ---- the optimizer, in torch ---------------------------------------------------------------
def lr_schedule(settings):
  """lr(step) of training/optimization.WarmupDecay in float32: warmup lr * step / warmup
  (the first update has lr 0), then linear (poly) or cosine decay to lr * min_lr_ratio at
  train_steps; `step` = updates done before this one."""
  f32 = np.float32
  peak, warm = f32(settings["learning_rate"]), settings["warmup_steps"]
  train, ratio = settings["train_steps"], settings["min_lr_ratio"]
  method = {"poly": "linear", "cos": "cosine"}.get(settings["decay_method"],
                                                   settings["decay_method"])

  def at(step):
    s = f32(step)
    if s < f32(warm):
      return f32(s / f32(max(warm, 1)) * peak)
    decay = f32(max(train - warm, 1))
    p = f32(min(f32(s - f32(warm)), decay) / decay)
    if method == "linear":
      end = f32(settings["learning_rate"] * ratio)
      return f32((peak - end) * (f32(1) - p) + end)
    return f32(peak * ((f32(1) - f32(ratio)) * (f32(0.5) * (f32(1) + f32(math.cos(math.pi * p))))
                       + f32(ratio)))
  return at


class TF1Adam:
  """tf.train.AdamOptimizer (the release's get_train_op with weight decay 0) after
  tf.clip_by_global_norm, in float32 torch: beta powers multiplied once per update,
  alpha = lr sqrt(1 - b2^t) / (1 - b1^t), m += (g - m)(1 - b1), v += (g^2 - v)(1 - b2),
  w -= m alpha / (sqrt(v) + eps). Tied parameters appear once (model.parameters())."""

  def __init__(self, params, beta1=0.9, beta2=0.999, epsilon=1e-6, clip=1.0):
    import torch
    self.torch = torch
    f32 = torch.float32
    self.params = [p for p in params if p.requires_grad]
    self.b1, self.b2 = torch.tensor(beta1, dtype=f32), torch.tensor(beta2, dtype=f32)
    self.eps, self.one = torch.tensor(epsilon, dtype=f32), torch.tensor(1.0, dtype=f32)
    self.clip = clip
    self.b1_power, self.b2_power = self.one.clone(), self.one.clone()
    self.m = [torch.zeros_like(p) for p in self.params]
    self.v = [torch.zeros_like(p) for p in self.params]

  def step(self, lr):
    """One update with the gradients in .grad; returns the global norm before clipping."""
    torch = self.torch
    with torch.no_grad():
      grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
      norm = torch.sqrt(torch.stack([(g * g).sum() for g in grads]).sum())
      if self.clip:
        clip = torch.tensor(self.clip, dtype=torch.float32)
        scale = clip * torch.minimum(self.one / norm, self.one / clip)
        grads = [g * scale for g in grads]
      self.b1_power = self.b1_power * self.b1
      self.b2_power = self.b2_power * self.b2
      lr = torch.tensor(lr, dtype=torch.float32)
      alpha = lr * torch.sqrt(self.one - self.b2_power) / (self.one - self.b1_power)
      for p, g, m, v in zip(self.params, grads, self.m, self.v):
        m.add_((g - m) * (self.one - self.b1))
        v.add_((g * g - v) * (self.one - self.b2))
        p.sub_((m * alpha) / (torch.sqrt(v) + self.eps))
    return float(norm)


def check_optimizer(settings):
  """The torch side implements the release's TF1 Adam only (what the quickstart pins)."""
  if settings["optimizer"] != "release" or settings["weight_decay"] or \
     settings["lr_layer_decay_rate"] != 1.0 or settings["grad_accumulation_steps"] != 1:
    raise ValueError(f"the run's optimizer is not the release's TF1 Adam without weight decay, "
                     f"layer decay or accumulation: {settings}")


def train_hf(model, batches, settings, seed, log=print, name="hf", full_logits=False):
  """MPNetForMaskedLM on `batches` (hf_batch dicts) with TF1Adam and the run's schedule."""
  import torch
  torch.manual_seed(seed)
  model.train()
  opt = TF1Adam(model.parameters(), settings["adam_beta1"], settings["adam_beta2"],
                settings["adam_epsilon"], settings["clip"])
  lr_at = lr_schedule(settings)
  losses, norms, lrs = [], [], []
  start = time.time()
  for step, batch in enumerate(batches):
    loss = hf_loss(model, batch, full_logits)
    model.zero_grad(set_to_none=True)
    loss.backward()
    lr = lr_at(step)
    norms.append(opt.step(float(lr)))
    losses.append(float(loss.detach()))
    lrs.append(float(lr))
    if (step + 1) % 50 == 0 or step + 1 == len(batches):
      rate = (time.time() - start) / (step + 1)
      log(f"{name}: step {step + 1}/{len(batches)} loss {np.mean(losses[-50:]):.4f} "
          f"({rate:.3f} s/step, ETA {rate * (len(batches) - step - 1):.0f} s)")
  return {"loss": losses, "grad_norm": norms, "learning_rate": lrs,
          "seconds": time.time() - start, "model": model}


def heldout_hf(model, batches):
  import torch
  model.eval()
  with torch.no_grad():
    return float(np.mean([float(hf_loss(model, b)) for b in batches]))
