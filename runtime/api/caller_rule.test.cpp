#include <doctest/doctest.h>

#include <google/protobuf/descriptor.h>

#include "api/call_gate.hpp"
#include "api/caller_rule.hpp"
#include "gost/v1/admin.grpc.pb.h"
#include "gost/v1/entity_service.grpc.pb.h"
#include "gost/v1/feed_service.grpc.pb.h"
#include "gost/v1/images.grpc.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/scheduled_actions.grpc.pb.h"
#include "gost/v1/state_service.grpc.pb.h"
#include "gost/v1/task_service.grpc.pb.h"

using namespace gost::runtime;

namespace {

const std::string reader = "r-0123456789abcdef";
const std::string writer = "w-0123456789abcdef";
const std::string boss = "a-0123456789abcdef";

caller_rule with_roles(std::string console_token = {}) {
  caller_rule::settings s;
  auto err = caller_rule::parse_tokens("ci:read:" + reader + ", loader:write:" + writer
                                         + "\n# ops\nops:admin:" + boss,
                                       "auth.tokens", s.tokens);
  REQUIRE(err.empty());
  REQUIRE(caller_rule::parse_cert_roles("billing.internal:write", "auth.cert_roles", s.cert_roles)
            .empty());
  s.console_token = std::move(console_token);
  s.loopback = false;
  s.listen = "0.0.0.0:50051";
  return caller_rule{std::move(s)};
}

caller_facts bearer(const std::string& t) {
  caller_facts f;
  f.bearer = t;
  return f;
}

constexpr auto get = "/gost.v1.OfferService/GetOffer";
constexpr auto update = "/gost.v1.OfferService/UpdateOffer";
constexpr auto drain = "/gost.v1.AdminService/DrainNode";

} // namespace

TEST_CASE("every method of the public services has a role in the table, health is open") {
  const char* services[] = {"gost.v1.OfferService",           "gost.v1.StateService",
                            "gost.v1.EntityService",          "gost.v1.TaskService",
                            "gost.v1.ImageService",           "gost.v1.FeedService",
                            "gost.v1.ScheduledActionService", "gost.v1.AdminService"};
  // Linked in for their descriptors.
  (void)gost::v1::OfferService::service_full_name();
  (void)gost::v1::StateService::service_full_name();
  (void)gost::v1::EntityService::service_full_name();
  (void)gost::v1::TaskService::service_full_name();
  (void)gost::v1::ImageService::service_full_name();
  (void)gost::v1::FeedService::service_full_name();
  (void)gost::v1::ScheduledActionService::service_full_name();
  (void)gost::v1::AdminService::service_full_name();
  int admin_verbs = 0;
  for (auto* name : services) {
    auto* sd = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    REQUIRE_MESSAGE(sd != nullptr, name);
    for (int i = 0; i < sd->method_count(); ++i) {
      auto path = "/" + sd->full_name() + "/" + sd->method(i)->name();
      auto r = caller_rule::required(path);
      CHECK_MESSAGE(r != role::none, path);
      if (sd->full_name() != "gost.v1.AdminService")
        CHECK_MESSAGE(r != role::admin, path << " is not in the table (it would need admin)");
      else if (r == role::admin)
        ++admin_verbs;
    }
  }
  CHECK(admin_verbs == 12); // ... AddGroup, MoveShards
  CHECK(caller_rule::required("/grpc.health.v1.Health/Check") == role::none);
  CHECK(caller_rule::required("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        == role::none);
  CHECK(caller_rule::required("/gost.v1.NewService/Unknown") == role::admin);
  CHECK(caller_rule::required(get) == role::read);
  CHECK(caller_rule::required(update) == role::write);
  CHECK(caller_rule::required(drain) == role::admin);
}

TEST_CASE("with roles: read gets, write mutates, only admin uses the verbs") {
  auto rule = with_roles();
  CHECK(rule.enforced());
  CHECK(rule.decide(get, bearer(reader)).admitted());
  CHECK(rule.decide(get, bearer(reader)).caller == "ci");
  auto v = rule.decide(update, bearer(reader));
  CHECK(v.what == verdict::kind::denied);
  CHECK(v.reason == "role");
  CHECK(v.caller == "ci");
  CHECK(v.message.find("caller `ci` has role read; it needs write") != std::string::npos);
  CHECK(rule.decide(update, bearer(writer)).admitted());
  CHECK(rule.decide(drain, bearer(writer)).what == verdict::kind::denied);
  CHECK(rule.decide(drain, bearer(boss)).admitted());
  CHECK(rule.decide(update, bearer(boss)).admitted());
  CHECK(rule.decide("/grpc.health.v1.Health/Check", caller_facts{}).admitted());
}

TEST_CASE("with roles: no, unknown or malformed credentials are unauthenticated") {
  auto rule = with_roles();
  auto none = rule.decide(get, caller_facts{});
  CHECK(none.what == verdict::kind::unauthenticated);
  CHECK(none.reason == "no_credential");
  CHECK(none.message.find("authorization: Bearer <token>") != std::string::npos);
  auto unknown = rule.decide(get, bearer("not-a-token-of-this-node"));
  CHECK(unknown.reason == "unknown_token");
  CHECK(unknown.message.find("not-a-token") == std::string::npos); // never echoed
  caller_facts bad;
  caller_gate::read_authorization("Basic dXNlcjpwYXNz", bad);
  CHECK(bad.malformed);
  CHECK(rule.decide(get, bad).reason == "malformed");
  caller_facts ok;
  const std::string header = "bearer " + reader; // the facts view it: it outlives them
  caller_gate::read_authorization(header, ok);
  CHECK(!ok.malformed);
  CHECK(rule.decide(get, ok).admitted());
  // A console.token set is no admin token without roles... but is one with them.
  CHECK(rule.decide(drain, bearer("console-token-0123456")).reason == "unknown_token");
  auto with_console = with_roles("console-token-0123456");
  auto v = with_console.decide(drain, bearer("console-token-0123456"));
  CHECK(v.admitted());
  CHECK(v.caller == "console");
}

TEST_CASE("with roles: a client certificate's subject maps to its role") {
  auto rule = with_roles();
  caller_facts cert;
  cert.cert_subjects = {"billing.internal"};
  CHECK(rule.decide(update, cert).admitted());
  CHECK(rule.decide(update, cert).caller == "cert:billing.internal");
  CHECK(rule.decide(drain, cert).what == verdict::kind::denied);
  caller_facts other;
  other.cert_subjects = {"someone.else"};
  CHECK(rule.decide(get, other).reason == "unknown_certificate");
  // A bearer token decides over the certificate.
  cert.bearer = reader;
  CHECK(rule.decide(update, cert).reason == "role");
}

TEST_CASE("without roles: today's rule, only the verbs are guarded") {
  caller_rule::settings s;
  s.loopback = true;
  caller_rule open{s};
  CHECK(!open.enforced());
  CHECK(open.decide(update, caller_facts{}).admitted());
  CHECK(open.decide(drain, caller_facts{}).admitted()); // loopback, no console.token
  s.loopback = false;
  s.listen = "0.0.0.0:50051";
  caller_rule exposed{s};
  CHECK(exposed.decide(update, caller_facts{}).admitted());
  auto v = exposed.decide(drain, caller_facts{});
  CHECK(v.what == verdict::kind::denied);
  CHECK(v.reason == "not_loopback");
  CHECK(v.message.find("console.token") != std::string::npos);
  s.console_token = "console-token-0123456";
  caller_rule token{s};
  CHECK(token.decide(drain, caller_facts{}).what == verdict::kind::unauthenticated);
  CHECK(token.decide(drain, bearer("wrong")).reason == "unknown_token");
  CHECK(token.decide(drain, bearer("console-token-0123456")).admitted());
  CHECK(token.decide("/gost.v1.AdminService/ListStages", caller_facts{}).admitted());
}

TEST_CASE("token entries: clear errors naming the entry, never the token") {
  std::vector<caller_rule::entry> out;
  CHECK(caller_rule::parse_tokens("a:read", "auth.tokens", out)
        == "entry 1 of auth.tokens is not `name:role:token`");
  out.clear();
  auto e = caller_rule::parse_tokens("a:root:" + reader, "auth.tokens", out);
  CHECK(e == "entry 1 of auth.tokens (`a`): role `root` is not read, write or admin");
  out.clear();
  e = caller_rule::parse_tokens("a:read:short", "auth.tokens", out);
  CHECK(e.find("shorter than 16") != std::string::npos);
  CHECK(e.find("short`") == std::string::npos);
  out.clear();
  e = caller_rule::parse_tokens("a:read:" + reader + ",b:write:" + reader, "auth.tokens", out);
  CHECK(e == "entry 2 of auth.tokens (`b`): the same token as `a`; give each caller its own");
  CHECK(e.find(reader) == std::string::npos);
  out.clear();
  CHECK(caller_rule::parse_tokens("", "auth.tokens", out).empty());
  CHECK(out.empty());
  std::vector<caller_rule::entry> certs;
  CHECK(caller_rule::parse_cert_roles("x:boss", "auth.cert_roles", certs)
        == "entry 1 of auth.cert_roles (`x`): role `boss` is not read, write or admin");
}
