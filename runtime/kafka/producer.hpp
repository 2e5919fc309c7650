#pragma once
// The Kafka kit's producer: idempotent (in order per partition, no duplicates from its own
// retries), delivery reports handed to the owner, failures counted, an idempotent producer
// in a fatal state replaced by a fresh one, and a flush that honours a stop. Used by the
// outbox relay (per-message reports) and the feed exchange (responses, flushed per request).
//
// Threads: one owner thread calls everything; delivery reports run on that thread, inside
// `poll`, `flush`, `produce` (while the queue is full) and the destructor. The exception: the
// `produce` calls that do not wait (with an opaque) may come from other threads while the
// owner polls (librdkafka's produce and poll are thread-safe; the image queue's askers do
// this); `replace_if_fatal` must then not run (the image queue holds its askers off first).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "gost/core/backoff.hpp"
#include "kafka/client.hpp"

namespace gost::runtime::kafka {

struct producer_options {
  /// Who produces, for errors and logs: "the outbox relay's producer".
  std::string role;
  /// The broker and the owner's own settings (`kafka.message_timeout`, ...). The producer
  /// adds enable.idempotence=true and linger.ms=5.
  std::vector<setting> settings;
  /// Called with the `opaque` given to `produce` and, when the message was not delivered,
  /// why (librdkafka's static text); null when the broker acknowledged it. `permanent` is
  /// null unless the broker refused the message for good (sending it again cannot help):
  /// then its class, `permanent_reason`.
  std::function<void(void* opaque, const char* error, const char* permanent)> on_delivery;
  /// How long the destructor waits for outstanding reports before it purges the rest.
  std::chrono::milliseconds close_wait{2000};
};

/// The class of an error no retry of the same message can cure, for logs and metric labels:
/// message_too_large (MSG_SIZE_TOO_LARGE: above the topic's max.message.bytes or the
/// producer's message.max.bytes), record_list_too_large, invalid_record, invalid_topic,
/// topic_not_authorized; null for any other error (retriable: broker away, timeouts, leader
/// moves, a topic not created yet).
const char* permanent_reason(rd_kafka_resp_err_t err);

class producer {
public:
  /// Errors: those of `make_client` (they name the config key).
  static caf::expected<producer> make(producer_options opts);

  producer(producer&&) noexcept;
  producer& operator=(producer&&) noexcept;
  /// Waits up to `close_wait` for outstanding reports; the reports of messages purged then
  /// still arrive (failed), so whatever `opaque` points to must outlive the producer.
  ~producer();

  /// Queues a message (copied). Errors: errc::overloaded when the local queue is full,
  /// errc::invalid_argument for a message larger than the producer's message.max.bytes
  /// (never accepted: permanent_reason message_too_large), errc::unavailable for any other
  /// refusal; each is also counted in `take_failures`.
  caf::error produce(const std::string& topic, std::string_view key, std::string_view value,
                     void* opaque = nullptr);

  /// A message header (name, value), as Kafka carries them (scheduled actions send their
  /// occurrence's `Idempotency-Key` this way).
  using header = std::pair<std::string, std::string>;

  /// Like the first `produce`, with message headers.
  caf::error produce(const std::string& topic, std::string_view key, std::string_view value,
                     const std::vector<header>& headers, void* opaque);

  /// Like `produce`, but while the local queue is full serves delivery reports and tries
  /// again, until `stop` (then errc::overloaded).
  caf::error produce(const std::string& topic, std::string_view key, std::string_view value,
                     const stop_signal& stop);

  /// Serves delivery reports, waiting up to `timeout` for one.
  void poll(std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

  /// Waits until every message produced so far has its delivery report, logging every second
  /// it waits. False when `stop` came first.
  bool flush(const stop_signal& stop);

  /// Messages refused or not delivered since the last call.
  uint64_t take_failures() noexcept;

  /// After failures: an idempotent producer in a fatal state delivers nothing more; this
  /// replaces it with a new one of the same settings (logged). Call only with no message
  /// outstanding (after `flush`, or when every report is in).
  void replace_if_fatal();

  /// Whether the producer is in a fatal state (it delivers nothing more: `replace_if_fatal`).
  bool fatal() const;

  /// Tests only: puts the producer in a fatal state as the broker would
  /// (librdkafka's rd_kafka_test_fatal_error).
  void test_fatal_error();

  struct impl;

private:
  explicit producer(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace gost::runtime::kafka
