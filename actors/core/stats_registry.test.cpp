#include <doctest/doctest.h>

#include "gost/core/stats_registry.hpp"

#include <string>
#include <utility>
#include <vector>

using namespace gost;

namespace {

#define GOST_TEST_STATS(X)                                                                         \
  X(counter, runs, "runs_total", "Runs committed.")                                                \
  X(gauge, busy, "busy", "Busy workers.")

struct test_stats {
  GOST_TEST_STATS(GOST_STAT_MEMBER)
  GOST_STATS_VISIT(GOST_TEST_STATS)
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("the stats registry renders X-macro stats with prefix and labels, one HELP and TYPE "
          "per family") {
  stats_registry reg;
  auto a = std::make_shared<test_stats>();
  auto b = std::make_shared<test_stats>();
  a->runs = 3;
  a->busy = 2;
  b->runs = 5;
  reg.add_stats<test_stats>("gost_fn_", a, {{"function", "preview"}});
  reg.add_stats<test_stats>("gost_fn_", b, {{"function", "rotate"}});
  reg.add_stats<test_stats>("gost_other_", a);
  auto text = reg.prometheus_text();

  CHECK(count(text, "# HELP gost_fn_runs_total Runs committed.\n") == 1);
  CHECK(count(text, "# TYPE gost_fn_runs_total counter\n") == 1);
  CHECK(count(text, "# TYPE gost_fn_busy gauge\n") == 1);
  CHECK(text.find("gost_fn_runs_total{function=\"preview\"} 3\n") != std::string::npos);
  CHECK(text.find("gost_fn_runs_total{function=\"rotate\"} 5\n") != std::string::npos);
  CHECK(text.find("gost_fn_busy{function=\"preview\"} 2\n") != std::string::npos);
  CHECK(text.find("gost_other_runs_total 3\n") != std::string::npos);
  // A family's samples follow its TYPE line together, whoever registered them.
  auto type = text.find("# TYPE gost_fn_runs_total counter\n");
  auto preview = text.find("gost_fn_runs_total{function=\"preview\"}");
  auto rotate = text.find("gost_fn_runs_total{function=\"rotate\"}");
  auto next = text.find("# HELP", type);
  CHECK(type < preview);
  CHECK(rotate < next);

  // Live values: the registry reads the atomics at every rendering.
  a->runs += 1;
  CHECK(reg.prometheus_text().find("gost_fn_runs_total{function=\"preview\"} 4\n")
        != std::string::npos);
}

TEST_CASE("the stats registry escapes label values and keeps the first type of a family") {
  stats_registry reg;
  reg.add([](metric_families& out) {
    out.add("gost_x_total", stat_kind::counter, "X.", {{"kind", "a\"b\\c\nd"}}, 1);
    out.add("gost_x_total", stat_kind::gauge, "X as a gauge.", {{"kind", "other"}}, 2);
    out.declare("gost_empty", metric_type::gauge, "No series yet.");
  });
  auto text = reg.prometheus_text();
  CHECK(text.find("gost_x_total{kind=\"a\\\"b\\\\c\\nd\"} 1\n") != std::string::npos);
  CHECK(text.find("kind=\"other\"") == std::string::npos);
  CHECK(count(text, "# TYPE gost_x_total counter\n") == 1);
  CHECK(text.find("# HELP gost_empty No series yet.\n# TYPE gost_empty gauge\n")
        != std::string::npos);
}

TEST_CASE("the stats registry renders histograms with their labels") {
  stats_registry reg;
  auto h = std::make_shared<latency_histogram>();
  h->record(std::chrono::microseconds{3});
  h->record(std::chrono::microseconds{1000});
  reg.add_histogram("gost_h_seconds", "Durations.", h, {{"stage", "audit"}});
  auto text = reg.prometheus_text();
  CHECK(count(text, "# TYPE gost_h_seconds histogram\n") == 1);
  CHECK(text.find("gost_h_seconds_bucket{stage=\"audit\",le=\"2e-06\"} 0\n") != std::string::npos);
  CHECK(text.find("gost_h_seconds_bucket{stage=\"audit\",le=\"4e-06\"} 1\n") != std::string::npos);
  CHECK(text.find("gost_h_seconds_bucket{stage=\"audit\",le=\"+Inf\"} 2\n") != std::string::npos);
  CHECK(text.find("gost_h_seconds_count{stage=\"audit\"} 2\n") != std::string::npos);
  CHECK(text.find("gost_h_seconds_sum{stage=\"audit\"} 0.001003\n") != std::string::npos);
}

TEST_CASE("the entity kinds' figures are the shards' lanes summed per kind and per lane") {
  stats_registry reg;
  auto shards = std::make_shared<kit::shard_registry>();
  auto s0 = shards->open(0);
  auto s1 = shards->open(1);
  s0->lane("bank.account").runs = 2;
  s1->lane("bank.account").runs = 3;
  s1->lane("bank.account/statements").runs = 4;
  s1->lane("bank.account/statements").dead_letters = 1;
  s0->resident_of("bank.account") = 5;
  s1->resident_of("bank.account") = 1;
  s0->calls_of("bank.account").asks_replied = 2;
  s1->calls_of("bank.account").asks_replied = 1;
  s1->calls_of("bank.account").asks_refused = 4;
  s0->calls_of("bank.account").sends_refused = 3;
  kit::add_entity_kind_metrics(reg, "gost_entity_", shards, {"bank.account", "watchlist"});
  auto text = reg.prometheus_text();
  CHECK(text.find("gost_entity_kind_runs_total{kind=\"bank.account\"} 9\n") != std::string::npos);
  CHECK(text.find("gost_entity_kind_runs_total{kind=\"watchlist\"} 0\n") != std::string::npos);
  CHECK(text.find("gost_entity_kind_dead_letters_total{kind=\"bank.account\"} 1\n")
        != std::string::npos);
  CHECK(text.find("gost_entity_kind_actors_resident{kind=\"bank.account\"} 6\n")
        != std::string::npos);
  CHECK(text.find("gost_entity_kind_actors_resident{kind=\"watchlist\"} 0\n") != std::string::npos);
  CHECK(text.find("gost_entity_lane_runs_total{kind=\"bank.account\",lane=\"\"} 5\n")
        != std::string::npos);
  CHECK(text.find("gost_entity_lane_runs_total{kind=\"bank.account\",lane=\"statements\"} 4\n")
        != std::string::npos);
  CHECK(count(text, "# TYPE gost_entity_lane_runs_total counter\n") == 1);
  CHECK(count(text, "# TYPE gost_entity_kind_queue_backlog gauge\n") == 1);
  // Asks by outcome and refused events, summed over the shards; every kind, every outcome.
  CHECK(text.find("gost_entity_asks_total{kind=\"bank.account\",outcome=\"reply\"} 3\n")
        != std::string::npos);
  CHECK(text.find("gost_entity_asks_total{kind=\"bank.account\",outcome=\"refused\"} 4\n")
        != std::string::npos);
  CHECK(text.find("gost_entity_asks_total{kind=\"bank.account\",outcome=\"error\"} 0\n")
        != std::string::npos);
  CHECK(text.find("gost_entity_asks_total{kind=\"watchlist\",outcome=\"refused\"} 0\n")
        != std::string::npos);
  CHECK(text.find("gost_entity_sends_refused_total{kind=\"bank.account\"} 3\n")
        != std::string::npos);
  CHECK(count(text, "# TYPE gost_entity_asks_total counter\n") == 1);
}

TEST_CASE("the shards' and writers' figures: one series per live shard and per writer") {
  stats_registry reg;
  auto shards = std::make_shared<kit::shard_registry>();
  auto s3 = shards->open(3);
  s3->epoch = 7;
  kit::add_shard_metrics(reg, "gost_offer_shard_", shards);
  auto writes = std::make_shared<kit::writer_stats>();
  writes->slots.emplace_back();
  writes->slots.emplace_back();
  writes->slots[1].last_batch = 12;
  kit::add_writer_metrics(reg, "gost_offer_", writes);
  auto text = reg.prometheus_text();
  CHECK(text.find("gost_offer_shard_lease_epoch{shard=\"3\"} 7\n") != std::string::npos);
  CHECK(text.find("gost_offer_shard_oldest_due_age_seconds{shard=\"3\"} 0\n") != std::string::npos);
  CHECK(text.find("gost_offer_write_last_batch_size{writer=\"1\"} 12\n") != std::string::npos);
  CHECK(text.find("gost_offer_write_lag_seconds{writer=\"0\"} 0\n") != std::string::npos);
  CHECK(text.find("gost_offer_write_commit_seconds_count 0\n") != std::string::npos);
  s3.reset(); // a stopped shard drops out by itself
  CHECK(reg.prometheus_text().find("shard=\"3\"") == std::string::npos);
}

TEST_CASE("metric_families with a sink passes counters and gauges on and writes no text") {
  std::vector<std::pair<std::string, double>> seen;
  metric_families out{[&](std::string_view name, const metric_labels& labels, double v) {
    seen.emplace_back(std::string{name} + (labels.empty() ? "" : "/" + labels[0].second), v);
  }};
  out.add("c_total", stat_kind::counter, "h", {{"k", "x"}}, 3);
  out.add("g", metric_type::gauge, "h", {}, 0.5);
  latency_histogram h;
  out.add("h_seconds", "h", {}, h);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::pair<std::string, double>{"c_total/x", 3});
  CHECK(seen[1] == std::pair<std::string, double>{"g", 0.5});
  CHECK(out.text().find("c_total 3") == std::string::npos);
}
