#pragma once
// A typed client of one entity type over gRPC (gost.v1.EntityService), for an application's
// own C++ code that talks to a gost node: events and replies are the type's own messages, a
// refusal is a status with the handler's code and message.
//
//   gost::entity_client<watchlist::watchlist> lists{channel};
//   auto r = lists.ask("buyer-1", add("offer-9"), "req-17");   // the reply, or the refusal
//   if (!r.ok()) std::cerr << r.status.error_message();          // "the watchlist holds 100 ..."
//   else use(r.reply.size());
//
// Every call takes a request id: give one to make a retry safe (a retried ask gets the first
// answer, a retried send stores nothing twice). Header-only: it needs only the generated
// EntityService stub and the type's messages.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include <grpcpp/grpcpp.h>

#include "gost/v1/entity_service.grpc.pb.h"

namespace gost {

template <class Type>
class entity_client {
public:
  using state_type = typename Type::state_type;
  using event_type = typename Type::event_type;
  /// What asks answer with (google.protobuf.Any for a type that declares no reply).
  using reply_type = std::conditional_t<std::is_void<typename Type::reply_type>::value,
                                        google::protobuf::Any, typename Type::reply_type>;

  template <class T>
  struct answer {
    grpc::Status status;
    T value{};
    int64_t version = 0; ///< the entity's version after the call (asks and gets)
    bool ok() const noexcept { return status.ok(); }
  };

  explicit entity_client(std::shared_ptr<grpc::ChannelInterface> channel,
                         std::chrono::milliseconds timeout = std::chrono::seconds{10})
    : stub_(v1::EntityService::NewStub(std::move(channel))), kind_(Type{}.kind()),
      timeout_(timeout) {}

  /// Handles `event` at once and answers the handler's reply (or its refusal as the status).
  answer<reply_type> ask(const std::string& id, const event_type& event,
                         const std::string& request_id = {}) {
    v1::AskEntityRequest req;
    req.set_kind(kind_);
    req.set_id(id);
    req.mutable_event()->PackFrom(event);
    req.set_request_id(request_id);
    v1::AskEntityResponse resp;
    grpc::ClientContext ctx;
    deadline(ctx);
    answer<reply_type> out;
    out.status = stub_->Ask(&ctx, req, &resp);
    if (!out.status.ok())
      return out;
    out.version = resp.version();
    if constexpr (std::is_same<reply_type, google::protobuf::Any>::value)
      out.value = resp.reply();
    else if (resp.has_reply() && !resp.reply().UnpackTo(&out.value))
      out.status = {grpc::StatusCode::INTERNAL, "the reply is a " + resp.reply().type_url()
                                                  + ", not a "
                                                  + reply_type::descriptor()->full_name()};
    return out;
  }

  /// Stores `event`, handled after `delay`; OK once it is committed.
  grpc::Status send(const std::string& id, const event_type& event,
                    const std::string& request_id = {}, std::chrono::milliseconds delay = {}) {
    v1::SendEventRequest req;
    req.set_kind(kind_);
    req.set_id(id);
    req.mutable_event()->PackFrom(event);
    req.set_request_id(request_id);
    if (delay.count() > 0) {
      req.mutable_delay()->set_seconds(delay.count() / 1000);
      req.mutable_delay()->set_nanos(static_cast<int32_t>(delay.count() % 1000) * 1'000'000);
    }
    v1::SendEventResponse resp;
    grpc::ClientContext ctx;
    deadline(ctx);
    return stub_->Send(&ctx, req, &resp);
  }

  /// The entity's committed state (default when it has none), with its version; `full`, when
  /// given, gets the whole response (lane, pending events, named timers).
  answer<state_type> get(const std::string& id, v1::GetEntityResponse* full = nullptr) {
    v1::GetEntityRequest req;
    req.set_kind(kind_);
    req.set_id(id);
    v1::GetEntityResponse resp;
    grpc::ClientContext ctx;
    deadline(ctx);
    answer<state_type> out;
    out.status = stub_->Get(&ctx, req, &resp);
    if (!out.status.ok())
      return out;
    out.version = resp.version();
    if (resp.has_state() && !resp.state().UnpackTo(&out.value))
      out.status = {grpc::StatusCode::INTERNAL, "the state is a " + resp.state().type_url()
                                                  + ", not a "
                                                  + state_type::descriptor()->full_name()};
    if (full != nullptr)
      *full = std::move(resp);
    return out;
  }

  const std::string& kind() const noexcept { return kind_; }

private:
  std::unique_ptr<v1::EntityService::Stub> stub_;
  std::string kind_;
  std::chrono::milliseconds timeout_;

  void deadline(grpc::ClientContext& ctx) const {
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
  }
};

} // namespace gost
