#pragma once
// The feed processor's reading of the offer store's answers (seed 004 "Взаимодействие с
// GOST": "Шедулер FeedProcessor'a читает ответы и сохраняет их в таблицы offer_errors,
// feed_statistics и offer_batches"): a batch of FeedResponse messages grouped per load — the
// batches answered, an error row per offer the store rejected, and the terminal summary —
// and the summary merged into the load's statistics. Plain code: the node's Kafka loop
// (runtime/kafka/feed_answers.cpp) stores what this returns.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gost/persistence/feeds/feed_loads.hpp"
#include "gost/v1/feed_exchange.pb.h"

namespace gost::feeds {

/// What a batch of answers says of one load.
struct load_answers {
  std::vector<std::string> batch_ids; ///< distinct, in arrival order
  std::vector<persistence::feed_offer_error> rejected;
  std::optional<v1::FeedSummary> summary; ///< the terminal message, when it came
};

/// Groups answers by (seller, load id). Answers whose task id is not a load id of ours (not a
/// number) are left out: another processor shares the topic.
std::map<std::pair<std::string, int64_t>, load_answers>
group_answers(const std::vector<v1::FeedResponse>& answers);

/// The load's statistics (serialized gost.v1.FeedLoadStatistics, the processor's counts) with
/// the offer store's summary added.
std::string merge_summary(const std::string& statistics, const v1::FeedSummary& summary);

} // namespace gost::feeds
