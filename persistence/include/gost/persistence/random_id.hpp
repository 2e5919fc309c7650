#pragma once
// The random keys gost makes for its rows: offer ids, commit marks, the request ids of
// forwarded calls. 128 bits from a per-thread generator seeded from std::random_device, as 32
// lowercase hex digits. Thread-safe.

#include <string>

namespace gost::persistence {

std::string random_id();

} // namespace gost::persistence
