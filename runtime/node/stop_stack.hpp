#pragma once
// The stops of what a node started, run in reverse (Seastar's `deferred_stop`, redpanda's
// `_deferred`). Each start function pushes the stop of its part only once that part runs, so
// a start that fails half-way stops exactly what had started, and `node::stop` is one unwind.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gost/core/log.hpp"

namespace gost::runtime {

class stop_stack {
public:
  using stop_fn = std::function<void()>;

  /// Logs each step on `log` (default: the `node` logger).
  explicit stop_stack(std::shared_ptr<spdlog::logger> log = nullptr);
  /// Unwinds what is left.
  ~stop_stack();
  stop_stack(const stop_stack&) = delete;
  stop_stack& operator=(const stop_stack&) = delete;

  /// Adds the stop of a part that now runs; `name` says what it stops, for the log.
  void push(std::string name, stop_fn fn);

  /// Runs every stop, the last pushed first, each logged with how long it took; empty
  /// afterwards. A stop that throws is logged as an error and the next one runs.
  void unwind();

  /// The names of the stops waiting, first pushed first.
  std::vector<std::string> names() const;
  bool empty() const noexcept { return steps_.empty(); }

private:
  struct step {
    std::string name;
    stop_fn fn;
  };
  std::shared_ptr<spdlog::logger> log_;
  std::vector<step> steps_;
};

} // namespace gost::runtime
