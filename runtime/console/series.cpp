#include "console/series.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gost/core/stats_registry.hpp"
#include "rpc/proto_types.hpp"

namespace gost::runtime {

namespace {

constexpr size_t index_of(series_field f) {
  return static_cast<size_t>(f);
}

bool is_rate(size_t field) {
  return field == index_of(series_field::runs) || field == index_of(series_field::failures);
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

} // namespace

std::vector<series_rule> console_series_rules() {
  using f = series_field;
  return {
    {"gost_stage_runs_total", "stage", "stage", "", f::runs},
    {"gost_stage_failures_total", "stage", "stage", "", f::failures},
    {"gost_offer_shard_runs_total", "offers", "", "offers", f::runs},
    {"gost_offer_shard_run_failures_total", "offers", "", "offers", f::failures},
    {"gost_offer_shard_queue_backlog", "offers", "", "offers", f::backlog},
    {"gost_offer_write_lag_seconds", "offers", "", "offers", f::write_lag, 1000},
    {"gost_entity_kind_runs_total", "kind", "kind", "", f::runs},
    {"gost_entity_kind_run_failures_total", "kind", "kind", "", f::failures},
    {"gost_entity_kind_queue_backlog", "kind", "kind", "", f::backlog},
    {"gost_entity_write_lag_seconds", "kind", "", "", f::write_lag, 1000},
    {"gost_scheduled_attempts_succeeded_total", "scheduled", "", "actions", f::runs},
    {"gost_scheduled_attempts_failed_total", "scheduled", "", "actions", f::failures},
    {"gost_image_tasks_computed_total", "image", "function", "", f::runs},
    {"gost_image_task_failures_total", "image", "function", "", f::failures},
    {"gost_image_queue_depth", "image", "function", "", f::backlog},
    {"gost_feed_loads_succeeded_total", "feed", "", "loads", f::runs},
    {"gost_feed_loads_failed_total", "feed", "", "loads", f::failures},
  };
}

series_ring::series_ring(size_t capacity, int64_t interval_ms, std::vector<series_rule> rules)
  : capacity_(std::max<size_t>(capacity, 2)), interval_ms_(interval_ms) {
  for (auto& r : rules)
    rules_[r.metric].push_back(std::move(r));
}

void series_ring::sample(const stats_registry& reg, int64_t at_us) {
  // This sample's raw figures per series, and the group-wide ones (no key) apart.
  std::map<series_id, figures> now;
  std::map<std::string, figures> shared;
  auto put = [](figures& to, size_t field, double v) {
    if (field == index_of(series_field::write_lag))
      to.value[field] = to.has[field] ? std::max(to.value[field], v) : v;
    else
      to.value[field] += v;
    to.has[field] = true;
  };
  metric_families sink{[&](std::string_view name, const metric_labels& labels, double value) {
    auto it = rules_.find(name);
    if (it == rules_.end())
      return;
    for (auto& r : it->second) {
      auto field = index_of(r.field);
      if (r.field == series_field::backlog && value < 0)
        continue;
      auto v = value * r.scale;
      if (r.key_label.empty() && r.key.empty()) {
        put(shared[r.group], field, v);
        continue;
      }
      std::string key = r.key;
      if (!r.key_label.empty()) {
        auto l = std::find_if(labels.begin(), labels.end(),
                              [&](auto& kv) { return kv.first == r.key_label; });
        if (l == labels.end())
          continue;
        key = l->second;
      }
      put(now[{r.group, key}], field, v);
    }
  }};
  reg.collect(sink);
  for (auto& [group, f] : shared)
    for (auto& [id, g] : now)
      if (id.first == group)
        for (size_t i = 0; i < fields; ++i)
          if (f.has[i])
            put(g, i, f.value[i]);

  std::lock_guard<std::mutex> guard{mtx_};
  if (!at_us_.empty() && at_us <= at_us_.back())
    return;
  double dt = at_us_.empty() ? 0.0 : static_cast<double>(at_us - at_us_.back()) / 1e6;
  at_us_.push_back(at_us);
  for (auto& [id, raw] : now) {
    auto [it, added] = series_.try_emplace(id);
    auto& s = it->second;
    if (added)
      s.points.resize(at_us_.size() - 1); // null before it was seen
    figures point;
    for (size_t i = 0; i < fields; ++i) {
      if (!raw.has[i])
        continue;
      if (!is_rate(i)) {
        point.value[i] = raw.value[i];
        point.has[i] = true;
      } else if (s.seen_last && s.last_raw.has[i] && dt > 0) {
        auto prev = s.last_raw.value[i];
        auto delta = raw.value[i] >= prev ? raw.value[i] - prev : raw.value[i];
        point.value[i] = delta / dt;
        point.has[i] = true;
      }
    }
    s.points.push_back(point);
    s.last_raw = raw;
    s.seen_last = true;
  }
  for (auto& [id, s] : series_)
    if (now.count(id) == 0) {
      s.points.emplace_back(); // absent this time: null, and its rates start over
      s.seen_last = false;
    }
  while (at_us_.size() > capacity_) {
    at_us_.pop_front();
    for (auto& [id, s] : series_)
      s.points.pop_front();
  }
  // A series with nothing left in the ring is forgotten.
  for (auto it = series_.begin(); it != series_.end();) {
    bool any = std::any_of(it->second.points.begin(), it->second.points.end(), [](auto& p) {
      return std::any_of(std::begin(p.has), std::end(p.has), [](bool b) { return b; });
    });
    it = any || it->second.seen_last ? std::next(it) : series_.erase(it);
  }
}

std::string series_ring::json() const {
  static const char* names[fields] = {"runs_per_s", "failures_per_s", "backlog", "write_lag_ms"};
  std::lock_guard<std::mutex> guard{mtx_};
  std::string out = "{\"interval_ms\":" + std::to_string(interval_ms_)
                    + ",\"capacity\":" + std::to_string(capacity_) + ",\"at_us\":[";
  for (size_t i = 0; i < at_us_.size(); ++i)
    out += (i ? "," : "") + std::to_string(at_us_[i]);
  out += "],\"series\":[";
  bool first = true;
  for (auto& [id, s] : series_) {
    out += std::string{first ? "" : ","} + "{\"group\":" + rpc::json_quoted(id.first)
           + ",\"key\":" + rpc::json_quoted(id.second);
    first = false;
    for (size_t f = 0; f < fields; ++f) {
      out += ",\"" + std::string{names[f]} + "\":[";
      for (size_t i = 0; i < s.points.size(); ++i) {
        auto& p = s.points[i];
        out += (i ? "," : "");
        out += p.has[f] && std::isfinite(p.value[f]) ? number(p.value[f]) : "null";
      }
      out += "]";
    }
    out += "}";
  }
  return out + "]}";
}

size_t series_ring::size() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return at_us_.size();
}

} // namespace gost::runtime
