"""The Python API: any model this project reads, in a few lines (docs/python-api.md).

  import inference
  model = inference.from_pretrained("output/quickstart-tiny/finetune/classify/plm/seed0")
  model.predict(["Return the sum of two numbers."])   # [{"label": ..., "probabilities": {...}}]
  model.encode(["Return the sum of two numbers."])    # token_states, pooled, input_mask, ...

from_pretrained (inference/loading.py) reads run directories, exports, Hugging Face directories
and released XLNet checkpoints (inference/sources.py); the returned Model (inference/model.py)
tokenizes raw text with the model's own tokenizer and rows; predict_file (inference/files.py)
is predict.py's library call.
"""

from inference.loading import from_pretrained
from inference.model import Model

__all__ = ["from_pretrained", "Model"]
