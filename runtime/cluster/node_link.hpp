#pragma once
// Node-to-node forwarding over gRPC (docs/cluster.md): each node serves gost.v1.NodeService on
// its `caf.listen` address and answers forwarded offer operations through its gateway actor;
// a peer link is a local actor that speaks the gateway's protocol and forwards every message
// to one peer node. With `cluster.tls_*` set, both sides use mutual TLS: a peer without a
// certificate signed by the configured CA is refused, and there is no fallback to plaintext.

#include <chrono>
#include <memory>
#include <string>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "cluster/link_table.hpp"
#include "cluster/router.hpp"
#include "gost/config/node_config.hpp"

namespace grpc {
class Service;
class ServerCredentials;
class ChannelCredentials;
} // namespace grpc

namespace gost {
class call_hub;
}

namespace gost::runtime {

/// Reads the PEM file `path` into `out`; the problem (cannot read, empty) or an empty string.
/// Also for `grpc.tls_*` (node/start_grpc.cpp).
std::string read_pem_file(const std::string& path, std::string& out);

/// Credentials of node links: mutual TLS when `enabled`, else plaintext (loopback or a
/// private network only).
struct link_security {
  bool enabled = false;
  std::string cert_pem; ///< this node's certificate chain
  std::string key_pem;  ///< its private key
  std::string ca_pem;   ///< the CA that signs every node's certificate

  /// Reads the three PEM files of `cluster.tls_*` (plaintext when they are not set); the
  /// error names the file and the key that failed. That the three are set together is
  /// config::validate()'s rule, checked before the node starts.
  static caf::expected<link_security> load(const config::cluster_config& cfg);

  std::shared_ptr<grpc::ServerCredentials> server_credentials() const;
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials() const;
};

struct trace_context;

/// The NodeService of this node: a forwarded request goes to the local shard of its offer
/// (through `hub`), or is answered errc::moved when the shard is not here; other nodes' traces
/// of offers this node owns are served from `traces` (cluster/trace_stream.hpp).
std::unique_ptr<grpc::Service> make_node_service(call_hub& hub, std::shared_ptr<router> r,
                                                 std::chrono::milliseconds timeout,
                                                 std::shared_ptr<trace_context> traces);

/// A local actor forwarding every offer and entity operation to the node at `address`
/// (host:port). Each forwarded call gets `attempt` before it fails with a timeout (and the
/// caller re-routes). Answers up to `max_message_bytes` are taken (the serving side sets the
/// same on its server).
peer_link_ops spawn_peer_link(caf::actor_system& sys, const std::string& address,
                              const link_security& security, std::chrono::milliseconds attempt,
                              int max_message_bytes);

} // namespace gost::runtime
