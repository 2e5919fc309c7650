#include "gost/feeds/pools.hpp"

#include <algorithm>
#include <map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "gost/core/actor_pool.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/http_client.hpp"
#include "gost/core/log.hpp"
#include "gost/persistence/cluster/placement.hpp"
#include "gost/persistence/feeds/feed_loads.hpp"
#include "gost/v1/feed_service.pb.h"

namespace gost::feeds {

namespace {

const auto lg = gost::log::get("feeds");

using persistence::feed_job;

/// The retry delay of a step that failed `attempts` times before: retry_delay doubled each
/// time, at most 10 minutes.
std::chrono::milliseconds retry_after(const feed_pools_options& o, int attempts) {
  auto d = o.retry_delay;
  for (int i = 0; i < attempts && d < std::chrono::minutes{10}; ++i)
    d *= 2;
  return std::min<std::chrono::milliseconds>(d, std::chrono::minutes{10});
}

/// Ends a step that failed for now: retried later, or failed for good after the attempts.
void transient(const feed_pools_options& o, persistence::pg_pool& db, const feed_job& job,
               const std::string& stage, const std::string& kind, const std::string& message) {
  if (job.attempts + 1 >= o.max_attempts) {
    lg->warn("feed load seller={} load={} {} failed {} times, giving up: {}", job.load.seller_id,
             job.load.load_id, stage, job.attempts + 1, message);
    if (auto err = persistence::feed_failed(
          db, job, stage, kind,
          message + " (after " + std::to_string(job.attempts + 1) + " attempts)", o.node_id))
      lg->warn("recording the failure of load {} failed: {}", job.load.load_id, error_message(err));
    if (o.stats)
      ++o.stats->loads_failed;
    return;
  }
  auto delay = retry_after(o, job.attempts);
  lg->info("feed load seller={} load={} {} failed, retrying in {} ms: {}", job.load.seller_id,
           job.load.load_id, stage, delay.count(), message);
  if (auto err = persistence::feed_retry_later(db, job, stage, delay, message, o.node_id))
    lg->warn("recording the retry of load {} failed: {}", job.load.load_id, error_message(err));
  if (o.stats)
    ++o.stats->loads_retried;
}

// --- loader ----------------------------------------------------------------------------------

/// Whether an HTTP status is worth trying again (the server's trouble, not the request's).
bool transient_status(long status) {
  return status == 408 || status == 429 || status >= 500;
}

void fetch(const feed_pools_options& o, persistence::pg_pool& db, const feed_job& job,
           const stop_signal& stop) {
  auto& load = job.load;
  if (!o.blobs) {
    transient(o, db, job, "fetch", "io", "no blob store on this node");
    return;
  }
  auto file = o.blobs->begin();
  if (!file.error().empty()) {
    transient(o, db, job, "fetch", "io", file.error());
    return;
  }
  http::request req;
  req.url = load.source_url;
  req.deadline = o.fetch_timeout;
  req.max_body = o.limits.max_file_bytes;
  req.max_redirects = 5;
  req.allow_private = o.allow_private;
  req.proxy = o.proxy;
  // A stop aborts the download (the load stays waiting for the next taker).
  req.on_body = [&file, &stop](const char* data, size_t n) {
    return !stop.requested() && file.write(data, n);
  };
  auto resp = http::perform(req);
  if (stop.requested()) {
    (void)persistence::release_feed_lock(db, "fetch", load.seller_id, o.node_id);
    return;
  }
  auto fail = [&](const std::string& kind, const std::string& message) {
    if (o.stats)
      ++o.stats->fetch_failures;
    lg->warn("feed load seller={} load={} download failed for good: {}", load.seller_id,
             load.load_id, message);
    if (auto err = persistence::feed_failed(db, job, "fetch", kind, message, o.node_id))
      lg->warn("recording the failure of load {} failed: {}", load.load_id, error_message(err));
    if (o.stats)
      ++o.stats->loads_failed;
  };
  if (!resp.answered()) {
    switch (resp.error) {
      case http::failure::too_large:
        fail("limit", "the file at " + load.source_url + " is larger than "
                        + std::to_string(o.limits.max_file_bytes) + " bytes (feed.max_file_bytes)");
        return;
      case http::failure::bad_url:
      case http::failure::refused_address:
      case http::failure::too_many_redirects:
        fail("fetch", load.source_url + ": " + resp.message);
        return;
      default:
        if (o.stats)
          ++o.stats->fetch_failures;
        transient(o, db, job, "fetch", "fetch", load.source_url + ": " + resp.message);
        return;
    }
  }
  if (!resp.success()) {
    auto what = load.source_url + " answered HTTP " + std::to_string(resp.status);
    if (transient_status(resp.status)) {
      if (o.stats)
        ++o.stats->fetch_failures;
      transient(o, db, job, "fetch", "fetch", what);
    } else {
      fail("fetch", what);
    }
    return;
  }
  auto bytes = file.bytes();
  auto name = file.finish("xml");
  if (name.empty()) {
    transient(o, db, job, "fetch", "io", file.error());
    return;
  }
  if (auto err = persistence::feed_fetched(db, job, name, static_cast<int64_t>(bytes), o.node_id)) {
    // The file is stored (content-addressed: a retry finds it again); the lock is reaped or
    // released by the retry's own path.
    lg->warn("recording the download of load {} failed: {}", load.load_id, error_message(err));
    (void)persistence::release_feed_lock(db, "fetch", load.seller_id, o.node_id);
    return;
  }
  if (o.stats) {
    ++o.stats->fetched;
    o.stats->fetched_bytes += bytes;
  }
  lg->info("feed load seller={} namespace={} load={} downloaded bytes={} blob={}", load.seller_id,
           load.ns, load.load_id, bytes, name);
}

// --- processor -------------------------------------------------------------------------------

/// Per-offer problems of a load, stored in statements of up to 1000 rows, numbered per offer.
class stored_problems final : public problem_sink {
public:
  stored_problems(const feed_pools_options& o, persistence::pg_pool& db, std::string seller,
                  int64_t load_id)
    : o_(o), db_(db), seller_(std::move(seller)), load_id_(load_id) {}

  void add(const std::string& external_id, const std::string& title, int64_t line,
           const offer_problem& p) override {
    persistence::feed_offer_error e;
    e.external_id = external_id;
    e.error_id = next_[external_id]++;
    e.level = to_string(p.level);
    e.type = to_string(p.type);
    e.field = p.field;
    e.title = title;
    e.line = line;
    e.message = p.message;
    pending_.push_back(std::move(e));
    if (o_.stats)
      ++o_.stats->problems[static_cast<size_t>(p.type)];
    if (pending_.size() >= 1000)
      flush();
  }

  /// Stores what is pending; false when the database refused (the step runs again).
  bool flush() {
    if (pending_.empty() || failed_)
      return !failed_;
    if (auto err = persistence::add_feed_offer_errors(db_, seller_, load_id_, pending_)) {
      lg->warn("storing the errors of load {} failed: {}", load_id_, error_message(err));
      failed_ = true;
      return false;
    }
    pending_.clear();
    return true;
  }

private:
  const feed_pools_options& o_;
  persistence::pg_pool& db_;
  std::string seller_;
  int64_t load_id_;
  std::map<std::string, int64_t> next_;
  std::vector<persistence::feed_offer_error> pending_;
  bool failed_ = false;
};

std::string statistics_of(const load_report& r) {
  v1::FeedLoadStatistics s;
  s.set_offers(static_cast<int64_t>(r.offers));
  s.set_sent(static_cast<int64_t>(r.sent));
  s.set_rejected_here(static_cast<int64_t>(r.rejected));
  s.set_duplicates(static_cast<int64_t>(r.duplicates));
  s.set_warnings(static_cast<int64_t>(r.warnings));
  s.set_batches(r.batches);
  s.set_bytes(static_cast<int64_t>(r.bytes));
  s.set_check_seconds(r.check_time.count());
  s.set_send_seconds(r.send_time.count());
  return s.SerializeAsString();
}

void process(const feed_pools_options& o, persistence::pg_pool& db, const feed_job& job,
             const stop_signal& stop) {
  auto& load = job.load;
  v1::FeedSettings settings;
  settings.ParseFromString(load.settings);
  load_spec spec;
  spec.seller_id = load.seller_id;
  spec.ns = load.ns;
  spec.task_id = std::to_string(load.load_id);
  spec.missing = settings.missing() == v1::FeedSettings::MAKE_MANUAL ? v1::FeedEnd::MAKE_MANUAL
                                                                     : v1::FeedEnd::DELETE;
  spec.batch_size = o.batch_size;
  spec.unify.default_address = settings.default_address();
  spec.unify.source =
    settings.kind() == v1::FeedSettings::PARSED ? v1::OFFER_SOURCE_PARSED : v1::OFFER_SOURCE_FEED;
  auto sink = o.make_sink ? o.make_sink() : nullptr;
  if (!sink) {
    transient(o, db, job, "process", "io", "no producer for the requests topic (kafka.brokers)");
    return;
  }
  load_report rep;
  if (load.origin == "delete") {
    // The feed was removed: a load without offers whose end deletes (or makes manual) every
    // offer of the feed (the offer store's "missing from the load" rule).
    v1::FeedRequest end;
    end.set_seller_id(spec.seller_id);
    end.set_namespace_(spec.ns);
    end.set_task_id(spec.task_id);
    end.mutable_end()->set_missing(spec.missing);
    sink->send(end, stop);
    if (sink->flushed(stop))
      rep.outcome = load_report::status::succeeded;
    else
      rep.outcome =
        stop.requested() ? load_report::status::stopped : load_report::status::transient;
  } else {
    auto path = o.blobs ? o.blobs->path_of(load.sha256) : std::string{};
    if (path.empty()) {
      transient(o, db, job, "process", "io",
                "the load's file " + load.sha256 + " is not stored here");
      return;
    }
    stored_problems problems{o, db, load.seller_id, load.load_id};
    auto unify = o.unify->current(); // this load keeps the data it started with
    feed_processor p{*unify, o.limits};
    rep = p.run([&] { return file_source(path); }, spec, *sink, &problems, stop);
    if (rep.outcome == load_report::status::succeeded && !problems.flush())
      rep.outcome = load_report::status::transient;
    if (o.stats) {
      o.stats->offers_read += rep.offers;
      o.stats->offers_sent += rep.sent;
      o.stats->offers_rejected += rep.rejected;
      o.stats->processed_bytes += rep.bytes;
    }
  }
  switch (rep.outcome) {
    case load_report::status::succeeded:
      if (auto err = persistence::feed_sent(db, job, rep.format ? to_string(*rep.format) : "",
                                            statistics_of(rep), o.node_id)) {
        // Sent, not recorded: the step runs again and sends the same batches (idempotent).
        lg->warn("recording load {} as sent failed: {}", load.load_id, error_message(err));
        (void)persistence::release_feed_lock(db, "process", load.seller_id, o.node_id);
        return;
      }
      if (o.stats)
        ++o.stats->loads_sent;
      lg->info("feed load seller={} namespace={} load={} sent format={} offers={} sent={} "
               "rejected={} duplicates={} batches={} check_s={:.2f} send_s={:.2f}",
               load.seller_id, load.ns, load.load_id, rep.format ? to_string(*rep.format) : "-",
               rep.offers, rep.sent, rep.rejected, rep.duplicates, rep.batches,
               rep.check_time.count(), rep.send_time.count());
      return;
    case load_report::status::failed:
      lg->info("feed load seller={} load={} failed: {} {}", load.seller_id, load.load_id,
               rep.fatal->kind, rep.fatal->describe());
      if (auto err = persistence::feed_failed(db, job, "process", rep.fatal->kind,
                                              rep.fatal->describe(), o.node_id))
        lg->warn("recording the failure of load {} failed: {}", load.load_id, error_message(err));
      if (o.stats)
        ++o.stats->loads_failed;
      return;
    case load_report::status::transient:
      transient(o, db, job, "process", rep.fatal ? rep.fatal->kind : "io",
                rep.fatal ? rep.fatal->describe() : "the step did not finish");
      return;
    case load_report::status::stopped:
      // The node stops: the load stays queued for the next taker.
      (void)persistence::release_feed_lock(db, "process", load.seller_id, o.node_id);
      return;
  }
}

// --- feeders ---------------------------------------------------------------------------------

struct feeder_state {
  static inline const char* name = "gost.feed_feeder";
  int running = 0;
  bool tick_pending = false;
  bool draining = false;
  /// The last step found nothing: a tick sends one probe, not a job per worker, so an idle
  /// node costs a query or two per poll, not one per worker.
  bool idle = false;
};

using step_fn = bool (*)(const feed_pools_options&, const stop_signal&);

feed_feeder_actor::behavior_type feeder(feed_feeder_actor::stateful_pointer<feeder_state> self,
                                        std::shared_ptr<const feed_pools_options> o,
                                        pool_actor pool, int workers, step_fn step,
                                        std::shared_ptr<stop_signal> stop,
                                        std::atomic<int64_t>* busy) {
  self->attach_functor([stop] { stop->request(); });
  self->send(self, tick_atom_v);
  return {
    [=](tick_atom) {
      auto& st = self->state;
      st.tick_pending = false;
      while (!st.draining && st.running < (st.idle ? 1 : workers)) {
        ++st.running;
        if (busy)
          ++*busy;
        self
          ->request(pool, caf::infinite, run_atom_v,
                    pool_job{[o, step, stop] { return std::any{step(*o, *stop)}; }})
          .then(
            [=](pool_result& r) {
              auto& s = self->state;
              --s.running;
              if (busy)
                --*busy;
              bool found = std::any_cast<bool>(r.value);
              s.idle = !found;
              if (found) {
                self->send(self, tick_atom_v); // more may be waiting: at once
              } else if (!s.tick_pending) {
                s.tick_pending = true;
                self->delayed_send(self, o->poll, tick_atom_v);
              }
            },
            [=](caf::error& e) {
              auto& s = self->state;
              --s.running;
              if (busy)
                --*busy;
              lg->warn("a feed step failed: {}", error_message(e));
              if (!s.tick_pending) {
                s.tick_pending = true;
                self->delayed_send(self, o->poll, tick_atom_v);
              }
            });
      }
    },
    [=](drain_atom) {
      self->state.draining = true;
      stop->request();
      return true;
    },
  };
}

/// The databases of the shard groups this node serves (ADR 0023: a seller's feeds and loads
/// live in its home group's), each once, in id order.
std::vector<persistence::pg_pool*> databases(const feed_pools_options& o) {
  std::vector<persistence::pg_pool*> all;
  for (auto g : o.where->groups())
    if (auto* db = o.where->database(g))
      all.push_back(db);
  return all;
}

/// Takes the oldest due work of `stage` with its seller's lock, in one group's database after
/// the other, and runs it; false when there was none. The first database tried turns with
/// every take of the stage (`turn`), so work waiting in one group never starves another's,
/// nor does a database that is away delay the others' every time. A step that throws is
/// retried later like any transient failure.
template <class F>
bool take_and_run(const feed_pools_options& o, const char* stage, std::atomic<size_t>& turn,
                  const stop_signal& stop, F run) {
  auto all = databases(o);
  if (all.empty())
    return false;
  auto first = turn++ % all.size();
  for (size_t i = 0; i < all.size() && !stop.requested(); ++i) {
    auto* db = all[(first + i) % all.size()];
    auto job = persistence::take_feed_work(*db, stage, o.node_id);
    if (!job) {
      lg->debug("taking {} work failed: {}", stage, error_message(job.error()));
      continue; // this group's database is away: the others' work goes on
    }
    if (!job->has_value())
      continue;
    try {
      run(*db, **job);
    } catch (const std::exception& e) {
      transient(o, *db, **job, stage, "io", e.what());
    }
    return true;
  }
  return false;
}

} // namespace

bool run_loader_step(const feed_pools_options& o, const stop_signal& stop) {
  if (stop.requested())
    return false;
  // Housekeeping of the loader's own: due URL feeds become loads; dead nodes' locks go.
  static std::atomic<int64_t> last_reap_ms{0};
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now().time_since_epoch())
                  .count();
  auto last = last_reap_ms.load();
  if (now_ms - last >= 10'000 && last_reap_ms.compare_exchange_strong(last, now_ms)) {
    for (auto* db : databases(o)) {
      if (auto n = persistence::reap_feed_locks(*db, o.node_timeout, o.lock_max_hold);
          n && *n > 0) {
        lg->warn("freed {} feed locks of nodes that are gone or of steps hung over {} ms", *n,
                 o.lock_max_hold.count());
        if (o.stats)
          o.stats->locks_reaped += static_cast<uint64_t>(*n);
      }
    }
    std::string error;
    if (o.unify->reload_if_changed(error))
      lg->info("feed catalog and gazetteer reloaded (feed.catalog_dir)");
    else if (!error.empty())
      lg->error("feed catalog not reloaded, the data in use stays: {}", error);
  }
  for (auto* db : databases(o))
    if (auto due = persistence::schedule_due_feeds(*db, 16, o.keep_loads); due && !due->empty())
      lg->info("{} URL feeds due: loads queued for download", due->size());
  static std::atomic<size_t> turn{0};
  return take_and_run(o, "fetch", turn, stop, [&](persistence::pg_pool& db, const feed_job& job) {
    fetch(o, db, job, stop);
  });
}

bool run_processor_step(const feed_pools_options& o, const stop_signal& stop) {
  if (stop.requested())
    return false;
  static std::atomic<size_t> turn{0};
  return take_and_run(o, "process", turn, stop, [&](persistence::pg_pool& db, const feed_job& job) {
    process(o, db, job, stop);
  });
}

feed_pools spawn_feed_pools(caf::actor_system& sys, feed_pools_options opts) {
  auto o = std::make_shared<const feed_pools_options>(std::move(opts));
  auto loader_pool = spawn_pool(sys, {"feed.loader", o->loader_workers, 16});
  auto processor_pool = spawn_pool(sys, {"feed.processor", o->processor_workers, 16});
  feed_pools out;
  out.loader =
    sys.spawn(feeder, o, loader_pool, o->loader_workers, &run_loader_step,
              std::make_shared<stop_signal>(), o->stats ? &o->stats->loader_busy : nullptr);
  out.processor =
    sys.spawn(feeder, o, processor_pool, o->processor_workers, &run_processor_step,
              std::make_shared<stop_signal>(), o->stats ? &o->stats->processor_busy : nullptr);
  // The pools go with their feeders.
  out.loader->attach_functor(
    [loader_pool] { caf::anon_send_exit(loader_pool, caf::exit_reason::user_shutdown); });
  out.processor->attach_functor(
    [processor_pool] { caf::anon_send_exit(processor_pool, caf::exit_reason::user_shutdown); });
  return out;
}

void add_feed_metrics(stats_registry& reg, std::shared_ptr<const feed_stats> stats) {
  reg.add_stats("gost_feed_", stats);
  reg.add([stats](metric_families& out) {
    const char* name = "gost_feed_offer_problems_total";
    const char* help = "Problems of offers in feed files, by type (an offer may have several).";
    constexpr size_t types = sizeof(stats->problems) / sizeof(stats->problems[0]);
    for (size_t t = 0; t < types; ++t)
      out.add(name, stat_kind::counter, help, {{"type", to_string(static_cast<problem_type>(t))}},
              static_cast<int64_t>(stats->problems[t].load(std::memory_order_relaxed)));
  });
}

} // namespace gost::feeds
