#pragma once
// The node's counters in Prometheus' text format. Counters are relaxed atomics updated on
// the request path; rendering reads them without locks.

#include <array>
#include <atomic>
#include <memory>
#include <string>

#include <grpcpp/support/status_code_enum.h>

#include "gost/actors/stats.hpp"

namespace gost::runtime {

enum class api_method : uint8_t {
  create_offer, get_offer, update_offer, delete_offer, list_offers, read_state, update_state, count_
};

class metrics {
public:
  explicit metrics(std::shared_ptr<node_stats> actors) : actors_(std::move(actors)) {}

  void count_call(api_method m, grpc::StatusCode code) {
    auto c = static_cast<size_t>(code);
    if (c >= codes)
      c = static_cast<size_t>(grpc::StatusCode::UNKNOWN);
    calls_[static_cast<size_t>(m)][c].fetch_add(1, std::memory_order_relaxed);
  }

  std::string prometheus_text() const;

private:
  static constexpr size_t codes = 17; // gRPC status codes 0..16
  static constexpr size_t methods = static_cast<size_t>(api_method::count_);
  std::array<std::array<std::atomic<uint64_t>, codes>, methods> calls_{};
  std::shared_ptr<node_stats> actors_;
};

} // namespace gost::runtime
