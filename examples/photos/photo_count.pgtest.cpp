// The photo count stage on a node: the application's node (node_builder with the stage)
// running in this process on a fresh database of the test server (gost/testing/app_node.hpp),
// offers written through OfferService and the stage's state read through StateService, as
// clients do. What the unit test cannot show: the stage runs after a commit because of an
// interest, its typed state is stored, and the offer it changes is written back.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "gost/testing/app_node.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/state_service.grpc.pb.h"
#include "photo_count.hpp"

using namespace std::chrono_literals;

namespace {

struct photos_node {
  gost::testing::app_node node{[] {
    gost::node_builder b;
    b.add_stage<photos::photo_count>("photo_count");
    return b;
  }()};
  std::unique_ptr<gost::v1::OfferService::Stub> offers =
    gost::v1::OfferService::NewStub(node.channel());
  std::unique_ptr<gost::v1::StateService::Stub> states =
    gost::v1::StateService::NewStub(node.channel());

  gost::v1::Offer create(int photos, gost::v1::OfferStatus status) {
    gost::v1::CreateOfferRequest req;
    req.mutable_offer()->set_seller_id("seller-1");
    req.mutable_offer()->set_title("a bicycle");
    req.mutable_offer()->set_status(status);
    for (int i = 0; i < photos; ++i)
      req.mutable_offer()->add_photos()->set_url("http://img.test/" + std::to_string(i));
    gost::v1::CreateOfferResponse resp;
    grpc::ClientContext ctx;
    auto s = offers->CreateOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp.offer();
  }

  /// The stage's state of `offer` and its version (0: none yet).
  std::pair<photos::v1::PhotoCount, int64_t> count(const std::string& offer) {
    gost::v1::ReadStateRequest req;
    req.set_offer_id(offer);
    req.set_stage_id("photo_count");
    gost::v1::ReadStateResponse resp;
    grpc::ClientContext ctx;
    auto s = states->Read(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    photos::v1::PhotoCount c;
    if (resp.has_state())
      REQUIRE(resp.state().UnpackTo(&c));
    return {c, resp.version()};
  }

  gost::v1::Offer get(const std::string& id) {
    gost::v1::GetOfferRequest req;
    req.mutable_ref()->set_id(id);
    gost::v1::GetOfferResponse resp;
    grpc::ClientContext ctx;
    auto s = offers->GetOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp.offer();
  }
};

} // namespace

TEST_CASE("the stage counts a new offer's photos and counts again when the photos change") {
  photos_node n;
  auto offer = n.create(2, gost::v1::OFFER_STATUS_DRAFT);
  REQUIRE(gost::testing::eventually(30s, [&] { return n.count(offer.id()).second > 0; }));
  CHECK(n.count(offer.id()).first.photos() == 2);

  gost::v1::UpdateOfferRequest up;
  up.mutable_offer()->set_id(offer.id());
  for (int i = 0; i < 3; ++i)
    up.mutable_offer()->add_photos(); // three photos, none with a URL
  up.mutable_update_mask()->add_paths("photos");
  gost::v1::UpdateOfferResponse resp;
  grpc::ClientContext ctx;
  auto s = n.offers->UpdateOffer(&ctx, up, &resp);
  REQUIRE_MESSAGE(s.ok(), s.error_message());
  REQUIRE(gost::testing::eventually(30s, [&] { return n.count(offer.id()).first.photos() == 3; }));
  CHECK(n.count(offer.id()).first.without_url() == 3);
}

TEST_CASE("an active offer without photos is written back as a draft") {
  photos_node n;
  auto offer = n.create(0, gost::v1::OFFER_STATUS_ACTIVE);
  REQUIRE(gost::testing::eventually(
    30s, [&] { return n.get(offer.id()).status() == gost::v1::OFFER_STATUS_DRAFT; }));
  CHECK(n.count(offer.id()).first.photos() == 0);
  CHECK(n.get(offer.id()).version() > offer.version());
}
