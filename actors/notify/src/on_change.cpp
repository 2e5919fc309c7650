#include "gost/notify/on_change.hpp"

#include "gost/core/log.hpp"
#include "gost/notify/notify_rules.hpp"

namespace gost::notify {

namespace {

const auto lg = gost::log::get("offers"); // the stages' logger

class on_change_stage final : public stage {
public:
  explicit on_change_stage(on_change_options opts) : opts_(std::move(opts)) {}

  decision should_process(const v1::Offer&, const google::protobuf::Any*) const override {
    return decision::skip(); // it changes no offer: its work is the after_save hook
  }

  stage_result process(const v1::Offer&, const google::protobuf::Any*) const override { return {}; }

  /// Never asked: should_process always skips (interests only narrow when it is asked).
  std::vector<std::string> interests() const override { return {"status"}; }

  bool wants_after_save() const override { return true; }

  void after_save(const v1::OfferSaved& event) const override {
    auto n = notification_of(event);
    if (!n)
      return;
    // Both targets on every attempt: a retry after a failed webhook sends to Kafka again (the
    // same key and content), as a re-delivered event does.
    if (!opts_.topic.empty())
      to_kafka(*n);
    if (!opts_.webhook.empty())
      to_webhook(*n);
  }

private:
  void to_kafka(const v1::OfferNotification& n) const {
    auto error = opts_.send_kafka(opts_.topic, n.offer_id(), n.SerializeAsString(),
                                  {{"Idempotency-Key", n.key()}});
    if (!error.empty())
      failed(target::kafka, n, "topic " + opts_.topic + ": " + error);
    sent(target::kafka, n);
  }

  void to_webhook(const v1::OfferNotification& n) const {
    http::request r;
    r.method = "POST";
    r.url = opts_.webhook;
    r.headers = webhook_headers(n);
    r.body = to_json(n);
    r.deadline = opts_.timeout;
    r.allow_private = opts_.allow_private;
    auto resp = opts_.post(r);
    if (!resp.answered())
      failed(target::webhook, n,
             std::string{http::to_string(resp.error)} + ": " + resp.message
               + (resp.error == http::failure::refused_address
                    ? " (see stages.notify.allow_private)"
                    : ""));
    if (!resp.success())
      failed(target::webhook, n, "HTTP " + std::to_string(resp.status));
    sent(target::webhook, n);
  }

  void sent(target t, const v1::OfferNotification& n) const {
    opts_.stats->sent[static_cast<size_t>(t)][static_cast<size_t>(n.kind())].fetch_add(
      1, std::memory_order_relaxed);
    lg->debug("notification sent target={} kind={} offer={} version={} key={}", to_string(t),
              kind_name(n.kind()), n.offer_id(), n.version(), n.key());
  }

  /// Counts and throws: the after-save consumer retries the event until it is sent.
  [[noreturn]] void failed(target t, const v1::OfferNotification& n, const std::string& why) const {
    opts_.stats->failures[static_cast<size_t>(t)].fetch_add(1, std::memory_order_relaxed);
    throw unavailable_error("notify.on_change: " + std::string{to_string(t)} + " "
                            + kind_name(n.kind()) + " offer=" + n.offer_id()
                            + " version=" + std::to_string(n.version()) + " not sent: " + why);
  }

  on_change_options opts_;
};

} // namespace

const char* to_string(target t) {
  return t == target::kafka ? "kafka" : "webhook";
}

void add_notify_metrics(stats_registry& reg, std::shared_ptr<const notify_stats> stats) {
  reg.add([stats](metric_families& out) {
    const char* sent = "gost_notify_sent_total";
    const char* sent_help = "Offer notifications of notify.on_change acknowledged, by target "
                            "(kafka, webhook) and kind (published, expired, rejected); repeats "
                            "of a notification (at least once) count again.";
    const char* failed = "gost_notify_failures_total";
    const char* failed_help =
      "Failed sends of notify.on_change by target; each is retried until it is sent.";
    for (auto t : {target::kafka, target::webhook}) {
      auto ti = static_cast<size_t>(t);
      for (auto k : {v1::NOTIFICATION_KIND_PUBLISHED, v1::NOTIFICATION_KIND_EXPIRED,
                     v1::NOTIFICATION_KIND_REJECTED})
        out.add(sent, stat_kind::counter, sent_help,
                {{"target", to_string(t)}, {"kind", kind_name(k)}},
                static_cast<int64_t>(stats->sent[ti][static_cast<size_t>(k)].load()));
      out.add(failed, stat_kind::counter, failed_help, {{"target", to_string(t)}},
              static_cast<int64_t>(stats->failures[ti].load()));
    }
  });
}

std::shared_ptr<const stage> make_on_change_stage(on_change_options opts) {
  return std::make_shared<on_change_stage>(std::move(opts));
}

} // namespace gost::notify
