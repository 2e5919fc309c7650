// The `notify.on_change` stage: it never runs on offers; its hook sends a notified transition
// to Kafka (a fake sender here) and to a local webhook (the real outbound client), with the
// same key; a failure of either throws unavailable_error (the consumer retries it, never gives
// up) and is counted; a version without a notified transition sends nothing.
#include <doctest/doctest.h>

#include <mutex>

#include "gost/core/unavailable.hpp"
#include "gost/notify/notify_rules.hpp"
#include "gost/notify/on_change.hpp"
#include "gost/testing/http_server.hpp"

using namespace gost;
using namespace gost::notify;
using namespace std::chrono_literals;

namespace {

v1::OfferSaved published(int64_t version) {
  v1::OfferSaved e;
  e.mutable_offer()->set_id("o-9");
  e.mutable_offer()->set_version(version);
  e.mutable_offer()->set_status(v1::OFFER_STATUS_ACTIVE);
  e.set_previous_status(v1::OFFER_STATUS_DRAFT);
  e.set_changed_by("api");
  return e;
}

struct fake_kafka {
  struct msg {
    std::string topic, key, value;
    std::vector<std::pair<std::string, std::string>> headers;
  };
  std::mutex m;
  std::vector<msg> got;
  std::string fail; ///< returned when set
  kafka_send sender() {
    return [this](const std::string& t, const std::string& k, const std::string& v,
                  const std::vector<std::pair<std::string, std::string>>& h) {
      std::lock_guard<std::mutex> g{m};
      if (!fail.empty())
        return fail;
      got.push_back({t, k, v, h});
      return std::string{};
    };
  }
};

struct webhook {
  std::mutex m;
  std::vector<testing::http_server::call> calls;
  int status = 200;
  testing::http_server srv{[this](const testing::http_server::call& c) {
    std::lock_guard<std::mutex> g{m};
    calls.push_back(c);
    return testing::http_server::reply{status, {}};
  }};
};

} // namespace

TEST_CASE("the stage never runs on offers and wants the after-save events") {
  auto s = make_on_change_stage({});
  v1::Offer o;
  o.set_status(v1::OFFER_STATUS_ACTIVE);
  CHECK(s->should_process(o, nullptr).what == decision::kind::skip);
  CHECK(s->wants_after_save());
}

TEST_CASE("a published version goes to Kafka and to the webhook with one key") {
  fake_kafka kafka;
  webhook hook;
  on_change_options opts;
  opts.topic = "offers.notifications";
  opts.send_kafka = kafka.sender();
  opts.webhook = hook.srv.url("/notify");
  opts.allow_private = true;
  auto stats = opts.stats;
  auto s = make_on_change_stage(opts);

  s->after_save(published(4));
  REQUIRE(kafka.got.size() == 1);
  auto& m = kafka.got[0];
  CHECK(m.topic == "offers.notifications");
  CHECK(m.key == "o-9"); // by offer: one offer's notifications keep their order
  REQUIRE(m.headers.size() == 1);
  CHECK(m.headers[0].first == "Idempotency-Key");
  CHECK(m.headers[0].second == "o-9:4");
  v1::OfferNotification n;
  REQUIRE(n.ParseFromString(m.value));
  CHECK(n.key() == "o-9:4");
  CHECK(n.kind() == v1::NOTIFICATION_KIND_PUBLISHED);

  REQUIRE(hook.calls.size() == 1);
  auto& c = hook.calls[0];
  CHECK(c.method == "POST");
  CHECK(c.path == "/notify");
  CHECK(c.headers.at("idempotency-key") == "o-9:4");
  CHECK(c.headers.at("content-type") == "application/json");
  CHECK(c.body == to_json(n));
  CHECK(stats->sent[0][v1::NOTIFICATION_KIND_PUBLISHED].load() == 1);
  CHECK(stats->sent[1][v1::NOTIFICATION_KIND_PUBLISHED].load() == 1);

  // Delivered again (at least once): the same key and the same bytes.
  s->after_save(published(4));
  REQUIRE(kafka.got.size() == 2);
  CHECK(kafka.got[1].value == kafka.got[0].value);
  REQUIRE(hook.calls.size() == 2);
  CHECK(hook.calls[1].body == hook.calls[0].body);
  CHECK(hook.calls[1].headers.at("idempotency-key") == "o-9:4");
}

TEST_CASE("a version without a notified transition sends nothing") {
  fake_kafka kafka;
  webhook hook;
  on_change_options opts;
  opts.topic = "t";
  opts.send_kafka = kafka.sender();
  opts.webhook = hook.srv.url("/notify");
  opts.allow_private = true;
  auto s = make_on_change_stage(opts);
  auto e = published(5);
  e.set_previous_status(v1::OFFER_STATUS_ACTIVE); // still active: a change of content
  s->after_save(e);
  auto d = published(6);
  d.set_deleted(true);
  s->after_save(d);
  CHECK(kafka.got.empty());
  CHECK(hook.calls.empty());
}

TEST_CASE("a failed send throws unavailable_error, counted, and the retry sends it") {
  fake_kafka kafka;
  webhook hook;
  on_change_options opts;
  opts.topic = "t";
  opts.send_kafka = kafka.sender();
  opts.webhook = hook.srv.url("/notify");
  opts.allow_private = true;
  auto stats = opts.stats;
  auto s = make_on_change_stage(opts);

  kafka.fail = "Local: Message timed out";
  CHECK_THROWS_AS(s->after_save(published(2)), unavailable_error);
  CHECK(stats->failures[0].load() == 1);
  CHECK(hook.calls.empty()); // Kafka first: the webhook is not asked on this attempt

  kafka.fail.clear();
  hook.status = 503;
  try {
    s->after_save(published(2));
    FAIL("a 503 must throw");
  } catch (const unavailable_error& e) {
    CHECK(std::string{e.what()}.find("HTTP 503") != std::string::npos);
    CHECK(std::string{e.what()}.find("o-9") != std::string::npos);
  }
  CHECK(stats->failures[1].load() == 1);

  hook.status = 204;
  s->after_save(published(2));
  CHECK(stats->sent[1][v1::NOTIFICATION_KIND_PUBLISHED].load() == 1);
  REQUIRE(hook.calls.size() == 2);
  CHECK(hook.calls[0].headers.at("idempotency-key") == hook.calls[1].headers.at("idempotency-key"));
  CHECK(kafka.got.size() == 2); // the webhook's failed attempt sent to Kafka too: a repeat
}

TEST_CASE("a webhook on a private address is refused unless allowed, naming the key") {
  webhook hook;
  on_change_options opts;
  opts.webhook = hook.srv.url("/notify");
  auto s = make_on_change_stage(opts);
  try {
    s->after_save(published(3));
    FAIL("a private address must be refused");
  } catch (const unavailable_error& e) {
    CHECK(std::string{e.what()}.find("stages.notify.allow_private") != std::string::npos);
  }
  CHECK(hook.calls.empty());
}
