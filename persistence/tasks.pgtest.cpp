// Task groups and tagged entities (migration 0012) on the real PostgreSQL: a group created
// twice is stored once; entities list by (kind, lane, tag) with the tag their last state set;
// outputs of concurrent commits are read behind a cursor without gaps.
#include <doctest/doctest.h>

#include <set>
#include <thread>

#include "gost/persistence/entities/entities.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/persistence/tasks/tasks.hpp"
#include "pg_fixture.hpp"

using namespace gost::persistence;

namespace {

entity_write handled(const std::string& id, int64_t expected_version,
                     std::optional<std::string> tag, std::string output = {}) {
  entity_write w;
  w.kind = "task.moderation";
  w.entity_id = id;
  w.lane = "ki";
  w.expected_version = expected_version;
  w.new_state = "state of " + id;
  w.tag = std::move(tag);
  if (!output.empty())
    w.outputs.emplace_back("ki", std::move(output));
  return w;
}

std::vector<std::string> ids(const std::vector<tagged_entity>& es) {
  std::vector<std::string> out;
  for (auto& e : es)
    out.push_back(e.id);
  return out;
}

entity_write created(const std::string& id) {
  entity_write w;
  w.kind = "task.moderation";
  w.entity_id = id;
  w.lane = "ki";
  entity_event_out e;
  e.kind = w.kind;
  e.entity_id = id;
  e.lane = "ki";
  e.payload = "init";
  w.events.push_back(std::move(e));
  return w;
}

} // namespace

TEST_CASE_FIXTURE(migrated_db, "a task group is created once; a second create answers the stored "
                               "group") {
  task_group g{"ki", "moderation", "classifieds", 600'000, 5};
  auto first = create_task_group(pool, g);
  REQUIRE(first);
  CHECK_EQ(first->group_id, "ki");
  CHECK_EQ(first->retry_delay_ms, 600'000);
  auto other = g;
  other.max_attempts = 9;
  other.source = "billing";
  auto second = create_task_group(pool, other);
  REQUIRE(second);
  CHECK_EQ(second->max_attempts, 5);
  CHECK_EQ(second->source, "classifieds");
  CHECK_EQ(db.scalar("SELECT count(*) FROM task_groups"), "1");
  auto found = find_task_group(pool, "ki");
  REQUIRE(found);
  REQUIRE(*found);
  CHECK_EQ((*found)->task_type, "moderation");
  auto missing = find_task_group(pool, "nope");
  REQUIRE(missing);
  CHECK_FALSE(*missing);
}

TEST_CASE_FIXTURE(migrated_db, "entities list by the tag of their last state") {
  auto epochs = acquire_all_leases(pool, "test-node", 1);
  REQUIRE(epochs);
  auto epoch = (*epochs)[0];
  std::vector<fenced_write<entity_write>> ws;
  for (auto id : {"ki:a", "ki:b", "ki:c"})
    ws.push_back({0, epoch, created(id)});
  REQUIRE(commit_entity_writes(pool, ws, "test-node"));
  ws.clear();
  ws.push_back({0, epoch, handled("ki:a", 0, "waiting")});
  ws.push_back({0, epoch, handled("ki:b", 0, "waiting")});
  ws.push_back({0, epoch, handled("ki:c", 0, std::nullopt)});
  auto out = commit_entity_writes(pool, ws, "test-node");
  REQUIRE(out);
  CHECK(*out == std::vector<write_outcome>(3, write_outcome::committed));
  auto waiting = list_tagged_entities(pool, "task.moderation", "ki", "waiting", "", 10);
  REQUIRE(waiting);
  CHECK(ids(*waiting) == std::vector<std::string>{"ki:a", "ki:b"});
  // A state without a tag keeps the last one.
  ws.clear();
  ws.push_back({0, epoch, handled("ki:a", 1, "approved")});
  ws.push_back({0, epoch, handled("ki:b", 1, std::nullopt)});
  REQUIRE(commit_entity_writes(pool, ws, "test-node"));
  waiting = list_tagged_entities(pool, "task.moderation", "ki", "waiting", "", 10);
  REQUIRE(waiting);
  CHECK(ids(*waiting) == std::vector<std::string>{"ki:b"});
  auto approved = list_tagged_entities(pool, "task.moderation", "ki", "approved", "", 10);
  REQUIRE(approved);
  CHECK(ids(*approved) == std::vector<std::string>{"ki:a"});
  // No tag asked: every tagged entity of the lane, with its tag (ki:c has none yet).
  auto all = list_tagged_entities(pool, "task.moderation", "ki", "", "", 10);
  REQUIRE(all);
  REQUIRE_EQ(all->size(), 2u);
  CHECK_EQ((*all)[0].tag, "approved");
  CHECK_EQ((*all)[1].tag, "waiting");
  // Paging by id, and other lanes apart.
  auto after = list_tagged_entities(pool, "task.moderation", "ki", "waiting", "ki:b", 10);
  REQUIRE(after);
  CHECK(after->empty());
  auto other_lane = list_tagged_entities(pool, "task.moderation", "other", "approved", "", 10);
  REQUIRE(other_lane);
  CHECK(other_lane->empty());
}

TEST_CASE_FIXTURE(migrated_db, "outputs committed by concurrent writers are read behind a cursor "
                               "exactly once") {
  auto epochs = acquire_all_leases(pool, "test-node", 1);
  REQUIRE(epochs);
  auto epoch = (*epochs)[0];
  pg_pool other{pool_options(db)};
  constexpr int per_writer = 200;
  {
    std::vector<fenced_write<entity_write>> ws;
    for (int w = 0; w < 2; ++w)
      for (int i = 0; i < per_writer; ++i)
        ws.push_back({0, epoch, created("ki:" + std::to_string(w) + "-" + std::to_string(i))});
    REQUIRE(commit_entity_writes(pool, ws, "test-node"));
  }
  // Two writers (two pools) commit one output each per transaction while a reader pulls
  // behind its cursor: it must see each output once, none skipped.
  auto write_all = [&](pg_pool& p, int w) {
    for (int i = 0; i < per_writer; ++i) {
      auto id = "ki:" + std::to_string(w) + "-" + std::to_string(i);
      std::vector<fenced_write<entity_write>> ws{{0, epoch, handled(id, 0, "done", id)}};
      CHECK(
        commit_entity_writes(p, ws, "test-node")); // CHECK: a REQUIRE would throw on this thread
    }
  };
  std::thread a{[&] { write_all(pool, 0); }};
  std::thread b{[&] { write_all(other, 1); }};
  pg_pool reader_pool{pool_options(db, 1)};
  std::set<std::string> seen;
  int64_t cursor = 0;
  size_t duplicates = 0;
  for (;;) {
    // All committed before this read: an empty page then means the reader is at the end.
    bool all_committed =
      db.scalar("SELECT count(*) FROM entity_outputs") == std::to_string(2 * per_writer);
    auto page = read_entity_outputs(reader_pool, "task.moderation", "ki", cursor, 7);
    REQUIRE(page);
    for (auto& o : *page) {
      if (!seen.insert(o.payload).second)
        ++duplicates;
      cursor = o.seq;
    }
    if (all_committed && page->empty())
      break;
  }
  a.join();
  b.join();
  CHECK_EQ(duplicates, 0u);
  CHECK_EQ(seen.size(), 2u * per_writer);
}
