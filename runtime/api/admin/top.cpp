// gost.v1.AdminService: Top, the figures `gostctl top` shows: read from the atomics the shards
// and their actors keep (nobody is asked), and PostgreSQL's stage table.
#include "api/admin_service.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "api/admin/common.hpp"
#include "api/status.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/kit/writer.hpp"
#include "gost/entities/entity_type.hpp"
#include "gost/images/stats.hpp"

namespace gost::runtime {

using namespace admin;

namespace {

/// The shards' own figures, largest mailboxes first, then the largest backlogs. `writes`: their
/// writers' (write lag, last batch); null: not shown.
std::vector<v1::ShardTop> shard_rows(const kit::shard_registry& reg,
                                     const kit::writer_stats* writes, int64_t now) {
  std::vector<v1::ShardTop> shards;
  for (auto& [shard, f] : reg.live()) {
    v1::ShardTop t;
    t.set_shard(shard);
    t.set_resident(f->resident.load(std::memory_order_relaxed));
    t.set_mailbox(f->mailbox.load(std::memory_order_relaxed));
    t.set_runs(f->runs.load(std::memory_order_relaxed));
    t.set_failures(f->failures.load(std::memory_order_relaxed));
    t.set_running(f->running.load(std::memory_order_relaxed));
    t.set_backlog(f->backlog.load(std::memory_order_relaxed));
    t.set_oldest_due_age_ms(age_ms(f->oldest_due_us.load(std::memory_order_relaxed), now));
    t.set_epoch(f->epoch.load(std::memory_order_relaxed));
    if (const auto* w = writes != nullptr ? writes->slot_for(shard) : nullptr) {
      t.set_write_lag_ms(age_ms(w->oldest_us.load(std::memory_order_relaxed), now));
      t.set_write_batch(w->last_batch.load(std::memory_order_relaxed));
    }
    shards.push_back(std::move(t));
  }
  std::sort(shards.begin(), shards.end(), [](const v1::ShardTop& a, const v1::ShardTop& b) {
    return std::make_tuple(-a.mailbox(), -a.backlog(), a.shard())
           < std::make_tuple(-b.mailbox(), -b.backlog(), b.shard());
  });
  return shards;
}

/// The durable entity kinds and their lanes, summed over this node's entity shards. The kit's
/// lanes of durable entities are `kind/lane` (so kinds never share one).
void entity_rows(const entity_registry& kinds, const kit::shard_registry& reg,
                 v1::TopResponse& out) {
  std::map<std::string, v1::KindTop> by_kind;
  for (auto& type : kinds.all())
    by_kind[type->kind()].set_kind(type->kind());
  std::map<std::pair<std::string, std::string>, v1::LaneTop> by_lane;
  for (auto& [shard, f] : reg.live()) {
    for (auto& [kind, n] : f->residents())
      by_kind[kind].set_resident(by_kind[kind].resident() + n);
    for (auto& [id, l] : f->lanes()) {
      auto slash = id.find('/');
      auto kind = id.substr(0, slash);
      auto& row = by_lane[{kind, slash == std::string::npos ? "" : id.substr(slash + 1)}];
      row.set_runs(row.runs() + l->runs.load(std::memory_order_relaxed));
      row.set_failures(row.failures() + l->failures.load(std::memory_order_relaxed));
      row.set_running(row.running() + l->running.load(std::memory_order_relaxed));
      row.set_backlog(row.backlog() + l->backlog.load(std::memory_order_relaxed));
      row.set_dead_letters(row.dead_letters() + l->dead_letters.load(std::memory_order_relaxed));
    }
  }
  for (auto& [key, row] : by_lane) {
    row.set_kind(key.first);
    row.set_lane(key.second);
    auto& k = by_kind[key.first];
    k.set_kind(key.first);
    k.set_runs(k.runs() + row.runs());
    k.set_failures(k.failures() + row.failures());
    k.set_running(k.running() + row.running());
    k.set_backlog(k.backlog() + row.backlog());
    k.set_dead_letters(k.dead_letters() + row.dead_letters());
    *out.add_lanes() = std::move(row);
  }
  for (auto& [kind, row] : by_kind) {
    row.set_kind(kind);
    *out.add_kinds() = std::move(row);
  }
}

} // namespace

grpc::ServerUnaryReactor* admin_service::Top(grpc::CallbackServerContext* ctx,
                                             const v1::TopRequest*, v1::TopResponse* resp) {
  unary_call call{ctx};
  top(resp, finish(call));
  return call.reactor();
}

void admin_service::top(v1::TopResponse* resp, done_fn done) {
  auto pool = cluster_.pool;
  auto groups = cluster_.group_pools();
  auto stages = stages_;
  auto stats = stats_;
  auto node_id = cluster_.node_id;
  auto image_figures = image_figures_;
  auto entities = entities_;
  hub_.run_blocking([=] {
    auto now = kit::now_us();
    resp->set_node_id(node_id);
    if (image_figures != nullptr) {
      std::map<images::function, uint64_t> failed;
      for (auto& [k, n] : image_figures->failures())
        failed[k.first] += n;
      for (auto fn : {images::function::ratio, images::function::preview,
                      images::function::main_color, images::function::rotate}) {
        auto& f = image_figures->functions[images::image_stats::slot(fn)];
        auto* t = resp->add_images();
        t->set_function(images::to_string(fn));
        t->set_workers(f.workers.load(std::memory_order_relaxed));
        t->set_in_flight(f.in_flight.load(std::memory_order_relaxed));
        t->set_waiting(f.waiting.load(std::memory_order_relaxed));
        t->set_queued(f.queued.load(std::memory_order_relaxed));
        t->set_computed(f.computed.load(std::memory_order_relaxed));
        t->set_failed(failed[fn]);
        t->set_cache_hits(f.cache_hits.load(std::memory_order_relaxed));
        t->set_cache_misses(f.cache_misses.load(std::memory_order_relaxed));
        t->set_skipped(f.skipped.load(std::memory_order_relaxed));
      }
    }
    resp->set_at_us(now);
    // The shards' own figures: atomics the shards and their actors keep; nobody is asked.
    for (auto& t : shard_rows(stats->offer_shards, &stats->offer_writes, now))
      *resp->add_shards() = std::move(t);
    if (entities != nullptr && !entities->empty()) {
      for (auto& t : shard_rows(stats->entity_shards, nullptr, now))
        *resp->add_entity_shards() = std::move(t);
      entity_rows(*entities, stats->entity_shards, *resp);
    }
    auto table = read_stage_table(*pool, groups, now);
    if (!table) {
      done(to_status(table.error()));
      return;
    }
    std::vector<v1::StageTop> rows;
    for (auto& id : stage_ids(*stages, *table)) {
      v1::StageTop t;
      t.set_stage_id(id);
      if (auto* m = stats->stage(id)) {
        t.set_runs(m->runs.load());
        t.set_failures(m->failures.load());
      }
      if (auto c = table->counts.find(id); c != table->counts.end()) {
        t.set_queued(c->second.queued);
        t.set_oldest_due_age_ms(age_ms(c->second.oldest_due_us, now));
        t.set_dead_letters(c->second.dead_letters);
      }
      t.set_paused(table->pauses.count(id) != 0);
      rows.push_back(std::move(t));
    }
    std::sort(rows.begin(), rows.end(), [](const v1::StageTop& a, const v1::StageTop& b) {
      return std::make_tuple(-static_cast<int64_t>(a.queued()), a.stage_id())
             < std::make_tuple(-static_cast<int64_t>(b.queued()), b.stage_id());
    });
    for (auto& t : rows)
      *resp->add_stages() = std::move(t);
    done(grpc::Status::OK);
  });
}

} // namespace gost::runtime
