// The entity forwarder (ADR 0023) on the real PostgreSQL: events kept in entity_forwards for
// entities of another shard group are delivered with their row's request id, in their order per
// target; the delivered deleted, a refused one kept with its error and held back (its target's
// next behind it), then delivered once due again, one refused for good dead-lettered; only the
// shards the node owns are relayed; a wake starts a round at once.
#include <doctest/doctest.h>

#include <future>
#include <mutex>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "gost/core/errc.hpp"
#include "gost/entities/spawn.hpp"
#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/testing/migrated_db.hpp"
#include "gost/testing/process.hpp"

using namespace std::chrono_literals;
using namespace gost;

namespace {

struct delivery {
  std::string key, payload, request_id;
  int64_t delay_ms;
};

} // namespace

TEST_CASE("the forwarder relays the owned shards' kept events once each and in order per "
          "target, holds back a refused one (and its target's next), delivers it when due "
          "again, and dead-letters one refused for good") {
  gost::testing::migrated_db m;
  auto epochs = persistence::acquire_all_leases(m.pool, "n1", 4);
  REQUIRE(epochs);
  // Shard 1 sends to other groups' entities t1, t2 (twice), t4; shard 2 (another node's) to t3.
  auto send = [&](uint32_t shard, const std::string& to, int64_t due_us,
                  const std::string& payload) {
    persistence::entity_write w;
    w.kind = "sender";
    w.entity_id = "s" + std::to_string(shard) + to;
    persistence::entity_event_out e;
    e.kind = "target";
    e.entity_id = to;
    e.due_at_us = due_us;
    e.payload = payload;
    e.forward = true;
    w.events.push_back(e);
    REQUIRE(persistence::commit_entity_writes(m.pool, {{shard, (*epochs)[shard], w}}, "n1"));
  };
  int64_t far_future = 4'000'000'000'000'000; // µs since 1970: the year 2096
  send(1, "t1", 0, "one");
  send(1, "t2", far_future, "first");
  send(1, "t2", 0, "second");
  send(2, "t3", 0, "three");
  send(1, "t4", 0, "of a type t4 does not take");

  std::mutex mtx;
  std::vector<delivery> seen;
  bool refuse_t2 = true;
  caf::actor_system_config cfg;
  register_core_types(cfg);
  caf::actor_system sys{cfg};
  entity_forwarder_options fo;
  fo.pool = &m.pool;
  fo.group = "east";
  fo.shards = [] { return std::vector<uint32_t>{0, 1}; };
  fo.poll = 1h; // rounds by wakes (and the first at the start)
  fo.deliver = [&](const std::string& key, const std::string& payload,
                   const std::string& request_id, int64_t delay_ms) {
    std::promise<caf::error> p;
    std::lock_guard<std::mutex> guard{mtx};
    seen.push_back({key, payload, request_id, delay_ms});
    if (key == "target/t2" && refuse_t2)
      p.set_value(make_error(errc::unavailable, "no owner of the target's shard yet"));
    else if (key == "target/t4")
      p.set_value(make_error(errc::invalid_argument, "event: a target takes X, not Y"));
    else
      p.set_value(caf::error{});
    return p.get_future();
  };
  auto fwd = spawn_entity_forwarder(sys, fo); // a copy: `fo.stats` is shared with it
  auto count = [&](const std::string& where) {
    return m.db.scalar("SELECT count(*) FROM entity_forwards WHERE " + where);
  };
  REQUIRE(gost::testing::eventually(10s, [&] { return count("entity_id = 't1'") == "0"; }));
  REQUIRE(gost::testing::eventually(10s, [&] { return count("attempts = 1") == "1"; }));
  REQUIRE(gost::testing::eventually(10s, [&] { return count("entity_id = 't4'") == "0"; }));
  // Refused for good: a dead letter of the sender's shard, with the target and the reason.
  CHECK(m.db.scalar("SELECT kind || '/' || entity_id || ' ' || shard || ' ' || attempts || ' '"
                    " || reason FROM entity_dead_letters")
        == "target/t4 1 1 relay to another shard group refused: event: a target takes X, not Y");
  {
    std::lock_guard<std::mutex> guard{mtx};
    // t2's second event waits behind its first (held back): never sent before it.
    REQUIRE(seen.size() == 3);
    CHECK(seen[0].key == "target/t1");
    CHECK(seen[0].payload == "one");
    CHECK(seen[0].delay_ms == 0);
    CHECK(seen[1].key == "target/t2");
    CHECK(seen[1].payload == "first");
    CHECK(seen[1].delay_ms > 1'000'000'000'000); // its due time kept: handled then
    CHECK(seen[2].key == "target/t4");
    auto id =
      m.db.scalar("SELECT request_id FROM entity_forwards WHERE entity_id = 't2' AND attempts = 1");
    CHECK(seen[1].request_id == id);
    CHECK(id.rfind("gost.forward/", 0) == 0);
    CHECK(id.size() == 13 + 36); // a uuid
  }
  CHECK(m.db.scalar("SELECT last_error FROM entity_forwards WHERE attempts = 1").find("no owner")
        != std::string::npos);
  CHECK(count("shard = 2") == "1"); // another node's: not relayed here
  // Held back until its retry time (read_entity_forwards); once due (and accepted), it goes,
  // then the one behind it.
  {
    std::lock_guard<std::mutex> guard{mtx};
    refuse_t2 = false;
  }
  m.db.scalar("UPDATE entity_forwards SET retry_at = now() WHERE entity_id = 't2'");
  caf::anon_send(fwd, wake_atom_v);
  REQUIRE(gost::testing::eventually(10s, [&] { return count("entity_id = 't2'") == "0"; }));
  {
    std::lock_guard<std::mutex> guard{mtx};
    REQUIRE(seen.size() == 5);
    CHECK(seen[3].payload == "first");
    CHECK(seen[3].request_id == seen[1].request_id); // the same id both times: stored once
    CHECK(seen[4].payload == "second");
  }
  CHECK(count("true") == "1");          // shard 2's, left to its owner
  CHECK(fo.stats->relayed.load() == 3); // gost_entity_forwards_total
  CHECK(fo.stats->failed.load() == 1);
  CHECK(fo.stats->given_up.load() == 1);
  caf::anon_send_exit(fwd, caf::exit_reason::user_shutdown);
}
