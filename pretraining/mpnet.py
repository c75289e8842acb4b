"""mpnet: MPNet (masked and permuted pretraining, modeling/mpnet/pretrain.py) on the same
records: the stored targets are the predicted set, their stored ranks the order of the
predictions. --mpnet_mode switches the paper's ablations (mpnet | plm: - position compensation |
mlm: - both) and --nompnet_permute keeps the predictions in position order (- permutation).
MPNet carries no memory; its export is the Hugging Face layout (MPNetForMaskedLM).
"""

import numpy as np
import tensorflow as tf

from modeling.mpnet import hf as mpnet_hf
from modeling.mpnet import pretrain as mpnet_pretrain
from pretraining import objective


class MPNet(objective.Objective):
  name = "mpnet"
  family = "mpnet"
  carries_memory = False

  def build_model(self, task):
    return mpnet_pretrain.MPNetPretrainModel(task.model_config, mode=task.config.mpnet_mode)

  def predict(self, task, model, batch, state, step, training=True):
    c = task.config
    inputs = mpnet_pretrain.build_inputs(
        batch["input_ids"], batch["is_masked"], batch["rank"], c.num_predict,
        task.step_seed(step), mode=c.mpnet_mode, permute=c.mpnet_permute,
        vocab_size=task.vocab_size)
    extra = {"query_pos": inputs["query_pos"], "kind": inputs["kind"]}
    return model(inputs, training=training), inputs["targets"], None, extra, state

  def span_log_probs(self, task, model, row):
    """The span as MPNet's predicted set, predicted left to right (rank = position), every
    copy <mask> (no 80/10/10), in the run's --mpnet_mode."""
    ids = np.asarray(row.input_ids)[None]
    masked = np.zeros(ids.shape, bool)
    masked[0, row.start:row.end] = True
    rank = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
    inputs = mpnet_pretrain.build_inputs(
        tf.constant(ids), tf.constant(masked), tf.constant(rank), row.end - row.start,
        tf.constant([0, 0], tf.int64), mode=task.config.mpnet_mode, permute=True,
        vocab_size=task.vocab_size, corrupt=False)
    logits = model(inputs, training=False)[0]
    logp = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    return tf.gather(logp, inputs["targets"][0], batch_dims=1).numpy()

  def export(self, task, model, export_dir, log):
    """config.json + model.safetensors (transformers' MPNetForMaskedLM)."""
    mpnet_hf.save_hf_weights(model.hf_variable_map(), task.model_config, export_dir,
                             "MPNetForMaskedLM")
    log(f"exported MPNet in the Hugging Face layout: {export_dir}/config.json + "
        "model.safetensors")
