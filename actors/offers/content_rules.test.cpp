#include <doctest/doctest.h>

#include "gost/offers/content_rules.hpp"

using namespace gost;

namespace {

v1::Offer base() {
  v1::Offer o;
  o.set_seller_id("s1");
  return o;
}

/// `n` characters of two bytes each (Cyrillic): counted as characters, not bytes.
std::string cyrillic(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i)
    s += "ж";
  return s;
}

bool names(const std::string& problem, const std::string& what) {
  return problem.find(what) != std::string::npos;
}

} // namespace

TEST_CASE("characters are code points of the UTF-8, not bytes") {
  CHECK(utf8_chars("") == 0);
  CHECK(utf8_chars("bike") == 4);
  CHECK(utf8_chars("велосипед") == 9);        // 18 bytes
  CHECK(utf8_chars("\xF0\x9F\x9A\xB2") == 1); // one emoji, 4 bytes
}

TEST_CASE("each text limit: at the limit accepted, one past refused naming field, value and key") {
  offer_limits l;
  l.title_max_chars = 5;
  l.description_max_chars = 7;
  l.attribute_key_max_chars = 3;
  l.attribute_value_max_chars = 4;

  auto o = base();
  o.set_title(cyrillic(5)); // 10 bytes, 5 characters
  CHECK(check_content(o, l).empty());
  o.set_title(cyrillic(6));
  auto p = check_content(o, l);
  CHECK(p == "offer.title is 6 characters; the limit is 5 (limits.title_max_chars)");

  o = base();
  o.set_description(cyrillic(7));
  CHECK(check_content(o, l).empty());
  o.set_description(cyrillic(8));
  CHECK(check_content(o, l)
        == "offer.description is 8 characters; the limit is 7 (limits.description_max_chars)");

  o = base();
  (*o.mutable_attributes())[cyrillic(3)] = cyrillic(4);
  CHECK(check_content(o, l).empty());
  (*o.mutable_attributes())["abcd"] = "v";
  p = check_content(o, l);
  CHECK(names(p, "offer.attributes key \"abcd\" is 4 characters; the limit is 3"));
  CHECK(names(p, "(limits.attribute_key_max_chars)"));

  o = base();
  (*o.mutable_attributes())["k"] = cyrillic(5);
  p = check_content(o, l);
  CHECK(p
        == "offer.attributes[\"k\"] is 5 characters; the limit is 4 "
           "(limits.attribute_value_max_chars)");
}

TEST_CASE("a long attribute key is shown cut after 40 characters") {
  offer_limits l;
  l.attribute_key_max_chars = 10;
  auto o = base();
  (*o.mutable_attributes())[cyrillic(50)] = "v";
  auto p = check_content(o, l);
  CHECK(names(p, "key \"" + cyrillic(40) + "...\" is 50 characters"));
}

TEST_CASE("each count limit: at the limit accepted, one past refused naming field and key") {
  offer_limits l;
  l.attributes_max = 3;
  l.photos_max = 2;
  auto o = base();
  for (auto k : {"a", "b", "c"})
    (*o.mutable_attributes())[k] = "v";
  o.add_photos()->set_url("https://img/1");
  o.add_photos()->set_url("https://img/2");
  CHECK(check_content(o, l).empty());

  auto more = o;
  (*more.mutable_attributes())["d"] = "v";
  CHECK(check_content(more, l)
        == "offer.attributes has 4 entries; the limit is 3 (limits.attributes_max)");

  more = o;
  more.add_photos()->set_url("https://img/3");
  CHECK(check_content(more, l) == "offer.photos has 3 entries; the limit is 2 (limits.photos_max)");

  SUBCASE("a limit of 0 refuses any") {
    l.photos_max = 0;
    CHECK(names(check_content(o, l), "(limits.photos_max)"));
    o.clear_photos();
    CHECK(check_content(o, l).empty());
  }
}

TEST_CASE("the offer's size counts what a client sets, not the fields gost assigns or defaults") {
  auto o = base();
  o.set_title("bike");
  o.set_description(std::string(1000, 'd'));
  (*o.mutable_attributes())["color"] = "red";
  o.add_photos()->set_url("https://img/1");
  auto plain = content_bytes(o);
  CHECK(plain == o.ByteSizeLong());
  auto stamped = o;
  stamped.set_id("0123456789abcdef0123456789abcdef");
  stamped.set_version(-7); // a negative varint: ten bytes
  stamped.set_source(v1::OFFER_SOURCE_FEED);
  stamped.mutable_created_at()->set_seconds(1'700'000'000);
  stamped.mutable_updated_at()->set_seconds(1'700'000'001);
  stamped.mutable_updated_at()->set_nanos(5);
  CHECK(stamped.ByteSizeLong() > plain);
  CHECK(content_bytes(stamped) == plain);

  offer_limits l;
  l.offer_max_bytes = plain;
  CHECK(check_content(stamped, l).empty());
  l.offer_max_bytes = plain - 1;
  CHECK(check_content(stamped, l)
        == "offer is " + std::to_string(plain)
             + " bytes serialized (id, version, source and timestamps not counted); the limit is "
             + std::to_string(plain - 1) + " (limits.offer_max_bytes)");
}

TEST_CASE("a field over its own limit is named before the offer's size") {
  offer_limits l;
  l.title_max_chars = 3;
  l.offer_max_bytes = 10;
  auto o = base();
  o.set_title("a long title");
  CHECK(names(check_content(o, l), "(limits.title_max_chars)"));
}

TEST_CASE("the default limits take a large real-world offer") {
  offer_limits l;
  auto o = base();
  o.set_title(cyrillic(l.title_max_chars));
  o.set_description(std::string(20'000, 'd'));
  for (int i = 0; i < 200; ++i)
    (*o.mutable_attributes())["attribute-" + std::to_string(i)] = std::string(100, 'v');
  for (uint32_t i = 0; i < l.photos_max; ++i)
    o.add_photos()->set_url("https://images.example.com/" + std::to_string(i) + ".jpg");
  CHECK(check_content(o, l).empty());
}

TEST_CASE("ids and prices keep their fixed rules") {
  offer_limits l;
  auto o = base();
  o.set_external_id(std::string(max_id_len, 'x'));
  CHECK(check_content(o, l).empty());
  o.set_external_id(std::string(max_id_len + 1, 'x'));
  CHECK(names(check_content(o, l), "offer.external_id"));
  o = base();
  o.clear_seller_id();
  CHECK(check_content(o, l) == "offer.seller_id is required");
  o = base();
  o.mutable_price()->set_currency("RUBL");
  CHECK(names(check_content(o, l), "offer.price.currency"));
}
