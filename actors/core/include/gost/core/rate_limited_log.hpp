#pragma once
// A warning line that may come in floods (a bad request per call, a failing host per check),
// rate-limited: at most `burst` lines per `window` reach the logger; the next line that gets
// through says how many were suppressed (`suppressed_since_last=N`). Thread-safe; keep one per
// kind of line (a function-local static, or a member of the object that logs).

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <spdlog/logger.h>

namespace gost::log {

class rate_limited {
public:
  rate_limited(std::shared_ptr<spdlog::logger> lg, int burst, std::chrono::milliseconds window)
    : lg_(std::move(lg)), burst_(burst), window_(window) {}

  /// Logs `line` at warn unless `burst` lines were logged in this window; whether it did.
  bool warn(const std::string& line) { return warn(line, std::chrono::steady_clock::now()); }
  /// The same at `now` (tests).
  bool warn(const std::string& line, std::chrono::steady_clock::time_point now);

private:
  std::shared_ptr<spdlog::logger> lg_;
  std::mutex mtx_;
  const int burst_;
  const std::chrono::milliseconds window_;
  std::chrono::steady_clock::time_point window_start_{};
  int in_window_ = 0;
  uint64_t suppressed_ = 0;
};

} // namespace gost::log
