// Tasks of seed 002 (docs/tasks.md) end to end, through gost.v1.TaskService on gostd with the
// moderation task type: groups, Init first, verdicts from outside, timers (self-events),
// verdicts passed to another task, cancel, retries that reorder events and dead letters, bad
// input that changes nothing, gostctl; results pulled by cursor exactly once across kill -9
// under load; one group's backlog not delaying another group; tasks spread over two shard
// groups' databases (ADR 0023): verdicts passed across groups survive kill -9, results pulled
// by token exactly once, ListTasks merged in byte order; a part of a group moved while verdicts
// pass between its halves and scheduled actions fire at tasks.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>

#include "gost/core/shard_hash.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/testing/scheduled.hpp"
#include "gost/testing/scheduled_api.hpp"
#include "gost/testing/tasks.hpp"
#include "gost/v1/scheduled_actions.grpc.pb.h"
#include "gost/v1/task_service.grpc.pb.h"
#include "gost/v1/tasks.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using google::protobuf::util::TimeUtil;
using testing::child_process;
using testing::item;
using testing::task_client;
using testing::verdict;

namespace {

std::vector<std::string> node_args(const testing::temp_db& db, const std::string& port_file) {
  return {"--pg.dsn=" + db.dsn(),
          "--grpc.listen=127.0.0.1:0",
          "--grpc.port_file=" + port_file,
          "--caf.listen=127.0.0.1:0",
          "--shard.count=8",
          "--queue.poll=50ms",
          "--outbox.relay=false",
          "--limits.event_max_bytes=4k",
          "--tasks.max_attempts=4"};
}

template <class Rpc, class Req, class Resp>
grpc::Status call(Rpc rpc, const Req& req, Resp& resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  return rpc(&ctx, req, &resp);
}

/// The results of one task, in order, as "name" or "name#issue" for assignments.
std::vector<std::string> names_of(const std::vector<v1::PullResultsResponse::Result>& rs,
                                  const std::string& task) {
  std::vector<std::string> out;
  for (auto& r : rs) {
    if (r.task_id() != task)
      continue;
    v1::ModerationAssignment a;
    if (r.name() == "assignment" && r.payload().UnpackTo(&a))
      out.push_back("assignment#" + std::to_string(a.issue()));
    else
      out.push_back(r.name());
  }
  return out;
}

/// Starts gostd on `db` once and stops it: the catalog's schema and installation, before a
/// test declares shard groups there.
void make_catalog(const std::vector<std::string>& args, const std::string& port_file) {
  child_process first{GOSTD_PATH, args};
  REQUIRE_MESSAGE(testing::served_port(first, port_file) > 0, first.output());
  first.signal(SIGTERM);
  REQUIRE(first.wait(30s) == 0);
  std::remove(port_file.c_str());
}

/// `n` pairs (original, duplicate) of moderation task ids (`x:t-i`, `x:d-k`), the duplicate
/// in the other side than its original (`side_of`), both ways.
std::vector<std::pair<std::string, std::string>>
pairs_across(int n, const std::function<int(const std::string&)>& side_of) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0, k = 0; static_cast<int>(out.size()) < n; ++i) {
    auto original = "x:t-" + std::to_string(i);
    while (side_of("x:d-" + std::to_string(k)) == side_of(original))
      ++k;
    out.emplace_back(original, "x:d-" + std::to_string(k++));
  }
  int second = 0;
  for (auto& [o, d] : out)
    second += side_of(o);
  REQUIRE(second > 0);
  REQUIRE(second < n);
  return out;
}

/// Creates group `x` and each pair's original, then its duplicate; waits until every
/// duplicate waits for its verdict (its Init ran).
void create_pairs(task_client& tasks,
                  const std::vector<std::pair<std::string, std::string>>& tasks_of) {
  REQUIRE(tasks.create_group("x").ok());
  for (auto& [o, d] : tasks_of) {
    REQUIRE(tasks.create("x", o.substr(2), item(o)).ok());
    auto dup = item(d);
    dup.set_duplicate_of(o);
    REQUIRE(tasks.create("x", d.substr(2), dup).ok());
  }
  CHECK(testing::eventually(30s, [&] {
    for (auto& [o, d] : tasks_of)
      if (tasks.get(d).state_name() != "waiting")
        return false;
    return true;
  }));
}

/// Every original gets its duplicate's verdict (rejected), within a minute.
void check_originals_rejected(task_client& tasks,
                              const std::vector<std::pair<std::string, std::string>>& tasks_of) {
  std::string waiting; // an original without its verdict yet
  CHECK_MESSAGE(testing::eventually(60s,
                                    [&] {
                                      for (auto& [o, d] : tasks_of)
                                        if (tasks.get(o).state_name() != "rejected") {
                                          waiting = o;
                                          return false;
                                        }
                                      return true;
                                    }),
                waiting);
}

} // namespace

TEST_CASE("tasks: groups, Init first, verdicts, timers, duplicates, cancel, retries, bad input") {
  testing::temp_db db;
  auto port_file = "/tmp/gost-tasks-" + std::to_string(getpid());
  child_process node{GOSTD_PATH, node_args(db, port_file)};
  auto port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  task_client tasks{port};

  REQUIRE(tasks.create_group("ki").ok());
  CHECK(tasks.create_group("ki").ok()); // the same again: a no-op
  auto other = tasks.create_group("ki", 1s);
  CHECK(other.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  CHECK(other.error_message().find("exists with other settings") != std::string::npos);
  {
    // Settings left out: the node's `tasks.*` (max_attempts 4 from the command line, the
    // retry delay's default of 10 minutes).
    v1::CreateGroupRequest req;
    req.mutable_group()->set_group_id("defaults");
    req.mutable_group()->set_task_type("moderation");
    req.mutable_group()->set_source("classifieds");
    v1::CreateGroupResponse resp;
    REQUIRE(
      call([&](auto* ctx, auto& r, auto* out) { return tasks.stub->CreateGroup(ctx, r, out); }, req,
           resp)
        .ok());
    CHECK(resp.group().max_attempts() == 4);
    CHECK(TimeUtil::DurationToMilliseconds(resp.group().retry_delay()) == 600'000);
  }
  auto unknown_type = tasks.create_group("x", 200ms, 3, "billing");
  CHECK(unknown_type.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(unknown_type.error_message().find("hosted: moderation") != std::string::npos);

  // Init first: the task's first result is its assignment. A retry of the same client key
  // creates nothing twice.
  std::string a;
  REQUIRE(tasks.create("ki", "offer-1", item("offer-1"), &a).ok());
  CHECK(a == "ki:offer-1");
  std::string again;
  REQUIRE(tasks.create("ki", "offer-1", item("offer-1"), &again).ok());
  CHECK(again == a);
  CHECK(testing::eventually(10s, [&] { return tasks.get(a).state_name() == "waiting"; }));
  auto waiting = tasks.get(a);
  CHECK(waiting.version() == 1);        // one Init handled
  CHECK(waiting.pending_events() == 1); // its timer
  CHECK(waiting.results() == 1);

  // A verdict from outside completes it.
  REQUIRE(tasks.send(a, "verdict", verdict(true), "v-1").ok());
  CHECK(testing::eventually(10s, [&] { return tasks.get(a).state_name() == "approved"; }));
  CHECK(tasks.get(a).closed());

  // No verdict in time: the task's own timer issues the assignment again, then it expires.
  std::string b;
  REQUIRE(tasks.create("ki", "offer-2", item("offer-2", 200ms, 2), &b).ok());
  CHECK(testing::eventually(10s, [&] { return tasks.get(b).state_name() == "expired"; }));

  // A duplicate passes its verdict to the task it duplicates (an event to another task).
  std::string c;
  std::string d;
  REQUIRE(tasks.create("ki", "offer-3", item("offer-3"), &c).ok());
  auto dup = item("offer-3-copy");
  dup.set_duplicate_of(c);
  REQUIRE(tasks.create("ki", "offer-3-copy", dup, &d).ok());
  CHECK(testing::eventually(10s, [&] { return tasks.get(d).state_name() == "waiting"; }));
  REQUIRE(tasks.send(d, "verdict", verdict(false)).ok());
  CHECK(testing::eventually(10s, [&] { return tasks.get(c).state_name() == "rejected"; }));

  // Cancel from outside withdraws the assignment.
  std::string e;
  REQUIRE(tasks.create("ki", "offer-4", item("offer-4"), &e).ok());
  REQUIRE(tasks.cancel(e, "seller deleted the offer").ok());
  CHECK(testing::eventually(10s, [&] { return tasks.get(e).state_name() == "cancelled"; }));

  // A throwing step (an event the type does not take) is retried after the group's delay and
  // dead-lettered after its attempts; an event sent after it is handled meanwhile (the retry
  // changed the order, as seed 002 says), and the task goes on.
  std::string f;
  REQUIRE(tasks.create("ki", "offer-5", item("offer-5"), &f).ok());
  CHECK(testing::eventually(10s, [&] { return tasks.get(f).state_name() == "waiting"; }));
  REQUIRE(tasks.send(f, "bogus", verdict(true)).ok());
  CHECK(testing::eventually(10s, [&] {
    return db.scalar("SELECT max(attempts) FROM entity_events WHERE entity_id = '" + f + "'")
           == "1";
  }));
  {
    v1::ReprioritizeTaskRequest req;
    req.set_task_id(f);
    req.set_priority(9);
    v1::ReprioritizeTaskResponse resp;
    REQUIRE(
      call([&](auto* ctx, auto& r, auto* out) { return tasks.stub->Reprioritize(ctx, r, out); },
           req, resp)
        .ok());
  }
  CHECK(testing::eventually(10s, [&] { return tasks.get(f).priority() == 9; }));
  CHECK(db.scalar("SELECT count(*) FROM entity_dead_letters WHERE entity_id = '" + f + "'")
        == "0"); // the failed event is still waiting for its retry
  CHECK(testing::eventually(10s, [&] {
    return db.scalar("SELECT attempts FROM entity_dead_letters WHERE entity_id = '" + f + "'")
           == "3";
  }));
  CHECK(db.scalar("SELECT reason FROM entity_dead_letters WHERE entity_id = '" + f + "'")
        == "a moderation task takes `verdict` and `timeout`, not `bogus`");
  REQUIRE(tasks.send(f, "verdict", verdict(true)).ok());
  CHECK(testing::eventually(10s, [&] { return tasks.get(f).state_name() == "approved"; }));

  // The group's results, by cursor: each task's in the order it wrote them.
  int64_t cursor = 0;
  auto results = tasks.pull_all("ki", cursor);
  CHECK(names_of(results, a) == std::vector<std::string>{"assignment#1", "verdict"});
  CHECK(names_of(results, b)
        == std::vector<std::string>{"assignment#1", "assignment#2", "withdrawn"});
  CHECK(names_of(results, c) == std::vector<std::string>{"assignment#1", "verdict"});
  CHECK(names_of(results, e) == std::vector<std::string>{"assignment#1", "withdrawn"});
  CHECK(names_of(results, f) == std::vector<std::string>{"assignment#1", "verdict"});
  CHECK(tasks.pull_all("ki", cursor).empty());

  // Listing by state.
  {
    v1::ListTasksRequest req;
    req.set_group_id("ki");
    req.set_state_name("rejected");
    v1::ListTasksResponse resp;
    REQUIRE(call([&](auto* ctx, auto& r, auto* out) { return tasks.stub->ListTasks(ctx, r, out); },
                 req, resp)
              .ok());
    REQUIRE(resp.tasks_size() == 2);
    CHECK(resp.tasks(0).task_id() == c);
    CHECK(resp.tasks(1).task_id() == d);
  }

  // Bad input gets a clear error and changes nothing.
  auto events_before = db.scalar("SELECT count(*) FROM entity_events");
  auto entities_before = db.scalar("SELECT count(*) FROM entities");
  auto no_group = tasks.create("nope", "k", item("x"));
  CHECK(no_group.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(no_group.error_message().find("group `nope` does not exist") != std::string::npos);
  auto wrong_input = tasks.create("ki", "k", verdict(true));
  CHECK(wrong_input.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(wrong_input.error_message().find("gost.v1.ModerationInput") != std::string::npos);
  auto big = item("big");
  big.set_content(std::string(8192, 'x'));
  auto oversized = tasks.create("ki", "big", big);
  CHECK(oversized.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  // Each size refusal names the request's field, as every other refusal does.
  CHECK_MESSAGE(oversized.error_message().rfind("input is ", 0) == 0, oversized.error_message());
  CHECK(oversized.error_message().find("limits.event_max_bytes") != std::string::npos);
  v1::ModerationVerdict big_verdict;
  big_verdict.set_reason(std::string(8192, 'x'));
  auto big_event = tasks.send(a, "verdict", big_verdict);
  CHECK(big_event.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_MESSAGE(big_event.error_message().rfind("payload is ", 0) == 0, big_event.error_message());
  CHECK(big_event.error_message().find("the limit is 4096 (limits.event_max_bytes)")
        != std::string::npos);
  auto big_reason = tasks.cancel(a, std::string(8192, 'x'));
  CHECK(big_reason.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_MESSAGE(big_reason.error_message().rfind("reason is 8192 bytes", 0) == 0,
                big_reason.error_message());
  auto no_task = tasks.send("ki:never-created", "verdict", verdict(true));
  CHECK(no_task.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(no_task.error_message().find("CreateTask creates it") != std::string::npos);
  CHECK(tasks.send("not-a-task-id", "verdict", verdict(true)).error_code()
        == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(db.scalar("SELECT count(*) FROM entity_events") == events_before);
  CHECK(db.scalar("SELECT count(*) FROM entities") == entities_before);
  CHECK(db.scalar("SELECT count(*) FROM task_groups") == "2"); // ki, defaults

  // gostctl shows a task and a group's tasks.
  auto addr = "127.0.0.1:" + std::to_string(port);
  child_process show{GOSTCTL_PATH, {"--addr", addr, "task", c}};
  REQUIRE(show.wait(30s) == 0);
  CHECK(show.output().find("\"state_name\": \"rejected\"") != std::string::npos);
  CHECK(show.output().find("\"item_id\": \"offer-3\"") != std::string::npos);
  child_process list{GOSTCTL_PATH, {"--addr", addr, "tasks", "--group", "ki"}};
  REQUIRE(list.wait(30s) == 0);
  CHECK(list.output().find("ki:offer-2") != std::string::npos);
  CHECK(list.output().find("expired") != std::string::npos);
  CHECK(list.output().find("6 task(s)") != std::string::npos);

  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  std::remove(port_file.c_str());
}

TEST_CASE("tasks: gostctl describes a task's actor and traces its events (the console on "
          "actor types other than offers)") {
  testing::temp_db db;
  auto port_file = "/tmp/gost-tasks-console-" + std::to_string(getpid());
  child_process node{GOSTD_PATH, node_args(db, port_file)};
  auto port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  task_client tasks{port};
  auto addr = "127.0.0.1:" + std::to_string(port);

  REQUIRE(tasks.create_group("con").ok());
  std::string id;
  REQUIRE(tasks.create("con", "offer-9", item("offer-9"), &id).ok());
  CHECK(testing::eventually(10s, [&] { return tasks.get(id).state_name() == "waiting"; }));
  auto key = tasks.get(id).entity_key();
  CHECK(key == "task.moderation/" + id);

  // A live trace of the task's actor: each reprioritization is an event stored for the task
  // (send) and then handled (run). Sent until the trace has its 4 events (it subscribes after
  // it starts: the first ones may come before).
  child_process trace{GOSTCTL_PATH, {"--addr", addr, "trace", key, "--max", "4", "--for", "30s"}};
  int rc = -1;
  for (int i = 1; i <= 40 && rc < 0; ++i) {
    v1::ReprioritizeTaskRequest req;
    req.set_task_id(id);
    req.set_priority(i);
    v1::ReprioritizeTaskResponse resp;
    REQUIRE(
      call([&](auto* ctx, auto& r, auto* out) { return tasks.stub->Reprioritize(ctx, r, out); },
           req, resp)
        .ok());
    rc = trace.wait(300ms);
  }
  if (rc < 0)
    rc = trace.wait(10s);
  REQUIRE_MESSAGE(rc == 0, trace.output());
  CHECK(trace.output().find("tracing entity " + key) != std::string::npos);
  CHECK(trace.output().find(" send ") != std::string::npos);
  CHECK(trace.output().find(" run ") != std::string::npos);
  CHECK(trace.output().find("task.moderation/con") != std::string::npos); // the run's lane
  CHECK(trace.output().find("trace ended: 4 event(s)") != std::string::npos);

  // Describe: the task, then its actor's recent events, owner and what it waits on. The last
  // reprioritizations may still be handled (a run loading or writing): described again until
  // the actor is idle.
  std::string out;
  CHECK_MESSAGE(
    testing::eventually(30s,
                        [&] {
                          child_process show{GOSTCTL_PATH, {"--addr", addr, "task", id}};
                          if (show.wait(30s) != 0)
                            return false;
                          out = show.output();
                          return out.find("waiting on nothing") != std::string::npos;
                        }),
    out);
  CHECK(out.find("\"state_name\": \"waiting\"") != std::string::npos);
  CHECK(out.find("entity " + key) != std::string::npos);
  CHECK(out.find("resident") != std::string::npos);
  CHECK(out.find("recent events") != std::string::npos);
  CHECK_MESSAGE(out.find(" send    api ") != std::string::npos, out);
  CHECK(out.find(" run ") != std::string::npos);

  child_process entity{GOSTCTL_PATH, {"--addr", addr, "entity", "task.moderation", id}};
  REQUIRE(entity.wait(30s) == 0);
  CHECK(entity.output().find("entity " + key + "  version ") != std::string::npos);
  CHECK_MESSAGE(entity.output().find("\"item_id\":\"offer-9\"") != std::string::npos,
                entity.output()); // decoded
  CHECK(entity.output().find("recent events") != std::string::npos);

  // Bad input names what to fix.
  child_process kind{GOSTCTL_PATH, {"--addr", addr, "entity", "billing", "x"}};
  CHECK(kind.wait(30s) == 1);
  CHECK(kind.output().find("`billing` is not an entity type of this node") != std::string::npos);
  child_process bad_trace{GOSTCTL_PATH, {"--addr", addr, "trace", "billing/x", "--max", "1"}};
  CHECK(bad_trace.wait(30s) == 1);
  CHECK(bad_trace.output().find("entity_key: kind: `billing`") != std::string::npos);

  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  std::remove(port_file.c_str());
}

TEST_CASE("tasks: a consumer pulling from its cursor sees every result exactly once across "
          "kill -9 of the node under load") {
  testing::temp_db db;
  auto port_file = "/tmp/gost-tasks-kill-" + std::to_string(getpid());
  auto args = node_args(db, port_file);
  constexpr int n = 300;
  constexpr size_t per_task = 4;   // assignment #1..#3, then withdrawn
  std::map<std::string, int> seen; // "task name#issue" -> times pulled
  int64_t cursor = 0;
  auto take = [&](const std::vector<v1::PullResultsResponse::Result>& page) {
    for (auto& r : page) {
      v1::ModerationAssignment a;
      auto what = r.name();
      if (r.name() == "assignment" && r.payload().UnpackTo(&a))
        what += "#" + std::to_string(a.issue());
      ++seen[r.task_id() + " " + what];
    }
  };
  std::atomic<int> created{0};
  {
    child_process node{GOSTD_PATH, args};
    auto port = testing::served_port(node, port_file);
    REQUIRE_MESSAGE(port > 0, node.output());
    task_client tasks{port};
    REQUIRE(tasks.create_group("load").ok());
    // Tasks created one after another while their timers fire; the node dies under it.
    std::thread creator{[&] {
      task_client mine{port};
      for (int i = 0; i < n; ++i) {
        if (!mine.create("load", "t-" + std::to_string(i), item("t", 100ms, 3)).ok())
          return;
        created = i + 1;
      }
    }};
    // The consumer pulls while results are written, until it has taken some.
    CHECK(testing::eventually(30s, [&] {
      take(tasks.pull("load", cursor));
      return seen.size() >= 200;
    }));
    node.signal(SIGKILL);
    CHECK(node.wait(10s) == 128 + SIGKILL);
    creator.join();
  }
  std::remove(port_file.c_str());
  MESSAGE("killed with " << created.load() << " tasks created, " << seen.size()
                         << " results pulled");
  CHECK(created.load() < n); // the kill came under load
  child_process again{GOSTD_PATH, args};
  auto port = testing::served_port(again, port_file);
  REQUIRE_MESSAGE(port > 0, again.output());
  task_client tasks{port};
  // The client creates every task again (the same client keys: those created stay as they are).
  for (int i = 0; i < n; ++i)
    REQUIRE(tasks.create("load", "t-" + std::to_string(i), item("t", 100ms, 3)).ok());
  CHECK(testing::eventually(60s, [&] {
    take(tasks.pull("load", cursor));
    return seen.size() >= n * per_task;
  }));
  take(tasks.pull_all("load", cursor));
  CHECK(seen.size() == n * per_task);
  int repeated = 0;
  for (auto& [what, times] : seen)
    repeated += times != 1;
  CHECK(repeated == 0);
  for (int i = 0; i < n; i += 37) {
    auto id = "load:t-" + std::to_string(i);
    CHECK(seen.count(id + " assignment#1") == 1);
    CHECK(seen.count(id + " assignment#3") == 1);
    CHECK(seen.count(id + " withdrawn") == 1);
  }
  CHECK(db.scalar("SELECT count(*) FROM entity_outputs WHERE lane = 'load'")
        == std::to_string(n * per_task));
  again.signal(SIGTERM);
  CHECK(again.wait(30s) == 0);
  std::remove(port_file.c_str());
}

TEST_CASE("tasks: one group's backlog does not delay another group's events") {
  testing::temp_db db;
  auto port_file = "/tmp/gost-tasks-iso-" + std::to_string(getpid());
  auto args = node_args(db, port_file);
  child_process node{GOSTD_PATH, args};
  auto port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  task_client tasks{port};
  REQUIRE(tasks.create_group("busy").ok());
  REQUIRE(tasks.create_group("idle").ok());
  // A backlog of 100,000 tasks of group busy, each with its Init due now, stored as CreateTask
  // would store them (rows in their shards, in the group's lane).
  constexpr int backlog = 100'000;
  v1::TaskEvent init;
  init.mutable_init()->set_group("busy");
  init.mutable_init()->mutable_input()->PackFrom(item("b"));
  init.mutable_init()->set_retry_delay_ms(1000);
  init.mutable_init()->set_max_attempts(3);
  google::protobuf::Any packed;
  packed.PackFrom(init);
  std::string hex;
  for (unsigned char ch : packed.SerializeAsString()) {
    static const char* digits = "0123456789abcdef";
    hex += digits[ch >> 4];
    hex += digits[ch & 15];
  }
  for (int from = 0; from < backlog; from += 10'000) {
    std::string rows;
    for (int i = from; i < from + 10'000; ++i) {
      auto id = "busy:b-" + std::to_string(i);
      rows += (rows.empty() ? "" : ",") + std::string{"('"} + id + "',"
              + std::to_string(shard_of("task.moderation/" + id, 8)) + ")";
    }
    db.scalar("WITH r(id, shard) AS (VALUES " + rows
              + "), e AS (INSERT INTO entity_events (kind, entity_id, due_at_us, payload)"
                " SELECT 'task.moderation', id, (extract(epoch from now()) * 1e6)::bigint,"
                " decode('"
              + hex
              + "', 'hex') FROM r) INSERT INTO entities (kind, entity_id, shard, lane, due_at_us)"
                " SELECT 'task.moderation', id, shard, 'busy',"
                " (extract(epoch from now()) * 1e6)::bigint FROM r");
  }
  auto busy_pending = [&] {
    return std::stoll(db.scalar("SELECT count(*) FROM entity_events e JOIN entities t"
                                " USING (kind, entity_id) WHERE t.lane = 'busy'"
                                " AND e.due_at_us < (extract(epoch from now()) * 1e6 + 1e6)"));
  };
  // The node is working through the backlog.
  CHECK(testing::eventually(30s, [&] { return busy_pending() < backlog; }));
  // Tasks of the idle group meanwhile: each Init handled about as soon as it is stored.
  std::vector<double> latency_ms;
  for (int i = 0; i < 20; ++i) {
    std::string id;
    auto t0 = std::chrono::steady_clock::now();
    REQUIRE(tasks.create("idle", "i-" + std::to_string(i), item("i"), &id).ok());
    REQUIRE(testing::eventually(10s, [&] { return tasks.get(id).state_name() == "waiting"; }));
    latency_ms.push_back(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  auto left = busy_pending();
  std::sort(latency_ms.begin(), latency_ms.end());
  MESSAGE("idle group: create-to-handled max " << latency_ms.back() << " ms, median "
                                               << latency_ms[10] << " ms; busy backlog left "
                                               << left);
  CHECK(left > 0);                 // the backlog was still there while the idle group was served
  CHECK(latency_ms.back() < 2000); // the backlog itself takes tens of seconds
  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  std::remove(port_file.c_str());
}

TEST_CASE("tasks over two shard groups: a verdict passed to a task of the other group survives "
          "kill -9, results pulled by token exactly once, ListTasks merged (ADR 0023)") {
  testing::temp_db db;   // the catalog, and group 0: shards 0-3
  testing::temp_db east; // group 1: shards 4-7
  auto port_file = "/tmp/gost-tasks-groups-" + std::to_string(getpid());
  auto args = node_args(db, port_file);
  make_catalog(args, port_file);
  db.scalar("INSERT INTO shard_groups (id, name, dsn) VALUES (1, 'east', '" + east.dsn() + "')");
  db.scalar("INSERT INTO shard_ranges (first_shard, last_shard, group_id) VALUES (0, 3, 0),"
            " (4, 7, 1)");
  auto group_of = [](const std::string& task_id) {
    return shard_of("task.moderation/" + task_id, 8) < 4 ? 0 : 1;
  };
  // Pairs: a task and its duplicate, in the other group.
  constexpr int pairs = 20;
  auto tasks_of = pairs_across(pairs, group_of); // (original, duplicate)
  // A task of east whose verdict will wait in the catalog group's entity_forwards when the node
  // dies (committed there, not relayed yet).
  std::string extra = "x:e-0";
  for (int k = 1; group_of(extra) != 1; ++k)
    extra = "x:e-" + std::to_string(k);

  {
    child_process node{GOSTD_PATH, args};
    auto port = testing::served_port(node, port_file);
    REQUIRE_MESSAGE(port > 0, node.output());
    task_client tasks{port};
    create_pairs(tasks, tasks_of);
    REQUIRE(tasks.create("x", extra.substr(2), item(extra)).ok());
    // Each task's rows are in its own group's database only (one of each pair in each).
    for (auto& [o, d] : tasks_of) {
      auto& home = group_of(o) == 0 ? db : east;
      CHECK(home.scalar("SELECT count(*) FROM entities WHERE entity_id = '" + o + "'") == "1");
    }
    CHECK(db.scalar("SELECT count(*) FROM entities WHERE kind = 'task.moderation'")
          == std::to_string(pairs));
    CHECK(east.scalar("SELECT count(*) FROM entities WHERE kind = 'task.moderation'")
          == std::to_string(pairs + 1));
    // The verdicts go to the duplicates; the node dies right after they are accepted.
    for (auto& [o, d] : tasks_of)
      REQUIRE(tasks.send(d, "verdict", verdict(false), "v-" + d).ok());
    node.signal(SIGKILL);
    CHECK(node.wait(10s) == 128 + SIGKILL);
  }
  std::remove(port_file.c_str());
  // An event a task of group 0 sent to `extra`, committed with its sender's write in group 0's
  // database when the node died, not relayed yet (as the writer keeps it: ADR 0023).
  auto forward_of = [&](const std::string& to, const std::string& request_id) {
    v1::TaskEvent e;
    e.mutable_custom()->set_name("verdict");
    e.mutable_custom()->mutable_payload()->PackFrom(verdict(false));
    e.mutable_custom()->set_from("task.moderation/x:sender");
    google::protobuf::Any packed;
    packed.PackFrom(e);
    std::string hex;
    for (unsigned char c : packed.SerializeAsString()) {
      const char* digits = "0123456789abcdef";
      hex += digits[c >> 4];
      hex += digits[c & 15];
    }
    db.scalar("INSERT INTO entity_forwards (request_id, shard, kind, entity_id, due_at_us, payload)"
              " VALUES ('"
              + request_id + "', 0, 'task.moderation', '" + to + "', 0, decode('" + hex
              + "', 'hex'))");
  };
  forward_of(extra, "gost.forward/e2e-1");
  child_process again{GOSTD_PATH, args};
  auto port = testing::served_port(again, port_file);
  REQUIRE_MESSAGE(port > 0, again.output());
  task_client tasks{port};
  // Every original got its duplicate's verdict, across the groups.
  check_originals_rejected(tasks, tasks_of);
  CHECK(testing::eventually(30s, [&] { return tasks.get(extra).state_name() == "rejected"; }));
  // Every kept event relayed (the delete follows the target's answer).
  CHECK(testing::eventually(30s, [&] {
    return db.scalar("SELECT count(*) FROM entity_forwards") == "0"
           && east.scalar("SELECT count(*) FROM entity_forwards") == "0";
  }));
  // Relayed again (delivered, then the node died before its delete): the target stores it
  // once, by its request id, so `extra` handles nothing more.
  auto version = tasks.get(extra).version();
  auto pending_sql = "SELECT count(*) FROM entity_events WHERE entity_id = '" + extra + "'";
  auto pending = east.scalar(pending_sql);
  forward_of(extra, "gost.forward/e2e-1");
  CHECK(testing::eventually(
    30s, [&] { return db.scalar("SELECT count(*) FROM entity_forwards") == "0"; }));
  CHECK(east.scalar("SELECT count(*) FROM entity_requests WHERE request_id = "
                    "'gost.forward/e2e-1'")
        == "1");
  CHECK(east.scalar(pending_sql) == pending);
  CHECK(tasks.get(extra).version() == version);

  // Results by token, in small pages: each exactly once, from both databases.
  std::map<std::string, int> seen;
  std::string token;
  for (int page = 0; page < 1000; ++page) {
    auto rows = tasks.pull_token("x", token, 7);
    if (rows.empty())
      break;
    for (auto& r : rows)
      ++seen[r.task_id() + " " + r.name() + " " + std::to_string(r.seq())];
  }
  auto stored = std::stoi(db.scalar("SELECT count(*) FROM entity_outputs WHERE lane = 'x'"))
                + std::stoi(east.scalar("SELECT count(*) FROM entity_outputs WHERE lane = 'x'"));
  CHECK(static_cast<int>(seen.size()) == stored);
  int repeated = 0;
  for (auto& [what, times] : seen)
    repeated += times != 1;
  CHECK(repeated == 0);
  CHECK(token.find("0:") == 0);
  CHECK(token.find(",1:") != std::string::npos);
  // An int64 cursor is a position in one database: refused with two, saying what to pass.
  {
    int64_t cursor = 3;
    grpc::Status st;
    tasks.pull("x", cursor, &st);
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().find("after_token") != std::string::npos);
  }
  // ListTasks: every task once, by id in byte order, across the groups' databases.
  std::vector<std::string> listed;
  std::string after;
  for (int page = 0; page < 100; ++page) {
    v1::ListTasksRequest req;
    req.set_group_id("x");
    req.set_after_id(after);
    req.set_limit(6);
    v1::ListTasksResponse resp;
    auto s = call([&](auto* ctx, auto& r, auto* out) { return tasks.stub->ListTasks(ctx, r, out); },
                  req, resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    if (resp.tasks().empty())
      break;
    for (auto& t : resp.tasks())
      listed.push_back(t.task_id());
    after = listed.back();
  }
  CHECK(listed.size() == 2 * pairs + 1);
  CHECK(std::is_sorted(listed.begin(), listed.end()));
  CHECK(std::set<std::string>(listed.begin(), listed.end()).size() == listed.size());
  again.signal(SIGTERM);
  CHECK(again.wait(30s) == 0);
  std::remove(port_file.c_str());
}

TEST_CASE("tasks over a split shard group: gostctl move-shards moves a part of a group (shards "
          "4-7 of 0-7) to another database while verdicts pass between the halves and scheduled "
          "actions fire at tasks; each verdict is handled once, results pulled by token exactly "
          "once across the split, each action fires on from its home's side (ADR 0023)") {
  testing::temp_db db;   // the catalog, and group 0: every shard at first
  testing::temp_db west; // group 1, declared, empty
  auto port_file = "/tmp/gost-tasks-split-" + std::to_string(getpid());
  auto args = node_args(db, port_file);
  args.push_back("--scheduled.poll=50ms");
  make_catalog(args, port_file);
  db.scalar("INSERT INTO shard_groups (id, name, dsn) VALUES (1, 'west', '" + west.dsn() + "')");
  auto half_of = [](const std::string& task_id) {
    return shard_of("task.moderation/" + task_id, 8) < 4 ? 0 : 1;
  };
  // Pairs: a task and its duplicate in the other half, both ways.
  constexpr int pairs = 24;
  auto tasks_of = pairs_across(pairs, half_of); // (original, duplicate)

  child_process node{GOSTD_PATH, args};
  auto port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  task_client tasks{port};
  create_pairs(tasks, tasks_of);
  // Scheduled actions sending a `tick` to tasks of their own every 300 ms (a moderation task
  // refuses it: a dead letter each, the action's attempt a success once the event is stored).
  // Their queue rows are on shards drawn over the group: about half on the other side of the
  // cut than their action.
  for (int i = 0; i < 4; ++i)
    REQUIRE(tasks.create("x", "z-" + std::to_string(i), item("x:z-" + std::to_string(i))).ok());
  auto scheduled = v1::ScheduledActionService::NewStub(
    grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  std::vector<std::string> actions;
  for (int i = 0; i < 16; ++i) {
    v1::CreateScheduledActionRequest req;
    req.set_id("sa-" + std::to_string(i));
    auto& spec = *req.mutable_spec();
    spec.set_start_at_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
    spec.set_interval_ms(300);
    spec.mutable_event()->mutable_task_event()->set_task_id("x:z-" + std::to_string(i % 4));
    spec.mutable_event()->mutable_task_event()->set_name("tick");
    v1::CreateScheduledActionResponse resp;
    auto st = call([&](auto* ctx, auto& r, auto* out) { return scheduled->Create(ctx, r, out); },
                   req, resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    actions.push_back(req.id());
  }
  std::map<std::string, int64_t> none;
  for (auto& id : actions)
    none[id] = 0;
  REQUIRE(testing::fire_twice_more(*scheduled, none));
  // The assignments so far, by token: one database holds them all.
  std::map<std::string, int> seen;
  std::string token;
  auto pull = [&] {
    for (int page = 0; page < 1000; ++page) {
      auto rows = tasks.pull_token("x", token, 7);
      if (rows.empty())
        return;
      for (auto& r : rows)
        ++seen[r.task_id() + " " + r.name() + " " + std::to_string(r.seq())];
    }
  };
  pull();
  CHECK(seen.size() == 2 * pairs + 4); // an assignment each, the tick targets' too

  // The verdicts go to the duplicates while the part moves; each is sent again with its
  // request id while the node answers UNAVAILABLE (the fence) or does not know the outcome.
  std::atomic<int> sent{0};
  std::vector<std::string> failures;
  std::thread verdicts{[&] {
    for (auto& [o, d] : tasks_of) {
      grpc::Status s;
      for (int attempt = 0; attempt < 300; ++attempt) {
        s = tasks.send(d, "verdict", verdict(false), "v-" + d);
        if (s.ok()
            || (s.error_code() != grpc::StatusCode::UNAVAILABLE
                && s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED))
          break;
        std::this_thread::sleep_for(100ms);
      }
      if (!s.ok())
        failures.push_back(d + ": " + std::to_string(s.error_code()) + " " + s.error_message());
      ++sent;
      std::this_thread::sleep_for(20ms);
    }
  }};
  CHECK(testing::eventually(30s, [&] { return sent.load() >= 2; })); // some before the move
  child_process ctl{GOSTCTL_PATH,
                    {"--addr", "127.0.0.1:" + std::to_string(port), "--who", "e2e", "move-shards",
                     "4-7", "--to", "west"}};
  auto rc = ctl.wait(120s);
  verdicts.join();
  REQUIRE_MESSAGE(rc == 0, ctl.output());
  MESSAGE(ctl.output());
  CHECK_MESSAGE(ctl.output().find("done: shards 4-7 moved from `main` to `west`")
                  != std::string::npos,
                ctl.output());
  CHECK_MESSAGE(failures.empty(), failures.front());

  // Every original got its duplicate's verdict, across the halves now in two databases.
  check_originals_rejected(tasks, tasks_of);
  // Each task's rows are in its half's database only; nothing left to relay or copy.
  CHECK(db.scalar("SELECT count(*) FROM entities WHERE kind = 'task.moderation' AND shard >= 4")
        == "0");
  CHECK(west.scalar("SELECT count(*) FROM entities WHERE kind = 'task.moderation' AND shard < 4")
        == "0");
  CHECK(std::stoi(west.scalar("SELECT count(*) FROM entities WHERE kind = 'task.moderation'"
                              " AND entity_id NOT LIKE 'x:z-%'"))
        == pairs);
  CHECK(db.scalar("SELECT count(*) FROM entity_events WHERE gost_shard_of(kind || '/' ||"
                  " entity_id, 8) >= 4")
        == "0");
  CHECK(testing::eventually(30s, [&] {
    return db.scalar("SELECT count(*) FROM entity_forwards") == "0"
           && west.scalar("SELECT count(*) FROM entity_forwards") == "0";
  }));
  CHECK(db.scalar("SELECT count(*) FROM move_changes") == "0");
  // Each action is in its home's database with exactly one queue row of its current guid
  // there (those drawn on the other side were given new ones at the fence), and fires on.
  CHECK_MESSAGE(ctl.output().find("given queue rows on their home shards") != std::string::npos,
                ctl.output());
  CHECK(testing::scheduled_invariant_broken(db) == "");
  CHECK(testing::scheduled_invariant_broken(west) == "");
  for (auto& id : actions) {
    bool moved = shard_of(id, 8) >= 4;
    auto q = "SELECT count(*) FROM scheduled_actions WHERE action_id = '" + id + "'";
    CHECK_MESSAGE(db.scalar(q) == (moved ? "0" : "1"), id);
    CHECK_MESSAGE(west.scalar(q) == (moved ? "1" : "0"), id);
  }
  CHECK_MESSAGE(testing::fire_twice_more(*scheduled, testing::successes_of(*scheduled, actions)),
                "the actions did not all fire twice more after the split");
  // Each verdict handled once: an original has one, a duplicate one verdict result each.
  pull();
  auto stored = std::stoi(db.scalar("SELECT count(*) FROM entity_outputs WHERE lane = 'x'"))
                + std::stoi(west.scalar("SELECT count(*) FROM entity_outputs WHERE lane = 'x'"));
  CHECK(static_cast<int>(seen.size()) == stored);
  int repeated = 0;
  std::map<std::string, std::multiset<std::string>> names; // by task
  for (auto& [what, times] : seen) {
    repeated += times != 1;
    auto task = what.substr(0, what.find(' '));
    auto rest = what.substr(task.size() + 1);
    names[task].insert(rest.substr(0, rest.find(' ')));
  }
  CHECK(repeated == 0);
  CHECK(token.find(",1:") != std::string::npos); // west's outputs, after the split
  // Every pair ended alike, wherever its halves were when the verdict passed.
  auto& first = tasks_of.front();
  std::string shown;
  for (auto& n : names[first.first])
    shown += " " + n;
  shown += " /";
  for (auto& n : names[first.second])
    shown += " " + n;
  MESSAGE("an original's and its duplicate's results:" << shown);
  for (auto& [o, d] : tasks_of) {
    CHECK_MESSAGE(names[o] == names[first.first], o);
    CHECK_MESSAGE(names[d] == names[first.second], d);
  }
  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  std::remove(port_file.c_str());
}
