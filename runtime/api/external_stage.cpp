#include "api/external_stage.hpp"

#include <thread>

#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>

#include "api/status.hpp"
#include "gost/core/backoff.hpp"
#include "gost/v1/stage_service.grpc.pb.h"

namespace gost::runtime {

namespace {

using google::protobuf::util::TimeUtil;

stage_clock::time_point to_time(const google::protobuf::Timestamp& t) {
  return stage_clock::time_point{std::chrono::microseconds{TimeUtil::TimestampToMicroseconds(t)}};
}

/// A channel that notices a service coming back within seconds: gRPC's default reconnect
/// back-off grows to two minutes, which would keep a restarted stage idle that long.
std::shared_ptr<grpc::Channel> channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

class external_stage final : public stage {
public:
  explicit external_stage(config::external_stage_config cfg)
    : cfg_(std::move(cfg)), stub_(v1::StageService::NewStub(channel(cfg_.address))) {}

  decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
    return decision::process(); // asked remotely, from the pool, before Process
  }

  stage_result process(const v1::Offer& offer, const google::protobuf::Any* state) const override {
    v1::StageRequest req;
    req.set_stage_id(cfg_.id);
    *req.mutable_offer() = offer;
    if (state != nullptr)
      *req.mutable_state() = *state;
    stage_result out;
    v1::ShouldProcessResponse asked;
    call("ShouldProcess",
         [&](grpc::ClientContext* c) { return stub_->ShouldProcess(c, req, &asked); });
    switch (asked.decision()) {
      case v1::ShouldProcessResponse::PROCESS: break;
      case v1::ShouldProcessResponse::TIMER: out.timer = to_time(asked.at()); return out;
      default: return out; // SKIP (and values of a newer protocol): nothing to do
    }
    v1::ProcessResponse done;
    call("Process", [&](grpc::ClientContext* c) { return stub_->Process(c, req, &done); });
    if (done.has_offer())
      out.offer = done.offer();
    if (done.has_state())
      out.state = done.state();
    if (done.has_timer())
      out.timer = to_time(done.timer());
    return out;
  }

  std::vector<std::string> interests() const override { return cfg_.interests; }

  bool wants_after_save() const override { return cfg_.after_save; }

  void after_save(const v1::OfferSaved& event) const override {
    v1::AfterSaveRequest req;
    req.set_stage_id(cfg_.id);
    *req.mutable_event() = event;
    v1::AfterSaveResponse resp;
    call("AfterSave", [&](grpc::ClientContext* c) { return stub_->AfterSave(c, req, &resp); });
  }

private:
  /// Calls `rpc` up to cfg_.attempts times while it fails transiently, backing off in between.
  template <class Rpc>
  void call(const char* method, Rpc rpc) const {
    grpc::Status st;
    backoff delay{std::chrono::milliseconds{50}, std::chrono::milliseconds{2000}};
    for (int attempt = 1; attempt <= cfg_.attempts; ++attempt) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + cfg_.deadline);
      st = rpc(&ctx);
      if (st.ok())
        return;
      if (classify(st.error_code()) != disposition::retry || attempt == cfg_.attempts)
        break;
      // A pool worker, stopped only after its job: nothing to cut the wait short.
      std::this_thread::sleep_for(delay.next());
    }
    auto what = std::string{"StageService."} + method + " at " + cfg_.address + ": "
                + std::to_string(static_cast<int>(st.error_code())) + " " + st.error_message();
    if (classify(st.error_code()) == disposition::retry)
      throw unavailable_error(what);
    throw std::runtime_error(what);
  }

  config::external_stage_config cfg_;
  std::unique_ptr<v1::StageService::Stub> stub_;
};

} // namespace

std::shared_ptr<const stage> make_external_stage(const config::external_stage_config& cfg) {
  return std::make_shared<external_stage>(cfg);
}

stage_options external_stage_options(const config::external_stage_config& cfg) {
  stage_options o;
  o.blocking = true;
  o.pool_workers = cfg.parallelism;
  o.max_parallelism = cfg.parallelism;
  o.pool_rate_limit = cfg.rate_limit;
  return o;
}

std::string check_external_stage(const config::external_stage_config& cfg,
                                 const stage_registry& taken) {
  if (taken.find(cfg.id) != nullptr)
    return "stage id `" + cfg.id + "` is taken by a built-in stage";
  for (auto& f : cfg.interests)
    if (v1::Offer::descriptor()->FindFieldByName(f) == nullptr)
      return "stage `" + cfg.id + "`: interests: `" + f
             + "` is not a field of gost.v1.Offer (use top-level names like title, price)";
  return {};
}

} // namespace gost::runtime
