#include <doctest/doctest.h>

#include <map>
#include <string>

#include "gost/core/shard_hash.hpp"

// These vectors are the contract: stored shards and every node depend on them. They are also
// listed in docs/sharding.md. Never change them; a new hash needs a new installation.
TEST_CASE("offer_hash test vectors") {
  CHECK(gost::offer_hash("") == 0xefd01f60ba992926ull);
  CHECK(gost::offer_hash("a") == 0x82a2a958a9bece5bull);
  CHECK(gost::offer_hash("offer-1") == 0x1e1c1e14e1d42cf7ull);
  CHECK(gost::offer_hash("0123456789abcdef0123456789abcdef") == 0x26d521498b2056f3ull);
  CHECK(gost::offer_hash(
          "\xd0\xbe\xd0\xb1\xd1\x8a\xd1\x8f\xd0\xb2\xd0\xbb\xd0\xb5\xd0\xbd\xd0\xb8\xd0\xb5")
        == 0x861c2c41ab11149aull); // "объявление" in UTF-8
  CHECK(gost::shard_of("offer-1", 64) == 55);
  CHECK(gost::shard_of("offer-1", 1024) == 247);
  CHECK(gost::shard_of("a", 64) == 27);
}

TEST_CASE("shards are spread evenly") {
  constexpr uint32_t shards = 64;
  constexpr int n = 64'000;
  std::map<uint32_t, int> counts;
  for (int i = 0; i < n; ++i)
    ++counts[gost::shard_of("offer-" + std::to_string(i), shards)];
  REQUIRE(counts.size() == shards);
  for (auto& [shard, c] : counts) {
    CAPTURE(shard);
    CHECK(c > n / shards * 8 / 10);
    CHECK(c < n / shards * 12 / 10);
  }
}
