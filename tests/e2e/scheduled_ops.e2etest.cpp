// Scheduled actions (seed 001) operated on real gostd processes and the real PostgreSQL, with a
// local HTTP endpoint recording every request's Idempotency-Key:
// - the console: an endpoint failing twice then succeeding (counters exact, the attempt log
//   shows failed, failed, ok), pause / resume / run-now through gostctl, logged with who asked;
// - kill -9 of a node firing many actions: after a restart every action fires again, the
//   interrupted attempts are counted, the counters agree with the requests the endpoint saw,
//   and the seed's invariant holds (checked in SQL) before and after;
// - two nodes: the actions of a killed node's shards fire on the survivor after the lease
//   timeout; a SIGSTOPped node whose leases moved fires nothing stale after SIGCONT (fencing).
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "gost/testing/http_server.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/testing/scheduled.hpp"
#include "gost/v1/scheduled_actions.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

/// A gostd process on `db` with its ScheduledActionService stub.
struct gostd {
  std::string id;
  std::string port_file;
  std::string addr;
  std::unique_ptr<child_process> proc;
  std::unique_ptr<v1::ScheduledActionService::Stub> api;

  gostd(const std::string& node_id, const testing::temp_db& db, int shards) {
    port_file = "/tmp/gost-sched-ops-" + node_id + "-" + std::to_string(getpid());
    std::remove(port_file.c_str());
    proc = std::make_unique<child_process>(
      GOSTD_PATH, std::vector<std::string>{
                    "--pg.dsn=" + db.dsn(), "--node.id=" + node_id, "--grpc.listen=127.0.0.1:0",
                    "--grpc.port_file=" + port_file, "--caf.listen=127.0.0.1:0",
                    "--shard.count=" + std::to_string(shards), "--cluster.heartbeat=200ms",
                    "--cluster.lease_timeout=2s", "--outbox.relay=false", "--scheduled.poll=20ms",
                    "--scheduled.allow_private_targets=true"});
    auto port = testing::served_port(*proc, port_file);
    REQUIRE_MESSAGE(port > 0, proc->output());
    addr = "127.0.0.1:" + std::to_string(port);
    api = v1::ScheduledActionService::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
    id = node_id;
  }
  ~gostd() { std::remove(port_file.c_str()); }

  grpc::Status create(const std::string& action_id, const v1::ScheduledActionSpec& spec) {
    v1::CreateScheduledActionRequest req;
    req.set_id(action_id);
    *req.mutable_spec() = spec;
    v1::CreateScheduledActionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    return api->Create(&ctx, req, &resp);
  }

  v1::GetScheduledActionResponse get(const std::string& action_id) {
    v1::GetScheduledActionRequest req;
    req.set_id(action_id);
    v1::GetScheduledActionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = api->Get(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp;
  }

  /// gostctl against this node; its output (exit code checked).
  std::string ctl(std::vector<std::string> args, int want_exit = 0) {
    args.insert(args.begin(), {"--addr", addr, "--who", "ops-test"});
    child_process c{GOSTCTL_PATH, args};
    auto rc = c.wait(30s);
    CHECK_MESSAGE(rc == want_exit, c.output());
    return c.output();
  }
};

v1::ScheduledActionSpec every(const std::string& url, int64_t start_ms, int64_t interval_ms) {
  v1::ScheduledActionSpec s;
  s.set_start_at_ms(start_ms);
  s.set_interval_ms(interval_ms);
  s.mutable_http()->set_url(url);
  s.mutable_retry()->set_backoff_ms(100);
  return s;
}

std::string invariant_broken(const testing::temp_db& db) {
  return testing::scheduled_invariant_broken(db);
}

std::pair<std::string, int64_t> split_key(const std::string& key) {
  return testing::split_occurrence_key(key);
}

/// Requests by action id, counting only those that arrived at or after `since_ms`.
std::map<std::string, int> requests_by_action(const testing::http_server& hook, int64_t since_ms) {
  auto keys = hook.keys();
  auto arrivals = hook.arrivals();
  std::map<std::string, int> out;
  for (size_t i = 0; i < std::min(keys.size(), arrivals.size()); ++i)
    if (arrivals[i] >= since_ms && !keys[i].empty())
      ++out[split_key(keys[i]).first];
  return out;
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

/// The shard of `action_id`'s queue row ("" when it has none).
std::string shard_of_action(const testing::temp_db& db, const std::string& action_id) {
  return db.scalar("SELECT coalesce((SELECT shard::text FROM scheduled_processing WHERE action_id"
                   " = '"
                   + action_id
                   + "' LIMIT 1), (SELECT shard::text FROM scheduled_incoming"
                     " WHERE action_id = '"
                   + action_id + "' LIMIT 1), '')");
}

/// A marker: an action on `endpoint` due at `due_ms` in the shard of `beside` (ids tried until
/// one lands there), so that its request proves the worker of that shard went past `due_ms`:
/// a worker fires its shard's due rows one after the other, oldest first. Returns its id.
std::string marker_beside(gostd& node, const testing::temp_db& db, const std::string& beside,
                          const testing::http_server& endpoint, int64_t due_ms) {
  auto shard = shard_of_action(db, beside);
  REQUIRE(!shard.empty());
  static int next = 0;
  for (int tries = 0; tries < 64; ++tries) {
    auto id = "marker-" + std::to_string(++next);
    REQUIRE(node.create(id, every(endpoint.url(), due_ms, 3'600'000)).ok());
    if (shard_of_action(db, id) == shard)
      return id;
  }
  FAIL("no marker landed in shard " << shard);
  return {};
}

/// Whether `endpoint` got a request of action `id`.
bool fired(const testing::http_server& endpoint, const std::string& id) {
  for (auto& k : endpoint.keys())
    if (!k.empty() && split_key(k).first == id)
      return true;
  return false;
}

/// Every shard held by `node` (and by no other live node).
bool all_shards_of(const testing::temp_db& db, const std::string& node, int shards) {
  return db.scalar("SELECT count(*) FROM shard_leases WHERE owner = '" + node
                   + "' AND heartbeat_at > now() - interval '2 s'")
         == std::to_string(shards);
}

} // namespace

TEST_CASE("scheduled actions: the attempt log, and pause / resume / run-now from gostctl") {
  testing::temp_db db;
  gostd n1{"ops1", db, 4};
  // Failing twice, then succeeding: counters exact, one key, the attempt log in order.
  testing::http_server flaky{{503, 503, 200}};
  auto at = now_ms() + 300;
  auto spec = every(flaky.url(), at, 3'600'000);
  REQUIRE(n1.create("flaky-1", spec).ok());
  REQUIRE(
    testing::eventually(20s, [&] { return n1.get("flaky-1").action().status().successes() == 1; }));
  auto got = n1.get("flaky-1");
  auto& st = got.action().status();
  CHECK(st.total_failures() == 2);
  CHECK(st.failures_in_row() == 0);
  CHECK(st.gave_up() == 0);
  CHECK(st.scheduled_at_ms() == at + 3'600'000); // the next period
  CHECK(flaky.keys() == std::vector<std::string>(3, "flaky-1/" + std::to_string(at)));
  REQUIRE(got.attempts_size() == 3);
  CHECK(got.attempts(0).outcome() == "ok");
  CHECK(got.attempts(0).attempt() == 3);
  CHECK(got.attempts(1).outcome() == "failed");
  CHECK(got.attempts(1).error() == "HTTP 503");
  CHECK(got.attempts(2).outcome() == "failed");
  CHECK(got.attempts(2).attempt() == 1);
  for (auto& a : got.attempts()) {
    CHECK(a.node() == "ops1");
    CHECK(a.occurrence_ms() == at);
    CHECK(a.duration_ms() >= 0);
  }
  auto shown = n1.ctl({"action", "flaky-1"});
  CHECK(shown.find("\"attempts\"") != std::string::npos);
  CHECK(shown.find("\"outcome\": \"failed\"") != std::string::npos);

  // Pause: nothing fires until resumed; the verb is logged with who asked.
  testing::http_server tick{{200}};
  REQUIRE(n1.create("tick-1", every(tick.url(), now_ms(), 200)).ok());
  REQUIRE(testing::eventually(10s, [&] { return tick.requests() >= 2; }));
  auto guid = n1.get("tick-1").action().meta().guid();
  CHECK(n1.ctl({"action", "pause", "tick-1"}).find("tick-1 paused") != std::string::npos);
  CHECK(testing::eventually(5s, [&] {
    return n1.proc->output().find("scheduled action paused id=tick-1 changed=true")
           != std::string::npos;
  }));
  CHECK(n1.proc->output().find("by=ops-test") != std::string::npos);
  auto paused = n1.get("tick-1");
  CHECK(paused.action().status().paused());
  CHECK(paused.action().meta().guid() != guid);
  CHECK(paused.action().status().paused_by().rfind("ops-test", 0) == 0);
  CHECK(n1.ctl({"action", "pause", "tick-1"}).find("nothing changed") != std::string::npos);
  CHECK(n1.ctl({"actions", "--paused"}).find("1 action(s)") != std::string::npos);
  // A request in flight at the pause may still land; none after that. Two markers in tick-1's
  // shard: once the first fired, the worker is past whatever it had begun at the pause; once
  // the second, due five of tick-1's periods later, fired, those occurrences passed unfired.
  testing::http_server marks{{200}};
  auto mark_at = now_ms();
  auto settled = marker_beside(n1, db, "tick-1", marks, mark_at);
  auto later_mark = marker_beside(n1, db, "tick-1", marks, mark_at + 1000);
  REQUIRE(testing::eventually(10s, [&] { return fired(marks, settled); }));
  auto quiet_from = tick.requests();
  REQUIRE(testing::eventually(10s, [&] { return fired(marks, later_mark); }));
  CHECK(tick.requests() == quiet_from);
  CHECK(invariant_broken(db).empty());
  n1.ctl({"action", "run-now", "tick-1"}, 1); // refused while paused
  // Resume: it fires again.
  CHECK(n1.ctl({"action", "resume", "tick-1"}).find("tick-1 resumed") != std::string::npos);
  CHECK(testing::eventually(10s, [&] { return tick.requests() >= quiet_from + 2; }));
  CHECK(n1.ctl({"actions", "--paused"}).find("0 action(s)") != std::string::npos);

  // Run-now: one request now, with a key of its own; the schedule stays.
  testing::http_server hourly{{200}};
  auto later = now_ms() + 3'600'000;
  REQUIRE(n1.create("hourly-1", every(hourly.url(), later, 3'600'000)).ok());
  auto asked = now_ms();
  CHECK(n1.ctl({"action", "run-now", "hourly-1"}).find("hourly-1 runs now") != std::string::npos);
  REQUIRE(testing::eventually(10s, [&] { return hourly.requests() == 1; }));
  auto [id, occurrence] = split_key(hourly.keys().at(0));
  CHECK(id == "hourly-1");
  CHECK(occurrence >= asked);
  REQUIRE(
    testing::eventually(5s, [&] { return n1.get("hourly-1").action().status().successes() == 1; }));
  auto h = n1.get("hourly-1");
  CHECK(h.action().status().scheduled_at_ms() == later);
  CHECK(h.action().status().run_now_at_ms() == 0);
  REQUIRE(h.attempts_size() == 1);
  CHECK(h.attempts(0).run_now());
  CHECK(h.queue_due_at_ms() == later);
  // Once a marker due after the run-now fired in its shard, a second run would have too.
  auto after_run = marker_beside(n1, db, "hourly-1", marks, now_ms() + 200);
  REQUIRE(testing::eventually(10s, [&] { return fired(marks, after_run); }));
  CHECK(hourly.requests() == 1);
  CHECK(invariant_broken(db).empty());
}

TEST_CASE("kill -9 of a node firing many actions: after a restart every action fires, the "
          "counters agree with the requests, the invariant holds") {
  testing::temp_db db;
  constexpr int n = 120;
  // A slow endpoint (30 ms an answer): every worker is mid-attempt most of the time.
  testing::http_server hook{[](const testing::http_server::call&) {
    std::this_thread::sleep_for(30ms);
    return testing::http_server::reply{200, {}};
  }};
  {
    gostd node{"crash1", db, 8};
    auto start = now_ms() + 200;
    for (int i = 0; i < n; ++i)
      REQUIRE(node.create("load-" + std::to_string(i), every(hook.url(), start + i, 400)).ok());
    REQUIRE(testing::eventually(20s, [&] { return requests_by_action(hook, 0).size() == n; }));
    // The kill falls in the steady load: every action fired twice, the workers mid-attempt.
    REQUIRE(testing::eventually(20s, [&] {
      auto r = requests_by_action(hook, 0);
      return std::all_of(r.begin(), r.end(), [](auto& x) { return x.second >= 2; });
    }));
    node.proc->signal(SIGKILL);
    CHECK(node.proc->wait(10s) == 128 + SIGKILL);
  }
  // Dead node: the invariant holds in what it left behind.
  CHECK(invariant_broken(db).empty());
  auto restarted = now_ms();
  gostd again{"crash1", db, 8};
  // Every action fires again after the restart.
  CHECK(testing::eventually(30s, [&] {
    auto r = requests_by_action(hook, restarted);
    return r.size() == n;
  }));
  CHECK(invariant_broken(db).empty());
  // Stop it cleanly and compare the counters with what the endpoint saw.
  again.proc->signal(SIGTERM);
  CHECK(again.proc->wait(30s) == 0);
  CHECK(invariant_broken(db).empty());
  auto seen = requests_by_action(hook, 0);
  int64_t interrupted = 0;
  for (int i = 0; i < n; ++i) {
    auto id = "load-" + std::to_string(i);
    v1::ScheduledActionStatus st;
    REQUIRE(st.ParseFromString(unhex(db.scalar(
      "SELECT encode(status, 'hex') FROM scheduled_actions WHERE action_id = '" + id + "'"))));
    interrupted += st.interrupted();
    // The endpoint answers 200 to every request: a failure is an interrupted attempt only.
    CHECK_MESSAGE(st.total_failures() == st.interrupted(), id);
    // Every success was a request seen; every request seen was counted (a success, an
    // interrupted attempt, or the one still in flight at the stop).
    CHECK_MESSAGE(seen[id] >= st.successes(), id);
    CHECK_MESSAGE(seen[id] <= st.successes() + st.interrupted() + (st.in_flight() ? 1 : 0), id);
  }
  MESSAGE("attempts interrupted by the kill: " << interrupted);
  CHECK(interrupted >= 1);
  CHECK(db.scalar("SELECT count(*) FROM scheduled_attempts WHERE outcome = 'interrupted'")
        == std::to_string(interrupted));
}

TEST_CASE("two nodes: a killed node's actions fire on the survivor; a paused node whose leases "
          "moved fires nothing stale after SIGCONT") {
  testing::temp_db db;
  constexpr int shards = 8;
  constexpr int n = 40;
  // A slow endpoint (150 ms an answer) and every action due at the same instants: a worker
  // fires its shard's actions one after the other, so most of the time it is inside a call
  // with more due rows to go — where a stopped node's worker is when it wakes.
  testing::http_server hook{[](const testing::http_server::call&) {
    std::this_thread::sleep_for(150ms);
    return testing::http_server::reply{200, {}};
  }};
  gostd n1{"sa1", db, shards};
  gostd n2{"sa2", db, shards};
  REQUIRE(testing::eventually(30s, [&] {
    return db.scalar("SELECT count(DISTINCT owner) FROM shard_leases WHERE owner IS NOT NULL")
           == "2";
  }));
  auto start = now_ms() + 300;
  for (int i = 0; i < n; ++i)
    REQUIRE(n1.create("pair-" + std::to_string(i), every(hook.url(), start, 1000)).ok());
  REQUIRE(testing::eventually(20s, [&] { return requests_by_action(hook, 0).size() == n; }));

  SUBCASE("kill -9: the survivor fires the actions of the dead node's shards") {
    // The actions whose live queue row is in a shard n2 holds.
    auto on_n2 = db.scalar(
      "SELECT count(*) FROM scheduled_processing p JOIN scheduled_actions a ON a.action_id ="
      " p.action_id AND a.action_guid = p.action_guid WHERE p.shard IN (SELECT shard FROM"
      " shard_leases WHERE owner = 'sa2')");
    MESSAGE("actions on n2's shards: " << on_n2);
    CHECK(std::stoi(on_n2) > 0);
    n2.proc->signal(SIGKILL);
    CHECK(n2.proc->wait(10s) == 128 + SIGKILL);
    auto killed = now_ms();
    REQUIRE_MESSAGE(testing::eventually(20s, [&] { return all_shards_of(db, "sa1", shards); }),
                    n1.proc->output());
    auto taken = now_ms();
    MESSAGE("n1 held every shard " << taken - killed << " ms after the kill");
    // Every action fires after the takeover, recorded by the survivor.
    CHECK(testing::eventually(20s, [&] { return requests_by_action(hook, taken).size() == n; }));
    CHECK(testing::eventually(10s, [&] {
      for (int i = 0; i < n; ++i) {
        auto a = n1.get("pair-" + std::to_string(i));
        if (a.attempts_size() == 0 || a.attempts(0).node() != "sa1"
            || a.attempts(0).at_ms() < taken)
          return false;
      }
      return true;
    }));
    CHECK(invariant_broken(db).empty());
  }

  SUBCASE("SIGSTOP until the leases move, then SIGCONT: nothing fired under the old leases") {
    // The epochs n2 holds as it is stopped.
    std::map<int, int64_t> held;
    {
      auto text = db.scalar("SELECT coalesce(string_agg(shard || ':' || epoch, ' '), '') FROM"
                            " shard_leases WHERE owner = 'sa2'");
      std::istringstream in{text};
      std::string item;
      while (in >> item)
        held[std::stoi(item.substr(0, item.find(':')))] =
          std::stoll(item.substr(item.find(':') + 1));
    }
    REQUIRE(!held.empty());
    n2.proc->signal(SIGSTOP);
    auto stopped = now_ms();
    REQUIRE_MESSAGE(testing::eventually(20s, [&] { return all_shards_of(db, "sa1", shards); }),
                    n1.proc->output());
    auto taken = now_ms();
    // n1 catches up: every action fires an occurrence after the takeover before n2 wakes, so
    // after SIGCONT a request for an occurrence from before the stop can only come from n2.
    REQUIRE(testing::eventually(20s, [&] {
      auto keys = hook.keys();
      std::set<std::string> fresh;
      for (auto& k : keys)
        if (split_key(k).second >= taken)
          fresh.insert(split_key(k).first);
      return fresh.size() == n;
    }));
    auto cont = now_ms();
    auto before = hook.keys().size();
    n2.proc->signal(SIGCONT);
    // n2 notices that its leases were taken and stops those shards' workers.
    CHECK_MESSAGE(
      testing::eventually(
        20s, [&] { return n2.proc->output().find("lease taken over") != std::string::npos; }),
      n2.proc->output());
    // Whatever n2 could still send, it has sent once it exited: a graceful stop lets its workers
    // finish what they had begun. A node that lost its leases may not exit on SIGTERM (a known
    // defect, docs/operations.md "Network faults"): reported, then killed after 30 s.
    n2.proc->signal(SIGTERM);
    if (n2.proc->wait(30s) == -1) {
      WARN_MESSAGE(false, "sa2 did not exit within 30 s of SIGTERM (known defect)");
      n2.proc->signal(SIGKILL);
      REQUIRE(n2.proc->wait(10s) != -1);
    }
    auto keys = hook.keys();
    int stale = 0;
    for (size_t i = before; i < keys.size(); ++i)
      if (split_key(keys[i]).second < stopped)
        ++stale;
    // At most the one attempt each of n2's workers had begun before it was stopped (it acts
    // once it wakes, before its next fenced step): at least once, never more.
    MESSAGE("requests for occurrences from before the stop, after SIGCONT: " << stale);
    CHECK(stale <= static_cast<int>(held.size()));
    // No attempt recorded by n2 under the epochs it held when stopped, after the takeover.
    auto fenced_writes =
      db.scalar("SELECT count(*) FROM scheduled_attempts WHERE node = 'sa2' AND at_ms >= "
                + std::to_string(taken) + " AND (shard, epoch) IN (" +
                [&] {
                  std::string v;
                  for (auto& [shard, epoch] : held)
                    v += (v.empty() ? "" : ", ") + std::string{"("} + std::to_string(shard) + ", "
                         + std::to_string(epoch) + ")";
                  return v;
                }()
                + ")");
    CHECK(fenced_writes == "0");
    // Nothing recorded by n2 at all between its stop and SIGCONT.
    CHECK(db.scalar("SELECT count(*) FROM scheduled_attempts WHERE node = 'sa2' AND at_ms > "
                    + std::to_string(stopped + 1000) + " AND at_ms < " + std::to_string(cont))
          == "0");
    CHECK(invariant_broken(db).empty());
    // Every action keeps firing, on whichever node holds its shard now.
    auto now = now_ms();
    CHECK(testing::eventually(20s, [&] { return requests_by_action(hook, now).size() == n; }));
  }
}
