#pragma once
// Waiting between attempts on a plain thread (a Kafka consumer's, a stage pool worker's):
// an exponential back-off with a cap, and a stop signal that cuts every such wait short, so a
// node that stops never sits out a back-off. Plain C++, no CAF: actors wait with
// `delayed_send`, never with `wait`, but take their delays from a `backoff` (the kit shard's
// idle polls, the outbox relay's idle reads).
//
// Owner and user: the object that owns a worker thread owns its `stop_signal` and requests
// the stop; the worker only reads it (`requested`, `wait_for`, `backoff::wait`). A `backoff`
// belongs to the one thread that retries with it.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace gost {

/// A stop request, set once and never cleared. Thread-safe.
class stop_signal {
public:
  /// Requests the stop and wakes every thread waiting in `wait_for`.
  void request();

  bool requested() const noexcept { return requested_.load(std::memory_order_acquire); }

  /// Waits up to `d`, waking at once when the stop is requested. True when it was requested
  /// (before or during the wait).
  bool wait_for(std::chrono::milliseconds d) const;

private:
  std::atomic<bool> requested_{false};
  mutable std::mutex mtx_;
  mutable std::condition_variable cv_;
};

/// Delays between attempts: `first`, doubled after every attempt that failed, never above
/// `cap`; `reset` after a success.
class backoff {
public:
  using duration = std::chrono::milliseconds;

  backoff(duration first, duration cap) noexcept;

  /// The delay to wait now; the one after it is twice as long (at most `cap`).
  duration next() noexcept;

  /// The next delay is `first` again.
  void reset() noexcept { current_ = first_; }

  /// Waits `next()` unless stopped. False when the stop was requested (then the caller gives
  /// up its attempt instead of trying again).
  bool wait(const stop_signal& stop);

private:
  duration first_;
  duration cap_;
  duration current_;
};

} // namespace gost
