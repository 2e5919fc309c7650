#include "kafka/sync_sender.hpp"

#include "gost/core/errc.hpp"

namespace gost::runtime::kafka {

sync_sender::sync_sender(producer_options opts) : opts_(std::move(opts)) {
  opts_.on_delivery = [](void* opaque, const char* error, const char*) {
    *static_cast<std::string*>(opaque) = error == nullptr ? "" : error;
  };
}

sync_sender::~sync_sender() = default;

std::string sync_sender::send(const std::string& topic, std::string_view key,
                              std::string_view value,
                              const std::vector<producer::header>& headers) {
  std::lock_guard<std::mutex> g{m_};
  if (!producer_) {
    auto made = producer::make(opts_);
    if (!made)
      return error_message(made.error());
    producer_ = std::make_unique<producer>(std::move(*made));
  }
  std::string outcome = "not delivered";
  if (auto err = producer_->produce(topic, key, value, headers, &outcome))
    return error_message(err);
  if (!producer_->flush(stop_))
    return "stopped before the broker answered";
  if (!outcome.empty())
    producer_->replace_if_fatal();
  return outcome;
}

} // namespace gost::runtime::kafka
