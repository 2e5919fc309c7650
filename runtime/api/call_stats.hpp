#pragma once
// Calls answered by the gRPC services, by method and status code. The services count; the
// console renders (console/metrics.*). Relaxed atomics on the request path.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include <grpcpp/support/status_code_enum.h>

namespace gost::runtime {

enum class api_method : uint8_t {
  create_offer,
  get_offer,
  update_offer,
  delete_offer,
  list_offers,
  read_state,
  update_state,
  create_feed, // gost.v1.FeedService (feed.enabled)
  update_feed,
  delete_feed,
  get_feed,
  list_feeds,
  upload_feed,
  load_feed_now,
  list_feed_loads,
  get_feed_load,
  list_feed_errors,
  count_
};

/// The method's name as gRPC knows it.
inline const char* to_string(api_method m) {
  static const char* names[] = {
    "CreateOffer", "GetOffer",   "UpdateOffer", "DeleteOffer", "ListOffers", "ReadState",
    "UpdateState", "CreateFeed", "UpdateFeed",  "DeleteFeed",  "GetFeed",    "ListFeeds",
    "Upload",      "LoadNow",    "ListLoads",   "GetLoad",     "ListErrors"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(api_method::count_));
  return names[static_cast<size_t>(m)];
}

class call_stats {
public:
  static constexpr size_t codes = 17; // gRPC status codes 0..16
  static constexpr size_t methods = static_cast<size_t>(api_method::count_);

  void count(api_method m, grpc::StatusCode code) {
    auto c = static_cast<size_t>(code);
    if (c >= codes)
      c = static_cast<size_t>(grpc::StatusCode::UNKNOWN);
    calls_[static_cast<size_t>(m)][c].fetch_add(1, std::memory_order_relaxed);
  }

  uint64_t get(size_t method, size_t code) const {
    return calls_[method][code].load(std::memory_order_relaxed);
  }

private:
  std::array<std::array<std::atomic<uint64_t>, codes>, methods> calls_{};
};

} // namespace gost::runtime
