"""Activation recomputation (`--recompute`, RunConfig.recompute): a layer's activations are
not kept for the backward pass but computed again there from its inputs (`tf.recompute_grad`),
trading one more forward per layer for the memory of its intermediate tensors.

The recomputed function must be a pure function of its tensor inputs, or the second forward
computes something else. Dropout is the stateful part (modeling/dropout.py draws each mask's
seed from a Keras SeedGenerator, `next()` assigns a variable), so `layer_call` reads each of
the layer's dropout generators once, outside the recomputed part, and runs the layer under
`dropout.replayed_seeds`: the k-th draw of a generator gets the state + [0, k], the value
`next()` would have returned, and afterwards the generator is advanced once by the number of
draws. The masks, and the generators' states after the call, are those of a run without
recomputation, so losses, gradients, checkpoints and resumes do not depend on the flag.

Gradients reach the tensors passed in `args` and every variable the layer reads
(`tf.recompute_grad`'s gradient function returns the variables' gradients); a tensor the
function only closes over gets none, so every differentiable input must be in `args`.
"""

import tensorflow as tf

from modeling import dropout as dropout_lib


def active(recompute, training):
  """Whether a layer call recomputes: only in training (inference keeps no activations for
  a backward pass, and an exported SavedModel then holds no custom gradient); None is not
  training (as for dropout), a tensor counts as training."""
  if not recompute or training is None:
    return False
  return training if isinstance(training, bool) else True


def layer_call(fn, args, layer, dropouts, recompute=True):
  """fn(*args), recomputed in the backward pass when `recompute`.

  Args:
    fn: a function of float tensors returning a tensor or a tuple of tensors (no None);
      anything else it needs (masks, positions, `training`) it closes over.
    args: the float tensors fn differentiates (activations, and tensors computed outside
      from variables, such as a slice of a bias table).
    layer: the Keras layer fn runs; it must be built (no variable may be created inside the
      recomputed part).
    dropouts: every modeling/dropout.Dropout fn draws from (shared ones included); a draw of
      another is an error.
    recompute: False runs fn(*args) as it is.
  Returns:
    fn's outputs.
  """
  if not recompute:
    return fn(*args)
  check_built(layer)
  unique = {id(d): d for d in dropouts if d.seed_generator is not None}
  # The states read here, before the call; `* 1` copies the value, as SeedGenerator.next().
  bases = {key: d.seed_generator.state.value * 1 for key, d in unique.items()}
  drawn = {}

  def pure(*inputs):
    with dropout_lib.replayed_seeds(bases) as counts:
      out = fn(*inputs)
    drawn.update(counts)        # the same counts in the recomputation (same Python path)
    return out

  out = tf.recompute_grad(pure)(*[tf.convert_to_tensor(a) for a in args])
  for key, count in drawn.items():
    state = unique[key].seed_generator.state
    state.assign(state.value + tf.constant([0, count], state.dtype))
  return out


def check_built(layer):
  """Raises when `layer` or one of its sublayers with weights is not built yet (it would
  create its variables inside the recomputed function; dropouts have none)."""
  unbuilt = [sub.name for sub in layer._flatten_layers(include_self=True, recursive=True)
             if not sub.built and not isinstance(sub, dropout_lib.Dropout)]
  if unbuilt:
    raise ValueError(f"recompute: {', '.join(unbuilt)} not built before the recomputed call "
                     "(build the encoder first)")


def dropouts_of(layer):
  """The modeling/dropout.Dropout layers inside `layer` (itself included)."""
  return [sub for sub in layer._flatten_layers(include_self=True, recursive=True)
          if isinstance(sub, dropout_lib.Dropout)]
