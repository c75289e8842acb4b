"""What every export's self-check shares, and the pretraining encoder's export.

An export is a serving module plus the Python path's answers on the self-check inputs
(serving/export.py publishes only when the two agree). Each fine-tuning task exports through its
own `export` method (finetuning/classifier_task.py, race.py, squad.py), with the helpers here;
the pretraining encoder's serving module is here (`export_encoder`; the XLNet objectives
export through it, pretraining/plm.py).

The Python path is what the scripts themselves run: the tokenizer, the feature code
(data_utils/layouts.py's rows, the tasks' encoders) and the model. Its raw texts may be bytes
or str: each is first decoded as the serving graph decodes a request (serving/utf8.py: invalid
UTF-8 -> U+FFFD), so the two give the same outputs on the same bytes.
"""

import numpy as np
import tensorflow as tf

from data_utils import layouts
from serving import export, utf8

LONG_PROBE = " ".join(export.PROBE_TEXTS) * 12        # longer than any window


def softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def forward(model, arrays):
  out = model({k: tf.constant(v) for k, v in arrays.items()}, training=False)
  if isinstance(out, dict):
    return {k: v.numpy() for k, v in out.items()}
  return out.numpy().astype(np.float64)


def encoder_outputs(model, tokenizer, max_seq_length, texts):
  """The Python path's encoder rows (the classifier's single-text rows, `A <sep> <cls>`) and
  content-stream output."""
  arrays = layouts.encode_texts(tokenizer, utf8.python_texts(texts), None, max_seq_length,
                                "xlnet")
  out = forward(model, arrays)
  return {"input_ids": arrays["input_ids"], "input_mask": arrays["input_mask"],
          "sequence_output": out["content_output"]}


def export_encoder(model, tokenizer, max_seq_length, export_dir, log=print):
  texts = list(export.PROBE_TEXTS) + [LONG_PROBE]
  module = export.encoder_module(model, tokenizer, max_seq_length)
  return export.save(module, export_dir, {"sentence": np.array(texts, object)},
                     encoder_outputs(model, tokenizer, max_seq_length, texts), log=log)
