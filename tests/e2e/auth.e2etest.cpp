// Who may call (issue 27 §4): the public gRPC API over TLS with certificates the test makes
// (openssl), callers by bearer token and by client certificate, each with a role; refusals
// UNAUTHENTICATED / PERMISSION_DENIED with what to fix, logged once per caller and reason,
// counted on /metrics; gostctl sends its --token on every call and speaks TLS with --tls-ca.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include "gost/testing/http.hpp"
#include "gost/testing/metrics.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"

#include "gost/v1/admin.grpc.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;
using testing::node_args;
using testing::read_ports;
using testing::temp_path;

namespace {

const std::string read_token = "read-0123456789abcdef0123";
const std::string write_token = "write-0123456789abcdef0123";
const std::string admin_token = "admin-0123456789abcdef0123";

std::string slurp(const std::string& path) {
  std::ifstream in{path};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void openssl(std::vector<std::string> args) {
  child_process p{"/usr/bin/openssl", std::move(args)};
  REQUIRE_MESSAGE(p.wait(60s) == 0, p.output());
}

/// A CA, the node's certificate (localhost, 127.0.0.1) and two client certificates
/// (CN billing.internal, which auth.cert_roles names, and CN stranger, which it does not), in a
/// temporary directory.
struct certificates {
  std::string dir = temp_path("gost-auth-certs");

  certificates() {
    REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
    openssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/ca.key", "-out",
             dir + "/ca.pem", "-subj", "/CN=gost-test-ca", "-days", "2"});
    issue("server", "localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1");
    issue("billing", "billing.internal", "extendedKeyUsage=clientAuth");
    issue("stranger", "stranger", "extendedKeyUsage=clientAuth");
  }
  ~certificates() { std::system(("rm -rf " + dir).c_str()); }

  void issue(const std::string& name, const std::string& cn, const std::string& ext) {
    std::ofstream{dir + "/" + name + ".ext"} << ext << "\n";
    openssl({"req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/" + name + ".key",
             "-out", dir + "/" + name + ".csr", "-subj", "/CN=" + cn});
    openssl({"x509", "-req", "-in", dir + "/" + name + ".csr", "-CA", dir + "/ca.pem", "-CAkey",
             dir + "/ca.key", "-CAcreateserial", "-out", dir + "/" + name + ".pem", "-days", "2",
             "-extfile", dir + "/" + name + ".ext"});
  }

  std::string file(const std::string& name) const { return dir + "/" + name; }
};

struct tls_node {
  explicit tls_node(const certificates& c)
    : port_file(temp_path("gostd-auth")),
      node(GOSTD_PATH,
           node_args(db, port_file,
                     {"--grpc.tls_cert=" + c.file("server.pem"),
                      "--grpc.tls_key=" + c.file("server.key"),
                      "--grpc.tls_client_ca=" + c.file("ca.pem"),
                      "--auth.tokens=ci:read:" + read_token + ",loader:write:" + write_token
                        + ",ops:admin:" + admin_token,
                      "--auth.cert_roles=billing.internal:write", "--http.listen=0.0.0.0:0"})),
      ca(slurp(c.file("ca.pem"))) {
    std::tie(port, http_port) = read_ports(node, port_file);
    addr = "localhost:" + std::to_string(port);
  }
  ~tls_node() {
    node.signal(SIGTERM);
    node.wait(30s);
    std::remove(port_file.c_str());
  }

  /// A TLS channel trusting the test CA; with a client certificate when `cert` is given.
  std::shared_ptr<grpc::Channel> channel(const certificates& c, const std::string& cert = "") {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ca;
    if (!cert.empty()) {
      o.pem_cert_chain = slurp(c.file(cert + ".pem"));
      o.pem_private_key = slurp(c.file(cert + ".key"));
    }
    return grpc::CreateChannel(addr, grpc::SslCredentials(o));
  }

  /// A GET on the admin HTTP listener (the whole response), with a bearer token when `token`
  /// is given.
  std::string http(const std::string& path, const std::string& token = "") {
    return testing::http_get(static_cast<uint16_t>(http_port), path,
                             token.empty() ? "" : "Authorization: Bearer " + token + "\r\n");
  }

  testing::temp_db db;
  std::string port_file;
  child_process node;
  std::string ca;
  int port = 0;
  int http_port = 0;
  std::string addr;
};

void with_token(grpc::ClientContext& ctx, const std::string& token) {
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  if (!token.empty())
    ctx.AddMetadata("authorization", "Bearer " + token);
}

grpc::Status create(v1::OfferService::Stub& s, const std::string& token,
                    std::string* id = nullptr) {
  v1::CreateOfferRequest req;
  req.mutable_offer()->set_seller_id("auth-seller");
  req.mutable_offer()->set_title("guarded offer");
  v1::CreateOfferResponse resp;
  grpc::ClientContext ctx;
  with_token(ctx, token);
  auto st = s.CreateOffer(&ctx, req, &resp);
  if (id != nullptr)
    *id = resp.offer().id();
  return st;
}

grpc::Status get(v1::OfferService::Stub& s, const std::string& token, const std::string& id) {
  v1::GetOfferRequest req;
  req.mutable_ref()->set_id(id);
  v1::GetOfferResponse resp;
  grpc::ClientContext ctx;
  with_token(ctx, token);
  return s.GetOffer(&ctx, req, &resp);
}

std::pair<int, std::string> gostctl(const tls_node& n, const certificates& c,
                                    std::vector<std::string> args) {
  std::vector<std::string> all{"--addr", n.addr, "--tls-ca", c.file("ca.pem")};
  all.insert(all.end(), args.begin(), args.end());
  child_process p{GOSTCTL_PATH, all};
  int rc = p.wait(60s);
  return {rc, p.output()};
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("auth: TLS only, a role per token and per client certificate, refusals counted") {
  certificates certs;
  tls_node n{certs};

  // TLS only: a plaintext client gets no answer from a service.
  {
    auto plain =
      v1::OfferService::NewStub(grpc::CreateChannel(n.addr, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1::GetOfferRequest req;
    req.mutable_ref()->set_id("anything");
    v1::GetOfferResponse resp;
    auto st = plain->GetOffer(&ctx, req, &resp);
    CHECK_MESSAGE(st.error_code() == grpc::StatusCode::UNAVAILABLE, st.error_message());
  }

  auto offers = v1::OfferService::NewStub(n.channel(certs));
  auto admin = v1::AdminService::NewStub(n.channel(certs));

  // No credential: UNAUTHENTICATED, saying what to send.
  auto none = get(*offers, "", "anything");
  CHECK(none.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK_MESSAGE(none.error_message().find("authorization: Bearer <token>") != std::string::npos,
                none.error_message());
  auto unknown = get(*offers, "no-such-token-0123456789", "anything");
  CHECK(unknown.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(unknown.error_message().find("no-such-token") == std::string::npos);

  // write creates; read may read it but not create (twice: logged once).
  std::string id;
  REQUIRE(create(*offers, write_token, &id).ok());
  CHECK(get(*offers, read_token, id).ok());
  for (int i = 0; i < 2; ++i) {
    auto denied = create(*offers, read_token);
    CHECK(denied.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK_MESSAGE(denied.error_message().find("caller `ci` has role read; it needs write")
                    != std::string::npos,
                  denied.error_message());
  }
  {
    v1::DrainNodeRequest req;
    v1::DrainNodeResponse resp;
    grpc::ClientContext ctx;
    with_token(ctx, read_token);
    CHECK(admin->UndrainNode(&ctx, req, &resp).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  }

  // gostctl sends --token on every call, over TLS (--tls-ca).
  {
    auto [rc, out] = gostctl(n, certs, {"get", id});
    CHECK(rc == 1);
    CHECK_MESSAGE(out.find("gostctl: 16: ") != std::string::npos, out); // UNAUTHENTICATED
  }
  {
    auto [rc, out] = gostctl(n, certs, {"--token", read_token, "get", id});
    CHECK_MESSAGE(rc == 0, out);
    CHECK_MESSAGE(out.find("guarded offer") != std::string::npos, out);
  }
  {
    auto [rc, out] = gostctl(n, certs, {"--token", write_token, "drain"});
    CHECK(rc == 1);
    CHECK_MESSAGE(out.find("gostctl: 7: ") != std::string::npos, out); // PERMISSION_DENIED
    CHECK_MESSAGE(out.find("it needs admin") != std::string::npos, out);
  }
  {
    // admin passes the gate: the only node may not drain (nobody would take its shards) ...
    auto [rc, out] = gostctl(n, certs, {"--token", admin_token, "drain"});
    CHECK(rc == 1);
    CHECK_MESSAGE(out.find("no other node is alive") != std::string::npos, out);
    // ... and undrains.
    auto [rc2, out2] = gostctl(n, certs, {"--token", admin_token, "undrain"});
    CHECK_MESSAGE(rc2 == 0, out2);
  }

  // A client certificate named in auth.cert_roles is a write caller; another one is unknown.
  {
    auto billing = v1::OfferService::NewStub(n.channel(certs, "billing"));
    CHECK(create(*billing, "").ok());
    auto billing_admin = v1::AdminService::NewStub(n.channel(certs, "billing"));
    v1::DrainNodeRequest req;
    v1::DrainNodeResponse resp;
    grpc::ClientContext ctx;
    with_token(ctx, "");
    auto st = billing_admin->UndrainNode(&ctx, req, &resp);
    CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK_MESSAGE(st.error_message().find("cert:billing.internal") != std::string::npos,
                  st.error_message());
    auto stranger = v1::OfferService::NewStub(n.channel(certs, "stranger"));
    auto st2 = get(*stranger, "", id);
    CHECK(st2.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK_MESSAGE(st2.error_message().find("auth.cert_roles") != std::string::npos,
                  st2.error_message());
  }

  // The admin HTTP listener is not on loopback: a token of role read for all but the probes.
  {
    auto bare = n.http("/metrics");
    CHECK_MESSAGE(testing::http_status(bare) == 401, bare);
    auto api = n.http("/api/stages");
    CHECK_MESSAGE(testing::http_status(api) == 401, api);
    CHECK_MESSAGE(api.find("{\"error\"") != std::string::npos, api);
    CHECK_MESSAGE(api.find("\"code\":\"UNAUTHENTICATED\"") != std::string::npos, api);
    auto wrong = n.http("/metrics", "no-such-token-0123456789");
    CHECK(testing::http_status(wrong) == 401);
    CHECK(testing::http_status(n.http("/healthz")) == 200);
    CHECK(testing::http_status(n.http("/api/stages", read_token)) == 200);
    // The page's live trace: the node calls its own AdminService.Trace (in process, as its own
    // read caller) while grpc.listen speaks TLS and needs a token.
    auto trace = n.http("/api/trace?offer=" + id + "&for=1", read_token);
    CHECK_MESSAGE(testing::http_status(trace) == 200, trace);
  }

  // Counted by reason on /metrics.
  auto m = n.http("/metrics", read_token);
  REQUIRE_MESSAGE(testing::http_status(m) == 200, m);
  // role: read create x2, read undrain, write drain (gostctl), billing undrain.
  CHECK(testing::metric_sample(m, "gost_auth_refused_total{reason=\"role\"}") == 5);
  // no_credential: the bare get, gostctl without a token, /metrics and /api/stages bare.
  CHECK(testing::metric_sample(m, "gost_auth_refused_total{reason=\"no_credential\"}") == 4);
  // unknown_token: one on gRPC, one on HTTP.
  CHECK(testing::metric_sample(m, "gost_auth_refused_total{reason=\"unknown_token\"}") == 2);
  CHECK(testing::metric_sample(m, "gost_auth_refused_total{reason=\"unknown_certificate\"}") == 1);
  CHECK(testing::metric_sample(
          m, "gost_grpc_requests_total{method=\"/gost.v1.OfferService/CreateOffer\",code="
             "\"PERMISSION_DENIED\"}")
        == 2);

  // Logged once per caller and reason, never with a token.
  auto log = n.node.output();
  CHECK_MESSAGE(count(log, "call refused caller=ci reason=role") == 1, log);
  CHECK(count(log, "call refused caller=loader reason=role") == 1);
  for (auto* t : {&read_token, &write_token, &admin_token})
    CHECK(log.find(*t) == std::string::npos);
}
