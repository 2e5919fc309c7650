#pragma once
// Test support: two databases standing for two shard groups (ADR 0023), for the parts that
// place rows by shard through a persistence::shard_placement.

#include <cstdint>
#include <vector>

#include "gost/persistence/cluster/placement.hpp"

namespace gost::testing {

/// Shards below `split` in `a` (group 0), the others in `b` (group 1).
class two_groups final : public persistence::shard_placement {
public:
  two_groups(persistence::pg_pool& a, persistence::pg_pool& b, uint32_t shard_count, uint32_t split)
    : a_(&a), b_(&b), shard_count_(shard_count), split_(split) {}

  uint32_t shard_count() const override { return shard_count_; }
  uint32_t group_of(uint32_t shard) const override { return shard < split_ ? 0 : 1; }
  persistence::pg_pool* database(uint32_t group) const override {
    return group == 0 ? a_ : group == 1 ? b_ : nullptr;
  }
  std::vector<uint32_t> groups() const override { return {0, 1}; }

private:
  persistence::pg_pool* a_;
  persistence::pg_pool* b_;
  uint32_t shard_count_;
  uint32_t split_;
};

} // namespace gost::testing
