#include "gost/core/rate_limited_log.hpp"

namespace gost::log {

bool rate_limited::warn(const std::string& line, std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (now - window_start_ >= window_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++suppressed_;
    return false;
  }
  ++in_window_;
  if (suppressed_ > 0)
    lg_->warn("{} suppressed_since_last={}", line, suppressed_);
  else
    lg_->warn("{}", line);
  suppressed_ = 0;
  return true;
}

} // namespace gost::log
