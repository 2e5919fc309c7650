#include "gost/persistence/cluster/placement.hpp"

namespace gost::persistence {

namespace {

class single final : public shard_placement {
public:
  single(pg_pool& pool, uint32_t shard_count)
    : pool_(pool), shard_count_(shard_count == 0 ? 1 : shard_count) {}

  uint32_t shard_count() const override { return shard_count_; }
  uint32_t group_of(uint32_t) const override { return 0; }
  pg_pool* database(uint32_t group) const override { return group == 0 ? &pool_ : nullptr; }
  std::vector<uint32_t> groups() const override { return {0}; }

private:
  pg_pool& pool_;
  uint32_t shard_count_;
};

} // namespace

std::shared_ptr<const shard_placement> one_database(pg_pool& pool, uint32_t shard_count) {
  return std::make_shared<single>(pool, shard_count);
}

} // namespace gost::persistence
