#include <doctest/doctest.h>

#include "api/limits.hpp"
#include "gost/v1/offer_service.pb.h"

using namespace gost;
using namespace gost::runtime;

TEST_CASE("page size: 0 asks for the default, the limit is accepted, one past refused") {
  api_limits l;
  l.page_size_max = 50;
  uint32_t out = 0;
  CHECK(check_page_size("page_size", 0, l, out).empty());
  CHECK(out == 50); // 100 is the default, but not over the limit
  l.page_size_max = 1000;
  CHECK(check_page_size("page_size", 0, l, out).empty());
  CHECK(out == 100);
  CHECK(check_page_size("page_size", 1000, l, out).empty());
  CHECK(out == 1000);
  CHECK(check_page_size("page_size", 1001, l, out)
        == "page_size is 1001 items; the limit is 1000 (limits.page_size_max)");
  CHECK(check_page_size("limit", -1, l, out).find("limit must not be negative") == 0);
}

TEST_CASE("state and event sizes: at the limit accepted, one past refused naming the key") {
  api_limits l;
  l.state_max_bytes = 2048;
  l.event_max_bytes = 100;
  CHECK(check_state_size(2048, l).empty());
  CHECK(check_state_size(2049, l)
        == "state is 2049 bytes packed; the limit is 2048 (limits.state_max_bytes); keep stage "
           "states small");
  CHECK(check_event_size("event", 100, l).empty());
  CHECK(check_event_size("event", 101, l)
        == "event is 101 bytes packed; the limit is 100 "
           "(limits.event_max_bytes)");
  // Named by the request's field: SendEvent's payload, CreateTask's input.
  CHECK(check_event_size("payload", 101, l)
        == "payload is 101 bytes packed; the limit is 100 (limits.event_max_bytes)");
}

TEST_CASE("a page ends before the offer that would take it past page_max_bytes") {
  std::vector<v1::Offer> offers(4);
  for (auto& o : offers) {
    o.set_id(std::string(32, 'a'));
    o.set_description(std::string(100, 'd'));
  }
  v1::ListOffersResponse whole; // what the reply of two offers weighs
  *whole.add_offers() = offers[0];
  *whole.add_offers() = offers[1];
  api_limits l;
  l.page_max_bytes = whole.ByteSizeLong();
  CHECK(page_fit(offers, l) == 2); // exactly at the limit
  l.page_max_bytes = whole.ByteSizeLong() - 1;
  CHECK(page_fit(offers, l) == 1);
  l.page_max_bytes = 1; // the first offer always goes: a page makes progress
  CHECK(page_fit(offers, l) == 1);
  l.page_max_bytes = 1 << 20;
  CHECK(page_fit(offers, l) == 4);
  CHECK(page_fit({}, l) == 0);
}

TEST_CASE("a trace's bounds: defaults, limits named in the refusal") {
  api_limits l;
  l.trace_events_max = 500;
  l.trace_duration_max_ms = 30'000;
  uint32_t events = 0;
  int64_t ms = 0;
  CHECK(check_trace(0, 0, l, events, ms).empty());
  CHECK(events == 500); // 1000 asked by default, the limit is lower
  CHECK(ms == 30'000);
  CHECK(check_trace(7, 1500, l, events, ms).empty());
  CHECK(events == 7);
  CHECK(ms == 1500);
  CHECK(check_trace(501, 0, l, events, ms).find("limits.trace_events_max") != std::string::npos);
  CHECK(check_trace(1, 30'001, l, events, ms).find("limits.trace_duration_max")
        != std::string::npos);
  CHECK(check_trace(-1, 0, l, events, ms).find("max_events") != std::string::npos);
}
