// gostctl, stages: the stages (AdminService.ListStages) and the verbs on stages and offers
// (pause, resume, passivate, requeue).
#include "gostctl/cli.hpp"

#include <cstdio>
#include <string>

#include <google/protobuf/util/time_util.h>

namespace gost::ctl {

namespace {

int stages(const cli& c) {
  auto admin = admin_stub(c);
  grpc::ClientContext ctx;
  call_context(ctx, c);
  gost::v1::ListStagesRequest req;
  gost::v1::ListStagesResponse resp;
  auto s = admin->ListStages(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  std::printf("%-16s %-10s %-7s %9s %11s %9s %8s %9s %8s %17s %17s %7s %8s  %s\n", "stage",
              "registered", "state", "queued", "oldest due", "timers", "dead", "runs", "failed",
              "run p50/p99 ms", "process p50/p99", "max par", "rate/s", "interests");
  for (auto& st : resp.stages()) {
    std::string interests;
    for (auto& f : st.interests())
      interests += (interests.empty() ? "" : ",") + f;
    char run[32];
    char proc[32];
    std::snprintf(run, sizeof(run), "%.1f/%.1f", st.run_p50_ms(), st.run_p99_ms());
    std::snprintf(proc, sizeof(proc), "%.2f/%.2f", st.process_p50_ms(), st.process_p99_ms());
    std::printf("%-16s %-10s %-7s %9llu %10.1fs %9llu %8llu %9llu %8llu %17s %17s %7d %8s  %s%s\n",
                st.stage_id().c_str(), st.registered() ? "yes" : "NO",
                st.paused() ? "PAUSED" : "running", static_cast<unsigned long long>(st.queued()),
                static_cast<double>(st.oldest_due_age_ms()) / 1000,
                static_cast<unsigned long long>(st.timers()),
                static_cast<unsigned long long>(st.dead_letters()),
                static_cast<unsigned long long>(st.runs()),
                static_cast<unsigned long long>(st.failures()), run, proc, st.max_parallelism(),
                st.rate_limit() > 0 ? std::to_string(st.rate_limit()).c_str() : "-",
                interests.empty() ? "(all changes)" : interests.c_str(),
                st.blocking() ? " [blocking: own pool]" : "");
  }
  for (auto& st : resp.stages())
    if (st.paused())
      std::printf("\n%s paused by %s at %s (gostctl resume %s)", st.stage_id().c_str(),
                  st.paused_by().c_str(),
                  google::protobuf::util::TimeUtil::ToString(st.paused_at()).c_str(),
                  st.stage_id().c_str());
  std::printf("\nthis node: %llu runs committed, %llu failed, %llu redone after a conflict, "
              "%llu change storms cut, %llu offer actors resident, %llu write batches\n",
              static_cast<unsigned long long>(resp.stage_runs()),
              static_cast<unsigned long long>(resp.stage_failures()),
              static_cast<unsigned long long>(resp.stage_conflicts()),
              static_cast<unsigned long long>(resp.change_storms_cut()),
              static_cast<unsigned long long>(resp.resident_offer_actors()),
              static_cast<unsigned long long>(resp.write_batches()));
  return 0;
}

/// pause / resume STAGE, passivate ID, requeue ID STAGE.
int verb(gost::v1::AdminService::Stub& admin, const cli& c) {
  using namespace gost::v1;
  bool pause = c.cmd == "pause";
  if (pause || c.cmd == "resume") {
    if (!given(c, 1, "a stage id (gostctl stages lists them)"))
      return 2;
    StageVerbRequest req;
    req.set_stage_id(c.positional[0]);
    req.set_who(who(c));
    StageVerbResponse resp;
    auto call = [&](grpc::ClientContext* ctx, const StageVerbRequest& r, StageVerbResponse* o) {
      return pause ? admin.PauseStage(ctx, r, o) : admin.ResumeStage(ctx, r, o);
    };
    if (!verb_call(c, call, req, resp))
      return 1;
    if (pause)
      std::printf("stage %s %s: no run of it is in flight on %s; the other nodes follow\n",
                  req.stage_id().c_str(), resp.changed() ? "paused" : "was already paused",
                  resp.answered_by().c_str());
    else
      std::printf("stage %s %s\n", req.stage_id().c_str(),
                  resp.changed() ? "resumed: its backlog starts now" : "was not paused");
    return 0;
  }
  if (c.cmd == "passivate") {
    if (!given(c, 1, "an offer id"))
      return 2;
    PassivateOfferRequest req;
    req.set_offer_id(c.positional[0]);
    req.set_who(who(c));
    PassivateOfferResponse resp;
    auto call = [&](grpc::ClientContext* ctx, const PassivateOfferRequest& r,
                    PassivateOfferResponse* o) { return admin.PassivateOffer(ctx, r, o); };
    if (!verb_call(c, call, req, resp))
      return 1;
    std::printf("offer %s (shard %u): %s\n", req.offer_id().c_str(), resp.shard(),
                resp.was_resident() ? "its actor stops after what it holds" : "no actor held it");
    return 0;
  }
  // requeue ID STAGE
  if (!given(c, 2, "an offer id and a stage id"))
    return 2;
  RequeueOfferRequest req;
  req.set_offer_id(c.positional[0]);
  req.set_stage_id(c.positional[1]);
  req.set_who(who(c));
  RequeueOfferResponse resp;
  auto call = [&](grpc::ClientContext* ctx, const RequeueOfferRequest& r, RequeueOfferResponse* o) {
    return admin.RequeueOffer(ctx, r, o);
  };
  if (!verb_call(c, call, req, resp))
    return 1;
  std::printf("offer %s (shard %u) queued for %s, due %s\n", req.offer_id().c_str(), resp.shard(),
              req.stage_id().c_str(),
              google::protobuf::util::TimeUtil::ToString(resp.due_at()).c_str());
  return 0;
}

int verb_cmd(const cli& c) {
  auto admin = admin_stub(c);
  return verb(*admin, c);
}

} // namespace

std::vector<command> stage_commands() {
  return {
    {"stages", "stages", "", "per-stage queue lengths, timers, dead letters, runs, latency, paused",
     stages},
    {"pause", "stages", "STAGE", "pause a stage on every node (its runs do not start; persisted)",
     verb_cmd},
    {"resume", "stages", "STAGE", "resume it: its backlog starts at once", verb_cmd},
    {"passivate", "stages", "ID", "stop the actor holding an offer (the next event loads it again)",
     verb_cmd},
    {"requeue", "stages", "ID STAGE",
     "put an offer into a stage's queue, due now (the stage runs again)", verb_cmd},
  };
}

} // namespace gost::ctl
