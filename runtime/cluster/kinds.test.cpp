// Unit: a third kind, registered in the routing table like offers and durable entities
// (node/kinds.cpp) with no change to the router, ask_owner, the node link, local_shard or the
// node's start: its supervisor starts from the table when the node takes a shard (what the
// cluster manager does), and a request routed to it (ask_kind, as the API routes offers and
// entities) reaches its actor. A kind the node link does not carry is refused with a message
// saying so for a shard another node owns, instead of waiting for an owner.
#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <set>
#include <string>

#include <caf/typed_event_based_actor.hpp>

#include "cluster/ask_owner.hpp"
#include "cluster/kinds.hpp"
#include "cluster/router.hpp"
#include "gost/core/errc.hpp"
#include "gost/testing/caf_fixture.hpp"

CAF_ADD_ATOM(gost_runtime_tests, gost::kinds_test, echo_atom, "echo")
CAF_ADD_ATOM(gost_runtime_tests, gost::kinds_test, count_atom, "count")

using namespace gost;
using namespace gost::runtime;
using kinds_test::count_atom_v;
using kinds_test::echo_atom_v;

namespace {

/// The test kind's interface: an echo by entity, answered by the shard's supervisor.
using echo_ops = caf::typed_actor<
  caf::replies_to<kinds_test::echo_atom, std::string, std::string>::with<std::string>>;
/// Another kind's, so the table holds more than one.
using count_ops =
  caf::typed_actor<caf::replies_to<kinds_test::count_atom, std::string>::with<int64_t>>;

echo_ops::behavior_type echo_shard(echo_ops::pointer, uint32_t shard) {
  return {[shard](kinds_test::echo_atom, const std::string& id, const std::string& text) {
    return "shard " + std::to_string(shard) + " " + id + ": " + text;
  }};
}

struct kinds_fixture : testing::caf_fixture {
  router routes{4, {}};
  std::set<std::string> paused;
  std::vector<uint32_t> started; ///< the shards the echo kind started a supervisor for
  kind_slot<count_ops> count;
  kind_slot<echo_ops> echo;

  kinds_fixture() {
    // A kind hosted on no shard of this node (its spawn gives no supervisor), registered first.
    count = routes.kinds().add<count_ops>(make_shard_kind<count_ops>(
      "count", [](const shard_lease&) { return caf::actor{}; },
      [](const std::string& id) { return id.rfind("count:", 0) == 0; }));
    echo = routes.kinds().add<echo_ops>(make_shard_kind<echo_ops>(
      "echo",
      [this](const shard_lease& l) {
        started.push_back(l.shard);
        return caf::actor_cast<caf::actor>(spawn(echo_shard, l.shard));
      },
      [](const std::string& id) { return id.rfind("echo:", 0) == 0; }));
  }

  /// The node takes `shard` (as the cluster manager does with a lease).
  void take(uint32_t shard) {
    routes.set_local(shard,
                     spawn_local_shard(routes.kinds(), shard_lease{&sys, shard, 1, &paused}));
  }

  struct outcome {
    std::optional<std::string> reply;
    caf::error error;
  };

  /// ask_kind from an actor of the test scheduler, run until answered.
  std::shared_ptr<outcome> ask_echo(const std::string& id, const std::string& text) {
    auto out = std::make_shared<outcome>();
    spawn(
      [](caf::event_based_actor* self, router* r, kind_slot<echo_ops> k, std::shared_ptr<outcome> o,
         std::string key, std::string said) {
        ask_kind(
          self, *r, k, clock_type::now() + std::chrono::seconds{5},
          [o](std::string& s) { o->reply = s; }, [o](const caf::error& e) { o->error = e; },
          echo_atom_v, key, said);
      },
      &routes, echo, out, id, text);
    run();
    return out;
  }
};

} // namespace

TEST_CASE("a kind's operations are told apart from another kind's") {
  kind_table t;
  t.add<echo_ops>(make_shard_kind<echo_ops>("echo", {}, {}));
  t.add<count_ops>(make_shard_kind<count_ops>("count", {}, {}));
  auto echo = caf::make_message(echo_atom_v, std::string{"echo:a"}, std::string{"hi"});
  auto count = caf::make_message(count_atom_v, std::string{"count:a"});
  CHECK(t[0].accepts(echo));
  CHECK_FALSE(t[0].accepts(count));
  CHECK(t[1].accepts(count));
  CHECK_FALSE(t[1].accepts(echo));
  // The same atom with other arguments is not the operation.
  CHECK_FALSE(t[0].accepts(caf::make_message(echo_atom_v, std::string{"echo:a"})));
}

TEST_CASE_FIXTURE(kinds_fixture, "a registered kind's supervisor starts with the shard and a "
                                 "routed request reaches it") {
  take(1);
  take(3);
  CHECK(started == std::vector<uint32_t>{1, 3});
  CHECK(routes.here(1));
  CHECK_FALSE(routes.local(count, 1).has_value()); // the node hosts no `count` supervisor
  REQUIRE(routes.local(echo, 1).has_value());

  // Ids on either shard this node owns.
  int reached = 0;
  for (auto id : {"echo:a", "echo:b", "echo:c", "echo:d", "echo:e", "echo:f"}) {
    auto shard = routes.shard_of(id);
    if (shard != 1 && shard != 3)
      continue;
    auto got = ask_echo(id, "hello");
    REQUIRE(got->reply);
    CHECK(*got->reply == "shard " + std::to_string(shard) + " " + id + ": hello");
    ++reached;
  }
  CHECK(reached > 0);
}

TEST_CASE_FIXTURE(kinds_fixture, "a kind the node link does not carry is refused for a shard of "
                                 "another node, saying so") {
  std::string id = "echo:a";
  auto shard = routes.shard_of(id);
  auto link = spawn([](caf::event_based_actor*, int) -> caf::behavior { return {[](int) {}}; }, 0);
  routes.set_remote(shard, link);
  auto got = ask_echo(id, "hello");
  CHECK_FALSE(got->reply);
  REQUIRE(got->error);
  CHECK(got->error.category() == caf::atom("gost"));
  CHECK(got->error.code() == static_cast<uint8_t>(errc::failed_precondition));
  CHECK(sys.render(got->error).find("not forwarded between nodes") != std::string::npos);
}
