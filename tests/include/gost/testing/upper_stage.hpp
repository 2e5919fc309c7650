#pragma once
// Test support: a real external stage (gost.v1.StageService) for gostd to call. It upper-cases
// offer titles and keeps the title it saw as its state (a google.protobuf.StringValue).

#include <atomic>
#include <cctype>
#include <string>

#include <google/protobuf/wrappers.pb.h>
#include <grpcpp/grpcpp.h>

#include "gost/v1/stage_service.grpc.pb.h"

namespace gost::testing {

inline std::string upper(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

/// Wants an offer while its title has lower-case letters; `Process` upper-cases it. Derive to
/// add AfterSave.
class upper_stage : public v1::StageService::Service {
public:
  std::atomic<int> processed{0};

  grpc::Status ShouldProcess(grpc::ServerContext*, const v1::StageRequest* req,
                             v1::ShouldProcessResponse* resp) override {
    resp->set_decision(req->offer().title() != upper(req->offer().title())
                         ? v1::ShouldProcessResponse::PROCESS
                         : v1::ShouldProcessResponse::SKIP);
    return grpc::Status::OK;
  }

  grpc::Status Process(grpc::ServerContext*, const v1::StageRequest* req,
                       v1::ProcessResponse* resp) override {
    *resp->mutable_offer() = req->offer();
    resp->mutable_offer()->set_title(upper(req->offer().title()));
    google::protobuf::StringValue was;
    was.set_value(req->offer().title());
    resp->mutable_state()->PackFrom(was);
    ++processed;
    return grpc::Status::OK;
  }
};

} // namespace gost::testing
