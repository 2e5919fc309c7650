#include "api/call.hpp"

#include <algorithm>
#include <mutex>

#include "api/caller_rule.hpp"
#include "cluster/ask_owner.hpp" // call_budget
#include "gost/core/stats_registry.hpp"

namespace gost::runtime {

namespace {

const char* code_name(size_t c) {
  static const char* names[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};
  static_assert(sizeof(names) / sizeof(names[0]) == grpc_stats::codes);
  return names[c];
}

size_t code_index(grpc::StatusCode code) {
  auto c = static_cast<size_t>(code);
  return c < grpc_stats::codes ? c : static_cast<size_t>(grpc::StatusCode::UNKNOWN);
}

/// One call: created as it arrives, counted as its status leaves.
class counting_interceptor final : public grpc::experimental::Interceptor {
public:
  counting_interceptor(grpc_stats& stats, const char* method)
    : stats_(stats), method_(method != nullptr ? method : ""),
      start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    using grpc::experimental::InterceptionHookPoints;
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS))
      stats_.count(method_, m->GetSendStatus().error_code(),
                   std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::steady_clock::now() - start_));
    m->Proceed();
  }

private:
  grpc_stats& stats_;
  std::string_view method_; // the registered method's name: lives as long as the server
  std::chrono::steady_clock::time_point start_;
};

class counting_factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
public:
  explicit counting_factory(std::shared_ptr<grpc_stats> stats) : stats_(std::move(stats)) {}

  grpc::experimental::Interceptor*
  CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new counting_interceptor(*stats_, info->method());
  }

private:
  std::shared_ptr<grpc_stats> stats_;
};

} // namespace

grpc_stats::figures& grpc_stats::of(std::string_view method) {
  {
    std::shared_lock<std::shared_mutex> read{mtx_};
    if (auto i = methods_.find(method); i != methods_.end())
      return *i->second;
  }
  std::unique_lock<std::shared_mutex> write{mtx_};
  if (methods_.size() >= max_methods && methods_.find(method) == methods_.end())
    method = "other";
  auto& slot = methods_[std::string{method}];
  if (!slot)
    slot = std::make_unique<figures>();
  return *slot;
}

void grpc_stats::count(std::string_view method, grpc::StatusCode code,
                       std::chrono::microseconds took) {
  auto& f = of(method);
  f.calls[code_index(code)].fetch_add(1, std::memory_order_relaxed);
  f.took.record(took);
}

uint64_t grpc_stats::calls(std::string_view method, grpc::StatusCode code) const {
  std::shared_lock<std::shared_mutex> read{mtx_};
  auto i = methods_.find(method);
  return i == methods_.end() ? 0
                             : i->second->calls[code_index(code)].load(std::memory_order_relaxed);
}

namespace {

size_t reason_index(std::string_view reason) {
  auto& r = caller_rule::reasons();
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] == reason)
      return i;
  return r.size(); // not a reason of the rule: counted apart, never exported
}

} // namespace

void grpc_stats::count_refused(std::string_view reason) {
  auto i = reason_index(reason);
  if (i < refused_.size())
    refused_[i].fetch_add(1, std::memory_order_relaxed);
}

uint64_t grpc_stats::refused(std::string_view reason) const {
  auto i = reason_index(reason);
  return i < refused_.size() ? refused_[i].load(std::memory_order_relaxed) : 0;
}

void grpc_stats::collect(metric_families& out) const {
  {
    const char* name = "gost_auth_refused_total";
    const char* help = "Calls of the gRPC API and admin HTTP requests refused for their caller "
                       "(issue 27: no or unknown credential, role too low), by reason.";
    out.declare(name, metric_type::counter, help);
    auto& reasons = caller_rule::reasons();
    for (size_t i = 0; i < reasons.size() && i < refused_.size(); ++i)
      out.add(name, stat_kind::counter, help, {{"reason", reasons[i]}},
              static_cast<int64_t>(refused_[i].load(std::memory_order_relaxed)));
  }
  const char* name = "gost_grpc_requests_total";
  const char* help = "gRPC requests answered, by full method name and status code.";
  const char* took = "gost_grpc_request_seconds";
  const char* took_help = "Time from a gRPC request's arrival to its status, by full method name.";
  out.declare(name, metric_type::counter, help);
  out.declare(took, metric_type::histogram, took_help);
  std::shared_lock<std::shared_mutex> read{mtx_};
  for (auto& [method, f] : methods_)
    for (size_t c = 0; c < codes; ++c) {
      auto v = f->calls[c].load(std::memory_order_relaxed);
      if (v != 0 || c == 0)
        out.add(name, stat_kind::counter, help, {{"method", method}, {"code", code_name(c)}},
                static_cast<int64_t>(v));
    }
  for (auto& [method, f] : methods_)
    out.add(took, took_help, {{"method", method}}, f->took);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
count_calls(std::shared_ptr<grpc_stats> stats) {
  return std::make_unique<counting_factory>(std::move(stats));
}

namespace {

/// The client's deadline less a margin: the node gives its answer (refused and safe to retry,
/// or outcome unknown) before the client's own deadline passes with the answer on its way, so
/// the client hears which it was. A tenth of the time left, at most 100 ms.
std::chrono::system_clock::time_point answer_by(std::chrono::system_clock::time_point deadline) {
  auto left = deadline - std::chrono::system_clock::now();
  if (left <= std::chrono::system_clock::duration::zero())
    return deadline;
  return deadline
         - std::min<std::chrono::system_clock::duration>(left / 10, std::chrono::milliseconds{100});
}

} // namespace

unary_call::unary_call(grpc::CallbackServerContext* ctx, std::chrono::milliseconds timeout)
  : reactor_(ctx->DefaultReactor()),
    budget_(timeout.count() > 0 ? call_budget(answer_by(ctx->deadline()), timeout) : timeout),
    deadline_(clock_type::now() + budget_) {}

} // namespace gost::runtime
