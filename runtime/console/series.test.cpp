// The web console's sample ring (console/series.hpp): rates from counter deltas, gauges as
// read, a counter that went down counted from zero, the ring's wrap, series that come and go.
#include <doctest/doctest.h>

#include <map>

#include "console/series.hpp"
#include "gost/core/stats_registry.hpp"

using namespace gost;
using runtime::series_ring;

namespace {

/// A registry whose figures the test sets between samples: the families the console's rules
/// read, as the node's parts register them.
struct figures {
  std::map<std::string, int64_t> stage_runs, stage_failures; // by stage
  std::map<int, int64_t> shard_runs, shard_backlog;          // by shard
  std::map<int, double> writer_lag_s;                        // by writer
  std::map<std::string, int64_t> kind_runs, kind_backlog;    // by kind
  double entity_lag_s = 0;
  int64_t image_queue = -1; // "not counted yet"

  stats_registry reg;
  figures() {
    reg.add([this](metric_families& out) {
      for (auto& [s, v] : stage_runs)
        out.add("gost_stage_runs_total", stat_kind::counter, "", {{"stage", s}}, v);
      for (auto& [s, v] : stage_failures)
        out.add("gost_stage_failures_total", stat_kind::counter, "", {{"stage", s}}, v);
      for (auto& [s, v] : shard_runs)
        out.add("gost_offer_shard_runs_total", stat_kind::counter, "",
                {{"shard", std::to_string(s)}}, v);
      for (auto& [s, v] : shard_backlog)
        out.add("gost_offer_shard_queue_backlog", stat_kind::gauge, "",
                {{"shard", std::to_string(s)}}, v);
      for (auto& [w, v] : writer_lag_s)
        out.add("gost_offer_write_lag_seconds", metric_type::gauge, "",
                {{"writer", std::to_string(w)}}, v);
      for (auto& [k, v] : kind_runs)
        out.add("gost_entity_kind_runs_total", stat_kind::counter, "", {{"kind", k}}, v);
      for (auto& [k, v] : kind_backlog)
        out.add("gost_entity_kind_queue_backlog", stat_kind::gauge, "", {{"kind", k}}, v);
      out.add("gost_entity_write_lag_seconds", metric_type::gauge, "", {{"writer", "0"}},
              entity_lag_s);
      out.add("gost_image_queue_depth", stat_kind::gauge, "", {{"function", "ratio"}}, image_queue);
      // A histogram and a family no rule names are passed over.
      latency_histogram h;
      h.record(std::chrono::microseconds{100});
      out.add("gost_stage_run_seconds", "", {{"stage", "audit"}}, h);
      out.add("gost_unrelated_total", stat_kind::counter, "", {}, 99);
    });
  }
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

constexpr int64_t s = 1'000'000; // µs

} // namespace

TEST_CASE("the sample ring turns counters into rates per second and keeps gauges as read") {
  figures f;
  series_ring ring{10, 5000, runtime::console_series_rules()};
  f.stage_runs["audit"] = 100;
  f.stage_failures["audit"] = 1;
  f.shard_runs = {{0, 10}, {1, 20}};
  f.shard_backlog = {{0, 3}, {1, 4}};
  f.writer_lag_s = {{0, 0.25}, {1, 0.5}};
  ring.sample(f.reg, 100 * s);
  f.stage_runs["audit"] = 150; // +50 in 5 s
  f.stage_failures["audit"] = 6;
  f.shard_runs = {{0, 20}, {1, 40}}; // +30 over both shards
  f.shard_backlog = {{0, 1}, {1, 0}};
  f.writer_lag_s = {{0, 0}, {1, 0.125}};
  ring.sample(f.reg, 105 * s);
  REQUIRE(ring.size() == 2);
  auto json = ring.json();
  INFO(json);
  CHECK(has(json, "{\"interval_ms\":5000,\"capacity\":10,\"at_us\":[100000000,105000000],"));
  // The first sample has no rate (no earlier counter), the second the delta over 5 s.
  CHECK(has(json, "{\"group\":\"stage\",\"key\":\"audit\",\"runs_per_s\":[null,10],"
                  "\"failures_per_s\":[null,1],\"backlog\":[null,null],"
                  "\"write_lag_ms\":[null,null]}"));
  // Offers: the shards summed, the writers' lag the largest, in ms.
  CHECK(has(json, "{\"group\":\"offers\",\"key\":\"offers\",\"runs_per_s\":[null,6],"
                  "\"failures_per_s\":[null,null],\"backlog\":[7,1],"
                  "\"write_lag_ms\":[500,125]}"));
  // A negative image queue ("not counted yet") is no backlog, and unnamed families no series.
  CHECK_FALSE(has(json, "\"group\":\"image\""));
  CHECK_FALSE(has(json, "unrelated"));
}

TEST_CASE("a counter that went down counts from zero; a shared figure reaches every member") {
  figures f;
  series_ring ring{10, 1000, runtime::console_series_rules()};
  f.kind_runs = {{"bank.account", 40}, {"task.moderation", 7}};
  f.kind_backlog = {{"bank.account", 2}, {"task.moderation", 0}};
  f.entity_lag_s = 0.002;
  ring.sample(f.reg, 10 * s);
  f.kind_runs = {{"bank.account", 4}, {"task.moderation", 9}}; // the account kind restarted
  ring.sample(f.reg, 12 * s);
  auto json = ring.json();
  INFO(json);
  CHECK(has(json, "{\"group\":\"kind\",\"key\":\"bank.account\",\"runs_per_s\":[null,2],"
                  "\"failures_per_s\":[null,null],\"backlog\":[2,2],\"write_lag_ms\":[2,2]}"));
  CHECK(has(json, "{\"group\":\"kind\",\"key\":\"task.moderation\",\"runs_per_s\":[null,1],"));
}

TEST_CASE("the ring keeps the last samples; series that come late or go are null meanwhile") {
  figures f;
  series_ring ring{3, 1000, runtime::console_series_rules()};
  f.stage_runs["a"] = 0;
  for (int i = 1; i <= 5; ++i) {
    f.stage_runs["a"] += i; // rates 2, 3, 4, 5 after the first
    if (i == 4)
      f.stage_runs["late"] = 10;
    if (i == 5)
      f.stage_runs.erase("a");
    ring.sample(f.reg, i * s);
  }
  // A sample not later than the last is ignored.
  ring.sample(f.reg, 5 * s);
  CHECK(ring.size() == 3);
  auto json = ring.json();
  INFO(json);
  CHECK(has(json, "\"capacity\":3,\"at_us\":[3000000,4000000,5000000]"));
  CHECK(has(json, "{\"group\":\"stage\",\"key\":\"a\",\"runs_per_s\":[3,4,null],"));
  CHECK(has(json, "{\"group\":\"stage\",\"key\":\"late\",\"runs_per_s\":[null,null,0],"));
  // Once the ring no longer holds a value of it, a series that went away is forgotten.
  ring.sample(f.reg, 6 * s);
  CHECK(has(ring.json(), "\"key\":\"a\""));
  ring.sample(f.reg, 7 * s);
  CHECK_FALSE(has(ring.json(), "\"key\":\"a\""));
  CHECK(has(ring.json(), "\"key\":\"late\""));
}
