// gostctl, scheduled actions: the list (actions), one action (action ID) and its verbs (action
// pause|resume|run-now ID), over ScheduledActionService.
#include "gostctl/cli.hpp"

#include <cstdio>
#include <cstdlib>

#include <google/protobuf/util/time_util.h>

#include "gost/v1/scheduled_actions.grpc.pb.h"
#include "gostctl/print.hpp"

namespace gost::ctl {

namespace {

int actions_cmd(const cli& c) {
  grpc::ClientContext ctx;
  call_context(ctx, c);
  auto actions = gost::v1::ScheduledActionService::NewStub(channel(c));
  if (c.cmd == "action" && c.positional.size() == 2) {
    auto& v = c.positional[0];
    using service = gost::v1::ScheduledActionService::Stub;
    grpc::Status (service::*call)(grpc::ClientContext*, const gost::v1::ScheduledActionVerbRequest&,
                                  gost::v1::ScheduledActionVerbResponse*) = nullptr;
    if (v == "pause")
      call = &service::Pause;
    else if (v == "resume")
      call = &service::Resume;
    else if (v == "run-now")
      call = &service::RunNow;
    if (call == nullptr) {
      std::fprintf(stderr, "gostctl action: `%s` is not a verb (pause, resume, run-now)\n",
                   v.c_str());
      return 2;
    }
    gost::v1::ScheduledActionVerbRequest req;
    req.set_id(c.positional[1]);
    req.set_who(who(c));
    gost::v1::ScheduledActionVerbResponse resp;
    auto s = ((*actions).*call)(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    std::printf("%s %s%s\n", c.positional[1].c_str(),
                v == "pause"    ? "paused"
                : v == "resume" ? "resumed"
                                : "runs now",
                resp.changed() ? "" : " (it was so already: nothing changed)");
    return 0;
  }
  if (c.cmd == "action") {
    if (c.positional.size() != 1) {
      std::fputs("gostctl action: give one scheduled action id, or a verb and an id\n", stderr);
      return 2;
    }
    gost::v1::GetScheduledActionRequest req;
    req.set_id(c.positional[0]);
    gost::v1::GetScheduledActionResponse resp;
    auto s = actions->Get(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    print_json(resp);
    return 0;
  }
  gost::v1::ListScheduledActionsRequest req;
  req.set_due(c.opts.count("due") != 0);
  req.set_failing(c.opts.count("failing") != 0);
  req.set_paused(c.opts.count("paused") != 0);
  req.set_after_id(opt(c, "after"));
  req.set_limit(static_cast<uint32_t>(std::atoi(opt(c, "limit", "100").c_str())));
  gost::v1::ListScheduledActionsResponse resp;
  auto s = actions->List(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  std::printf("%-32s %-24s %9s %8s  %s\n", "action", "next (UTC)", "successes", "failing",
              "last error");
  for (auto& a : resp.actions()) {
    auto& st = a.status();
    auto next =
      st.paused() ? std::string{"paused"}
      : st.finished()
        ? std::string{"-"}
        : google::protobuf::util::TimeUtil::ToString(
          google::protobuf::util::TimeUtil::MillisecondsToTimestamp(st.scheduled_at_ms()));
    std::printf("%-32s %-24s %9lld %8lld  %s\n", a.meta().id().c_str(), next.c_str(),
                static_cast<long long>(st.successes()),
                static_cast<long long>(st.failures_in_row()), st.last_error().c_str());
  }
  std::printf("%d action(s)%s\n", resp.actions_size(),
              resp.next_after_id().empty()
                ? ""
                : (" (next page: --after " + resp.next_after_id() + ")").c_str());
  return 0;
}

} // namespace

std::vector<command> action_commands() {
  return {
    {"actions", "scheduled actions", "[--due] [--failing] [--paused] [--after ID] [--limit N]",
     "scheduled actions by id: next time, successes, failures in a row,\n"
     "last error; --due only those due now, --failing only those whose\n"
     "last attempts failed, --paused only the paused ones",
     actions_cmd, "--due --failing --paused"},
    {"action", "scheduled actions", "ID | action pause|resume|run-now ID",
     "one scheduled action: spec, status, its live queue row and its\n"
     "recent attempts (newest first: when, occurrence, attempt, outcome,\n"
     "error, duration, node); pause: it fires nothing until resumed\n"
     "(logged with --who); resume: it fires again, occurrences missed\n"
     "while paused fire once, now; run-now: one attempt now, outside its\n"
     "schedule (which stays as it was)",
     actions_cmd},
  };
}

} // namespace gost::ctl
