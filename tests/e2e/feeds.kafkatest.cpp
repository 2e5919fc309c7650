// The feed exchange (offer store side) through the real Kafka broker (GOST_TEST_KAFKA): load
// requests in, per-offer results and a terminal summary out; duplicates, rejects, re-delivered
// batches, and the offers missing from a load deleted or made manual.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>

#include <grpcpp/grpcpp.h>
#include <librdkafka/rdkafka.h>

#include "gost/testing/kafka.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/feed_exchange.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;
using outcome = v1::OfferResult;

namespace {

rd_kafka_t* client(rd_kafka_type_t type,
                   std::vector<std::pair<const char*, std::string>> settings) {
  char err[512];
  auto* conf = rd_kafka_conf_new();
  settings.emplace_back("bootstrap.servers", testing::kafka_brokers());
  for (auto& [k, v] : settings)
    REQUIRE(rd_kafka_conf_set(conf, k, v.c_str(), err, sizeof(err)) == RD_KAFKA_CONF_OK);
  auto* rk = rd_kafka_new(type, conf, err, sizeof(err));
  REQUIRE_MESSAGE(rk != nullptr, err);
  return rk;
}

/// The feed processor's side: sends requests, reads responses.
struct processor {
  std::string requests, responses;
  rd_kafka_t* producer;
  rd_kafka_t* consumer;
  /// Responses per task, in arrival order.
  std::map<std::string, std::vector<v1::FeedResponse>> got;

  processor(std::string req, std::string resp)
    : requests(std::move(req)), responses(std::move(resp)) {
    producer = client(RD_KAFKA_PRODUCER, {{"enable.idempotence", "true"}});
    consumer = client(RD_KAFKA_CONSUMER,
                      {{"group.id", responses + "-reader"}, {"auto.offset.reset", "earliest"}});
    rd_kafka_poll_set_consumer(consumer);
    auto* topics = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(topics, responses.c_str(), RD_KAFKA_PARTITION_UA);
    REQUIRE(rd_kafka_subscribe(consumer, topics) == RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(topics);
  }
  ~processor() {
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
    rd_kafka_flush(producer, 5000);
    rd_kafka_destroy(producer);
  }

  void send(const v1::FeedRequest& r) {
    auto bytes = r.SerializeAsString();
    REQUIRE(rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(requests.c_str()),
                              RD_KAFKA_V_KEY(r.seller_id().data(), r.seller_id().size()),
                              RD_KAFKA_V_VALUE(bytes.data(), bytes.size()),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)
            == RD_KAFKA_RESP_ERR_NO_ERROR);
    REQUIRE(rd_kafka_flush(producer, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR);
  }

  /// Reads responses until `task` has `ends` terminal messages (or a minute passed).
  bool wait_end(const std::string& task, int ends = 1) {
    auto count = [&] {
      int n = 0;
      for (auto& r : got[task])
        n += r.has_end() ? 1 : 0;
      return n;
    };
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (count() < ends && std::chrono::steady_clock::now() < deadline) {
      auto* m = rd_kafka_consumer_poll(consumer, 200);
      if (m == nullptr)
        continue;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        v1::FeedResponse r;
        REQUIRE(r.ParseFromArray(m->payload, static_cast<int>(m->len)));
        got[r.task_id()].push_back(r);
      }
      rd_kafka_message_destroy(m);
    }
    return count() >= ends;
  }

  /// Outcome per external id (the last result for it) of a task.
  std::map<std::string, outcome::Outcome> outcomes(const std::string& task) {
    std::map<std::string, outcome::Outcome> out;
    for (auto& r : got[task])
      if (r.has_result())
        out[r.result().external_id()] = r.result().outcome();
    return out;
  }
};

v1::FeedRequest batch(const std::string& task, const std::string& id,
                      const std::vector<std::pair<std::string, std::string>>& offers) {
  v1::FeedRequest r;
  r.set_seller_id("feed-seller");
  r.set_namespace_("shop");
  r.set_task_id(task);
  r.mutable_batch()->set_batch_id(id);
  for (auto& [ext, title] : offers) {
    auto* o = r.mutable_batch()->add_offers();
    o->set_external_id(ext);
    o->set_title(title);
  }
  return r;
}

v1::FeedRequest end(const std::string& task, v1::FeedEnd::Missing missing, int batches) {
  v1::FeedRequest r;
  r.set_seller_id("feed-seller");
  r.set_namespace_("shop");
  r.set_task_id(task);
  r.mutable_end()->set_missing(missing);
  r.mutable_end()->set_batches(batches);
  return r;
}

std::vector<std::pair<std::string, std::string>> items(int from, int to, const std::string& title) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = from; i < to; ++i)
    out.emplace_back("e" + std::to_string(i), title);
  return out;
}

/// The terminal message is the task's last, and comes once.
void check_terminal_last(processor& p, const std::string& task) {
  auto& rs = p.got[task];
  REQUIRE_FALSE(rs.empty());
  CHECK(rs.back().has_end());
  for (size_t i = 0; i + 1 < rs.size(); ++i)
    CHECK_FALSE(rs[i].has_end());
}

} // namespace

TEST_CASE("feed loads are applied by external id; missing offers are deleted or made manual") {
  testing::temp_db db;
  auto tag = std::to_string(getpid()) + "-"
             + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  processor p{"gost.feed-req-" + tag, "gost.feed-resp-" + tag};
  auto port_file = "/tmp/gostd-feeds-" + std::to_string(getpid());
  std::remove(port_file.c_str());
  child_process node{GOSTD_PATH,
                     {"--pg.dsn=" + db.dsn(), "--grpc.listen=127.0.0.1:0",
                      "--grpc.port_file=" + port_file, "--shard.count=4",
                      "--kafka.brokers=" + testing::kafka_brokers(),
                      "--kafka.topic=gost.saved-" + tag, "--feed.requests_topic=" + p.requests,
                      "--feed.responses_topic=" + p.responses, "--feed.group=gost.feeds-" + tag,
                      "--stages.expire.enabled=false"}};
  int port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  auto offers = v1::OfferService::NewStub(
    grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  // The seller's own (manual) offer in the same namespace: no load may touch it.
  {
    v1::CreateOfferRequest c;
    c.mutable_offer()->set_seller_id("feed-seller");
    c.mutable_offer()->set_namespace_("shop");
    c.mutable_offer()->set_external_id("manual-1");
    c.mutable_offer()->set_title("by hand");
    v1::CreateOfferResponse r;
    grpc::ClientContext ctx;
    REQUIRE(offers->CreateOffer(&ctx, c, &r).ok());
  }
  auto feed_offers = [&] {
    return db.scalar(
      "SELECT count(*) FROM offers WHERE seller_id = 'feed-seller' AND external_id <> 'manual-1'");
  };

  // Load 1: 15 offers in two batches, one without an external id, two duplicates.
  auto b1 = batch("t1", "b1", items(0, 10, "bike"));
  b1.mutable_batch()->add_offers()->set_title("no external id");
  auto* dup = b1.mutable_batch()->add_offers();
  dup->set_external_id("e3");
  dup->set_title("e3 again");
  p.send(b1);
  auto b2 = batch("t1", "b2", items(10, 15, "bike"));
  auto* dup2 = b2.mutable_batch()->add_offers();
  dup2->set_external_id("e5");
  dup2->set_title("e5 in another batch");
  p.send(b2);
  p.send(end("t1", v1::FeedEnd::DELETE, 2));
  REQUIRE_MESSAGE(p.wait_end("t1"), node.output());
  check_terminal_last(p, "t1");
  auto s1 = p.got["t1"].back().end();
  CHECK(s1.added() == 15);
  CHECK(s1.duplicates() == 2);
  CHECK(s1.rejected() == 1);
  CHECK(s1.deleted() == 0);
  CHECK(s1.batches() == 2);
  size_t rejected_with_reason = 0;
  for (auto& r : p.got["t1"])
    if (r.has_result() && r.result().outcome() == outcome::REJECTED)
      rejected_with_reason += r.result().reason().find("external_id") != std::string::npos;
  CHECK(rejected_with_reason == 1);
  CHECK(feed_offers() == "15");
  CHECK(db.scalar("SELECT count(*) FROM offers WHERE external_id = 'e3'") == "1");

  // Load 2: e0..e9 (e0 retitled), its batch delivered twice; e10 comes with an invalid price
  // (rejected, but carried: it must not be deleted); e11..e14 are missing: deleted.
  auto c1 = batch("t2", "c1", items(0, 10, "bike"));
  c1.mutable_batch()->mutable_offers(0)->set_title("red bike");
  auto* bad = c1.mutable_batch()->add_offers();
  bad->set_external_id("e10");
  bad->set_title("bike");
  bad->mutable_price()->set_currency("RUBL");
  p.send(c1);
  p.send(c1); // re-delivered
  p.send(end("t2", v1::FeedEnd::DELETE, 1));
  REQUIRE_MESSAGE(p.wait_end("t2"), node.output());
  check_terminal_last(p, "t2");
  auto s2 = p.got["t2"].back().end();
  CHECK(s2.updated() == 1);
  CHECK(s2.unchanged() == 9);
  CHECK(s2.deleted() == 4);
  CHECK(s2.rejected() == 1);
  CHECK(s2.duplicates() == 0);
  auto o2 = p.outcomes("t2");
  CHECK(o2["e12"] == outcome::DELETED);
  CHECK(o2["e10"] == outcome::REJECTED);
  CHECK(feed_offers() == "11");
  CHECK(db.scalar("SELECT count(*) FROM offers WHERE external_id = 'e10'") == "1");
  CHECK(db.scalar("SELECT count(*) FROM offers WHERE external_id = 'manual-1'") == "1");
  CHECK(db.scalar("SELECT version FROM offers WHERE external_id = 'e0'") == "2");
  CHECK(db.scalar("SELECT version FROM offers WHERE external_id = 'e1'")
        == "1"); // unchanged: no write

  // A re-delivered end of a finished load repeats the summary and deletes nothing more.
  p.send(end("t2", v1::FeedEnd::DELETE, 1));
  REQUIRE(p.wait_end("t2", 2));
  CHECK(p.got["t2"].back().end().deleted() == 4);
  CHECK(feed_offers() == "11");

  // Load 3 with MAKE_MANUAL: e5..e10 are missing and become manual offers.
  p.send(batch("t3", "d1", items(0, 5, "bike")));
  p.send(end("t3", v1::FeedEnd::MAKE_MANUAL, 1));
  REQUIRE_MESSAGE(p.wait_end("t3"), node.output());
  check_terminal_last(p, "t3");
  CHECK(p.got["t3"].back().end().made_manual() == 6);
  CHECK(feed_offers() == "11");
  v1::GetOfferRequest g;
  g.mutable_ref()->mutable_key()->set_seller_id("feed-seller");
  g.mutable_ref()->mutable_key()->set_namespace_("shop");
  g.mutable_ref()->mutable_key()->set_external_id("e7");
  v1::GetOfferResponse got;
  grpc::ClientContext ctx;
  REQUIRE(offers->GetOffer(&ctx, g, &got).ok());
  CHECK(got.offer().source() == v1::OFFER_SOURCE_MANUAL);
  CHECK(got.offer().title() == "bike");

  // A task id of another seller is refused: nothing of that load is touched.
  auto foreign = end("t3", v1::FeedEnd::DELETE, 1);
  foreign.set_seller_id("someone-else");
  p.send(foreign);
  auto marker = end("t4", v1::FeedEnd::DELETE, 0); // handled after the refused one
  marker.set_namespace_("empty-namespace");
  p.send(marker);
  REQUIRE(p.wait_end("t4"));
  CHECK(p.got["t3"].size() == 5 + 6 + 1); // d1's five results, six made manual, one end
  CHECK(node.output().find("belongs to feed-seller/shop") != std::string::npos);
  CHECK(feed_offers() == "11");

  // Load 5: an offer over a limit (a title of 513 characters; the default limit is 512) is
  // rejected alone, naming the key; the offer at the limit and the rest of its batch are stored.
  auto limits_batch = [](v1::FeedRequest r) {
    r.set_namespace_("limits");
    return r;
  };
  auto e1 = limits_batch(
    batch("t5", "f1",
          {{"at", std::string(512, 't')}, {"past", std::string(513, 't')}, {"plain", "bike"}}));
  p.send(e1);
  p.send(limits_batch(end("t5", v1::FeedEnd::DELETE, 1)));
  REQUIRE_MESSAGE(p.wait_end("t5"), node.output());
  auto s5 = p.got["t5"].back().end();
  CHECK(s5.added() == 2);
  CHECK(s5.rejected() == 1);
  auto o5 = p.outcomes("t5");
  CHECK(o5["at"] == outcome::ADDED);
  CHECK(o5["plain"] == outcome::ADDED);
  CHECK(o5["past"] == outcome::REJECTED);
  for (auto& r : p.got["t5"])
    if (r.has_result() && r.result().external_id() == "past")
      CHECK_MESSAGE(r.result().reason().find("offer.title is 513 characters; the limit is 512 "
                                             "(limits.title_max_chars)")
                      != std::string::npos,
                    r.result().reason());
  CHECK(db.scalar("SELECT count(*) FROM offers WHERE namespace = 'limits'") == "2");

  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
}
