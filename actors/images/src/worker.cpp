#include "gost/images/worker.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <unistd.h>

#include <openssl/sha.h>

#include "gost/images/redis_cache.hpp"
#include "gost/images/response.hpp"
#include "gost/images/stats.hpp"
#include "gost/persistence/images/images.hpp"
#include "gost/v1/events.pb.h"
#include "gost/v1/images.pb.h"

namespace gost::images {

namespace fs = std::filesystem;

namespace {

task_outcome final_error(std::string kind, std::string message) {
  return {task_outcome::final_error, {}, std::move(kind), std::move(message)};
}

task_outcome retry(std::string kind, std::string message) {
  return {task_outcome::retry, {}, std::move(kind), std::move(message)};
}

task_outcome done(const google::protobuf::Message& m) {
  return {task_outcome::done, m.SerializeAsString(), {}, {}};
}

task_outcome image_failure(const failure& f) {
  return final_error(to_string(f.kind), f.message);
}

/// The image's bytes, or what to do instead: a recoverable failure (the network, the server's
/// 5xx, 408 and 429) retries; the rest is final for this URL.
task_outcome fetch(std::string_view url, const worker_options& opts, std::string& bytes) {
  http::request r;
  r.url = std::string{url};
  r.max_body = opts.max_bytes;
  r.deadline = opts.fetch_timeout;
  r.max_redirects = opts.max_redirects;
  r.allow_private = opts.allow_private;
  auto resp = opts.fetch(r);
  switch (resp.error) {
    case http::failure::none: break;
    case http::failure::timeout:
    case http::failure::connect:
    case http::failure::protocol: return retry("download_failed", resp.message);
    case http::failure::refused_address:
      return final_error("address_refused", resp.message + " (images.allow_private_sources)");
    case http::failure::too_large:
      return final_error("too_large", resp.message + " (images.max_bytes)");
    case http::failure::too_many_redirects: return final_error("too_many_redirects", resp.message);
    case http::failure::bad_url: return final_error("bad_url", resp.message);
  }
  auto code = "http_" + std::to_string(resp.status);
  if (resp.status >= 500 || resp.status == 408 || resp.status == 429)
    return retry(code, "the image server answered HTTP " + std::to_string(resp.status));
  if (resp.status < 200 || resp.status > 299)
    return final_error(code, "the image server answered HTTP " + std::to_string(resp.status));
  bytes = std::move(resp.body);
  return {task_outcome::done, {}, {}, {}};
}

std::chrono::milliseconds backoff(const worker_options& opts, int attempts) {
  auto d = opts.retry_base;
  for (int i = 0; i < attempts && d < opts.retry_cap; ++i)
    d *= 2;
  return std::min(d, opts.retry_cap);
}

} // namespace

task_outcome run_task(const task_key& task, const worker_options& opts) {
  std::string bytes;
  if (auto got = fetch(task.url(), opts, bytes); got.kind != task_outcome::done)
    return got;
  switch (task.fn) {
    case function::ratio: {
      auto h = probe(bytes, opts.limits);
      if (!h)
        return image_failure(h.error);
      v1::ImageRatio r;
      r.set_width(h->width);
      r.set_height(h->height);
      r.set_ratio(h->ratio());
      r.set_format(h->format);
      r.set_orientation(h->orientation);
      return done(r);
    }
    case function::preview: {
      auto p = preview(bytes, opts.limits);
      if (!p)
        return image_failure(p.error);
      v1::ImagePreview r;
      r.set_jpeg(p->bytes);
      r.set_width(p->width);
      r.set_height(p->height);
      return done(r);
    }
    case function::main_color: {
      auto c = main_color(bytes, opts.limits);
      if (!c)
        return image_failure(c.error);
      v1::ImageColor r;
      r.set_r(c->r);
      r.set_g(c->g);
      r.set_b(c->b);
      char hex[8];
      std::snprintf(hex, sizeof hex, "#%02x%02x%02x", c->r, c->g, c->b);
      r.set_hex(hex);
      return done(r);
    }
    case function::rotate: {
      if (opts.blobs == nullptr)
        return final_error("internal", "no blob store configured for rotated images");
      auto nl = task.args.find('\n');
      double angle = nl == std::string::npos ? 0 : std::stod(task.args.substr(nl + 1));
      auto rot = rotate(bytes, angle, opts.limits);
      if (!rot)
        return image_failure(rot.error);
      std::string error;
      auto url = opts.blobs->put(rot->bytes, rot->format == "jpeg" ? "jpg" : rot->format, error);
      if (url.empty())
        return retry("store_failed", error);
      v1::ImageRotated r;
      r.set_url(url);
      r.set_width(rot->width);
      r.set_height(rot->height);
      r.set_format(rot->format);
      r.set_bytes(rot->bytes.size());
      return done(r);
    }
  }
  return final_error("internal", "unknown function");
}

caf::error store_outcomes(persistence::pg_pool& pool, function fn,
                          const std::vector<task_done>& outcomes, const worker_options& opts,
                          batch_counts& n) {
  std::vector<std::pair<persistence::image_task, persistence::image_result>> finished;
  uint64_t computed = 0;
  for (auto& [t, out] : outcomes) {
    task_key key{fn, t.args};
    if (opts.stats != nullptr && out.kind != task_outcome::done)
      opts.stats->failed(fn, out.error_kind);
    persistence::image_result r;
    r.key = key.result_key();
    r.attempts = t.attempts + 1;
    if (out.kind == task_outcome::retry && t.attempts + 1 < opts.max_attempts) {
      if (auto err = persistence::retry_image_task(pool, t, out.error_kind + ": " + out.error,
                                                   backoff(opts, t.attempts)))
        return err;
      ++n.retried;
      continue;
    }
    if (out.kind == task_outcome::done) {
      r.status = "done";
      r.value = out.value;
      ++n.done;
      ++computed;
    } else {
      r.status = "error";
      r.error_kind = out.error_kind;
      r.error = out.error;
      if (out.kind == task_outcome::retry) {
        r.error += " (gave up after " + std::to_string(t.attempts + 1) + " attempts)";
        ++n.given_up;
      } else {
        ++n.final_errors;
      }
    }
    finished.emplace_back(t, std::move(r));
  }
  if (finished.empty())
    return {};
  std::vector<persistence::outbox_append> outbox;
  if (!opts.notify_topic.empty()) {
    std::map<uint32_t, v1::OutboxBatch> by_partition; // the relay of the shard's owner sends it
    for (auto& [t, r] : finished) {
      auto* m = by_partition[t.partition].add_messages();
      m->set_topic(opts.notify_topic);
      m->set_key(r.key);
      m->set_value(make_notice(task_key{fn, t.args}, r).SerializeAsString());
    }
    for (auto& [partition, batch] : by_partition)
      outbox.push_back({partition, batch.messages_size(), batch.SerializeAsString()});
  }
  std::map<std::string, int64_t> expires;
  if (auto err = persistence::finish_image_tasks(pool, finished, outbox, &expires))
    return err;
  if (opts.stats != nullptr)
    opts.stats->of(fn).computed.fetch_add(computed, std::memory_order_relaxed);
  if (opts.cache != nullptr) {
    std::vector<persistence::image_result> rows;
    for (auto& [t, r] : finished) {
      rows.push_back(r);
      rows.back().function = t.function;
      rows.back().args = t.args;
      rows.back().expires_at_us = expires[r.key];
    }
    opts.cache->put(rows, false); // Redis away: PostgreSQL has them, reads fall back there
  }
  return {};
}

caf::expected<batch_counts> work_batch(persistence::pg_pool& pool, function fn,
                                       const std::vector<uint32_t>& partitions, size_t limit,
                                       std::chrono::milliseconds visibility,
                                       const worker_options& opts) {
  auto tasks = persistence::take_image_tasks(pool, to_string(fn), partitions, limit, visibility);
  if (!tasks)
    return tasks.error();
  batch_counts n;
  n.taken = tasks->size();
  std::vector<task_done> outcomes;
  for (auto& t : *tasks)
    outcomes.push_back({t, run_task(task_key{fn, t.args}, opts)});
  if (auto err = store_outcomes(pool, fn, outcomes, opts, n))
    return err;
  return n;
}

} // namespace gost::images
