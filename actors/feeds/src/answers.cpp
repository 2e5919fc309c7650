#include "gost/feeds/answers.hpp"

#include <algorithm>
#include <cstdlib>

#include "gost/v1/feed_service.pb.h"

namespace gost::feeds {

namespace {

std::optional<int64_t> load_id_of(const std::string& task_id) {
  if (task_id.empty() || task_id.size() > 18
      || task_id.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::strtoll(task_id.c_str(), nullptr, 10);
}

} // namespace

std::map<std::pair<std::string, int64_t>, load_answers>
group_answers(const std::vector<v1::FeedResponse>& answers) {
  std::map<std::pair<std::string, int64_t>, load_answers> out;
  for (auto& a : answers) {
    auto id = load_id_of(a.task_id());
    if (!id)
      continue;
    auto& l = out[{a.seller_id(), *id}];
    if (a.has_end()) {
      l.summary = a.end();
      continue;
    }
    if (!a.has_result())
      continue;
    auto& r = a.result();
    if (!r.batch_id().empty()
        && std::find(l.batch_ids.begin(), l.batch_ids.end(), r.batch_id()) == l.batch_ids.end())
      l.batch_ids.push_back(r.batch_id());
    if (r.outcome() == v1::OfferResult::REJECTED) {
      persistence::feed_offer_error e;
      e.external_id = r.external_id();
      e.error_id = 1000; // the store's answer (the processor's own errors count from 0)
      e.level = "error";
      e.type = "validation";
      e.message = r.reason().empty() ? "rejected by the offer store" : r.reason();
      l.rejected.push_back(std::move(e));
    }
  }
  return out;
}

std::string merge_summary(const std::string& statistics, const v1::FeedSummary& summary) {
  v1::FeedLoadStatistics s;
  s.ParseFromString(statistics);
  s.set_added(summary.added());
  s.set_updated(summary.updated());
  s.set_unchanged(summary.unchanged());
  s.set_deleted(summary.deleted());
  s.set_made_manual(summary.made_manual());
  s.set_rejected(summary.rejected());
  return s.SerializeAsString();
}

} // namespace gost::feeds
