#include "gost/core/shard_hash.hpp"

namespace gost {

uint64_t offer_hash(std::string_view offer_id) noexcept {
  uint64_t h = 0xcbf29ce484222325ull; // FNV-1a 64 offset basis
  for (unsigned char c : offer_id) {
    h ^= c;
    h *= 0x100000001b3ull; // FNV-1a 64 prime
  }
  // fmix64
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

} // namespace gost
