// price.predict (examples/price_predict): an external stage written in Python, started as any
// external stage is. The test makes its venv (setup.sh, packages from PyPI, cached in the build
// directory), seeds priced offers through gostd, trains the model on them (train.py reads the
// store), starts the Python server and a gostd that declares it, and checks that new offers
// get their predicted price and confidence, that a change of a field outside the prediction's
// inputs does not re-predict, and that a change of an input does. Its /metrics (prometheus_client)
// count the predictions gostd caused and, called directly, each call by method and status
// code; promtool accepts the text.
#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <string>
#include <vector>

#include <google/protobuf/field_mask.pb.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include "gost/testing/http.hpp"
#include "gost/testing/metrics.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/testing/stage_state.hpp"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/stage_service.grpc.pb.h"
#include "gost/v1/state_service.grpc.pb.h"
#include "price/v1/prediction.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;
using testing::metric_sample;

namespace {

const std::string stage_dir = GOST_SOURCE_DIR "/examples/price_predict";
const std::string python = PRICE_PREDICT_VENV "/bin/python";
constexpr const char* stage_id = "price.predict";

struct offer_spec {
  std::string category;
  std::string region;
  int64_t price = 0; // minor units; 0: none
  bool red = false;  // attributes colour=red
};

v1::Offer make_offer(const offer_spec& s) {
  v1::Offer o;
  o.set_seller_id("price");
  o.set_title(s.category + " in " + s.region);
  o.set_category(s.category);
  o.mutable_address()->set_region(s.region);
  if (s.price > 0) {
    o.mutable_price()->set_amount_minor(s.price);
    o.mutable_price()->set_currency("RUB");
  }
  if (s.red)
    (*o.mutable_attributes())["colour"] = "red";
  return o;
}

/// Starts gostd on `db` and waits until it serves; `extra` adds arguments.
struct node {
  std::string port_file;
  child_process proc;
  std::unique_ptr<v1::OfferService::Stub> offers;
  std::shared_ptr<grpc::Channel> channel;

  node(const testing::temp_db& db, const std::string& name, std::vector<std::string> extra)
    : port_file("/tmp/gostd-price-" + name + "-" + std::to_string(getpid())),
      proc{GOSTD_PATH, [&] {
             std::vector<std::string> args{"--pg.dsn=" + db.dsn(),
                                           "--grpc.listen=127.0.0.1:0",
                                           "--grpc.port_file=" + port_file,
                                           "--caf.listen=127.0.0.1:0",
                                           "--shard.count=2",
                                           "--outbox.relay=false",
                                           "--queue.poll=50ms"};
             args.insert(args.end(), extra.begin(), extra.end());
             return args;
           }()} {
    int port = testing::served_port(proc, port_file);
    REQUIRE_MESSAGE(port > 0, proc.output());
    auto ch =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
    offers = v1::OfferService::NewStub(ch);
    channel = ch;
  }
  ~node() { unlink(port_file.c_str()); }

  std::string create(const offer_spec& s) {
    v1::CreateOfferRequest req;
    *req.mutable_offer() = make_offer(s);
    v1::CreateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto st = offers->CreateOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return resp.offer().id();
  }

  /// Sets the listed top-level fields of offer `id` from `o`.
  void update(const std::string& id, const v1::Offer& o, const std::string& mask) {
    v1::UpdateOfferRequest req;
    *req.mutable_offer() = o;
    req.mutable_offer()->set_id(id);
    req.mutable_update_mask()->add_paths(mask);
    v1::UpdateOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto st = offers->UpdateOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }

  v1::Offer get(const std::string& id) {
    v1::GetOfferRequest req;
    req.mutable_ref()->set_id(id);
    v1::GetOfferResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto st = offers->GetOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return resp.offer();
  }

  /// The stage's prediction for offer `id` and the state's version (0: none yet).
  std::pair<price::v1::Prediction, int64_t> prediction(const std::string& id) {
    auto r = testing::read_state<price::v1::Prediction>(channel, id, stage_id);
    return {r.state, r.version};
  }

  void stop() {
    proc.signal(SIGTERM);
    CHECK(proc.wait(30s) == 0);
  }
};

std::string run_to_end(const std::string& path, std::vector<std::string> args,
                       std::chrono::seconds timeout) {
  child_process p{path, std::move(args)};
  int rc = p.wait(timeout);
  REQUIRE_MESSAGE(rc == 0, path << " exited " << rc << ":\n" << p.output());
  return p.output();
}

} // namespace

TEST_CASE("price.predict, a stage in Python, predicts prices and re-predicts on input changes") {
  // The venv: made once per build directory (pip from PyPI), kept while nothing changed.
  run_to_end(stage_dir + "/setup.sh", {PRICE_PREDICT_VENV}, 600s);

  testing::temp_db db;
  {
    // Priced offers to learn from: bikes in Moscow (red ones: median 11000), in Kazan, cars.
    node seed{db, "seed", {}};
    for (const auto& s : std::vector<offer_spec>{{"bikes", "Moscow", 10000, true},
                                                 {"bikes", "Moscow", 11000, true},
                                                 {"bikes", "Moscow", 12000, true},
                                                 {"bikes", "Kazan", 5000},
                                                 {"bikes", "Kazan", 7000},
                                                 {"cars", "Moscow", 1000000},
                                                 {"cars", "Moscow", 1100000},
                                                 {"cars", "Moscow", 1200000}})
      seed.create(s);
    REQUIRE_MESSAGE(
      testing::eventually(30s, [&] { return db.scalar("SELECT count(*) FROM offers") == "8"; }),
      seed.proc.output());
    seed.stop();
  }

  auto model = "/tmp/price-model-" + std::to_string(getpid()) + ".json";
  auto trained =
    run_to_end(python, {stage_dir + "/train.py", "--dsn=" + db.dsn(), "--out=" + model}, 60s);
  CHECK(trained.find("samples=8 left_out=0 categories=2") != std::string::npos);

  auto server_port_file = "/tmp/price-server-" + std::to_string(getpid());
  auto metrics_port_file = "/tmp/price-metrics-" + std::to_string(getpid());
  child_process server{python,
                       {stage_dir + "/server.py", "--model=" + model, "--listen=127.0.0.1:0",
                        "--port-file=" + server_port_file, "--metrics-listen=127.0.0.1:0",
                        "--metrics-port-file=" + metrics_port_file}};
  int server_port = testing::served_port(server, server_port_file);
  REQUIRE_MESSAGE(server_port > 0, server.output());
  int metrics_port = testing::served_port(server, metrics_port_file);
  REQUIRE_MESSAGE(metrics_port > 0, server.output());
  CHECK(server.output().find("metrics port=" + std::to_string(metrics_port)) != std::string::npos);
  auto scrape = [&] {
    auto r = testing::http_get(static_cast<uint16_t>(metrics_port), "/metrics");
    REQUIRE_MESSAGE(testing::http_status(r) == 200, r);
    return r.substr(r.find("\r\n\r\n") + 4);
  };

  node n{db,
         "stage",
         {"--stages.external=" + std::string{stage_id} + "=127.0.0.1:" + std::to_string(server_port)
          + ";interests=category|address|attributes"}};
  auto red_moscow = n.create({"bikes", "Moscow", 0, true});
  auto kazan = n.create({"bikes", "Kazan"});
  auto boat = n.create({"boats", "Perm"});

  auto predicted = [&](const std::string& id, int64_t version) {
    return testing::eventually(30s, [&] { return n.prediction(id).second == version; });
  };
  for (const auto& id : {red_moscow, kazan, boat})
    REQUIRE_MESSAGE(predicted(id, 1), n.proc.output() << server.output());

  // category+region (3 offers) times the red bikes' ratio 1.1; the category alone (Kazan has
  // 2); every offer (no boats). A more specific median is more confident.
  auto p1 = n.prediction(red_moscow).first;
  CHECK(p1.price().amount_minor() == 12100);
  CHECK(p1.price().currency() == "RUB");
  CHECK(p1.basis() == "category+region");
  CHECK(p1.confidence() == doctest::Approx(0.5));
  auto p2 = n.prediction(kazan).first;
  CHECK(p2.price().amount_minor() == 10000);
  CHECK(p2.basis() == "category");
  CHECK(p2.samples() == 5);
  auto p3 = n.prediction(boat).first;
  CHECK(p3.price().amount_minor() == 11500);
  CHECK(p3.basis() == "global");
  CHECK(p3.confidence() > 0);
  CHECK(p1.confidence() > p2.confidence());
  CHECK(p2.confidence() > p3.confidence());
  // The stage keeps its prediction as its state: the offer itself is not changed.
  CHECK(n.get(red_moscow).version() == 1);

  // The city is part of `address`, an interest: gost asks the stage, which finds its inputs
  // (category, region, attributes) unchanged and skips. Waited for on the store: the offer's
  // version 2 and no entry left in the stage's queue.
  auto settled = [&](const std::string& id, int version) {
    return db.scalar("SELECT count(*) FROM offers o JOIN stage_states s USING (offer_id)"
                     " WHERE s.stage_id = '"
                     + std::string{stage_id} + "' AND s.due_at_us IS NULL AND o.offer_id = '" + id
                     + "' AND o.version = " + std::to_string(version))
           == "1";
  };
  REQUIRE(testing::eventually(30s, [&] { return settled(red_moscow, 1); }));
  auto moved = make_offer({"bikes", "Moscow"});
  moved.mutable_address()->set_city("Zelenograd");
  n.update(red_moscow, moved, "address");
  REQUIRE_MESSAGE(testing::eventually(30s, [&] { return settled(red_moscow, 2); }),
                  n.proc.output());
  CHECK(n.prediction(red_moscow).second == 1);
  CHECK(server.output().find("offer=" + red_moscow + " version=2") == std::string::npos);

  // An input changes: Kazan's bike moves to Moscow, and gets Moscow's median.
  n.update(kazan, make_offer({"bikes", "Moscow"}), "address");
  REQUIRE_MESSAGE(predicted(kazan, 2), n.proc.output() << server.output());
  auto p4 = n.prediction(kazan).first;
  CHECK(p4.price().amount_minor() == 11000);
  CHECK(p4.basis() == "category+region");
  CHECK(p4.inputs() != p2.inputs());
  CHECK(p4.model() == p2.model());

  auto moved_offer = n.get(red_moscow);
  auto stored = n.prediction(red_moscow).first;
  n.stop();

  // What gostd caused: four predictions (one per offer and Kazan's move), each basis counted
  // with its confidence; the city change answered skip. The model as loaded.
  const std::string pre = "gost_price_predict_";
  const std::string svc = "/gost.v1.StageService/";
  auto body = scrape();
  INFO(body);
  CHECK(metric_sample(body, pre + R"(predictions_total{basis="category+region"})") == 2);
  CHECK(metric_sample(body, pre + R"(predictions_total{basis="category"})") == 1);
  CHECK(metric_sample(body, pre + R"(predictions_total{basis="global"})") == 1);
  CHECK(metric_sample(body, pre + R"(prediction_confidence_count{basis="category+region"})") == 2);
  CHECK(metric_sample(body, pre + R"(prediction_confidence_bucket{basis="category",le="0.4"})")
        == 0); // Kazan's bike by its category: 0.7 * 5/8
  CHECK(metric_sample(body, pre + R"(prediction_confidence_bucket{basis="category",le="0.5"})")
        == 1);
  CHECK(metric_sample(body, pre + R"(decisions_total{decision="skip"})") >= 1);
  CHECK(metric_sample(body, pre + R"(requests_total{code="OK",method=")" + svc + R"(Process"})")
        >= 4);
  CHECK(metric_sample(body, pre + R"(model_info{currency="RUB",path=")" + model + R"(",version=")"
                              + p2.model() + R"("})")
        == 1);
  CHECK(metric_sample(body, pre + "model_samples") == 8);
  CHECK(metric_sample(body, pre + "model_categories") == 2);
  CHECK(metric_sample(body, pre + "model_loaded_timestamp_seconds") > 1.7e9);

  // Called directly, each call moves its own series by one: a ShouldProcess with the stored
  // prediction (skip) and one without (process), a Process (a prediction by category+region),
  // a Process without an offer (INVALID_ARGUMENT) and an AfterSave (UNIMPLEMENTED).
  auto stub = v1::StageService::NewStub(grpc::CreateChannel(
    "127.0.0.1:" + std::to_string(server_port), grpc::InsecureChannelCredentials()));
  auto ask = [&](auto method, const auto& req, auto* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    return (stub.get()->*method)(&ctx, req, resp);
  };
  v1::StageRequest with_state;
  with_state.set_stage_id(stage_id);
  *with_state.mutable_offer() = moved_offer;
  with_state.mutable_state()->PackFrom(stored);
  v1::StageRequest without_state = with_state;
  without_state.clear_state();
  v1::StageRequest no_offer;
  no_offer.set_stage_id(stage_id);
  v1::AfterSaveRequest after;
  after.set_stage_id(stage_id);

  auto value = [&](const std::string& text, const std::string& series) {
    return std::max(0.0, metric_sample(text, pre + series)); // absent: not counted yet
  };
  const std::vector<std::string> series{
    R"(requests_total{code="OK",method=")" + svc + R"(ShouldProcess"})",
    R"(requests_total{code="OK",method=")" + svc + R"(Process"})",
    R"(requests_total{code="INVALID_ARGUMENT",method=")" + svc + R"(Process"})",
    R"(requests_total{code="UNIMPLEMENTED",method=")" + svc + R"(AfterSave"})",
    R"(request_seconds_count{method=")" + svc + R"(Process"})",
    R"(decisions_total{decision="skip"})",
    R"(decisions_total{decision="process"})",
    R"(predictions_total{basis="category+region"})",
    R"(prediction_confidence_count{basis="category+region"})"};
  const std::vector<double> moves{2, 1, 1, 1, 2, 1, 1, 1, 1};
  auto before = scrape();
  v1::ShouldProcessResponse d1, d2;
  REQUIRE(ask(&v1::StageService::Stub::ShouldProcess, with_state, &d1).ok());
  CHECK(d1.decision() == v1::ShouldProcessResponse::SKIP);
  REQUIRE(ask(&v1::StageService::Stub::ShouldProcess, without_state, &d2).ok());
  CHECK(d2.decision() == v1::ShouldProcessResponse::PROCESS);
  v1::ProcessResponse r1, r2;
  REQUIRE(ask(&v1::StageService::Stub::Process, without_state, &r1).ok());
  CHECK(r1.has_state());
  CHECK(ask(&v1::StageService::Stub::Process, no_offer, &r2).error_code()
        == grpc::StatusCode::INVALID_ARGUMENT);
  v1::AfterSaveResponse a;
  auto as = ask(&v1::StageService::Stub::AfterSave, after, &a);
  CHECK(as.error_code() == grpc::StatusCode::UNIMPLEMENTED);
  CHECK(as.error_message().find("without after_save=1") != std::string::npos);
  auto after_calls = scrape();
  for (size_t i = 0; i < series.size(); ++i)
    CHECK_MESSAGE(value(after_calls, series[i]) - value(before, series[i]) == moves[i], series[i]);
  CHECK(server.output().find("refused code=INVALID_ARGUMENT stage=price.predict reason=no_offer")
        != std::string::npos);
  auto [rc, out] = testing::promtool_check(after_calls);
  CHECK_MESSAGE(rc == 0, "promtool check metrics failed: " << out);

  server.signal(SIGTERM);
  CHECK(server.wait(30s) == 0);
  unlink(model.c_str());
  unlink(server_port_file.c_str());
  unlink(metrics_port_file.c_str());
}
