// After-save events through the real Kafka broker (scripts/kafka.sh; GOST_TEST_KAFKA): every
// committed change of an offer is published, in version order per offer, and an unreachable
// broker loses nothing: the outbox keeps the events until a relay can deliver them; an event
// the broker refuses for good is parked and the events behind it go on.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include <csignal>

#include <grpcpp/grpcpp.h>
#include <librdkafka/rdkafka.h>

#include "gost/testing/http.hpp"
#include "gost/testing/kafka.hpp"
#include "gost/testing/metrics.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/events.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

/// Creates `n` offers and updates each `updates` times; returns id -> last version.
std::map<std::string, int64_t> load_offers(v1::OfferService::Stub& stub, int n, int updates) {
  std::map<std::string, int64_t> out;
  for (int i = 0; i < n; ++i) {
    v1::CreateOfferRequest c;
    c.mutable_offer()->set_seller_id("outbox-seller");
    c.mutable_offer()->set_title("v1");
    v1::CreateOfferResponse cr;
    grpc::ClientContext cctx;
    auto s = stub.CreateOffer(&cctx, c, &cr);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    auto id = cr.offer().id();
    out[id] = 1;
    for (int u = 0; u < updates; ++u) {
      v1::UpdateOfferRequest up;
      *up.mutable_offer() = cr.offer();
      up.mutable_offer()->set_title("v" + std::to_string(u + 2));
      up.clear_expected_version();
      v1::UpdateOfferResponse ur;
      grpc::ClientContext uctx;
      s = stub.UpdateOffer(&uctx, up, &ur);
      REQUIRE_MESSAGE(s.ok(), s.error_message());
      out[id] = ur.offer().version();
    }
  }
  return out;
}

struct gostd {
  std::string port_file = "/tmp/gostd-outbox-" + std::to_string(getpid());
  std::unique_ptr<child_process> proc;
  std::unique_ptr<v1::OfferService::Stub> stub;

  gostd(const testing::temp_db& db, const std::string& kafka, const std::string& topic) {
    std::remove(port_file.c_str());
    proc = std::make_unique<child_process>(
      GOSTD_PATH,
      std::vector<std::string>{"--pg.dsn=" + db.dsn(), "--grpc.listen=127.0.0.1:0",
                               "--grpc.port_file=" + port_file, "--shard.count=4",
                               "--kafka.brokers=" + kafka, "--kafka.topic=" + topic,
                               "--kafka.message_timeout=3s", "--stages.expire.enabled=false"});
    int port = testing::served_port(*proc, port_file);
    REQUIRE_MESSAGE(port > 0, proc->output());
    stub = v1::OfferService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  ~gostd() {
    proc->signal(SIGTERM);
    proc->wait(30s);
    std::remove(port_file.c_str());
  }

  std::map<std::string, int64_t> load(int n, int updates) { return load_offers(*stub, n, updates); }
};

/// Reads the topic from the start until `want` distinct (offer, version) pairs arrived (or a
/// minute passed); returns the versions seen per offer in arrival order.
std::map<std::string, std::vector<int64_t>> consume(const std::string& topic, size_t want) {
  std::map<std::string, std::vector<int64_t>> seen;
  std::set<std::pair<std::string, int64_t>> distinct;
  testing::consume_topic(
    topic,
    [&](const rd_kafka_message_t& m) {
      v1::OfferSaved e;
      REQUIRE(e.ParseFromArray(m.payload, static_cast<int>(m.len)));
      auto key = testing::key_of(m);
      CHECK(key == e.offer().id());
      seen[key].push_back(e.offer().version());
      distinct.emplace(key, e.offer().version());
    },
    [&] { return distinct.size() >= want; });
  return seen;
}

/// Every committed version of every offer arrived, and in version order per offer: the first
/// arrival of each version comes after the first arrival of the one before (a re-delivery
/// may repeat versions already seen).
void check_complete(const std::map<std::string, int64_t>& last,
                    const std::map<std::string, std::vector<int64_t>>& seen) {
  for (auto& [id, v] : last) {
    auto i = seen.find(id);
    REQUIRE_MESSAGE(i != seen.end(), id);
    std::set<int64_t> versions(i->second.begin(), i->second.end());
    for (int64_t x = 1; x <= v; ++x)
      CHECK_MESSAGE(versions.count(x) == 1, id << " version " << x);
    std::map<int64_t, size_t> first;
    for (size_t k = 0; k < i->second.size(); ++k)
      first.emplace(i->second[k], k);
    for (int64_t x = 2; x <= v; ++x)
      CHECK(first[x] > first[x - 1]);
  }
}

std::string fresh_topic() {
  std::mt19937_64 rng{std::random_device{}()};
  return "gost-outbox-" + std::to_string(rng());
}

} // namespace

TEST_CASE("every committed change is published once or more, in order per offer; rows then go") {
  testing::temp_db db;
  auto topic = fresh_topic();
  std::map<std::string, int64_t> last;
  {
    gostd node{db, testing::kafka_brokers(), topic};
    last = node.load(30, 3);
    REQUIRE_MESSAGE(testing::eventually(
                      30s, [&] { return db.scalar("SELECT count(*) FROM outbox_batches") == "0"; }),
                    node.proc->output());
  }
  auto seen = consume(topic, 30 * 4);
  check_complete(last, seen);
}

TEST_CASE("with the broker unreachable the events wait in PostgreSQL and go out once it is back") {
  testing::temp_db db;
  auto topic = fresh_topic();
  std::map<std::string, int64_t> last;
  {
    // Nothing listens on port 1: every delivery fails, the rows stay.
    gostd node{db, "127.0.0.1:1", topic};
    last = node.load(20, 2);
    // Past kafka.message_timeout the relay's round fails: the brokers' tracker says so once.
    REQUIRE_MESSAGE(
      testing::eventually(
        30s,
        [&] { return node.proc->output().find("kafka unreachable since=") != std::string::npos; }),
      node.proc->output());
    CHECK(db.scalar("SELECT coalesce(sum(events), 0) FROM outbox_batches")
          == std::to_string(20 * 3));
  }
  {
    // The broker is reachable again (here: the node restarts pointing at it).
    gostd node{db, testing::kafka_brokers(), topic};
    REQUIRE_MESSAGE(testing::eventually(
                      60s, [&] { return db.scalar("SELECT count(*) FROM outbox_batches") == "0"; }),
                    node.proc->output());
  }
  auto seen = consume(topic, 20 * 3);
  check_complete(last, seen);
}

TEST_CASE("the broker stops answering mid-load (SIGSTOP) and comes back: nothing is lost") {
  // The broker of this tier was started by scripts/kafka.sh, which keeps its pid here.
  auto dir = std::getenv("GOST_KAFKA_DIR");
  REQUIRE_MESSAGE(dir != nullptr,
                  "GOST_KAFKA_DIR (set by scripts/test.sh) names the broker's folder");
  std::ifstream pid_file{std::string{dir} + "/broker.pid"};
  pid_t broker = 0;
  REQUIRE_MESSAGE(static_cast<bool>(pid_file >> broker), "no broker.pid in GOST_KAFKA_DIR");
  testing::temp_db db;
  auto topic = fresh_topic();
  std::map<std::string, int64_t> last;
  {
    gostd node{db, testing::kafka_brokers(), topic};
    last = node.load(10, 2);
    REQUIRE(kill(broker, SIGSTOP) == 0);
    struct resume {
      pid_t pid;
      ~resume() { kill(pid, SIGCONT); } // whatever happens, the broker runs again
    } guard{broker};
    auto more = node.load(10, 2); // acknowledged: committed in PostgreSQL, Kafka or not
    last.insert(more.begin(), more.end());
    // Past kafka.message_timeout deliveries fail: the brokers' tracker says so once.
    REQUIRE_MESSAGE(
      testing::eventually(
        30s,
        [&] { return node.proc->output().find("kafka unreachable since=") != std::string::npos; }),
      node.proc->output());
    CHECK(db.scalar("SELECT coalesce(sum(events), 0) FROM outbox_batches") != "0");
    kill(broker, SIGCONT);
    REQUIRE_MESSAGE(testing::eventually(
                      90s, [&] { return db.scalar("SELECT count(*) FROM outbox_batches") == "0"; }),
                    node.proc->output());
    // Delivered again: one line says the brokers are back, and how long they were gone.
    auto out = node.proc->output();
    CHECK_MESSAGE(out.find("kafka reachable again after=") != std::string::npos, out);
    CHECK_MESSAGE(out.find("kafka unreachable since=") == out.rfind("kafka unreachable since="),
                  out);
  }
  auto seen = consume(topic, 20 * 3);
  check_complete(last, seen);
}

TEST_CASE("an event larger than the topic takes is parked, the events behind it flow, an operator "
          "sends it again") {
  testing::temp_db db;
  auto topic = fresh_topic();
  // The broker refuses a record batch above 16 KiB on this topic, for good.
  testing::create_topic(topic, {{"max.message.bytes", "16384"}});
  auto port_file = testing::temp_path("gostd-outbox-park");
  // One shard: every event is behind the large one in the same relay queue.
  child_process proc{
    GOSTD_PATH,
    testing::node_args(db, port_file,
                       {"--shard.count=1", "--kafka.brokers=" + testing::kafka_brokers(),
                        "--kafka.topic=" + topic, "--kafka.message_timeout=3s",
                        "--stages.expire.enabled=false"})};
  auto [grpc_port, http_port] = testing::read_ports(proc, port_file);
  auto addr = "127.0.0.1:" + std::to_string(grpc_port);
  auto stub =
    v1::OfferService::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  auto gostctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--addr", addr});
    child_process p{GOSTCTL_PATH, args};
    int rc = p.wait(30s);
    return std::pair{rc, p.output()};
  };

  v1::CreateOfferRequest c;
  c.mutable_offer()->set_seller_id("outbox-seller");
  c.mutable_offer()->set_title("large");
  c.mutable_offer()->set_description(std::string(40'000, 'x')); // a 40 KB event
  v1::CreateOfferResponse cr;
  grpc::ClientContext cctx;
  auto s = stub->CreateOffer(&cctx, c, &cr);
  REQUIRE_MESSAGE(s.ok(), s.error_message());
  auto large = cr.offer().id();
  auto last = load_offers(*stub, 20, 1); // committed after the large one

  // The rows behind the large one are published and deleted; the large one is parked.
  REQUIRE_MESSAGE(testing::eventually(
                    60s, [&] { return db.scalar("SELECT count(*) FROM outbox_batches") == "0"; }),
                  proc.output());
  CHECK(db.scalar("SELECT count(*) FROM outbox_parked") == "1");
  CHECK(db.scalar("SELECT msg_key || ' ' || reason || ' ' || topic FROM outbox_parked")
        == large + " message_too_large " + topic);
  auto seen = consume(topic, 20 * 2);
  check_complete(last, seen);
  CHECK(seen.count(large) == 0);

  // What the operator sees: one log line, the metric, the console's list.
  auto log = proc.output();
  CHECK_MESSAGE(log.find("outbox row parked id=") != std::string::npos, log);
  CHECK(log.find("key=" + large) != std::string::npos);
  auto metrics = testing::http_get(static_cast<uint16_t>(http_port), "/metrics");
  CHECK_MESSAGE(
    testing::metric_sample(metrics, "gost_outbox_parked_total{reason=\"message_too_large\"}") == 1,
    metrics);
  auto [rc, listed] = gostctl({"parked"});
  CHECK_MESSAGE(rc == 0, listed);
  CHECK_MESSAGE(listed.find(large) != std::string::npos, listed);
  CHECK(listed.find("message_too_large") != std::string::npos);
  auto id = db.scalar("SELECT id FROM outbox_parked");
  auto [bad_rc, bad] = gostctl({"retry-parked", "x"});
  CHECK(bad_rc == 2);
  CHECK_MESSAGE(bad.find("`x` is not a parked row id") != std::string::npos, bad);

  // The operator raises the topic's limit and sends it again: it arrives.
  testing::alter_topic(topic, {{"max.message.bytes", "1048588"}});
  auto [retry_rc, retried] = gostctl({"retry-parked", id});
  CHECK_MESSAGE(retry_rc == 0, retried);
  CHECK_MESSAGE(retried.find("1 parked row(s) back in the outbox") != std::string::npos, retried);
  REQUIRE_MESSAGE(testing::eventually(
                    60s, [&] { return db.scalar("SELECT count(*) FROM outbox_batches") == "0"; }),
                  proc.output());
  CHECK(db.scalar("SELECT count(*) FROM outbox_parked") == "0");
  bool arrived = false;
  testing::consume_topic(
    topic, [&](const rd_kafka_message_t& m) { arrived = arrived || testing::key_of(m) == large; },
    [&] { return arrived; });
  CHECK_MESSAGE(arrived, proc.output());
  auto [empty_rc, empty] = gostctl({"parked"});
  CHECK(empty_rc == 0);
  CHECK(empty.find("no parked outbox rows") != std::string::npos);
  proc.signal(SIGTERM);
  proc.wait(30s);
  std::remove(port_file.c_str());
}
