#pragma once

#include <chrono>

#include "api/limits.hpp"
#include "gost/v1/offer_service.grpc.pb.h"
#include "rpc/parse_guard.hpp"

namespace gost {
class call_hub;
}

namespace gost::runtime {

class router;

/// gost.v1.OfferService on gRPC's callback API: each call validates its input, then a
/// short-lived actor sends the request to the owning shard and finishes the call when the
/// answer (or an error, or the deadline) arrives. No gRPC thread ever waits on an actor.
class offer_service final : public rpc::guarded<v1::OfferService> {
public:
  offer_service(call_hub& hub, router& r, std::chrono::milliseconds timeout, api_limits limits)
    : hub_(hub), router_(r), timeout_(timeout), limits_(limits) {
    guard("CreateOffer", &offer_service::CreateOffer);
    guard("GetOffer", &offer_service::GetOffer);
    guard("UpdateOffer", &offer_service::UpdateOffer);
    guard("DeleteOffer", &offer_service::DeleteOffer);
    guard("ListOffers", &offer_service::ListOffers);
    require_all_guarded();
  }

  grpc::ServerUnaryReactor* CreateOffer(grpc::CallbackServerContext* ctx,
                                        const v1::CreateOfferRequest* req,
                                        v1::CreateOfferResponse* resp) override;
  grpc::ServerUnaryReactor* GetOffer(grpc::CallbackServerContext* ctx,
                                     const v1::GetOfferRequest* req,
                                     v1::GetOfferResponse* resp) override;
  grpc::ServerUnaryReactor* UpdateOffer(grpc::CallbackServerContext* ctx,
                                        const v1::UpdateOfferRequest* req,
                                        v1::UpdateOfferResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteOffer(grpc::CallbackServerContext* ctx,
                                        const v1::DeleteOfferRequest* req,
                                        v1::DeleteOfferResponse* resp) override;
  grpc::ServerUnaryReactor* ListOffers(grpc::CallbackServerContext* ctx,
                                       const v1::ListOffersRequest* req,
                                       v1::ListOffersResponse* resp) override;

private:
  call_hub& hub_;
  router& router_;
  std::chrono::milliseconds timeout_;
  api_limits limits_;
};

} // namespace gost::runtime
