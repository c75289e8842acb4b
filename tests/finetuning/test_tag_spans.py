"""finetuning/tag_spans.py's pure-Python parts: whitespace words with character offsets, and tags
-> entity spans by conlleval's rules, against expectations written out by hand."""

import pytest

from finetuning import tag_spans

#        0         1         2         3         4
#        0123456789012345678901234567890123456789012345
TEXT = "Ann  Lee\tmet Bob in New   York"
WORDS = [(0, 3), (5, 8), (9, 12), (13, 16), (17, 19), (20, 23), (26, 30)]


def test_words_with_offsets_by_hand():
  assert tag_spans.words_with_offsets(TEXT) == WORDS
  assert tag_spans.words_with_offsets("") == []
  assert tag_spans.words_with_offsets(" \t\n ") == []
  # Unicode spaces (no-break space, U+3000, the \x1c separator Python counts as space) split;
  # CJK and accents are one character each
  assert tag_spans.words_with_offsets("é\u00a0東京\u3000x\x1cy ") == [(0, 1), (2, 4), (5, 6),
                                                                     (7, 8)]


@pytest.mark.parametrize("tags, want", [
    # I- without B- starts an entity (conlleval; IOB1 reads right)
    (["I-PER", "I-PER", "O", "O", "O", "O", "O"], [("PER", 0, 8)]),
    # adjacent entities of one type are told apart by B-
    (["B-PER", "B-PER", "O", "O", "O", "O", "O"], [("PER", 0, 3), ("PER", 5, 8)]),
    # an entity at the end of the text, its inner spacing kept
    (["O", "O", "O", "B-PER", "O", "B-LOC", "I-LOC"], [("PER", 13, 16), ("LOC", 20, 30)]),
    # I-LOC after B-PER: a new LOC entity; I-LOC after it continues that one
    (["B-PER", "I-LOC", "I-LOC", "O", "O", "O", "O"], [("PER", 0, 3), ("LOC", 5, 12)]),
    # "" (a word not tagged) ends an entity as O does; an I- after it starts a new one
    (["B-ORG", "I-ORG", "", "I-ORG", "O", "O", "I-MISC"],
     [("ORG", 0, 8), ("ORG", 13, 16), ("MISC", 26, 30)]),
    (["O"] * 7, []),
])
def test_spans_by_hand(tags, want):
  assert tag_spans.spans(tags, WORDS) == want


def test_span_text_keeps_the_original_spacing():
  got = tag_spans.spans(["B-PER", "I-PER", "I-PER", "O", "O", "B-LOC", "I-LOC"], WORDS)
  assert [TEXT[s:e] for _, s, e in got] == ["Ann  Lee\tmet", "New   York"]


def test_spans_refusals():
  with pytest.raises(ValueError, match="2 tags for 7 words"):
    tag_spans.spans(["O", "O"], WORDS)
  with pytest.raises(ValueError, match="'X-PER'"):
    tag_spans.spans(["X-PER"] + ["O"] * 6, WORDS)
