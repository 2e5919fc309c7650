#include "node/image_tasks.hpp"

#include <set>

#include "cluster/wakes.hpp"
#include "gost/persistence/images/images.hpp"

namespace gost::runtime {

caf::error pg_image_tasks::enqueue(persistence::pg_pool& pool,
                                   const std::vector<persistence::image_request>& reqs) {
  auto n = persistence::enqueue_image_tasks(pool, reqs);
  if (!n)
    return std::move(n.error());
  if (*n == 0 || !wakes_)
    return {}; // every task was queued already: its feeder knows
  std::set<uint32_t> partitions;
  for (auto& r : reqs)
    partitions.insert(r.task.partition);
  wakes_->wake(images_wake_part, {partitions.begin(), partitions.end()});
  return {};
}

} // namespace gost::runtime
