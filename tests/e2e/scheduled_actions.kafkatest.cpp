// A scheduled Kafka action on gostd against the real broker: the message is published with
// its key and value and the occurrence's Idempotency-Key header, once per occurrence, and the
// action's status counts the success.
#include <doctest/doctest.h>

#include <random>

#include <grpcpp/grpcpp.h>
#include <librdkafka/rdkafka.h>

#include "gost/testing/kafka.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
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

struct consumed {
  std::string key;
  std::string value;
  std::string idempotency_key; ///< the header `Idempotency-Key` (empty: none)
};

/// The messages of `topic` from its start, until `want` arrived or 60 s passed.
std::vector<consumed> consume(const std::string& topic, size_t want) {
  std::vector<consumed> out;
  testing::consume_topic(
    topic,
    [&](const rd_kafka_message_t& m) {
      consumed c{testing::key_of(m), testing::value_of(m), {}};
      rd_kafka_headers_t* hs = nullptr;
      const void* v = nullptr;
      size_t len = 0;
      if (rd_kafka_message_headers(&m, &hs) == RD_KAFKA_RESP_ERR_NO_ERROR
          && rd_kafka_header_get_last(hs, "Idempotency-Key", &v, &len)
               == RD_KAFKA_RESP_ERR_NO_ERROR)
        c.idempotency_key.assign(static_cast<const char*>(v), len);
      out.push_back(std::move(c));
    },
    [&] { return out.size() >= want; });
  return out;
}

} // namespace

TEST_CASE("a scheduled Kafka action publishes its message on the broker") {
  testing::temp_db db;
  auto topic = "gost-actions-" + std::to_string(std::mt19937_64{std::random_device{}()}());
  auto port_file = "/tmp/gost-actions-kafka-" + std::to_string(getpid());
  child_process node{GOSTD_PATH,
                     {"--pg.dsn=" + db.dsn(), "--grpc.listen=127.0.0.1:0",
                      "--grpc.port_file=" + port_file, "--caf.listen=127.0.0.1:0",
                      "--shard.count=4", "--outbox.relay=false", "--scheduled.poll=20ms",
                      "--kafka.brokers=" + testing::kafka_brokers()}};
  auto port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  auto api = v1::ScheduledActionService::NewStub(
    grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  v1::CreateScheduledActionRequest req;
  req.set_id("kafka-1");
  auto at = now_ms() + 200;
  req.mutable_spec()->set_start_at_ms(at);
  req.mutable_spec()->mutable_retry()->set_backoff_ms(500);
  auto* k = req.mutable_spec()->mutable_kafka();
  k->set_topic(topic);
  k->set_key("seller-7");
  k->set_value("reindex");
  v1::CreateScheduledActionResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  auto s = api->Create(&ctx, req, &resp);
  REQUIRE_MESSAGE(s.ok(), s.error_message());
  auto got = consume(topic, 1);
  REQUIRE_MESSAGE(got.size() == 1, node.output());
  CHECK(got[0].key == "seller-7");
  CHECK(got[0].value == "reindex");
  // The occurrence's idempotency key, as HTTP actions send it: a consumer de-duplicates on it.
  CHECK(got[0].idempotency_key == "kafka-1/" + std::to_string(at));
  REQUIRE(testing::eventually(30s, [&] {
    v1::GetScheduledActionRequest g;
    g.set_id("kafka-1");
    v1::GetScheduledActionResponse gr;
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + 10s);
    return api->Get(&c, g, &gr).ok() && gr.action().status().successes() == 1;
  }));
}
