#include "node_link.hpp"

#include <fstream>
#include <map>
#include <sstream>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "gost/actors/protocol.hpp"
#include "gost/persistence/errors.hpp"
#include "gost/v1/node_service.grpc.pb.h"

namespace gost::runtime {

namespace {

using persistence::db_errc;

// -- errors across the link -------------------------------------------------------------------

void put_error(const caf::error& err, v1::ForwardResponse& resp) {
  auto* e = resp.mutable_error();
  e->set_category(err.category() == caf::atom("db") ? "db" : "system");
  e->set_code(err.code());
  e->set_message(persistence::error_message(err));
}

caf::error take_error(const v1::ForwardResponse::Error& e) {
  if (e.category() == "db")
    return persistence::make_db_error(static_cast<db_errc>(e.code()), e.message());
  return caf::make_error(static_cast<caf::sec>(e.code()), e.message());
}

/// A failed link call: the peer is unreachable (re-route) or did not answer in time.
caf::error link_error(const grpc::Status& st, const std::string& address) {
  switch (st.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return caf::make_error(caf::sec::request_timeout, "node " + address + " did not answer in time");
    case grpc::StatusCode::UNAVAILABLE:
      return caf::make_error(caf::sec::no_route_to_receiving_node,
                             "node " + address + " is unreachable: " + st.error_message());
    default: // a link that works but refused the call: not something re-routing fixes
      return persistence::make_db_error(db_errc::internal, "node " + address + " refused a forwarded call ("
                                                             + std::to_string(st.error_code()) + " "
                                                             + st.error_message() + ")");
  }
}

// -- the serving side -------------------------------------------------------------------------

class node_service final : public v1::NodeService::CallbackService {
public:
  node_service(caf::actor_system& sys, caf::actor gateway, std::chrono::milliseconds timeout)
    : sys_(sys), gateway_(std::move(gateway)), timeout_(timeout) {}

  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* ctx, const v1::ForwardRequest* req,
                                    v1::ForwardResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      ctx->deadline() - std::chrono::system_clock::now());
    caf::timespan timeout{std::max(std::chrono::milliseconds{1}, std::min(timeout_, left))};
    auto to_offer = [resp](offer_msg& m) { *resp->mutable_offer() = std::move(m.value); };
    switch (req->op_case()) {
      case v1::ForwardRequest::kCreate:
        relay<offer_msg>(reactor, resp, timeout,
                         caf::make_message(create_atom::value, offer_msg{req->create()}), to_offer);
        break;
      case v1::ForwardRequest::kGet:
        relay<offer_msg>(reactor, resp, timeout, caf::make_message(get_atom::value, req->get()),
                         to_offer);
        break;
      case v1::ForwardRequest::kUpdate:
        relay<offer_msg>(reactor, resp, timeout,
                         caf::make_message(update_atom::value, offer_msg{req->update().offer()},
                                           req->update().expected_version(), req->update().mask()),
                         to_offer);
        break;
      case v1::ForwardRequest::kDelete:
        relay<int64_t>(reactor, resp, timeout,
                       caf::make_message(delete_atom::value, req->delete_().offer_id(),
                                         req->delete_().expected_version()),
                       [resp](int64_t v) { resp->set_version(v); });
        break;
      case v1::ForwardRequest::kReadState:
        relay<state_read_msg>(reactor, resp, timeout,
                              caf::make_message(get_atom::value, state_atom::value,
                                                req->read_state().offer_id(),
                                                req->read_state().stage_id()),
                              [resp](state_read_msg& m) { *resp->mutable_state() = std::move(m.value); });
        break;
      case v1::ForwardRequest::kUpdateState: {
        auto& u = req->update_state();
        relay<state_update_msg>(reactor, resp, timeout,
                                caf::make_message(update_atom::value, state_atom::value, u.offer_id(),
                                                  u.stage_id(), u.state(), u.expected_version()),
                                [resp](state_update_msg& m) {
                                  *resp->mutable_state_update() = std::move(m.value);
                                });
        break;
      }
      case v1::ForwardRequest::kResidency: {
        auto gw = gateway_;
        auto id = req->residency();
        sys_.spawn([=](caf::event_based_actor* self) {
          self->request(gw, timeout, resident_atom::value, id)
            .then(
              [=](bool resident, int64_t mailbox) {
                resp->mutable_residency()->set_resident(resident);
                resp->mutable_residency()->set_mailbox(mailbox);
                reactor->Finish(grpc::Status::OK);
              },
              [=](caf::error& err) {
                put_error(err, *resp);
                reactor->Finish(grpc::Status::OK);
              });
        });
        break;
      }
      default:
        reactor->Finish({grpc::StatusCode::INVALID_ARGUMENT, "ForwardRequest without an op"});
    }
    return reactor;
  }

private:
  /// Asks the gateway and finishes the call with its answer (`fill`) or its error.
  template <class Reply, class Fill>
  void relay(grpc::ServerUnaryReactor* reactor, v1::ForwardResponse* resp, caf::timespan timeout,
             caf::message msg, Fill fill) {
    auto gw = gateway_;
    sys_.spawn([=](caf::event_based_actor* self) {
      self->request(gw, timeout, msg)
        .then(
          [=](Reply& r) mutable {
            fill(r);
            reactor->Finish(grpc::Status::OK);
          },
          [=](caf::error& err) {
            put_error(err, *resp);
            reactor->Finish(grpc::Status::OK);
          });
    });
  }

  caf::actor_system& sys_;
  caf::actor gateway_;
  std::chrono::milliseconds timeout_;
};

// -- the forwarding side ----------------------------------------------------------------------

using link_done_atom = caf::atom_constant<caf::atom("linkdone")>;

struct link_call {
  caf::response_promise rp;
  grpc::ClientContext ctx;
  v1::ForwardRequest req;
  v1::ForwardResponse resp;
  grpc::Status status;
};

struct link_state {
  static inline const char* name = "gost.peer_link";
  std::string address;
  std::shared_ptr<v1::NodeService::Stub> stub;
  std::chrono::milliseconds attempt{};
  uint64_t next_id = 0;
  /// Calls in flight. gRPC's callback shares each call (and the stub): when this actor stops
  /// with calls in flight, their contexts live on until gRPC is done with them.
  std::map<uint64_t, std::shared_ptr<link_call>> calls;
};

using link_ptr = caf::stateful_actor<link_state>*;

/// Sends `req` to the peer; the answer is delivered from this actor (gRPC's callback only
/// tells the actor that the call is done).
caf::response_promise forward(link_ptr self, v1::ForwardRequest req) {
  auto& st = self->state;
  auto id = st.next_id++;
  auto call = std::make_shared<link_call>();
  call->rp = self->make_response_promise();
  call->req = std::move(req);
  call->ctx.set_deadline(std::chrono::system_clock::now() + st.attempt);
  auto rp = call->rp;
  st.calls.emplace(id, call);
  caf::actor_addr me = self->address();
  auto stub = st.stub;
  stub->async()->Forward(&call->ctx, &call->req, &call->resp, [me, id, call, stub](grpc::Status s) {
    call->status = std::move(s);
    if (auto h = caf::actor_cast<caf::actor>(me))
      caf::anon_send(h, link_done_atom::value, id);
  });
  return rp;
}

void finish(link_ptr self, uint64_t id) {
  auto& st = self->state;
  auto i = st.calls.find(id);
  if (i == st.calls.end())
    return;
  auto call = std::move(i->second);
  st.calls.erase(i);
  auto& rp = call->rp;
  if (!call->status.ok()) {
    rp.deliver(link_error(call->status, st.address));
    return;
  }
  auto& r = call->resp;
  switch (r.result_case()) {
    case v1::ForwardResponse::kOffer: rp.deliver(offer_msg{std::move(*r.mutable_offer())}); break;
    case v1::ForwardResponse::kVersion: rp.deliver(r.version()); break;
    case v1::ForwardResponse::kState: rp.deliver(state_read_msg{std::move(*r.mutable_state())}); break;
    case v1::ForwardResponse::kStateUpdate:
      rp.deliver(state_update_msg{std::move(*r.mutable_state_update())});
      break;
    case v1::ForwardResponse::kError: rp.deliver(take_error(r.error())); break;
    case v1::ForwardResponse::kResidency:
      rp.deliver(r.residency().resident(), r.residency().mailbox());
      break;
    default:
      rp.deliver(persistence::make_db_error(db_errc::internal, "node " + st.address + " sent an empty answer"));
  }
}

caf::behavior link_fun(link_ptr self, std::string address, std::shared_ptr<grpc::Channel> channel,
                       std::chrono::milliseconds attempt) {
  auto& st = self->state;
  st.address = std::move(address);
  st.stub = std::shared_ptr<v1::NodeService::Stub>(v1::NodeService::NewStub(std::move(channel)));
  st.attempt = attempt;
  return {
    [=](create_atom, offer_msg& m) {
      v1::ForwardRequest req;
      *req.mutable_create() = std::move(m.value);
      return forward(self, std::move(req));
    },
    [=](get_atom, const std::string& id) {
      v1::ForwardRequest req;
      req.set_get(id);
      return forward(self, std::move(req));
    },
    [=](update_atom, offer_msg& m, int64_t expected, std::string& mask) {
      v1::ForwardRequest req;
      auto* u = req.mutable_update();
      *u->mutable_offer() = std::move(m.value);
      u->set_expected_version(expected);
      u->set_mask(std::move(mask));
      return forward(self, std::move(req));
    },
    [=](delete_atom, const std::string& id, int64_t expected) {
      v1::ForwardRequest req;
      req.mutable_delete_()->set_offer_id(id);
      req.mutable_delete_()->set_expected_version(expected);
      return forward(self, std::move(req));
    },
    [=](get_atom, state_atom, const std::string& id, const std::string& stage) {
      v1::ForwardRequest req;
      req.mutable_read_state()->set_offer_id(id);
      req.mutable_read_state()->set_stage_id(stage);
      return forward(self, std::move(req));
    },
    [=](update_atom, state_atom, const std::string& id, const std::string& stage,
        std::string& bytes, int64_t expected) {
      v1::ForwardRequest req;
      auto* u = req.mutable_update_state();
      u->set_offer_id(id);
      u->set_stage_id(stage);
      u->set_state(std::move(bytes));
      u->set_expected_version(expected);
      return forward(self, std::move(req));
    },
    [=](resident_atom, const std::string& id) {
      v1::ForwardRequest req;
      req.set_residency(id);
      return forward(self, std::move(req));
    },
    [=](link_done_atom, uint64_t id) { finish(self, id); },
  };
}

std::string read_file(const std::string& path, std::string& out) {
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

} // namespace

std::string link_security::load(const std::string& cert, const std::string& key,
                                const std::string& ca, link_security& out) {
  out = {};
  if (cert.empty() && key.empty() && ca.empty())
    return {};
  for (auto* p : {&cert, &key, &ca})
    if (p->empty())
      return "cluster.tls_cert, cluster.tls_key and cluster.tls_ca must be set together";
  for (auto [path, dst] : {std::pair<const std::string*, std::string*>{&cert, &out.cert_pem},
                           {&key, &out.key_pem},
                           {&ca, &out.ca_pem}})
    if (auto err = read_file(*path, *dst); !err.empty())
      return err;
  out.enabled = true;
  return {};
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

std::unique_ptr<grpc::Service> make_node_service(caf::actor_system& sys, caf::actor gateway,
                                                 std::chrono::milliseconds timeout) {
  return std::make_unique<node_service>(sys, std::move(gateway), timeout);
}

caf::actor spawn_peer_link(caf::actor_system& sys, const std::string& address,
                           const link_security& security, std::chrono::milliseconds attempt) {
  grpc::ChannelArguments args;
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
