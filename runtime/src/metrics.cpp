#include "metrics.hpp"

#include <sstream>

namespace gost::runtime {

namespace {

const char* method_name(size_t m) {
  static const char* names[] = {"CreateOffer", "GetOffer", "UpdateOffer", "DeleteOffer"};
  return names[m];
}

const char* code_name(size_t c) {
  static const char* names[] = {"OK",
                                "CANCELLED",
                                "UNKNOWN",
                                "INVALID_ARGUMENT",
                                "DEADLINE_EXCEEDED",
                                "NOT_FOUND",
                                "ALREADY_EXISTS",
                                "PERMISSION_DENIED",
                                "RESOURCE_EXHAUSTED",
                                "FAILED_PRECONDITION",
                                "ABORTED",
                                "OUT_OF_RANGE",
                                "UNIMPLEMENTED",
                                "INTERNAL",
                                "UNAVAILABLE",
                                "DATA_LOSS",
                                "UNAUTHENTICATED"};
  return names[c];
}

} // namespace

std::string metrics::prometheus_text() const {
  std::ostringstream out;
  out << "# HELP gost_grpc_requests_total gRPC requests answered, by method and status code.\n"
      << "# TYPE gost_grpc_requests_total counter\n";
  for (size_t m = 0; m < methods; ++m)
    for (size_t c = 0; c < codes; ++c) {
      auto v = calls_[m][c].load(std::memory_order_relaxed);
      if (v != 0 || c == 0)
        out << "gost_grpc_requests_total{method=\"" << method_name(m) << "\",code=\""
            << code_name(c) << "\"} " << v << "\n";
    }
  auto& a = *actors_;
  out << "# HELP gost_offer_actors_resident Offer actors currently in memory.\n"
      << "# TYPE gost_offer_actors_resident gauge\n"
      << "gost_offer_actors_resident " << a.resident_offer_actors.load() << "\n"
      << "# HELP gost_offer_actors_spawned_total Offer actors spawned (activations).\n"
      << "# TYPE gost_offer_actors_spawned_total counter\n"
      << "gost_offer_actors_spawned_total " << a.offer_actors_spawned.load() << "\n"
      << "# HELP gost_offer_actors_passivated_total Offer actors stopped after being idle.\n"
      << "# TYPE gost_offer_actors_passivated_total counter\n"
      << "gost_offer_actors_passivated_total " << a.offer_actors_passivated.load() << "\n"
      << "# HELP gost_offer_actors_crashed_total Offer actors that stopped abnormally.\n"
      << "# TYPE gost_offer_actors_crashed_total counter\n"
      << "gost_offer_actors_crashed_total " << a.offer_actors_crashed.load() << "\n";
  return out.str();
}

} // namespace gost::runtime
