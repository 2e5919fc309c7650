#include "gost/images/ask.hpp"

#include <map>

#include "gost/persistence/images/images.hpp"
#include "gost/v1/images.pb.h"

namespace gost::images {

namespace {

/// Fills `out` from a cached row of function `fn`.
void fill(function fn, const persistence::image_result& row, v1::ImageResponse& out) {
  out.set_attempts(row.attempts);
  if (row.status == "pending") {
    out.set_status(v1::IMAGE_STATUS_PENDING);
    return;
  }
  if (row.status == "error") {
    out.set_status(v1::IMAGE_STATUS_ERROR);
    out.set_error_kind(row.error_kind);
    out.set_error(row.error);
    return;
  }
  out.set_status(v1::IMAGE_STATUS_DONE);
  bool ok = false;
  switch (fn) {
    case function::ratio: ok = out.mutable_ratio()->ParseFromString(row.value); break;
    case function::preview: ok = out.mutable_preview()->ParseFromString(row.value); break;
    case function::main_color: ok = out.mutable_main_color()->ParseFromString(row.value); break;
    case function::rotate: ok = out.mutable_rotated()->ParseFromString(row.value); break;
  }
  if (!ok) { // a row written by another version: computed again on request with `compute`
    out.clear_result();
    out.set_status(v1::IMAGE_STATUS_ERROR);
    out.set_error_kind("internal");
    out.set_error("the cached result does not parse; ask again with options.compute");
  }
}

} // namespace

caf::error ask_images(persistence::pg_pool& pool, const std::vector<image_ask>& asks,
                      uint32_t partitions, const std::vector<v1::ImageResponse*>& out) {
  std::vector<std::string> keys;
  keys.reserve(asks.size());
  for (size_t i = 0; i < asks.size(); ++i) {
    keys.push_back(asks[i].task.result_key());
    out[i]->set_key(keys.back());
  }
  auto rows = persistence::find_image_results(pool, keys);
  if (!rows)
    return std::move(rows.error());
  std::map<std::string, const persistence::image_result*> by_key;
  for (auto& r : *rows)
    by_key[r.key] = &r;
  std::vector<persistence::image_request> queue;
  for (size_t i = 0; i < asks.size(); ++i) {
    auto& a = asks[i];
    auto found = by_key.find(keys[i]);
    if (found != by_key.end() && !a.compute) {
      fill(a.task.fn, *found->second, *out[i]);
      continue;
    }
    if (a.cache_only) {
      out[i]->set_status(v1::IMAGE_STATUS_NOT_CACHED);
      continue;
    }
    persistence::image_request q;
    q.key = keys[i];
    q.task = {to_string(a.task.fn), a.task.partition(partitions), a.task.args, 0, a.ttl_ms, 0, {}};
    q.pending_ttl_ms = a.ttl_ms;
    queue.push_back(std::move(q));
    if (found != by_key.end())
      fill(a.task.fn, *found->second, *out[i]); // compute: the old result stays until the new one
    out[i]->set_status(v1::IMAGE_STATUS_PENDING);
  }
  if (!queue.empty())
    if (auto n = persistence::enqueue_image_tasks(pool, queue); !n)
      return std::move(n.error());
  return {};
}

} // namespace gost::images
