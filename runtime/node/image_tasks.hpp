#pragma once
// The PostgreSQL queue of image tasks as the node's askers use it (images.queue=postgres, the
// default; Kafka's is kafka/image_queue.hpp): the tasks are queued in one transaction, then the
// feeders serving their partitions are woken — this node's directly, another node's by a wake
// notice (cluster/wakes.hpp, part `images`) — so an idle feeder, polling slowly
// (images.poll_idle), starts them at once.

#include <memory>

#include "gost/images/ask.hpp"

namespace gost::runtime {

class wake_hub;

/// The wake notices' name for the image feeders (any partition wakes them all).
constexpr const char* images_wake_part = "images";

class pg_image_tasks final : public images::task_queue {
public:
  explicit pg_image_tasks(std::shared_ptr<wake_hub> wakes) : wakes_(std::move(wakes)) {}

  caf::error enqueue(persistence::pg_pool& pool,
                     const std::vector<persistence::image_request>& reqs) override;

private:
  std::shared_ptr<wake_hub> wakes_;
};

} // namespace gost::runtime
