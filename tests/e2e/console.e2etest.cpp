// The inspection console against a running gostd (issue 13): Prometheus metrics checked by
// promtool and matched by the shipped Grafana dashboard, `gostctl top`, pausing and resuming
// a stage under load, passivating an offer, and who may use the verbs.
#include <doctest/doctest.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>

#include "gost/testing/grpc.hpp"
#include "gost/testing/http.hpp"
#include "gost/testing/metrics.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"

#include "gost/v1/admin.grpc.pb.h"
#include "gost/v1/events.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/scheduled_actions.grpc.pb.h"
#include "gost/v1/task_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::call;
using testing::child_process;
using testing::eventually;
using testing::node_args;
using testing::read_ports;
using testing::temp_path;

namespace {

/// A node with the audit stage (one run per new offer: its timer is an hour away) and a quick
/// expire stage (one run per active offer, a second after its creation); on a database of its
/// own, or on `shared` with other nodes (then give each a `--node.id`).
struct console_node {
  explicit console_node(std::vector<std::string> extra = {},
                        std::shared_ptr<testing::temp_db> shared = nullptr)
    : db(shared ? std::move(shared) : std::make_shared<testing::temp_db>()),
      port_file(temp_path("gostd-console")),
      node(GOSTD_PATH, node_args(*db, port_file, with_stages(std::move(extra)))) {
    std::tie(port, http_port) = read_ports(node, port_file);
    addr = "127.0.0.1:" + std::to_string(port);
    auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
    offers = v1::OfferService::NewStub(channel);
    admin = v1::AdminService::NewStub(channel);
    actions = v1::ScheduledActionService::NewStub(channel);
  }
  ~console_node() {
    node.signal(SIGTERM);
    node.wait(30s);
    std::remove(port_file.c_str());
  }

  static std::vector<std::string> with_stages(std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--stages.audit.enabled=true", "--stages.audit.every=1h",
                                 "--stages.expire.after=1s", "--outbox.relay=false"});
    return extra;
  }

  /// Creates an active offer; returns its id ("" on failure).
  std::string create(int i) {
    v1::CreateOfferRequest req;
    req.mutable_offer()->set_seller_id("console-seller");
    req.mutable_offer()->set_title("offer " + std::to_string(i));
    req.mutable_offer()->set_status(v1::OFFER_STATUS_ACTIVE);
    v1::CreateOfferResponse resp;
    auto fn = [&](grpc::ClientContext* c, const v1::CreateOfferRequest& r,
                  v1::CreateOfferResponse* o) { return offers->CreateOffer(c, r, o); };
    return call(fn, req, resp).ok() ? resp.offer().id() : std::string{};
  }

  /// Changes an offer's title; its new version (0 on failure).
  int64_t update(const std::string& id, const std::string& title) {
    v1::UpdateOfferRequest req;
    req.mutable_ref()->set_id(id);
    req.mutable_offer()->set_seller_id("console-seller");
    req.mutable_offer()->set_title(title);
    req.mutable_offer()->set_status(v1::OFFER_STATUS_ACTIVE);
    req.mutable_update_mask()->add_paths("title");
    v1::UpdateOfferResponse resp;
    auto fn = [&](grpc::ClientContext* c, const v1::UpdateOfferRequest& r,
                  v1::UpdateOfferResponse* o) { return offers->UpdateOffer(c, r, o); };
    return call(fn, req, resp).ok() ? resp.offer().version() : 0;
  }

  v1::TopResponse top() {
    v1::TopResponse resp;
    auto fn = [&](grpc::ClientContext* c, const v1::TopRequest& r, v1::TopResponse* o) {
      return admin->Top(c, r, o);
    };
    auto s = call(fn, v1::TopRequest{}, resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp;
  }

  v1::InspectOfferResponse inspect(const std::string& id) {
    v1::InspectOfferRequest req;
    req.set_offer_id(id);
    v1::InspectOfferResponse resp;
    auto fn = [&](grpc::ClientContext* c, const v1::InspectOfferRequest& r,
                  v1::InspectOfferResponse* o) { return admin->InspectOffer(c, r, o); };
    auto s = call(fn, req, resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp;
  }
  /// The audit stage's run count on offer `id`, as its decoded state (AuditTrail) shows it.
  int64_t audit_runs(const std::string& id) {
    auto resp = inspect(id);
    auto i = resp.states().find("audit");
    v1::AuditTrail trail;
    if (i != resp.states().end())
      REQUIRE(i->second.UnpackTo(&trail));
    return trail.runs();
  }

  v1::StageTop stage(const std::string& id) {
    auto t = top(); // kept: the loop reads into it
    for (auto& s : t.stages())
      if (s.stage_id() == id)
        return s;
    return {};
  }

  grpc::Status stage_verb(bool pause, const std::string& stage, const std::string& token = "") {
    v1::StageVerbRequest req;
    req.set_stage_id(stage);
    req.set_who("console-test");
    v1::StageVerbResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    if (!token.empty())
      ctx.AddMetadata("x-gost-token", token);
    return pause ? admin->PauseStage(&ctx, req, &resp) : admin->ResumeStage(&ctx, req, &resp);
  }

  int64_t scalar_int(const std::string& sql) { return std::stoll(db->scalar(sql)); }

  std::string metrics() { return testing::http_get(static_cast<uint16_t>(http_port), "/metrics"); }

  std::shared_ptr<testing::temp_db> db;
  std::string port_file;
  child_process node;
  int port = 0;
  int http_port = 0;
  std::string addr;
  std::unique_ptr<v1::OfferService::Stub> offers;
  std::unique_ptr<v1::AdminService::Stub> admin;
  std::unique_ptr<v1::ScheduledActionService::Stub> actions;
};

/// The metric names a Prometheus expression uses (gost_...).
std::set<std::string> metric_names(const std::string& expr) {
  std::set<std::string> out;
  static const std::regex name{"gost_[a-z0-9_]+"};
  for (auto i = std::sregex_iterator(expr.begin(), expr.end(), name); i != std::sregex_iterator();
       ++i)
    out.insert(i->str());
  return out;
}

/// Whether the exposition text has a sample of `name` (a line starting with it).
bool exposes(const std::string& text, const std::string& name) {
  return text.find("\n" + name + "{") != std::string::npos
         || text.find("\n" + name + " ") != std::string::npos;
}

/// A dead letter of the audit stage on offer `offer` (as a stage failing three times leaves
/// it; stages.pgtest.cpp makes one for real); its id.
std::string audit_letter(console_node& n, const std::string& offer, const std::string& reason) {
  return n.db->scalar("INSERT INTO dead_letters (shard, offer_id, stage_id, reason, attempts)"
                      " SELECT shard, offer_id, 'audit', '"
                      + reason + "', 3 FROM offers WHERE offer_id = '" + offer + "' RETURNING id");
}

/// Gives shard `shard` to another owner behind the nodes' backs (a newer epoch, its lease fresh
/// for an hour): their writes to it are fenced from now on, and nobody serves it.
void ghost_takes(console_node& n, int64_t shard) {
  REQUIRE(n.db->scalar("UPDATE shard_leases SET owner = 'ghost', epoch = epoch + 1,"
                       " heartbeat_at = now() + interval '1 hour' WHERE shard = "
                       + std::to_string(shard) + " RETURNING owner")
          == "ghost");
}

/// A once-only scheduled action requeueing `offer` into the audit stage at `start_ms`, retried
/// every 100-300 ms up to 100 attempts of 2 s each.
v1::ScheduledActionSpec audit_requeue(const std::string& offer, int64_t start_ms) {
  v1::ScheduledActionSpec spec;
  spec.set_start_at_ms(start_ms);
  spec.mutable_event()->mutable_offer_requeue()->set_offer_id(offer);
  spec.mutable_event()->mutable_offer_requeue()->set_stage_id("audit");
  spec.mutable_retry()->set_max_attempts(100);
  spec.mutable_retry()->set_backoff_ms(100);
  spec.mutable_retry()->set_max_backoff_ms(300);
  spec.mutable_retry()->set_attempt_deadline_ms(2000);
  return spec;
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

grpc::Status create_action(console_node& n, const std::string& id,
                           const v1::ScheduledActionSpec& spec) {
  v1::CreateScheduledActionRequest req;
  req.set_id(id);
  *req.mutable_spec() = spec;
  v1::CreateScheduledActionResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  return n.actions->Create(&ctx, req, &resp);
}

v1::GetScheduledActionResponse get_action(console_node& n, const std::string& id) {
  v1::GetScheduledActionRequest req;
  req.set_id(id);
  v1::GetScheduledActionResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  auto s = n.actions->Get(&ctx, req, &resp);
  REQUIRE_MESSAGE(s.ok(), s.error_message());
  return resp;
}

/// An offer created through `via` whose shard node `owner` holds (of 40 tries), or "".
std::string offer_owned_by(console_node& via, const testing::temp_db& db,
                           const std::string& owner) {
  for (int i = 0; i < 40; ++i) {
    auto made = via.create(i);
    REQUIRE_FALSE(made.empty());
    if (db.scalar("SELECT l.owner FROM offers o JOIN shard_leases l ON l.shard = o.shard"
                  " WHERE o.offer_id = '"
                  + made + "'")
        == owner)
      return made;
  }
  return {};
}

} // namespace

TEST_CASE(
  "console: /metrics passes promtool, and the Grafana dashboard uses only names the node exposes") {
  console_node n;
  for (int i = 0; i < 20; ++i)
    REQUIRE_FALSE(n.create(i).empty());
  // Every family with samples: stage runs committed, so the histograms have counts.
  REQUIRE(eventually(20s, [&] { return n.stage("audit").runs() >= 20; }));
  auto response = n.metrics();
  REQUIRE(response.find("200 OK") != std::string::npos);
  auto body = response.substr(response.find("\r\n\r\n") + 4);
  auto [rc, out] = testing::promtool_check(body);
  CHECK_MESSAGE(rc == 0, "promtool check metrics failed (Debian's prometheus package, installed "
                         "by scripts/install-deps.sh): "
                           << out);

  // Named families, with their types and labels.
  for (auto* family :
       {"# TYPE gost_stage_runs_total counter", "# TYPE gost_stage_run_seconds histogram",
        "# TYPE gost_offer_write_commit_seconds histogram",
        "# TYPE gost_offer_shard_mailbox_depth gauge", "# TYPE gost_offer_shard_runs_total counter",
        "# TYPE gost_offer_shard_oldest_due_age_seconds gauge",
        "# TYPE gost_offer_write_lag_seconds gauge", "# TYPE gost_stage_paused gauge",
        "# TYPE gost_image_tasks_computed_total counter", "# TYPE gost_image_queue_depth gauge",
        "# TYPE gost_image_cache_hits_total counter",
        "# TYPE gost_image_cache_misses_total counter",
        "# TYPE gost_image_task_failures_total counter",
        "# TYPE gost_image_redis_fallbacks_total counter", "# TYPE gost_image_pool_workers gauge",
        "# TYPE gost_image_tasks_in_flight gauge", "# TYPE gost_image_kafka_waiting gauge",
        "# TYPE gost_image_duplicates_skipped_total counter"})
    CHECK_MESSAGE(body.find(family) != std::string::npos, family);
  CHECK(body.find("gost_stage_run_seconds_bucket{stage=\"audit\",le=\"+Inf\"} ")
        != std::string::npos);
  CHECK(body.find("gost_offer_shard_lease_epoch{shard=\"7\"} ") != std::string::npos);
  // gostd names itself at gost's own version (an application: example_app.e2etest.cpp).
  CHECK(body.find("# TYPE gost_build_info gauge\ngost_build_info{app=\"gostd\",version=\"")
        != std::string::npos);
  // ... and the allocator serving malloc: jemalloc, linked by the build (GOST_JEMALLOC; off
  // under the sanitizers, whose allocator serves malloc).
#if GOST_JEMALLOC_LINKED
  CHECK(body.find(",allocator=\"jemalloc ") != std::string::npos);
#else
  CHECK(body.find(",allocator=\"system\"") != std::string::npos);
#endif
  CHECK(body.find("gost_stage_paused{stage=\"audit\"} 0") != std::string::npos);
  CHECK(body.find("gost_image_tasks_computed_total{function=\"main_color\"} 0")
        != std::string::npos);
  CHECK(body.find("gost_image_pool_workers{function=\"ratio\"} 4") != std::string::npos);
  // Bounded cardinality: one series per shard of the installation (8), none per offer.
  size_t per_shard = 0;
  for (auto pos = body.find("\ngost_offer_shard_actors_resident{"); pos != std::string::npos;
       pos = body.find("\ngost_offer_shard_actors_resident{", pos + 1))
    ++per_shard;
  CHECK(per_shard == 8);

  // The dashboard: every metric name of every expression is exposed by the node.
  std::ifstream in(std::string{GOST_SOURCE_DIR} + "/docs/grafana-dashboard.json");
  REQUIRE(in);
  std::stringstream json;
  json << in.rdbuf();
  auto text = json.str();
  static const std::regex expr{R"re("expr"\s*:\s*"((?:[^"\\]|\\.)*)")re"};
  int exprs = 0;
  std::set<std::string> used;
  for (auto i = std::sregex_iterator(text.begin(), text.end(), expr); i != std::sregex_iterator();
       ++i, ++exprs)
    for (auto& name : metric_names((*i)[1].str()))
      used.insert(name);
  CHECK(exprs >= 15);
  CHECK(used.size() >= 15);
  for (auto& name : used)
    CHECK_MESSAGE(exposes(body, name), "the dashboard uses " << name << ", which /metrics lacks");
}

TEST_CASE("console: gostctl top shows the node's shards and stages from the actors' own counters") {
  console_node n;
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i)
    ids.push_back(n.create(i));
  REQUIRE(eventually(20s, [&] { return n.stage("audit").runs() >= 30; }));

  child_process top{GOSTCTL_PATH, {"--addr", n.addr, "top", "--once", "--interval", "0.5"}};
  REQUIRE(top.wait(30s) == 0);
  auto out = top.output();
  INFO(out);
  // The header names the node and sums the shards: 30 offers resident (created, idle for
  // less than offer.idle_timeout), at least 30 audit and 30 expire runs... expire runs a second
  // after creation, so at least the audit ones are counted.
  std::smatch m;
  REQUIRE(std::regex_search(
    out, m,
    std::regex{
      R"(node (\S+) \(127\.0\.0\.1:\d+\): (\d+) shard\(s\), resident=(\d+) mailbox=(\d+) runs=(\d+) failures=(\d+))"}));
  CHECK(m[2].str() == "8");
  CHECK(std::stoll(m[3].str()) == 30);
  CHECK(std::stoll(m[5].str()) >= 30);
  CHECK(std::stoll(m[6].str()) == 0);
  // One row per shard (epoch 1: the first lease of a fresh installation), and the stages.
  CHECK(std::regex_search(out, std::regex{R"(\n\s+7\s+1\s+\d+)"}));
  CHECK(std::regex_search(out, std::regex{R"(\naudit\s+running\s+0\s)"}));
  CHECK(out.find("\nexpire ") != std::string::npos);

  // The same through the API: per-shard residents add up, and the runs are in the shards.
  auto t = n.top();
  int64_t resident = 0;
  uint64_t runs = 0;
  for (auto& s : t.shards()) {
    resident += s.resident();
    runs += s.runs();
    CHECK(s.epoch() == 1);
  }
  CHECK(resident == 30);
  CHECK(runs >= 30);
  CHECK(t.shards_size() == 8);
  // Largest mailbox first, then largest backlog.
  for (int i = 1; i < t.shards_size(); ++i)
    CHECK(t.shards(i - 1).mailbox() >= t.shards(i).mailbox());

  // --all: every alive member the node lists (here the one node, by its registered address).
  child_process all{GOSTCTL_PATH,
                    {"--addr", n.addr, "top", "--once", "--all", "--interval", "0.2"}};
  REQUIRE(all.wait(30s) == 0);
  CHECK(std::regex_search(all.output(), std::regex{R"(^node \S+ \(127\.0\.0\.1:\d+\): 8 shard)"}));

  // A bad flag is named.
  child_process bad{GOSTCTL_PATH, {"--addr", n.addr, "top", "--once", "--interval", "0"}};
  CHECK(bad.wait(30s) == 2);
  CHECK(bad.output().find("--interval") != std::string::npos);
}

TEST_CASE("console: a paused stage starts no run after the pause is answered; resumed, its backlog "
          "drains") {
  console_node n;
  std::atomic<bool> stop{false};
  std::atomic<int> created{0};
  std::atomic<int> failed{0};
  // Load: offers created one after another until told to stop (bounded).
  std::thread load{[&] {
    for (int i = 0; i < 3000 && !stop; ++i) {
      if (n.create(i).empty())
        ++failed;
      else
        ++created;
    }
  }};
  // Stopped and joined however the test ends (a failed REQUIRE throws past the join below).
  struct joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~joiner() {
      stop = true;
      if (t.joinable())
        t.join();
    }
  } join_load{stop, load};
  REQUIRE(eventually(20s, [&] { return n.stage("audit").runs() >= 50; }));

  auto s = n.stage_verb(true, "audit");
  REQUIRE_MESSAGE(s.ok(), s.error_message());
  // Answered: every audit run this node started has finished and is counted.
  auto runs_at_pause = n.stage("audit").runs();
  int created_at_pause = created;
  auto t = n.top();
  for (auto& st : t.stages())
    if (st.stage_id() == "audit")
      CHECK(st.paused());

  // More offers while paused; the shards keep dispatching (the expire stage runs on every
  // one of them), but audit does not.
  REQUIRE(eventually(30s, [&] { return created >= created_at_pause + 100; }));
  stop = true;
  load.join();
  CHECK(failed == 0);
  int total = created;
  REQUIRE(
    eventually(30s, [&] { return n.stage("expire").runs() >= static_cast<uint64_t>(total); }));
  CHECK(n.stage("audit").runs() == runs_at_pause);
  // In PostgreSQL: as many audit states as runs counted at the pause, the rest still queued.
  CHECK(n.scalar_int("SELECT count(*) FROM stage_states WHERE stage_id = 'audit' AND state IS "
                     "NOT NULL")
        == static_cast<int64_t>(runs_at_pause));
  auto queued = n.stage("audit").queued();
  CHECK(queued == static_cast<uint64_t>(total) - runs_at_pause);
  CHECK(queued >= 100);
  CHECK(n.scalar_int("SELECT count(*) FROM stage_pauses WHERE stage_id = 'audit' AND paused_by "
                     "LIKE 'console-test peer=%'")
        == 1);

  // gostctl stages shows it paused, and by whom.
  child_process stages{GOSTCTL_PATH, {"--addr", n.addr, "stages"}};
  REQUIRE(stages.wait(30s) == 0);
  CHECK(std::regex_search(stages.output(), std::regex{R"(\naudit\s+yes\s+PAUSED\s)"}));
  CHECK(stages.output().find("audit paused by console-test") != std::string::npos);

  // Resumed through gostctl: the backlog drains, one run per offer.
  child_process resume{GOSTCTL_PATH, {"--addr", n.addr, "resume", "audit", "--who", "ops"}};
  REQUIRE(resume.wait(30s) == 0);
  CHECK(resume.output().find("resumed") != std::string::npos);
  CHECK(eventually(30s, [&] { return n.stage("audit").queued() == 0; }));
  CHECK(n.stage("audit").runs() == static_cast<uint64_t>(total));
  CHECK(n.scalar_int("SELECT count(*) FROM stage_states WHERE stage_id = 'audit' AND state IS "
                     "NOT NULL")
        == total);
  CHECK(n.scalar_int("SELECT count(*) FROM stage_pauses") == 0);

  // The node log names the verbs and who asked.
  auto log = n.node.output();
  CHECK(log.find("stage paused stage=audit changed=true by=console-test peer=")
        != std::string::npos);
  CHECK(log.find("stage resumed stage=audit changed=true by=ops peer=") != std::string::npos);

  // Bad arguments are named.
  auto unknown = n.stage_verb(true, "no-such-stage");
  CHECK(unknown.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(unknown.error_message().find("stage_id `no-such-stage`") != std::string::npos);
  CHECK(n.stage_verb(true, "").error_code() == grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("console: a pause reaches every node of a cluster; top --all shows each node") {
  auto db = std::make_shared<testing::temp_db>();
  console_node a{{"--node.id=c1"}, db};
  console_node b{{"--node.id=c2"}, db};
  // Even shares: four shards each, once the first node handed four to the second.
  REQUIRE(
    eventually(30s, [&] { return a.top().shards_size() == 4 && b.top().shards_size() == 4; }));
  auto s = a.stage_verb(true, "audit");
  REQUIRE_MESSAGE(s.ok(), s.error_message());
  // The other node applies it on the cluster notification.
  REQUIRE(eventually(10s, [&] {
    return b.metrics().find("gost_stage_paused{stage=\"audit\"} 1") != std::string::npos;
  }));
  CHECK(a.metrics().find("gost_stage_paused{stage=\"audit\"} 1") != std::string::npos);

  // Offers on both nodes' shards (a forwards to b's): expire runs on each, audit on none.
  for (int i = 0; i < 40; ++i)
    REQUIRE_FALSE(a.create(i).empty());
  REQUIRE(
    eventually(30s, [&] { return a.stage("expire").runs() + b.stage("expire").runs() >= 40; }));
  CHECK(a.stage("expire").runs() > 0);
  CHECK(b.stage("expire").runs() > 0);
  CHECK(a.stage("audit").runs() == 0);
  CHECK(b.stage("audit").runs() == 0);
  CHECK(a.stage("audit").queued() == 40);

  child_process top{GOSTCTL_PATH,
                    {"--addr", a.addr, "top", "--once", "--all", "--interval", "0.2"}};
  REQUIRE(top.wait(30s) == 0);
  CHECK(top.output().find("node c1 (127.0.0.1:") != std::string::npos);
  CHECK(top.output().find("node c2 (127.0.0.1:") != std::string::npos);

  // Resumed through the other node: both drain their backlogs.
  child_process resume{GOSTCTL_PATH, {"--addr", b.addr, "resume", "audit"}};
  REQUIRE(resume.wait(30s) == 0);
  CHECK(eventually(30s, [&] { return a.stage("audit").queued() == 0; }));
  CHECK(a.stage("audit").runs() + b.stage("audit").runs() == 40);
  CHECK(a.stage("audit").runs() > 0);
  CHECK(b.stage("audit").runs() > 0);
}

TEST_CASE("console: gostctl passivate stops the actor holding an offer") {
  console_node n;
  auto id = n.create(1);
  REQUIRE_FALSE(id.empty());
  auto resident = [&] { return n.inspect(id).resident(); };
  REQUIRE(resident());
  child_process p{GOSTCTL_PATH, {"--addr", n.addr, "passivate", id, "--who", "ops"}};
  REQUIRE(p.wait(30s) == 0);
  CHECK(p.output().find("its actor stops") != std::string::npos);
  CHECK(eventually(10s, [&] { return !resident(); }));
  CHECK(n.node.output().find("offer passivated offer=" + id) != std::string::npos);
  child_process again{GOSTCTL_PATH, {"--addr", n.addr, "passivate", id}};
  REQUIRE(again.wait(30s) == 0);
  CHECK(again.output().find("no actor held it") != std::string::npos);
  child_process none{GOSTCTL_PATH, {"--addr", n.addr, "passivate"}};
  CHECK(none.wait(30s) == 2);
}

TEST_CASE("console: gostctl requeue runs a stage on an offer again") {
  console_node n;
  auto id = n.create(1);
  REQUIRE_FALSE(id.empty());
  // The audit trail's run count, as the offer's decoded state shows it.
  auto audit_runs = [&] { return n.audit_runs(id); };
  REQUIRE(eventually(20s, [&] { return audit_runs() == 1; }));
  child_process p{GOSTCTL_PATH, {"--addr", n.addr, "requeue", id, "audit", "--who", "ops"}};
  REQUIRE(p.wait(30s) == 0);
  CHECK(p.output().find("queued for audit") != std::string::npos);
  CHECK(eventually(20s, [&] { return audit_runs() == 2; }));
  CHECK(n.node.output().find("offer requeued offer=" + id + " stage=audit") != std::string::npos);
  // Its next run is the stage's own timer again (an hour away): nothing more.
  CHECK(n.stage("audit").queued() == 0);

  child_process missing{GOSTCTL_PATH, {"--addr", n.addr, "requeue", "no-such-offer", "audit"}};
  CHECK(missing.wait(30s) == 1);
  CHECK(missing.output().find("offer no-such-offer does not exist") != std::string::npos);
  child_process bad_stage{GOSTCTL_PATH, {"--addr", n.addr, "requeue", id, "nope"}};
  CHECK(bad_stage.wait(30s) == 1);
  CHECK(bad_stage.output().find("stage_id `nope`") != std::string::npos);
  child_process no_stage{GOSTCTL_PATH, {"--addr", n.addr, "requeue", id}};
  CHECK(no_stage.wait(30s) == 2);
  CHECK(no_stage.output().find("give an offer id and a stage id") != std::string::npos);
}

TEST_CASE("console: gostctl requeue and passivate sent to a node that does not own the offer "
          "take effect on its owner (the stage runs again once, through the owner's actor)") {
  auto db = std::make_shared<testing::temp_db>();
  console_node a{{"--node.id=c1"}, db};
  console_node b{{"--node.id=c2"}, db};
  REQUIRE(
    eventually(30s, [&] { return a.top().shards_size() == 4 && b.top().shards_size() == 4; }));
  auto id = offer_owned_by(a, *db, "c2");
  REQUIRE_FALSE(id.empty());
  auto audit_runs = [&] { return a.audit_runs(id); };
  REQUIRE(eventually(20s, [&] { return audit_runs() == 1; }));
  // Every audit run of the offers made so far is over: c2's count moves by the requeue only.
  REQUIRE(eventually(20s, [&] { return a.stage("audit").queued() == 0; }));
  auto c2_runs = b.stage("audit").runs();
  auto c1_runs = a.stage("audit").runs();

  child_process p{GOSTCTL_PATH, {"--addr", a.addr, "requeue", id, "audit", "--who", "ops"}};
  REQUIRE(p.wait(30s) == 0);
  CHECK(p.output().find("queued for audit") != std::string::npos);
  CHECK(eventually(20s, [&] { return audit_runs() == 2; }));
  CHECK(eventually(20s, [&] { return b.stage("audit").runs() == c2_runs + 1; }));
  CHECK(a.stage("audit").runs() == c1_runs);
  CHECK(a.stage("audit").queued() == 0); // its next run is the hour's timer again
  CHECK(audit_runs() == 2);
  // The owner's actor took the requeue and its shard ran the stage it queued (source
  // console), not a row found by a later poll of the queue (source queue).
  auto seen = a.inspect(id);
  CHECK(seen.owner() == "c2");
  bool requeued = false;
  bool ran = false;
  for (auto& e : seen.recent()) {
    requeued = requeued || (e.kind() == "other" && e.source() == "console" && e.stage() == "audit");
    ran = ran || (e.kind() == "run" && e.source() == "console" && e.stage() == "audit");
  }
  CHECK(requeued);
  CHECK(ran);

  // Passivated through c1 as well: c2's actor stops.
  REQUIRE(seen.resident());
  child_process pass{GOSTCTL_PATH, {"--addr", a.addr, "passivate", id, "--who", "ops"}};
  REQUIRE(pass.wait(30s) == 0);
  CHECK_MESSAGE(pass.output().find("its actor stops") != std::string::npos, pass.output());
  CHECK(eventually(10s, [&] { return !a.inspect(id).resident(); }));
  child_process again{GOSTCTL_PATH, {"--addr", b.addr, "passivate", id}};
  REQUIRE(again.wait(30s) == 0);
  CHECK(again.output().find("no actor held it") != std::string::npos);
}

TEST_CASE("console: a requeue on a node whose lease of the shard is stale writes no queue row and "
          "answers UNAVAILABLE") {
  console_node n;
  auto id = n.create(1);
  REQUIRE_FALSE(id.empty());
  REQUIRE(eventually(20s, [&] { return n.stage("audit").queued() == 0; }));
  auto due = [&] {
    return n.scalar_int("SELECT due_at_us FROM stage_states WHERE offer_id = '" + id
                        + "' AND stage_id = 'audit'");
  };
  auto timer = due(); // the audit stage's next run, an hour away
  auto shard = n.scalar_int("SELECT shard FROM offers WHERE offer_id = '" + id + "'");
  // Another owner takes the shard behind the node's back (a newer epoch, its lease fresh for an
  // hour): the node's writes to it are fenced from now on, and nobody serves it here.
  REQUIRE(n.db->scalar("UPDATE shard_leases SET owner = 'ghost', epoch = epoch + 1,"
                       " heartbeat_at = now() + interval '1 hour' WHERE shard = "
                       + std::to_string(shard) + " RETURNING owner")
          == "ghost");
  v1::RequeueOfferRequest req;
  req.set_offer_id(id);
  req.set_stage_id("audit");
  v1::RequeueOfferResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  auto st = n.admin->RequeueOffer(&ctx, req, &resp);
  CHECK_MESSAGE(st.error_code() == grpc::StatusCode::UNAVAILABLE, st.error_message());
  CHECK_MESSAGE(st.error_message().find("retry") != std::string::npos, st.error_message());
  CHECK(due() == timer);
}

TEST_CASE("console: dead letters are listed with their reason, retried (the stage runs again once) "
          "or discarded; a bulk verb needs a filter") {
  console_node n;
  auto id = n.create(1);
  auto other = n.create(2);
  REQUIRE_FALSE(id.empty());
  REQUIRE_FALSE(other.empty());
  auto audit_runs = [&](const std::string& offer) {
    auto resp = n.inspect(offer);
    auto i = resp.states().find("audit");
    v1::AuditTrail trail;
    if (i != resp.states().end())
      REQUIRE(i->second.UnpackTo(&trail));
    return trail.runs();
  };
  REQUIRE(eventually(20s, [&] { return audit_runs(id) == 1 && audit_runs(other) == 1; }));
  // The letters a stage failing three times leaves (stages.pgtest.cpp makes one for real).
  auto letter = [&](const std::string& offer, const std::string& reason) {
    return n.db->scalar("INSERT INTO dead_letters (shard, offer_id, stage_id, reason, attempts)"
                        " VALUES ("
                        + std::to_string(n.inspect(offer).shard()) + ", '" + offer + "', 'audit', '"
                        + reason + "', 3) RETURNING id");
  };
  auto retried = letter(id, "crashed 3 times: catalog down");
  auto discarded = letter(other, "crashed 3 times: bad photo");
  auto open_letters = [&] {
    return n.scalar_int("SELECT count(*) FROM dead_letters WHERE released_at IS NULL");
  };

  child_process list{GOSTCTL_PATH, {"--addr", n.addr, "deadletters", "--stage", "audit"}};
  REQUIRE(list.wait(30s) == 0);
  CHECK(list.output().find("crashed 3 times: catalog down") != std::string::npos);
  CHECK(list.output().find("crashed 3 times: bad photo") != std::string::npos);
  CHECK(list.output().find(id) != std::string::npos);
  child_process page{GOSTCTL_PATH, {"--addr", n.addr, "deadletters", "--limit", "1"}};
  REQUIRE(page.wait(30s) == 0);
  CHECK(page.output().find("bad photo") == std::string::npos);
  CHECK(page.output().find("--after " + retried) != std::string::npos);
  child_process later{GOSTCTL_PATH,
                      {"--addr", n.addr, "deadletters", "--since", "2099-01-01T00:00:00Z"}};
  REQUIRE(later.wait(30s) == 0);
  CHECK(later.output().find("no open dead letters match") != std::string::npos);
  child_process bad_since{GOSTCTL_PATH, {"--addr", n.addr, "deadletters", "--since", "yesterday"}};
  CHECK(bad_since.wait(30s) == 2);
  CHECK(bad_since.output().find("--since `yesterday`") != std::string::npos);

  // Nothing in the filter: refused by gostctl, and by the node itself.
  child_process all{GOSTCTL_PATH, {"--addr", n.addr, "retry-dead"}};
  CHECK(all.wait(30s) == 2);
  CHECK(all.output().find("give dead letter ids, or --stage") != std::string::npos);
  {
    v1::DeadLettersVerbRequest req;
    v1::DeadLettersVerbResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    auto s = n.admin->RetryDeadLetters(&ctx, req, &resp);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(s.error_message().find("an empty filter") != std::string::npos);
  }
  child_process bad_id{GOSTCTL_PATH, {"--addr", n.addr, "discard-dead", "x1"}};
  CHECK(bad_id.wait(30s) == 2);
  CHECK(bad_id.output().find("`x1` is not a dead letter id") != std::string::npos);
  CHECK(open_letters() == 2);

  // Discard one: released, no run.
  child_process discard{GOSTCTL_PATH,
                        {"--addr", n.addr, "discard-dead", discarded, "--who", "ops"}};
  REQUIRE(discard.wait(30s) == 0);
  CHECK(discard.output().find("1 dead letter(s) discarded") != std::string::npos);
  CHECK(open_letters() == 1);
  CHECK(eventually(10s, [&] {
    return n.node.output().find("dead letters discarded ids=" + discarded + " released=1 by=ops")
           != std::string::npos;
  }));

  // Retry the rest of the stage: the stage runs on the offer again, once.
  child_process retry{GOSTCTL_PATH,
                      {"--addr", n.addr, "retry-dead", "--stage", "audit", "--who", "ops"}};
  REQUIRE(retry.wait(30s) == 0);
  CHECK(retry.output().find("1 dead letter(s) released, 1 offer(s) queued again")
        != std::string::npos);
  CHECK(eventually(20s, [&] { return audit_runs(id) == 2; }));
  CHECK(eventually(10s, [&] {
    return n.node.output().find(
             "dead letters retried stage=audit released=1 requeued=1 left=0 by=ops")
           != std::string::npos;
  }));
  // Its next run is the stage's own timer again (an hour away): nothing more, and the
  // discarded one's offer was not run.
  CHECK(n.stage("audit").queued() == 0);
  CHECK(audit_runs(id) == 2);
  CHECK(audit_runs(other) == 1);
  CHECK(open_letters() == 0);
  child_process empty{GOSTCTL_PATH, {"--addr", n.addr, "deadletters"}};
  REQUIRE(empty.wait(30s) == 0);
  CHECK(empty.output().find("no open dead letters") != std::string::npos);
  // Released letters are not retried again.
  child_process again{GOSTCTL_PATH, {"--addr", n.addr, "retry-dead", retried}};
  REQUIRE(again.wait(30s) == 0);
  CHECK(again.output().find("0 dead letter(s) released") != std::string::npos);
}

TEST_CASE("console: retry-dead sent to a node that does not own the offer takes effect on its "
          "owner (the stage runs again once, through the owner's actor)") {
  auto db = std::make_shared<testing::temp_db>();
  console_node a{{"--node.id=c1"}, db};
  console_node b{{"--node.id=c2"}, db};
  REQUIRE(
    eventually(30s, [&] { return a.top().shards_size() == 4 && b.top().shards_size() == 4; }));
  auto id = offer_owned_by(a, *db, "c2");
  REQUIRE_FALSE(id.empty());
  auto audit_runs = [&] { return a.audit_runs(id); };
  REQUIRE(eventually(20s, [&] { return audit_runs() == 1; }));
  // Every audit run of the offers made so far is over: c2's count moves by the retry only.
  REQUIRE(eventually(20s, [&] { return a.stage("audit").queued() == 0; }));
  auto c2_runs = b.stage("audit").runs();
  auto c1_runs = a.stage("audit").runs();
  // Two letters of the offer and stage: one requeue, both released.
  auto first = audit_letter(a, id, "crashed 3 times: catalog down");
  auto second = audit_letter(a, id, "crashed 3 times: catalog down again");

  child_process retry{GOSTCTL_PATH,
                      {"--addr", a.addr, "retry-dead", first, second, "--who", "ops"}};
  REQUIRE_MESSAGE(retry.wait(30s) == 0, retry.output());
  CHECK_MESSAGE(retry.output().find("2 dead letter(s) released, 1 offer(s) queued again")
                  != std::string::npos,
                retry.output());
  CHECK(eventually(20s, [&] { return audit_runs() == 2; }));
  CHECK(eventually(20s, [&] { return b.stage("audit").runs() == c2_runs + 1; }));
  CHECK(a.stage("audit").runs() == c1_runs);
  CHECK(a.stage("audit").queued() == 0); // its next run is the hour's timer again
  CHECK(audit_runs() == 2);
  // The owner's actor took the requeue (an `other` event from the console) and its shard ran
  // the stage it queued, not a row written beside it and found by a later poll (source queue).
  auto seen = a.inspect(id);
  CHECK(seen.owner() == "c2");
  bool requeued = false;
  bool ran = false;
  for (auto& e : seen.recent()) {
    requeued = requeued || (e.kind() == "other" && e.source() == "console" && e.stage() == "audit");
    ran = ran || (e.kind() == "run" && e.source() == "console" && e.stage() == "audit");
  }
  CHECK(requeued);
  CHECK(ran);
  CHECK(a.scalar_int("SELECT count(*) FROM dead_letters WHERE released_at IS NULL") == 0);
  // Retried again: released letters are not retried.
  child_process again{GOSTCTL_PATH, {"--addr", b.addr, "retry-dead", first}};
  REQUIRE(again.wait(30s) == 0);
  CHECK(again.output().find("0 dead letter(s) released") != std::string::npos);
  CHECK(audit_runs() == 2);
}

TEST_CASE("console: a retry-dead while the node's lease of the offer's shard is stale leaves the "
          "letter open, writes no queue row and answers UNAVAILABLE") {
  console_node n;
  auto id = n.create(1);
  REQUIRE_FALSE(id.empty());
  REQUIRE(eventually(20s, [&] { return n.stage("audit").queued() == 0; }));
  auto due = [&] {
    return n.scalar_int("SELECT due_at_us FROM stage_states WHERE offer_id = '" + id
                        + "' AND stage_id = 'audit'");
  };
  auto timer = due(); // the audit stage's next run, an hour away
  auto letter = audit_letter(n, id, "crashed 3 times: catalog down");
  ghost_takes(n, n.scalar_int("SELECT shard FROM offers WHERE offer_id = '" + id + "'"));
  v1::DeadLettersVerbRequest req;
  req.add_ids(std::stoll(letter));
  req.set_who("ops");
  v1::DeadLettersVerbResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  auto st = n.admin->RetryDeadLetters(&ctx, req, &resp);
  CHECK_MESSAGE(st.error_code() == grpc::StatusCode::UNAVAILABLE, st.error_message());
  CHECK_MESSAGE(st.error_message().find("0 dead letter(s) released, 0 offer(s) queued again; 1 "
                                        "dead letter(s) left open: letter "
                                        + letter + " (offer " + id)
                  != std::string::npos,
                st.error_message());
  CHECK_MESSAGE(st.error_message().find("retry") != std::string::npos, st.error_message());
  CHECK(due() == timer);
  CHECK(
    n.scalar_int("SELECT count(*) FROM dead_letters WHERE released_at IS NULL AND id = " + letter)
    == 1);
  // gostctl says so and exits 1.
  child_process ctl{GOSTCTL_PATH, {"--addr", n.addr, "retry-dead", letter}};
  CHECK(ctl.wait(30s) == 1);
  CHECK_MESSAGE(ctl.output().find("left open") != std::string::npos, ctl.output());
  CHECK(due() == timer);
}

TEST_CASE("console: a scheduled offer_requeue whose offer's shard has a stale lease writes no "
          "queue row and fails the attempt; retried, it requeues once the shard is served") {
  console_node n{{"--scheduled.poll=50ms"}};
  auto id = n.create(1);
  REQUIRE_FALSE(id.empty());
  REQUIRE(eventually(20s, [&] { return n.audit_runs(id) == 1; }));
  REQUIRE(eventually(20s, [&] { return n.stage("audit").queued() == 0; }));
  auto due = [&] {
    return n.scalar_int("SELECT due_at_us FROM stage_states WHERE offer_id = '" + id
                        + "' AND stage_id = 'audit'");
  };
  auto timer = due();
  auto shard = n.scalar_int("SELECT shard FROM offers WHERE offer_id = '" + id + "'");
  ghost_takes(n, shard);
  // An action due at once in another shard: the offer's has no worker now; one that lands there
  // is deleted before its shard is served again.
  std::string action;
  for (int i = 0; i < 32 && action.empty(); ++i) {
    auto candidate = "requeue-" + std::to_string(i);
    REQUIRE(create_action(n, candidate, audit_requeue(id, wall_ms())).ok());
    if (get_action(n, candidate).queue_shard() != static_cast<uint32_t>(shard)) {
      action = candidate;
      continue;
    }
    v1::DeleteScheduledActionRequest req;
    req.set_id(candidate);
    v1::DeleteScheduledActionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    REQUIRE(n.actions->Delete(&ctx, req, &resp).ok());
  }
  REQUIRE_FALSE(action.empty());
  // Attempts fail (the owner refuses: its lease is stale) and are retried; nothing is written.
  bool failed_twice =
    eventually(20s, [&] { return get_action(n, action).action().status().total_failures() >= 2; });
  REQUIRE_MESSAGE(failed_twice, get_action(n, action).DebugString());
  auto failing = get_action(n, action);
  CHECK(failing.action().status().successes() == 0);
  CHECK_MESSAGE(failing.action().status().last_error().find("shard") != std::string::npos,
                failing.action().status().last_error());
  CHECK(due() == timer);
  CHECK(n.audit_runs(id) == 1);
  // The ghost's lease ends: the node takes the shard again, and a retry requeues, once.
  REQUIRE(n.db->scalar("UPDATE shard_leases SET heartbeat_at = now() - interval '1 hour'"
                       " WHERE shard = "
                       + std::to_string(shard) + " RETURNING owner")
          == "ghost");
  CHECK(eventually(30s, [&] { return get_action(n, action).action().status().successes() == 1; }));
  CHECK(eventually(20s, [&] { return n.audit_runs(id) == 2; }));
  CHECK(eventually(10s, [&] { return n.stage("audit").queued() == 0; }));
  CHECK(n.audit_runs(id) == 2);
  // The owner's actor took the requeue as an event of its own.
  bool requeued = false;
  auto seen = n.inspect(id); // kept: the loop reads into it
  for (auto& e : seen.recent())
    requeued = requeued || (e.kind() == "other" && e.stage() == "audit");
  CHECK(requeued);
}

TEST_CASE("console: a scheduled offer_requeue whose occurrence was requeued before (its answer "
          "lost) is answered by the owner and requeues nothing again") {
  console_node n{{"--scheduled.poll=50ms"}};
  auto id = n.create(1);
  auto fresh = n.create(2);
  REQUIRE_FALSE(id.empty());
  REQUIRE_FALSE(fresh.empty());
  REQUIRE(eventually(20s, [&] { return n.audit_runs(id) == 1 && n.audit_runs(fresh) == 1; }));
  REQUIRE(eventually(20s, [&] { return n.stage("audit").queued() == 0; }));
  auto due = [&](const std::string& offer) {
    return n.scalar_int("SELECT due_at_us FROM stage_states WHERE offer_id = '" + offer
                        + "' AND stage_id = 'audit'");
  };
  auto timer = due(id);
  // An earlier attempt of the occurrence (its key `<action>/<occurrence ms>`) reached the owner
  // and was committed; its answer (the due time) was lost on the way back.
  auto at = wall_ms() + 500;
  REQUIRE(n.db->scalar("INSERT INTO offer_requests (offer_id, request_id, shard, answer)"
                       " SELECT offer_id, 'requeue-once/"
                       + std::to_string(at) + "', shard, convert_to('" + std::to_string(timer)
                       + "', 'UTF8') FROM offers WHERE offer_id = '" + id + "' RETURNING shard")
          != "");
  REQUIRE(create_action(n, "requeue-once", audit_requeue(id, at)).ok());
  // Beside it, a first firing of another occurrence: that one requeues.
  REQUIRE(create_action(n, "requeue-fresh", audit_requeue(fresh, at)).ok());
  REQUIRE(eventually(
    20s, [&] { return get_action(n, "requeue-once").action().status().successes() == 1; }));
  REQUIRE(eventually(
    20s, [&] { return get_action(n, "requeue-fresh").action().status().successes() == 1; }));
  CHECK(eventually(20s, [&] { return n.audit_runs(fresh) == 2; }));
  CHECK(eventually(10s, [&] { return n.stage("audit").queued() == 0; }));
  // The answered one: no second queue entry, no run.
  CHECK(due(id) == timer);
  CHECK(n.audit_runs(id) == 1);
  CHECK(n.audit_runs(fresh) == 2);
  CHECK(get_action(n, "requeue-once").action().status().total_failures() == 0);
}

TEST_CASE("console: off loopback the verbs need console.token, and refuse naming it") {
  SUBCASE("no token configured") {
    console_node n{{"--grpc.listen=0.0.0.0:0"}};
    auto s = n.stage_verb(true, "audit");
    CHECK(s.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(s.error_message().find("`console.token`") != std::string::npos);
    CHECK(n.scalar_int("SELECT count(*) FROM stage_pauses") == 0);
    // Reading is not a verb (the shards are all there once the node took their leases).
    CHECK(eventually(10s, [&] { return n.top().shards_size() == 8; }));
  }
  SUBCASE("a token configured") {
    console_node n{{"--grpc.listen=0.0.0.0:0", "--console.token=s3cret"}};
    auto none = n.stage_verb(true, "audit");
    CHECK(none.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(none.error_message().find("`console.token`") != std::string::npos);
    CHECK(n.stage_verb(true, "audit", "wrong").error_code() == grpc::StatusCode::UNAUTHENTICATED);
    {
      v1::DeadLettersVerbRequest req;
      req.add_ids(1);
      v1::DeadLettersVerbResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 30s);
      CHECK(n.admin->DiscardDeadLetters(&ctx, req, &resp).error_code()
            == grpc::StatusCode::UNAUTHENTICATED);
    }
    CHECK(n.scalar_int("SELECT count(*) FROM stage_pauses") == 0);
    child_process ok{GOSTCTL_PATH, {"--addr", n.addr, "pause", "audit", "--token", "s3cret"}};
    CHECK(ok.wait(30s) == 0);
    CHECK(n.scalar_int("SELECT count(*) FROM stage_pauses") == 1);
    // The token stays out of the configuration dump (status page) and the console.
    for (auto path : {"/status", "/"})
      CHECK(testing::http_get(static_cast<uint16_t>(n.http_port), path).find("s3cret")
            == std::string::npos);
  }
}

namespace {

/// Runs gostctl; returns {exit code, its output}.
std::pair<int, std::string> gostctl(const std::string& addr, std::vector<std::string> args) {
  args.insert(args.begin(), {"--addr", addr});
  child_process p{GOSTCTL_PATH, args};
  int rc = p.wait(60s);
  return {rc, p.output()};
}

/// The example application (examples/app): its stage `photo_count` keeps a photos.v1.PhotoCount,
/// a type gostctl is not built with.
struct example_node {
  testing::temp_db db;
  std::string port_file = temp_path("gost-example-console");
  child_process node{GOST_EXAMPLE_PATH,
                     {"--pg.dsn=" + db.dsn(), "--grpc.listen=127.0.0.1:0",
                      "--grpc.port_file=" + port_file, "--caf.listen=127.0.0.1:0",
                      "--shard.count=4", "--queue.poll=50ms", "--outbox.relay=false"}};
  std::string addr;
  int http_port = 0;

  example_node() {
    auto [port, http] = read_ports(node, port_file);
    http_port = http;
    addr = "127.0.0.1:" + std::to_string(port);
  }
  /// The body of /metrics.
  std::string metrics() {
    auto response = testing::http_get(static_cast<uint16_t>(http_port), "/metrics");
    REQUIRE(response.find("200 OK") != std::string::npos);
    return response.substr(response.find("\r\n\r\n") + 4);
  }
  ~example_node() {
    node.signal(SIGTERM);
    node.wait(30s);
    std::remove(port_file.c_str());
  }
};

/// The text after `"id": "` in gostctl's JSON of an offer.
std::string offer_id_in(const std::string& json) {
  static const std::regex id{R"re("id": "([0-9a-f]+)")re"};
  std::smatch m;
  return std::regex_search(json, m, id) ? m[1].str() : std::string{};
}

/// The part of a history listing from the line of change `#N ...` holding `header` to the next.
std::string change_block(const std::string& listing, const std::string& header) {
  auto at = listing.find(header);
  if (at == std::string::npos)
    return {};
  auto start = listing.rfind("\n#", at);
  auto end = listing.find("\n#", at);
  return listing.substr(start == std::string::npos ? 0 : start,
                        end == std::string::npos ? std::string::npos : end - start);
}

/// A live trace read on a thread of its own (AdminService.Trace).
struct trace_reader {
  trace_reader(v1::AdminService::Stub& admin, v1::TraceRequest req) {
    reader = admin.Trace(&ctx, req);
    thread = std::thread{[this] {
      v1::TraceEvent e;
      while (reader->Read(&e)) {
        std::lock_guard<std::mutex> guard{m};
        events.push_back(e);
      }
      auto s = reader->Finish();
      std::lock_guard<std::mutex> guard{m};
      status = s;
      ended = true;
    }};
  }
  ~trace_reader() {
    ctx.TryCancel();
    if (thread.joinable())
      thread.join();
  }
  size_t count() {
    std::lock_guard<std::mutex> guard{m};
    return events.size();
  }
  bool done() {
    std::lock_guard<std::mutex> guard{m};
    return ended;
  }
  std::vector<v1::TraceEvent> all() {
    std::lock_guard<std::mutex> guard{m};
    return events;
  }

  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::TraceEvent>> reader;
  std::mutex m;
  std::vector<v1::TraceEvent> events;
  grpc::Status status;
  bool ended = false;
  std::thread thread;
};

/// The value of an unlabelled gauge in the exposition text (-1: absent).
int64_t gauge(const std::string& text, const std::string& name) {
  auto pos = text.find("\n" + name + " ");
  if (pos == std::string::npos)
    return -1;
  return std::stoll(text.substr(pos + name.size() + 2));
}

v1::TraceRequest trace_of(const std::string& offer, int64_t max_events, int64_t for_ms) {
  v1::TraceRequest r;
  r.set_offer_id(offer);
  r.set_max_events(max_events);
  r.set_for_ms(for_ms);
  return r;
}

} // namespace

TEST_CASE("console: gostctl decodes states with the node's published types and lists an "
          "offer's history with diffs and sources") {
  example_node n;
  // The node publishes photo_count's state type with its file.
  auto [trc, types] = gostctl(n.addr, {"types"});
  REQUIRE_MESSAGE(trc == 0, types);
  CHECK(types.find("photo_count") != std::string::npos);
  CHECK(types.find("photos.v1.PhotoCount") != std::string::npos);

  auto [crc, created] =
    gostctl(n.addr, {"create", "--who", "alice", "--json",
                     R"({"seller_id":"s1","title":"Bike","status":"OFFER_STATUS_ACTIVE",)"
                     R"("photos":[{"url":"https://example.org/0"}]})"});
  REQUIRE_MESSAGE(crc == 0, created);
  auto id = offer_id_in(created);
  REQUIRE_FALSE(id.empty());
  CHECK(created.find("\"title\": \"Bike\"") != std::string::npos);
  // The stage ran: its state shows as JSON, though gostctl was never built with its type.
  auto offer = [&] { return gostctl(n.addr, {"offer", id}).second; };
  REQUIRE(eventually(20s, [&] { return offer().find(R"({"photos":1})") != std::string::npos; }));
  CHECK(offer().find("not published") == std::string::npos);

  auto [u1, up1] = gostctl(n.addr, {"update", id, "--price", "150", "--who", "bob"});
  REQUIRE_MESSAGE(u1 == 0, up1);
  auto [u2, up2] = gostctl(n.addr, {"update", id, "--who", "carol", "--json",
                                    R"({"photos":[{"url":"https://example.org/0"},)"
                                    R"({"url":"https://example.org/1"}]})"});
  REQUIRE_MESSAGE(u2 == 0, up2);
  CHECK(up2.find("\"title\": \"Bike\"") != std::string::npos); // fields --json left out stay
  REQUIRE(eventually(20s, [&] { return offer().find(R"({"photos":2})") != std::string::npos; }));

  auto [hrc, listing] = gostctl(n.addr, {"history", id});
  REQUIRE_MESSAGE(hrc == 0, listing);
  INFO(listing);
  // Newest first: the stage's second run, carol's photos, bob's price, the stage's first run,
  // alice's creation.
  auto created_at = listing.find("api, created by alice peer=");
  auto bob_at = listing.find("api by bob peer=");
  auto carol_at = listing.find("api by carol peer=");
  REQUIRE(created_at != std::string::npos);
  REQUIRE(bob_at != std::string::npos);
  REQUIRE(carol_at != std::string::npos);
  CHECK(carol_at < bob_at);
  CHECK(bob_at < created_at);
  auto creation = change_block(listing, "api, created by alice");
  CHECK(creation.find(" v1 ") != std::string::npos);
  CHECK(creation.find(R"(title: "" -> "Bike")") != std::string::npos);
  CHECK(creation.find(R"(photos[0] added: {"url":"https://example.org/0"})") != std::string::npos);
  auto price = change_block(listing, "api by bob");
  CHECK(price.find(" v2 ") != std::string::npos);
  CHECK(price.find(R"(price added: {"amount_minor":"150"})") != std::string::npos);
  CHECK(price.find("photos[") == std::string::npos); // only what changed
  auto photos = change_block(listing, "api by carol");
  CHECK(photos.find(" v3 ") != std::string::npos);
  CHECK(photos.find(R"(photos[1] added: {"url":"https://example.org/1"})") != std::string::npos);
  // The stage's runs: their source is the stage, their diff the decoded state's fields.
  auto run = change_block(listing, "photo_count\n");
  CHECK(run.find("state photo_count (type.googleapis.com/photos.v1.PhotoCount)")
        != std::string::npos);
  CHECK(listing.find("    photos: 1 -> 2") != std::string::npos);
  CHECK(listing.find("    photos: 0 -> 1") != std::string::npos);
  CHECK(listing.find("not published") == std::string::npos);
  // Paged: one change per page, the next one behind the token.
  auto [prc, page] = gostctl(n.addr, {"history", id, "--limit", "1"});
  REQUIRE(prc == 0);
  CHECK(page.find("1 change(s)") != std::string::npos);
  CHECK(page.find("more: gostctl history " + id + " --after ") != std::string::npos);
  auto [brc, bad] = gostctl(n.addr, {"history", id, "--limit", "0"});
  CHECK(brc == 2);
  CHECK(bad.find("--limit `0`") != std::string::npos);
}

TEST_CASE("console: gostctl create --json refuses a bad field, naming it, and stores nothing") {
  console_node n;
  auto [rc, out] =
    gostctl(n.addr, {"create", "--json", R"({"seller_id":"s","pricee":{"amount_minor":1}})"});
  CHECK(rc == 2);
  CHECK(out.find("pricee") != std::string::npos);
  auto [rc2, out2] =
    gostctl(n.addr, {"create", "--json", R"({"seller_id":"s","price":{"amount_minor":"x"}})"});
  CHECK(rc2 == 2);
  CHECK(out2.find("amount_minor") != std::string::npos);
  auto [rc3, out3] = gostctl(n.addr, {"create", "--json", R"({"seller_id": })"});
  CHECK(rc3 == 2);
  CHECK(out3.find("--json is not a gost.v1.Offer") != std::string::npos);
  auto [rc4, out4] = gostctl(n.addr, {"create", "--seller", "s", "--status", "sold"});
  CHECK(rc4 == 2);
  CHECK(out4.find("--status must be draft, active, inactive or banned, not `sold`")
        != std::string::npos);
  auto [rc5, out5] = gostctl(n.addr, {"create", "--seller", "s", "--price", "12O"});
  CHECK(rc5 == 2);
  CHECK(out5.find("--price `12O` is not a whole number") != std::string::npos);
  CHECK(n.scalar_int("SELECT count(*) FROM offers") == 0);
  CHECK(n.scalar_int("SELECT count(*) FROM offer_history") == 0);
  // A good one, --json with flags on top.
  auto [ok, made] = gostctl(n.addr, {"create", "--json", R"({"seller_id":"s","title":"from json"})",
                                     "--title", "from flag", "--photos", "u1,u2"});
  REQUIRE_MESSAGE(ok == 0, made);
  CHECK(made.find("\"title\": \"from flag\"") != std::string::npos);
  CHECK(made.find("\"url\": \"u2\"") != std::string::npos);
  CHECK(n.scalar_int("SELECT count(*) FROM offers") == 1);
}

TEST_CASE("console: gostctl offer shows the actor's recent events with their sources, what it "
          "waits on, the shard's epoch and write lag") {
  console_node n;
  auto id = n.create(1); // api create; audit queued by it (source api); expire a timer (1 s)
  REQUIRE_FALSE(id.empty());
  // expire runs a second after the creation (a timer): the offer turns inactive (version 2).
  REQUIRE(eventually(20s, [&] { return n.inspect(id).offer().version() >= 2; }));
  REQUIRE(n.update(id, "second") == 3); // the title only: it stays inactive
  REQUIRE(n.update(id, "third") == 4);
  // A console verb queues audit again: its run's source is `console`.
  {
    v1::RequeueOfferRequest req;
    req.set_offer_id(id);
    req.set_stage_id("audit");
    v1::RequeueOfferResponse resp;
    auto fn = [&](grpc::ClientContext* c, const v1::RequeueOfferRequest& r,
                  v1::RequeueOfferResponse* o) { return n.admin->RequeueOffer(c, r, o); };
    REQUIRE(call(fn, req, resp).ok());
  }
  auto has = [](const v1::InspectOfferResponse& r, const std::string& kind,
                const std::string& source, const std::string& stage) {
    for (auto& e : r.recent())
      if (e.kind() == kind && e.source() == source && e.stage() == stage && e.result() == "ok")
        return true;
    return false;
  };
  v1::InspectOfferResponse r;
  REQUIRE(eventually(20s, [&] {
    r = n.inspect(id);
    return has(r, "run", "console", "audit");
  }));
  INFO(r.DebugString());
  CHECK(r.resident());
  CHECK(has(r, "create", "api", ""));
  CHECK(has(r, "update", "api", ""));
  CHECK(has(r, "run", "api", "audit"));    // queued by the create
  CHECK(has(r, "run", "timer", "expire")); // its timer came due
  // Oldest first, each with its version after it: create v1, the updates v2 and v3.
  std::vector<int64_t> update_versions;
  int64_t last_at = 0;
  for (auto& e : r.recent()) {
    auto at = google::protobuf::util::TimeUtil::TimestampToMicroseconds(e.at());
    CHECK(at >= last_at);
    last_at = at;
    CHECK(e.offer_id() == id);
    CHECK(e.shard() == r.shard());
    if (e.kind() == "create")
      CHECK(e.version() == 1);
    if (e.kind() == "update")
      update_versions.push_back(e.version());
  }
  CHECK(update_versions == std::vector<int64_t>{3, 4});
  CHECK(r.waiting() == "nothing");
  CHECK(r.epoch() == 1);
  CHECK(r.write_lag_ms() >= 0);
  CHECK(r.owner() == n.top().node_id());
  CHECK(r.recent_size() <= 16); // console.recent_events

  // gostctl prints them.
  child_process ctl{GOSTCTL_PATH, {"--addr", n.addr, "offer", id}};
  REQUIRE(ctl.wait(30s) == 0);
  auto out = ctl.output();
  INFO(out);
  CHECK(std::regex_search(
    out, std::regex{R"(owner \S+  epoch 1  write lag \d+ ms  waiting on nothing)"}));
  CHECK(std::regex_search(out, std::regex{R"(run\s+timer\s+expire\s+ok\s+\d+ us  v2)"}));
  CHECK(std::regex_search(out, std::regex{R"(run\s+console\s+audit\s+ok)"}));
}

TEST_CASE("console: a node with console.recent_events=2 keeps the last two events") {
  console_node n{{"--console.recent_events=2"}};
  auto id = n.create(1);
  REQUIRE(eventually(20s, [&] { return n.inspect(id).offer().version() >= 2; })); // expired
  REQUIRE(n.update(id, "a") == 3);
  REQUIRE(n.update(id, "b") == 4);
  REQUIRE(n.update(id, "c") == 5);
  auto r = n.inspect(id);
  REQUIRE(r.recent_size() == 2);
  CHECK(r.recent(0).version() == 4);
  CHECK(r.recent(1).kind() == "update");
  CHECK(r.recent(1).version() == 5);
}

TEST_CASE("console: a trace streams an offer's events as they happen, stops at max_events and at "
          "for_ms, and a client that goes away ends the node's work") {
  console_node n;
  auto id = n.create(1);
  REQUIRE_FALSE(id.empty());
  // After its expire run (a second after the creation), only the test changes the offer.
  REQUIRE(eventually(20s, [&] { return n.inspect(id).offer().version() >= 2; }));
  CHECK(gauge(n.metrics(), "gost_console_traces_active") == 0);
  CHECK(gauge(n.metrics(), "gost_console_trace_subscriptions") == 0);

  SUBCASE("max_events") {
    trace_reader t{*n.admin, trace_of(id, 3, 60'000)};
    REQUIRE(eventually(10s, [&] { return gauge(n.metrics(), "gost_console_traces_active") == 1; }));
    for (int i = 0; i < 5 && !t.done(); ++i)
      n.update(id, "t" + std::to_string(i));
    REQUIRE(eventually(20s, [&] { return t.done(); }));
    CHECK(t.status.ok());
    auto events = t.all();
    REQUIRE(events.size() == 3);
    for (auto& e : events) {
      CHECK(e.offer_id() == id);
      CHECK(e.node() == n.top().node_id());
    }
    CHECK(events[0].kind() == "update");
    CHECK(events[0].source() == "api");
    CHECK(events[0].result() == "ok");
    CHECK(events[0].version() == 3);
  }
  SUBCASE("for_ms") {
    auto t0 = std::chrono::steady_clock::now();
    trace_reader t{*n.admin, trace_of(id, 1000, 1500)};
    REQUIRE(eventually(20s, [&] { return t.done(); }));
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(t.status.ok());
    CHECK(took >= 1400ms);
    CHECK(took < 10s);
  }
  SUBCASE("the client goes away") {
    auto t = std::make_unique<trace_reader>(*n.admin, trace_of(id, 1000, 600'000));
    REQUIRE(
      eventually(10s, [&] { return gauge(n.metrics(), "gost_console_trace_subscriptions") == 1; }));
    REQUIRE(n.update(id, "seen") == 3);
    REQUIRE(eventually(10s, [&] { return t->count() == 1; }));
    t.reset(); // cancels the call
    CHECK(eventually(10s, [&] {
      auto m = n.metrics();
      return gauge(m, "gost_console_traces_active") == 0
             && gauge(m, "gost_console_trace_subscriptions") == 0;
    }));
  }
  // Gone after each: nothing left subscribed.
  CHECK(eventually(10s, [&] { return gauge(n.metrics(), "gost_console_traces_active") == 0; }));
}

TEST_CASE("console: gostctl trace prints an offer's events, and a stage's events on the node") {
  console_node n;
  auto id = n.create(1);
  REQUIRE_FALSE(id.empty());
  REQUIRE(eventually(20s, [&] { return n.inspect(id).offer().version() >= 2; })); // expired
  child_process ctl{GOSTCTL_PATH, {"--addr", n.addr, "trace", id, "--max", "2", "--for", "60s"}};
  REQUIRE(eventually(10s, [&] { return gauge(n.metrics(), "gost_console_traces_active") == 1; }));
  REQUIRE(n.update(id, "one") > 0);
  REQUIRE(n.update(id, "two") > 0);
  REQUIRE(ctl.wait(30s) == 0);
  auto out = ctl.output();
  INFO(out);
  CHECK(std::regex_search(out, std::regex{R"(update\s+api\s+-\s+ok\s+\d+ us  v3)"}));
  CHECK(std::regex_search(out, std::regex{R"(update\s+api\s+-\s+ok\s+\d+ us  v4)"}));
  CHECK(out.find("trace ended: 2 event(s)") != std::string::npos);

  // --stage: every offer's runs of a stage on this node.
  child_process stage{GOSTCTL_PATH,
                      {"--addr", n.addr, "trace", "--stage", "audit", "--max", "3", "--json"}};
  REQUIRE(eventually(10s, [&] { return gauge(n.metrics(), "gost_console_traces_active") == 1; }));
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(n.create(10 + i));
  REQUIRE(stage.wait(30s) == 0);
  auto json = stage.output();
  INFO(json);
  for (auto& other : ids)
    CHECK(json.find("\"offer_id\":\"" + other + "\"") != std::string::npos);
  CHECK(json.find("\"stage\":\"audit\"") != std::string::npos);

  // Bounds are checked and named.
  child_process bad{GOSTCTL_PATH, {"--addr", n.addr, "trace", id, "--max", "20000"}};
  CHECK(bad.wait(30s) == 1);
  CHECK(bad.output().find("limits.trace_events_max") != std::string::npos);
  child_process neither{GOSTCTL_PATH, {"--addr", n.addr, "trace"}};
  CHECK(neither.wait(30s) == 2);
}

TEST_CASE("console: gostctl send delivers an event written as JSON to a durable entity, names a "
          "field that does not fit; top shows the kind and its lanes") {
  example_node n;
  // A deposit as JSON, encoded with the types the node publishes: gostctl is not built with
  // bank.v1. A retry with the same request id stores nothing twice.
  auto send = [&](const std::string& json, const std::string& request_id) {
    return gostctl(n.addr,
                   {"send", "bank.account", "carol", "--json", json, "--request-id", request_id});
  };
  auto [rc, out] = send(R"({"deposit":{"amount_minor":"250"}})", "c-1");
  REQUIRE_MESSAGE(rc == 0, out);
  CHECK(out.find("sent a bank.v1.AccountEvent to bank.account/carol") != std::string::npos);
  REQUIRE(send(R"({"deposit":{"amount_minor":"250"}})", "c-1").first == 0);
  REQUIRE(send(R"({"deposit":{"amountMinor":100}})", "c-2").first == 0); // JSON names work too
  auto entity = [&] { return gostctl(n.addr, {"entity", "bank.account", "carol"}).second; };
  CHECK(eventually(10s, [&] {
    return entity().find(R"("balance_minor":"350","transactions":"2")") != std::string::npos;
  }));
  INFO(entity());

  // What does not fit the kind's event type is named, and nothing is sent (exit code 2).
  auto [urc, unknown] = send(R"({"deposit":{"amount":"5"}})", "c-3");
  CHECK(urc == 2);
  CHECK(unknown.find("`deposit.amount` is not a field of bank.v1.Deposit") != std::string::npos);
  auto [vrc, value] = send(R"({"deposit":{"amount_minor":"lots"}})", "c-4");
  CHECK(vrc == 2);
  CHECK(value.find("amount_minor") != std::string::npos);
  auto [krc, kind] = gostctl(n.addr, {"send", "bank.nope", "x", "--json", "{}"});
  CHECK(krc == 2);
  CHECK(kind.find("`bank.nope` is not an entity kind of the node (its kinds: ")
        != std::string::npos);
  auto [drc, delay] =
    gostctl(n.addr, {"send", "bank.account", "carol", "--json", "{}", "--delay", "soon"});
  CHECK(drc == 2);
  CHECK(delay.find("--delay `soon`") != std::string::npos);
  CHECK(entity().find(R"("balance_minor":"350","transactions":"2")") != std::string::npos);

  // Top: the kind with its resident actor and runs, summed from its lanes.
  auto runs_of = [&](const v1::TopResponse& t) {
    for (auto& k : t.kinds())
      if (k.kind() == "bank.account")
        return k.runs();
    return uint64_t{0};
  };
  auto admin =
    v1::AdminService::NewStub(grpc::CreateChannel(n.addr, grpc::InsecureChannelCredentials()));
  auto top = [&] {
    v1::TopResponse resp;
    grpc::ClientContext ctx;
    auto s = admin->Top(&ctx, v1::TopRequest{}, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp;
  };
  CHECK(eventually(10s, [&] { return runs_of(top()) >= 2; }));
  auto t = top();
  INFO(t.DebugString());
  CHECK(t.entity_shards_size() == 4);
  uint64_t lane_runs = 0;
  for (auto& l : t.lanes())
    if (l.kind() == "bank.account") {
      lane_runs += l.runs();
      CHECK(l.failures() == 0);
      CHECK(l.dead_letters() == 0);
    }
  CHECK(lane_runs == runs_of(t));
  for (auto& k : t.kinds())
    if (k.kind() == "bank.account")
      CHECK(k.resident() >= 1);

  auto [trc, frame] = gostctl(n.addr, {"top", "--once", "--interval", "0.2"});
  REQUIRE_MESSAGE(trc == 0, frame);
  INFO(frame);
  CHECK(std::regex_search(frame, std::regex{R"(\nentity kinds: 4 shard\(s\), resident=\d+)"}));
  std::smatch m;
  REQUIRE(std::regex_search(frame, m, std::regex{R"(\nbank\.account\s+(\d+)\s)"}));
  CHECK(std::stoll(m[1].str()) >= 1);
}

TEST_CASE("console: gostctl ask prints an entity's reply as JSON, or its refusal; gostctl entity "
          "lists its named timers") {
  example_node n;
  auto ask = [&](const std::string& offer, const std::string& request_id) {
    return gostctl(n.addr,
                   {"ask", "watchlist", "dora", "--json",
                    R"({"add":{"offer_id":")" + offer + R"("}})", "--request-id", request_id});
  };
  auto [rc, out] = ask("o-1", "d-1");
  REQUIRE_MESSAGE(rc == 0, out);
  CHECK(out.find("watchlist/dora  version 1") != std::string::npos);
  // The reply, decoded with the reply type the node publishes (DescribeTypes).
  CHECK(std::regex_search(out, std::regex{R"("size":\s*1)"}));
  CHECK(std::regex_search(out, std::regex{R"("changed":\s*true)"}));
  // A retry gets the first answer.
  auto [rrc, again] = ask("o-1", "d-1");
  REQUIRE(rrc == 0);
  CHECK(again.find("version 1") != std::string::npos);

  // A refusal: the handler's code and message, exit 1.
  auto [brc, bad] = gostctl(n.addr, {"ask", "watchlist", "dora", "--json", R"({"add":{}})"});
  CHECK(brc == 1);
  CHECK(bad.find("refused (INVALID_ARGUMENT): add.offer_id is required") != std::string::npos);

  auto [erc, entity] = gostctl(n.addr, {"entity", "watchlist", "dora"});
  REQUIRE_MESSAGE(erc == 0, entity);
  CHECK(entity.find("version 1") != std::string::npos);
  CHECK(entity.find("named timer sweep: due ") != std::string::npos);
}

static constexpr auto& sample = testing::metric_sample;

TEST_CASE("console: every gRPC method is counted at the request edge by its full name and status "
          "code, and entity asks by outcome") {
  example_node n;
  auto ask = [&](const std::string& json) {
    return gostctl(n.addr, {"ask", "watchlist", "erin", "--json", json});
  };
  auto [rc, out] = ask(R"({"add":{"offer_id":"o-1"}})");
  REQUIRE_MESSAGE(rc == 0, out);
  auto [brc, bad] = ask(R"({"add":{}})"); // refused: INVALID_ARGUMENT
  REQUIRE_MESSAGE(brc == 1, bad);
  // A sent event the handler refuses when it runs.
  auto [src, sent] = gostctl(n.addr, {"send", "watchlist", "fred", "--json", R"({"add":{}})"});
  REQUIRE_MESSAGE(src == 0, sent);
  auto channel = grpc::CreateChannel(n.addr, grpc::InsecureChannelCredentials());
  {
    auto tasks = v1::TaskService::NewStub(channel);
    v1::GetTaskRequest req;
    req.set_task_id("not-a-task-id");
    v1::GetTaskResponse resp;
    grpc::ClientContext ctx;
    CHECK(tasks->GetTask(&ctx, req, &resp).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    auto admin = v1::AdminService::NewStub(channel);
    v1::TopResponse resp;
    grpc::ClientContext ctx;
    CHECK(admin->Top(&ctx, v1::TopRequest{}, &resp).ok());
  }
  testing::health_status(channel); // grpc.health.v1.Health, gRPC's own service

  // The refused send is counted once its run committed.
  REQUIRE(eventually(10s, [&] {
    return sample(n.metrics(), R"(gost_entity_sends_refused_total{kind="watchlist"})") == 1;
  }));
  // A status is counted before it leaves the node: what the client saw is in /metrics.
  auto body = n.metrics();
  INFO(body);
  auto calls = [&](const std::string& method, const std::string& code) {
    return sample(body,
                  "gost_grpc_requests_total{method=\"" + method + "\",code=\"" + code + "\"}");
  };
  CHECK(calls("/gost.v1.EntityService/Ask", "OK") == 1);
  CHECK(calls("/gost.v1.EntityService/Ask", "INVALID_ARGUMENT") == 1);
  CHECK(calls("/gost.v1.EntityService/Send", "OK") == 1);
  CHECK(calls("/gost.v1.TaskService/GetTask", "INVALID_ARGUMENT") == 1);
  CHECK(calls("/gost.v1.TaskService/GetTask", "OK") == 0); // present: OK is always shown
  CHECK(calls("/gost.v1.AdminService/Top", "OK") == 1);
  CHECK(calls("/grpc.health.v1.Health/Check", "OK") >= 1);
  CHECK(sample(body, R"(gost_grpc_request_seconds_count{method="/gost.v1.EntityService/Ask"})")
        == 2);
  CHECK(body.find("# TYPE gost_grpc_request_seconds histogram") != std::string::npos);
  // The asks as the entities answered them.
  CHECK(sample(body, R"(gost_entity_asks_total{kind="watchlist",outcome="reply"})") == 1);
  CHECK(sample(body, R"(gost_entity_asks_total{kind="watchlist",outcome="refused"})") == 1);
  CHECK(sample(body, R"(gost_entity_asks_total{kind="watchlist",outcome="error"})") == 0);
  CHECK(sample(body, R"(gost_entity_asks_total{kind="bank.account",outcome="reply"})") == 0);

  auto [prc, pout] = testing::promtool_check(body);
  CHECK_MESSAGE(prc == 0, "promtool check metrics failed: " << pout);
}

TEST_CASE("console: /metrics of the example app has its entity kinds, lanes and writers, and "
          "passes promtool") {
  example_node n;
  for (int i = 0; i < 3; ++i) {
    auto [rc, out] = gostctl(n.addr, {"send", "bank.account", "dave", "--json",
                                      R"({"deposit":{"amount_minor":"10"}})", "--request-id",
                                      "m-" + std::to_string(i)});
    REQUIRE_MESSAGE(rc == 0, out);
  }
  auto runs = [&] {
    return sample(n.metrics(), R"(gost_entity_kind_runs_total{kind="bank.account"})");
  };
  REQUIRE(eventually(10s, [&] { return runs() >= 3; }));
  auto body = n.metrics();
  INFO(body);
  CHECK(sample(body, R"(gost_entity_kind_actors_resident{kind="bank.account"})") >= 1);
  CHECK(sample(body, R"(gost_entity_kind_run_failures_total{kind="bank.account"})") == 0);
  // Every kind of the node, before it ran anything.
  CHECK(sample(body, R"(gost_entity_kind_runs_total{kind="watchlist"})") == 0);
  CHECK(sample(body, R"(gost_entity_kind_actors_resident{kind="watchlist"})") == 0);
  CHECK(body.find("\ngost_entity_lane_runs_total{kind=\"bank.account\",lane=")
        != std::string::npos);
  // The kinds' writers and actors, all kinds together.
  CHECK(sample(body, "gost_entity_write_sets_total") >= 3);
  CHECK(sample(body, "gost_entity_actors_spawned_total") >= 1);
  CHECK(body.find("# TYPE gost_entity_write_commit_seconds histogram") != std::string::npos);
  CHECK(body.find("\ngost_entity_write_lag_seconds{writer=\"0\"} ") != std::string::npos);
  // The scheduled actions' workers: one per shard the node holds.
  CHECK(eventually(10s, [&] { return sample(n.metrics(), "gost_scheduled_workers") == 4; }));
  CHECK(body.find("# TYPE gost_scheduled_attempts_succeeded_total counter") != std::string::npos);
  CHECK(body.find("# TYPE gost_scheduled_fire_lag_seconds histogram") != std::string::npos);
  // Each family once.
  std::set<std::string> seen;
  std::istringstream lines{body};
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("# TYPE ", 0) == 0)
      CHECK_MESSAGE(seen.insert(line).second, line);

  auto [rc, out] = testing::promtool_check(body);
  CHECK_MESSAGE(rc == 0, "promtool check metrics failed: " << out);
}
