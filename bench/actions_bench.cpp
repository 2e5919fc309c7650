// gost_bench actions: scheduled actions (seed 001, issue 15 item 4) at scale.
//
//   gost_bench actions --dsn DSN [--actions N] [--span SECONDS] [--measure SECONDS]
//                      [--burst B] [--shards S] [--pool P] [--batch K] [--poll MS]
//
// 1. N one-shot event actions (offer re-queues) created through the scheduler's own code path
//    (scheduler::create_many: checked, a guid each, an incoming row of a random shard), in
//    batches of 1,000 from two threads, due evenly over SPAN seconds starting after the load;
//    the shards' workers (the real worker actors, one per shard, as gostd spawns them) run
//    from the start and move the rows as they come.
// 2. The firing lag (the attempt handed to the action minus its scheduled time) of the actions
//    due in the first MEASURE seconds, while the N are scheduled.
// 3. A burst: B more actions created due at the same second, while the spread ones keep
//    coming due: the burst's actions executed per second (B over the time from their due
//    second to the last one's attempt) and the lag of the spread actions due meanwhile (no
//    starvation).
//
// The action the workers carry out records its lag and succeeds: the benchmark measures the
// scheduler (moves, due reads, the attempt's begin and finish transactions), not the target.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/send.hpp>
#include <pqxx/pqxx>

#include "common.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/scheduled/protocol.hpp"
#include "gost/scheduled/scheduler.hpp"

namespace gost::bench {

using namespace std::chrono_literals;

namespace {

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

int64_t now_ms() {
  return now_us() / 1000;
}

/// One attempt carried out: which action (spread index, or burst index + burst offset),
/// its scheduled time and when it was handed over.
struct fire {
  int64_t index = 0;
  int64_t due_ms = 0;
  int64_t at_us = 0;
};

class fire_log {
public:
  void add(const scheduled::attempt& a) {
    auto at = now_us();
    auto& id = a.action_id; // "s-<i>" or "b-<i>"
    fire f{std::stoll(id.substr(2)), a.scheduled_at_ms, at};
    std::lock_guard<std::mutex> g{mtx_};
    (id[0] == 'b' ? burst_ : spread_).push_back(f);
  }
  std::vector<fire> spread() {
    std::lock_guard<std::mutex> g{mtx_};
    return spread_;
  }
  std::vector<fire> burst() {
    std::lock_guard<std::mutex> g{mtx_};
    return burst_;
  }
  size_t burst_count() {
    std::lock_guard<std::mutex> g{mtx_};
    return burst_.size();
  }

private:
  std::mutex mtx_;
  std::vector<fire> spread_;
  std::vector<fire> burst_;
};

v1::ScheduledActionSpec requeue_at(int64_t due_ms, const std::string& offer_id) {
  v1::ScheduledActionSpec s;
  s.set_start_at_ms(due_ms);
  auto& r = *s.mutable_event()->mutable_offer_requeue();
  r.set_offer_id(offer_id);
  r.set_stage_id("noop");
  return s;
}

/// Creates actions `prefix<i>` for i in [0, n), due at `due(i)`, through the scheduler in
/// batches of 1,000 from `threads` threads; exits on failure.
void load(scheduled::scheduler& api, const char* prefix, int64_t n,
          const std::function<int64_t(int64_t)>& due, int threads) {
  constexpr int64_t chunk = 1000;
  std::atomic<int64_t> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (;;) {
        auto first = next.fetch_add(chunk);
        if (first >= n)
          return;
        std::vector<std::pair<std::string, v1::ScheduledActionSpec>> batch;
        for (auto i = first; i < std::min(n, first + chunk); ++i)
          batch.emplace_back(prefix + std::to_string(i),
                             requeue_at(due(i), "bench-" + std::to_string(i)));
        auto r = api.create_many(batch);
        if (!r) {
          std::fprintf(stderr, "gost_bench: create_many failed: %s\n",
                       persistence::error_message(r.error()).c_str());
          std::exit(1);
        }
      }
    });
  for (auto& t : ts)
    t.join();
}

/// p in [0, 1] of sorted lags (ms).
double pct(const std::vector<double>& sorted, double p) {
  if (sorted.empty())
    return 0;
  return sorted[std::min(sorted.size() - 1,
                         static_cast<size_t>(p * static_cast<double>(sorted.size())))];
}

struct lag_summary {
  double p50 = 0, p99 = 0, max = 0;
  size_t n = 0;
};

lag_summary summarize(std::vector<double> lags) {
  std::sort(lags.begin(), lags.end());
  lag_summary s;
  s.n = lags.size();
  s.p50 = pct(lags, 0.5);
  s.p99 = pct(lags, 0.99);
  s.max = lags.empty() ? 0 : lags.back();
  return s;
}

int64_t scalar(pqxx::connection& c, const std::string& sql) {
  pqxx::nontransaction tx{c};
  return tx.exec(sql)[0][0].as<int64_t>();
}

} // namespace

int actions_bench(std::map<std::string, std::string>& opt) {
  auto n = std::stoll(opt["actions"]);
  auto shards = static_cast<uint32_t>(std::stoul(opt["shards"]));
  auto span_ms = std::stoll(opt["span"]) * 1000;
  auto measure_ms = std::stoll(opt["measure"]) * 1000;
  auto burst = std::stoll(opt["burst"]);
  pqxx::connection c{opt["dsn"]};
  fresh_schema(c, opt["dsn"], shards);
  persistence::pg_pool::options po;
  po.dsn = opt["dsn"];
  po.size = std::stoi(opt["pool"]);
  persistence::pg_pool pool{po};
  auto epochs = persistence::acquire_all_leases(pool, "bench", shards);
  if (!epochs) {
    std::fprintf(stderr, "gost_bench: cannot take the leases\n");
    return 1;
  }
  scheduled::rules_options rules; // gostd's defaults
  scheduled::scheduler api{pool, shards, rules, now_ms};
  fire_log log;
  caf::actor_system_config cfg;
  configure(cfg, opt["policy"]);
  auto meter = process_and_server(opt["dsn"]);
  caf::actor_system sys{cfg};
  // As gostd: one poller for the node, a worker per shard.
  auto poll = std::chrono::milliseconds{std::stoll(opt["poll"])};
  auto poller = scheduled::spawn_poller(sys, pool, poll);
  std::vector<scheduled::worker_actor> workers;
  for (uint32_t s = 0; s < shards; ++s) {
    scheduled::worker_options wo;
    wo.pool = &pool;
    wo.shard = s;
    wo.epoch = (*epochs)[s];
    wo.node = "bench"; // the leases' owner (acquire_all_leases above): the steps' fence
    wo.rules = rules;
    wo.poll = poll;
    wo.poller = poller;
    wo.batch = std::stoul(opt["batch"]);
    wo.fire = [&log](const scheduled::attempt& a) {
      log.add(a);
      return std::string{};
    };
    workers.push_back(scheduled::spawn_worker(sys, std::move(wo)));
  }
  // Every way out stops the workers and the poller: the actor system's destructor waits for
  // its actors, so a return with them running would hang instead of exiting.
  bool poller_stopped = false;
  auto stop_actors = [&] {
    for (auto& w : workers)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    workers.clear();
    if (!poller_stopped)
      caf::anon_send_exit(poller, caf::exit_reason::user_shutdown);
    poller_stopped = true;
  };
  struct on_exit {
    std::function<void()> f;
    ~on_exit() { f(); }
  } stop_guard{stop_actors};

  // 1. The million, due over the span after the load (at least 8k/s: 130 µs each) and its
  // clean-up (20 s).
  auto first_due = now_ms() + 20'000 + n * 130 / 1000;
  std::fprintf(stderr, "gost_bench: creating %lld actions on %u shards, due over %lld s...\n",
               static_cast<long long>(n), shards, static_cast<long long>(span_ms / 1000));
  auto t0 = std::chrono::steady_clock::now();
  load(
    api, "s-", n, [&](int64_t i) { return first_due + i * span_ms / n; }, 2);
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "gost_bench: created in %.1f s (%.0f actions/s)\n", load_s,
               static_cast<double>(n) / load_s);
  // Moved by the workers as they came; wait for the last (the lag counts from the due time).
  while (scalar(c, "SELECT count(*) FROM scheduled_incoming") > 0) {
    if (now_ms() >= first_due) {
      std::fprintf(stderr, "gost_bench: the workers had not moved every action by the first due "
                           "time (fewer --actions)\n");
      return 1;
    }
    std::this_thread::sleep_for(200ms);
  }
  double moved_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // What follows a bulk load in production too, done now rather than by autovacuum during the
  // measurement: the million moved rows' dead incoming tuples vacuumed (the looks probe that
  // index), the statistics, and the checkpoint the load's writes call for.
  {
    pqxx::nontransaction tx{c};
    tx.exec("VACUUM (ANALYZE) scheduled_actions, scheduled_processing, scheduled_incoming");
    tx.exec("CHECKPOINT");
  }
  auto slack_ms = first_due - now_ms();
  std::fprintf(stderr,
               "gost_bench: every row moved to processing %.1f s after the start, vacuumed; "
               "first due in %lld ms\n",
               moved_s, static_cast<long long>(slack_ms));
  if (slack_ms < 3000) {
    std::fprintf(stderr, "gost_bench: the load took too long; actions would be late from the "
                         "start (fewer --actions, or a longer lead)\n");
    return 1;
  }

  // 2. The lag of those due in the first `measure` seconds.
  while (now_ms() < first_due)
    std::this_thread::sleep_for(5ms);
  auto cpu_before = meter.sample();
  auto measure_end = first_due + measure_ms;
  while (now_ms() < measure_end + 2000)
    std::this_thread::sleep_for(50ms);
  auto fired_in_window = log.spread().size();
  auto cpu = cpu_fields(cpu_before, meter.sample(), static_cast<double>(fired_in_window));

  // 3. The burst: B actions due at the same second, the spread ones still coming due.
  // The lead: the burst's creation at the rate the million were created at in this run (a
  // slower machine creates slower), doubled, plus 5 s.
  auto create_rate = static_cast<double>(n) / std::max(load_s, 1e-3);
  auto burst_due =
    now_ms() + 5'000 + static_cast<int64_t>(2000.0 * static_cast<double>(burst) / create_rate);
  burst_due -= burst_due % 1000;
  std::fprintf(stderr, "gost_bench: creating a burst of %lld actions due at one second...\n",
               static_cast<long long>(burst));
  load(
    api, "b-", burst, [&](int64_t) { return burst_due; }, 2);
  if (now_ms() >= burst_due - 500) {
    std::fprintf(stderr, "gost_bench: the burst was created too late\n");
    return 1;
  }
  auto give_up = burst_due + 600'000;
  while (log.burst_count() < static_cast<size_t>(burst) && now_ms() < give_up)
    std::this_thread::sleep_for(10ms);
  // The workers go on for 3 s after the burst's last firing: a shard that drained its burst
  // last still owes the spread actions that came due behind it (fired in due order), which the
  // check below expects fired when due 2 s before that end.
  if (log.burst_count() >= static_cast<size_t>(burst))
    std::this_thread::sleep_for(3s);
  auto burst_fires = log.burst();
  stop_actors();
  if (burst_fires.size() < static_cast<size_t>(burst)) {
    std::fprintf(stderr, "gost_bench: only %zu of the burst's %lld actions fired in 10 min\n",
                 burst_fires.size(), static_cast<long long>(burst));
    return 1;
  }
  int64_t last_burst_us = 0;
  std::vector<double> burst_lags;
  std::vector<bool> seen(static_cast<size_t>(burst), false);
  for (auto& f : burst_fires) {
    last_burst_us = std::max(last_burst_us, f.at_us);
    burst_lags.push_back(static_cast<double>(f.at_us - f.due_ms * 1000) / 1000.0);
    seen[static_cast<size_t>(f.index)] = true;
  }
  if (std::count(seen.begin(), seen.end(), false) != 0) {
    std::fprintf(stderr, "gost_bench: some burst actions fired twice, others not at all\n");
    return 1;
  }
  double drain_s = static_cast<double>(last_burst_us - burst_due * 1000) / 1e6;
  double burst_per_s = static_cast<double>(burst) / std::max(drain_s, 1e-3);

  // The spread actions: those due in the measured window, and those due during the burst.
  auto spread = log.spread();
  std::vector<double> window, during;
  std::map<int64_t, int> count_of;
  for (auto& f : spread) {
    ++count_of[f.index];
    auto lag = static_cast<double>(f.at_us - f.due_ms * 1000) / 1000.0;
    if (f.due_ms >= first_due && f.due_ms < measure_end)
      window.push_back(lag);
    if (f.due_ms >= burst_due && f.due_ms * 1000 <= last_burst_us)
      during.push_back(lag);
  }
  auto due_by_end = std::min<int64_t>(n, (last_burst_us / 1000 - 2000 - first_due) * n
                                           / std::max<int64_t>(span_ms, 1));
  int64_t twice = 0, missing = 0;
  for (int64_t i = 0; i < due_by_end; ++i) {
    auto it = count_of.find(i);
    if (it == count_of.end())
      ++missing;
    else if (it->second > 1)
      ++twice;
  }
  if (missing != 0 || twice != 0) {
    std::fprintf(stderr,
                 "gost_bench: of the %lld spread actions due 2 s before the end, %lld did not "
                 "fire and %lld fired twice\n",
                 static_cast<long long>(due_by_end), static_cast<long long>(missing),
                 static_cast<long long>(twice));
    return 1;
  }
  auto w = summarize(window);
  auto b = summarize(burst_lags);
  auto d = summarize(during);
  std::fprintf(stderr,
               "gost_bench: spread lag p50 %.1f ms, p99 %.1f ms, max %.1f ms over %zu actions; "
               "burst of %lld drained in %.2f s (%.0f/s; its lag p50 %.0f ms, p99 %.0f ms); "
               "spread actions due during the burst: p50 %.1f ms, p99 %.1f ms, max %.1f ms "
               "over %zu\n",
               w.p50, w.p99, w.max, w.n, static_cast<long long>(burst), drain_s, burst_per_s, b.p50,
               b.p99, d.p50, d.p99, d.max, d.n);
  std::printf("{\"bench\": \"actions\", \"value\": %.1f, \"unit\": \"ms firing lag p99\", "
              "\"p50_ms\": %.1f, \"max_ms\": %.1f, \"fired\": %zu, \"scheduled\": %lld, "
              "\"span_s\": %lld, \"shards\": %u, \"load_per_s\": %.0f, \"burst\": %lld, "
              "\"burst_per_s\": %.0f, \"burst_p99_ms\": %.0f, \"during_burst_p50_ms\": %.1f, "
              "\"during_burst_p99_ms\": %.1f, \"during_burst_n\": %zu, %s}\n",
              w.p99, w.p50, w.max, w.n, static_cast<long long>(n),
              static_cast<long long>(span_ms / 1000), shards, static_cast<double>(n) / load_s,
              static_cast<long long>(burst), burst_per_s, b.p99, d.p50, d.p99, d.n, cpu.c_str());
  return 0;
}

} // namespace gost::bench
