#include "gost/core/backoff.hpp"

#include <algorithm>

namespace gost {

void stop_signal::request() {
  {
    // Under the lock: a waiter between its check and its sleep cannot miss the wake-up.
    std::lock_guard<std::mutex> guard{mtx_};
    requested_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

bool stop_signal::wait_for(std::chrono::milliseconds d) const {
  std::unique_lock<std::mutex> lock{mtx_};
  return cv_.wait_for(lock, d, [this] { return requested(); });
}

backoff::backoff(duration first, duration cap) noexcept
  : first_(std::min(first, cap)), cap_(cap), current_(first_) {}

backoff::duration backoff::next() noexcept {
  auto now = current_;
  // Doubling past the cap is cut before it can overflow (current_ <= cap_ always).
  current_ = current_ > cap_ / 2 ? cap_ : current_ * 2;
  return now;
}

bool backoff::wait(const stop_signal& stop) {
  return !stop.wait_for(next());
}

} // namespace gost
