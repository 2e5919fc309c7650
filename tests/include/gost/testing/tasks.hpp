#pragma once
// Test support: a client of gost.v1.TaskService for e2e tests (groups, tasks, events, GetTask,
// results pulled by cursor or by token), and the moderation task type's inputs and verdicts.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>

#include "gost/testing/grpc.hpp"
#include "gost/v1/task_service.grpc.pb.h"
#include "gost/v1/tasks.pb.h"

namespace gost::testing {

struct task_client {
  std::unique_ptr<gost::v1::TaskService::Stub> stub;

  explicit task_client(int port) : task_client("127.0.0.1:" + std::to_string(port)) {}
  explicit task_client(const std::string& addr)
    : stub(gost::v1::TaskService::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()))) {}

  grpc::Status create_group(const std::string& id,
                            std::chrono::milliseconds retry = std::chrono::milliseconds{200},
                            int attempts = 3, const std::string& type = "moderation") {
    gost::v1::CreateGroupRequest req;
    auto* g = req.mutable_group();
    g->set_group_id(id);
    g->set_task_type(type);
    g->set_source("classifieds");
    *g->mutable_retry_delay() =
      google::protobuf::util::TimeUtil::MillisecondsToDuration(retry.count());
    g->set_max_attempts(attempts);
    gost::v1::CreateGroupResponse resp;
    grpc::ClientContext ctx;
    return stub->CreateGroup(&ctx, req, &resp);
  }

  grpc::Status create(const std::string& group, const std::string& key,
                      const google::protobuf::Message& input, std::string* id = nullptr) {
    gost::v1::CreateTaskRequest req;
    req.set_group_id(group);
    req.set_client_key(key);
    req.mutable_input()->PackFrom(input);
    gost::v1::CreateTaskResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{10});
    auto s = stub->CreateTask(&ctx, req, &resp);
    if (id != nullptr)
      *id = resp.task_id();
    return s;
  }

  grpc::Status send(const std::string& id, const std::string& name,
                    const google::protobuf::Message& payload, const std::string& request_id = {}) {
    gost::v1::SendTaskEventRequest req;
    req.set_task_id(id);
    req.set_name(name);
    req.mutable_payload()->PackFrom(payload);
    req.set_request_id(request_id);
    gost::v1::SendTaskEventResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{10});
    return stub->SendEvent(&ctx, req, &resp);
  }

  grpc::Status cancel(const std::string& id, const std::string& reason) {
    gost::v1::CancelTaskRequest req;
    req.set_task_id(id);
    req.set_reason(reason);
    gost::v1::CancelTaskResponse resp;
    grpc::ClientContext ctx;
    return stub->Cancel(&ctx, req, &resp);
  }

  gost::v1::GetTaskResponse get(const std::string& id) {
    gost::v1::GetTaskRequest req;
    req.set_task_id(id);
    gost::v1::GetTaskResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{10});
    auto s = stub->GetTask(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp;
  }

  /// Results of `group` after `cursor`, one page; advances the cursor. Empty on an error.
  std::vector<gost::v1::PullResultsResponse::Result> pull(const std::string& group, int64_t& cursor,
                                                          grpc::Status* status = nullptr) {
    gost::v1::PullResultsRequest req;
    req.set_group_id(group);
    req.set_after(cursor);
    req.set_limit(500);
    gost::v1::PullResultsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{10});
    auto s = stub->PullResults(&ctx, req, &resp);
    if (status != nullptr)
      *status = s;
    if (!s.ok())
      return {};
    cursor = resp.cursor();
    return {resp.results().begin(), resp.results().end()};
  }

  /// Results of `group` after `token` (a position per shard group), one page of `limit`;
  /// advances the token.
  std::vector<gost::v1::PullResultsResponse::Result> pull_token(const std::string& group,
                                                                std::string& token, int limit) {
    gost::v1::PullResultsRequest req;
    req.set_group_id(group);
    req.set_after_token(token);
    req.set_limit(limit);
    gost::v1::PullResultsResponse resp;
    auto s = call([&](auto* ctx, auto& r, auto* out) { return stub->PullResults(ctx, r, out); },
                  req, resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    token = resp.next_token();
    return {resp.results().begin(), resp.results().end()};
  }

  /// Every result of `group` after `cursor`.
  std::vector<gost::v1::PullResultsResponse::Result> pull_all(const std::string& group,
                                                              int64_t& cursor) {
    std::vector<gost::v1::PullResultsResponse::Result> out;
    for (;;) {
      auto page = pull(group, cursor);
      out.insert(out.end(), page.begin(), page.end());
      if (page.size() < 500)
        return out;
    }
  }
};

inline gost::v1::ModerationInput item(const std::string& id,
                                      std::chrono::milliseconds timeout = std::chrono::seconds{60},
                                      int max_issues = 3) {
  gost::v1::ModerationInput in;
  in.set_item_id(id);
  in.set_content("content of " + id);
  in.set_verdict_timeout_ms(timeout.count());
  in.set_max_issues(max_issues);
  return in;
}

inline gost::v1::ModerationVerdict verdict(bool approved) {
  gost::v1::ModerationVerdict v;
  v.set_approved(approved);
  v.set_moderator("op-1");
  return v;
}

} // namespace gost::testing
