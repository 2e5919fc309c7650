// kill -9 in the middle of work: nothing acknowledged is lost, every queued timer still fires,
// and every offer is processed exactly once in terms of committed state.
#include <doctest/doctest.h>

#include <fstream>

#include <grpcpp/grpcpp.h>

#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/offer_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

int wait_port(child_process& p, const std::string& port_file) {
  int port = testing::served_port(p, port_file);
  REQUIRE_MESSAGE(port > 0, p.output());
  return port;
}

} // namespace

TEST_CASE("kill -9 with timers pending: after a restart every timer fires exactly once") {
  testing::temp_db db;
  auto port_file = "/tmp/gostd-crash-" + std::to_string(getpid());
  std::vector<std::string> args{
    "--pg.dsn=" + db.dsn(),     "--grpc.listen=127.0.0.1:0", "--grpc.port_file=" + port_file,
    "--caf.listen=127.0.0.1:0", "--shard.count=8",           "--stages.expire.after=4s",
    "--queue.poll=50ms",        "--outbox.relay=false"};
  constexpr int n = 200;
  {
    child_process node{GOSTD_PATH, args};
    auto port = wait_port(node, port_file);
    auto stub = v1::OfferService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
    for (int i = 0; i < n; ++i) {
      v1::CreateOfferRequest req;
      req.mutable_offer()->set_seller_id("crash-seller");
      req.mutable_offer()->set_external_id("sku-" + std::to_string(i));
      req.mutable_offer()->set_status(v1::OFFER_STATUS_ACTIVE);
      v1::CreateOfferResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 10s);
      auto s = stub->CreateOffer(&ctx, req, &resp);
      REQUIRE_MESSAGE(s.ok(), s.error_message());
    }
    // Every create was acknowledged, so its offer and its expiry timer are committed: each
    // offer either still waits for its timer or has expired already (a slow machine).
    CHECK(db.scalar("SELECT count(*) FROM offers") == std::to_string(n));
    CHECK(db.scalar("SELECT (SELECT count(*) FROM stage_states WHERE stage_id = 'expire' AND "
                    "due_at_us IS NOT NULL)"
                    " + (SELECT count(*) FROM offers WHERE version = 2)")
          == std::to_string(n));
    node.signal(SIGKILL);
    CHECK(node.wait(10s) == 128 + SIGKILL);
  }
  std::remove(port_file.c_str());
  // No node runs: nothing may have expired offers the node had not committed.
  auto inactive_at_kill = std::stoi(db.scalar("SELECT count(*) FROM offers WHERE version = 2"));
  child_process again{GOSTD_PATH, args};
  wait_port(again, port_file);
  bool all_fired = testing::eventually(60s, [&] {
    return db.scalar("SELECT count(*) FROM stage_states WHERE due_at_us IS NOT NULL") == "0"
           && db.scalar("SELECT count(*) FROM offers WHERE version = 2") == std::to_string(n);
  });
  CHECK_MESSAGE(all_fired, again.output());
  MESSAGE("offers expired before the kill: " << inactive_at_kill);
  // Exactly once in committed state: version 2 (create + one expiry), status inactive, and one
  // outbox event per committed change.
  CHECK(db.scalar("SELECT count(*) FROM offers WHERE version <> 2") == "0");
  CHECK(db.scalar("SELECT coalesce(sum(events), 0) FROM outbox_batches") == std::to_string(2 * n));
  CHECK(db.scalar("SELECT count(*) FROM dead_letters") == "0");
  again.signal(SIGTERM);
  CHECK(again.wait(30s) == 0);
  std::remove(port_file.c_str());
}
