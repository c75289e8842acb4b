"""Moved to data_utils/layouts.py (imported from there by fine-tuning and serving alike)."""

from data_utils.layouts import *  # noqa: F401,F403
from data_utils.layouts import SEG_PAD, check_vocab, make_tokenizer, pack, special_count, truncate_pair  # noqa: F401
