#include "gost/core/dependency.hpp"

#include <algorithm>
#include <ctime>

#include <caf/error.hpp>
#include <spdlog/fmt/fmt.h>

#include "gost/core/log.hpp"
#include "gost/persistence/errors.hpp"

namespace gost {

namespace {

/// Seconds with one decimal: `8.3s`.
std::string seconds(dependency_tracker::clock::duration d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return fmt::format("{:.1f}s", static_cast<double>(std::max<int64_t>(ms, 0)) / 1000.0);
}

/// Now as UTC, to the millisecond: `2024-05-01T10:00:00.123Z`.
std::string wall_now() {
  auto now = std::chrono::system_clock::now();
  auto t = std::chrono::system_clock::to_time_t(now);
  auto ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

} // namespace

dependency_tracker::dependency_tracker(options opts) : opts_(std::move(opts)) {
  changed_at_ = now();
}

void dependency_tracker::write(line kind, const std::string& text) {
  if (opts_.write) {
    opts_.write(kind, text);
    return;
  }
  auto lg = gost::log::get(opts_.logger);
  switch (kind) {
    case line::lost: lg->error("{}", text); break;
    case line::still: lg->warn("{}", text); break;
    case line::back: lg->info("{}", text); break;
  }
}

void dependency_tracker::succeeded(clock::time_point started) {
  if (up())
    return;
  std::lock_guard<std::mutex> guard{mtx_};
  if (up_.load(std::memory_order_relaxed) || started < changed_at_)
    return;
  auto t = now();
  auto gone = t - changed_at_;
  changed_at_ = t;
  up_.store(true, std::memory_order_release);
  recoveries_.fetch_add(1, std::memory_order_acq_rel);
  write(line::back, fmt::format("{} reachable again after={} failed_calls={}", opts_.name,
                                seconds(gone), failed_in_outage_));
  failed_in_outage_ = 0;
}

void dependency_tracker::failed(std::string_view error, clock::time_point started) {
  failed_total_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> guard{mtx_};
  auto t = now();
  if (up_.load(std::memory_order_relaxed)) {
    if (started < changed_at_)
      return;
    changed_at_ = t;
    last_line_ = t;
    failed_in_outage_ = 1;
    last_error_ = persistence::single_line(error);
    up_.store(false, std::memory_order_release);
    write(line::lost,
          fmt::format("{} unreachable since={} error={}", opts_.name, wall_now(), last_error_));
    return;
  }
  ++failed_in_outage_;
  if (t - last_line_ < opts_.summary_every)
    return;
  last_line_ = t;
  auto err = persistence::single_line(error);
  // The error only when it changed: the lost line said it already.
  auto text = fmt::format("{} still unreachable for={} failed_calls={}", opts_.name,
                          seconds(t - changed_at_), failed_in_outage_);
  if (err != last_error_) {
    text += " error=" + err;
    last_error_ = std::move(err);
  }
  write(line::still, text);
}

dependency_tracker::clock::duration dependency_tracker::down_for() const {
  if (up())
    return clock::duration::zero();
  std::lock_guard<std::mutex> guard{mtx_};
  if (up_.load(std::memory_order_relaxed))
    return clock::duration::zero();
  return now() - changed_at_;
}

bool db_outage_reported(const dependency_tracker* db, const caf::error& err) {
  return db != nullptr && !db->up() && err.category() == caf::atom("db")
         && static_cast<persistence::db_errc>(err.code()) == persistence::db_errc::unavailable;
}

retry_pace::retry_pace(std::chrono::milliseconds first, std::chrono::milliseconds cap,
                       std::shared_ptr<const dependency_tracker> dep)
  : backoff_(first, cap), dep_(std::move(dep)) {}

std::chrono::milliseconds retry_pace::failed(clock::time_point now) {
  // It came back in between and is away again: a new outage, waited from `first` again.
  if (failing_ && dep_ && dep_->recoveries() != recoveries_at_)
    backoff_.reset();
  auto wait = backoff_.next();
  retry_at_ = now + wait;
  recoveries_at_ = dep_ ? dep_->recoveries() : 0;
  failing_ = true;
  return wait;
}

void retry_pace::succeeded() {
  backoff_.reset();
  failing_ = false;
}

bool retry_pace::may_try(clock::time_point now) const {
  return !failing_ || now >= retry_at_ || (dep_ && dep_->recoveries() != recoveries_at_);
}

} // namespace gost
