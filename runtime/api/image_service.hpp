#pragma once
// gost.v1.ImageService (seed 003, docs/images.md): the result cache first; on a miss one task
// queued in PostgreSQL (identical requests are one task) and PENDING answered; the node's
// image pools (gost/images/pools.hpp) compute the queued tasks of the partitions it holds.

#include <chrono>
#include <memory>
#include <vector>

#include "api/limits.hpp"
#include "gost/v1/images.grpc.pb.h"
#include "rpc/parse_guard.hpp"

namespace gost {
class call_hub;
}

namespace gost::persistence {
class shard_placement;
}

namespace gost::images {
class redis_cache;
struct image_stats;
class task_queue;
} // namespace gost::images

namespace gost::runtime {

class image_service final : public rpc::guarded<v1::ImageService> {
public:
  struct settings {
    std::chrono::milliseconds ttl{std::chrono::hours{24 * 7}}; ///< images.ttl
    images::redis_cache* cache = nullptr; ///< images.redis.address: read first, filled after
    images::image_stats* stats = nullptr; ///< cache hits and misses
    images::task_queue* queue = nullptr;  ///< images.queue=kafka: the Kafka queue
  };

  /// `where`: the shard groups' databases (a task's partition is a shard, ADR 0023).
  image_service(call_hub& hub, std::shared_ptr<const persistence::shard_placement> where,
                api_limits limits, settings s)
    : hub_(hub), where_(std::move(where)), limits_(limits), settings_(s) {
    guard("Ratio", &image_service::Ratio);
    guard("Preview", &image_service::Preview);
    guard("MainColor", &image_service::MainColor);
    guard("Rotate", &image_service::Rotate);
    guard("Batch", &image_service::Batch);
    require_all_guarded();
  }

  grpc::ServerUnaryReactor* Ratio(grpc::CallbackServerContext* ctx, const v1::ImageRequest* req,
                                  v1::ImageResponse* resp) override;
  grpc::ServerUnaryReactor* Preview(grpc::CallbackServerContext* ctx, const v1::ImageRequest* req,
                                    v1::ImageResponse* resp) override;
  grpc::ServerUnaryReactor* MainColor(grpc::CallbackServerContext* ctx, const v1::ImageRequest* req,
                                      v1::ImageResponse* resp) override;
  grpc::ServerUnaryReactor* Rotate(grpc::CallbackServerContext* ctx, const v1::ImageRequest* req,
                                   v1::ImageResponse* resp) override;
  grpc::ServerUnaryReactor* Batch(grpc::CallbackServerContext* ctx,
                                  const v1::ImageBatchRequest* req,
                                  v1::ImageBatchResponse* resp) override;

private:
  /// Answers `reqs` of function `fn` (a v1::ImageFunction) into `out` (same order).
  grpc::ServerUnaryReactor* answer(grpc::CallbackServerContext* ctx, int fn,
                                   std::vector<const v1::ImageRequest*> reqs,
                                   std::vector<v1::ImageResponse*> out, const char* field);

  call_hub& hub_;
  std::shared_ptr<const persistence::shard_placement> where_;
  api_limits limits_;
  settings settings_;
};

} // namespace gost::runtime
