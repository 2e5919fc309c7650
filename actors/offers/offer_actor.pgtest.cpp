#include <doctest/doctest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "gost/testing/process.hpp"
#include "shard_fixture.hpp"

using namespace gost;
using namespace std::chrono_literals;
using gost::errc;

namespace {} // namespace

TEST_CASE("an offer round-trips through shard, offer actor and PostgreSQL") {
  shard_fixture f;
  auto created = f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{});
  REQUIRE_MESSAGE(created, f.sys->render(created.error()));
  CHECK(created->value.version() == 1);
  CHECK(f.db.scalar("SELECT version FROM offers WHERE offer_id = 'o1'") == "1");
  CHECK(f.db.scalar("SELECT shard FROM offers WHERE offer_id = 'o1'") == "3");
  auto got = f.ask(get_atom_v, std::string{"o1"});
  REQUIRE(got);
  CHECK(got->value.title() == "t");
  auto again = f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{});
  REQUIRE_FALSE(again);
  CHECK(again.error() == errc::already_exists);
  auto missing = f.ask(get_atom_v, std::string{"nope"});
  REQUIRE_FALSE(missing);
  CHECK(missing.error() == errc::not_found);
}

TEST_CASE("events of one offer are applied one at a time") {
  shard_fixture f;
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  // Many concurrent unconditional updates: if two ever interleaved, both would compute the
  // same next version and one CAS would fail.
  constexpr int n = 200;
  caf::scoped_actor self{*f.sys};
  for (int i = 0; i < n; ++i) {
    auto o = new_offer("o1");
    o.set_title("t" + std::to_string(i));
    self->send(f.shard, update_atom_v, o.id(), offer_msg{o}, any_version, std::string{},
               request_id{});
  }
  int ok = 0;
  for (int i = 0; i < n; ++i)
    self->receive([&](offer_msg&) { ++ok; }, [&](caf::error& e) { FAIL(f.sys->render(e)); });
  CHECK(ok == n);
  CHECK(f.db.scalar("SELECT version FROM offers WHERE offer_id = 'o1'") == std::to_string(n + 1));
}

TEST_CASE("a stale expected version is rejected and nothing is written") {
  shard_fixture f;
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  auto o = new_offer("o1");
  o.set_title("changed");
  REQUIRE(f.ask(update_atom_v, o.id(), offer_msg{o}, int64_t{1}, std::string{}, request_id{}));
  o.set_title("lost update");
  auto stale = f.ask(update_atom_v, o.id(), offer_msg{o}, int64_t{1}, std::string{}, request_id{});
  REQUIRE_FALSE(stale);
  CHECK(stale.error() == errc::conflict);
  CHECK(f.db.scalar("SELECT version FROM offers WHERE offer_id = 'o1'") == "2");
  auto got = f.ask(get_atom_v, std::string{"o1"});
  REQUIRE(got);
  CHECK(got->value.title() == "changed");
}

TEST_CASE("an update that changes the seller key moves the lookups with it; another offer's key "
          "is refused and nothing changes") {
  shard_fixture f;
  auto keyed = [](const std::string& id, const std::string& sku) {
    auto o = new_offer(id);
    o.set_namespace_("shop");
    o.set_external_id(sku);
    return o;
  };
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{keyed("o1", "sku-1")}, request_id{}));
  REQUIRE(f.ask(create_atom_v, std::string{"o2"}, offer_msg{keyed("o2", "sku-2")}, request_id{}));
  caf::scoped_actor self{*f.sys};
  auto find = [&](const std::string& sku) {
    std::string out;
    self->request(f.store, 10s, find_atom_v, std::string{"s"}, std::string{"shop"}, sku)
      .receive([&](std::string& id) { out = id; },
               [&](caf::error& e) { out = "error: " + f.sys->render(e); });
    return out;
  };
  auto moved = f.ask(update_atom_v, std::string{"o1"}, offer_msg{keyed("o1", "sku-3")}, any_version,
                     std::string{}, request_id{});
  REQUIRE_MESSAGE(moved, f.sys->render(moved.error()));
  CHECK(find("sku-3") == "o1");
  CHECK(find("sku-1").rfind("error:", 0) == 0);
  // The old key is free: another offer takes it.
  REQUIRE(f.ask(update_atom_v, std::string{"o2"}, offer_msg{keyed("o2", "sku-1")}, any_version,
                std::string{}, request_id{}));
  CHECK(find("sku-1") == "o2");
  // o1's key is not: refused, naming it, and o2 keeps its version and key.
  auto taken = f.ask(update_atom_v, std::string{"o2"}, offer_msg{keyed("o2", "sku-3")}, any_version,
                     std::string{}, request_id{});
  REQUIRE_FALSE(taken);
  CHECK(taken.error() == errc::already_exists);
  CHECK(f.sys->render(taken.error()).find("sku-3") != std::string::npos);
  CHECK(f.db.scalar("SELECT version || ':' || external_id FROM offers WHERE offer_id = 'o2'")
        == "2:sku-1");
  auto got = f.ask(get_atom_v, std::string{"o2"});
  REQUIRE(got);
  CHECK(got->value.external_id() == "sku-1");
  // A create of a key an update took is refused as before.
  auto dup = f.ask(create_atom_v, std::string{"o4"}, offer_msg{keyed("o4", "sku-3")}, request_id{});
  REQUIRE_FALSE(dup);
  CHECK(dup.error() == errc::already_exists);
}

TEST_CASE("an idle offer actor passivates and reloads from PostgreSQL") {
  shard_fixture f{std::chrono::milliseconds{50}};
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  // Remove the row behind the actor's back. A resident actor still answers from memory; once
  // the sweep passivated it (the shard forgets it at once), the next event loads from
  // PostgreSQL and finds nothing.
  f.db.scalar("DELETE FROM offers WHERE offer_id = 'o1'");
  REQUIRE(testing::eventually(10s, [&] { return f.stats->offers.passivated.load() >= 1; }));
  auto got = f.ask(get_atom_v, std::string{"o1"});
  REQUIRE_FALSE(got);
  CHECK(got.error() == errc::not_found);
  // The shard spawns a fresh actor that sees the true state and can create the offer again.
  auto again = f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{});
  REQUIRE(again);
  CHECK(again->value.version() == 1);
}

TEST_CASE("the resident cap passivates the least recently used offer actor") {
  shard_fixture f{std::chrono::seconds{60}, std::make_shared<stage_registry>(),
                  [](shard_options& so) { so.kit.max_resident = 2; }};
  for (auto id : {"a", "b", "c", "d", "e"})
    REQUIRE(f.ask(create_atom_v, std::string{id}, offer_msg{new_offer(id)}, request_id{}));
  CHECK(f.stats->offers.resident.load() <= 2);
  CHECK(f.stats->offers.passivated.load() >= 3);
  // Every offer is still served: evicted ones come back from PostgreSQL.
  for (auto id : {"a", "b", "c", "d", "e"}) {
    auto got = f.ask(get_atom_v, std::string{id});
    REQUIRE(got);
    CHECK(got->value.id() == id);
  }
  CHECK(f.stats->offers.resident.load() <= 2);
}

TEST_CASE("an offer actor killed from outside is forgotten and the next event starts a new one") {
  shard_fixture f;
  REQUIRE(f.ask(create_atom_v, std::string{"o1"}, offer_msg{new_offer("o1")}, request_id{}));
  caf::scoped_actor self{*f.sys};
  // The shard delegates a mailbox query to the offer actor, which answers itself: its
  // address is the sender of the answer.
  offer_actor victim;
  self->request(f.shard, std::chrono::seconds{10}, get_atom_v, resident_atom_v, std::string{"o1"})
    .receive([&](offer_actor& a) { victim = a; },
             [&](caf::error& e) { FAIL("actor query failed: " << f.sys->render(e)); });
  REQUIRE(victim);
  REQUIRE(f.stats->offers.resident.load() == 1);
  caf::anon_send_exit(victim, caf::exit_reason::kill);
  victim = offer_actor{};
  // No monitor: the dying actor reports its stop, and the shard forgets it.
  CHECK(testing::eventually(std::chrono::seconds{5},
                            [&] { return f.stats->offers.resident.load() == 0; }));
  CHECK(f.stats->offers.crashed.load() == 1); // it was not passivated
  CHECK(f.stats->offers.passivated.load() == 0);
  bool resident = true;
  self->request(f.shard, std::chrono::seconds{10}, resident_atom_v, std::string{"o1"})
    .receive([&](kit::activity& a) { resident = a.resident; }, [&](caf::error&) {});
  CHECK_FALSE(resident);
  auto o = new_offer("o1");
  o.set_title("after the kill");
  auto updated =
    f.ask(update_atom_v, o.id(), offer_msg{o}, int64_t{1}, std::string{}, request_id{});
  REQUIRE(updated);
  CHECK(updated->value.version() == 2);
  CHECK(f.stats->offers.resident.load() == 1);
  CHECK(f.db.scalar("SELECT version FROM offers WHERE offer_id = 'o1'") == "2");
}
