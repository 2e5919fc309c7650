#include "gost/core/stats_registry.hpp"

#include <algorithm>
#include <sstream>
#include <tuple>

#include "gost/core/kit/writer.hpp"

namespace gost {

namespace {

const char* type_name(metric_type t) {
  switch (t) {
    case metric_type::counter: return "counter";
    case metric_type::gauge: return "gauge";
    case metric_type::histogram: return "histogram";
  }
  return "untyped";
}

metric_type type_of(stat_kind k) {
  return k == stat_kind::counter ? metric_type::counter : metric_type::gauge;
}

/// `a="x",b="y"` (no braces), values escaped as the text format asks.
std::string label_text(const metric_labels& labels) {
  std::string out;
  for (auto& [name, value] : labels) {
    if (!out.empty())
      out += ',';
    out += name;
    out += "=\"";
    for (char c : value) {
      if (c == '\\' || c == '"')
        out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    out += '"';
  }
  return out;
}

/// HELP text escaped (backslash, newline).
std::string help_text(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

double age_seconds(int64_t since_us, int64_t now_us) {
  return since_us == 0 ? 0.0 : static_cast<double>(std::max<int64_t>(0, now_us - since_us)) / 1e6;
}

} // namespace

metric_families::family* metric_families::of(std::string_view name, metric_type type,
                                             std::string_view help) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    index_.emplace(std::string{name}, families_.size());
    families_.push_back({std::string{name}, type, help_text(help), {}});
    return &families_.back();
  }
  auto& f = families_[it->second];
  return f.type == type ? &f : nullptr;
}

void metric_families::declare(std::string_view name, metric_type type, std::string_view help) {
  of(name, type, help);
}

void metric_families::add(std::string_view name, metric_type type, std::string_view help,
                          const metric_labels& labels, double value) {
  auto* f = of(name, type, help);
  if (f == nullptr)
    return;
  if (sink_) {
    sink_(f->name, labels, value);
    return;
  }
  f->samples += f->name;
  if (!labels.empty())
    f->samples += "{" + label_text(labels) + "}";
  f->samples += " " + number(value) + "\n";
}

void metric_families::add(std::string_view name, stat_kind kind, std::string_view help,
                          const metric_labels& labels, int64_t value) {
  auto* f = of(name, type_of(kind), help);
  if (f == nullptr)
    return;
  if (sink_) {
    sink_(f->name, labels, static_cast<double>(value));
    return;
  }
  f->samples += f->name;
  if (!labels.empty())
    f->samples += "{" + label_text(labels) + "}";
  f->samples += " " + std::to_string(value) + "\n";
}

void metric_families::add(std::string_view name, std::string_view help, const metric_labels& labels,
                          const latency_histogram& h) {
  auto* f = of(name, metric_type::histogram, help);
  if (f == nullptr || sink_)
    return;
  auto l = label_text(labels);
  auto with_le = l.empty() ? std::string{} : l + ",";
  auto bare = l.empty() ? std::string{} : "{" + l + "}";
  auto& out = f->samples;
  uint64_t cumulative = 0;
  for (int i = 0; i < latency_histogram::buckets; ++i) {
    cumulative += h.bucket(i);
    if ((i + 1) % latency_histogram::per_octave == 0)
      out += f->name + "_bucket{" + with_le + "le=\"" + number(latency_histogram::upper_us(i) / 1e6)
             + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += f->name + "_bucket{" + with_le + "le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
  out += f->name + "_sum" + bare + " " + number(static_cast<double>(h.sum_us()) / 1e6) + "\n";
  out += f->name + "_count" + bare + " " + std::to_string(cumulative) + "\n";
}

std::string metric_families::text() const {
  std::string out;
  for (auto& f : families_) {
    out +=
      "# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " " + type_name(f.type) + "\n";
    out += f.samples;
  }
  return out;
}

void stats_registry::add(collector c) {
  std::lock_guard<std::mutex> guard{mtx_};
  collectors_.push_back(std::move(c));
}

void stats_registry::add_histogram(std::string name, std::string help,
                                   std::shared_ptr<const latency_histogram> h,
                                   metric_labels labels) {
  add([name = std::move(name), help = std::move(help), h = std::move(h),
       labels = std::move(labels)](metric_families& out) { out.add(name, help, labels, *h); });
}

void stats_registry::collect(metric_families& out) const {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& c : collectors_)
    c(out);
}

std::string stats_registry::prometheus_text() const {
  metric_families out;
  collect(out);
  return out.text();
}

namespace kit {

void add_shard_metrics(stats_registry& reg, std::string prefix,
                       std::shared_ptr<const shard_registry> shards) {
  reg.add([prefix = std::move(prefix), shards = std::move(shards)](metric_families& out) {
    // The families in declaration order even without a live shard.
    shard_stats{}.visit([&](stat_kind k, const char* name, const char* help, int64_t) {
      out.declare(prefix + name, type_of(k), help);
    });
    auto oldest = prefix + "oldest_due_age_seconds";
    const char* oldest_help =
      "Age of the oldest due queue entry waiting for a slot in the shard (0: none waits).";
    out.declare(oldest, metric_type::gauge, oldest_help);
    auto now = now_us();
    for (auto& [shard, st] : shards->live()) {
      metric_labels labels{{"shard", std::to_string(shard)}};
      st->visit([&](stat_kind k, const char* name, const char* help, int64_t v) {
        out.add(prefix + name, k, help, labels, v);
      });
      out.add(oldest, metric_type::gauge, oldest_help, labels,
              age_seconds(st->oldest_due_us.load(std::memory_order_relaxed), now));
    }
  });
}

void add_writer_metrics(stats_registry& reg, std::string prefix,
                        std::shared_ptr<const writer_stats> writes) {
  reg.add([prefix = std::move(prefix), w = std::move(writes)](metric_families& out) {
    auto now = now_us();
    auto lag = prefix + "write_lag_seconds";
    const char* lag_help = "Age of the oldest write-set a writer holds uncommitted (0: none).";
    out.declare(lag, metric_type::gauge, lag_help);
    for (size_t i = 0; i < w->slots.size(); ++i)
      out.add(lag, metric_type::gauge, lag_help, {{"writer", std::to_string(i)}},
              age_seconds(w->slots[i].oldest_us.load(std::memory_order_relaxed), now));
    auto batch = prefix + "write_last_batch_size";
    const char* batch_help = "Write-sets in the batch a writer committed last.";
    out.declare(batch, metric_type::gauge, batch_help);
    for (size_t i = 0; i < w->slots.size(); ++i)
      out.add(batch, stat_kind::gauge, batch_help, {{"writer", std::to_string(i)}},
              static_cast<int64_t>(w->slots[i].last_batch.load(std::memory_order_relaxed)));
    out.add(prefix + "write_commit_seconds", "Duration of each write-behind batch's transaction.",
            {}, w->commit);
  });
}

void add_entity_kind_metrics(stats_registry& reg, std::string prefix,
                             std::shared_ptr<const shard_registry> shards,
                             std::vector<std::string> kinds) {
  reg.add([prefix = std::move(prefix), shards = std::move(shards),
           kinds = std::move(kinds)](metric_families& out) {
    // The figures of one lane (GOST_LANE_STATS) in order, summed over the shards.
    struct sums {
      std::vector<int64_t> values;
      void add(const lane_stats& l) {
        size_t i = 0;
        l.visit([&](stat_kind, const char*, const char*, int64_t v) {
          if (values.size() <= i)
            values.resize(i + 1, 0);
          values[i++] += v;
        });
      }
    };
    std::map<std::string, sums> by_kind;
    std::map<std::string, int64_t> resident;
    for (auto& k : kinds) {
      by_kind[k];
      resident[k];
    }
    struct calls {
      int64_t replied = 0, refused = 0, failed = 0, sends_refused = 0;
    };
    std::map<std::string, calls> by_kind_calls;
    for (auto& k : kinds)
      by_kind_calls[k];
    std::map<std::pair<std::string, std::string>, sums> by_lane;
    for (auto& [shard, f] : shards->live()) {
      for (auto& [kind, n] : f->residents())
        resident[kind] += n;
      for (auto& [kind, c] : f->kind_calls()) {
        auto& to = by_kind_calls[kind];
        auto get = [](const std::atomic<uint64_t>& v) {
          return static_cast<int64_t>(v.load(std::memory_order_relaxed));
        };
        to.replied += get(c->asks_replied);
        to.refused += get(c->asks_refused);
        to.failed += get(c->asks_failed);
        to.sends_refused += get(c->sends_refused);
      }
      for (auto& [id, l] : f->lanes()) {
        auto slash = id.find('/');
        auto kind = id.substr(0, slash);
        by_lane[{kind, slash == std::string::npos ? "" : id.substr(slash + 1)}].add(*l);
        by_kind[kind].add(*l);
      }
    }
    // Per kind, then per lane: the lane figures' names after "kind_" and "lane_".
    auto render = [&](const std::string& infix, const metric_labels& labels, const sums& s) {
      size_t i = 0;
      lane_stats{}.visit([&](stat_kind k, const char* name, const char* help, int64_t) {
        auto v = i < s.values.size() ? s.values[i] : 0;
        ++i;
        out.add(prefix + infix + name, k, help, labels, v);
      });
    };
    lane_stats{}.visit([&](stat_kind k, const char* name, const char* help, int64_t) {
      out.declare(prefix + "kind_" + name, type_of(k), help);
    });
    for (auto& [kind, s] : by_kind)
      render("kind_", {{"kind", kind}}, s);
    auto res = prefix + "kind_actors_resident";
    const char* res_help = "Entity actors of the kind in memory on this node.";
    out.declare(res, metric_type::gauge, res_help);
    for (auto& [kind, n] : resident)
      out.add(res, stat_kind::gauge, res_help, {{"kind", kind}}, n);
    auto asks = prefix + "asks_total";
    const char* asks_help = "Asks the kind's entities answered on this node, by outcome: reply "
                            "(committed), refused (the handler said no), error.";
    auto refused = prefix + "sends_refused_total";
    const char* refused_help = "Stored events of the kind (sent, or a timer's) whose handler "
                               "refused them when they ran (consumed, nothing kept).";
    out.declare(asks, metric_type::counter, asks_help);
    out.declare(refused, metric_type::counter, refused_help);
    for (auto& [kind, c] : by_kind_calls) {
      out.add(asks, stat_kind::counter, asks_help, {{"kind", kind}, {"outcome", "reply"}},
              c.replied);
      out.add(asks, stat_kind::counter, asks_help, {{"kind", kind}, {"outcome", "refused"}},
              c.refused);
      out.add(asks, stat_kind::counter, asks_help, {{"kind", kind}, {"outcome", "error"}},
              c.failed);
      out.add(refused, stat_kind::counter, refused_help, {{"kind", kind}}, c.sends_refused);
    }
    lane_stats{}.visit([&](stat_kind k, const char* name, const char* help, int64_t) {
      out.declare(prefix + "lane_" + name, type_of(k), help);
    });
    for (auto& [key, s] : by_lane)
      render("lane_", {{"kind", key.first}, {"lane", key.second}}, s);
  });
}

} // namespace kit

void add_stage_metrics(stats_registry& reg, std::shared_ptr<const node_stats> stats) {
  reg.add([a = std::move(stats)](metric_families& out) {
    auto each = [&](const char* name, stat_kind kind, const char* help, auto value) {
      out.declare(name, type_of(kind), help);
      for (auto& s : a->stages)
        out.add(name, kind, help, {{"stage", s.id}}, static_cast<int64_t>(value(s)));
    };
    each("gost_stage_runs_total", stat_kind::counter, "Stage runs committed, by stage.",
         [](const stage_metrics& s) { return s.runs.load(); });
    each("gost_stage_failures_total", stat_kind::counter,
         "Stage process calls that failed, by stage.",
         [](const stage_metrics& s) { return s.failures.load(); });
    each("gost_stage_paused", stat_kind::gauge,
         "1 while operators keep the stage paused (its runs do not start), else 0.",
         [](const stage_metrics& s) { return s.paused.load() ? 1 : 0; });
    auto histogram = [&](const char* name, const char* help, auto member) {
      out.declare(name, metric_type::histogram, help);
      for (auto& s : a->stages)
        out.add(name, help, {{"stage", s.id}}, s.*member);
    };
    histogram("gost_stage_run_seconds",
              "From the shard's dispatch to the commit of a stage run (load, process, write).",
              &stage_metrics::run);
    histogram("gost_stage_process_seconds", "The stage's process call alone.",
              &stage_metrics::process);
  });
}

} // namespace gost
