// Text helpers for unification (seed 004): folding names for matching and a bounded edit
// distance for typo tolerance. Only ASCII and Russian Cyrillic are case-folded — enough for
// the catalog and the gazetteer, and no ICU. Every function accepts any bytes: invalid UTF-8
// never crashes or reads out of bounds.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gost::feeds {

// The matching key of a name: ASCII and Cyrillic lowercased (А–Я, Ё, Ѐ–Џ), ё→е, й kept,
// punctuation, symbols and whitespace (incl. NBSP, «», dashes, №) collapsed to one space,
// trimmed. Letters and digits of other scripts pass unchanged; invalid bytes count as spaces.
// "Ростов-на-Дону" and "ростов на  дону" fold alike; "Б/у" folds to "б у".
std::string fold(std::string_view utf8);

// Decodes UTF-8; each invalid or truncated sequence (overlongs and surrogates too) becomes
// one U+FFFD, so a broken byte costs one edit rather than the whole string.
std::u32string to_u32(std::string_view utf8);

// Encodes code points; values that are not scalar values become U+FFFD.
std::string to_utf8(std::u32string_view s);

// True when the bytes are well-formed UTF-8.
bool valid_utf8(std::string_view s);

// Number of code points (an invalid sequence counts as one).
size_t utf8_length(std::string_view s);

// Damerau–Levenshtein distance, optimal string alignment (an adjacent transposition costs 1,
// no substring is edited twice). Gives up early: any result above cap is returned as cap + 1.
size_t edit_distance(std::u32string_view a, std::u32string_view b, size_t cap);

// Trims ASCII whitespace and NBSP (U+00A0) from both ends.
std::string_view trim(std::string_view s);

// One meaningful line of a TSV data file (data/README.md): its 1-based number and its trimmed
// cells, viewing the text.
struct tsv_line {
  size_t number;
  std::vector<std::string_view> cells;
};

// Splits a data file into lines of cells, skipping blank lines and "#" comments. A UTF-8 BOM is
// ignored and CRLF accepted, because the files get edited in all sorts of editors. Empty when
// it could be split, else "<file>:<line>: invalid UTF-8".
std::string tsv_lines(std::string_view text, std::vector<tsv_line>& out, const char* file);

} // namespace gost::feeds
