#include "console/metrics.hpp"

#include "api/readiness.hpp"
#include "gost/core/dependency.hpp"
#include "rpc/parse_guard.hpp"

#include <sstream>

namespace gost::runtime {

namespace {

const char* code_name(size_t c) {
  static const char* names[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};
  return names[c];
}

} // namespace

std::string metrics::prometheus_text() const {
  std::ostringstream out;
  out << "# HELP gost_grpc_requests_total gRPC requests answered, by method and status code.\n"
      << "# TYPE gost_grpc_requests_total counter\n";
  for (size_t m = 0; m < call_stats::methods; ++m)
    for (size_t c = 0; c < call_stats::codes; ++c) {
      auto v = calls_.get(m, c);
      if (v != 0 || c == 0)
        out << "gost_grpc_requests_total{method=\"" << to_string(static_cast<api_method>(m))
            << "\",code=\"" << code_name(c) << "\"} " << v << "\n";
    }
  out << "# HELP gost_grpc_undecodable_requests_total Requests whose bytes were not their method's"
         " message (answered INVALID_ARGUMENT).\n"
      << "# TYPE gost_grpc_undecodable_requests_total counter\n"
      << "gost_grpc_undecodable_requests_total " << rpc::undecodable_requests() << "\n";
  if (health_.ready)
    out << "# HELP gost_ready 1 while the node takes calls (readiness: /readyz, gRPC health), "
           "else 0.\n# TYPE gost_ready gauge\ngost_ready "
        << (health_.ready->ready() ? 1 : 0) << "\n";
  if (!health_.dependencies.empty()) {
    out << "# HELP gost_dependency_up 1 while the dependency answered the last call that "
           "reached for it, else 0.\n# TYPE gost_dependency_up gauge\n";
    for (auto& d : health_.dependencies)
      out << "gost_dependency_up{dependency=\"" << d->name() << "\"} " << (d->up() ? 1 : 0) << "\n";
    out << "# HELP gost_dependency_failed_calls_total Calls that could not reach the "
           "dependency.\n# TYPE gost_dependency_failed_calls_total counter\n";
    for (auto& d : health_.dependencies)
      out << "gost_dependency_failed_calls_total{dependency=\"" << d->name() << "\"} "
          << d->failed_calls() << "\n";
  }
  auto& a = *actors_;
  // Every value the actors count, as declared once with its name and help (gost/core/stats.hpp).
  a.visit([&out](stat_kind kind, const std::string& name, const char* help, int64_t v) {
    out << "# HELP gost_" << name << " " << help << "\n# TYPE gost_" << name << " "
        << (kind == stat_kind::counter ? "counter" : "gauge") << "\ngost_" << name << " " << v
        << "\n";
  });
  out << "# HELP gost_stage_runs_total Stage runs committed, by stage.\n"
      << "# TYPE gost_stage_runs_total counter\n";
  for (auto& s : a.stages)
    out << "gost_stage_runs_total{stage=\"" << s.id << "\"} " << s.runs.load() << "\n";
  out << "# HELP gost_stage_failures_total Stage process calls that failed, by stage.\n"
      << "# TYPE gost_stage_failures_total counter\n";
  for (auto& s : a.stages)
    out << "gost_stage_failures_total{stage=\"" << s.id << "\"} " << s.failures.load() << "\n";
  auto histogram = [&](const char* name, const char* help, auto member) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    for (auto& s : a.stages) {
      const latency_histogram& h = s.*member;
      uint64_t cumulative = 0;
      // Every 8th bucket: powers of two from 2 µs up.
      for (int i = 0; i < latency_histogram::buckets; ++i) {
        cumulative += h.bucket(i);
        if ((i + 1) % latency_histogram::per_octave == 0)
          out << name << "_bucket{stage=\"" << s.id << "\",le=\""
              << latency_histogram::upper_us(i) / 1e6 << "\"} " << cumulative << "\n";
      }
      out << name << "_bucket{stage=\"" << s.id << "\",le=\"+Inf\"} " << cumulative << "\n"
          << name << "_sum{stage=\"" << s.id << "\"} " << h.sum_us() / 1e6 << "\n"
          << name << "_count{stage=\"" << s.id << "\"} " << cumulative << "\n";
    }
  };
  histogram("gost_stage_run_seconds",
            "From the shard's dispatch to the commit of a stage run (load, process, write).",
            &stage_metrics::run);
  histogram("gost_stage_process_seconds", "The stage's process call alone.",
            &stage_metrics::process);
  return out.str();
}

} // namespace gost::runtime
