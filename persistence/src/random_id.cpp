#include "gost/persistence/random_id.hpp"

#include <random>

namespace gost::persistence {

std::string random_id() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string out(32, '0');
  for (size_t half = 0; half < 2; ++half) {
    auto bits = gen();
    for (size_t i = 0; i < 16; ++i) {
      out[half * 16 + i] = hex[bits & 0xf];
      bits >>= 4;
    }
  }
  return out;
}

} // namespace gost::persistence
