// External stages (gost.v1.StageService): real stage servers in this process, gostd as a real
// process calling them. One works, one is down at first: the working one is not held up, the
// down one backs off, never dead-letters, and catches up once its server starts.
#include <doctest/doctest.h>

#include <atomic>
#include <cctype>
#include <csignal>
#include <fstream>

#include <google/protobuf/wrappers.pb.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/testing/upper_stage.hpp"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/stage_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

/// Stamps each offer once (a state of 1).
class stamp_stage final : public v1::StageService::Service {
public:
  grpc::Status ShouldProcess(grpc::ServerContext*, const v1::StageRequest* req,
                             v1::ShouldProcessResponse* resp) override {
    resp->set_decision(req->has_state() ? v1::ShouldProcessResponse::SKIP
                                        : v1::ShouldProcessResponse::PROCESS);
    return grpc::Status::OK;
  }
  grpc::Status Process(grpc::ServerContext*, const v1::StageRequest*,
                       v1::ProcessResponse* resp) override {
    google::protobuf::Int64Value one;
    one.set_value(1);
    resp->mutable_state()->PackFrom(one);
    return grpc::Status::OK;
  }
};

std::unique_ptr<grpc::Server> serve(grpc::Service* svc, const std::string& addr, int* port) {
  grpc::ServerBuilder b;
  b.AddListeningPort(addr, grpc::InsecureServerCredentials(), port);
  b.RegisterService(svc);
  return b.BuildAndStart();
}

/// A loopback port nobody listens on (bound once by the kernel's choice, then closed).
int unused_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  socklen_t len = sizeof(a);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

} // namespace

TEST_CASE("external stages are called over gRPC; one that is down backs off and catches up") {
  testing::temp_db db;
  testing::upper_stage up;
  int up_port = 0;
  auto up_server = serve(&up, "127.0.0.1:0", &up_port);
  REQUIRE(up_port > 0);
  int stamp_port = unused_port();

  auto port_file = "/tmp/gostd-ext-" + std::to_string(getpid());
  child_process node{GOSTD_PATH,
                     {"--pg.dsn=" + db.dsn(), "--grpc.listen=127.0.0.1:0",
                      "--grpc.port_file=" + port_file, "--caf.listen=127.0.0.1:0",
                      "--shard.count=4", "--outbox.relay=false", "--queue.poll=50ms",
                      "--stage.max_attempts=2",
                      "--stages.external=upper=127.0.0.1:" + std::to_string(up_port)
                        + ";interests=title;parallelism=4 stamp=127.0.0.1:"
                        + std::to_string(stamp_port) + ";deadline_ms=500;attempts=2"}};
  int port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  auto offers = v1::OfferService::NewStub(
    grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  constexpr int n = 20;
  for (int i = 0; i < n; ++i) {
    v1::CreateOfferRequest req;
    req.mutable_offer()->set_seller_id("ext");
    req.mutable_offer()->set_title("bike " + std::to_string(i));
    v1::CreateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = offers->CreateOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
  }

  // The working stage processes every offer while the other one's server is down.
  auto upper_done =
    "SELECT count(*) FROM stage_states WHERE stage_id = 'upper' AND state IS NOT NULL"
    " AND due_at_us IS NULL";
  REQUIRE_MESSAGE(
    testing::eventually(30s, [&] { return db.scalar(upper_done) == std::to_string(n); }),
    node.output());
  CHECK(up.processed.load() == n);
  CHECK(db.scalar("SELECT count(*) FROM offers WHERE version = 2") == std::to_string(n));
  v1::GetOfferRequest g;
  v1::GetOfferResponse got;
  {
    auto id = db.scalar("SELECT offer_id FROM offers LIMIT 1");
    g.mutable_ref()->set_id(id);
    grpc::ClientContext ctx;
    REQUIRE(offers->GetOffer(&ctx, g, &got).ok());
    CHECK(got.offer().title().rfind("BIKE ", 0) == 0);
  }
  // The down stage has failed runs, but its entries stay queued and nothing is dead-lettered
  // (max_attempts is 2: an ordinary failure would have been dead-lettered by now).
  CHECK(
    db.scalar("SELECT count(*) FROM stage_states WHERE stage_id = 'stamp' AND state IS NOT NULL")
    == "0");
  CHECK(db.scalar(
          "SELECT count(*) FROM stage_states WHERE stage_id = 'stamp' AND due_at_us IS NOT NULL")
        == std::to_string(n));
  CHECK(db.scalar("SELECT count(*) FROM dead_letters") == "0");
  // Logged as an outage of the stage's lane, not as failed attempts.
  CHECK(node.output().find("run unavailable kind=offer") != std::string::npos);
  CHECK(node.output().find("lane=stamp") != std::string::npos);
  CHECK(node.output().find("run failed kind=offer") == std::string::npos);

  // Its server starts: every offer gets stamped, still without dead letters.
  stamp_stage stamp;
  int bound = 0;
  auto stamp_server = serve(&stamp, "127.0.0.1:" + std::to_string(stamp_port), &bound);
  REQUIRE(bound == stamp_port);
  auto stamped = "SELECT count(*) FROM stage_states WHERE stage_id = 'stamp' AND state_version = 1"
                 " AND due_at_us IS NULL";
  REQUIRE_MESSAGE(testing::eventually(60s, [&] { return db.scalar(stamped) == std::to_string(n); }),
                  node.output());
  CHECK(db.scalar("SELECT count(*) FROM dead_letters") == "0");
  CHECK(up.processed.load() == n); // upper-casing again asked upper (title changed) only once

  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  stamp_server->Shutdown();
  up_server->Shutdown();
}

TEST_CASE("a bad external stage declaration stops the start with the key named") {
  testing::temp_db db;
  child_process node{GOSTD_PATH,
                     {"--pg.dsn=" + db.dsn(), "--grpc.listen=127.0.0.1:0",
                      "--stages.external=m=127.0.0.1:1;interests=colour"}};
  CHECK(node.wait(30s) != 0);
  CHECK(node.output().find("stages.external") != std::string::npos);
  CHECK(node.output().find("colour") != std::string::npos);
}
