// The entity forwarder (ADR 0023) on the real PostgreSQL: events kept in entity_forwards for
// entities of another shard group are delivered with a request id of their group and row, the
// delivered deleted, a refused one kept with its error and held back, then delivered once due
// again; only the shards the node owns are relayed; a wake starts a round at once.
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

TEST_CASE("the forwarder relays the owned shards' kept events once each, holds back a refused "
          "one, and delivers it when due again") {
  gost::testing::migrated_db m;
  auto epochs = persistence::acquire_all_leases(m.pool, "n1", 4);
  REQUIRE(epochs);
  // Shard 1 sends two events to another group's entities, shard 2 one (another node's shard).
  auto send = [&](uint32_t shard, const std::string& to, int64_t due_us) {
    persistence::entity_write w;
    w.kind = "sender";
    w.entity_id = "s" + std::to_string(shard) + to;
    persistence::entity_event_out e;
    e.kind = "target";
    e.entity_id = to;
    e.due_at_us = due_us;
    e.payload = "event-for-" + to;
    e.forward = true;
    w.events.push_back(e);
    REQUIRE(persistence::commit_entity_writes(m.pool, {{shard, (*epochs)[shard], w}}, "n1"));
  };
  int64_t far_future = 4'000'000'000'000'000; // µs since 1970: the year 2096
  send(1, "t1", 0);
  send(1, "t2", far_future);
  send(2, "t3", 0);

  std::mutex mtx;
  std::vector<delivery> seen;
  bool refuse_t2 = true;
  caf::actor_system_config cfg;
  register_core_types(cfg);
  caf::actor_system sys{cfg};
  entity_forwarder_options fo;
  fo.pool = &m.pool;
  fo.group = "east";
  fo.request_prefix = "gost.forward/1/";
  fo.shards = [] { return std::vector<uint32_t>{0, 1}; };
  fo.poll = 1h; // rounds by wakes (and the first at the start)
  fo.deliver = [&](const std::string& key, const std::string& payload,
                   const std::string& request_id, int64_t delay_ms) {
    std::promise<caf::error> p;
    std::lock_guard<std::mutex> guard{mtx};
    seen.push_back({key, payload, request_id, delay_ms});
    p.set_value(key == "target/t2" && refuse_t2
                  ? make_error(errc::unavailable, "no owner of the target's shard yet")
                  : caf::error{});
    return p.get_future();
  };
  auto fwd = spawn_entity_forwarder(sys, fo);
  auto count = [&](const std::string& where) {
    return m.db.scalar("SELECT count(*) FROM entity_forwards WHERE " + where);
  };
  REQUIRE(gost::testing::eventually(10s, [&] { return count("entity_id = 't1'") == "0"; }));
  REQUIRE(gost::testing::eventually(10s, [&] { return count("attempts = 1") == "1"; }));
  {
    std::lock_guard<std::mutex> guard{mtx};
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].key == "target/t1");
    CHECK(seen[0].payload == "event-for-t1");
    CHECK(seen[0].delay_ms == 0);
    CHECK(seen[1].key == "target/t2");
    CHECK(seen[1].delay_ms > 1'000'000'000'000); // its due time kept: handled then
    auto id = m.db.scalar("SELECT id FROM entity_forwards WHERE entity_id = 't2'");
    CHECK(seen[1].request_id == "gost.forward/1/" + id);
  }
  CHECK(
    m.db.scalar("SELECT last_error FROM entity_forwards WHERE entity_id = 't2'").find("no owner")
    != std::string::npos);
  CHECK(count("shard = 2") == "1"); // another node's: not relayed here
  // Held back until its retry time (read_entity_forwards); once due (and accepted), it goes.
  {
    std::lock_guard<std::mutex> guard{mtx};
    refuse_t2 = false;
  }
  m.db.scalar("UPDATE entity_forwards SET retry_at = now() WHERE entity_id = 't2'");
  caf::anon_send(fwd, wake_atom_v);
  REQUIRE(gost::testing::eventually(10s, [&] { return count("entity_id = 't2'") == "0"; }));
  {
    std::lock_guard<std::mutex> guard{mtx};
    size_t t2 = 0;
    for (auto& d : seen)
      t2 += d.key == "target/t2" ? 1 : 0;
    CHECK(t2 == 2); // refused once, then delivered: its request id the same both times
    CHECK(seen.back().request_id == seen[1].request_id);
  }
  CHECK(count("true") == "1"); // shard 2's, left to its owner
  caf::anon_send_exit(fwd, caf::exit_reason::user_shutdown);
}
