"""mlm: "DAE + Transformer-XL", the denoising row of the XLNet paper's ablation: the records'
target positions are corrupted BERT-style (80% <mask>, 10% a random token, 10% kept; seeded and
stateless, so a resumed run draws the same) and predicted from the content stream, with no
permutation (the model drops perm_mask and reads the targets through target_mapping).
Everything else is plm's (pretraining/plm.py).
"""

import numpy as np
import tensorflow as tf

from data_utils.tokenization import MASK_ID
from modeling.mpnet import pretrain as mpnet_pretrain
from pretraining import plm


class MLM(plm.PLM):
  name = "mlm"
  query_stream = False

  def corrupt(self, task, batch, step):
    """BERT's 80/10/10 at the target positions (input_q [B, L] > 0), from a stateless draw
    seeded by (run seed, replica, step). Returns (corrupted ids [B, L], kind [B, L]:
    MASKED / RANDOM / KEPT of modeling/mpnet/pretrain.py; KEPT off the targets)."""
    ids = batch["input_ids"]
    kind, random_ids = mpnet_pretrain.corruption(tf.shape(ids), task.step_seed(step),
                                                 task.model_config.n_token)
    target = batch["input_q"] > 0
    corrupted = tf.where(kind == mpnet_pretrain.MASKED, MASK_ID,
                         tf.where(kind == mpnet_pretrain.RANDOM, random_ids, ids))
    return tf.where(target, corrupted, ids), tf.where(target, kind, mpnet_pretrain.KEPT)

  def row_ids(self, row):
    """The span's tokens all <mask> (no 80/10/10: scoring), read from the content stream."""
    ids = np.array(row.input_ids)
    ids[row.start:row.end] = MASK_ID
    return ids

  def model_inputs(self, task, batch, step):
    inputs, extra = dict(batch), {}
    inputs["input_ids"], extra["kind"] = self.corrupt(task, batch, step)
    return inputs, extra
