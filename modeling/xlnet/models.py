"""Task models: the encoder plus a head, each mapping to the release's checkpoint names.

Inputs are dicts of tensors (shapes in `modeling/ops.py`'s glossary):
  input_ids [B, L] int, seg_ids [B, L] int, input_mask [B, L] (1 = padding),
  and per task: perm_mask [B, L, L], target_mapping [B, P, L] (pretraining);
  p_mask [B, L], cls_index [B], start_positions [B] (SQuAD);
  RACE takes [B, C, L] for every per-token input (C choices).
"""

import keras
import tensorflow as tf

from modeling import heads as heads_lib
from modeling.xlnet import hf_names as hf
from modeling.xlnet import release_names as names
from modeling.run_config import RunConfig
from modeling.xlnet.config import XLNetConfig
from modeling.xlnet.classification_head import ClassificationHead
from modeling.xlnet.lm_head import LMHead
from modeling.xlnet.sequence_summary import SequenceSummary
from modeling.squad_head import SquadHead
from modeling.xlnet.encoder import XLNetEncoder


def _configs(config, run_config):
  if isinstance(config, dict):
    config = XLNetConfig.from_dict(config)
  if isinstance(run_config, dict):
    run_config = RunConfig.from_dict(run_config)
  return config, run_config or RunConfig()


class _XLNetModel(keras.Model):
  """Shared plumbing: the encoder, config round trip, checkpoint names."""

  family = "xlnet"   # modeling/families.py

  def __init__(self, config, run_config=None, **kwargs):
    super().__init__(**kwargs)
    self.config, self.run_config = _configs(config, run_config)
    self.encoder = XLNetEncoder(self.config, self.run_config, name="transformer")
    self.initializer = self.run_config.initializer()

  def encode(self, inputs, mems=None, training=False):
    return self.encoder(inputs["input_ids"], seg_ids=inputs.get("seg_ids"),
                        input_mask=inputs.get("input_mask"),
                        perm_mask=inputs.get("perm_mask"),
                        target_mapping=inputs.get("target_mapping"),
                        mems=mems, training=training)

  def _summary(self, summary_type, use_proj, name="sequnece_summary"):
    c, r = self.config, self.run_config
    return SequenceSummary(summary_type, use_proj, n_head=c.n_head, d_head=c.d_head,
                           dropout=r.dropout, dropatt=r.dropatt,
                           kernel_initializer=self.initializer, name=name)

  def tf1_variables(self):
    """{release variable name: variable} for every weight of this model."""
    raise NotImplementedError

  # Hugging Face (modeling/xlnet/hf.py asks the model, never its class)
  hf_encoder_prefix = hf.PREFIX        # the encoder's state-dict prefix in the export

  def hf_head_rows(self, source_architecture=None):
    """Rows (modeling/xlnet/hf_names.py) of the head's weights that Hugging Face's class
    has; `source_architecture` (a loaded config.json's) leaves out what a file of another
    class holds under the same name."""
    raise ValueError(f"{type(self).__name__} has no Hugging Face head")

  def hf_config_keys(self, labels=None):
    """The head's config.json keys (`labels`: class names)."""
    del labels
    return {}

  def check_hf_export(self):
    """ValueError (one line) when the head has no Hugging Face equivalent."""

  def _summary_rows(self):
    return hf.dense("sequence_summary.summary", hf.SUMMARY) \
        if f"{hf.SUMMARY}/kernel" in self.tf1_variables() else []

  def _summary_keys(self):
    return dict(summary_type=self.summary_type, summary_use_proj=self.use_proj,
                summary_activation="tanh", summary_last_dropout=self.run_config.dropout)

  def reference_variables(self):
    """{reference name: variable}, the names other code compares and decays by (every
    family's models have this): the release's TF1 names."""
    return dict(self.tf1_variables())

  @property
  def num_layers(self):
    return self.config.n_layer

  def dummy_inputs(self, batch=2, seq_len=4):
    """Tiny inputs that create every variable (batch 2 suits bi_data)."""
    return {"input_ids": tf.zeros([batch, seq_len], tf.int32),
            "seg_ids": tf.zeros([batch, seq_len], tf.int32),
            "input_mask": tf.zeros([batch, seq_len], tf.float32)}

  def ensure_built(self):
    """Creates the variables with a tiny forward pass if not done yet."""
    if not self.built or not self.encoder.built:
      self(self.dummy_inputs(), training=False)
    return self

  def get_config(self):
    return {"config": self.config.to_dict(), "run_config": self.run_config.to_dict(),
            "name": self.name}


class XLNetPretrainModel(_XLNetModel):
  """Encoder + tied LM head (+ an optional next-sentence head).

  call(inputs, mems, training, query_stream):
    query_stream=True (plm): two-stream; logits [B, P, V] from the query stream at
      target_mapping.
    query_stream=False (mlm): content stream only (inputs already corrupted); logits
      [B, P, V] of the content stream gathered at target_mapping.
    Without a target_mapping: logits [B, L, V] of the content stream.
  Also returns "hidden" (what the LM head read), "content_output", "new_mems"
  [N, B, M', D] when mem_len > 0, and "nsp_logits" [B, 2] with nsp=True.
  """
  hf_architecture = "XLNetLMHeadModel"   # the transformers class of --export_hf_dir

  def __init__(self, config, run_config=None, nsp=False, **kwargs):
    super().__init__(config, run_config, **kwargs)
    self.nsp = nsp
    self.lm_head = LMHead(self.config.n_token)
    if nsp:
      self.nsp_summary = self._summary("last", True, name="nsp_summary")
      self.nsp_head = ClassificationHead(2, kernel_initializer=self.initializer, name="nsp_head")

  def call(self, inputs, mems=None, training=False, query_stream=True):
    mapping = inputs.get("target_mapping")
    if not query_stream and mapping is not None:   # predict from the content stream
      inputs = {k: v for k, v in inputs.items() if k not in ("target_mapping", "perm_mask")}
    out = self.encode(inputs, mems, training)
    if "query_output" in out:
      hidden = out["query_output"]
    elif mapping is not None:
      hidden = tf.einsum("bpl,blD->bpD", tf.cast(mapping, out["content_output"].dtype),
                         out["content_output"])
    else:
      hidden = out["content_output"]
    result = {"logits": self.lm_head(hidden, self.encoder.word_embedding), "hidden": hidden,
              "content_output": out["content_output"]}
    if "new_mems" in out:
      result["new_mems"] = out["new_mems"]
    if self.nsp:
      result["nsp_logits"] = self.nsp_head(self.nsp_summary(out["content_output"],
                                                            training=training))
    return result

  def hf_head_rows(self, source_architecture=None):
    return [("lm_loss.bias", "model/lm_loss/bias", None, False)]

  def tf1_variables(self):
    names_map = {**names.encoder(self.encoder), **names.lm_head(self.lm_head)}
    if self.nsp:
      names_map.update(names.summary(self.nsp_summary))
      names_map.update(names.dense(self.nsp_head.dense, "model/nsp/logit"))
    return names_map

  def get_config(self):
    return {**super().get_config(), "nsp": self.nsp}


class XLNetClassifier(_XLNetModel):
  """Sequence summary + logits: [B, n_class] (regression: [B])."""
  hf_architecture = "XLNetForSequenceClassification"   # the transformers class of --export_hf_dir

  def __init__(self, config, run_config=None, n_class=2, task_name="task", regression=False,
               summary_type="last", use_proj=True, **kwargs):
    super().__init__(config, run_config, **kwargs)
    self.n_class, self.task_name, self.regression = n_class, task_name, regression
    self.summary_type, self.use_proj = summary_type, use_proj
    self.summary = self._summary(summary_type, use_proj)
    self.head = ClassificationHead(1 if regression else n_class,
                                   kernel_initializer=self.initializer, name="logit_head")

  def call(self, inputs, training=False):
    hidden = self.encode(inputs, training=training)["content_output"]
    logits = self.head(self.summary(hidden, inputs.get("input_mask"), training=training))
    return logits[:, 0] if self.regression else logits

  def _logit_scope(self):
    return f"model/{'regression' if self.regression else 'classification'}_{self.task_name}/logit"

  def tf1_variables(self):
    return {**names.encoder(self.encoder), **names.summary(self.summary),
            **names.dense(self.head.dense, self._logit_scope())}

  def hf_head_rows(self, source_architecture=None):
    proj = [] if source_architecture == "XLNetForMultipleChoice" else \
        hf.dense("logits_proj", self._logit_scope())
    return self._summary_rows() + proj

  def hf_config_keys(self, labels=None):
    from modeling import hf_io
    return {**self._summary_keys(), **hf_io.classifier_keys(self.n_class, self.regression,
                                                             labels)}

  def check_hf_export(self):
    hf.check_summary(self.summary_type)

  def get_config(self):
    return {**super().get_config(), "n_class": self.n_class, "task_name": self.task_name,
            "regression": self.regression, "summary_type": self.summary_type,
            "use_proj": self.use_proj}


class XLNetSquadModel(_XLNetModel):
  """SQuAD: see SquadHead for the outputs."""
  hf_architecture = "XLNetForQuestionAnswering"   # the transformers class of --export_hf_dir

  def __init__(self, config, run_config=None, start_n_top=5, end_n_top=5, **kwargs):
    super().__init__(config, run_config, **kwargs)
    self.start_n_top, self.end_n_top = start_n_top, end_n_top
    self.head = SquadHead(start_n_top, end_n_top, dropout=self.run_config.dropout,
                          kernel_initializer=self.initializer, name="squad_head")

  def dummy_inputs(self, batch=2, seq_len=8):
    inputs = super().dummy_inputs(batch, seq_len)
    inputs.update(p_mask=tf.zeros([batch, seq_len], tf.float32),
                  cls_index=tf.fill([batch], seq_len - 1))
    return inputs

  def call(self, inputs, training=False):
    hidden = self.encode(inputs, training=training)["content_output"]
    return self.head(hidden, inputs["p_mask"], inputs["cls_index"],
                     start_positions=inputs.get("start_positions"), training=training)

  def tf1_variables(self):
    return {**names.encoder(self.encoder), **names.squad_head(self.head)}

  def hf_head_rows(self, source_architecture=None):
    return (hf.dense("start_logits.dense", "start_logits/dense")
            + hf.dense("end_logits.dense_0", "end_logits/dense_0")
            + hf.layer_norm("end_logits.LayerNorm", "end_logits/LayerNorm")
            + hf.dense("end_logits.dense_1", "end_logits/dense_1")
            + hf.dense("answer_class.dense_0", "answer_class/dense_0")
            + hf.dense("answer_class.dense_1", "answer_class/dense_1", bias=False))

  def hf_config_keys(self, labels=None):
    return dict(start_n_top=self.start_n_top, end_n_top=self.end_n_top)

  def get_config(self):
    return {**super().get_config(), "start_n_top": self.start_n_top,
            "end_n_top": self.end_n_top}


class XLNetRaceModel(_XLNetModel):
  """Multiple choice: each of C (context, question+option) rows scored by
  summary + dense(1); returns logits [B, C]."""
  hf_architecture = "XLNetForMultipleChoice"   # the transformers class of --export_hf_dir

  def __init__(self, config, run_config=None, summary_type="last", use_proj=True, **kwargs):
    super().__init__(config, run_config, **kwargs)
    self.summary_type, self.use_proj = summary_type, use_proj
    self.summary = self._summary(summary_type, use_proj)
    self.head = ClassificationHead(1, kernel_initializer=self.initializer, name="choice_head")

  def dummy_inputs(self, batch=2, seq_len=4, n_choice=4):
    return {k: tf.stack([v] * n_choice, axis=1)
            for k, v in super().dummy_inputs(batch, seq_len).items()}

  def call(self, inputs, training=False):
    ids = tf.convert_to_tensor(inputs["input_ids"])
    n_choice, seq_len = ids.shape[1], ids.shape[2] or tf.shape(ids)[2]   # served: dynamic L
    flat = {k: tf.reshape(v, [-1, seq_len]) for k, v in inputs.items()
            if k in ("input_ids", "seg_ids", "input_mask")}
    hidden = self.encode(flat, training=training)["content_output"]
    scores = self.head(self.summary(hidden, flat.get("input_mask"), training=training))
    return tf.reshape(scores, [-1, n_choice])

  def tf1_variables(self):
    return {**names.encoder(self.encoder), **names.summary(self.summary),
            **names.dense(self.head.dense, "logits/dense")}

  def hf_head_rows(self, source_architecture=None):
    proj = [] if source_architecture == "XLNetForSequenceClassification" else \
        hf.dense("logits_proj", "logits/dense")
    return self._summary_rows() + proj

  def hf_config_keys(self, labels=None):
    return self._summary_keys()

  def check_hf_export(self):
    hf.check_summary(self.summary_type)

  def get_config(self):
    return {**super().get_config(), "summary_type": self.summary_type,
            "use_proj": self.use_proj}


class XLNetWithHead(_XLNetModel):
  """The encoder's content stream under any head of modeling/heads.py, given by its spec
  ({"type": "token_tagger", "n_class": 9}). The head's layers are named
  `model/<Hugging Face name>/{kernel,bias}` in checkpoints; its dropout is 0, as in Hugging
  Face's XLNetFor* heads (the encoder's output has had the run's dropout already).
  Returns what the head returns."""

  def __init__(self, config, run_config=None, head=None, **kwargs):
    super().__init__(config, run_config, **kwargs)
    self.head = heads_lib.build(head, kernel_initializer=self.initializer, dropout=0.0)

  @property
  def hf_architecture(self):
    """transformers' class of an export (XLNetModel: no `transformer.` prefix)."""
    return "XLNet" + self.head.hf_suffix

  @property
  def hf_encoder_prefix(self):
    return "" if self.head.hf_suffix == "Model" else hf.PREFIX

  def call(self, inputs, training=False):
    """inputs: input_ids int [B, L], seg_ids int [B, L], input_mask [B, L] (1 on padding)."""
    hidden = self.encode(inputs, training=training)["content_output"]
    return self.head(hidden, inputs.get("input_mask"), training=training)

  def tf1_variables(self):
    out = dict(names.encoder(self.encoder))
    for name, layer in self.head.hf_layers().items():
      out.update(names.dense(layer, f"model/{name}"))
    return out

  def hf_head_rows(self, source_architecture=None):
    return [row for name, layer in self.head.hf_layers().items()
            for row in hf.dense(name, f"model/{name}", bias=layer.use_bias)]

  def hf_config_keys(self, labels=None):
    return self.head.hf_config(labels)

  def get_config(self):
    return {**super().get_config(), "head": self.head.spec()}
