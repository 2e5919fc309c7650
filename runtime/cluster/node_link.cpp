#include "cluster/node_link.hpp"

#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "cluster/link_table.hpp"
#include "cluster/router.hpp"
#include "cluster/trace_stream.hpp"
#include "gost/core/call_hub.hpp"
#include "gost/core/errc.hpp"
#include "gost/core/routing.hpp"
#include "gost/internal/v1/node_service.grpc.pb.h"
#include "rpc/parse_guard.hpp"

CAF_ADD_ATOM(gost_runtime, gost::runtime, link_done_atom, "linkdone")

namespace gost::runtime {

namespace {

using persistence::db_errc;

// -- errors across the link -------------------------------------------------------------------

void put_error(const caf::error& err, internal::v1::ForwardResponse& resp) {
  auto* e = resp.mutable_error();
  e->set_category(err.category() == caf::atom("db")     ? "db"
                  : err.category() == caf::atom("gost") ? "gost"
                                                        : "system");
  e->set_code(err.code());
  e->set_message(persistence::error_message(err));
}

caf::error take_error(const internal::v1::ForwardResponse::Error& e) {
  if (e.category() == "db")
    return persistence::make_db_error(static_cast<db_errc>(e.code()), e.message());
  if (e.category() == "gost")
    return make_error(static_cast<errc>(e.code()), e.message());
  return caf::make_error(static_cast<caf::sec>(e.code()), e.message());
}

/// A failed link call: the peer was not reached (re-route), or it may have been and did not
/// answer in time. gRPC answers UNAVAILABLE both when it found no connection to send the call
/// on ("failed to connect to all addresses": nothing left this node) and when the connection
/// broke with the call on it (the peer may have carried it out). Only the first is refused as
/// a move: the caller routes again until its deadline, then answers UNAVAILABLE, safe to retry
/// (unless an earlier attempt was sent). The second is an attempt without an answer, like a
/// timeout: asked again with the same request id, answered "outcome unknown" if time runs out.
/// (Before, both were no_route_to_receiving_node, which reached the client as INTERNAL once the
/// deadline came: tests/e2e/netfault.e2etest.cpp, the node links cut.)
caf::error link_error(const grpc::Status& st, const std::string& address) {
  switch (st.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return caf::make_error(caf::sec::request_timeout,
                             "node " + address + " did not answer in time");
    case grpc::StatusCode::UNAVAILABLE:
      if (st.error_message().find("failed to connect to all addresses") != std::string::npos)
        return make_error(errc::moved, "node " + address + " is unreachable (nothing was sent): "
                                         + st.error_message());
      return caf::make_error(caf::sec::request_timeout,
                             "the link to node " + address
                               + " broke with the call on it: " + st.error_message());
    default: // a link that works but refused the call: not something re-routing fixes
      return make_error(errc::internal, "node " + address + " refused a forwarded call ("
                                          + std::to_string(st.error_code()) + " "
                                          + st.error_message() + ")");
  }
}

// -- the serving side -------------------------------------------------------------------------

class node_service final : public rpc::guarded<internal::v1::NodeService> {
public:
  node_service(call_hub& hub, std::shared_ptr<router> r, std::chrono::milliseconds timeout,
               std::shared_ptr<trace_context> traces)
    : hub_(hub), router_(std::move(r)), timeout_(timeout), traces_(std::move(traces)) {
    guard("Forward", &node_service::Forward);
    guard("Trace", &node_service::Trace);
    require_all_guarded();
  }

  /// Another node's client traces an offer (or entity) whose shard is here: this node's events of
  /// it, until the shard leaves (the stream ends OK; the caller finds the new owner).
  grpc::ServerWriteReactor<v1::TraceEvent>* Trace(grpc::CallbackServerContext*,
                                                  const v1::TraceRequest* req) override {
    auto events = req->max_events() > 0 ? static_cast<uint32_t>(req->max_events()) : 1000u;
    auto ms = req->for_ms() > 0 ? req->for_ms() : int64_t{60'000};
    if (req->offer_id().empty() && req->entity_key().empty()) {
      struct bad final : grpc::ServerWriteReactor<v1::TraceEvent> {
        bad() {
          Finish({grpc::StatusCode::INVALID_ARGUMENT, "offer_id or entity_key is required"});
        }
        void OnDone() override { delete this; }
      };
      return new bad;
    }
    return start_trace(traces_, *req, false, events, ms);
  }

  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* ctx,
                                    const internal::v1::ForwardRequest* req,
                                    internal::v1::ForwardResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      ctx->deadline() - std::chrono::system_clock::now());
    caf::timespan timeout{std::max(std::chrono::milliseconds{1}, std::min(timeout_, left))};
    bool known = link_table::decode(*req, [&](auto&&... xs) {
      serve(reactor, resp, timeout, std::forward<decltype(xs)>(xs)...);
    });
    if (!known)
      reactor->Finish({grpc::StatusCode::INVALID_ARGUMENT, "ForwardRequest without an op"});
    return reactor;
  }

private:
  /// Asks the local supervisor of the operation's shard, of the kind that takes the operation
  /// and owns its entity (cluster/kinds.hpp; the kit's inspection is every kind's), and
  /// finishes the call with its answer or its error (a shard that is not here answers
  /// errc::moved: the sender routes again; so does one whose lease this node cannot confirm
  /// now).
  template <class... Ts>
  void serve(grpc::ServerUnaryReactor* reactor, internal::v1::ForwardResponse* resp,
             caf::timespan timeout, Ts... xs) {
    const auto& id = entity_id_of(xs...);
    auto shard = router_->shard_of(id);
    auto msg = caf::make_message(xs...);
    auto& kinds = router_->kinds();
    for (size_t k = 0; k < kinds.size(); ++k) {
      auto& kind = kinds[k];
      if (!kind.forwarded || !kind.accepts(msg) || (kind.owns && !kind.owns(id)))
        continue;
      if (auto local = router_->local_actor(k, shard)) {
        // Owned here, but served only while the lease is confirmed (a node cut from the
        // database may have lost it already): else refused as moved (nothing done; the sender
        // routes again until its deadline), never a stale answer.
        caf::error refused;
        if (!router_->confirmed_now(shard, &refused)) {
          put_error(make_error(errc::moved, error_message(refused)), *resp);
          reactor->Finish(grpc::Status::OK);
          return;
        }
        ask(reactor, resp, timeout, std::move(local), xs...);
        return;
      }
      put_error(make_error(errc::moved, "shard " + std::to_string(shard) + " is not on this node"),
                *resp);
      reactor->Finish(grpc::Status::OK);
      return;
    }
    put_error(make_error(errc::not_found, "no kind on this node takes the forwarded call for " + id
                                            + "; register the same kinds on every node"),
              *resp);
    reactor->Finish(grpc::Status::OK);
  }

  /// `target` is untyped (the kind was found at run time); the reply is typed by the link's
  /// interface, which carries the operation.
  template <class... Ts>
  void ask(grpc::ServerUnaryReactor* reactor, internal::v1::ForwardResponse* resp,
           caf::timespan timeout, caf::actor target, Ts... xs) {
    hub_.run([=](caf::event_based_actor* self) {
      self->request(target, timeout, xs...)
        .then(on_reply<peer_link_ops, Ts...>([=](auto&... ys) {
                link_table::encode_reply(*resp, ys...);
                if (resp->has_residency())
                  resp->mutable_residency()->set_node(traces_->node_id);
                reactor->Finish(grpc::Status::OK);
              }),
              [=](caf::error& err) {
                put_error(err, *resp);
                reactor->Finish(grpc::Status::OK);
              });
    });
  }

  call_hub& hub_;
  std::shared_ptr<router> router_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<trace_context> traces_;
};

// -- the forwarding side ----------------------------------------------------------------------

/// One forwarded call: gRPC's callback shares it (and the stub), so a link that stops with
/// calls in flight frees nothing gRPC still uses.
struct link_call {
  std::function<void(link_call&)> finish; ///< delivers the answer to the requester's promise
  grpc::ClientContext ctx;
  internal::v1::ForwardRequest req;
  internal::v1::ForwardResponse resp;
  grpc::Status status;
};

struct link_state {
  static inline const char* name = "gost.peer_link";
  std::string address;
  std::shared_ptr<internal::v1::NodeService::Stub> stub;
  std::chrono::milliseconds attempt{};
  uint64_t next_id = 0;
  std::map<uint64_t, std::shared_ptr<link_call>> calls;
};

using link_actor = peer_link_ops::extend<caf::reacts_to<link_done_atom, uint64_t>>;
using link_ptr = link_actor::stateful_pointer<link_state>;

/// Sends one operation to the peer; the answer is delivered from this actor (gRPC's callback
/// only tells the actor that the call is done).
template <class... Outs, class... Ts>
caf::typed_response_promise<Outs...> forward(link_ptr self, reply_tag<Outs...>, Ts&... xs) {
  auto& st = self->state;
  auto id = st.next_id++;
  auto call = std::make_shared<link_call>();
  link_table::encode(call->req, xs...);
  auto rp = self->make_response_promise<Outs...>();
  call->finish = [rp, address = st.address](link_call& c) mutable {
    if (!c.status.ok()) {
      rp.deliver(link_error(c.status, address));
    } else if (c.resp.has_error()) {
      rp.deliver(take_error(c.resp.error()));
    } else if (!link_table::deliver(c.resp, rp)) {
      rp.deliver(make_error(errc::internal, "node " + address + " sent an answer of another kind"));
    }
  };
  call->ctx.set_deadline(std::chrono::system_clock::now() + st.attempt);
  st.calls.emplace(id, call);
  caf::actor_addr me = self->address();
  auto stub = st.stub;
  stub->async()->Forward(&call->ctx, &call->req, &call->resp, [me, id, call, stub](grpc::Status s) {
    call->status = std::move(s);
    if (auto h = caf::actor_cast<link_actor>(me))
      caf::anon_send(h, link_done_atom_v, id);
  });
  return rp;
}

link_actor::behavior_type link_fun(link_ptr self, std::string address,
                                   std::shared_ptr<grpc::Channel> channel,
                                   std::chrono::milliseconds attempt) {
  auto& st = self->state;
  st.address = std::move(address);
  st.stub = std::shared_ptr<internal::v1::NodeService::Stub>(
    internal::v1::NodeService::NewStub(std::move(channel)));
  st.attempt = attempt;
  return make_behavior<link_actor::behavior_type>(
    make_handlers<peer_link_ops::signatures>(
      [=](auto tag, auto&... xs) ->
      typename decltype(tag)::result_type { return forward(self, tag, xs...); }),
    [=](link_done_atom, uint64_t id) {
      auto& calls = self->state.calls;
      auto i = calls.find(id);
      if (i == calls.end())
        return;
      auto call = std::move(i->second);
      calls.erase(i);
      call->finish(*call);
    });
}

} // namespace

std::string read_pem_file(const std::string& path, std::string& out) {
  std::ifstream in{path};
  if (!in)
    return "cannot read " + path;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  if (out.empty())
    return path + " is empty";
  return {};
}

caf::expected<link_security> link_security::load(const config::cluster_config& cfg) {
  link_security out;
  if (cfg.tls_cert.empty()) // validate() holds all three set or none
    return out;
  for (auto [key, path, dst] : {std::tuple{"cluster.tls_cert", &cfg.tls_cert, &out.cert_pem},
                                std::tuple{"cluster.tls_key", &cfg.tls_key, &out.key_pem},
                                std::tuple{"cluster.tls_ca", &cfg.tls_ca, &out.ca_pem}})
    if (auto err = read_pem_file(*path, *dst); !err.empty())
      return make_error(errc::invalid_argument,
                        "cluster TLS: " + err + "; check `" + key
                          + "` (cluster.tls_cert, "
                            "cluster.tls_key and cluster.tls_ca name PEM files)");
  out.enabled = true;
  return out;
}

std::shared_ptr<grpc::ServerCredentials> link_security::server_credentials() const {
  if (!enabled)
    return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o{GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY};
  o.pem_root_certs = ca_pem;
  o.pem_key_cert_pairs.push_back({key_pem, cert_pem});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::ChannelCredentials> link_security::channel_credentials() const {
  if (!enabled)
    return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca_pem;
  o.pem_private_key = key_pem;
  o.pem_cert_chain = cert_pem;
  return grpc::SslCredentials(o);
}

std::unique_ptr<grpc::Service> make_node_service(call_hub& hub, std::shared_ptr<router> r,
                                                 std::chrono::milliseconds timeout,
                                                 std::shared_ptr<trace_context> traces) {
  return std::make_unique<node_service>(hub, std::move(r), timeout, std::move(traces));
}

peer_link_ops spawn_peer_link(caf::actor_system& sys, const std::string& address,
                              const link_security& security, std::chrono::milliseconds attempt,
                              int max_message_bytes) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(max_message_bytes);
  args.SetMaxSendMessageSize(max_message_bytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Certificates name nodes by host; a node reached by IP checks the name "gost-node"
  // (docs/cluster.md: every node certificate carries it as a subject alternative name).
  if (security.enabled)
    args.SetSslTargetNameOverride("gost-node");
  auto channel = grpc::CreateCustomChannel(address, security.channel_credentials(), args);
  return sys.spawn(link_fun, address, std::move(channel), attempt);
}

} // namespace gost::runtime
