// after_save hooks fed from the after-save topic of the real Kafka broker (GOST_TEST_KAFKA):
// an external stage server with an AfterSave RPC, gostd publishing and consuming. Every saved
// version reaches the hook, with the stage states saved, in version order per offer; a hook
// that fails is retried; a restarted node resumes after what was handled.
#include <doctest/doctest.h>

#include <cctype>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include <google/protobuf/wrappers.pb.h>
#include <grpcpp/grpcpp.h>

#include "gost/testing/kafka.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/testing/upper_stage.hpp"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/stage_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

/// The upper-casing stage (its state: the title it saw), recording every after-save event.
class recording_stage final : public testing::upper_stage {
public:
  struct seen {
    int64_t version;
    std::string changed_by;
    std::string state; ///< this stage's state in the event ("" when none)
  };
  std::mutex m;
  std::map<std::string, std::vector<seen>> events; ///< by offer id, in arrival order
  int failed_once = 0;

  grpc::Status AfterSave(grpc::ServerContext*, const v1::AfterSaveRequest* req,
                         v1::AfterSaveResponse*) override {
    std::lock_guard<std::mutex> g{m};
    if (failed_once == 0) {
      ++failed_once; // the very first call fails: gost must retry it
      return {grpc::StatusCode::INTERNAL, "the hook failed once on purpose"};
    }
    auto& e = req->event();
    std::string state;
    if (auto i = e.states().find("upper"); i != e.states().end()) {
      google::protobuf::StringValue v;
      i->second.UnpackTo(&v);
      state = v.value();
    }
    events[e.offer().id()].push_back({e.offer().version(), e.changed_by(), state});
    return grpc::Status::OK;
  }

  size_t distinct() {
    std::lock_guard<std::mutex> g{m};
    size_t n = 0;
    for (auto& [id, v] : events) {
      std::set<int64_t> vs;
      for (auto& s : v)
        vs.insert(s.version);
      n += vs.size();
    }
    return n;
  }
};

struct node {
  std::string port_file = "/tmp/gostd-hook-" + std::to_string(getpid());
  std::unique_ptr<child_process> proc;
  std::unique_ptr<v1::OfferService::Stub> stub;

  node(const testing::temp_db& db, const std::string& topic, int stage_port) {
    std::remove(port_file.c_str());
    proc = std::make_unique<child_process>(
      GOSTD_PATH,
      std::vector<std::string>{
        "--pg.dsn=" + db.dsn(), "--grpc.listen=127.0.0.1:0", "--grpc.port_file=" + port_file,
        "--shard.count=4", "--kafka.brokers=" + testing::kafka_brokers(), "--kafka.topic=" + topic,
        "--kafka.after_save_group=" + topic + "-hooks", "--stages.expire.enabled=false",
        "--queue.poll=50ms",
        "--stages.external=upper=127.0.0.1:" + std::to_string(stage_port)
          + ";interests=title;after_save=1"});
    int port = testing::served_port(*proc, port_file);
    REQUIRE_MESSAGE(port > 0, proc->output());
    stub = v1::OfferService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  void stop() {
    proc->signal(SIGTERM);
    CHECK_MESSAGE(proc->wait(30s) == 0, proc->output());
  }
};

} // namespace

TEST_CASE("after_save hooks get every saved version with its states, in order, at least once") {
  testing::temp_db db;
  recording_stage stage;
  int stage_port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &stage_port);
  b.RegisterService(&stage);
  auto server = b.BuildAndStart();
  REQUIRE(stage_port > 0);
  auto topic = "gost.hooks-" + std::to_string(getpid()) + "-"
               + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());

  constexpr int n = 30;
  std::vector<std::string> ids;
  {
    node first{db, topic, stage_port};
    for (int i = 0; i < n; ++i) {
      v1::CreateOfferRequest c;
      c.mutable_offer()->set_seller_id("hooks");
      c.mutable_offer()->set_title("bike " + std::to_string(i));
      v1::CreateOfferResponse r;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 10s);
      auto s = first.stub->CreateOffer(&ctx, c, &r);
      REQUIRE_MESSAGE(s.ok(), s.error_message());
      ids.push_back(r.offer().id());
    }
    // Version 1 (the create) and version 2 (the stage's change) of every offer.
    REQUIRE_MESSAGE(testing::eventually(60s, [&] { return stage.distinct() == 2 * n; }),
                    first.proc->output());
    first.stop();
  }
  {
    std::lock_guard<std::mutex> g{stage.m};
    CHECK(stage.failed_once == 1);
    for (auto& id : ids) {
      CAPTURE(id);
      auto& seen = stage.events[id];
      REQUIRE(seen.size() >= 2);
      // In version order: the first arrival of version 2 follows the first of version 1.
      CHECK(seen.front().version == 1);
      CHECK(seen.front().changed_by == "api");
      auto v2 = std::find_if(seen.begin(), seen.end(), [](auto& s) { return s.version == 2; });
      REQUIRE(v2 != seen.end());
      CHECK(v2->changed_by == "upper");
      CHECK(v2->state.rfind("bike ", 0) == 0); // the state saved with version 2
    }
  }

  // A new node in the same group resumes after what the first one handled: the new versions
  // arrive, the old ones are not delivered again.
  size_t before = 0;
  {
    std::lock_guard<std::mutex> g{stage.m};
    for (auto& [id, v] : stage.events)
      before += v.size();
  }
  node second{db, topic, stage_port};
  for (auto& id : ids) {
    v1::UpdateOfferRequest u;
    u.mutable_offer()->set_id(id);
    u.mutable_offer()->set_title("BIKE AGAIN");
    u.mutable_update_mask()->add_paths("title");
    v1::UpdateOfferResponse r;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = second.stub->UpdateOffer(&ctx, u, &r);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    CHECK(r.offer().version() == 3);
  }
  REQUIRE_MESSAGE(testing::eventually(60s, [&] { return stage.distinct() == 3 * n; }),
                  second.proc->output());
  second.stop();
  std::lock_guard<std::mutex> g{stage.m};
  size_t after = 0;
  for (auto& [id, v] : stage.events)
    after += v.size();
  CHECK(after - before == n); // only the n new versions: nothing handled was re-delivered
  server->Shutdown();
}
