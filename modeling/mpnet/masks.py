"""MPNet's pretraining masks (the paper's Figure 2 / the release), as exact matrices.

Key layout (the content stream): [N: the n - c non-predicted tokens] [P: the c
predicted tokens, in factorization order] [M: c mask copies carrying the
predicted tokens' positions]. The query stream has c rows, one per prediction.
True = blocked (the project's one convention).

Modes (the ablation of the paper's Table 6):
  "mpnet": position compensation on (keys N + P + M).
  "plm":   no position compensation (= XLNet's PLM, keys N + P).
  "mlm":   no output dependency either (= MLM: [M] at the predicted positions,
           keys N + M, everyone sees everyone; predictions read the M rows).
"MLM + output dependency" is "mpnet" with the identity permutation.
"""

import numpy as np

MODES = ("mpnet", "plm", "mlm")


def mpnet_masks(n, c, mode="mpnet"):
  """Returns (content_mask [K, K], query_mask [c, K] or None), bool, True = blocked."""
  if mode not in MODES:
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
  m = n - c
  if mode == "mlm":
    return np.zeros([n, n], bool), None
  k = np.arange(c)
  if mode == "plm":
    content = np.zeros([n, n], bool)
    content[:m, m:] = True                                   # non-predicted see no prediction
    content[m:, m:] = k[None, :] > k[:, None]                # P_i sees P_j for j <= i
    query = np.zeros([c, n], bool)
    query[:, m:] = k[None, :] >= k[:, None]                  # query i sees P_j for j < i
    return content, query
  size = n + c
  content = np.zeros([size, size], bool)
  content[:m, m:n] = True                                    # N rows: no predicted content
  content[n:, m:n] = True                                    # M rows: no predicted content
  content[m:n, m:n] = k[None, :] > k[:, None]                # P_i sees P_j, j <= i
  content[m:n, n:] = k[None, :] <= k[:, None]                # P_i sees M_j, j > i
  query = np.zeros([c, size], bool)
  query[:, m:n] = k[None, :] >= k[:, None]                   # query i sees P_j, j < i
  query[:, n:] = k[None, :] < k[:, None]                     # query i sees M_j, j >= i
  return content, query


def position_ids(perm, c, mode="mpnet"):
  """Position ids of the content stream (and of the query stream) for a permutation.

  perm: [n] the original position of each permuted token (predicted last).
  mpnet: content = perm + perm[n-c:] (the mask copies), query = perm[n-c:];
  plm: content = perm, query = perm[n-c:]; mlm: content = perm (no query).
  """
  perm = np.asarray(perm)
  tail = perm[len(perm) - c:]
  if mode == "mpnet":
    return np.concatenate([perm, tail]), tail
  if mode == "plm":
    return perm, tail
  return perm, None
