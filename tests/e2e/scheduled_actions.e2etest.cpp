// Scheduled actions (seed 001, docs/scheduled-actions.md) end to end on gostd, through
// gost.v1.ScheduledActionService: an HTTP action fires on time against a local endpoint, a
// periodic one fires again and again with one idempotency key per occurrence, a task event
// reaches its task (a moderation verdict), bad input is refused naming the field with nothing
// stored, and gostctl shows the actions.
#include <doctest/doctest.h>

#include <grpcpp/grpcpp.h>

#include "gost/testing/http.hpp"
#include "gost/testing/http_server.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/scheduled_actions.grpc.pb.h"
#include "gost/v1/task_service.grpc.pb.h"
#include "gost/v1/tasks.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

template <class Fn, class Req, class Resp>
grpc::Status call(Fn fn, const Req& req, Resp& resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  return fn(&ctx, req, &resp);
}

v1::ScheduledActionSpec http_at(const std::string& url, int64_t at_ms) {
  v1::ScheduledActionSpec s;
  s.set_start_at_ms(at_ms);
  s.mutable_http()->set_url(url);
  s.mutable_http()->set_body("{\"hello\":1}");
  (*s.mutable_http()->mutable_headers())["Content-Type"] = "application/json";
  return s;
}

} // namespace

TEST_CASE("scheduled actions: HTTP on time, periodic, a task event, bad input, gostctl") {
  testing::temp_db db;
  auto port_file = "/tmp/gost-actions-" + std::to_string(getpid());
  child_process node{GOSTD_PATH,
                     {"--pg.dsn=" + db.dsn(), "--grpc.listen=127.0.0.1:0",
                      "--grpc.port_file=" + port_file, "--caf.listen=127.0.0.1:0",
                      "--shard.count=4", "--outbox.relay=false", "--scheduled.poll=20ms",
                      "--scheduled.allow_private_targets=true"}};
  auto port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  auto addr = "127.0.0.1:" + std::to_string(port);
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  auto api = v1::ScheduledActionService::NewStub(channel);
  auto create = [&](const std::string& id, const v1::ScheduledActionSpec& spec) {
    v1::CreateScheduledActionRequest req;
    req.set_id(id);
    *req.mutable_spec() = spec;
    v1::CreateScheduledActionResponse resp;
    return call([&](auto* c, auto& r, auto* o) { return api->Create(c, r, o); }, req, resp);
  };
  auto get = [&](const std::string& id) {
    v1::GetScheduledActionRequest req;
    req.set_id(id);
    v1::GetScheduledActionResponse resp;
    auto s = call([&](auto* c, auto& r, auto* o) { return api->Get(c, r, o); }, req, resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp;
  };

  // Bad input: refused naming the field, nothing stored.
  {
    auto s = create("bad-1", http_at("ftp://example.com/x", now_ms()));
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message().rfind("spec.http.url:", 0) == 0);
    v1::ScheduledActionSpec none;
    s = create("bad-2", none);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message().rfind("spec.action:", 0) == 0);
    auto cron = http_at("http://example.com/x", now_ms());
    cron.set_cron("0 25 * * *");
    s = create("bad-3", cron);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message().rfind("spec.cron:", 0) == 0);
    auto late = http_at("http://example.com/x", now_ms() + 10'000);
    late.set_end_at_ms(now_ms());
    s = create("bad-4", late);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message().rfind("spec.start_at_ms:", 0) == 0);
    CHECK(db.scalar("SELECT count(*) FROM scheduled_actions") == "0");
    CHECK(db.scalar("SELECT count(*) FROM scheduled_incoming") == "0");
  }

  // One HTTP action 1.5 s from now: it fires once, not before its time and soon after it.
  testing::http_server hook{{200}};
  auto at = now_ms() + 1500;
  REQUIRE(create("once-1", http_at(hook.url(), at)).ok());
  CHECK(create("once-1", http_at(hook.url(), at)).error_code() == grpc::StatusCode::ALREADY_EXISTS);
  REQUIRE(testing::eventually(10s, [&] { return hook.keys().size() == 1; }));
  auto arrived = hook.arrivals().at(0);
  MESSAGE("fired " << arrived - at << " ms after its time");
  CHECK(arrived >= at);
  CHECK(arrived - at < 500);
  CHECK(hook.keys().at(0) == "once-1/" + std::to_string(at));
  REQUIRE(
    testing::eventually(5s, [&] { return get("once-1").action().status().successes() == 1; }));
  // The workers' figures on /metrics: the attempt, its lag, a worker per shard.
  {
    auto http_port = static_cast<uint16_t>(testing::read_ports(node, port_file).second);
    auto metric = [&](const std::string& series) {
      auto text = testing::http_get(http_port, "/metrics");
      auto pos = text.find("\n" + series + " ");
      return pos == std::string::npos ? -1.0 : std::stod(text.substr(pos + series.size() + 2));
    };
    CHECK(testing::eventually(
      5s, [&] { return metric("gost_scheduled_attempts_succeeded_total") >= 1; }));
    CHECK(metric("gost_scheduled_fire_lag_seconds_count") >= 1);
    CHECK(metric("gost_scheduled_workers") == 4);
    CHECK(metric("gost_scheduled_attempts_failed_total") == 0);
  }
  auto once = get("once-1");
  CHECK(once.action().status().finished());
  CHECK(once.queue() == "processing");
  CHECK(once.queue_due_at_ms() == 0); // parked: nothing left to fire

  // A periodic action: every 300 ms, one key per occurrence.
  testing::http_server tick{{200}};
  auto start = now_ms() + 200;
  auto every = http_at(tick.url(), start);
  every.set_interval_ms(300);
  REQUIRE(create("every-1", every).ok());
  REQUIRE(testing::eventually(10s, [&] { return tick.keys().size() >= 4; }));
  auto keys = tick.keys();
  for (size_t i = 1; i < keys.size(); ++i)
    CHECK(keys[i] != keys[i - 1]);
  CHECK(keys[0] == "every-1/" + std::to_string(start));

  // An event to an entity: a moderation verdict for a task, stored once per occurrence.
  auto tasks = v1::TaskService::NewStub(channel);
  {
    v1::CreateGroupRequest g;
    g.mutable_group()->set_group_id("ki");
    g.mutable_group()->set_task_type("moderation");
    g.mutable_group()->set_source("classifieds");
    v1::CreateGroupResponse gr;
    REQUIRE(
      call([&](auto* c, auto& r, auto* o) { return tasks->CreateGroup(c, r, o); }, g, gr).ok());
    v1::CreateTaskRequest t;
    t.set_group_id("ki");
    t.set_client_key("offer-1");
    v1::ModerationInput in;
    in.set_item_id("offer-1");
    in.set_verdict_timeout_ms(600'000);
    t.mutable_input()->PackFrom(in);
    v1::CreateTaskResponse tr;
    REQUIRE(
      call([&](auto* c, auto& r, auto* o) { return tasks->CreateTask(c, r, o); }, t, tr).ok());
  }
  v1::ScheduledActionSpec verdict;
  verdict.set_start_at_ms(now_ms() + 300);
  auto* ev = verdict.mutable_event()->mutable_task_event();
  ev->set_task_id("ki:offer-1");
  ev->set_name("verdict");
  v1::ModerationVerdict v;
  v.set_approved(true);
  v.set_moderator("scheduler");
  google::protobuf::Any payload;
  payload.PackFrom(v);
  ev->set_payload(payload.SerializeAsString());
  REQUIRE(create("verdict-1", verdict).ok());
  REQUIRE(testing::eventually(10s, [&] {
    v1::GetTaskRequest req;
    req.set_task_id("ki:offer-1");
    v1::GetTaskResponse resp;
    auto s = call([&](auto* c, auto& r, auto* o) { return tasks->GetTask(c, r, o); }, req, resp);
    return s.ok() && resp.state_name() == "approved";
  }));
  REQUIRE(
    testing::eventually(5s, [&] { return get("verdict-1").action().status().successes() == 1; }));

  // The console.
  child_process list{GOSTCTL_PATH, {"--addr", addr, "actions"}};
  REQUIRE(list.wait(30s) == 0);
  CHECK(list.output().find("once-1") != std::string::npos);
  CHECK(list.output().find("every-1") != std::string::npos);
  CHECK(list.output().find("3 action(s)") != std::string::npos);
  child_process failing{GOSTCTL_PATH, {"--addr", addr, "actions", "--failing"}};
  REQUIRE(failing.wait(30s) == 0);
  CHECK(failing.output().find("0 action(s)") != std::string::npos);
  child_process show{GOSTCTL_PATH, {"--addr", addr, "action", "once-1"}};
  REQUIRE(show.wait(30s) == 0);
  CHECK(show.output().find("\"queue\": \"processing\"") != std::string::npos);
  CHECK(show.output().find("\"successes\": \"1\"") != std::string::npos);
}
