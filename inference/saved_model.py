"""A SavedModel export of this project behind the Model interface, where its signature allows.

The pretraining encoder's export (serving/export.py encoder_module: `sentence` [N] ->
`input_ids` [N, L], `input_mask` [N, L] (1.0 on padding), `sequence_output` [N, L, D]; XLNet
rows `A <sep> <cls>` left padded with id 0 to a fixed L) gives `encode` for single texts. The
task exports (classifier, RACE, SQuAD) answer on raw text already but do not name their label
set, so they are refused in one line saying what to pass instead.
"""

import numpy as np

from data_utils import fileio

SIGNATURE = "serving_default"
ENCODER_OUTPUTS = {"input_ids", "input_mask", "sequence_output"}


def is_saved_model(path):
  return fileio.exists(fileio.join(path, "saved_model.pb"))


class SavedModelEncoder:
  """`encode` of the pretraining encoder SavedModel at `source` (an XLNet encoder: the summary
  token is the last column). Attributes as inference.Model's: family, labels (), regression,
  has_head (False), max_length (the export's fixed L), batch_size, source, kind, step."""

  family = "xlnet"
  labels = ()
  regression = False
  has_head = False
  kind = "pretraining encoder SavedModel"
  step = None

  def __init__(self, serve, max_length, batch_size, source):
    self._serve, self.max_length, self.batch_size = serve, max_length, int(batch_size)
    self.source = source

  def encode(self, texts, texts_b=None, max_length=None):
    """As inference.Model.encode (single texts only; rows of the export's fixed length, the
    columns that are padding in every row dropped): token_states [batch, seq, hidden], pooled
    [batch, hidden] (<cls>, the last column), input_mask [batch, seq] (1.0 on padding),
    input_ids [batch, seq]."""
    import tensorflow as tf
    if texts_b is not None:
      raise ValueError(f"texts_b: the encoder SavedModel {self.source} takes one text per row")
    if max_length is not None and int(max_length) != self.max_length:
      raise ValueError(f"max_length={max_length}: the encoder SavedModel {self.source} has rows "
                       f"of {self.max_length} tokens")
    texts = [texts] if isinstance(texts, (str, bytes)) else list(texts)
    texts = [t.encode("utf-8", "surrogatepass") if isinstance(t, str) else bytes(t)
             for t in texts]
    parts = {k: [] for k in ENCODER_OUTPUTS}
    for start in range(0, len(texts), self.batch_size):
      out = self._serve(sentence=tf.constant(texts[start:start + self.batch_size]))
      for k in ENCODER_OUTPUTS:
        parts[k].append(out[k].numpy())
    if not texts:
      raise ValueError("texts: no texts")
    ids, mask = np.concatenate(parts["input_ids"]), np.concatenate(parts["input_mask"])
    states = np.concatenate(parts["sequence_output"]).astype(np.float32)
    longest = max(1, int((mask == 0).sum(1).max()))
    return {"token_states": states[:, -longest:], "pooled": states[:, -1],
            "input_mask": mask[:, -longest:].astype(np.float32),
            "input_ids": ids[:, -longest:].astype(np.int32)}

  def _no_head(self, *args, **kwargs):
    raise ValueError(f"{self.source} holds no classification head ({self.kind}); use encode()")

  logits = predict = _no_head

  def rows(self, *args, **kwargs):
    raise ValueError(f"{self.source}: the SavedModel builds its rows in its graph; encode() "
                     "returns them (input_ids, input_mask)")


def load(path, batch_size=32):
  """The SavedModelEncoder of PATH, or a one-line ValueError for another kind of export."""
  import tensorflow as tf
  try:
    import tensorflow_text  # noqa: F401  (the SentencePiece / WordPiece ops)
  except ImportError:
    pass
  serve = tf.saved_model.load(path).signatures.get(SIGNATURE)
  if serve is None:
    raise ValueError(f"{path}: a SavedModel without a {SIGNATURE} signature")
  inputs = set(serve.structured_input_signature[1])
  outputs = set(serve.structured_outputs)
  if inputs != {"sentence"} or not ENCODER_OUTPUTS <= outputs:
    raise ValueError(f"{path}: a task SavedModel ({', '.join(sorted(inputs))} -> "
                     f"{', '.join(sorted(outputs))}): call tf.saved_model.load(PATH)."
                     f"signatures['{SIGNATURE}'] on raw strings, or pass the run directory it "
                     "was exported from (from_pretrained reads its labels there)")
  max_length = int(serve.structured_outputs["input_ids"].shape[-1] or 0) or None
  model = SavedModelEncoder(serve, max_length, batch_size, str(path))
  if model.max_length is None:        # the length is fixed but not in the signature: ask once
    model.max_length = int(serve(sentence=tf.constant([""]))["input_ids"].shape[1])
  return model
