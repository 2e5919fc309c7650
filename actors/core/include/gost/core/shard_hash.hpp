#pragma once

#include <cstdint>
#include <string_view>

namespace gost {

/// The stable 64-bit hash of an offer id: FNV-1a 64 over the id's bytes, followed by the
/// MurmurHash3 64-bit finalizer (fmix64) so that the low bits are well mixed. It never changes:
/// stored data and every node depend on it. Test vectors: docs/sharding.md.
uint64_t offer_hash(std::string_view offer_id) noexcept;

/// The shard of an offer: offer_hash(id) mod shard_count.
inline uint32_t shard_of(std::string_view offer_id, uint32_t shard_count) noexcept {
  return static_cast<uint32_t>(offer_hash(offer_id) % shard_count);
}

/// The database holding `key`'s home shard (`shard_of(key)`) now, of a placement
/// (persistence::shard_placement, ADR 0023): where the rows keyed by it live — a seller's
/// feeds and loads, a scheduled action by its id.
template <class Placement>
auto& home_database(const Placement& where, std::string_view key) {
  return where.of_shard(shard_of(key, where.shard_count()));
}

} // namespace gost
