#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>

#include <pqxx/pqxx>

#include "gost/core/shard_hash.hpp"
#include "gost/testing/migrated_db.hpp"

// The SQL twin of offer_hash (migration 0030: gost_offer_hash, gost_shard_of), which moves of a
// part of a group select rows by, must agree with the C++ bit for bit: a row selected by the
// wrong shard would stay behind, or leave, at a move.

namespace {

/// A random key of valid UTF-8 (text in PostgreSQL): ASCII, Cyrillic (2 bytes), CJK (3 bytes)
/// and emoji (4 bytes), 0 to 300 bytes.
std::string random_key(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> len{0, 120};
  std::uniform_int_distribution<int> kind{0, 9};
  std::string out;
  auto n = len(rng);
  for (int i = 0; i < n; ++i) {
    auto k = kind(rng);
    auto cp = static_cast<uint32_t>(rng());
    if (k < 6) {
      out += static_cast<char>(1 + cp % 127); // never NUL
    } else if (k < 8) {
      cp = 0x400 + cp % 0x100;
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (k < 9) {
      cp = 0x4E00 + cp % 0x5000;
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      cp = 0x1F300 + cp % 0x300;
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

} // namespace

TEST_CASE("gost_offer_hash and gost_shard_of in SQL agree with offer_hash and shard_of: the "
          "test vectors, and random keys of every length and UTF-8 width") {
  gost::testing::migrated_db m{1};
  pqxx::connection c{m.db.dsn()};
  pqxx::nontransaction tx{c};
  auto sql_hash = [&](const std::string& key) {
    return tx.exec_params("SELECT gost_offer_hash($1)::text", key)[0][0].as<std::string>();
  };
  // docs/sharding.md's vectors.
  CHECK(sql_hash("") == std::to_string(0xefd01f60ba992926ull));
  CHECK(sql_hash("offer-1") == std::to_string(0x1e1c1e14e1d42cf7ull));
  CHECK(sql_hash("\xd0\xbe\xd0\xb1\xd1\x8a\xd1\x8f\xd0\xb2\xd0\xbb\xd0\xb5\xd0\xbd\xd0\xb8\xd0\xb5")
        == std::to_string(0x861c2c41ab11149aull));
  CHECK(tx.exec("SELECT gost_shard_of('offer-1', 1024)")[0][0].as<int>() == 247);

  std::mt19937_64 rng{20261128};
  const uint32_t counts[] = {1, 7, 64, 1000, 1024, 2147483647};
  int keys = 0;
  int high_bit = 0; // hashes at or above 2^63: the unsigned half PostgreSQL's bigint lacks
  for (int i = 0; i < 1500; ++i) {
    auto key = random_key(rng);
    auto h = gost::offer_hash(key);
    high_bit += (h >> 63) != 0 ? 1 : 0;
    auto row = tx.exec_params("SELECT gost_offer_hash($1)::text, gost_shard_of($1, 1),"
                              " gost_shard_of($1, 7), gost_shard_of($1, 64),"
                              " gost_shard_of($1, 1000), gost_shard_of($1, 1024),"
                              " gost_shard_of($1, 2147483647)",
                              key)[0];
    REQUIRE_MESSAGE(row[0].as<std::string>() == std::to_string(h), "key of ", key.size(), " bytes");
    for (int k = 0; k < 6; ++k)
      REQUIRE_MESSAGE(row[k + 1].as<int64_t>() == gost::shard_of(key, counts[k]), "key of ",
                      key.size(), " bytes, mod ", counts[k]);
    ++keys;
  }
  CHECK(keys == 1500);
  CHECK(high_bit > 500); // both halves of the unsigned range were met
  CHECK(high_bit < 1000);
}
