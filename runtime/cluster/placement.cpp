#include "cluster/placement.hpp"

#include <algorithm>

#include "cluster/router.hpp"

namespace gost::runtime {

namespace {

class routed final : public persistence::shard_placement {
public:
  routed(std::weak_ptr<const router> routes,
         std::vector<std::pair<uint32_t, persistence::pg_pool*>> pools,
         std::vector<uint32_t> at_start)
    : routes_(std::move(routes)), pools_(std::move(pools)), at_start_(std::move(at_start)) {
    std::sort(pools_.begin(), pools_.end());
  }

  uint32_t shard_count() const override { return static_cast<uint32_t>(at_start_.size()); }

  uint32_t group_of(uint32_t shard) const override {
    if (auto r = routes_.lock())
      return r->group_of(shard);
    return shard < at_start_.size() ? at_start_[shard] : 0;
  }

  persistence::pg_pool* database(uint32_t group) const override {
    for (auto& [id, pool] : pools_)
      if (id == group)
        return pool;
    return nullptr;
  }

  std::vector<uint32_t> groups() const override {
    std::vector<uint32_t> out;
    for (auto& p : pools_)
      out.push_back(p.first);
    return out;
  }

private:
  std::weak_ptr<const router> routes_;
  std::vector<std::pair<uint32_t, persistence::pg_pool*>> pools_;
  std::vector<uint32_t> at_start_;
};

} // namespace

std::shared_ptr<const persistence::shard_placement>
routed_placement(std::weak_ptr<const router> routes,
                 std::vector<std::pair<uint32_t, persistence::pg_pool*>> pools,
                 std::vector<uint32_t> at_start) {
  return std::make_shared<routed>(std::move(routes), std::move(pools), std::move(at_start));
}

} // namespace gost::runtime
