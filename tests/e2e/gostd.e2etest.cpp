// gostd as a real process against the real PostgreSQL: gRPC in, SIGTERM out, and the start-up
// refusals a user sees.
#include <doctest/doctest.h>

#include <fstream>
#include <set>

#include <grpcpp/grpcpp.h>

#include "gost/testing/grpc.hpp"
#include "gost/testing/http.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include <google/protobuf/wrappers.pb.h>

#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/state_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::call;
using testing::child_process;
using testing::raw_call;

using testing::node_args;
using testing::read_ports;
using testing::temp_path;

TEST_CASE("gostd serves OfferService over gRPC and stops cleanly on SIGTERM") {
  testing::temp_db db;
  auto port_file = temp_path("gostd-port");
  child_process node{GOSTD_PATH, node_args(db, port_file)};
  auto [port, http_port] = read_ports(node, port_file);
  auto stub = v1::OfferService::NewStub(
    grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  auto create = [&](grpc::ClientContext* c, const v1::CreateOfferRequest& r,
                    v1::CreateOfferResponse* o) { return stub->CreateOffer(c, r, o); };
  auto get = [&](grpc::ClientContext* c, const v1::GetOfferRequest& r, v1::GetOfferResponse* o) {
    return stub->GetOffer(c, r, o);
  };
  auto update = [&](grpc::ClientContext* c, const v1::UpdateOfferRequest& r,
                    v1::UpdateOfferResponse* o) { return stub->UpdateOffer(c, r, o); };
  auto remove = [&](grpc::ClientContext* c, const v1::DeleteOfferRequest& r,
                    v1::DeleteOfferResponse* o) { return stub->DeleteOffer(c, r, o); };

  v1::CreateOfferRequest cr;
  cr.mutable_offer()->set_seller_id("seller-1");
  cr.mutable_offer()->set_namespace_("shop");
  cr.mutable_offer()->set_external_id("sku-42");
  cr.mutable_offer()->set_title("Bicycle");
  v1::CreateOfferResponse created;
  auto s = call(create, cr, created);
  REQUIRE_MESSAGE(s.ok(), s.error_message());
  auto id = created.offer().id();
  CHECK(id.size() == 32);
  CHECK(created.offer().version() == 1);
  CHECK(created.offer().source() == v1::OFFER_SOURCE_MANUAL);
  CHECK(db.scalar("SELECT version FROM offers WHERE offer_id = '" + id + "'") == "1");

  SUBCASE("get by id and by the seller's key") {
    v1::GetOfferRequest g;
    g.mutable_ref()->set_id(id);
    v1::GetOfferResponse got;
    REQUIRE(call(get, g, got).ok());
    CHECK(got.offer().title() == "Bicycle");
    v1::GetOfferRequest k;
    k.mutable_ref()->mutable_key()->set_seller_id("seller-1");
    k.mutable_ref()->mutable_key()->set_namespace_("shop");
    k.mutable_ref()->mutable_key()->set_external_id("sku-42");
    v1::GetOfferResponse by_key;
    REQUIRE(call(get, k, by_key).ok());
    CHECK(by_key.offer().id() == id);
  }
  SUBCASE("update with expected version, then a stale one") {
    v1::UpdateOfferRequest u;
    *u.mutable_offer() = created.offer();
    u.mutable_offer()->set_title("Red bicycle");
    u.set_expected_version(1);
    v1::UpdateOfferResponse updated;
    REQUIRE(call(update, u, updated).ok());
    CHECK(updated.offer().version() == 2);
    v1::UpdateOfferResponse stale;
    auto st = call(update, u, stale);
    CHECK(st.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(st.error_message().find("version 2") != std::string::npos);
  }
  SUBCASE("a field-masked update changes only the listed fields") {
    v1::UpdateOfferRequest u;
    u.mutable_offer()->set_id(id);
    u.mutable_offer()->set_title("Blue bicycle");
    u.mutable_offer()->set_description("not listed: ignored");
    u.mutable_update_mask()->add_paths("title");
    v1::UpdateOfferResponse updated;
    REQUIRE(call(update, u, updated).ok());
    CHECK(updated.offer().version() == 2);
    CHECK(updated.offer().title() == "Blue bicycle");
    CHECK(updated.offer().seller_id() == created.offer().seller_id());
    CHECK(updated.offer().description() == created.offer().description());
    u.mutable_update_mask()->add_paths("no_such_field");
    v1::UpdateOfferResponse bad;
    auto st = call(update, u, bad);
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().find("no_such_field") != std::string::npos);
    u.mutable_update_mask()->clear_paths();
    u.mutable_update_mask()->add_paths("version");
    CHECK(call(update, u, bad).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  SUBCASE("a seller's offers are listed page by page") {
    auto list = [&](grpc::ClientContext* c, const v1::ListOffersRequest& r,
                    v1::ListOffersResponse* o) { return stub->ListOffers(c, r, o); };
    std::set<std::string> mine{id};
    for (int i = 0; i < 4; ++i) {
      v1::CreateOfferRequest more;
      more.mutable_offer()->set_seller_id("seller-1");
      more.mutable_offer()->set_title("more " + std::to_string(i));
      v1::CreateOfferResponse got;
      REQUIRE(call(create, more, got).ok());
      mine.insert(got.offer().id());
    }
    v1::CreateOfferRequest other;
    other.mutable_offer()->set_seller_id("seller-2");
    v1::CreateOfferResponse got;
    REQUIRE(call(create, other, got).ok());
    std::set<std::string> listed;
    v1::ListOffersRequest lr;
    lr.set_seller_id("seller-1");
    lr.set_page_size(2);
    int pages = 0;
    do {
      v1::ListOffersResponse page;
      REQUIRE(call(list, lr, page).ok());
      CHECK(page.offers_size() <= 2);
      for (auto& o : page.offers()) {
        CHECK(o.seller_id() == "seller-1");
        CHECK(o.version() >= 1);
        listed.insert(o.id());
      }
      lr.set_page_token(page.next_page_token());
      ++pages;
    } while (!lr.page_token().empty() && pages < 10);
    CHECK(listed == mine);
    CHECK(pages == 3);
    // The namespace filter, and bad input.
    lr.set_page_token("");
    lr.set_page_size(0);
    lr.set_namespace_("shop");
    v1::ListOffersResponse shop;
    REQUIRE(call(list, lr, shop).ok());
    REQUIRE(shop.offers_size() == 1);
    CHECK(shop.offers(0).id() == id);
    lr.set_page_size(5000);
    CHECK(call(list, lr, shop).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    lr.clear_seller_id();
    lr.set_page_size(1);
    CHECK(call(list, lr, shop).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  SUBCASE("delete, then the offer is gone") {
    v1::DeleteOfferRequest d;
    d.mutable_ref()->set_id(id);
    v1::DeleteOfferResponse deleted;
    REQUIRE(call(remove, d, deleted).ok());
    CHECK(deleted.version() == 2);
    v1::GetOfferRequest g;
    g.mutable_ref()->set_id(id);
    v1::GetOfferResponse got;
    CHECK(call(get, g, got).error_code() == grpc::StatusCode::NOT_FOUND);
  }
  SUBCASE("bad input gets INVALID_ARGUMENT naming the field; the node keeps serving") {
    v1::CreateOfferRequest bad;
    v1::CreateOfferResponse out;
    auto st = call(create, bad, out);
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().find("offer.seller_id") != std::string::npos);
    v1::CreateOfferRequest dup = cr;
    st = call(create, dup, out);
    CHECK(st.error_code() == grpc::StatusCode::ALREADY_EXISTS);
    v1::GetOfferRequest noref;
    v1::GetOfferResponse got;
    CHECK(call(get, noref, got).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    v1::GetOfferRequest g;
    g.mutable_ref()->set_id(id);
    CHECK(call(get, g, got).ok());
  }

  SUBCASE("gostctl inspects the offer and the stages") {
    auto addr = "127.0.0.1:" + std::to_string(port);
    child_process offer{GOSTCTL_PATH, {"--addr", addr, "offer", id}};
    REQUIRE(offer.wait(30s) == 0);
    auto out = offer.output();
    CHECK(out.find("version 1") != std::string::npos);
    CHECK(out.find("resident, 0 message(s) in its mailbox") != std::string::npos);
    CHECK(out.find("\"title\": \"Bicycle\"") != std::string::npos);
    child_process stages{GOSTCTL_PATH, {"--addr", addr, "stages"}};
    REQUIRE(stages.wait(30s) == 0);
    CHECK(stages.output().find("expire") != std::string::npos);
    CHECK(stages.output().find("status,created_at") != std::string::npos);
    CHECK(stages.output().find("run p50/p99 ms") != std::string::npos);
    child_process missing{GOSTCTL_PATH, {"--addr", addr, "offer", "no-such-offer"}};
    CHECK(missing.wait(30s) == 1);
    CHECK(missing.output().find("not found") != std::string::npos);
  }
  SUBCASE("StateService reads and compare-and-sets a stage's state") {
    auto states = v1::StateService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
    auto read = [&](grpc::ClientContext* c, const v1::ReadStateRequest& r,
                    v1::ReadStateResponse* o) { return states->Read(c, r, o); };
    auto cas = [&](grpc::ClientContext* c, const v1::UpdateStateRequest& r,
                   v1::UpdateStateResponse* o) { return states->Update(c, r, o); };
    v1::ReadStateRequest rr;
    rr.set_offer_id(id);
    rr.set_stage_id("expire");
    v1::ReadStateResponse before;
    REQUIRE(call(read, rr, before).ok());
    CHECK(before.version() == 0); // the expire stage keeps no state of its own
    google::protobuf::StringValue note;
    note.set_value("checked by hand");
    v1::UpdateStateRequest ur;
    ur.set_offer_id(id);
    ur.set_stage_id("expire");
    ur.mutable_state()->PackFrom(note);
    ur.set_expected_version(0);
    v1::UpdateStateResponse first;
    REQUIRE(call(cas, ur, first).ok());
    CHECK(first.updated());
    CHECK(first.version() == 1);
    v1::UpdateStateResponse second; // the same version again: stale now
    REQUIRE(call(cas, ur, second).ok());
    CHECK_FALSE(second.updated());
    CHECK(second.version() == 1);
    v1::ReadStateResponse after;
    REQUIRE(call(read, rr, after).ok());
    CHECK(after.version() == 1);
    google::protobuf::StringValue back;
    REQUIRE(after.state().UnpackTo(&back));
    CHECK(back.value() == "checked by hand");
    CHECK(db.scalar("SELECT state_version FROM stage_states WHERE offer_id = '" + id
                    + "' AND stage_id = 'expire'")
          == "1");

    // Bad input: INVALID_ARGUMENT naming what to fix, NOT_FOUND for a missing offer.
    v1::UpdateStateResponse out;
    auto no_state = ur;
    no_state.clear_state();
    auto st = call(cas, no_state, out);
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().find("state is required") != std::string::npos);
    auto bad_stage = ur;
    bad_stage.set_stage_id("no-such-stage");
    st = call(cas, bad_stage, out);
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().find("stage_id") != std::string::npos);
    auto negative = ur;
    negative.set_expected_version(-1);
    CHECK(call(cas, negative, out).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    auto missing = rr;
    missing.set_offer_id("no-such-offer");
    v1::ReadStateResponse none;
    CHECK(call(read, missing, none).error_code() == grpc::StatusCode::NOT_FOUND);
    CHECK(db.scalar("SELECT state_version FROM stage_states WHERE offer_id = '" + id
                    + "' AND stage_id = 'expire'")
          == "1");
  }
  SUBCASE("the gRPC health service answers SERVING once the node is ready") {
    // Readiness is pushed to the health service by a watcher (every 100 ms): right after the
    // start the answer may still be NOT_SERVING.
    auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
    CHECK(testing::eventually(10s, [&] { return testing::health_status(channel) == 1; }));
  }
  SUBCASE("the admin endpoint serves health, readiness and Prometheus metrics") {
    CHECK(testing::http_get(static_cast<uint16_t>(http_port), "/healthz").find("200 OK")
          != std::string::npos);
    CHECK(testing::eventually(10s, [&] {
      return testing::http_get(static_cast<uint16_t>(http_port), "/readyz").find("200 OK\r\n")
             != std::string::npos;
    }));
    auto m = testing::http_get(static_cast<uint16_t>(http_port), "/metrics");
    CHECK(
      m.find("gost_grpc_requests_total{method=\"/gost.v1.OfferService/CreateOffer\",code=\"OK\"} 1")
      != std::string::npos);
    CHECK(m.find("gost_offer_actors_resident 1") != std::string::npos);
    CHECK(m.find("gost_stage_runs_total{stage=\"expire\"} 0") != std::string::npos);
    CHECK(m.find("gost_stage_run_seconds_count{stage=\"expire\"} 0") != std::string::npos);
    CHECK(testing::http_get(static_cast<uint16_t>(http_port), "/nope").find("404")
          != std::string::npos);
  }

  // A ready node stops: readiness drops first, then the hand-off and the drain.
  REQUIRE(testing::eventually(10s, [&] {
    return testing::http_get(static_cast<uint16_t>(http_port), "/readyz").find("200 OK\r\n")
           != std::string::npos;
  }));
  node.signal(SIGTERM);
  auto rc = node.wait(30s);
  CHECK_MESSAGE(rc == 0, node.output());
  auto out = node.output();
  CHECK(out.find("stopped cleanly") != std::string::npos);
  auto unready = out.find("node not ready reason=stopping");
  CHECK_MESSAGE(unready != std::string::npos, out);
  CHECK_MESSAGE(unready < out.find("shard hand-off started"), out);
  CHECK_MESSAGE(out.find("stopped readiness") < out.find("stopped shard hand-off"), out);
  std::remove(port_file.c_str());
}

TEST_CASE("undecodable requests get INVALID_ARGUMENT naming what failed, at every method") {
  testing::temp_db db;
  auto port_file = temp_path("gostd-raw");
  child_process node{GOSTD_PATH, node_args(db, port_file)};
  auto [port, http_port] = read_ports(node, port_file);
  auto channel =
    grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  // Field 1 holding invalid UTF-8 (a string field, or an embedded message's bytes), and bytes
  // that are no protobuf at all.
  const std::string bad_utf8{"\x0a\x03\x61\xff\x62", 5};
  const std::string garbage(11, '\xff');
  int methods = 0;
  int rejected = 0;
  for (auto* service : {"gost.v1.OfferService", "gost.v1.StateService", "gost.v1.AdminService"}) {
    auto* sd = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    REQUIRE(sd != nullptr);
    for (int i = 0; i < sd->method_count(); ++i) {
      auto path = std::string{"/"} + service + "/" + sd->method(i)->name();
      auto* input = sd->method(i)->input_type();
      // A message without a string or message field 1 takes any well-formed field 1 as an
      // unknown field (proto3; a numeric field 1 too, the wire type not being its own): only
      // garbage is undecodable for it.
      std::vector<std::string> bad{garbage};
      using fd = google::protobuf::FieldDescriptor;
      if (auto* f1 = input->FindFieldByNumber(1);
          f1 != nullptr && (f1->type() == fd::TYPE_STRING || f1->type() == fd::TYPE_MESSAGE))
        bad.push_back(bad_utf8);
      for (auto& bytes : bad) {
        auto st = raw_call(channel, path, bytes);
        CHECK_MESSAGE(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT, path);
        CHECK_MESSAGE(st.error_message().find(path) != std::string::npos, st.error_message());
        CHECK(st.error_message().find(input->full_name()) != std::string::npos);
        ++rejected;
      }
      ++methods;
    }
  }
  CHECK(methods >= 11);
  // Where protobuf names the field, so does the answer: GetOfferRequest.ref.id as invalid UTF-8.
  const std::string bad_id{"\x0a\x03\x0a\x01\xff", 5};
  auto st = raw_call(channel, "/gost.v1.OfferService/GetOffer", bad_id);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_MESSAGE(st.error_message().find("gost.v1.OfferRef.id") != std::string::npos,
                st.error_message());
  // The node keeps serving, and counted them.
  v1::CreateOfferRequest req;
  req.mutable_offer()->set_seller_id("s");
  v1::CreateOfferResponse resp;
  auto stub = v1::OfferService::NewStub(channel);
  auto create = [&](grpc::ClientContext* c, const v1::CreateOfferRequest& r,
                    v1::CreateOfferResponse* o) { return stub->CreateOffer(c, r, o); };
  CHECK(call(create, req, resp).ok());
  auto m = testing::http_get(static_cast<uint16_t>(http_port), "/metrics");
  CHECK(m.find("gost_grpc_undecodable_requests_total " + std::to_string(rejected + 1))
        != std::string::npos);
  // Logged rate-limited: not one line per bad request, and no raw libprotobuf lines.
  auto out = node.output();
  size_t lines = 0;
  for (auto pos = out.find("bad request"); pos != std::string::npos;
       pos = out.find("bad request", pos + 1))
    ++lines;
  CHECK(lines >= 1);
  CHECK(lines <= 10);
  CHECK(out.find("[libprotobuf ERROR") == std::string::npos);
  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  std::remove(port_file.c_str());
}

namespace {

/// Starts a node on `db` until it is serving, then stops it: the database has the installation.
void start_and_stop(const testing::temp_db& db, const std::string& port_file) {
  child_process first{GOSTD_PATH, node_args(db, port_file)};
  read_ports(first, port_file);
  first.signal(SIGTERM);
  REQUIRE(first.wait(30s) == 0);
}

} // namespace

TEST_CASE("gostd refuses to start with one clear line") {
  SUBCASE("a bad config value names the key") {
    child_process p{GOSTD_PATH, {"--shard.count=-3"}};
    CHECK(p.wait(10s) == 2);
    CHECK(p.output().find("`shard.count`") != std::string::npos);
  }
  SUBCASE("a missing database names pg.dsn") {
    child_process p{GOSTD_PATH,
                    {"--pg.dsn=host=127.0.0.1 port=1 user=gost dbname=gost connect_timeout=1",
                     "--pg.connect_timeout=500ms", "--grpc.listen=127.0.0.1:0"}};
    CHECK(p.wait(30s) == 1);
    CHECK(p.output().find("pg.dsn") != std::string::npos);
  }
  SUBCASE("node-link TLS half configured, or with unreadable files") {
    child_process half{GOSTD_PATH, {"--cluster.tls_cert=/tmp/x.pem"}};
    CHECK(half.wait(10s) == 2);
    CHECK(half.output().find("must be set together") != std::string::npos);
    testing::temp_db db;
    child_process missing{GOSTD_PATH, node_args(db, temp_path("gostd-port"),
                                                {"--cluster.tls_cert=/nonexistent/node.pem",
                                                 "--cluster.tls_key=/nonexistent/node.key",
                                                 "--cluster.tls_ca=/nonexistent/ca.pem"})};
    CHECK(missing.wait(30s) == 1);
    CHECK(missing.output().find("cannot read /nonexistent/node.pem") != std::string::npos);
  }
  SUBCASE("a shard count different from the installation's") {
    testing::temp_db db;
    auto port_file = temp_path("gostd-port");
    start_and_stop(db, port_file); // the installation exists
    child_process second{GOSTD_PATH, node_args(db, port_file + "2", {"--shard.count=16"})};
    CHECK(second.wait(30s) == 1);
    CHECK(second.output().find("set `shard.count` to 8") != std::string::npos);
    std::remove(port_file.c_str());
  }
  SUBCASE("a shard group whose database is unreachable (ADR 0023)") {
    testing::temp_db db;
    auto port_file = temp_path("gostd-port");
    start_and_stop(db, port_file); // the installation exists
    db.scalar("INSERT INTO shard_groups (id, name, dsn) VALUES (1, 'east', 'host=127.0.0.1 "
              "port=1 user=gost dbname=east connect_timeout=1')");
    db.scalar("INSERT INTO shard_ranges (first_shard, last_shard, group_id) VALUES (0, 3, 0),"
              " (4, 7, 1)");
    child_process unreachable{GOSTD_PATH,
                              node_args(db, port_file + "2",
                                        {"--pg.connect_timeout=500ms", "--scheduled.enabled=false",
                                         "--images.enabled=false", "--tasks.enabled=false"})};
    CHECK(unreachable.wait(30s) == 1);
    CHECK_MESSAGE(unreachable.output().find("shard group `east` (4 shards): its database is "
                                            "unreachable")
                    != std::string::npos,
                  unreachable.output());
    // A group declared for a move to come, holding no shard, unreachable: the node starts
    // without it, saying so.
    db.scalar("UPDATE shard_ranges SET last_shard = 7 WHERE group_id = 0");
    db.scalar("DELETE FROM shard_ranges WHERE group_id = 1");
    {
      child_process without{GOSTD_PATH,
                            node_args(db, port_file + "4",
                                      {"--pg.connect_timeout=500ms", "--scheduled.enabled=false",
                                       "--images.enabled=false", "--tasks.enabled=false"})};
      read_ports(without, port_file + "4");
      CHECK_MESSAGE(without.output().find("shard group not opened group=1 name=east: it holds no "
                                          "shard and its database is unreachable")
                      != std::string::npos,
                    without.output());
      without.signal(SIGTERM);
      CHECK(without.wait(30s) == 0);
      std::remove((port_file + "4").c_str());
    }
    std::remove(port_file.c_str());
  }
}
