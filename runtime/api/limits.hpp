#pragma once
// What one call of the public API may hold, besides an offer's content (content_rules.hpp):
// pages, stage states, entity events. Plain checks, unit-tested (api/limits.test.cpp); the
// services call them at the edge and answer INVALID_ARGUMENT with the message, which names the
// field, the value, the limit and its `limits.*` key. runtime/node/limits.cpp fills the struct
// from the config once, at start; the defaults here are the keys' defaults.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gost/offers/content_rules.hpp"

namespace gost::runtime {

struct api_limits {
  offer_limits offer;                        ///< CreateOffer, UpdateOffer
  uint32_t page_size_max = 1000;             ///< limits.page_size_max
  uint64_t page_max_bytes = 2 << 20;         ///< limits.page_max_bytes
  uint64_t state_max_bytes = 1020 << 10;     ///< limits.state_max_bytes
  uint64_t event_max_bytes = 1 << 20;        ///< limits.event_max_bytes
  uint32_t trace_events_max = 10000;         ///< limits.trace_events_max
  int64_t trace_duration_max_ms = 3'600'000; ///< limits.trace_duration_max
  uint32_t traces_max = 16;                  ///< limits.traces_max
};

/// A page size as asked (`field`: "page_size", "limit"): 0 asks for the default, 100 or the
/// limit when that is lower; negative or over the limit is the problem returned. On success
/// `out` is the size to read.
std::string check_page_size(const char* field, int32_t asked, const api_limits& l, uint32_t& out);

/// A live trace's bounds as asked (0: the defaults, 1000 events and 60 s, or the limits when
/// lower): the problem, naming the field and the `limits.*` key, or "". On success `events` and
/// `ms` are the bounds to hold.
std::string check_trace(int64_t max_events, int64_t for_ms, const api_limits& l, uint32_t& events,
                        int64_t& ms);

/// A packed stage state of `bytes` for StateService.Update: the problem, or "".
std::string check_state_size(size_t bytes, const api_limits& l);

/// An event of `bytes` packed, in the request's `field` (EntityService.Send and Ask: "event";
/// TaskService.CreateTask: "input"; TaskService.SendEvent: "payload"): the problem, naming the
/// field, or "".
std::string check_event_size(const char* field, size_t bytes, const api_limits& l);

/// How many of `offers`, from the front, go into one ListOffers page: as many as fit in
/// `page_max_bytes` of the reply, and always the first (a page makes progress).
size_t page_fit(const std::vector<v1::Offer>& offers, const api_limits& l);

} // namespace gost::runtime
