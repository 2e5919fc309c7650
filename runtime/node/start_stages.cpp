// The stages this node runs: the built-in ones it is configured for, the external ones and the
// application's (node_builder); and, for the log, the application's actor types.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/external_stage.hpp"
#include "gost/catalog/evolve_stage.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"
#include "gost/notify/on_change.hpp"
#include "gost/offers/builtin_stages.hpp"
#include "gost/photos/photo_stages.hpp"
#include "gost/videos/video_check.hpp"
#include "kafka/sync_sender.hpp"
#include "node/start.hpp"

namespace gost::runtime {

namespace {

const auto lg = gost::log::get("node");

std::string fmt_hosts(const std::vector<std::string>& hosts) {
  std::string out;
  for (auto& h : hosts)
    out += (out.empty() ? "" : ",") + h;
  return out;
}

/// The migration files of `dir` (`*.tsv`), parsed and in version order, or the first problem.
caf::error read_migrations(const std::string& dir,
                           std::vector<persistence::catalog_version_row>& out) {
  namespace fs = std::filesystem;
  const std::string key = "config key `stages.catalog.migrations`: ";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(errc::invalid_argument,
                      key + "`" + dir + "` is not a directory; point it at the migration files");
  for (auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".tsv")
      continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in)
      return make_error(errc::invalid_argument, key + "cannot read " + entry.path().string());
    auto m = catalog::migration::parse(text.str(), entry.path().string());
    if (!m)
      return make_error(errc::invalid_argument, key + m.error + "; fix the file");
    for (auto& other : out)
      if (other.version == m.value->to())
        return make_error(errc::invalid_argument,
                          key + "`" + other.source + "` and `" + entry.path().string()
                            + "` both lead to version " + std::to_string(other.version));
    out.push_back({m.value->to(), entry.path().string(), text.str(), 0});
  }
  if (ec)
    return make_error(errc::invalid_argument, key + "cannot list `" + dir + "`: " + ec.message());
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.version < b.version; });
  return {};
}

} // namespace

caf::error start_catalog(node_context& n) {
  if (!n.catalog)
    return {};
  auto stored = persistence::store_catalog_versions(*n.pool, n.catalog_files);
  if (!stored)
    return make_error(errc::invalid_argument, "config key `stages.catalog.migrations`: "
                                                + persistence::error_message(stored.error()));
  std::vector<catalog::migration> steps;
  for (auto& row : *stored) {
    auto m = catalog::migration::parse(row.rules, row.source);
    if (!m) // stored by a node whose rules this one reads otherwise (another gost version)
      return make_error(errc::internal, "stored catalog version " + std::to_string(row.version)
                                          + " does not parse: " + m.error);
    steps.push_back(std::move(*m.value));
  }
  if (auto problem = catalog::evolution::check(steps); !problem.empty())
    return make_error(errc::invalid_argument,
                      "config key `stages.catalog.migrations`: the stored versions with these "
                      "files: "
                        + problem + "; add the missing migration");
  auto ev = std::make_shared<const catalog::evolution>(std::move(steps));
  n.catalog->set(ev);
  if (ev->current() > ev->base())
    n.sweeps.push_back({catalog::sweep_token(ev->current()), catalog::evolve_stage_id});
  lg->info("catalog versions base={} current={} stored={} files={}", ev->base(), ev->current(),
           stored->size(), n.catalog_files.size());
  return {};
}

caf::error start_stages(node_context& n) {
  auto& cfg = n.cfg.stages;
  n.stages = std::make_shared<stage_registry>();
  if (cfg.expire.enabled)
    n.stages->add("expire", make_expire_stage(cfg.expire.after));
  if (cfg.audit.enabled)
    n.stages->add("audit", make_audit_stage(cfg.audit.every));
  if (cfg.photos.enabled && n.cfg.images.enabled) {
    // PostgreSQL starts after the stages are registered; no stage runs before it.
    photos::photo_stage_options po;
    po.images = photos::make_pg_asker([&n] { return n.placement.get(); },
                                      [&n]() -> images::task_queue* { return n.image_tasks(); });
    po.ttl = n.cfg.images.ttl;
    po.recheck = cfg.photos.recheck;
    po.recheck_max = cfg.photos.recheck_max;
    stage_options so;
    so.blocking = true; // process() reads and queues in PostgreSQL: the stage's own pool
    so.pool_workers = cfg.photos.workers;
    n.stages->add(photos::download_stage_id, photos::make_download_stage(po), so);
    n.stages->add(photos::ratio_color_stage_id, photos::make_ratio_color_stage(po), so);
    n.stages->add(photos::orientation_stage_id, photos::make_orientation_stage(po), so);
  }
  if (cfg.video.enabled) {
    videos::video_check_options vo;
    vo.rules.allowed_hosts = cfg.video.allowed_hosts.suffixes;
    vo.rules.allow_private = cfg.video.allow_private;
    vo.rules.recheck = cfg.video.recheck;
    vo.rules.retry = cfg.video.retry;
    vo.rules.retry_max = cfg.video.retry_max;
    vo.timeout = cfg.video.timeout;
    vo.stats = std::make_shared<videos::video_stats>();
    videos::add_video_metrics(*n.registry, vo.stats);
    stage_options so;
    so.blocking = true; // process() waits on HTTP: the stage's own pool
    so.pool_workers = cfg.video.workers;
    n.stages->add(videos::video_check_stage_id, videos::make_video_check_stage(std::move(vo)), so);
    lg->info("stage id={} allowed_hosts={} allow_private={}", videos::video_check_stage_id,
             cfg.video.allowed_hosts.suffixes.empty() ? std::string{"any"}
                                                      : fmt_hosts(cfg.video.allowed_hosts.suffixes),
             cfg.video.allow_private);
  }
  if (cfg.notify.enabled) {
    // Its work is the after_save hook (start_after_save feeds it); sends to Kafka wait for the
    // broker, each bounded by kafka.message_timeout.
    notify::on_change_options no;
    no.topic = cfg.notify.topic;
    if (!no.topic.empty()) {
      kafka::producer_options po;
      po.role = "the notify.on_change stage's Kafka producer";
      po.settings.push_back(kafka::brokers_setting(n.cfg.kafka.brokers));
      po.settings.push_back({"message.timeout.ms",
                             std::to_string(n.cfg.kafka.message_timeout.count()),
                             "kafka.message_timeout"});
      auto sender = std::make_shared<kafka::sync_sender>(std::move(po));
      no.send_kafka = [sender](const std::string& topic, const std::string& key,
                               const std::string& value,
                               const std::vector<std::pair<std::string, std::string>>& headers) {
        return sender->send(topic, key, value, headers);
      };
    }
    no.webhook = cfg.notify.webhook;
    no.timeout = cfg.notify.timeout;
    no.allow_private = cfg.notify.allow_private;
    notify::add_notify_metrics(*n.registry, no.stats);
    n.stages->add(notify::on_change_stage_id, notify::make_on_change_stage(std::move(no)));
    lg->info("stage id={} topic={} webhook={}", notify::on_change_stage_id,
             cfg.notify.topic.empty() ? std::string{"none"} : cfg.notify.topic,
             cfg.notify.webhook.empty() ? std::string{"none"} : cfg.notify.webhook);
  }
  if (!cfg.catalog.migrations.empty()) {
    if (auto err = read_migrations(cfg.catalog.migrations, n.catalog_files))
      return err;
    // The chain is set by start_catalog, from what PostgreSQL holds, before any shard starts.
    n.catalog = std::make_shared<catalog::evolution_source>();
    n.stages->add(catalog::evolve_stage_id, catalog::make_evolve_stage(n.catalog));
    lg->info("stage id={} migrations={} files={}", catalog::evolve_stage_id, cfg.catalog.migrations,
             n.catalog_files.size());
  }
  for (auto& ext : cfg.external) {
    if (auto problem = check_external_stage(ext, *n.stages); !problem.empty())
      return make_error(errc::invalid_argument,
                        "config key `stages.external` is invalid: " + problem);
    n.stages->add(ext.id, make_external_stage(ext), external_stage_options(ext));
    lg->info("external stage id={} address={} parallelism={}", ext.id, ext.address,
             ext.parallelism);
  }
  // The application's own stages (node_builder::add_stage), unless `stages.<id>.enabled`
  // turned one off.
  for (auto& app : n.ext.stages) {
    if (auto on = cfg.application.find(app.id); on != cfg.application.end() && !on->second) {
      lg->info("stage id={} (application) off: stages.{}.enabled=false", app.id, app.id);
      continue;
    }
    if (n.stages->find(app.id) != nullptr)
      return make_error(errc::invalid_argument,
                        "stage id `" + app.id
                          + "` is registered twice (a built-in or external stage has it)");
    n.stages->add(app.id, app.impl, app.opts ? *app.opts : stage_options{});
    lg->info("stage id={} (application)", app.id);
  }
  for (auto& t : n.ext.entity_types->all())
    lg->info("entity type kind={} state={} event={}", t->kind(), t->state_descriptor()->full_name(),
             t->event_descriptor()->full_name());
  for (auto& e : n.stages->all())
    n.stats->add_stage(e.id);
  add_stage_metrics(*n.registry, n.stats);
  return {};
}

} // namespace gost::runtime
