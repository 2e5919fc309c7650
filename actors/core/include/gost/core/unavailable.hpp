#pragma once

#include <stdexcept>

namespace gost {

/// Thrown by a stage's `process` (or any pool job) when a service it needs is unreachable or
/// overloaded: not the input's fault. gost answers errc::unavailable, keeps the entry
/// queued and retries after a growing back-off, and never dead-letters the offer for it
/// (other exceptions count as failed attempts).
class unavailable_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace gost
