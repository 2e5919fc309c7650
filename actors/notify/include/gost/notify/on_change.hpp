#pragma once
// The built-in `notify.on_change` stage (issue 25 item 4, seed 000 "Сайд эффекты в стейджах"):
// a side effect done right. It changes no offer (`should_process` always skips); its
// after_save hook, fed at least once and in version order per offer from the after-save topic,
// sends a notification (notify_rules.hpp) when a saved version published, expired or rejected
// the offer: to the Kafka topic `stages.notify.topic` and, when set, in a POST to
// `stages.notify.webhook`, both carrying the key `<offer_id>:<version>`. A failed send throws
// gost::unavailable_error: the after-save consumer retries the event with back-off until it
// is sent (it never gives up on it) and stores the event's offset only then, so a crash or a
// stop re-delivers it. The receiver de-duplicates by the key (docs/notifications.md).

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gost/core/http_client.hpp"
#include "gost/core/stats_registry.hpp"
#include "gost/offers/stage.hpp"
#include "gost/v1/notify.pb.h"

namespace gost::notify {

/// The id the stage is registered under (stored in queues and states: never rename).
inline constexpr const char* on_change_stage_id = "notify.on_change";

enum class target : uint8_t { kafka = 0, webhook = 1 };
const char* to_string(target t);

/// What the stage counts, as `gost_notify_*` on /metrics (add_notify_metrics).
struct notify_stats {
  /// Notifications sent (acknowledged), by target and kind (published, expired, rejected).
  std::array<std::array<std::atomic<uint64_t>, 4>, 2> sent{};
  /// Failed sends (each one retried), by target.
  std::array<std::atomic<uint64_t>, 2> failures{};
};

void add_notify_metrics(stats_registry& reg, std::shared_ptr<const notify_stats> stats);

/// Sends one message to a Kafka topic and waits for the broker's acknowledgement: "" when
/// acknowledged, else why not. Given by the node (runtime/kafka/sync_sender.hpp).
using kafka_send = std::function<std::string(
  const std::string& topic, const std::string& key, const std::string& value,
  const std::vector<std::pair<std::string, std::string>>& headers)>;

struct on_change_options {
  /// `stages.notify.topic`; empty: no Kafka notification.
  std::string topic;
  kafka_send send_kafka;
  /// `stages.notify.webhook`; empty: no webhook.
  std::string webhook;
  /// `stages.notify.timeout`: the webhook request's deadline, connection included.
  std::chrono::milliseconds timeout{std::chrono::seconds{10}};
  /// `stages.notify.allow_private`: the webhook may be on a loopback or private address.
  bool allow_private = false;
  /// The outbound call (tests may fake it); http::perform by default.
  std::function<http::response(const http::request&)> post = http::perform;
  std::shared_ptr<notify_stats> stats = std::make_shared<notify_stats>();
};

std::shared_ptr<const stage> make_on_change_stage(on_change_options opts);

} // namespace gost::notify
