"""Random choices of the pretraining data, vectorised over many examples at once.

Pure numpy functions of an explicit `np.random.Generator`; each follows the
release's rule (see ../shared/reference/xlnet.md) with its faults fixed:

- `lanes`: the release's batchify into bsz rows, bi_data rows reversed, per-core layout.
- `split_a_b`: segments A and B for every step of one lane (B the true
  continuation with p = 0.5, else a random span), as `_split_a_and_b`.
- `sample_targets`: span-based targets (n in 1..5 with p ∝ 1/n, context
  n * alpha / beta), over whole words (mode "word"), the release's n pieces
  (mode "piece"), or single random tokens (mode "single"); never a func token;
  exactly `goal` targets per example.
- `permutation_ranks`: the factorization order, a random permutation inside
  every perm_size block.
"""

import numpy as np

MAX_GRAM = 5
_GRAM_P = 1.0 / np.arange(1, MAX_GRAM + 1)       # n in 1..MAX_GRAM with p ~ 1/n
_GRAM_P /= _GRAM_P.sum()
_GRAM_CDF = _GRAM_P.cumsum()                      # as Generator.choice computes it
_GRAM_CDF /= _GRAM_CDF[-1]


def lanes(stream, sent_ids, bsz_per_host, num_core_per_host=1, bi_data=False):
  """Cuts one token stream into batch rows, laid out per core.

  Returns (data [bsz, T], sent [bsz, T], reversed [bsz] bool). With bi_data the
  stream is cut into bsz/2 forward rows; every core holds its forward rows
  first, then the same rows reversed (the release's layout), so a contiguous
  per-replica split of a batch is half forward, half backward.
  """
  n_fwd = bsz_per_host // 2 if bi_data else bsz_per_host
  steps = len(stream) // n_fwd
  data = stream[:n_fwd * steps].reshape(n_fwd, steps)
  sent = sent_ids[:n_fwd * steps].reshape(n_fwd, steps)
  if not bi_data:
    return data, sent, np.zeros(bsz_per_host, bool)
  per_core = bsz_per_host // num_core_per_host // 2
  data = data.reshape(num_core_per_host, 1, per_core, steps)
  sent = sent.reshape(num_core_per_host, 1, per_core, steps)
  data = np.concatenate([data, data[..., ::-1]], axis=1).reshape(bsz_per_host, steps)
  sent = np.concatenate([sent, sent[..., ::-1]], axis=1).reshape(bsz_per_host, steps)
  rev = np.tile(np.repeat([False, True], per_core), num_core_per_host)
  return data, sent, rev


def split_a_b(rng, sent, begins, tot_len):
  """Segments A and B starting at each of `begins` in one row.

  Args:
    sent: [T] sentence ids of the row (a change marks a sentence boundary).
    begins: [m] start of A for each step.
    tot_len: tokens of A + B together.
  Returns:
    dict of [m] arrays a_begin, a_end, b_begin, b_end, label (1 = B is the
    true continuation), ok (False where the release returns None).
  """
  data_len = len(sent)
  begins = np.asarray(begins, np.int64)
  m = len(begins)
  bounds = np.flatnonzero(sent[1:] != sent[:-1]) + 1
  nb = len(bounds)
  pick = lambda idx: bounds[np.clip(idx, 0, max(nb - 1, 0))] if nb else np.zeros_like(idx)
  u_label, u_cut, u_b = rng.random(m), rng.random(m), rng.random(m)

  lo = np.searchsorted(bounds, begins, "right")
  hi = np.searchsorted(bounds, begins + tot_len, "left")
  count = hi - lo
  end_idx = np.where(hi < nb, pick(hi), data_len)
  cut = pick(lo + np.floor(u_cut * count).astype(np.int64))
  random_b = (count == 0) | (u_label < 0.5)
  a_end = np.where(count == 0, end_idx, cut)

  # B as a random span, grown to whole sentences.
  b_len = np.maximum(1, tot_len - (a_end - begins))
  b_begin = np.floor(u_b * np.maximum(data_len - b_len, 1)).astype(np.int64)
  b_end = b_begin + b_len
  j = np.searchsorted(bounds, b_begin, "right") - 1
  b_begin = np.where(j >= 0, pick(j), 0)
  j = np.searchsorted(bounds, b_end, "left")
  b_end = np.minimum(np.where(j < nb, pick(j), data_len - 1), data_len - 1)
  b_begin = np.where(random_b, b_begin, a_end)
  b_end = np.where(random_b, b_end, end_idx)

  a, b = _trim(a_end - begins, b_end - b_begin, tot_len)
  a_end, b_end = begins + a, b_begin + b
  ok = (begins + tot_len < data_len) & (a_end < data_len) & (b_end < data_len)
  return {"a_begin": begins, "a_end": a_end, "b_begin": b_begin, "b_end": b_end,
          "label": (~random_b).astype(np.int64), "ok": ok}


def split_a_b_rows(rng, sent_rows, begins, tot_len):
  """`split_a_b` of every row of SENT_ROWS [R, T] in turn (the same draws, in the same order),
  computed for all rows at once: dict of [R, m] arrays."""
  num_rows, data_len = sent_rows.shape
  begins = np.asarray(begins, np.int64)
  m = len(begins)
  u = rng.random(num_rows * 3 * m).reshape(num_rows, 3, m)    # per row: label, cut, b
  u_label, u_cut, u_b = u[:, 0], u[:, 1], u[:, 2]
  # every row's sentence starts in one sorted array, row r's shifted by r * stride
  stride = data_len + tot_len + 2
  if data_len >= 2:       # one compare over all rows in flat order, the rows' seams dropped
    flat = np.ascontiguousarray(sent_rows).reshape(-1)
    change = flat[1:] != flat[:-1]
    change[data_len - 1::data_len] = False
    at = np.flatnonzero(change)                              # = row * data_len + col
    row_of = at // data_len
    bounds = at + 1 + row_of * (stride - data_len)
  else:
    row_of = np.zeros(0, np.int64)
    bounds = np.zeros(0, np.int64)
  nb = np.bincount(row_of, minlength=num_rows)[:, None]       # [R, 1] bounds per row
  first = (np.cumsum(nb) - nb[:, 0])[:, None]                 # [R, 1] row's first bound
  shift = (np.arange(num_rows) * stride)[:, None]
  bounds_pad = np.append(bounds, 0)
  def search(x, side):                                         # searchsorted in the row's bounds
    return np.searchsorted(bounds, x + shift, side) - first
  def pick(idx):                                               # bounds[clip(idx)], 0 if none
    got = bounds_pad[first + np.clip(idx, 0, np.maximum(nb - 1, 0))] - shift
    return np.where(nb > 0, got, 0)

  lo = search(begins, "right")
  hi = search(begins + tot_len, "left")
  count = hi - lo
  end_idx = np.where(hi < nb, pick(hi), data_len)
  cut = pick(lo + np.floor(u_cut * count).astype(np.int64))
  random_b = (count == 0) | (u_label < 0.5)
  a_end = np.where(count == 0, end_idx, cut)

  b_len = np.maximum(1, tot_len - (a_end - begins))
  b_begin = np.floor(u_b * np.maximum(data_len - b_len, 1)).astype(np.int64)
  b_end = b_begin + b_len
  j = search(b_begin, "right") - 1
  b_begin = np.where(j >= 0, pick(j), 0)
  j = search(b_end, "left")
  b_end = np.minimum(np.where(j < nb, pick(j), data_len - 1), data_len - 1)
  b_begin = np.where(random_b, b_begin, a_end)
  b_end = np.where(random_b, b_end, end_idx)

  a, b = _trim(a_end - begins, b_end - b_begin, tot_len)
  a_end, b_end = begins + a, b_begin + b
  ok = (begins + tot_len < data_len) & (a_end < data_len) & (b_end < data_len)
  return {"a_begin": np.broadcast_to(begins, a_end.shape), "a_end": a_end, "b_begin": b_begin,
          "b_end": b_end, "label": (~random_b).astype(np.int64), "ok": ok}


def _trim(a, b, tot_len):
  """The release's `while a + b > tot_len: shorten the longer (B on a tie)`, closed form."""
  excess = np.maximum(a + b - tot_len, 0)
  d = np.minimum(excess, np.abs(a - b))
  a_longer = a > b
  a = np.where(a_longer, a - d, a)
  b = np.where(a_longer, b, b - d)
  excess = excess - d
  return a - excess // 2, b - (excess + 1) // 2


def sample_targets(rng, word_start, func, goal, alpha=6, beta=1, mode="word", fill=True):
  """Chooses `goal` target positions in each of S segments.

  Args:
    word_start: bool [S, n], True where a piece begins a word (segments in
      forward text order; flip reversed rows before and after).
    func: bool [S, n], <sep>/<cls> positions: never targets, and spans stop there.
    goal: targets per segment; None samples freely (no goal, no fill), for
      measuring the span statistics.
    mode: "word" (n whole words), "piece" (n pieces from a word start, the
      release's bug), "single" (goal random tokens, no spans).
  Returns:
    bool [S, n] mask with exactly `goal` True per row (when goal is set).

  Word starts and func positions are kept as sorted flat indices: the next start at or after a
  position is one gather from the running count of word starts (a flat [S * n + 1] int array
  built once per call), the start k words later an index into the sorted starts, the next func a
  binary search; only the rows still drawing are carried from round to round.
  """
  s, n = word_start.shape
  if mode == "single":
    return _fill(rng, np.zeros([s, n], bool), func, np.full(s, goal))
  limit = n if goal is None else goal
  # flat indices in int32 where they fit (half the memory the binary searches walk)
  it = np.int32 if (s + 2) * (n + 1) < 2 ** 31 else np.int64
  starts = np.flatnonzero(word_start).astype(it)
  funcs = np.flatnonzero(func).astype(it)
  func_flat = func.reshape(-1)
  end_of_all = s * n + n                          # past every row
  starts_pad = np.concatenate([starts, np.full(MAX_GRAM + 1, end_of_all, it)])
  # before[x] = word starts before flat position x (= starts.searchsorted(x, "left")), for
  # x in [0, s * n]: one gather per round instead of a binary search
  before = np.zeros(s * n + 1, it)
  np.cumsum(word_start.reshape(-1), dtype=it, out=before[1:])
  funcs_pad = np.concatenate([funcs, np.full(1, end_of_all, it)])

  # The state of the rows still drawing only (compacted when rows finish), in flat indices:
  # row r, its end lim = (r + 1) * n, the next position cur, targets so far num.
  r = np.arange(s, dtype=it)
  cur = r * it(n)
  lim = cur + it(n)
  num = np.zeros(s, it)
  num_all = np.zeros(s, np.int64)
  span_begins, span_ends = [], []
  while len(r):
    k = len(r)
    room = limit - num
    # = rng.choice(1..MAX_GRAM, size=k, p=_GRAM_P): the same draw, without choice's checks
    # (1 + the CDF values <= u, counted by compares: u < 1 = the CDF's last value), and the
    # left contexts' uniforms: rng.random(k) twice = rng.random(2 * k) cut in two
    u = rng.random(2 * k)
    u_gram, u_ctx = u[:k], u[k:]
    grams = np.ones(k, it)
    for c in _GRAM_CDF[:-1]:
      grams += u_gram >= c
    np.minimum(grams, room, out=grams)
    ctx = grams * alpha // beta
    l_ctx = np.floor(u_ctx * ctx).astype(it)
    # the first word start at or after cur + l_ctx (lim: none in the row)
    h = before[np.minimum(cur + l_ctx, lim)]
    beg = np.minimum(starts_pad[h], lim)
    stop = beg >= lim
    begc = np.minimum(beg, lim - 1)
    on_func = func_flat[begc] & ~stop
    if mode == "piece":
      end = beg + grams
    else:                # the start `grams` words after beg's (lim past the row's last word)
      end = np.minimum(starts_pad[h + grams], lim)
    stop |= end >= lim                                   # the release drops a span reaching the end
    # a span stops at the next func position after its start (past the row's end for a stopped
    # row, whose span is dropped anyway)
    np.minimum(end, funcs_pad[funcs.searchsorted(np.minimum(begc + 1, lim), "left")], out=end)
    if mode == "word":                                   # fewer words if the span is too long
      long = np.flatnonzero(end - beg > room)           # (end only shrinks: no other row will be)
      if len(long):
        l_end, l_beg, l_room, l_grams, l_h = end[long], beg[long], room[long], grams[long], h[long]
        l_lim = lim[long]
        for fewer in range(MAX_GRAM - 1, 0, -1):
          too_long = l_end - l_beg > l_room
          if not too_long.any():
            break
          l_end = np.where(too_long & (fewer < l_grams),
                           np.minimum(l_end, np.minimum(starts_pad[l_h + fewer], l_lim)), l_end)
        else:                                            # still too long after one word
          stop[long] |= (l_end - l_beg > l_room) & ~on_func[long]
        end[long] = l_end
    else:
      end = np.minimum(end, beg + room)
    take = ~(stop | on_func)
    if take.all():
      span_begins.append(beg)
      span_ends.append(end)
      num += end - beg
    else:
      span_begins.append(beg[take])
      span_ends.append(end[take])
      num += np.where(take, end - beg, 0)
    cur = np.where(on_func, beg + 1, end + (ctx - l_ctx))
    active = ~stop & (cur < lim) & (num < limit)
    if not active.all():
      num_all[r] = num
      r, lim, cur, num = r[active], lim[active], cur[active], num[active]
  # spans never overlap: +1 at a span's begin, -1 at its end, running sum > 0 inside
  # (a span ends at or before its row's end, so one running sum over all rows in flat order)
  diff = np.zeros(s * n + 1, np.int8)
  diff[np.concatenate(span_begins)] += 1              # (distinct indices in each assignment)
  diff[np.concatenate(span_ends)] -= 1
  # (summed in int32: numpy's int8 running sum is ~3.5x slower; the values are 0 and 1)
  mask = (np.cumsum(diff[:-1], dtype=np.int32) > 0).reshape(s, n)
  if goal is None or not fill:
    return mask
  return _fill(rng, mask, func, goal - num_all)


def _fill(rng, mask, func, need):
  """Adds `need[s]` random single positions (not func, not yet chosen) to each row,
  one position per row per round (uniform among the remaining candidates)."""
  rows = np.flatnonzero(need > 0)
  if not len(rows):
    return mask
  mask = mask.copy()
  candidates = ~mask[rows] & ~func[rows]
  need = need[rows].copy()
  if (candidates.sum(1) < need).any():
    raise ValueError("not enough positions for the targets asked")  # ruled out by validate()
  while len(rows):
    cum = np.cumsum(candidates, axis=1, dtype=np.int32)
    pick = np.floor(rng.random(len(rows)) * cum[:, -1]).astype(np.int32)
    pos = np.argmax(cum > pick[:, None], axis=1)
    mask[rows, pos] = True
    candidates[np.arange(len(rows)), pos] = False
    need -= 1
    keep = need > 0
    rows, candidates, need = rows[keep], candidates[keep], need[keep]
  return mask


def permutation_ranks(rng, num, seq_len, perm_size):
  """[num, seq_len] rank of each position inside its perm_size block (uniform)."""
  shape = [num, seq_len // perm_size, perm_size]
  bits = max(int(perm_size - 1).bit_length(), 1)
  if bits > 10:
    return np.argsort(rng.random(shape), axis=-1).reshape(num, seq_len)
  # = argsort, faster: a key is j / 2**53 (numpy's doubles), so j with the position in the
  # low bits is one exact uint64 per position, and a plain sort orders them the same way.
  if type(rng.bit_generator) is np.random.PCG64:
    # PCG64's double is (next 64 bits >> 11) / 2**53: the same j straight from the same draws
    packed = rng.bit_generator.random_raw(shape)
    packed >>= np.uint64(11 - bits)
    packed &= np.uint64(~((1 << bits) - 1) & (2 ** 64 - 1))
  else:
    packed = (rng.random(shape) * 2.0 ** 53).astype(np.uint64)
    packed <<= np.uint64(bits)
  packed |= np.arange(perm_size, dtype=np.uint64)
  packed.sort(axis=-1)
  packed &= np.uint64((1 << bits) - 1)
  return packed.reshape(num, seq_len)
