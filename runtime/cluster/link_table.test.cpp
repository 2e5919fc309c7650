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
  link_table::ForwardRequest requeue;
  link_table::encode(requeue, requeue_atom_v, "o1", "st", rid);
  check(requeue);
}

TEST_CASE("a forwarded requeue and passivation reach the owner with their arguments, and their "
          "answers come back") {
  link_table::ForwardRequest requeue;
  link_table::encode(requeue, requeue_atom_v, "o1", "audit", request_id{"r", "console", "ops"});
  std::string offer;
  std::string stage;
  bool known = link_table::decode(requeue, [&](auto&&... xs) {
    using args = std::tuple<std::decay_t<decltype(xs)>...>;
    if constexpr (std::is_same_v<args,
                                 std::tuple<requeue_atom, std::string, std::string, request_id>>)
      std::tie(std::ignore, offer, stage, std::ignore) = std::tie(xs...);
  });
  CHECK(known);
  CHECK(offer == "o1");
  CHECK(stage == "audit");

  link_table::ForwardRequest passivate;
  link_table::encode(passivate, passivate_atom_v, "o1");
  std::string passivated;
  known = link_table::decode(passivate, [&](auto&&... xs) {
    using args = std::tuple<std::decay_t<decltype(xs)>...>;
    if constexpr (std::is_same_v<args, std::tuple<passivate_atom, std::string>>)
      std::tie(std::ignore, passivated) = std::tie(xs...);
  });
  CHECK(known);
  CHECK(passivated == "o1");

  // Passivation answers a bool of its own, not read as another reply (a version, "ok").
  link_table::ForwardResponse was;
  bool resident = true;
  link_table::encode_reply(was, resident);
  CHECK(was.result_case() == link_table::ForwardResponse::kWasResident);
  CHECK(was.was_resident());
  link_table::ForwardResponse due;
  int64_t at = 1'700'000'000'000'000;
  link_table::encode_reply(due, at);
  CHECK(due.result_case() == link_table::ForwardResponse::kVersion);
  CHECK(due.version() == at);
}
