// The limits of docs/api.md ("Limits") through real processes: gostd (and the example
// application for EntityService) started with small `limits.*`, a plain gRPC client at each
// limit and one past it; the transport limit answered RESOURCE_EXHAUSTED by gRPC while the
// node keeps serving; an offer larger than gRPC's default message crossing a node link when
// the limits are raised.
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include <google/protobuf/wrappers.pb.h>
#include <grpcpp/grpcpp.h>

#include "bank/v1/account.pb.h"
#include "gost/testing/grpc.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/entity_service.grpc.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/state_service.grpc.pb.h"

using namespace gost;
using namespace std::chrono_literals;
using testing::call;
using testing::child_process;
using testing::temp_path;

namespace {

/// The node of these tests: no outbox relay, and the limits under test.
std::vector<std::string> limited_node_args(const testing::temp_db& db, const std::string& port_file,
                                           std::vector<std::string> limits) {
  limits.insert(limits.begin(), "--outbox.relay=false");
  return testing::node_args(db, port_file, std::move(limits));
}

/// `n` characters of two bytes each: limits count characters, not bytes.
std::string cyrillic(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i)
    s += "я";
  return s;
}

/// Sets `pad(m, text)` to the text that makes `m` serialize to exactly `bytes`.
template <class Msg, class Pad>
void pad_to(Msg& m, size_t bytes, Pad pad) {
  auto n = static_cast<long>(bytes) - static_cast<long>(m.ByteSizeLong());
  for (int i = 0; i < 8 && n > 0; ++i) {
    pad(m, std::string(static_cast<size_t>(n), 'x'));
    auto size = static_cast<long>(m.ByteSizeLong());
    if (size == static_cast<long>(bytes))
      return;
    n -= size - static_cast<long>(bytes);
  }
  FAIL("cannot pad the message to ", bytes, " bytes");
}

void refused(const grpc::Status& s, const std::string& says) {
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_MESSAGE(s.error_message().find(says) != std::string::npos, s.error_message());
}

void accepted(const grpc::Status& s) {
  CHECK_MESSAGE(s.ok(), s.error_message());
}

struct offers_client {
  std::unique_ptr<v1::OfferService::Stub> stub;
  int sku = 0;

  explicit offers_client(const std::shared_ptr<grpc::Channel>& ch)
    : stub(v1::OfferService::NewStub(ch)) {}

  /// A fresh offer of `seller` (a new external id each time).
  v1::Offer offer(const std::string& seller = "limits-seller") {
    v1::Offer o;
    o.set_seller_id(seller);
    o.set_external_id("sku-" + std::to_string(++sku));
    return o;
  }

  grpc::Status create(const v1::Offer& o, v1::Offer* out = nullptr) {
    v1::CreateOfferRequest req;
    *req.mutable_offer() = o;
    v1::CreateOfferResponse resp;
    auto s = call([&](auto* c, auto& r, auto* x) { return stub->CreateOffer(c, r, x); }, req, resp);
    if (out != nullptr)
      *out = resp.offer();
    return s;
  }

  grpc::Status update(const v1::Offer& o, const std::string& mask = {}) {
    v1::UpdateOfferRequest req;
    *req.mutable_offer() = o;
    if (!mask.empty())
      req.mutable_update_mask()->add_paths(mask);
    v1::UpdateOfferResponse resp;
    return call([&](auto* c, auto& r, auto* x) { return stub->UpdateOffer(c, r, x); }, req, resp);
  }

  grpc::Status get(const std::string& id, v1::Offer& out) {
    v1::GetOfferRequest req;
    req.mutable_ref()->set_id(id);
    v1::GetOfferResponse resp;
    auto s = call([&](auto* c, auto& r, auto* x) { return stub->GetOffer(c, r, x); }, req, resp);
    out = resp.offer();
    return s;
  }

  grpc::Status list(const std::string& seller, int32_t page_size, const std::string& token,
                    v1::ListOffersResponse& page) {
    v1::ListOffersRequest req;
    req.set_seller_id(seller);
    req.set_page_size(page_size);
    req.set_page_token(token);
    return call([&](auto* c, auto& r, auto* x) { return stub->ListOffers(c, r, x); }, req, page);
  }
};

} // namespace

TEST_CASE("each limit through gostd: at the limit accepted, one past refused naming the key") {
  testing::temp_db db;
  auto port_file = temp_path("gostd-limits");
  child_process node{
    GOSTD_PATH,
    limited_node_args(db, port_file,
                      {"--limits.title_max_chars=8", "--limits.description_max_chars=16",
                       "--limits.attributes_max=3", "--limits.attribute_key_max_chars=4",
                       "--limits.attribute_value_max_chars=5", "--limits.photos_max=2",
                       "--limits.offer_max_bytes=40k", "--limits.state_max_bytes=1k",
                       "--limits.page_size_max=3", "--limits.page_max_bytes=64k",
                       "--limits.event_max_bytes=1k", "--limits.request_max_bytes=64k"})};
  auto port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  auto channel =
    grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  offers_client api{channel};
  // One node for every check (each block is independent; a node start is the slow part).

  { // title and description, in characters
    auto o = api.offer();
    o.set_title(cyrillic(8));
    o.set_description(cyrillic(16));
    accepted(api.create(o));
    o = api.offer();
    o.set_title(cyrillic(9));
    refused(api.create(o), "offer.title is 9 characters; the limit is 8 (limits.title_max_chars)");
    o = api.offer();
    o.set_description(cyrillic(17));
    refused(api.create(o), "offer.description is 17 characters; the limit is 16 "
                           "(limits.description_max_chars)");
  }
  { // attributes: how many, their keys, their values
    auto o = api.offer();
    (*o.mutable_attributes())["цвет"] = "белый"; // 4 and 5 characters
    (*o.mutable_attributes())["b"] = "v";
    (*o.mutable_attributes())["c"] = "v";
    accepted(api.create(o));
    auto more = o;
    more.set_external_id("sku-more");
    (*more.mutable_attributes())["d"] = "v";
    refused(api.create(more),
            "offer.attributes has 4 entries; the limit is 3 (limits.attributes_max)");
    o = api.offer();
    (*o.mutable_attributes())["цвета"] = "v";
    refused(api.create(o), "is 5 characters; the limit is 4 (limits.attribute_key_max_chars)");
    o = api.offer();
    (*o.mutable_attributes())["k"] = "белый!";
    refused(api.create(o), "offer.attributes[\"k\"] is 6 characters; the limit is 5 "
                           "(limits.attribute_value_max_chars)");
  }
  { // photos
    auto o = api.offer();
    o.add_photos()->set_url("https://img.example/1.jpg");
    o.add_photos()->set_url("https://img.example/2.jpg");
    accepted(api.create(o));
    o = api.offer();
    for (int i = 0; i < 3; ++i)
      o.add_photos()->set_url("https://img.example/" + std::to_string(i) + ".jpg");
    refused(api.create(o), "offer.photos has 3 entries; the limit is 2 (limits.photos_max)");
  }
  { // the offer's size, on create and on a masked update merged with the stored offer
    auto o = api.offer();
    pad_to(o, 40 * 1024, [](v1::Offer& m, std::string s) { m.set_category(std::move(s)); });
    v1::Offer stored;
    accepted(api.create(o, &stored));
    auto over = api.offer();
    pad_to(over, 40 * 1024 + 1, [](v1::Offer& m, std::string s) { m.set_category(std::move(s)); });
    refused(api.create(over), "bytes serialized (id, version, source and timestamps not "
                              "counted); the limit is 40960 (limits.offer_max_bytes)");
    // The update names only the title; merged with the stored category it is too large.
    v1::Offer title;
    title.set_id(stored.id());
    title.set_title("ab");
    refused(api.update(title, "title"), "(limits.offer_max_bytes)");
    // The stored offer, as it came back (with id, version, source and timestamps), is at the
    // limit too: a whole-content update with it is taken.
    auto same = stored;
    same.set_category(o.category());
    accepted(api.update(same));
    // Content limits hold on updates too (checked by the offer's actor).
    title.set_title(cyrillic(9));
    refused(api.update(title, "title"), "(limits.title_max_chars)");
    v1::Offer got;
    REQUIRE(api.get(stored.id(), got).ok());
    CHECK(got.version() == 2);
    CHECK(got.title().empty());
  }
  { // page size, and pages cut by bytes
    for (int i = 0; i < 4; ++i)
      accepted(api.create(api.offer("pages")));
    v1::ListOffersResponse page;
    accepted(api.list("pages", 3, {}, page));
    CHECK(page.offers_size() == 3);
    CHECK_FALSE(page.next_page_token().empty());
    accepted(api.list("pages", 0, {}, page)); // 0 asks for 100, which is over the limit: 3
    CHECK(page.offers_size() == 3);
    refused(api.list("pages", 4, {}, page),
            "page_size is 4 items; the limit is 3 (limits.page_size_max)");
    // Three offers of 30 KiB: two fill a page of limits.page_max_bytes (64 KiB).
    for (int i = 0; i < 3; ++i) {
      auto o = api.offer("bulky");
      pad_to(o, 30 * 1024, [](v1::Offer& m, std::string s) { m.set_category(std::move(s)); });
      accepted(api.create(o));
    }
    accepted(api.list("bulky", 3, {}, page));
    CHECK(page.offers_size() == 2);
    CHECK(page.ByteSizeLong() <= 64 * 1024);
    REQUIRE_FALSE(page.next_page_token().empty());
    v1::ListOffersResponse rest;
    accepted(api.list("bulky", 3, page.next_page_token(), rest));
    CHECK(rest.offers_size() == 1);
    CHECK(rest.next_page_token().empty());
    CHECK(rest.offers(0).id() > page.offers(1).id());
  }
  { // a stage state
    v1::Offer o;
    accepted(api.create(api.offer(), &o));
    auto states = v1::StateService::NewStub(channel);
    auto update = [&](size_t bytes, int64_t expected) {
      v1::UpdateStateRequest req;
      req.set_offer_id(o.id());
      req.set_stage_id("expire");
      req.set_expected_version(expected);
      pad_to(*req.mutable_state(), bytes, [](google::protobuf::Any& a, std::string s) {
        google::protobuf::StringValue v;
        v.set_value(std::move(s));
        a.PackFrom(v);
      });
      v1::UpdateStateResponse resp;
      auto s = call([&](auto* c, auto& r, auto* x) { return states->Update(c, r, x); }, req, resp);
      CHECK((!s.ok() || resp.updated()));
      return s;
    };
    accepted(update(1024, 0));
    refused(update(1025, 1),
            "state is 1025 bytes packed; the limit is 1024 (limits.state_max_bytes)");
  }
  { // the transport: gRPC refuses a request over limits.request_max_bytes; the node serves on
    auto message = [&](size_t bytes) {
      v1::CreateOfferRequest req;
      *req.mutable_offer() = api.offer();
      pad_to(req, bytes, [](v1::CreateOfferRequest& r, std::string s) {
        r.mutable_offer()->set_category(std::move(s));
      });
      return req.SerializeAsString();
    };
    // At the transport limit the request reaches gost, which refuses the offer's size.
    auto at = testing::raw_call(channel, "/gost.v1.OfferService/CreateOffer", message(64 * 1024));
    refused(at, "(limits.offer_max_bytes)");
    auto past =
      testing::raw_call(channel, "/gost.v1.OfferService/CreateOffer", message(64 * 1024 + 1));
    CHECK(past.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK_MESSAGE(past.error_message().find("larger than max") != std::string::npos,
                  past.error_message());
    auto o = api.offer();
    o.set_title("after");
    accepted(api.create(o));
    CHECK(node.running());
  }
  { // a request id is at most 256 bytes (fixed)
    v1::CreateOfferRequest req;
    *req.mutable_offer() = api.offer();
    req.set_request_id(std::string(256, 'r'));
    v1::CreateOfferResponse resp;
    auto create = [&](auto* c, auto& r, auto* x) { return api.stub->CreateOffer(c, r, x); };
    accepted(call(create, req, resp));
    *req.mutable_offer() = api.offer();
    req.set_request_id(std::string(257, 'r'));
    refused(call(create, req, resp), "request_id must be at most 256 bytes");
  }
  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  std::remove(port_file.c_str());
}

TEST_CASE("EntityService limits: an event's size, a pull's length") {
  testing::temp_db db;
  auto port_file = temp_path("gost-example-limits");
  child_process node{
    GOST_EXAMPLE_PATH,
    limited_node_args(db, port_file, {"--limits.event_max_bytes=1k", "--limits.page_size_max=2"})};
  auto port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  auto stub = v1::EntityService::NewStub(
    grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  auto send = [&](size_t bytes) {
    v1::SendEventRequest req;
    req.set_kind("bank.account");
    req.set_id("alice");
    pad_to(*req.mutable_event(), bytes, [](google::protobuf::Any& a, std::string s) {
      bank::v1::AccountEvent e;
      e.mutable_deposit()->set_amount_minor(1);
      e.mutable_deposit()->set_from(std::move(s));
      a.PackFrom(e);
    });
    v1::SendEventResponse resp;
    return call([&](auto* c, auto& r, auto* x) { return stub->Send(c, r, x); }, req, resp);
  };
  accepted(send(1024));
  refused(send(1025), "event is 1025 bytes packed; the limit is 1024 (limits.event_max_bytes)");

  auto pull = [&](int32_t limit) {
    v1::PullOutputsRequest req;
    req.set_kind("bank.account");
    req.set_lane("statements");
    req.set_limit(limit);
    v1::PullOutputsResponse resp;
    return call([&](auto* c, auto& r, auto* x) { return stub->PullOutputs(c, r, x); }, req, resp);
  };
  accepted(pull(2));
  refused(pull(3), "limit is 3 items; the limit is 2 (limits.page_size_max)");
  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  std::remove(port_file.c_str());
}

TEST_CASE(
  "with the limits raised, an offer larger than gRPC's default message crosses node links") {
  testing::temp_db db;
  // An after-save event of an offer at its limit must fit a Kafka message: raised with it.
  const std::vector<std::string> big{
    "--limits.request_max_bytes=8m", "--limits.offer_max_bytes=6m", "--limits.page_max_bytes=8m",
    "--kafka.message_max_bytes=7m",  "--cluster.heartbeat=200ms",   "--cluster.lease_timeout=2s",
    "--api.request_timeout=20s"};
  std::vector<std::unique_ptr<child_process>> nodes;
  std::vector<std::unique_ptr<offers_client>> clients;
  std::vector<std::string> port_files;
  for (auto id : {"a", "b"}) {
    port_files.push_back(temp_path(std::string{"gostd-limits-"} + id));
    auto args = limited_node_args(db, port_files.back(), big);
    args.push_back(std::string{"--node.id="} + id);
    nodes.push_back(std::make_unique<child_process>(GOSTD_PATH, args));
    auto port = testing::served_port(*nodes.back(), port_files.back());
    REQUIRE_MESSAGE(port > 0, nodes.back()->output());
    grpc::ChannelArguments large; // this client takes the 5 MiB answers too
    large.SetMaxReceiveMessageSize(-1);
    clients.push_back(std::make_unique<offers_client>(grpc::CreateCustomChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), large)));
  }
  // Each node owns its even share (4 of 8 shards): every offer has an owner and a node that
  // forwards to it, and no shard moves any more.
  REQUIRE(testing::eventually(30s, [&] {
    return db.scalar("SELECT count(*) FROM shard_leases WHERE owner = 'a'") == "4"
           && db.scalar("SELECT count(*) FROM shard_leases WHERE owner = 'b'") == "4";
  }));
  // 5 MiB: more than gRPC's default 4 MiB, within the raised limits.
  auto o = clients[0]->offer();
  o.set_category(std::string(5 << 20, 'c')); // a field with no limit but the offer's size
  v1::Offer stored;
  accepted(clients[0]->create(o, &stored));
  auto owner = db.scalar("SELECT l.owner FROM offers o JOIN shard_leases l ON l.shard = o.shard "
                         "WHERE o.offer_id = '"
                         + stored.id() + "'");
  REQUIRE((owner == "a" || owner == "b"));
  auto& other = *clients[owner == "a" ? 1 : 0];
  v1::Offer got;
  accepted(other.get(stored.id(), got)); // the answer crosses the link
  CHECK(got.category().size() == o.category().size());
  auto changed = stored;
  changed.set_title("forwarded");
  accepted(other.update(changed)); // the request crosses the link
  REQUIRE(clients[0]->get(stored.id(), got).ok());
  CHECK(got.title() == "forwarded");
  CHECK(got.version() == 2);
  for (auto& n : nodes)
    n->signal(SIGTERM);
  for (auto& n : nodes)
    CHECK(n->wait(30s) == 0);
  for (auto& f : port_files)
    std::remove(f.c_str());
}
