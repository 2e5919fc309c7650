#include "node/stop_stack.hpp"

#include <chrono>
#include <exception>

namespace gost::runtime {

stop_stack::stop_stack(std::shared_ptr<spdlog::logger> log)
  : log_(log ? std::move(log) : gost::log::get("node")) {}

stop_stack::~stop_stack() {
  unwind();
}

void stop_stack::push(std::string name, stop_fn fn) {
  steps_.push_back({std::move(name), std::move(fn)});
}

void stop_stack::unwind() {
  while (!steps_.empty()) {
    // Popped before it runs: a stop never runs twice, even when it throws.
    auto s = std::move(steps_.back());
    steps_.pop_back();
    log_->debug("stopping {}", s.name);
    auto t0 = std::chrono::steady_clock::now();
    try {
      s.fn();
    } catch (const std::exception& e) {
      log_->error("stop of {} failed error={}; stopping the rest", s.name, e.what());
      continue;
    }
    auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
        .count();
    log_->info("stopped {} ms={}", s.name, ms);
  }
}

std::vector<std::string> stop_stack::names() const {
  std::vector<std::string> out;
  for (auto& s : steps_)
    out.push_back(s.name);
  return out;
}

} // namespace gost::runtime
