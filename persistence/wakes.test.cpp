// Wake notices' payloads (persistence/cluster/leases.hpp): "<part>:<shard>", and what is not one.
#include <doctest/doctest.h>

#include "gost/persistence/cluster/leases.hpp"

using namespace gost::persistence;

TEST_CASE("a wake payload names a part and a shard, and parses back") {
  CHECK(wake_payload("entities", 7) == "entities:7");
  std::string part;
  uint32_t shard = 0;
  REQUIRE(parse_wake_payload("entities:7", part, shard));
  CHECK(part == "entities");
  CHECK(shard == 7);
  REQUIRE(parse_wake_payload(wake_payload("a:b", 4294967295u), part, shard));
  CHECK(part == "a:b"); // the shard is after the last colon
  CHECK(shard == 4294967295u);
}

TEST_CASE("what is not a wake payload is refused, the outputs untouched") {
  std::string part = "kept";
  uint32_t shard = 9;
  for (const char* bad : {"", "entities", "entities:", ":7", "entities:x", "entities:-1",
                          "entities:7 ", "entities:4294967296"})
    CHECK_FALSE_MESSAGE(parse_wake_payload(bad, part, shard), bad);
  CHECK(part == "kept");
  CHECK(shard == 9);
}
