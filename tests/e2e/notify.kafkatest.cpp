// The notify.on_change stage against the real Kafka broker (GOST_TEST_KAFKA) and a webhook in
// this process: offers published (created active, or a draft made active), expired (by the
// `expire` stage) and rejected (banned), gostd killed with SIGKILL while the notifications
// flow, a second gostd resuming. Every expected (offer, version) notification arrives on the
// topic and at the webhook; repeats (at least once) carry the same key and the same content;
// on the topic an offer's notifications come in version order.
#include <doctest/doctest.h>

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>

#include <grpcpp/grpcpp.h>

#include "gost/testing/http_server.hpp"
#include "gost/testing/kafka.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/notify.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

/// What arrived for one key, in arrival order.
struct arrivals {
  std::vector<std::string> bodies;  ///< Kafka: the value; webhook: the JSON body
  std::vector<std::string> headers; ///< Idempotency-Key of each
  std::vector<std::string> keys;    ///< Kafka: the message key ("" for the webhook)
};

struct webhook {
  std::mutex m;
  std::map<std::string, arrivals> got; ///< by Idempotency-Key
  int requests = 0;
  testing::http_server srv{[this](const testing::http_server::call& c) {
    std::lock_guard<std::mutex> g{m};
    auto k = c.headers.count("idempotency-key") ? c.headers.at("idempotency-key") : "";
    auto& a = got[k];
    a.bodies.push_back(c.body);
    a.headers.push_back(k);
    ++requests;
    return testing::http_server::reply{200, {}};
  }};
  size_t distinct() {
    std::lock_guard<std::mutex> g{m};
    return got.size();
  }
  int count() {
    std::lock_guard<std::mutex> g{m};
    return requests;
  }
};

struct node {
  std::string port_file = "/tmp/gostd-notify-" + std::to_string(getpid());
  std::unique_ptr<child_process> proc;
  std::unique_ptr<v1::OfferService::Stub> stub;

  node(const testing::temp_db& db, const std::string& topic, const std::string& hook_url) {
    std::remove(port_file.c_str());
    proc = std::make_unique<child_process>(
      GOSTD_PATH,
      std::vector<std::string>{
        "--pg.dsn=" + db.dsn(), "--grpc.listen=127.0.0.1:0", "--grpc.port_file=" + port_file,
        "--shard.count=4", "--kafka.brokers=" + testing::kafka_brokers(), "--kafka.topic=" + topic,
        "--kafka.after_save_group=" + topic + "-hooks", "--kafka.session_timeout=6s",
        "--stages.expire.enabled=true", "--stages.expire.after=3s", "--queue.poll=50ms",
        "--stages.notify.enabled=true", "--stages.notify.topic=" + topic + "-notify",
        "--stages.notify.webhook=" + hook_url, "--stages.notify.allow_private=true"});
    int port = testing::served_port(*proc, port_file);
    REQUIRE_MESSAGE(port > 0, proc->output());
    stub = v1::OfferService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }

  std::string create(const std::string& title, v1::OfferStatus status) {
    v1::CreateOfferRequest c;
    c.mutable_offer()->set_seller_id("notify");
    c.mutable_offer()->set_title(title);
    c.mutable_offer()->set_status(status);
    c.set_request_id(title);
    v1::CreateOfferResponse r;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto s = stub->CreateOffer(&ctx, c, &r);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return r.offer().id();
  }

  /// Sets the status (version 2). Retried while the node cannot serve it yet (a restarted node
  /// taking the shards of the killed one); the request id makes a retry apply nothing twice.
  void set_status(const std::string& id, v1::OfferStatus status) {
    v1::UpdateOfferRequest u;
    u.mutable_offer()->set_id(id);
    u.mutable_offer()->set_status(status);
    u.mutable_update_mask()->add_paths("status");
    u.set_request_id("status-" + id);
    v1::UpdateOfferResponse r;
    grpc::Status s;
    bool answered = testing::eventually(60s, [&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 10s);
      s = stub->UpdateOffer(&ctx, u, &r);
      return s.error_code() != grpc::StatusCode::UNAVAILABLE
             && s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED;
    });
    REQUIRE_MESSAGE(answered, s.error_message());
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    REQUIRE(r.offer().version() == 2);
  }

  v1::Offer get(const std::string& id) {
    v1::GetOfferRequest g;
    g.mutable_ref()->set_id(id);
    v1::GetOfferResponse r;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    auto s = stub->GetOffer(&ctx, g, &r);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return r.offer();
  }
};

std::string header_of(const rd_kafka_message_t& m, const char* name) {
  rd_kafka_headers_t* hdrs = nullptr;
  if (rd_kafka_message_headers(&m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return {};
  const void* v = nullptr;
  size_t n = 0;
  if (rd_kafka_header_get_last(hdrs, name, &v, &n) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return {};
  return {static_cast<const char*>(v), n};
}

/// Every arrival of a key carries that key and the same content as the first.
void check_repeats(const std::string& where, const std::map<std::string, arrivals>& got) {
  for (auto& [key, a] : got) {
    CAPTURE(where);
    CAPTURE(key);
    for (size_t i = 0; i < a.bodies.size(); ++i) {
      CHECK(a.headers[i] == key);
      CHECK(a.bodies[i] == a.bodies.front());
    }
  }
}

} // namespace

TEST_CASE("notify.on_change: every notification arrives after a kill -9, repeats alike") {
  testing::temp_db db;
  webhook hook;
  auto topic = "gost.notify-" + std::to_string(getpid()) + "-"
               + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());

  // Three groups of offers, each with the notifications its versions must make:
  //   created active: published at 1, expired (the expire stage) at 2;
  //   a draft made active: published at 2, expired at 3;
  //   a draft banned: rejected at 2.
  constexpr int n = 20;
  std::vector<std::string> created, drafts, banned;
  std::map<std::string, v1::NotificationKind> expected; ///< by key
  auto key = [](const std::string& id, int v) { return id + ":" + std::to_string(v); };

  {
    node first{db, topic, hook.srv.url("/offers")};
    for (int i = 0; i < n; ++i) {
      created.push_back(first.create("active " + std::to_string(i), v1::OFFER_STATUS_ACTIVE));
      drafts.push_back(first.create("draft " + std::to_string(i), v1::OFFER_STATUS_DRAFT));
      banned.push_back(first.create("banned " + std::to_string(i), v1::OFFER_STATUS_DRAFT));
    }
    for (int i = 0; i < n / 2; ++i) {
      first.set_status(drafts[i], v1::OFFER_STATUS_ACTIVE);
      first.set_status(banned[i], v1::OFFER_STATUS_BANNED);
    }
    // Mid-stream: some notifications arrived, most have not (expiries are still to come).
    REQUIRE_MESSAGE(testing::eventually(60s, [&] { return hook.count() >= n / 2; }),
                    first.proc->output());
    first.proc->signal(SIGKILL);
    CHECK(first.proc->wait(10s) == 128 + SIGKILL);
  }
  int before_restart = hook.count();
  MESSAGE("webhook requests before the kill: " << before_restart);

  node second{db, topic, hook.srv.url("/offers")};
  for (int i = n / 2; i < n; ++i) {
    second.set_status(drafts[i], v1::OFFER_STATUS_ACTIVE);
    second.set_status(banned[i], v1::OFFER_STATUS_BANNED);
  }
  for (auto& id : created) {
    expected[key(id, 1)] = v1::NOTIFICATION_KIND_PUBLISHED;
    expected[key(id, 2)] = v1::NOTIFICATION_KIND_EXPIRED;
  }
  for (auto& id : drafts) {
    expected[key(id, 2)] = v1::NOTIFICATION_KIND_PUBLISHED;
    expected[key(id, 3)] = v1::NOTIFICATION_KIND_EXPIRED;
  }
  for (auto& id : banned)
    expected[key(id, 2)] = v1::NOTIFICATION_KIND_REJECTED;

  // The topic, read from its start until every expected key came.
  std::map<std::string, arrivals> kafka_got;
  std::map<std::string, std::vector<int64_t>> kafka_order; ///< by offer: versions in arrival order
  size_t kafka_messages = 0;
  auto kafka_done = [&] {
    for (auto& [k, kind] : expected)
      if (!kafka_got.count(k))
        return false;
    return true;
  };
  testing::consume_topic(
    topic + "-notify",
    [&](const rd_kafka_message_t& m) {
      ++kafka_messages;
      v1::OfferNotification msg;
      REQUIRE(msg.ParseFromString(testing::value_of(m)));
      auto& a = kafka_got[msg.key()];
      a.bodies.push_back(testing::value_of(m));
      a.headers.push_back(header_of(m, "Idempotency-Key"));
      a.keys.push_back(testing::key_of(m));
      CHECK(testing::key_of(m) == msg.offer_id()); // keyed by offer: in order per offer
      kafka_order[msg.offer_id()].push_back(msg.version());
      auto want = expected.find(msg.key());
      REQUIRE_MESSAGE(want != expected.end(), "an unexpected notification: " << msg.key());
      CHECK(msg.kind() == want->second);
    },
    kafka_done, 180s);
  CHECK_MESSAGE(kafka_done(), second.proc->output());

  auto hook_done = [&] {
    std::lock_guard<std::mutex> g{hook.m};
    for (auto& [k, kind] : expected)
      if (!hook.got.count(k))
        return false;
    return true;
  };
  CHECK_MESSAGE(testing::eventually(120s, hook_done), second.proc->output());

  // The offers are as the notifications say.
  for (auto& id : created)
    CHECK(second.get(id).status() == v1::OFFER_STATUS_INACTIVE);
  for (auto& id : drafts) {
    auto o = second.get(id);
    CHECK(o.status() == v1::OFFER_STATUS_INACTIVE);
    CHECK(o.version() == 3);
  }
  for (auto& id : banned)
    CHECK(second.get(id).status() == v1::OFFER_STATUS_BANNED);

  check_repeats("kafka", kafka_got);
  {
    std::lock_guard<std::mutex> g{hook.m};
    check_repeats("webhook", hook.got);
    for (auto& [k, a] : hook.got) {
      CAPTURE(k);
      CHECK(expected.count(k) == 1); // nothing but the expected notifications
      CHECK(a.bodies.front().find("\"key\":\"" + k + "\"") != std::string::npos);
    }
    // The webhook's JSON and the topic's message tell the same.
    for (auto& [k, a] : kafka_got) {
      v1::OfferNotification msg;
      REQUIRE(msg.ParseFromString(a.bodies.front()));
      auto h = hook.got.find(k);
      REQUIRE(h != hook.got.end());
      CHECK(h->second.bodies.front().find("\"offer_id\":\"" + msg.offer_id() + "\"")
            != std::string::npos);
    }
  }
  // On the topic, an offer's first arrivals come in version order.
  for (auto& [id, versions] : kafka_order) {
    CAPTURE(id);
    std::vector<int64_t> firsts;
    std::set<int64_t> seen;
    for (auto v : versions)
      if (seen.insert(v).second)
        firsts.push_back(v);
    CHECK(std::is_sorted(firsts.begin(), firsts.end()));
  }

  auto hook_requests = hook.count();
  MESSAGE("expected notifications: " << expected.size() << "; kafka messages: " << kafka_messages
                                     << " (duplicates " << kafka_messages - kafka_got.size()
                                     << "); webhook requests: " << hook_requests << " (duplicates "
                                     << hook_requests - hook.distinct() << ")");
  CHECK(kafka_got.size() == expected.size());
  CHECK(hook.distinct() == expected.size());
  second.proc->signal(SIGTERM);
  CHECK_MESSAGE(second.proc->wait(30s) == 0, second.proc->output());
}
