// gost_bench: the benchmarks behind bench/run.sh. Each prints one JSON line.
//
//   gost_bench stage_noop  --dsn DSN [--offers N] [--shards S]
//       N offers, each queued once for a stage that writes its state (no offer change);
//       time until every run committed. Then the floor: the same data prepared again and the
//       same work done by plain threads calling the persistence layer (no actors).
//   gost_bench stage_offer --dsn DSN [--offers N] [--shards S]
//       the same with a stage that changes the offer (offer CAS + state + outbox), while a
//       second stage is asked about every change.
//   gost_bench resident --dsn DSN [--offers N] [--shards S]
//       memory per resident idle offer actor, and that the resident cap holds.
//   gost_bench timers --dsn DSN [--offers N] [--span SECONDS] [--measure SECONDS] [--lead SECONDS]
//                     [--shards S]
//       N offers with one pending timer each, due evenly over SPAN seconds: firing lag
//       p50/p99 (process() call minus due time) and the process's RSS. With MEASURE, only the
//       timers due in its first seconds are measured while the rest stay pending.
//   gost_bench tasks --dsn DSN [--tasks N] [--events E] [--groups G] [--shards S]
//       N moderation tasks waiting for a verdict (as their Init left them), E of them sent one:
//       verdicts handled and committed per second (load, handler, state, one result), and the
//       process's RSS with the N tasks active.
//   gost_bench actions --dsn DSN [--actions N] [--span S] [--measure S] [--burst B] [--shards S]
//       scheduled actions: N due over SPAN seconds, their firing lag, then a burst of B due at
//       one second (actions_bench.cpp).
//
// Every benchmark that runs the engine also prints the CPU time per operation of this process
// ("gost_cpu_us_per_op") and of the PostgreSQL server ("pg_cpu_us_per_op") over the measured
// interval (proc_cpu.hpp). The database named in DSN is emptied and set up by the benchmark.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

#include <malloc.h>
#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <google/protobuf/wrappers.pb.h>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "common.hpp"
#include "gost/core/allocator.hpp"
#include "gost/core/shard_hash.hpp"
#include "gost/entities/spawn.hpp"
#include "gost/offers/spawn.hpp"
#include "gost/offers/stage_runner.hpp"
#include "gost/persistence/offers/write_behind.hpp"
#include "gost/persistence/pg_pool.hpp"
#include "gost/persistence/schema.hpp"
#include "gost/persistence/tasks/tasks.hpp"
#include "gost/tasks/moderation.hpp"
#include "gost/v1/events.pb.h"
#include "proc_cpu.hpp"

using namespace gost;
using namespace std::chrono_literals;
using bench::configure;
using bench::fresh_schema;
using bench::process_and_server;

namespace {

google::protobuf::Any count_state(const google::protobuf::Any* st) {
  google::protobuf::Int64Value v;
  if (st != nullptr)
    st->UnpackTo(&v);
  v.set_value(v.value() + 1);
  google::protobuf::Any a;
  a.PackFrom(v);
  return a;
}

struct state_writer final : stage {
  decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
    return decision::process();
  }
  stage_result process(const v1::Offer&, const google::protobuf::Any* st) const override {
    stage_result r;
    r.state = count_state(st);
    return r;
  }
};

struct offer_changer final : stage {
  decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
    return decision::process();
  }
  stage_result process(const v1::Offer& o, const google::protobuf::Any* st) const override {
    stage_result r;
    r.state = count_state(st);
    r.offer = o;
    (*r.offer->mutable_attributes())["enriched"] = "yes";
    return r;
  }
};

/// Asked after every change (it cares about attributes) and declines.
struct observer final : stage {
  decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
    return decision::skip();
  }
  stage_result process(const v1::Offer&, const google::protobuf::Any*) const override { return {}; }
  std::vector<std::string> interests() const override { return {"attributes"}; }
};

void setup(const std::string& dsn, int offers, uint32_t shards, const std::string& stage_id) {
  pqxx::connection c{dsn};
  fresh_schema(c, dsn, shards);
  v1::Offer o;
  o.set_seller_id("bench-seller");
  o.set_title("A reasonably long title of a classified ad for a used bicycle");
  o.set_description(std::string(300, 'd'));
  o.mutable_price()->set_amount_minor(1500000);
  o.mutable_price()->set_currency("RUB");
  o.set_version(1);
  o.set_status(v1::OFFER_STATUS_ACTIVE);
  constexpr int chunk = 1000;
  for (int base = 0; base < offers; base += chunk) {
    std::string rows, queue;
    for (int i = base; i < std::min(offers, base + chunk); ++i) {
      auto id = "bench-" + std::to_string(i);
      o.set_id(id);
      auto shard = std::to_string(shard_of(id, shards));
      pqxx::nontransaction esc{c};
      rows += std::string{rows.empty() ? "" : ","} + "('" + id + "'," + shard
              + ",'bench-seller','',NULL,1," + esc.quote_raw(o.SerializeAsString()) + ")";
      queue += std::string{queue.empty() ? "" : ","} + "(" + shard + ",'" + stage_id + "','" + id
               + "',0,0)";
    }
    pqxx::work tx{c};
    tx.exec("INSERT INTO offers (offer_id, shard, seller_id, namespace, external_id, version, body)"
            " VALUES "
            + rows);
    if (!stage_id.empty())
      tx.exec("INSERT INTO stage_states (shard, stage_id, offer_id, due_at_us, priority) VALUES "
              + queue);
    tx.commit();
  }
  pqxx::nontransaction tx{c};
  tx.exec("ANALYZE");
}

/// Stops actors (shards first, then what they use: pass them in that order).
template <class... Handles>
void stop_all(std::vector<Handles>&... lists) {
  auto stop = [](auto& list) {
    for (auto& h : list)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    list.clear();
  };
  (stop(lists), ...);
}

/// Drains shards as gostd hands them off: every entity actor finishes what it has (committed)
/// and is passivated, then the shard stops.
template <class Handle>
void drain_all(caf::actor_system& sys, std::vector<Handle>& handles) {
  caf::scoped_actor self{sys};
  for (auto& h : handles)
    self->request(h, std::chrono::seconds{60}, drain_atom_v)
      .receive([](ok_atom) {},
               [&](caf::error& e) {
                 std::fprintf(stderr, "gost_bench: a shard did not drain: %s\n",
                              sys.render(e).c_str());
               });
  handles.clear();
}

/// One shard per lease, the store actors taken round robin; `tweak` sets what a benchmark
/// changes.
std::vector<shard_actor>
spawn_shards(caf::actor_system& sys, const std::vector<store_actor>& stores,
             const std::vector<writer_actor>& writers, const std::vector<int64_t>& epochs,
             std::shared_ptr<const stage_registry> reg, std::shared_ptr<node_stats> stats,
             const std::function<void(shard_options&)>& tweak) {
  std::vector<shard_actor> handles;
  for (uint32_t s = 0; s < epochs.size(); ++s) {
    shard_options so;
    so.kit.shard = s;
    so.store = stores[s % stores.size()];
    so.writer = kit::writer_for(writers, s);
    so.kit.epoch = epochs[s];
    so.stages = reg;
    so.stats = stats;
    tweak(so);
    handles.push_back(spawn_shard(sys, so));
  }
  return handles;
}

size_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  size_t pages = 0;
  size_t resident = 0;
  in >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

/// Bytes the allocator has handed out and not yet got back (glibc).
size_t heap_in_use() {
  auto mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

/// Activates every offer (one get each) and reports the memory each resident idle offer
/// actor costs beyond its offer's own data; then checks that the resident cap holds.
/// outbox_kafka's input: an empty schema whose outbox holds `events` after-save events (batches
/// of 100, spread over the shards), as if committed by a node that then stopped. gostd relays
/// them; bench/outbox_kafka.sh times it.
int outbox_fill(const std::string& dsn, int events, uint32_t shards) {
  pqxx::connection c{dsn};
  fresh_schema(c, dsn, shards);
  constexpr int per_batch = 100;
  v1::OfferSaved ev;
  auto& o = *ev.mutable_offer();
  o.set_seller_id("bench-seller");
  o.set_title("A reasonably long title of a classified ad for a used bicycle");
  o.set_description(std::string(300, 'd'));
  o.mutable_price()->set_amount_minor(1500000);
  o.mutable_price()->set_currency("RUB");
  o.set_status(v1::OFFER_STATUS_ACTIVE);
  ev.set_changed_by("api");
  pqxx::work tx{c};
  int n = 0;
  for (int b = 0; n < events; ++b) {
    v1::OutboxBatch batch;
    for (int i = 0; i < per_batch && n < events; ++i, ++n) {
      o.set_id("offer-" + std::to_string(n % 50000));
      o.set_version(n / 50000 + 1);
      *batch.add_events() = ev;
    }
    tx.exec_params("INSERT INTO outbox_batches (shard, events, payload) VALUES ($1, $2, $3)",
                   static_cast<int64_t>(static_cast<uint32_t>(b) % shards), batch.events_size(),
                   pqxx::binarystring{batch.SerializeAsString()});
  }
  tx.commit();
  std::printf("{\"events\": %d, \"event_bytes\": %zu}\n", events, ev.ByteSizeLong());
  return 0;
}

int resident_bench(const std::string& dsn, int offers, uint32_t shards) {
  std::fprintf(stderr, "gost_bench: setting up %d offers on %u shards...\n", offers, shards);
  setup(dsn, offers, shards, "");
  persistence::pg_pool::options po;
  po.dsn = dsn;
  po.size = 4;
  persistence::pg_pool pool{po};
  auto epochs = persistence::acquire_all_leases(pool, "bench", shards);
  auto meter = process_and_server(dsn);
  caf::actor_system_config cfg;
  configure(cfg, "sharing");
  caf::actor_system sys{cfg};
  auto stats = std::make_shared<node_stats>();
  std::vector<store_actor> stores{spawn_store(sys, pool), spawn_store(sys, pool)};
  auto writers = spawn_offer_writers(sys, pool, "bench", 2, 500, 2ms, stats);
  auto run = [&](size_t cap) {
    auto handles = spawn_shards(sys, stores, writers, *epochs, std::make_shared<stage_registry>(),
                                stats, [cap](shard_options& so) {
                                  so.kit.idle_timeout = 3600s;
                                  so.kit.max_resident = cap;
                                });
    caf::scoped_actor self{sys};
    size_t offer_bytes = 0;
    int outstanding = 0;
    auto receive_one = [&] {
      self->receive([&](offer_msg& m) { offer_bytes += m.value.SpaceUsedLong(); },
                    [&](caf::error& e) {
                      std::fprintf(stderr, "gost_bench: get failed: %s\n", sys.render(e).c_str());
                      std::exit(1);
                    });
      --outstanding;
    };
    auto before = rss_bytes();
    auto heap_before = heap_in_use();
    auto cpu_before = meter.sample();
    for (int i = 0; i < offers; ++i) {
      auto id = "bench-" + std::to_string(i);
      self->send(handles[shard_of(id, shards)], get_atom_v, id);
      if (++outstanding >= 2000)
        receive_one();
    }
    while (outstanding > 0)
      receive_one();
    auto cpu = bench::cpu_fields(cpu_before, meter.sample(), offers);
    auto after = rss_bytes();
    auto heap_after = heap_in_use();
    auto resident = stats->offers.resident.load();
    std::fprintf(stderr,
                 "gost_bench: heap in use +%.0f bytes per resident actor (offer data included)\n",
                 (static_cast<double>(heap_after) - heap_before) / std::max<int64_t>(1, resident));
    stop_all(handles);
    std::this_thread::sleep_for(500ms);
    stats->offers.resident = 0;
    return std::make_tuple(before, after, resident, offer_bytes, cpu);
  };
  // 1. No cap: every offer stays resident. The CPU is that of its activations (one get each,
  //    which spawns the offer's actor and loads it), the sending thread included.
  auto [before, after, resident, offer_bytes, cpu] = run(static_cast<size_t>(offers));
  auto per_actor =
    (static_cast<double>(after) - before - offer_bytes) / std::max<int64_t>(1, resident);
  std::fprintf(
    stderr, "gost_bench: %lld resident actors, RSS +%.1f MiB, offers' own data %.1f MiB\n",
    static_cast<long long>(resident), (after - before) / 1048576.0, offer_bytes / 1048576.0);
  // 2. A cap of offers/10 per node: the count must stay at it.
  auto cap = static_cast<size_t>(offers) / 10 / shards;
  auto [b2, a2, resident2, ob2, cpu2] = run(cap);
  (void)b2;
  (void)a2;
  (void)ob2;
  (void)cpu2;
  std::fprintf(stderr, "gost_bench: with max_resident=%zu per shard: %lld resident (cap %zu)\n",
               cap, static_cast<long long>(resident2), cap * shards);
  if (resident2 > static_cast<int64_t>(cap * shards)) {
    std::fprintf(stderr, "gost_bench: the resident cap did not hold\n");
    return 1;
  }
  stop_all(stores, writers);
  std::printf(
    "{\"bench\": \"resident\", \"value\": %.0f, \"unit\": \"bytes per idle offer actor\", "
    "%s, \"cpu_per\": \"activation\", \"allocator\": \"%s\"}\n",
    per_actor, cpu.c_str(), allocator_name().c_str());
  return 0;
}

/// Records each timer's firing lag (the stage's process() call minus the due time the timer
/// carries in its state) in microseconds.
struct lag_recorder {
  explicit lag_recorder(size_t capacity) : lags(capacity) {}
  std::vector<int64_t> lags;
  std::atomic<size_t> n{0};
  void add(int64_t us) {
    auto i = n.fetch_add(1, std::memory_order_relaxed);
    if (i < lags.size())
      lags[i] = us;
  }
};

/// A timer's stage: its state holds the due time (Int64Value, µs since the epoch) the timer
/// was set for; on firing it records the lag and marks the state fired (value -1).
struct timer_probe final : stage {
  explicit timer_probe(std::shared_ptr<lag_recorder> r) : rec(std::move(r)) {}
  std::shared_ptr<lag_recorder> rec;
  decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
    return decision::skip();
  }
  stage_result process(const v1::Offer&, const google::protobuf::Any* st) const override {
    google::protobuf::Int64Value due;
    if (st != nullptr && st->UnpackTo(&due) && due.value() > 0)
      rec->add(to_us(stage_clock::now()) - due.value());
    due.set_value(-1);
    stage_result r;
    r.state.emplace();
    r.state->PackFrom(due);
    return r;
  }
};

std::string hex_bytea(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out = "\\x";
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

/// N offers, each with one pending timer of stage "timer", due spread evenly over `span`
/// starting `lead` from now; written with COPY. Returns the first due time (µs).
int64_t setup_timers(const std::string& dsn, int offers, uint32_t shards, std::chrono::seconds span,
                     std::chrono::microseconds lead) {
  setup(dsn, 0, shards, "");
  pqxx::connection c{dsn};
  auto first = to_us(stage_clock::now()) + lead.count();
  auto step =
    std::chrono::duration_cast<std::chrono::microseconds>(span).count() / std::max(1, offers);
  v1::Offer o;
  o.set_seller_id("bench-seller");
  o.set_title("timer bench offer");
  o.set_version(1);
  pqxx::work tx{c};
  {
    pqxx::stream_to out{
      tx, "offers",
      std::vector<std::string>{"offer_id", "shard", "seller_id", "namespace", "version", "body"}};
    for (int i = 0; i < offers; ++i) {
      auto id = "tm-" + std::to_string(i);
      o.set_id(id);
      out << std::make_tuple(id, shard_of(id, shards), std::string{"bench-seller"}, std::string{},
                             1, hex_bytea(o.SerializeAsString()));
    }
    out.complete();
  }
  {
    pqxx::stream_to out{
      tx, "stage_states",
      std::vector<std::string>{"offer_id", "stage_id", "shard", "state", "due_at_us", "priority"}};
    for (int i = 0; i < offers; ++i) {
      auto id = "tm-" + std::to_string(i);
      // Interleave the due times over the ids so every shard has timers all along the span.
      auto due = first + static_cast<int64_t>(i) * step;
      google::protobuf::Int64Value v;
      v.set_value(due);
      google::protobuf::Any a;
      a.PackFrom(v);
      out << std::make_tuple(id, std::string{"timer"}, shard_of(id, shards),
                             hex_bytea(a.SerializeAsString()), due, 0);
    }
    out.complete();
  }
  tx.commit();
  pqxx::nontransaction an{c};
  an.exec("ANALYZE");
  return first;
}

/// 1M pending timers spread over the next minutes: firing lag p50/p99 and the process's RSS.
int timers_bench(std::map<std::string, std::string>& opt) {
  auto offers = std::stoi(opt["offers"]);
  auto shards = static_cast<uint32_t>(std::stoul(opt["shards"]));
  auto span = std::chrono::seconds{std::stoi(opt["span"])};
  // With --measure, only the timers due in the first MEASURE seconds are waited for and
  // measured; the others stay pending all along (10M pending at 1M's firing rate).
  auto measure = std::chrono::seconds{opt.count("measure") ? std::stoi(opt["measure"]) : 0};
  if (measure.count() <= 0 || measure > span)
    measure = span;
  auto expected = static_cast<int>(static_cast<double>(offers) * measure.count() / span.count());
  if (measure == span)
    expected = offers;
  // Setup writes about 100k rows/s of each table on a quiet machine; the first timer is due
  // after it (--lead SECONDS when the machine is busy or the set is large).
  auto lead = opt.count("lead")
                ? std::chrono::microseconds{std::chrono::seconds{std::stoi(opt["lead"])}}
                : std::chrono::microseconds{15'000'000 + static_cast<int64_t>(offers) * 35};
  std::fprintf(stderr, "gost_bench: setting up %d timers over %lld s on %u shards...\n", offers,
               static_cast<long long>(span.count()), shards);
  auto first = setup_timers(opt["dsn"], offers, shards, span, lead);
  auto slack_ms = (first - to_us(stage_clock::now())) / 1000;
  if (slack_ms < 3000) {
    std::fprintf(stderr,
                 "gost_bench: setup took too long (%lld ms before the first timer); "
                 "timers would be late from the start\n",
                 static_cast<long long>(slack_ms));
    return 1;
  }
  persistence::pg_pool::options po;
  po.dsn = opt["dsn"];
  po.size = std::stoi(opt["pool"]);
  persistence::pg_pool pool{po};
  auto epochs = persistence::acquire_all_leases(pool, "bench", shards);
  auto rec = std::make_shared<lag_recorder>(static_cast<size_t>(expected) + 1000);
  auto reg = std::make_shared<stage_registry>();
  stage_options so_stage;
  so_stage.max_parallelism = 1000;
  reg->add("timer", std::make_shared<timer_probe>(rec), so_stage);
  auto stats = std::make_shared<node_stats>();
  for (auto& e : reg->all())
    stats->add_stage(e.id);
  caf::actor_system_config cfg;
  configure(cfg, opt["policy"]);
  auto meter = process_and_server(opt["dsn"]);
  size_t rss_before = rss_bytes();
  size_t rss_max = rss_before;
  std::string cpu; // from the first timer's due time until the last timer's run committed
  {
    caf::actor_system sys{cfg};
    std::vector<store_actor> stores{spawn_store(sys, pool), spawn_store(sys, pool)};
    auto writers = spawn_offer_writers(sys, pool, "bench", 2, 500, 2ms, stats);
    auto handles = spawn_shards(sys, stores, writers, *epochs, reg, stats, [](shard_options& so) {
      so.kit.idle_timeout = 2s; // fired offers go again; memory stays bounded
    });
    auto deadline = stage_clock::now() + lead + measure + 120s;
    auto last_print = std::chrono::steady_clock::now();
    auto cpu_before = meter.sample(); // taken again when the first timer is due
    bool first_due = false;
    while (stats->stage_runs.load() < static_cast<uint64_t>(expected)) {
      std::this_thread::sleep_for(10ms);
      if (!first_due && to_us(stage_clock::now()) >= first) {
        cpu_before = meter.sample();
        first_due = true;
      }
      rss_max = std::max(rss_max, rss_bytes());
      if (std::chrono::steady_clock::now() - last_print >= 5s) {
        last_print = std::chrono::steady_clock::now();
        std::fprintf(stderr,
                     "gost_bench: %llu/%d timers fired and committed (%d pending in all), "
                     "RSS %.0f MiB\n",
                     static_cast<unsigned long long>(stats->stage_runs.load()), expected, offers,
                     rss_bytes() / 1048576.0);
      }
      if (stage_clock::now() > deadline) {
        std::fprintf(stderr, "gost_bench: timers still pending long after the last was due\n");
        return 1;
      }
    }
    cpu = bench::cpu_fields(cpu_before, meter.sample(), expected);
    // Timers keep coming due while the shards drain: those fired by then are committed.
    drain_all(sys, handles);
    stop_all(stores, writers);
  }
  pqxx::connection c{opt["dsn"]};
  pqxx::nontransaction tx{c};
  auto pending =
    tx.exec("SELECT count(*) FROM stage_states WHERE due_at_us IS NOT NULL")[0][0].as<long>();
  auto fired = std::min(rec->n.load(), rec->lags.size());
  // Every timer fired exactly once and committed; the rest still pending (none lost, none twice).
  if (static_cast<long>(fired) + pending != offers || fired < static_cast<size_t>(expected)) {
    std::fprintf(stderr, "gost_bench: %ld timers still pending, %zu fired (of %d, %d expected)\n",
                 pending, fired, offers, expected);
    return 1;
  }
  auto& lags = rec->lags;
  lags.resize(fired);
  std::sort(lags.begin(), lags.end());
  auto pct = [&](double p) {
    return lags[std::min(lags.size() - 1,
                         static_cast<size_t>(p * static_cast<double>(lags.size())))]
           / 1000.0;
  };
  std::fprintf(stderr,
               "gost_bench: lag p50 %.1f ms, p99 %.1f ms, max %.1f ms; RSS %.0f MiB before, "
               "%.0f MiB at most\n",
               pct(0.5), pct(0.99), lags.back() / 1000.0, rss_before / 1048576.0,
               rss_max / 1048576.0);
  std::printf("{\"bench\": \"timers\", \"value\": %.1f, \"unit\": \"ms firing lag p99\", "
              "\"p50_ms\": %.1f, \"timers\": %d, \"span_s\": %lld, \"measured\": %zu, "
              "\"rss_max_mib\": %.0f, %s}\n",
              pct(0.99), pct(0.5), offers, static_cast<long long>(span.count()), fired,
              rss_max / 1048576.0, cpu.c_str());
  return 0;
}

// -- tasks: verdicts for moderation tasks among many created ones -----------------------------

/// A moderation task's state and pending timer as its Init leaves them, made by the task kit's
/// own handler (task_entity<moderation>), and the shard its entity lives on.
struct seeded_task {
  std::string id;
  std::string group;
  uint32_t shard = 0;
  std::string state; ///< serialized Any
  std::string tag;
  int64_t timer_due_us = 0;
  std::string timer; ///< serialized Any
};

seeded_task initialised_task(const tasks::task_entity<tasks::moderation>& type,
                             const std::string& group, int i, uint32_t shards, int64_t now_us) {
  seeded_task out;
  out.group = group;
  out.id = tasks::task_id(group, "t-" + std::to_string(i));
  out.shard = shard_of(persistence::entity_key(type.kind(), out.id), shards);
  v1::ModerationInput in;
  in.set_item_id("item-" + std::to_string(i));
  in.set_content("A reasonably long title of a classified ad for a used bicycle");
  in.set_verdict_timeout_ms(86'400'000); // no timer fires during the benchmark
  v1::TaskEvent init;
  init.mutable_init()->set_group(group);
  init.mutable_init()->mutable_input()->PackFrom(in);
  init.mutable_init()->set_retry_delay_ms(600'000);
  init.mutable_init()->set_max_attempts(5);
  google::protobuf::Any event;
  event.PackFrom(init);
  auto at = std::chrono::system_clock::time_point{std::chrono::microseconds{now_us}};
  entity_context ctx{type.kind(), out.id, {}, 0, 0, at};
  out.state = type.apply(nullptr, event, ctx).SerializeAsString();
  out.tag = ctx.tag().value_or("");
  auto& timer = ctx.sends().at(0);
  out.timer_due_us = now_us + std::chrono::microseconds{timer.delay}.count();
  out.timer = timer.event.SerializeAsString();
  return out;
}

/// `n_tasks` moderation tasks in `groups` groups, each as its Init left it (state `waiting`, its
/// timer pending), written with COPY; `n_events` of them, spread evenly over the ids, each with
/// an external `verdict` due now (as TaskService.SendEvent stores it). Returns the kind.
std::string setup_tasks(const std::string& dsn, int n_tasks, int n_events, int groups,
                        uint32_t shards) {
  setup(dsn, 0, shards, "");
  persistence::pg_pool::options po;
  po.dsn = dsn;
  po.size = 1;
  persistence::pg_pool pool{po};
  for (int g = 0; g < groups; ++g)
    if (!persistence::create_task_group(
          pool, {"bench-" + std::to_string(g), "moderation", "bench", 600'000, 5})) {
      std::fprintf(stderr, "gost_bench: cannot create the task groups\n");
      std::exit(1);
    }
  tasks::task_entity<tasks::moderation> type;
  v1::TaskEvent verdict;
  verdict.mutable_custom()->set_name("verdict");
  v1::ModerationVerdict v;
  v.set_approved(true);
  v.set_moderator("bench");
  verdict.mutable_custom()->mutable_payload()->PackFrom(v);
  google::protobuf::Any verdict_any;
  verdict_any.PackFrom(verdict);
  auto verdict_hex = hex_bytea(verdict_any.SerializeAsString());
  auto now = to_us(stage_clock::now());
  auto stride = std::max(1, n_tasks / std::max(1, n_events));
  pqxx::connection c{dsn};
  pqxx::work tx{c};
  int verdicts = 0;
  constexpr int chunk = 20'000; // one COPY at a time per transaction: tasks, then their events
  for (int from = 0; from < n_tasks; from += chunk) {
    std::vector<seeded_task> batch;
    for (int i = from; i < std::min(n_tasks, from + chunk); ++i)
      batch.push_back(
        initialised_task(type, "bench-" + std::to_string(i % groups), i, shards, now));
    std::vector<bool> gets_verdict(batch.size());
    for (size_t k = 0; k < batch.size(); ++k)
      gets_verdict[k] = (from + static_cast<int>(k)) % stride == 0 && verdicts++ < n_events;
    {
      pqxx::stream_to rows{tx, "entities",
                           std::vector<std::string>{"kind", "entity_id", "shard", "version",
                                                    "state", "lane", "due_at_us", "tag"}};
      for (size_t k = 0; k < batch.size(); ++k) {
        auto& t = batch[k];
        rows << std::make_tuple(type.kind(), t.id, t.shard, 1, hex_bytea(t.state), t.group,
                                gets_verdict[k] ? now : t.timer_due_us, t.tag);
      }
      rows.complete();
    }
    {
      pqxx::stream_to queued{
        tx, "entity_events",
        std::vector<std::string>{"kind", "entity_id", "due_at_us", "attempts", "payload"}};
      for (size_t k = 0; k < batch.size(); ++k) {
        auto& t = batch[k];
        queued << std::make_tuple(type.kind(), t.id, t.timer_due_us, 0, hex_bytea(t.timer));
        if (gets_verdict[k])
          queued << std::make_tuple(type.kind(), t.id, now, 0, verdict_hex);
      }
      queued.complete();
    }
    if ((from + chunk) % 200'000 == 0)
      std::fprintf(stderr, "gost_bench: %d tasks written\n", from + chunk);
  }
  tx.commit();
  pqxx::nontransaction an{c};
  an.exec("ANALYZE");
  return type.kind();
}

/// The server's WAL so far (pg_stat_wal): records, bytes.
std::pair<int64_t, int64_t> wal_sample(const std::string& dsn) {
  pqxx::connection c{dsn};
  pqxx::nontransaction tx{c};
  auto r = tx.exec("SELECT wal_records, wal_bytes::bigint FROM pg_stat_wal");
  return {r[0][0].as<int64_t>(), r[0][1].as<int64_t>()};
}

/// "wal_records_per_op": R, "wal_bytes_per_op": B between two samples (the whole server's).
std::string wal_fields(std::pair<int64_t, int64_t> from, std::pair<int64_t, int64_t> to, int ops) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "\"wal_records_per_op\": %.1f, \"wal_bytes_per_op\": %.0f",
                static_cast<double>(to.first - from.first) / ops,
                static_cast<double>(to.second - from.second) / ops);
  return buf;
}

/// Task events processed and committed per second among many created tasks: the moderation
/// task type on the kit as gostd hosts it (one entity store, one entity writer, a supervisor
/// per shard, gostd's queue, write and passivation defaults; --writers changes the writers);
/// each event an external verdict
/// for a passivated task: a load, the handler, the new state and one result committed.
int tasks_bench(std::map<std::string, std::string>& opt) {
  auto dsn = opt["dsn"];
  auto n_tasks = std::stoi(opt["tasks"]);
  auto n_events = std::min(n_tasks, std::stoi(opt["events"]));
  auto groups = std::stoi(opt["groups"]);
  auto shards = static_cast<uint32_t>(std::stoul(opt["shards"]));
  std::fprintf(stderr,
               "gost_bench: setting up %d moderation tasks in %d groups on %u shards, %d with a "
               "verdict due...\n",
               n_tasks, groups, shards, n_events);
  auto t_setup = std::chrono::steady_clock::now();
  auto kind = setup_tasks(dsn, n_tasks, n_events, groups, shards);
  std::fprintf(stderr, "gost_bench: set up in %.1f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t_setup).count());
  persistence::pg_pool::options po;
  po.dsn = dsn;
  po.size = std::stoi(opt["pool"]);
  persistence::pg_pool pool{po};
  auto epochs = persistence::acquire_all_leases(pool, "bench", shards);
  if (!epochs) {
    std::fprintf(stderr, "gost_bench: cannot take the leases\n");
    return 1;
  }
  auto types = std::make_shared<entity_registry>();
  if (types->add(std::make_shared<tasks::task_entity<tasks::moderation>>())) {
    std::fprintf(stderr, "gost_bench: cannot register the moderation type\n");
    return 1;
  }
  auto meter = process_and_server(dsn);
  auto write_stats = std::make_shared<kit::writer_stats>();
  auto entity_stats = std::make_shared<kit::entity_stats>();
  caf::actor_system_config cfg;
  configure(cfg, opt["policy"]);
  double secs = 0;
  double rss_mib = 0;
  int64_t resident = 0;
  std::string cpu, wal;
  {
    caf::actor_system sys{cfg};
    std::vector<entity_store_actor> stores{spawn_entity_store(sys, pool)};
    auto wal_before = wal_sample(dsn);
    auto cpu_before = meter.sample();
    auto t0 = std::chrono::steady_clock::now();
    auto writers =
      spawn_entity_writers(sys, pool, "bench", std::stoul(opt["writers"]), 500, 2ms, write_stats);
    std::vector<entity_shard_actor> handles;
    for (uint32_t s = 0; s < shards; ++s) {
      entity_shard_options eo;
      eo.kit.shard = s;
      eo.kit.epoch = (*epochs)[s];
      eo.shard_count = shards;
      eo.store = stores[s % stores.size()];
      eo.writer = kit::writer_for(writers, s);
      eo.types = types;
      eo.kit.stats = entity_stats;
      handles.push_back(spawn_entity_shard(sys, std::move(eo)));
    }
    auto last_print = t0;
    uint64_t last = 0;
    while (write_stats->sets.load() < static_cast<uint64_t>(n_events)) {
      std::this_thread::sleep_for(10ms);
      auto now = std::chrono::steady_clock::now();
      if (now - last_print >= 2s) {
        auto sets = write_stats->sets.load();
        std::fprintf(stderr, "gost_bench: %llu/%d events committed (%.0f/s), %lld resident\n",
                     static_cast<unsigned long long>(sets), n_events,
                     (sets - last) / std::chrono::duration<double>(now - last_print).count(),
                     static_cast<long long>(entity_stats->resident.load()));
        last = sets;
        last_print = now;
      }
      if (now - t0 > 600s) {
        std::fprintf(stderr, "gost_bench: gave up after 600 s\n");
        return 1;
      }
    }
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu = bench::cpu_fields(cpu_before, meter.sample(), n_events);
    auto wal_after = wal_sample(dsn);
    wal = wal_fields(wal_before, wal_after, n_events);
    rss_mib = rss_bytes() / 1048576.0;
    resident = entity_stats->resident.load();
    // Stopped as gostd hands its shards off: drained (every task actor passivated), then the
    // store and the writer.
    drain_all(sys, handles);
    stop_all(stores, writers);
  }
  // Every verdict handled once: a result each, no event due now left, the tasks closed.
  pqxx::connection c{dsn};
  pqxx::nontransaction tx{c};
  auto results =
    tx.exec("SELECT count(*) FROM entity_outputs WHERE kind = " + tx.quote(kind))[0][0].as<long>();
  auto due = tx.exec("SELECT count(*) FROM entity_events WHERE due_at_us <= "
                     + std::to_string(to_us(stage_clock::now())))[0][0]
               .as<long>();
  auto closed = tx.exec("SELECT count(*) FROM entities WHERE tag = 'approved'")[0][0].as<long>();
  if (results != n_events || due != 0 || closed != n_events) {
    std::fprintf(stderr,
                 "gost_bench: inconsistent result: %ld results, %ld events still due, %ld tasks "
                 "approved (of %d)\n",
                 results, due, closed, n_events);
    return 1;
  }
  std::fprintf(stderr,
               "gost_bench: %d events in %.2f s among %d tasks; %lld task actors resident, RSS "
               "%.0f MiB\n",
               n_events, secs, n_tasks, static_cast<long long>(resident), rss_mib);
  std::printf("{\"bench\": \"tasks\", \"value\": %.0f, \"unit\": \"task events/s\", \"rss_mib\": "
              "%.0f, %s, %s, \"tasks\": %d, \"events\": %d, \"resident\": %lld, "
              "\"write_batch\": %.1f}\n",
              n_events / secs, rss_mib, cpu.c_str(), wal.c_str(), n_tasks, n_events,
              static_cast<long long>(resident),
              static_cast<double>(write_stats->sets.load())
                / static_cast<double>(std::max<uint64_t>(1, write_stats->batches.load())));
  return 0;
}

// -- stage_noop and stage_offer: gost, then the floor, on the same freshly prepared data -------

/// What both halves of a stage benchmark share.
struct stage_bench_plan {
  std::string name;     ///< stage_noop | stage_offer
  std::string stage_id; ///< the stage every offer is queued for
  std::string dsn;
  int offers = 0;
  uint32_t shards = 0;
  size_t loaders = 2; ///< store actors (gost) / loader threads (floor)
  size_t writers = 2; ///< writer actors (gost) / writer threads (floor)
  size_t batch_max = 1000;
  int parallelism = 1000;
  std::string policy;
};

/// The stages of a benchmark: a state writer alone (stage_noop), or an offer changer with an
/// observer that is asked about every change and declines (stage_offer).
std::shared_ptr<const stage_registry> bench_stages(const stage_bench_plan& plan) {
  auto reg = std::make_shared<stage_registry>();
  stage_options fast;
  fast.max_parallelism = plan.parallelism;
  if (plan.name == "stage_noop")
    reg->add("noop", std::make_shared<state_writer>(), fast);
  else
    reg->add("changer", std::make_shared<offer_changer>(), fast)
      .add("observer", std::make_shared<observer>(), fast);
  return reg;
}

/// Fresh data for one half: every offer queued once for the stage, the leases taken (their
/// epochs, by shard).
std::vector<int64_t> prepare_stage_data(persistence::pg_pool& pool, const stage_bench_plan& plan) {
  std::fprintf(stderr, "gost_bench: setting up %d offers on %u shards...\n", plan.offers,
               plan.shards);
  setup(plan.dsn, plan.offers, plan.shards, plan.stage_id);
  auto epochs = persistence::acquire_all_leases(pool, "bench", plan.shards);
  if (!epochs) {
    std::fprintf(stderr, "gost_bench: cannot take the leases: %s\n",
                 persistence::error_message(epochs.error()).c_str());
    std::exit(1);
  }
  return *epochs;
}

/// Every offer ran once: no queue entry left, a state per offer; exits otherwise.
void check_all_ran(const stage_bench_plan& plan, const char* who) {
  pqxx::connection c{plan.dsn};
  pqxx::nontransaction tx{c};
  auto left =
    tx.exec("SELECT count(*) FROM stage_states WHERE due_at_us IS NOT NULL")[0][0].as<long>();
  auto states =
    tx.exec("SELECT count(*) FROM stage_states WHERE state IS NOT NULL")[0][0].as<long>();
  if (left != 0 || states != plan.offers) {
    std::fprintf(stderr,
                 "gost_bench: inconsistent result (%s): %ld queue entries left, %ld states\n", who,
                 left, states);
    std::exit(1);
  }
}

/// How one half went: its wall time and the CPU samples around it.
struct half_result {
  double secs = 0;
  bench::cpu_sample from, to;
};

/// What gost's run measured beyond its time: the mean sizes of the batches its loaders and
/// writers formed (the floor replays them).
struct engine_result : half_result {
  double load_batch = 0;  ///< offers per group load
  double write_batch = 0; ///< write-sets per commit
};

/// gost: the shards run every queued offer's stage through the offer actors, the store actors
/// (group loads) and the writers (group commits); until every run committed.
engine_result run_engine(persistence::pg_pool& pool, const stage_bench_plan& plan,
                         const std::vector<int64_t>& epochs,
                         std::shared_ptr<const stage_registry> reg, const bench::cpu_meter& meter) {
  auto stats = std::make_shared<node_stats>();
  for (auto& e : reg->all())
    stats->add_stage(e.id);
  caf::actor_system_config cfg;
  configure(cfg, plan.policy);
  engine_result out;
  caf::actor_system sys{cfg};
  std::vector<store_actor> stores;
  for (size_t i = 0; i < plan.loaders; ++i)
    stores.push_back(spawn_store(sys, pool, stats));
  out.from = meter.sample();
  auto t0 = std::chrono::steady_clock::now();
  auto writers = spawn_offer_writers(sys, pool, "bench", plan.writers, plan.batch_max, 2ms, stats);
  auto handles = spawn_shards(sys, stores, writers, epochs, reg, stats, [](shard_options& so) {
    so.kit.queue_poll = 20ms;
    so.kit.queue_page = 20000;
    so.kit.idle_timeout = 2s;
  });
  uint64_t last = 0;
  auto last_print = t0;
  while (stats->stage_runs.load() < static_cast<uint64_t>(plan.offers)) {
    std::this_thread::sleep_for(10ms);
    auto now = std::chrono::steady_clock::now();
    if (now - last_print >= 2s) {
      auto runs = stats->stage_runs.load();
      std::fprintf(stderr, "gost_bench: %llu/%d runs committed (%.0f/s)\n",
                   static_cast<unsigned long long>(runs), plan.offers,
                   (runs - last) / std::chrono::duration<double>(now - last_print).count());
      last = runs;
      last_print = now;
    }
    if (now - t0 > 600s) {
      std::fprintf(stderr, "gost_bench: gave up after 600 s\n");
      std::exit(1);
    }
  }
  out.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.to = meter.sample();
  auto mean = [](uint64_t items, uint64_t batches) {
    return batches == 0 ? 0.0 : static_cast<double>(items) / static_cast<double>(batches);
  };
  out.load_batch = mean(stats->offer_loads.loaded.load(), stats->offer_loads.batches.load());
  out.write_batch = mean(stats->offer_writes.sets.load(), stats->offer_writes.batches.load());
  stop_all(handles, stores, writers);
  return out;
}

using fenced_set = persistence::fenced_write<persistence::write_set>;

/// The floor's hand-off of write-sets from its loader threads to one writer thread, bounded
/// like gost's (whose shards keep at most `parallelism` runs in flight).
class write_queue {
public:
  write_queue(size_t capacity, size_t loaders) : capacity_(capacity), loaders_(loaders) {}

  /// Appends `sets`; waits while the queue is full.
  void push(std::vector<fenced_set>& sets) {
    std::unique_lock<std::mutex> lock{m_};
    room_.wait(lock, [&] { return q_.size() < capacity_; });
    for (auto& s : sets)
      q_.push_back(std::move(s));
    sets.clear();
    ready_.notify_one();
  }

  /// A loader has no more sets.
  void loader_done() {
    std::lock_guard<std::mutex> lock{m_};
    --loaders_;
    ready_.notify_one();
  }

  /// The next `n` sets, fewer once the loaders are done; empty: nothing more will come.
  std::vector<fenced_set> pop(size_t n) {
    std::unique_lock<std::mutex> lock{m_};
    ready_.wait(lock, [&] { return q_.size() >= n || loaders_ == 0; });
    std::vector<fenced_set> out;
    while (out.size() < n && !q_.empty()) {
      out.push_back(std::move(q_.front()));
      q_.pop_front();
    }
    room_.notify_all();
    return out;
  }

private:
  std::mutex m_;
  std::condition_variable ready_, room_;
  std::deque<fenced_set> q_;
  size_t capacity_;
  size_t loaders_;
};

/// The write-set of one stage run on a loaded offer, built as the offer actor builds it: the
/// snapshot parsed (store actor), the context filled (activation), the stage's `process` and
/// the runner's `after_process` (dequeue, state, new body, outbox event, other stages asked).
persistence::write_set stage_run_write_set(const stage_registry& reg, const std::string& stage_id,
                                           const persistence::offer_row& row, int64_t now) {
  v1::Offer offer;
  offer.ParseFromString(row.body);
  offer.set_version(row.version);
  offer_context ctx;
  for (auto& stored : row.states) {
    auto& held = ctx.states[stored.stage_id];
    held.value.ParseFromString(stored.bytes);
    held.version = stored.version;
  }
  for (auto& e : row.queued)
    if (e.due_at_us <= now)
      ctx.queued_now.insert(e.lane);
  const auto& entry = *reg.find(stage_id);
  auto held = ctx.states.find(stage_id);
  auto result =
    entry.impl->process(offer, held == ctx.states.end() ? nullptr : &held->second.value);
  return after_process(reg, stage_id, offer, ctx, result, now, runner_limits{}).ws;
}

/// The floor: the statements gost's loaders and writers issue for the same work, from plain
/// threads and no actors. `plan.loaders` threads load their shards' queued offers (shard s:
/// loader s mod loaders, as gost's shards pick their store) with persistence::load_offers in
/// groups of `load_batch`, build each run's write-set, and hand it to the writer of its shard
/// (s mod writers, as gost's writer_for); `plan.writers` threads commit them with
/// persistence::commit_write_sets in batches of `write_batch`. Same pool, same connections.
half_result run_floor(persistence::pg_pool& pool, const stage_bench_plan& plan,
                      const std::vector<int64_t>& epochs, const stage_registry& reg,
                      size_t load_batch, size_t write_batch, const bench::cpu_meter& meter) {
  // Each loader's offers in gost's dispatch order (a shard's queue by due time, then id), its
  // shards interleaved. Read before the clock starts: gost's shards read them with one page
  // query each, which the floor leaves out.
  std::vector<std::vector<std::pair<uint32_t, std::string>>> work(plan.loaders);
  {
    std::vector<std::vector<std::string>> by_shard(plan.shards);
    for (uint32_t s = 0; s < plan.shards; ++s) {
      auto until = to_us(stage_clock::now());
      auto due = persistence::due_entries(pool, s, until, static_cast<size_t>(plan.offers));
      if (!due) {
        std::fprintf(stderr, "gost_bench: cannot read the queues\n");
        std::exit(1);
      }
      for (auto& e : *due)
        if (e.due_at_us <= until) // not the hint past the window
          by_shard[s].push_back(e.entity_id);
    }
    for (size_t i = 0;; ++i) {
      bool any = false;
      for (uint32_t s = 0; s < plan.shards; ++s)
        if (i < by_shard[s].size()) {
          work[s % plan.loaders].emplace_back(s, by_shard[s][i]);
          any = true;
        }
      if (!any)
        break;
    }
  }
  std::deque<write_queue> queues;
  for (size_t w = 0; w < plan.writers; ++w)
    queues.emplace_back(2 * write_batch + load_batch, plan.loaders);
  auto fail = [](const char* what, const caf::error& err) {
    std::fprintf(stderr, "gost_bench: floor: %s failed: %s\n", what,
                 persistence::error_message(err).c_str());
    std::exit(1);
  };

  half_result out;
  out.from = meter.sample();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (size_t l = 0; l < plan.loaders; ++l)
    threads.emplace_back([&, l] {
      auto& mine = work[l];
      std::vector<std::vector<fenced_set>> to_writer(plan.writers);
      for (size_t at = 0; at < mine.size(); at += load_batch) {
        auto end = std::min(mine.size(), at + load_batch);
        std::vector<std::string> ids;
        for (auto i = at; i < end; ++i)
          ids.push_back(mine[i].second);
        auto rows = persistence::load_offers(pool, ids);
        if (!rows)
          fail("load_offers", rows.error());
        auto now = to_us(stage_clock::now());
        for (auto i = at; i < end; ++i) {
          auto shard = mine[i].first;
          to_writer[shard % plan.writers].push_back(
            {shard, epochs[shard], stage_run_write_set(reg, plan.stage_id, (*rows)[i - at], now)});
        }
        for (size_t w = 0; w < plan.writers; ++w)
          if (!to_writer[w].empty())
            queues[w].push(to_writer[w]);
      }
      for (auto& q : queues)
        q.loader_done();
    });
  for (size_t w = 0; w < plan.writers; ++w)
    threads.emplace_back([&, w] {
      for (auto batch = queues[w].pop(write_batch); !batch.empty();
           batch = queues[w].pop(write_batch)) {
        auto outcomes = persistence::commit_write_sets(pool, batch, "bench");
        if (!outcomes)
          fail("commit_write_sets", outcomes.error());
        for (auto o : *outcomes)
          if (o != persistence::write_outcome::committed) {
            std::fprintf(stderr, "gost_bench: floor: a write-set did not commit\n");
            std::exit(1);
          }
      }
    });
  for (auto& t : threads)
    t.join();
  out.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.to = meter.sample();
  return out;
}

/// stage_noop / stage_offer: gost's run, then the floor's on data prepared again the same way,
/// at the batch sizes gost formed; one JSON line with both.
int stage_bench(const std::string& name, std::map<std::string, std::string>& opt) {
  stage_bench_plan plan;
  plan.name = name;
  plan.stage_id = name == "stage_noop" ? "noop" : "changer";
  plan.dsn = opt["dsn"];
  plan.offers = std::stoi(opt["offers"]);
  plan.shards = static_cast<uint32_t>(std::stoul(opt["shards"]));
  plan.writers = std::stoul(opt["writers"]);
  plan.batch_max = std::stoul(opt["batch"]);
  plan.parallelism = std::stoi(opt["parallelism"]);
  plan.policy = opt["policy"];
  auto reg = bench_stages(plan);
  persistence::pg_pool::options po;
  po.dsn = plan.dsn;
  po.size = std::stoi(opt["pool"]);
  persistence::pg_pool pool{po};
  auto meter = process_and_server(plan.dsn);

  auto gost = run_engine(pool, plan, prepare_stage_data(pool, plan), reg, meter);
  check_all_ran(plan, "gost");
  auto load_batch = static_cast<size_t>(std::max(1L, std::lround(gost.load_batch)));
  auto write_batch = static_cast<size_t>(std::max(1L, std::lround(gost.write_batch)));
  std::fprintf(stderr,
               "gost_bench: gost: %.0f runs/s; mean group load %.1f offers, mean commit "
               "%.1f write-sets; the floor replays %zu and %zu\n",
               plan.offers / gost.secs, gost.load_batch, gost.write_batch, load_batch, write_batch);
  auto floor =
    run_floor(pool, plan, prepare_stage_data(pool, plan), *reg, load_batch, write_batch, meter);
  check_all_ran(plan, "floor");
  std::fprintf(stderr, "gost_bench: floor: %.0f runs/s\n", plan.offers / floor.secs);

  auto value = plan.offers / gost.secs;
  auto floor_value = plan.offers / floor.secs;
  // floor_ratio_cpu: the floor's CPU per run (client + PostgreSQL) over gost's (process +
  // PostgreSQL): the ratio issue 26 holds, steadier than the rates' when others share the cores.
  auto cpu_of = [](const half_result& h) {
    return (h.to.gost - h.from.gost) + (h.to.pg - h.from.pg);
  };
  auto gost_cpu = cpu_of(gost);
  std::printf("{\"bench\": \"%s\", \"value\": %.0f, \"unit\": \"stage executions/s\", %s, "
              "\"floor_value\": %.0f, \"floor_ratio\": %.2f, %s, \"floor_ratio_cpu\": %.2f, "
              "\"load_batch\": %.1f, \"write_batch\": %.1f, \"allocator\": \"%s\"}\n",
              name.c_str(), value, bench::cpu_fields(gost.from, gost.to, plan.offers).c_str(),
              floor_value, value / floor_value,
              bench::cpu_fields(floor.from, floor.to, plan.offers, "floor_client_cpu_us_per_op",
                                "floor_pg_cpu_us_per_op")
                .c_str(),
              gost_cpu > 0 ? cpu_of(floor) / gost_cpu : 0.0, gost.load_batch, gost.write_batch,
              allocator_name().c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(
      stderr,
      "usage: gost_bench stage_noop|stage_offer|resident|timers|outbox_fill|tasks|actions|evolve"
      " --dsn DSN [--offers N] [--shards S] [--span SECONDS (timers, actions)]"
      " [--tasks N --events E --groups G (tasks)]"
      " [--actions N --measure SECONDS --burst B --batch K --poll MS (actions)]"
      " [--affected FRACTION (evolve)]\n");
    return 2;
  }
  std::string name = argv[1];
  std::map<std::string, std::string> opt{
    {"offers", "100000"}, {"shards", "4"},  {"pool", "6"},        {"parallelism", "1000"},
    {"batch", "1000"},    {"writers", "2"}, {"policy", "sharing"}};
  for (int i = 2; i + 1 < argc; i += 2)
    opt[std::string{argv[i]}.substr(2)] = argv[i + 1];
  if (opt.count("dsn") == 0
      || (name != "stage_noop" && name != "stage_offer" && name != "resident" && name != "timers"
          && name != "outbox_fill" && name != "tasks" && name != "actions" && name != "evolve")) {
    std::fprintf(stderr, "gost_bench: give a benchmark name and --dsn\n");
    return 2;
  }
  if (opt.count("log"))
    spdlog::set_level(spdlog::level::from_str(opt["log"]));
  auto offers = std::stoi(opt["offers"]);
  auto shards = static_cast<uint32_t>(std::stoul(opt["shards"]));
  if (name == "resident")
    return resident_bench(opt["dsn"], offers, shards);
  if (name == "outbox_fill")
    return outbox_fill(opt["dsn"], offers, shards);
  if (name == "tasks") {
    opt.emplace("tasks", "1000000");
    opt.emplace("events", "100000");
    opt.emplace("groups", "8");
    // gostd's pg.pool_size and entity writers, unless given.
    if (std::find(argv + 2, argv + argc, std::string{"--pool"}) == argv + argc)
      opt["pool"] = "4";
    if (std::find(argv + 2, argv + argc, std::string{"--writers"}) == argv + argc)
      opt["writers"] = "1";
    return tasks_bench(opt);
  }
  if (name == "timers") {
    opt.emplace("span", "240");
    return timers_bench(opt);
  }
  if (name == "actions") {
    // gostd's shards, pool and scheduled.* defaults, unless given.
    opt.emplace("actions", "1000000");
    opt.emplace("span", "3600");
    opt.emplace("measure", "60");
    opt.emplace("burst", "100000");
    opt.emplace("poll", "100");
    if (std::find(argv + 2, argv + argc, std::string{"--shards"}) == argv + argc)
      opt["shards"] = "64";
    if (std::find(argv + 2, argv + argc, std::string{"--pool"}) == argv + argc)
      opt["pool"] = "4";
    if (std::find(argv + 2, argv + argc, std::string{"--batch"}) == argv + argc)
      opt["batch"] = "256";
    return bench::actions_bench(opt);
  }
  if (name == "evolve") {
    opt.emplace("affected", "0.1");
    return bench::evolve_bench(opt);
  }
  return stage_bench(name, opt);
}
