// Unit: a write forwarded over a node link keeps who made it (its request id's source and
// caller), so the owner records the same origin in the offer's history as a local call would.
#include <doctest/doctest.h>

#include "cluster/link_table.hpp"

using namespace gost;
using namespace gost::runtime;

namespace {

/// The request id the serving node hands its shard after decoding `r`.
request_id decoded(const link_table::ForwardRequest& r) {
  request_id out;
  bool known = link_table::decode(r, [&](auto&&... xs) {
    auto grab = [&](auto& x) {
      if constexpr (std::is_same_v<std::decay_t<decltype(x)>, request_id>)
        out = x;
    };
    (grab(xs), ...);
  });
  REQUIRE(known);
  return out;
}

} // namespace

TEST_CASE("a forwarded write keeps its request id, source and caller") {
  request_id rid{"req-1", "api", "alice peer=ipv4:10.0.0.1:5000"};
  v1::Offer o;
  o.set_title("t");
  auto check = [&](const link_table::ForwardRequest& r) {
    auto got = decoded(r);
    CHECK(got.value == rid.value);
    CHECK(got.source == rid.source);
    CHECK(got.by == rid.by);
  };
  link_table::ForwardRequest create;
  link_table::encode(create, create_atom_v, "o1", offer_msg{o}, rid);
  check(create);
  link_table::ForwardRequest update;
  link_table::encode(update, update_atom_v, "o1", offer_msg{o}, int64_t{3}, std::string{"title"},
                     rid);
  check(update);
  link_table::ForwardRequest remove;
  link_table::encode(remove, delete_atom_v, "o1", int64_t{3}, rid);
  check(remove);
  link_table::ForwardRequest state;
  link_table::encode(state, update_atom_v, state_atom_v, "o1", "st", "bytes", int64_t{0}, rid);
  check(state);
}
