#include "console/metrics.hpp"

#include "api/readiness.hpp"
#include "gost/config/node_config.hpp"
#include "gost/core/dependency.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/feeds/pools.hpp"
#include "gost/images/stats.hpp"
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

/// A label value in the exposition format: `\`, `"` and newlines escaped.
std::string label_value(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"')
      out += '\\';
    out += c == '\n' ? std::string{"\\n"} : std::string(1, c);
  }
  return out;
}

void family(std::ostringstream& out, const std::string& name, const char* type, const char* help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

/// The samples of one histogram series (`labels`: `stage="x",` or empty): every 8th bucket of
/// latency_histogram, powers of two from 2 µs up, in seconds.
void histogram_samples(std::ostringstream& out, const std::string& name, const std::string& labels,
                       const latency_histogram& h) {
  uint64_t cumulative = 0;
  for (int i = 0; i < latency_histogram::buckets; ++i) {
    cumulative += h.bucket(i);
    if ((i + 1) % latency_histogram::per_octave == 0)
      out << name << "_bucket{" << labels << "le=\"" << latency_histogram::upper_us(i) / 1e6
          << "\"} " << cumulative << "\n";
  }
  auto bare = labels.empty() ? std::string{} : "{" + labels.substr(0, labels.size() - 1) + "}";
  out << name << "_bucket{" << labels << "le=\"+Inf\"} " << cumulative << "\n"
      << name << "_sum" << bare << " " << h.sum_us() / 1e6 << "\n"
      << name << "_count" << bare << " " << cumulative << "\n";
}

/// The offer shards' own figures, one series per shard this node runs (label `shard`: at
/// most shard.count values).
void shard_families(std::ostringstream& out, const kit::shard_registry& registry) {
  auto shards = registry.live();
  std::vector<std::tuple<stat_kind, std::string, const char*>> families;
  kit::shard_stats{}.visit([&](stat_kind k, const char* name, const char* help, int64_t) {
    families.emplace_back(k, name, help);
  });
  for (size_t i = 0; i < families.size(); ++i) {
    auto& [kind, suffix, help] = families[i];
    auto name = "gost_offer_shard_" + suffix;
    family(out, name, kind == stat_kind::counter ? "counter" : "gauge", help);
    for (auto& [shard, st] : shards) {
      size_t at = 0;
      st->visit([&, shard = shard](stat_kind, const char*, const char*, int64_t v) {
        if (at++ == i)
          out << name << "{shard=\"" << shard << "\"} " << v << "\n";
      });
    }
  }
  family(out, "gost_offer_shard_oldest_due_age_seconds", "gauge",
         "Age of the oldest due queue entry waiting for a slot in the shard (0: none waits).");
  auto now = kit::now_us();
  for (auto& [shard, st] : shards) {
    auto due = st->oldest_due_us.load(std::memory_order_relaxed);
    out << "gost_offer_shard_oldest_due_age_seconds{shard=\"" << shard << "\"} "
        << (due == 0 ? 0.0 : std::max<int64_t>(0, now - due) / 1e6) << "\n";
  }
}

/// The offers' write-behind writers: lag and batch size per writer (label `writer`: at most
/// write.writers values), commit duration for all.
void writer_families(std::ostringstream& out, const kit::writer_stats& w) {
  auto now = kit::now_us();
  family(out, "gost_offer_write_lag_seconds", "gauge",
         "Age of the oldest write-set a writer holds uncommitted (0: none).");
  for (size_t i = 0; i < w.slots.size(); ++i) {
    auto oldest = w.slots[i].oldest_us.load(std::memory_order_relaxed);
    out << "gost_offer_write_lag_seconds{writer=\"" << i << "\"} "
        << (oldest == 0 ? 0.0 : std::max<int64_t>(0, now - oldest) / 1e6) << "\n";
  }
  family(out, "gost_offer_write_last_batch_size", "gauge",
         "Write-sets in the batch a writer committed last.");
  for (size_t i = 0; i < w.slots.size(); ++i)
    out << "gost_offer_write_last_batch_size{writer=\"" << i << "\"} "
        << w.slots[i].last_batch.load(std::memory_order_relaxed) << "\n";
  family(out, "gost_offer_write_commit_seconds", "histogram",
         "Duration of each write-behind batch's transaction.");
  histogram_samples(out, "gost_offer_write_commit_seconds", "", w.commit);
}

/// The image functions' figures (label `function`: 4 values; `kind`: the error kinds of
/// docs/images.md).
void image_families(std::ostringstream& out, const images::image_stats& st) {
  using images::function;
  const function fns[] = {function::ratio, function::preview, function::main_color,
                          function::rotate};
  auto per_function = [&](const char* name, const char* type, const char* help, auto value) {
    family(out, name, type, help);
    for (auto fn : fns)
      out << name << "{function=\"" << images::to_string(fn) << "\"} "
          << value(st.functions[images::image_stats::slot(fn)]) << "\n";
  };
  using pf = images::image_stats::per_function;
  per_function("gost_image_tasks_computed_total", "counter",
               "Image tasks computed and stored as results (rate: computed per second).",
               [](const pf& f) { return f.computed.load(std::memory_order_relaxed); });
  per_function("gost_image_queue_depth", "gauge",
               "Image tasks in the PostgreSQL queue, all nodes (counted by housekeeping; -1 "
               "before its first round).",
               [](const pf& f) { return f.queued.load(std::memory_order_relaxed); });
  per_function("gost_image_cache_hits_total", "counter",
               "ImageService requests that found a result or an error status cached.",
               [](const pf& f) { return f.cache_hits.load(std::memory_order_relaxed); });
  per_function("gost_image_cache_misses_total", "counter",
               "ImageService requests that found nothing cached (queued, or NOT_CACHED).",
               [](const pf& f) { return f.cache_misses.load(std::memory_order_relaxed); });
  per_function("gost_image_pool_workers", "gauge",
               "Threads of the function's pool on this node (images.<fn>_workers; 0: no pool).",
               [](const pf& f) { return f.workers.load(std::memory_order_relaxed); });
  per_function("gost_image_tasks_in_flight", "gauge",
               "Image tasks taken by this node and not yet stored (in the pool, or computed).",
               [](const pf& f) { return f.in_flight.load(std::memory_order_relaxed); });
  per_function("gost_image_kafka_waiting", "gauge",
               "Kafka queue tasks read by this node and waiting for a slot of the pool.",
               [](const pf& f) { return f.waiting.load(std::memory_order_relaxed); });
  per_function("gost_image_duplicates_skipped_total", "counter",
               "Kafka queue tasks skipped: identical to another of their batch, or their result "
               "was stored after they were asked (images.queue=kafka).",
               [](const pf& f) { return f.skipped.load(std::memory_order_relaxed); });
  family(out, "gost_image_task_failures_total", "counter",
         "Failed runs of image tasks by function and error kind (final and retried).");
  for (auto& [k, v] : st.failures())
    out << "gost_image_task_failures_total{function=\"" << images::to_string(k.first)
        << "\",kind=\"" << k.second << "\"} " << v << "\n";
  family(out, "gost_image_redis_hits_total", "counter",
         "Image results found in Redis (images.redis.address).");
  out << "gost_image_redis_hits_total " << st.redis_hits.load(std::memory_order_relaxed) << "\n";
  family(out, "gost_image_redis_fallbacks_total", "counter",
         "Redis calls of the image functions that failed or were skipped while Redis was away: "
         "PostgreSQL answered alone.");
  out << "gost_image_redis_fallbacks_total " << st.redis_fallbacks.load(std::memory_order_relaxed)
      << "\n";
}

/// The feed processor's figures, as declared once (GOST_FEED_STATS), and the per-offer problems
/// by type (label `type`: the six of gost::feeds::problem_type).
void feed_families(std::ostringstream& out, const feeds::feed_stats& st) {
  st.visit([&out](stat_kind kind, const char* name, const char* help, int64_t v) {
    auto full = std::string{"gost_feed_"} + name;
    family(out, full, kind == stat_kind::counter ? "counter" : "gauge", help);
    out << full << " " << v << "\n";
  });
  family(out, "gost_feed_offer_problems_total", "counter",
         "Problems of offers in feed files, by type (an offer may have several).");
  constexpr size_t types = sizeof(st.problems) / sizeof(st.problems[0]);
  for (size_t t = 0; t < types; ++t)
    out << "gost_feed_offer_problems_total{type=\""
        << feeds::to_string(static_cast<feeds::problem_type>(t)) << "\"} "
        << st.problems[t].load(std::memory_order_relaxed) << "\n";
}

} // namespace

std::string metrics::prometheus_text() const {
  std::ostringstream out;
  if (!build_.app.empty()) {
    family(out, "gost_build_info", "gauge",
           "Always 1: the application this node runs (gostd or one built with node_builder), "
           "its version and gost's.");
    out << "gost_build_info{app=\"" << label_value(build_.app) << "\",version=\""
        << label_value(build_.version) << "\",gost_version=\"" << config::gost_version()
        << "\"} 1\n";
  }
  family(out, "gost_grpc_requests_total", "counter",
         "gRPC requests answered, by method and status code.");
  for (size_t m = 0; m < call_stats::methods; ++m)
    for (size_t c = 0; c < call_stats::codes; ++c) {
      auto v = calls_.get(m, c);
      if (v != 0 || c == 0)
        out << "gost_grpc_requests_total{method=\"" << to_string(static_cast<api_method>(m))
            << "\",code=\"" << code_name(c) << "\"} " << v << "\n";
    }
  family(out, "gost_grpc_undecodable_requests_total", "counter",
         "Requests whose bytes were not their method's message (answered INVALID_ARGUMENT).");
  out << "gost_grpc_undecodable_requests_total " << rpc::undecodable_requests() << "\n";
  if (health_.traces) {
    family(out, "gost_console_traces_active", "gauge",
           "Live traces this node serves now (gostctl trace, and other nodes' traces of offers "
           "it owns).");
    out << "gost_console_traces_active " << health_.traces->serving.load() << "\n";
    family(out, "gost_console_trace_subscriptions", "gauge",
           "Subscriptions to this node's trace hub: while 0, an actor's event pays one relaxed "
           "load for tracing.");
    out << "gost_console_trace_subscriptions " << health_.traces->subscriptions() << "\n";
  }
  if (health_.ready) {
    family(out, "gost_ready", "gauge",
           "1 while the node takes calls (readiness: /readyz, gRPC health), else 0.");
    out << "gost_ready " << (health_.ready->ready() ? 1 : 0) << "\n";
  }
  if (!health_.dependencies.empty()) {
    family(out, "gost_dependency_up", "gauge",
           "1 while the dependency answered the last call that reached for it, else 0.");
    for (auto& d : health_.dependencies)
      out << "gost_dependency_up{dependency=\"" << d->name() << "\"} " << (d->up() ? 1 : 0) << "\n";
    family(out, "gost_dependency_failed_calls_total", "counter",
           "Calls that could not reach the dependency.");
    for (auto& d : health_.dependencies)
      out << "gost_dependency_failed_calls_total{dependency=\"" << d->name() << "\"} "
          << d->failed_calls() << "\n";
  }
  if (health_.images)
    image_families(out, *health_.images);
  if (health_.feeds)
    feed_families(out, *health_.feeds);
  auto& a = *actors_;
  // Every value the actors count, as declared once with its name and help (gost/core/stats.hpp).
  a.visit([&out](stat_kind kind, const std::string& name, const char* help, int64_t v) {
    family(out, "gost_" + name, kind == stat_kind::counter ? "counter" : "gauge", help);
    out << "gost_" << name << " " << v << "\n";
  });
  shard_families(out, a.offer_shards);
  writer_families(out, a.offer_writes);
  family(out, "gost_stage_runs_total", "counter", "Stage runs committed, by stage.");
  for (auto& s : a.stages)
    out << "gost_stage_runs_total{stage=\"" << s.id << "\"} " << s.runs.load() << "\n";
  family(out, "gost_stage_failures_total", "counter", "Stage process calls that failed, by stage.");
  for (auto& s : a.stages)
    out << "gost_stage_failures_total{stage=\"" << s.id << "\"} " << s.failures.load() << "\n";
  family(out, "gost_stage_paused", "gauge",
         "1 while operators keep the stage paused (its runs do not start), else 0.");
  for (auto& s : a.stages)
    out << "gost_stage_paused{stage=\"" << s.id << "\"} " << (s.paused.load() ? 1 : 0) << "\n";
  auto histogram = [&](const char* name, const char* help, auto member) {
    family(out, name, "histogram", help);
    for (auto& s : a.stages)
      histogram_samples(out, name, "stage=\"" + s.id + "\",", s.*member);
  };
  histogram("gost_stage_run_seconds",
            "From the shard's dispatch to the commit of a stage run (load, process, write).",
            &stage_metrics::run);
  histogram("gost_stage_process_seconds", "The stage's process call alone.",
            &stage_metrics::process);
  return out.str();
}

} // namespace gost::runtime
