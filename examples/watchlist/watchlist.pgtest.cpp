// The watchlist on a node: the application's own node (node_builder, as its main builds it)
// running in this process on a fresh database of the test server (gost/testing/app_node.hpp),
// called through gost::entity_client as the application's clients call it. What the unit test
// cannot show: refusals as gRPC statuses, a retried ask answered from what was kept, the named
// timer stored (one, replaced) and everything still there after a restart.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "gost/runtime/entity_client.hpp"
#include "gost/testing/app_node.hpp"
#include "gost/testing/process.hpp"
#include "watchlist.hpp"

using namespace std::chrono_literals;
using client = gost::entity_client<watchlist::watchlist>;
using watchlist::v1::WatchlistEvent;

namespace {

gost::node_builder app() {
  gost::node_builder b;
  b.name("watchlist_test", "1.0.0").add_entity_type<watchlist::watchlist>();
  return b;
}

WatchlistEvent add(const std::string& id) {
  WatchlistEvent e;
  e.mutable_add()->set_offer_id(id);
  return e;
}

WatchlistEvent drop(const std::string& id) {
  WatchlistEvent e;
  e.mutable_remove()->set_offer_id(id);
  return e;
}

/// The pending named timers, "name@due_seconds" each.
std::vector<std::string> timers(client& c, const std::string& id) {
  gost::v1::GetEntityResponse full;
  auto r = c.get(id, &full);
  REQUIRE_MESSAGE(r.ok(), r.status.error_message());
  std::vector<std::string> out;
  for (auto& t : full.timers())
    out.push_back(t.name() + "@" + std::to_string(t.due().seconds()));
  return out;
}

} // namespace

TEST_CASE("asks answer and refuse as gRPC statuses; a retried ask gets its first answer") {
  gost::testing::app_node node{app()};
  client lists{node.channel()};

  auto first = lists.ask("buyer-1", add("offer-a"), "req-1");
  REQUIRE_MESSAGE(first.ok(), first.status.error_message());
  CHECK(first.value.size() == 1);
  CHECK(first.value.changed());
  REQUIRE(lists.ask("buyer-1", add("offer-b")).ok());

  auto retried = lists.ask("buyer-1", add("offer-a"), "req-1"); // the same request again
  REQUIRE(retried.ok());
  CHECK(retried.value.size() == 1); // the kept answer, not a second run (which says 2)
  CHECK(retried.value.changed());
  CHECK(lists.get("buyer-1").version == 2);

  auto empty = lists.ask("buyer-1", add(""));
  CHECK(empty.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(empty.status.error_message() == "add.offer_id is required");

  for (int i = 2; i < watchlist::watchlist::max_entries; ++i)
    REQUIRE(lists.ask("buyer-1", add("offer-" + std::to_string(i))).ok());
  auto full = lists.ask("buyer-1", add("one-too-many"));
  CHECK(full.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(full.status.error_message() == "the watchlist holds 100 offers already: remove one first");
  auto now = lists.get("buyer-1");
  CHECK(now.value.entries_size() == 100);
  CHECK(now.version == 100); // refusals kept nothing
}

TEST_CASE("the sweep timer is stored once, replaced by each change, and kept over a restart") {
  gost::testing::app_node node{app()};
  client lists{node.channel()};

  REQUIRE(lists.ask("buyer-2", add("offer-a")).ok());
  auto one = timers(lists, "buyer-2");
  REQUIRE(one.size() == 1);
  CHECK(one[0].rfind("sweep@", 0) == 0);

  REQUIRE(lists.ask("buyer-2", add("offer-b")).ok());
  REQUIRE(lists.ask("buyer-2", add("offer-c")).ok());
  auto replaced = timers(lists, "buyer-2");
  REQUIRE(replaced.size() == 1); // replaced, never a second "sweep"
  CHECK(replaced[0] >= one[0]);  // same name and width: later due sorts later

  node.restart();
  lists = client{node.channel()};
  auto after = lists.get("buyer-2");
  REQUIRE_MESSAGE(after.ok(), after.status.error_message());
  CHECK(after.value.entries_size() == 3);
  CHECK(after.version == 3);
  CHECK(timers(lists, "buyer-2") == replaced);

  for (auto id : {"offer-a", "offer-b", "offer-c"})
    REQUIRE(lists.ask("buyer-2", drop(id)).ok());
  CHECK(timers(lists, "buyer-2").empty()); // the last removal cancelled it
}

TEST_CASE("a sent event is stored, then handled by the entity's actor") {
  gost::testing::app_node node{app()};
  client lists{node.channel()};
  REQUIRE(lists.ask("buyer-3", add("offer-a")).ok());

  WatchlistEvent sweep;
  sweep.mutable_sweep();
  auto sent = lists.send("buyer-3", sweep, "sweep-1");
  REQUIRE_MESSAGE(sent.ok(), sent.error_message());
  CHECK(gost::testing::eventually(30s, [&] { return lists.get("buyer-3").version == 2; }));
  auto s = lists.get("buyer-3");
  CHECK(s.value.entries_size() == 1); // nothing old enough to sweep
  CHECK(s.value.swept() == 0);
  REQUIRE(lists.send("buyer-3", sweep, "sweep-1").ok()); // a retried send stores nothing twice
  CHECK(lists.get("buyer-3").version == 2);
}
