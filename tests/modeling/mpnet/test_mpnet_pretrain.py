"""MPNet pretraining inputs from the shared records, and an XLA train step per mode."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import losses
from modeling.mpnet import encoder as mpnet
from modeling.mpnet import pretrain as mpnet_pretrain


def _records(batch=3, length=10, c=3, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(9, 50, [batch, length]).astype(np.int32)
  masked = np.zeros([batch, length], bool)
  for b in range(batch):
    masked[b, rng.choice(length, c, replace=False)] = True
  rank = np.stack([rng.permutation(length) for _ in range(batch)]).astype(np.int32)
  return ids, masked, rank


def test_inputs_put_targets_last_in_factorization_order():
  ids, masked, rank = _records()
  out = mpnet_pretrain.build_inputs(tf.constant(ids), tf.constant(masked), tf.constant(rank), 3,
                                    tf.constant([1, 2]), vocab_size=50)
  pos = out["content_pos"].numpy()
  for b in range(3):
    targets = np.flatnonzero(masked[b])
    expected_tail = targets[np.argsort(rank[b, targets])]
    np.testing.assert_array_equal(pos[b, 7:10], expected_tail)      # predicted, by rank
    np.testing.assert_array_equal(pos[b, 10:], expected_tail)       # mask copies' positions
    np.testing.assert_array_equal(pos[b, :7], np.flatnonzero(~masked[b]))
    np.testing.assert_array_equal(out["targets"].numpy()[b], ids[b, expected_tail])
  assert out["content_ids"].shape == (3, 13) and out["content_mask"].shape == (1, 13, 13)
  plain = mpnet_pretrain.build_inputs(tf.constant(ids), tf.constant(masked), tf.constant(rank),
                                      3, tf.constant([1, 2]), permute=False, vocab_size=50)
  for b in range(3):                       # "- permutation": predictions in position order
    np.testing.assert_array_equal(plain["query_pos"].numpy()[b], np.flatnonzero(masked[b]))


def test_copies_follow_80_10_10():
  ids = np.tile(np.arange(9, 9 + 400, dtype=np.int32) % 50 + 9, [50, 1])[:, :400]
  masked = np.zeros_like(ids, bool)
  masked[:, ::2] = True
  rank = np.tile(np.arange(400, dtype=np.int32), [50, 1])
  out = mpnet_pretrain.build_inputs(tf.constant(ids), tf.constant(masked), tf.constant(rank),
                                    200, tf.constant([3, 4]), vocab_size=60)
  copies, targets = out["query_ids"].numpy(), out["targets"].numpy()
  mask_frac = (copies == mpnet_pretrain.MASK_ID).mean()
  kept = (copies == targets).mean()
  assert abs(mask_frac - 0.8) < 0.01 and 0.09 < kept < 0.13   # 10% kept + random hits


@pytest.mark.parametrize("mode", ["mpnet", "plm", "mlm"])
@pytest.mark.slow
def test_train_step_compiles_and_learns(mode):
  config = mpnet.MPNetConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                             num_attention_heads=2, intermediate_size=32,
                             max_position_embeddings=20, hidden_dropout_prob=0.1,
                             attention_probs_dropout_prob=0.1)
  model = mpnet_pretrain.MPNetPretrainModel(config, mode=mode)
  ids, masked, rank = _records(batch=4, length=12, c=3)
  optimizer = keras.optimizers.AdamW(learning_rate=1e-2)

  @tf.function(jit_compile=True)
  def step(ids, masked, rank, seed):
    inputs = mpnet_pretrain.build_inputs(ids, masked, rank, 3, seed, mode=mode, vocab_size=50)
    with tf.GradientTape() as tape:
      loss = losses.lm_loss(model(inputs, training=True), inputs["targets"])
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  args = [tf.constant(x) for x in (ids, masked, rank)]
  seen = [float(step(*args, tf.constant([0, 5]))) for _ in range(40)]
  assert np.isfinite(seen).all() and np.mean(seen[-5:]) < np.mean(seen[:5]) - 0.5, seen


def test_bos_first_moves_record_rows_into_mpnets_layout():
  # two record rows [A <sep> B <sep> <cls>] (<sep> 4, <cls> 3), targets marked, ranks
  ids = np.array([[11, 12, 4, 13, 4, 3], [21, 4, 22, 23, 4, 3]], np.int32)
  masked = np.array([[0, 1, 0, 1, 0, 0], [1, 0, 0, 1, 0, 0]], bool)
  rank = np.array([[5, 0, 4, 1, 3, 2], [1, 2, 3, 0, 4, 5]], np.int32)
  got = [t.numpy() for t in mpnet_pretrain.bos_first(tf.constant(ids), tf.constant(masked),
                                                     tf.constant(rank), 1)]
  np.testing.assert_array_equal(got[0], [[1, 11, 12, 4, 13, 4], [1, 21, 4, 22, 23, 4]])
  np.testing.assert_array_equal(got[1], [[0, 0, 1, 0, 1, 0], [0, 1, 0, 0, 1, 0]])
  np.testing.assert_array_equal(got[2], [[0, 5, 0, 4, 1, 3], [0, 1, 2, 3, 0, 4]])
  # the targets are the same tokens as before, in the same order of ranks
  for b in range(2):
    before = ids[b][masked[b]][np.argsort(rank[b][masked[b]], kind="stable")]
    after = got[0][b][got[1][b]][np.argsort(got[2][b][got[1][b]], kind="stable")]
    np.testing.assert_array_equal(before, after)
