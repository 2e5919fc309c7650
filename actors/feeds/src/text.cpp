#include "gost/feeds/text.hpp"

#include <algorithm>
#include <vector>

namespace gost::feeds {

namespace {

constexpr char32_t bad = 0xFFFD;

// Decodes one code point at s[i], advancing i by at least one byte. An invalid or truncated
// sequence yields `bad` and consumes its maximal valid prefix (the Unicode recommendation),
// so the decoder never stalls and never reads past the end.
char32_t decode(std::string_view s, size_t& i, bool& ok) {
  auto b = static_cast<unsigned char>(s[i]);
  ok = true;
  if (b < 0x80) {
    ++i;
    return b;
  }
  size_t need;
  char32_t cp;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1, cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2, cp = b & 0x0F;
    if (b == 0xE0)
      lo = 0xA0; // overlong
    if (b == 0xED)
      hi = 0x9F; // surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3, cp = b & 0x07;
    if (b == 0xF0)
      lo = 0x90; // overlong
    if (b == 0xF4)
      hi = 0x8F; // above U+10FFFF
  } else {
    ++i;
    ok = false;
    return bad;
  }
  ++i;
  for (size_t k = 0; k < need; ++k) {
    if (i >= s.size()) {
      ok = false;
      return bad;
    }
    auto c = static_cast<unsigned char>(s[i]);
    if (c < lo || c > hi) {
      ok = false;
      return bad;
    }
    lo = 0x80, hi = 0xBF;
    cp = (cp << 6) | (c & 0x3F);
    ++i;
  }
  return cp;
}

void encode(char32_t c, std::string& out) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
    c = bad;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Separators for folding: what sellers put between words that carries no meaning for a match.
// Superscripts ² ³ ¹ and µ stay (units such as "м²").
bool separator(char32_t c) {
  if (c < 0x80) {
    return !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
  }
  if (c >= 0x80 && c <= 0xBF)
    return c != 0xB2 && c != 0xB3 && c != 0xB9 && c != 0xB5;
  if (c == 0xD7 || c == 0xF7)
    return true; // × ÷
  if (c >= 0x2000 && c <= 0x206F)
    return true; // spaces, dashes, quotes, …
  if (c == 0x2116)
    return true; // №
  if (c >= 0x3000 && c <= 0x303F)
    return true; // CJK punctuation, ideographic space
  if (c >= 0xFE00 && c <= 0xFE0F)
    return true; // variation selectors
  return c == 0xFEFF || c == bad;
}

char32_t lower(char32_t c) {
  if (c >= 'A' && c <= 'Z')
    return c + 0x20;
  if (c == 0x401 || c == 0x451)
    return 0x435; // Ё, ё → е
  if (c >= 0x410 && c <= 0x42F)
    return c + 0x20;
  if (c >= 0x400 && c <= 0x40F)
    return c + 0x50;
  return c;
}

} // namespace

std::string fold(std::string_view utf8) {
  std::string out;
  out.reserve(utf8.size());
  bool pending_space = false;
  size_t i = 0;
  while (i < utf8.size()) {
    bool ok;
    char32_t c = decode(utf8, i, ok);
    if (!ok || separator(c)) {
      pending_space = true;
      continue;
    }
    if (pending_space && !out.empty())
      out += ' ';
    pending_space = false;
    encode(lower(c), out);
  }
  return out;
}

std::u32string to_u32(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  size_t i = 0;
  while (i < utf8.size()) {
    bool ok;
    out += decode(utf8, i, ok);
  }
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size() * 2);
  for (char32_t c : s)
    encode(c, out);
  return out;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    bool ok;
    decode(s, i, ok);
    if (!ok)
      return false;
  }
  return true;
}

size_t utf8_length(std::string_view s) {
  size_t i = 0, n = 0;
  while (i < s.size()) {
    bool ok;
    decode(s, i, ok);
    ++n;
  }
  return n;
}

size_t edit_distance(std::u32string_view a, std::u32string_view b, size_t cap) {
  if (a.size() > b.size())
    std::swap(a, b);
  const size_t n = a.size(), m = b.size();
  if (m - n > cap)
    return cap + 1;
  if (n == 0)
    return m;
  // Three rolling rows: OSA needs the row before the previous one for transpositions. Names are
  // short, so the rows live on the stack unless the shorter string is long.
  constexpr size_t small = 64;
  size_t stack_rows[3][small + 1];
  std::vector<size_t> heap_rows;
  size_t *prev2 = stack_rows[0], *prev = stack_rows[1], *cur = stack_rows[2];
  if (n > small) {
    heap_rows.resize(3 * (n + 1));
    prev2 = heap_rows.data(), prev = prev2 + n + 1, cur = prev + n + 1;
  }
  for (size_t i = 0; i <= n; ++i)
    prev[i] = i;
  for (size_t j = 1; j <= m; ++j) {
    cur[0] = j;
    size_t row_min = cur[0];
    for (size_t i = 1; i <= n; ++i) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t v = std::min({prev[i] + 1, cur[i - 1] + 1, prev[i - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        v = std::min(v, prev2[i - 2] + 1);
      cur[i] = v;
      row_min = std::min(row_min, v);
    }
    // Values never decrease along a diagonal (D[i][j] >= D[i-1][j-1], transpositions included),
    // so once a whole row is above cap every later row is too.
    if (row_min > cap)
      return cap + 1;
    size_t* oldest = prev2;
    prev2 = prev, prev = cur, cur = oldest;
  }
  return std::min(prev[n], cap + 1);
}

std::string_view trim(std::string_view s) {
  auto space_at_front = [&](size_t& len) {
    if (s.empty())
      return false;
    unsigned char c = static_cast<unsigned char>(s.front());
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')
      return len = 1, true;
    if (s.size() >= 2 && c == 0xC2 && static_cast<unsigned char>(s[1]) == 0xA0)
      return len = 2, true;
    return false;
  };
  auto space_at_back = [&](size_t& len) {
    if (s.empty())
      return false;
    unsigned char c = static_cast<unsigned char>(s.back());
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f')
      return len = 1, true;
    if (s.size() >= 2 && c == 0xA0 && static_cast<unsigned char>(s[s.size() - 2]) == 0xC2)
      return len = 2, true;
    return false;
  };
  size_t len = 0;
  while (space_at_front(len))
    s.remove_prefix(len);
  while (space_at_back(len))
    s.remove_suffix(len);
  return s;
}

// Splits a data file into lines of cells, skipping blank lines and "#" comments. A UTF-8 BOM is
// ignored and CRLF accepted, because the files get edited in all sorts of editors.
std::string tsv_lines(std::string_view text, std::vector<tsv_line>& out, const char* file) {
  if (text.substr(0, 3) == "\xEF\xBB\xBF")
    text.remove_prefix(3);
  size_t number = 0;
  while (!text.empty()) {
    ++number;
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (trim(line).empty() || trim(line).front() == '#')
      continue;
    if (!valid_utf8(line))
      return std::string(file) + ":" + std::to_string(number) + ": invalid UTF-8";
    tsv_line l{number, {}};
    size_t start = 0;
    for (;;) {
      size_t tab = line.find('\t', start);
      l.cells.push_back(
        trim(line.substr(start, tab == std::string_view::npos ? tab : tab - start)));
      if (tab == std::string_view::npos)
        break;
      start = tab + 1;
    }
    out.push_back(std::move(l));
  }
  return {};
}

} // namespace gost::feeds
