"""The task interface of the training loop (training/trainer.py), written here once: `Task`
(what a task gives and may override), and what every task shares (optimizer settings, the
per-host share of a data set, static batches)."""

import abc
import dataclasses
import weakref

import tensorflow as tf

from data_utils import layouts
from modeling import loading
from training import optimization
from training import recipes


@dataclasses.dataclass(kw_only=True)
class OptimizerConfig:
  """The optimizer/schedule settings every task config carries (training/flags.py).

  A field left None takes the value of `recipe` for the task's model family and script
  (training/recipes.py); `Task.optimizer_settings()` gives the resolved values.
  """
  recipe: str = "release"              # release (the code's defaults) | paper (the papers')
  optimizer: str = None                # release | fairseq (training/optimization.py)
  learning_rate: float = None
  train_steps: int = 1000
  warmup_steps: float = None           # steps, or a fraction of train_steps when < 1
  decay_method: str = None             # linear (the release's "poly") | cosine
  min_lr_ratio: float = None
  weight_decay: float = None
  adam_epsilon: float = None
  adam_beta1: float = None
  adam_beta2: float = None
  clip: float = None                   # global-norm clipping; 0 = off
  lr_layer_decay_rate: float = None
  layer_decay_method: str = None       # release (scale clipped layer gradients) | paper (lrs)
  grad_accumulation_steps: int = 1
  seed: int = 0


def host_examples(ds, input_context):
  """This input pipeline's share of a fine-tuning set: with several hosts (multi-worker, a TPU
  pod) each reads every n-th example, so hosts never train on each other's rows."""
  if input_context and input_context.num_input_pipelines > 1:
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  return ds


_MODEL_FUNCTIONS = weakref.WeakKeyDictionary()      # model -> {key: function}


def model_function(model, key, make):
  """`make(ref)`, made once per model and `key` while the model lives: a function of the model
  (a traced forward) kept with it. `ref` is a weak reference to the model, so the function is
  no reason to keep the model, and it goes with it."""
  made = _MODEL_FUNCTIONS.setdefault(model, {})
  if key not in made:
    made[key] = make(weakref.ref(model))
  return made[key]


def inference_fn(model):
  """`model(batch, training=False)` as a function traced once per model while it lives.

  It is traced once per structure of batch (its keys, dtypes and ranks) with the batch and
  sequence lengths unknown, so the evaluations of a run (at each checkpoint, then on the best
  weights), its predictions and, on the model's inputs alone (layouts.model_inputs), its
  SavedModel export (serving/export.model_call) share one trace, whatever their lengths,
  instead of tracing and optimizing the graph again (model_function: it holds the model
  weakly).

  Returns:
    forward(batch): batch a dict of tensors or arrays, [batch, seq] (RACE: [batch, 4, seq]);
    returns what the model's call does.
  """
  return model_function(model, "inference", _inference)


def _inference(ref):
  traced = tf.function(lambda batch: ref()(batch, training=False),
                       autograph=False)        # the model's call: plain TensorFlow ops

  def forward(batch):
    batch = tf.nest.map_structure(tf.convert_to_tensor, batch)
    return traced.get_concrete_function(tf.nest.map_structure(_any_length, batch))(batch)
  forward.traced = traced                      # its tracing count: the tests'
  return forward


def _any_length(tensor):
  """The TensorSpec of `tensor` with its first and last dimensions unknown: [batch] or
  [batch, ..., seq] (RACE's choices, the middle dimension, stay known)."""
  shape = tensor.shape.as_list()
  return tf.TensorSpec([None] + shape[1:-1] + [None] * (len(shape) > 1), tensor.dtype)


def static_batches(ds, batch_size):
  """Batches whose leading dimension is the static `batch_size` (TPUs need fully static
  shapes; `drop_remainder` alone leaves it unknown after a parse that reshapes)."""
  def fix(features):
    return {k: tf.ensure_shape(v, [batch_size] + v.shape[1:]) for k, v in features.items()}
  return ds.map(tf.autograph.experimental.do_not_convert(fix))


class TokenizerFromFlags:
  """A fine-tuning task's `tokenizer`: its config's --sp_model's SentencePiece or --vocab_file's
  WordPiece for --model_type (--uncased), made on first use (a one-line error without
  either)."""
  _tokenizer = None

  @property
  def tokenizer(self):
    if self._tokenizer is None:
      c = self.config
      self._tokenizer = layouts.make_tokenizer(c.model_type, c.sp_model, c.vocab_file, c.uncased)
    return self._tokenizer


OPTIMIZER_FIELDS = tuple(f.name for f in dataclasses.fields(OptimizerConfig)
                         if f.name not in ("seed", "train_steps"))


class Task(abc.ABC):
  """The contract between a task and the one training loop (training/trainer.py), written once.

  A task must give:
    build_model() -> keras.Model, built under the strategy's scope.
    dataset(input_context, skip_batches=0) -> tf.data.Dataset of this input pipeline's
      per-replica batches (static shapes), the first `skip_batches` skipped (a resume).
    loss(model, batch, state, step, training=True) -> (loss, metrics dict, new state); the
      loss already scaled so that summing it over replicas gives the global mean.
  and may override (the defaults below):
    build_optimizer(model): the recipe's optimizer (training/optimization.py).
    initialize(model, log): weights from `init_checkpoint` (modeling/loading.py), if set.
    state_shape() / initial_state() / state_dtype: the state carried from step to step in
      each replica (pretraining: Transformer-XL memory); default a dummy [1].
    prepare_training_data(): reads and checks the training (and evaluation) data ahead, before
      the run writes anything; default nothing.
    evaluate(model) -> {metric: value}: called at every checkpoint when not None; the best by
      `main_metric` (the highest; the lowest with `lower_is_better`, e.g. a loss) is kept
      under best/ (training/best.py). eval_without_labels() -> why the
      evaluation data cannot be scored, or None (the trainer then skips it, saying why once).
    on_end(model, model_dir, log): at the end of training (pretraining: its exports).
    export(model, export_dir, log, padding, xla, version): the SavedModel on raw text for
      --export_dir (serving/); the default refuses, and finetuning/runner.check_export calls
      that refusal before any training.
  Attributes: `config` (an OptimizerConfig), `seed`, `init_checkpoint`, `tokens_per_step` (for
  the rate), `recipe_script` (pretrain | classifier | squad | race) and `family` (xlnet | mpnet):
  the last two pick the recipe that fills unset optimizer settings.
  """

  state_dtype = tf.float32
  init_checkpoint = None
  recipe_script = "classifier"
  family = "xlnet"
  evaluate = None                 # a method in tasks that evaluate
  main_metric = None
  lower_is_better = False         # main_metric's direction: True for a loss

  @abc.abstractmethod
  def build_model(self):
    """The task's keras model."""

  @abc.abstractmethod
  def dataset(self, input_context, skip_batches=0):
    """This input pipeline's per-replica batches."""

  @abc.abstractmethod
  def loss(self, model, batch, state, step, training=True):
    """(loss, metrics, new state) of one per-replica batch."""

  def eval_without_labels(self):
    """Why the evaluation data cannot be scored (no labels), or None."""
    return None

  def prepare_training_data(self):
    """Reads and checks the data training will read (and evaluate on), before anything is
    written into MODEL_DIR: a data error is then one line with nothing left behind
    (finetuning/runner.train_or_load calls it first). Default: nothing to read ahead."""

  def optimizer_settings(self):
    """The resolved optimizer settings (training/recipes.resolve)."""
    return recipes.resolve(self.config, self.family, self.recipe_script)

  def build_optimizer(self, model):
    settings = self.optimizer_settings()
    kwargs = {k: settings[k] for k in OPTIMIZER_FIELDS if k != "recipe"}
    return optimization.build_optimizer(model, train_steps=settings["train_steps"], **kwargs)

  def initialize(self, model, log):
    if self.init_checkpoint:
      log(f"init from {self.init_checkpoint}: "
          f"{loading.load_checkpoint(model, self.init_checkpoint)}")

  def state_shape(self):
    return [1]

  def initial_state(self):
    return tf.zeros(self.state_shape(), self.state_dtype)

  def replicas(self):
    return tf.distribute.get_strategy().num_replicas_in_sync

  def on_end(self, model, model_dir, log):
    pass

  def export(self, model, export_dir, log=print, padding=None, xla=False, version=None):
    """Writes the SavedModel on raw text for --export_dir (serving/export.py); a task type
    without one refuses at once (finetuning/runner.check_export, before any training)."""
    raise NotImplementedError(f"{type(self).__name__} has no SavedModel export (--export_dir)")
