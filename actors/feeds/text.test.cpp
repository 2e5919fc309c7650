// Unit tests of the unification text helpers: folding, UTF-8 conversions, bounded edit distance.
#include "gost/feeds/text.hpp"

#include <doctest/doctest.h>

#include <random>

using namespace gost::feeds;

TEST_CASE("fold lowercases ASCII and Cyrillic, ё is е, punctuation and spaces collapse") {
  CHECK(fold("Ростов-на-Дону") == "ростов на дону");
  CHECK(fold("  РОСТОВ   на\tДону ") == "ростов на дону");
  CHECK(fold("Одежда, обувь, аксессуары") == "одежда обувь аксессуары");
  CHECK(fold("ЧЁРНЫЙ") == "черный");
  CHECK(fold("чёрный") == fold("черный"));
  CHECK(fold("Ёлки") == "елки");
  CHECK(fold("Б/у") == "б у");
  CHECK(fold("St. Petersburg") == "st petersburg");
  CHECK(fold("«Смартфоны» — Apple") == "смартфоны apple");
  CHECK(fold("1\xC2\xA0"
             "500")
        == "1 500"); // NBSP
  CHECK(fold("№5") == "5");
  CHECK(fold("м²") == "м²");                 // superscripts are part of units
  CHECK(fold("Йошкар-Ола") == "йошкар ола"); // й is not и
  CHECK(fold("ЁЖ ЯЩИК АБВ") == "еж ящик абв");
  CHECK(fold("") == "");
  CHECK(fold(" ,.;- ") == "");
  CHECK(fold("Ünïcode") == "Ünïcode"); // other scripts pass unchanged, only ASCII is folded there
}

TEST_CASE("fold, to_u32 and friends survive invalid UTF-8") {
  const std::string bad[] = {"\xFF",         "\xC3",         "abc\xE2\x82",
                             "\xED\xA0\x80", "\xC0\xAF",     "\xF4\x90\x80\x80",
                             "Моск\xD0",     "\x80\x80\x80", std::string("a\0b", 3)};
  for (const auto& s : bad) {
    CAPTURE(s);
    auto f = fold(s);
    CHECK(valid_utf8(f));
    auto u = to_u32(s);
    CHECK(u.size() <= s.size());
    CHECK(valid_utf8(to_utf8(u)));
    if (s.find('\0') == std::string::npos)
      CHECK_FALSE(valid_utf8(s));
  }
  CHECK(fold("Моск\xD0"
             "ва")
        == "моск ва");
  CHECK(to_u32("\xFF"
               "a")
        == U"\uFFFDa");
  CHECK(to_u32("\xE2\x82") == U"\uFFFD");      // truncated: one replacement
  CHECK(to_utf8(U"\xD800") == "\xEF\xBF\xBD"); // a surrogate is no scalar value
  CHECK(utf8_length("ёж") == 2);
  CHECK(valid_utf8("Привет"));

  // Random bytes: never a crash, always valid output.
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 24, '\0');
    for (auto& c : s)
      c = static_cast<char>(rng());
    CHECK(valid_utf8(fold(s)));
    CHECK(valid_utf8(to_utf8(to_u32(s))));
    CHECK(to_u32(s).size() == utf8_length(s));
  }
}

TEST_CASE("to_u32 and to_utf8 round-trip") {
  for (std::string s : {"", "abc", "Санкт-Петербург", "м²", "€ 𝄞 ok"})
    CHECK(to_utf8(to_u32(s)) == s);
}

TEST_CASE("edit_distance is optimal string alignment with an early cap") {
  auto d = [](const char* a, const char* b, size_t cap = 10) {
    return edit_distance(to_u32(a), to_u32(b), cap);
  };
  CHECK(d("", "") == 0);
  CHECK(d("", "abc") == 3);
  CHECK(d("abc", "") == 3);
  CHECK(d("kitten", "sitting") == 3);
  CHECK(d("новосибирск", "новосибирк") == 1);        // deletion
  CHECK(d("ростов на дону", "росотв на дону") == 1); // adjacent transposition costs one
  CHECK(d("ca", "abc") == 3); // OSA, not unrestricted Damerau (which gives 2)
  CHECK(d("екатеринбург", "екатеринбур") == 1);
  CHECK(d("abc", "abc") == 0);
  CHECK(d("abcdef", "badcfe") == 3);
  // The cap: anything above it comes back as cap + 1.
  CHECK(d("kitten", "sitting", 1) == 2);
  CHECK(d("kitten", "sitting", 2) == 3);
  CHECK(d("kitten", "sitting", 3) == 3);
  CHECK(d("a", "abcdefgh", 2) == 3);
  CHECK(d("abcdefgh", "hgfedcba", 0) == 1);
  CHECK(edit_distance(U"aaaa", U"aaaa", 0) == 0);
}

TEST_CASE("trim drops ASCII whitespace and NBSP") {
  CHECK(trim("  a b \t\r\n") == "a b");
  CHECK(trim("\xC2\xA0x\xC2\xA0") == "x");
  CHECK(trim("") == "");
  CHECK(trim("\xA0") == "\xA0"); // a lone continuation byte is no NBSP
}
