#include "api/image_service.hpp"

#include <map>
#include <memory>
#include <set>

#include <google/protobuf/util/time_util.h>

#include "api/status.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/images/redis_cache.hpp"
#include "gost/images/request.hpp"
#include "gost/images/response.hpp"
#include "gost/images/stats.hpp"
#include "gost/persistence/images/images.hpp"

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
      || !v1::ImageFunction_IsValid(req->function())) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(invalid("function is required: IMAGE_FUNCTION_RATIO, _PREVIEW, _MAIN_COLOR "
                            "or _ROTATE"));
    return reactor;
  }
  if (static_cast<uint32_t>(req->requests_size()) > limits_.page_size_max) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(invalid("requests holds " + std::to_string(req->requests_size())
                            + " images; at most limits.page_size_max = "
                            + std::to_string(limits_.page_size_max) + " in one call"));
    return reactor;
  }
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
  auto* reactor = ctx->DefaultReactor();
  auto fn = images::from_proto(fn_code);
  struct item {
    images::task_key key;
    std::string result_key;
    int64_t ttl_ms = 0;
    bool cache_only = false;
    bool compute = false;
  };
  auto items = std::make_shared<std::vector<item>>();
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
      reactor->Finish(invalid(name(what) + ": " + msg));
      return reactor;
    }
    int64_t ttl = settings_.ttl.count();
    if (r.options().has_ttl()) {
      ttl = TimeUtil::DurationToMilliseconds(r.options().ttl());
      if (ttl < 1000 || ttl > 31'536'000'000) {
        reactor->Finish(invalid(name("options.ttl") + " must be 1 s to 365 days"));
        return reactor;
      }
    }
    if (r.options().cache_only() && r.options().compute()) {
      reactor->Finish(invalid(name("options") + ": cache_only and compute exclude each other"));
      return reactor;
    }
    item it{*t, t->result_key(), ttl, r.options().cache_only(), r.options().compute()};
    out[i]->set_key(it.result_key);
    items->push_back(std::move(it));
  }
  auto* pool = &pool_;
  auto partitions = settings_.partitions;
  auto* cache = settings_.cache;
  auto* stats = settings_.stats;
  hub_.run_blocking([=] {
    std::vector<std::string> keys;
    for (auto& it : *items)
      keys.push_back(it.result_key);
    // Redis first (when configured); PostgreSQL for what it lacks, or for all when it is away.
    std::vector<persistence::image_result> found_rows;
    std::vector<std::string> ask_db = keys;
    if (cache != nullptr)
      if (auto got = cache->get(keys)) {
        found_rows = std::move(*got);
        std::set<std::string> in_redis;
        for (auto& r : found_rows)
          in_redis.insert(r.key);
        ask_db.clear();
        for (auto& k : keys)
          if (!in_redis.count(k))
            ask_db.push_back(k);
      }
    auto rows = persistence::find_image_results(*pool, ask_db);
    if (!rows) {
      reactor->Finish(to_status(rows.error()));
      return;
    }
    if (cache != nullptr) {
      // Only where Redis has nothing, so never over a newer write; and not `pending`: a
      // result stored while Redis was away would leave it there for the whole TTL.
      std::vector<persistence::image_result> fill;
      for (auto& r : *rows)
        if (r.status != "pending")
          fill.push_back(r);
      cache->put(fill, true);
    }
    for (auto& r : *rows)
      found_rows.push_back(std::move(r));
    std::map<std::string, const persistence::image_result*> by_key;
    for (auto& r : found_rows)
      by_key[r.key] = &r;
    std::vector<persistence::image_request> queue;
    for (size_t i = 0; i < items->size(); ++i) {
      auto& it = (*items)[i];
      auto found = by_key.find(it.result_key);
      if (stats != nullptr) {
        auto& f = stats->of(fn);
        if (found == by_key.end())
          f.cache_misses.fetch_add(1, std::memory_order_relaxed);
        else if (found->second->status != "pending")
          f.cache_hits.fetch_add(1, std::memory_order_relaxed);
      }
      if (found != by_key.end() && !it.compute) {
        images::fill_response(fn, *found->second, *out[i]);
        continue;
      }
      if (it.cache_only) {
        out[i]->set_status(v1::IMAGE_STATUS_NOT_CACHED);
        continue;
      }
      persistence::image_request q;
      q.key = it.result_key;
      q.task = {
        images::to_string(fn), it.key.partition(partitions), it.key.args, 0, it.ttl_ms, 0, {}};
      q.pending_ttl_ms = it.ttl_ms;
      queue.push_back(std::move(q));
      if (found != by_key.end())
        images::fill_response(fn, *found->second,
                              *out[i]); // compute: the old result stays until the new one
      else
        out[i]->set_status(v1::IMAGE_STATUS_PENDING);
      if (it.compute)
        out[i]->set_status(v1::IMAGE_STATUS_PENDING);
    }
    if (!queue.empty())
      if (auto n = persistence::enqueue_image_tasks(*pool, queue); !n) {
        reactor->Finish(to_status(n.error()));
        return;
      }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

} // namespace gost::runtime
