"""Random XLNet pretraining inputs by the release's rule, for benchmarks and tests.

A factorization order is drawn per example; `perm_mask[b, i, j] = 1` means position i may NOT
see position j's content (the release's convention for perm_mask, which the model's masks take
as it is). Lives in the installed packages so that bench/ scripts run from any directory
(the tests package is not installed); the tests import it through tests/reference.py.
"""

import numpy as np


def random_permutation_masks(rng, batch, seq_len, num_predict, pad_rows=1):
  """perm_mask [batch, seq_len, seq_len] and target_mapping [batch, num_predict, seq_len]
  (float32) from a random factorization order drawn with `rng` (a numpy Generator).

  The release's rule: non-targets see non-targets; a target sees non-targets and the targets
  earlier in the order. The last `pad_rows` target rows of the first example are all-zero
  padding (an example with fewer targets than num_predict)."""
  perm_mask = np.zeros([batch, seq_len, seq_len], np.float32)
  mapping = np.zeros([batch, num_predict, seq_len], np.float32)
  for b in range(batch):
    targets = rng.choice(seq_len, size=num_predict, replace=False)
    order = rng.permutation(seq_len)
    rank = np.empty(seq_len, int)
    rank[order] = np.arange(seq_len)
    is_t = np.zeros(seq_len, bool)
    is_t[targets] = True
    for i in range(seq_len):
      for j in range(seq_len):
        if is_t[j] and not (is_t[i] and rank[j] < rank[i]):
          perm_mask[b, i, j] = 1.0
    n_real = num_predict - (pad_rows if b == 0 else 0)
    for k, pos in enumerate(sorted(targets)[:n_real]):
      mapping[b, k, pos] = 1.0
  return perm_mask, mapping
