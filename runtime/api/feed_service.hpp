#pragma once
// gost.v1.FeedService (docs/feeds.md "Feed processor API", seed 004, MISSION F1/F2): sellers'
// feeds and their history, on the node's gRPC server when `feed.enabled`. A thin shell over
// the feed tables (gost/persistence/feeds/feed_admin.hpp, feed_loads.hpp): input is checked
// at the edge (INVALID_ARGUMENT names the field, nothing stored), the database work runs on
// the call hub's blocking workers, never on gRPC's threads, and errors become statuses through
// `to_status` only. Upload streams the file into the node's blob store (the same one the
// loader writes to) and queues the load once the file is whole; a stream that breaks off or
// goes over `feed.max_file_bytes` leaves nothing behind.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "api/limits.hpp"
#include "gost/v1/feed_service.grpc.pb.h"
#include "rpc/parse_guard.hpp"

namespace gost {
class blob_store;
class call_hub;
} // namespace gost

namespace gost::persistence {
class pg_pool;
class shard_placement;
struct feed_row;
struct feed_load_row;
struct feed_offer_error;
} // namespace gost::persistence

namespace gost::runtime {

/// Rows as the API shows them (also the CSV export's and the console's).
void to_proto(const persistence::feed_row& in, v1::Feed& out);
void to_proto(const persistence::feed_load_row& in, v1::FeedLoad& out);
void to_proto(const persistence::feed_offer_error& in, v1::OfferError& out);

/// True when a load's per-offer errors are not shown to the seller (a parsed feed's, seed
/// "parsed": the system that sent the file shows them); `settings` as the load stores them.
bool feed_errors_hidden(const std::string& settings);

/// The input checks, each returning the problem naming the field (`field` is its path in the
/// request, e.g. "feed.seller_id") or "".
std::string check_feed_seller(const std::string& field, const std::string& seller_id);
std::string check_feed_namespace(const std::string& field, const std::string& ns);

class feed_service final : public rpc::guarded<v1::FeedService> {
public:
  struct settings {
    std::chrono::milliseconds min_period{300'000}; ///< feed.min_period
    uint64_t max_file_bytes = 512ull << 20;        ///< feed.max_file_bytes
    int keep_loads = 10;                           ///< feed.keep_loads
  };

  /// `where`: the shard groups' databases (a seller's feeds live in its home group's, ADR
  /// 0023: every call names the seller, so each touches one database). `blobs`: the node's
  /// blob store (made before the gRPC API, stopped after it).
  feed_service(call_hub& hub, std::shared_ptr<const persistence::shard_placement> where,
               const blob_store& blobs, api_limits limits, settings s)
    : hub_(hub), where_(std::move(where)), blobs_(blobs), limits_(limits), settings_(s) {
    guard("CreateFeed", &feed_service::CreateFeed);
    guard("UpdateFeed", &feed_service::UpdateFeed);
    guard("DeleteFeed", &feed_service::DeleteFeed);
    guard("GetFeed", &feed_service::GetFeed);
    guard("ListFeeds", &feed_service::ListFeeds);
    guard("Upload", &feed_service::Upload);
    guard("LoadNow", &feed_service::LoadNow);
    guard("ListLoads", &feed_service::ListLoads);
    guard("GetLoad", &feed_service::GetLoad);
    guard("ListErrors", &feed_service::ListErrors);
    require_all_guarded();
  }

  grpc::ServerUnaryReactor* CreateFeed(grpc::CallbackServerContext* ctx,
                                       const v1::CreateFeedRequest* req,
                                       v1::CreateFeedResponse* resp) override;
  grpc::ServerUnaryReactor* UpdateFeed(grpc::CallbackServerContext* ctx,
                                       const v1::UpdateFeedRequest* req,
                                       v1::UpdateFeedResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteFeed(grpc::CallbackServerContext* ctx,
                                       const v1::DeleteFeedRequest* req,
                                       v1::DeleteFeedResponse* resp) override;
  grpc::ServerUnaryReactor* GetFeed(grpc::CallbackServerContext* ctx, const v1::GetFeedRequest* req,
                                    v1::GetFeedResponse* resp) override;
  grpc::ServerUnaryReactor* ListFeeds(grpc::CallbackServerContext* ctx,
                                      const v1::ListFeedsRequest* req,
                                      v1::ListFeedsResponse* resp) override;
  grpc::ServerReadReactor<v1::UploadRequest>* Upload(grpc::CallbackServerContext* ctx,
                                                     v1::UploadResponse* resp) override;
  grpc::ServerUnaryReactor* LoadNow(grpc::CallbackServerContext* ctx, const v1::LoadNowRequest* req,
                                    v1::LoadNowResponse* resp) override;
  grpc::ServerUnaryReactor* ListLoads(grpc::CallbackServerContext* ctx,
                                      const v1::ListLoadsRequest* req,
                                      v1::ListLoadsResponse* resp) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* ctx, const v1::GetLoadRequest* req,
                                    v1::GetLoadResponse* resp) override;
  grpc::ServerUnaryReactor* ListErrors(grpc::CallbackServerContext* ctx,
                                       const v1::ListErrorsRequest* req,
                                       v1::ListErrorsResponse* resp) override;

private:
  class upload;

  /// CreateFeed and UpdateFeed: the settings checked into a spec, or the problem.
  std::string check_settings(const v1::FeedSettings& s, const std::string& field) const;

  /// The database holding `seller_id`'s feeds.
  persistence::pg_pool* db_of(const std::string& seller_id) const;

  call_hub& hub_;
  std::shared_ptr<const persistence::shard_placement> where_;
  const blob_store& blobs_;
  api_limits limits_;
  settings settings_;
};

} // namespace gost::runtime
