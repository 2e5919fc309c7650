#pragma once
// Clear errors for requests that cannot be decoded (issue 12): gRPC 1.51's callback API
// answers such a request itself with UNIMPLEMENTED and no message, and libprotobuf logs an
// error line for each (unthrottled). A service deriving from `guarded<Service>` instead of
// `Service::CallbackService` and guarding each method in its constructor answers
// INVALID_ARGUMENT naming the method, the message type and — where protobuf says — the field,
// and logs bad requests rate-limited with a count of the suppressed ones.
//
//   class offer_service final : public rpc::guarded<v1::OfferService> {
//     offer_service(...) {
//       guard("CreateOffer", &offer_service::CreateOffer);
//       ...
//       require_all_guarded();  // throws at start when a method was forgotten
//     }
//   };
//
// How: each method's stock handler is wrapped; its own parsing runs with libprotobuf's log
// captured on this thread, and a failed parse becomes the INVALID_ARGUMENT status and an
// error reactor instead of a call of the service method. It relies on gRPC's internal handler
// classes (the ones the generated code uses): check it on a gRPC upgrade
// (tests/e2e/gostd.e2etest.cpp sends raw bytes to every method).
//
// The same wrapper is the request edge's door (issue 27 §4): with a `call_gate` set
// (`set_gate`, node/start_grpc.cpp), every method — unary, server- or client-streaming — asks
// it first, and a refused call is answered with the gate's status without reaching the service.

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>

namespace gost::runtime::rpc {

/// Installs the libprotobuf log hook (once, before any server starts: not thread-safe).
void install_protobuf_log_hook();

/// Undecodable requests answered so far (for /metrics).
uint64_t undecodable_requests();

/// Decides, before a service method runs, whether the call may (api/call_gate.hpp).
class call_gate {
public:
  virtual ~call_gate() = default;
  /// OK: the call of `method` (`/gost.v1.OfferService/GetOffer`) runs; else its answer.
  virtual grpc::Status admit(const std::string& method, grpc::CallbackServerContext* ctx) const = 0;
};

namespace detail {

/// The protobuf log of the current thread's guarded parse; null outside one.
extern thread_local std::string* captured_log;

/// The status for a request of `method` that did not parse as `type`; logs it (rate-limited).
grpc::Status reject(const std::string& method, const std::string& type,
                    const grpc::Status& parse_status, const std::string& protobuf_log);

/// Set while the stock handler asks for a reactor on the error path.
extern thread_local const grpc::Status* pending_error;

template <class Reactor>
class error_reactor final : public Reactor {
public:
  explicit error_reactor(grpc::Status s) { this->Finish(std::move(s)); }
  void OnDone() override { delete this; }
};

template <class Inner>
class guarded_handler final : public grpc::internal::MethodHandler {
public:
  template <class Fn>
  guarded_handler(std::string method, std::string type, Fn&& fn)
    : method_(std::move(method)), type_(std::move(type)), inner_(std::forward<Fn>(fn)) {}

  void* Deserialize(grpc_call* call, grpc_byte_buffer* req, grpc::Status* status,
                    void** handler_data) override {
    std::string log;
    captured_log = &log;
    void* r = inner_.Deserialize(call, req, status, handler_data);
    captured_log = nullptr;
    if (!status->ok())
      *status = reject(method_, type_, *status, log);
    return r;
  }

  void RunHandler(const HandlerParameter& p) override {
    if (p.status.ok()) {
      inner_.RunHandler(p);
      return;
    }
    // The stock handler sets the call up; our reactor getter returns an error reactor.
    HandlerParameter ok(p.call, p.server_context, p.request, grpc::Status::OK, p.internal_data,
                        p.call_requester);
    pending_error = &p.status;
    inner_.RunHandler(ok);
    pending_error = nullptr;
  }

private:
  std::string method_;
  std::string type_;
  Inner inner_;
};

} // namespace detail

/// A generated service's callback base with every method's parsing guarded.
template <class Service>
class guarded : public Service::CallbackService {
protected:
  /// Guards a unary method (`&impl::Method`).
  template <class C, class Req, class Resp>
  void guard(const char* name,
             grpc::ServerUnaryReactor* (C::*fn)(grpc::CallbackServerContext*, const Req*, Resp*)) {
    auto* md = lookup(name, Req::descriptor(), Resp::descriptor(), false);
    using inner = grpc::internal::CallbackUnaryHandler<Req, Resp>;
    this->MarkMethodCallback(
      md->index(),
      new detail::guarded_handler<inner>(
        path(md), Req::descriptor()->full_name(),
        [this, fn, method = path(md)](grpc::CallbackServerContext* ctx, const Req* req,
                                      Resp* resp) -> grpc::ServerUnaryReactor* {
          if (detail::pending_error != nullptr)
            return new detail::error_reactor<grpc::ServerUnaryReactor>(*detail::pending_error);
          if (auto st = admit(method, ctx); !st.ok())
            return new detail::error_reactor<grpc::ServerUnaryReactor>(std::move(st));
          return (static_cast<C*>(this)->*fn)(ctx, req, resp);
        }));
  }

  /// Guards a server-streaming method.
  template <class C, class Req, class Resp>
  void guard(const char* name,
             grpc::ServerWriteReactor<Resp>* (C::*fn)(grpc::CallbackServerContext*, const Req*)) {
    auto* md = lookup(name, Req::descriptor(), Resp::descriptor(), true);
    using inner = grpc::internal::CallbackServerStreamingHandler<Req, Resp>;
    this->MarkMethodCallback(
      md->index(),
      new detail::guarded_handler<inner>(
        path(md), Req::descriptor()->full_name(),
        [this, fn, method = path(md)](grpc::CallbackServerContext* ctx,
                                      const Req* req) -> grpc::ServerWriteReactor<Resp>* {
          if (detail::pending_error != nullptr)
            return new detail::error_reactor<grpc::ServerWriteReactor<Resp>>(
              *detail::pending_error);
          if (auto st = admit(method, ctx); !st.ok())
            return new detail::error_reactor<grpc::ServerWriteReactor<Resp>>(std::move(st));
          return (static_cast<C*>(this)->*fn)(ctx, req);
        }));
  }

  /// Guards a client-streaming method. Nothing is parsed before its reactor starts: the
  /// method gets the call as it is (only the gate asked first), and each message is parsed by a
  /// read — one that does not decode ends the reads as the client's end would, so the method
  /// must be able to tell a complete stream (say, by a size the first message declares).
  template <class C, class Req, class Resp>
  void guard(const char* name,
             grpc::ServerReadReactor<Req>* (C::*fn)(grpc::CallbackServerContext*, Resp*)) {
    auto* md = lookup(name, Req::descriptor(), Resp::descriptor(), false, true);
    this->MarkMethodCallback(
      md->index(),
      new grpc::internal::CallbackClientStreamingHandler<Req, Resp>(
        [this, fn, method = path(md)](grpc::CallbackServerContext* ctx,
                                      Resp* resp) -> grpc::ServerReadReactor<Req>* {
          if (auto st = admit(method, ctx); !st.ok())
            return new detail::error_reactor<grpc::ServerReadReactor<Req>>(std::move(st));
          return (static_cast<C*>(this)->*fn)(ctx, resp);
        }));
  }

  /// Call last in the constructor: a method left unguarded is a bug (thrown at start).
  void require_all_guarded() const {
    auto* sd = descriptor();
    for (int i = 0; i < sd->method_count(); ++i)
      if (static_cast<size_t>(i) >= guarded_.size() || !guarded_[static_cast<size_t>(i)])
        throw std::logic_error("rpc::guarded: method not guarded: " + sd->method(i)->full_name());
  }

public:
  /// Every method asks `gate` before it runs (set before the server starts; null: no gate).
  void set_gate(std::shared_ptr<const call_gate> gate) { gate_ = std::move(gate); }

private:
  grpc::Status admit(const std::string& method, grpc::CallbackServerContext* ctx) const {
    return gate_ ? gate_->admit(method, ctx) : grpc::Status::OK;
  }

  static const google::protobuf::ServiceDescriptor* descriptor() {
    auto* sd = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      Service::service_full_name());
    if (sd == nullptr)
      throw std::logic_error(std::string{"rpc::guarded: no descriptor for "}
                             + Service::service_full_name());
    return sd;
  }

  static std::string path(const google::protobuf::MethodDescriptor* md) {
    return "/" + md->service()->full_name() + "/" + md->name();
  }

  /// grpc_cpp_plugin numbers methods in descriptor order: MethodDescriptor::index() is the
  /// index MarkMethodCallback takes.
  const google::protobuf::MethodDescriptor* lookup(const char* name,
                                                   const google::protobuf::Descriptor* in,
                                                   const google::protobuf::Descriptor* out,
                                                   bool server_streaming,
                                                   bool client_streaming = false) {
    auto* sd = descriptor();
    auto* md = sd->FindMethodByName(name);
    if (md == nullptr || md->input_type() != in || md->output_type() != out
        || md->client_streaming() != client_streaming || md->server_streaming() != server_streaming)
      throw std::logic_error(std::string{"rpc::guarded: no method "} + name + " of this signature");
    guarded_.resize(static_cast<size_t>(sd->method_count()));
    guarded_[static_cast<size_t>(md->index())] = true;
    return md;
  }

  std::vector<bool> guarded_;
  std::shared_ptr<const call_gate> gate_;
};

} // namespace gost::runtime::rpc
