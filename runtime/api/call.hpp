#pragma once
// The request edge of the node's gRPC services, in one place:
// - every call of every service (reflection and health included) is counted by its full method
//   name and status code, with its latency, by an interceptor on the server (`count_calls`,
//   installed by node/start_grpc.cpp): gost_grpc_requests_total, gost_grpc_request_seconds;
// - a unary method finishes through `unary_call` (its reactor, the deadline budget,
//   `to_status`) or `blocking` (input checked, then work on the call hub's blocking threads),
//   never through a counter of its own.
//
// Owner of the figures: the node's metrics (console/metrics.hpp), for the node's life; the
// interceptors count from gRPC's threads with relaxed atomics and, the first time a method is
// called, a short exclusive lock.

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>

#include <caf/error.hpp>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include "api/status.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/stats.hpp"

namespace gost {
class metric_families;
}

namespace gost::runtime {

/// gRPC calls answered, by full method name (`/gost.v1.EntityService/Ask`) and status code,
/// and how long each took (from the call's arrival to its status).
class grpc_stats {
public:
  static constexpr size_t codes = 17; // gRPC status codes 0..16
  /// Distinct method names counted; calls of further names count as `other` (the label stays
  /// bounded even if a server let unknown names through).
  static constexpr size_t max_methods = 512;

  void count(std::string_view method, grpc::StatusCode code, std::chrono::microseconds took);

  /// The calls of `method` answered with `code` so far.
  uint64_t calls(std::string_view method, grpc::StatusCode code) const;

  /// A call (or admin HTTP request) the edge refused, by the caller rule's reason
  /// (caller_rule::reasons(); api/call_gate.hpp).
  void count_refused(std::string_view reason);
  /// The refusals of `reason` so far.
  uint64_t refused(std::string_view reason) const;

  /// gost_grpc_requests_total{method,code} (OK always, other codes once seen),
  /// gost_grpc_request_seconds{method}, for every method called so far, and
  /// gost_auth_refused_total{reason} (every reason).
  void collect(metric_families& out) const;

private:
  struct figures {
    std::array<std::atomic<uint64_t>, codes> calls{};
    latency_histogram took;
  };
  figures& of(std::string_view method);

  mutable std::shared_mutex mtx_;
  std::map<std::string, std::unique_ptr<figures>, std::less<>> methods_;
  std::array<std::atomic<uint64_t>, 8> refused_{}; // by caller_rule::reasons()' index
};

/// The interceptors counting every call of a server into `stats`
/// (`ServerBuilder::experimental().SetInterceptorCreators`).
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
count_calls(std::shared_ptr<grpc_stats> stats);

/// One unary call at the edge: its reactor and its deadline (the client's, at most
/// `api.request_timeout`). Copied into the callbacks that finish it.
///
///   unary_call call{ctx, timeout_};
///   if (problem) return call.fail(invalid("page_size must ..."));
///   hub_.run([=](auto* self) { ask_owner(self, r, call.deadline(), [=](x&) { call.ok(); },
///                                        call.on_error(), ...); });
///   return call.reactor();
class unary_call {
public:
  using clock_type = std::chrono::steady_clock;

  /// `timeout` zero: the call has no budget of its own (its work is bounded otherwise).
  unary_call(grpc::CallbackServerContext* ctx,
             std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

  grpc::ServerUnaryReactor* reactor() const noexcept { return reactor_; }
  /// How long the call may take from its start.
  std::chrono::milliseconds budget() const noexcept { return budget_; }
  /// When the node stops working on it.
  clock_type::time_point deadline() const noexcept { return deadline_; }

  /// Answers `s` now (bad input) and gives the reactor the method returns.
  grpc::ServerUnaryReactor* fail(grpc::Status s) const {
    reactor_->Finish(std::move(s));
    return reactor_;
  }
  void finish(grpc::Status s) const { reactor_->Finish(std::move(s)); }
  void finish(const caf::error& err) const { reactor_->Finish(to_status(err)); }
  void ok() const { reactor_->Finish(grpc::Status::OK); }
  /// The error handler of an ask: the error as its status (`to_status`).
  auto on_error() const {
    return [r = reactor_](const caf::error& err) { r->Finish(to_status(err)); };
  }

private:
  grpc::ServerUnaryReactor* reactor_;
  std::chrono::milliseconds budget_;
  clock_type::time_point deadline_;
};

/// A unary call whose work blocks (PostgreSQL, files): refused with INVALID_ARGUMENT when
/// `problem` (the input checks' verdict, naming the field) is not empty; else `work()` runs on
/// the call hub's blocking threads and the status it returns finishes the call.
template <class Work>
grpc::ServerUnaryReactor* blocking(call_hub& hub, grpc::CallbackServerContext* ctx,
                                   const std::string& problem, Work work) {
  unary_call call{ctx};
  if (!problem.empty())
    return call.fail(invalid(problem));
  hub.run_blocking([call, work]() mutable { call.finish(work()); });
  return call.reactor();
}

} // namespace gost::runtime
