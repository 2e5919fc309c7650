#include "kafka/producer.hpp"

#include <atomic>

#include "gost/core/errc.hpp"
#include "gost/core/log.hpp"

namespace gost::runtime::kafka {

namespace {

const auto lg = gost::log::get("kafka");

} // namespace

const char* permanent_reason(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE: return "message_too_large";
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE: return "record_list_too_large";
    case RD_KAFKA_RESP_ERR_INVALID_RECORD: return "invalid_record";
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION: return "invalid_topic";
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED: return "topic_not_authorized";
    default: return nullptr;
  }
}

struct producer::impl {
  producer_options opts;
  client_spec spec;
  std::atomic<uint64_t> failures{0};
  // Declared last: destroyed first, while `opts.on_delivery` (which the reports of purged
  // messages still reach) lives.
  client_ptr client;

  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<impl*>(opaque);
    bool failed = m->err != RD_KAFKA_RESP_ERR_NO_ERROR;
    if (failed)
      self->failures.fetch_add(1, std::memory_order_relaxed);
    if (self->opts.on_delivery)
      self->opts.on_delivery(m->_private, failed ? rd_kafka_err2str(m->err) : nullptr,
                             failed ? permanent_reason(m->err) : nullptr);
  }

  caf::expected<client_ptr> make() {
    return make_client(spec, [this](rd_kafka_conf_t* conf) {
      rd_kafka_conf_set_opaque(conf, this);
      rd_kafka_conf_set_dr_msg_cb(conf, &impl::on_delivery);
    });
  }

  rd_kafka_resp_err_t produce(const std::string& topic, std::string_view key,
                              std::string_view value, void* opaque,
                              const std::vector<header>* headers = nullptr) {
    if (headers == nullptr || headers->empty())
      return rd_kafka_producev(
        client.get(), RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key.data(), key.size()),
        RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
    auto* hs = rd_kafka_headers_new(headers->size());
    for (auto& [name, v] : *headers)
      rd_kafka_header_add(hs, name.data(), static_cast<ssize_t>(name.size()), v.data(),
                          static_cast<ssize_t>(v.size()));
    auto err = rd_kafka_producev(client.get(), RD_KAFKA_V_TOPIC(topic.c_str()),
                                 RD_KAFKA_V_KEY(key.data(), key.size()),
                                 RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                 RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_HEADERS(hs), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
      rd_kafka_headers_destroy(hs); // only a queued message takes them over
    return err;
  }

  caf::error refused(rd_kafka_resp_err_t err) {
    failures.fetch_add(1, std::memory_order_relaxed);
    if (err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
      return make_error(errc::invalid_argument,
                        spec.role + " refused a message for good: " + rd_kafka_err2str(err));
    return make_error(err == RD_KAFKA_RESP_ERR__QUEUE_FULL ? errc::overloaded : errc::unavailable,
                      spec.role + " refused a message: " + rd_kafka_err2str(err));
  }
};

caf::expected<producer> producer::make(producer_options opts) {
  auto p = std::make_unique<impl>();
  p->spec.type = RD_KAFKA_PRODUCER;
  p->spec.role = opts.role;
  p->spec.settings = opts.settings;
  // gost's own choices: no duplicates or reordering from the producer's retries; a few
  // milliseconds of batching.
  p->spec.settings.push_back({"enable.idempotence", "true", ""});
  p->spec.settings.push_back({"linger.ms", "5", ""});
  p->opts = std::move(opts);
  auto client = p->make();
  if (!client)
    return std::move(client.error());
  p->client = std::move(*client);
  return producer{std::move(p)};
}

producer::producer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

producer::producer(producer&&) noexcept = default;

producer& producer::operator=(producer&&) noexcept = default;

producer::~producer() {
  if (impl_ && impl_->client)
    rd_kafka_flush(impl_->client.get(), static_cast<int>(impl_->opts.close_wait.count()));
}

caf::error producer::produce(const std::string& topic, std::string_view key, std::string_view value,
                             void* opaque) {
  auto err = impl_->produce(topic, key, value, opaque);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
    return {};
  return impl_->refused(err);
}

caf::error producer::produce(const std::string& topic, std::string_view key, std::string_view value,
                             const std::vector<header>& headers, void* opaque) {
  auto err = impl_->produce(topic, key, value, opaque, &headers);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
    return {};
  return impl_->refused(err);
}

caf::error producer::produce(const std::string& topic, std::string_view key, std::string_view value,
                             const stop_signal& stop) {
  for (;;) {
    auto err = impl_->produce(topic, key, value, nullptr);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
      return {};
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || stop.requested())
      return impl_->refused(err);
    rd_kafka_poll(impl_->client.get(), 100); // queue full: let deliveries drain
  }
}

void producer::poll(std::chrono::milliseconds timeout) {
  rd_kafka_poll(impl_->client.get(), static_cast<int>(timeout.count()));
}

bool producer::flush(const stop_signal& stop) {
  while (!stop.requested()) {
    if (rd_kafka_flush(impl_->client.get(), 1000) == RD_KAFKA_RESP_ERR_NO_ERROR)
      return true;
    lg->warn("{} waits for the broker to acknowledge messages", impl_->spec.role);
  }
  return false;
}

bool producer::fatal() const {
  char reason[512];
  return rd_kafka_fatal_error(impl_->client.get(), reason, sizeof(reason))
         != RD_KAFKA_RESP_ERR_NO_ERROR;
}

void producer::test_fatal_error() {
  rd_kafka_test_fatal_error(impl_->client.get(), RD_KAFKA_RESP_ERR__FATAL,
                            "a fatal error made by a test");
}

uint64_t producer::take_failures() noexcept {
  return impl_->failures.exchange(0, std::memory_order_relaxed);
}

void producer::replace_if_fatal() {
  char reason[512];
  if (rd_kafka_fatal_error(impl_->client.get(), reason, sizeof(reason))
      == RD_KAFKA_RESP_ERR_NO_ERROR)
    return;
  lg->error("{} failed fatally reason={}; starting a new one", impl_->spec.role, reason);
  auto fresh = impl_->make();
  if (!fresh) {
    lg->error("{} not replaced error={}; trying again after the next failure", impl_->spec.role,
              error_message(fresh.error()));
    return;
  }
  impl_->client = std::move(*fresh);
}

} // namespace gost::runtime::kafka
