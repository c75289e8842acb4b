"""MPNet fine-tuning models: classifier, multiple choice (RACE) and SQuAD.

All read the content stream of modeling/mpnet/encoder.py's encoder (fine-tuning has no
query stream) on rows laid out as `<s> A </s></s> B </s>`, right padded
(data_utils/layouts.py). Inputs are the dicts the XLNet models take:
input_ids int [B, L] and input_mask [B, L] (1 on padding); seg_ids are ignored.

  MPNetClassifier   Hugging Face's MPNetForSequenceClassification head on <s>:
                    dropout, dense + tanh, dropout, out_proj -> [B, n_class] ([B]
                    for regression); `hf_variable_map` names its weights.
  MPNetRaceModel    MPNetForMultipleChoice: pooler (dense + tanh on <s>), dropout,
                    dense(1) over each of C rows -> [B, C].
  MPNetSquadModel   the XLNet SQuAD head (start, end conditioned on the start,
                    answerability from <s>) over MPNet's hidden states.
"""

import keras
import tensorflow as tf

from modeling import heads as heads_lib
from modeling.mpnet import encoder as mpnet
from modeling.squad_head import SquadHead
from modeling import dropout as dropout_lib
from modeling import initializers


def _config(config):
  return mpnet.MPNetConfig(**config) if isinstance(config, dict) else config


class _MPNetModel(mpnet.ReferenceNames, keras.Model):
  """The encoder, config round trip and Hugging Face weight names."""

  family = "mpnet"   # modeling/families.py

  def __init__(self, config, recompute=False, **kwargs):
    """recompute: RunConfig.recompute (each encoder layer recomputed in the backward pass)."""
    super().__init__(**kwargs)
    self.config = _config(config)
    self.recompute = recompute
    self.encoder = mpnet.MPNetEncoder(self.config, recompute=recompute)
    self.initializer = initializers.independent(keras.initializers.TruncatedNormal(stddev=0.02))
    self.dropout = dropout_lib.Dropout(self.config.hidden_dropout_prob)

  def encode(self, inputs, training=False):
    """-> [B, L, D] last hidden states."""
    return self.encoder(inputs["input_ids"], input_mask=inputs.get("input_mask"),
                        training=training)

  def dense(self, units, name, activation=None):
    return keras.layers.Dense(units, activation=activation, kernel_initializer=self.initializer,
                              name=name)

  def dummy_inputs(self, batch=2, seq_len=4):
    return {"input_ids": tf.fill([batch, seq_len], 5),
            "input_mask": tf.zeros([batch, seq_len], tf.float32)}

  def ensure_built(self):
    if not self.built or not self.encoder.built:
      self(self.dummy_inputs(), training=False)
    return self

  hf_encoder_prefix = "mpnet."    # the encoder's state-dict prefix in every MPNetFor* class

  def hf_variable_map(self):
    """{Hugging Face state-dict name: (variable, transpose?)} of encoder + head."""
    out = {f"{self.hf_encoder_prefix}{k}": v
           for k, v in mpnet.hf_variable_map(self.encoder).items()}
    for hf_name, layer in self.hf_heads().items():
      out[f"{hf_name}.weight"] = (layer.kernel, True)
      if layer.use_bias:
        out[f"{hf_name}.bias"] = (layer.bias, False)
    return out

  def hf_heads(self):
    return {}

  def hf_config_keys(self, labels=None):
    """The head's config.json keys (`labels`: class names)."""
    del labels
    return {}

  def get_config(self):
    return {"config": self.config.to_dict(), "recompute": self.recompute, "name": self.name}


class MPNetClassifier(_MPNetModel):
  """Sequence classification / regression on the <s> token."""
  hf_architecture = "MPNetForSequenceClassification"   # the transformers class of --export_hf_dir

  def __init__(self, config, n_class=2, regression=False, **kwargs):
    super().__init__(config, **kwargs)
    self.n_class, self.regression = n_class, regression
    d = self.config.hidden_size
    self.head_dense = self.dense(d, "classifier_dense", "tanh")
    self.head_out = self.dense(1 if regression else n_class, "classifier_out_proj")

  def call(self, inputs, training=False):
    x = self.dropout(self.encode(inputs, training)[:, 0], training=training)
    logits = self.head_out(self.dropout(self.head_dense(x), training=training))
    return logits[:, 0] if self.regression else logits

  def hf_heads(self):
    return {"classifier.dense": self.head_dense, "classifier.out_proj": self.head_out}

  def hf_config_keys(self, labels=None):
    from modeling import hf_io
    return hf_io.classifier_keys(self.n_class, self.regression, labels)

  def get_config(self):
    return {**super().get_config(), "n_class": self.n_class, "regression": self.regression}


class MPNetRaceModel(_MPNetModel):
  """Multiple choice: inputs [B, C, L] -> logits [B, C]."""
  hf_architecture = "MPNetForMultipleChoice"   # the transformers class of --export_hf_dir

  def __init__(self, config, **kwargs):
    super().__init__(config, **kwargs)
    self.pooler = self.dense(self.config.hidden_size, "pooler_dense", "tanh")
    self.choice = self.dense(1, "classifier")

  def dummy_inputs(self, batch=2, seq_len=4, n_choice=4):
    return {k: tf.stack([v] * n_choice, axis=1)
            for k, v in super().dummy_inputs(batch, seq_len).items()}

  def call(self, inputs, training=False):
    shape = tf.shape(inputs["input_ids"])
    flat = {k: tf.reshape(inputs[k], [-1, shape[2]]) for k in ("input_ids", "input_mask")}
    pooled = self.pooler(self.encode(flat, training)[:, 0])
    logits = self.choice(self.dropout(pooled, training=training))
    return tf.reshape(logits, [shape[0], shape[1]])

  def hf_heads(self):
    return {"mpnet.pooler.dense": self.pooler, "classifier": self.choice}


class MPNetSquadModel(_MPNetModel):
  """SQuAD: the outputs of modeling/squad_head.py (cls_index 0 = <s>)."""
  hf_architecture = None   # the transformers class of --export_hf_dir
  hf_missing = "the SQuAD head on MPNet (XLNet's beam head) has no Hugging Face class"

  def __init__(self, config, start_n_top=5, end_n_top=5, **kwargs):
    super().__init__(config, **kwargs)
    self.start_n_top, self.end_n_top = start_n_top, end_n_top
    self.head = SquadHead(start_n_top, end_n_top, dropout=self.config.hidden_dropout_prob,
                          kernel_initializer=self.initializer, name="squad_head")

  def dummy_inputs(self, batch=2, seq_len=8):
    inputs = super().dummy_inputs(batch, seq_len)
    inputs.update(p_mask=tf.zeros([batch, seq_len], tf.float32),
                  cls_index=tf.zeros([batch], tf.int32))
    return inputs

  def call(self, inputs, training=False):
    hidden = self.encode(inputs, training)
    return self.head(hidden, inputs["p_mask"], inputs["cls_index"],
                     start_positions=inputs.get("start_positions"), training=training)

  def get_config(self):
    return {**super().get_config(), "start_n_top": self.start_n_top,
            "end_n_top": self.end_n_top}


class MPNetWithHead(_MPNetModel):
  """The encoder's last layer under any head of modeling/heads.py, given by its spec
  ({"type": "token_tagger", "n_class": 9}); the head's dropout is the config's
  hidden_dropout_prob, as in Hugging Face's MPNetFor* heads. Returns what the head returns."""

  def __init__(self, config, head=None, **kwargs):
    super().__init__(config, **kwargs)
    self.head = heads_lib.build(head, kernel_initializer=self.initializer,
                                dropout=self.config.hidden_dropout_prob)
    self.dropout.built = True    # the shared base's dropout, unused: the head has its own

  @property
  def hf_architecture(self):
    """transformers' class of an export (MPNetModel: no `mpnet.` prefix)."""
    return "MPNet" + self.head.hf_suffix

  @property
  def hf_encoder_prefix(self):
    return "" if self.head.hf_suffix == "Model" else "mpnet."

  def call(self, inputs, training=False):
    """inputs: input_ids int [B, L], input_mask [B, L] (1 on padding); seg_ids unused."""
    return self.head(self.encode(inputs, training), inputs.get("input_mask"),
                     training=training)

  def hf_heads(self):
    return self.head.hf_layers()

  def hf_config_keys(self, labels=None):
    return self.head.hf_config(labels)

  def get_config(self):
    return {**super().get_config(), "head": self.head.spec()}
