#include "api/image_service.hpp"

#include <memory>

#include <google/protobuf/util/time_util.h>

#include "api/call.hpp"
#include "api/status.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/images/ask.hpp"
#include "gost/images/request.hpp"
#include "gost/images/response.hpp"

namespace gost::runtime {

namespace {

using google::protobuf::util::TimeUtil;

} // namespace

grpc::ServerUnaryReactor* image_service::Ratio(grpc::CallbackServerContext* ctx,
                                               const v1::ImageRequest* req,
                                               v1::ImageResponse* resp) {
  return answer(ctx, v1::IMAGE_FUNCTION_RATIO, {req}, {resp}, "");
}

grpc::ServerUnaryReactor* image_service::Preview(grpc::CallbackServerContext* ctx,
                                                 const v1::ImageRequest* req,
                                                 v1::ImageResponse* resp) {
  return answer(ctx, v1::IMAGE_FUNCTION_PREVIEW, {req}, {resp}, "");
}

grpc::ServerUnaryReactor* image_service::MainColor(grpc::CallbackServerContext* ctx,
                                                   const v1::ImageRequest* req,
                                                   v1::ImageResponse* resp) {
  return answer(ctx, v1::IMAGE_FUNCTION_MAIN_COLOR, {req}, {resp}, "");
}

grpc::ServerUnaryReactor* image_service::Rotate(grpc::CallbackServerContext* ctx,
                                                const v1::ImageRequest* req,
                                                v1::ImageResponse* resp) {
  return answer(ctx, v1::IMAGE_FUNCTION_ROTATE, {req}, {resp}, "");
}

grpc::ServerUnaryReactor* image_service::Batch(grpc::CallbackServerContext* ctx,
                                               const v1::ImageBatchRequest* req,
                                               v1::ImageBatchResponse* resp) {
  if (req->function() == v1::IMAGE_FUNCTION_UNSPECIFIED
      || !v1::ImageFunction_IsValid(req->function()))
    return unary_call{ctx}.fail(invalid("function is required: IMAGE_FUNCTION_RATIO, _PREVIEW, "
                                        "_MAIN_COLOR or _ROTATE"));
  if (static_cast<uint32_t>(req->requests_size()) > limits_.page_size_max)
    return unary_call{ctx}.fail(invalid("requests holds " + std::to_string(req->requests_size())
                                        + " images; at most limits.page_size_max = "
                                        + std::to_string(limits_.page_size_max) + " in one call"));
  std::vector<const v1::ImageRequest*> reqs;
  std::vector<v1::ImageResponse*> out;
  for (auto& r : req->requests()) {
    reqs.push_back(&r);
    out.push_back(resp->add_responses());
  }
  return answer(ctx, req->function(), std::move(reqs), std::move(out), "requests");
}

grpc::ServerUnaryReactor* image_service::answer(grpc::CallbackServerContext* ctx, int fn_code,
                                                std::vector<const v1::ImageRequest*> reqs,
                                                std::vector<v1::ImageResponse*> out,
                                                const char* field) {
  unary_call call{ctx};
  auto fn = images::from_proto(fn_code);
  auto asks = std::make_shared<std::vector<images::image_ask>>();
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto& r = *reqs[i];
    auto name = [&](const char* f) {
      return *field ? std::string{field} + "[" + std::to_string(i) + "]." + f : std::string{f};
    };
    auto t = images::make_task(fn, r.url(), r.angle());
    if (!t) {
      auto msg = t.error.message;
      // make_task says "url ..." or "angle ...": name the field with its place in the batch.
      auto what = msg.rfind("angle", 0) == 0 ? "angle" : "url";
      return call.fail(invalid(name(what) + ": " + msg));
    }
    int64_t ttl = settings_.ttl.count();
    if (r.options().has_ttl()) {
      ttl = TimeUtil::DurationToMilliseconds(r.options().ttl());
      if (ttl < 1000 || ttl > 31'536'000'000)
        return call.fail(invalid(name("options.ttl") + " must be 1 s to 365 days"));
    }
    if (r.options().cache_only() && r.options().compute())
      return call.fail(invalid(name("options") + ": cache_only and compute exclude each other"));
    asks->push_back({*t, ttl, r.options().cache_only(), r.options().compute()});
  }
  auto where = where_;
  auto* cache = settings_.cache;
  auto* stats = settings_.stats;
  auto* queue = settings_.queue;
  hub_.run_blocking([=] {
    if (auto err = images::ask_images(*where, *asks, out, cache, stats, queue))
      return call.finish(err);
    call.ok();
  });
  return call.reactor();
}

} // namespace gost::runtime
