// gostctl: the command-line client of a gost node (gRPC). Grows into the inspection console.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>

#include "gost/v1/admin.grpc.pb.h"
#include "gost/v1/feed_service.grpc.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/scheduled_actions.grpc.pb.h"
#include "gost/v1/task_service.grpc.pb.h"
#include "rpc/feed_csv.hpp"
#include "rpc/proto_types.hpp"

namespace {

using gost::v1::OfferService;

const char* usage =
  "gostctl - talk to a gost node over gRPC\n\n"
  "Usage: gostctl [--addr HOST:PORT] COMMAND [ARGS]\n\n"
  "Commands:\n"
  "  create [--json OFFER] [--seller S] [--ns N] [--external-id X] [--title T] [--price MINOR]\n"
  "         [--currency C] [--status STATUS] [--photos URL,URL,...]\n"
  "                       create an offer; prints it as JSON. --json is a gost.v1.Offer in\n"
  "                       proto3 JSON ('{\"title\":\"Bike\",\"price\":{\"amount_minor\":100}}');\n"
  "                       the other flags, when given, override its fields\n"
  "  get ID               print one offer as JSON\n"
  "  get --seller S [--ns N] --external-id X\n"
  "                       the same, by the seller's key\n"
  "  update ID [--json OFFER] [--title T] [--price MINOR] [--status STATUS]\n"
  "         [--photos URL,URL,...] [--expected-version V]\n"
  "                       change an offer: the top-level fields --json names replace the\n"
  "                       stored ones, then the flags apply; other fields are kept\n"
  "                       (--photos '' removes all)\n"
  "  delete ID [--expected-version V]\n"
  "  offer ID             inspect an offer: version, shard, whether an actor holds it and\n"
  "                       what it waits on (load, stage pool, writer), its last events\n"
  "                       (kind, source, stage, result, duration, version), the shard's\n"
  "                       epoch and write lag, stage states as JSON, queue entries, timers\n"
  "  history ID [--limit N] [--after TOKEN]\n"
  "                       the offer's committed changes, newest first: version, time, what\n"
  "                       made it (api, feed, a stage, state-api) and who, with the diff of\n"
  "                       the offer and of each stage state; --limit per page (default 20)\n"
  "  types                the protobuf types the node publishes (stage states, actor types)\n"
  "  entity KIND ID       inspect a durable entity of an actor type (a task, ...): version,\n"
  "                       lane, pending events, its state decoded, and, as `offer` shows,\n"
  "                       its actor's recent events (send, run), what it waits on, owner\n"
  "  trace ID [--for DURATION] [--max N] | trace --stage S [--for DURATION] [--max N]\n"
  "                       the offer's (or, with ID kind/id, a durable entity's: a task's\n"
  "                       key as `gostctl task` prints it) events as they happen, from\n"
  "                       whichever node owns it\n"
  "                       (followed across shard moves: `owner` lines), or every event of\n"
  "                       stage S on this node; until --max events (default 1000), --for\n"
  "                       (default 60s; 90s, 5m, 1h) or Ctrl-C; --json: one JSON per line\n"
  "  stages               per-stage queue lengths, timers, dead letters, runs, latency, paused\n"
  "  top [--once] [--interval SECONDS] [--all]\n"
  "                       per shard and per stage: resident actors, mailbox depth (largest\n"
  "                       first), runs/s, failures/s, backlog and age of the oldest due entry,\n"
  "                       write lag and batch size, lease epoch; refreshes every --interval\n"
  "                       (default 2) until Ctrl-C; --once prints one frame (rates over one\n"
  "                       interval, default 1 s); --all shows every alive node of the cluster;\n"
  "                       with image functions, their pools: workers, in flight, queued, rates\n"
  "  pause STAGE          pause a stage on every node (its runs do not start; persisted)\n"
  "  resume STAGE         resume it: its backlog starts at once\n"
  "  passivate ID         stop the actor holding an offer (the next event loads it again)\n"
  "  requeue ID STAGE     put an offer into a stage's queue, due now (the stage runs again)\n"
  "  deadletters [--stage S] [--since T] [--until T] [--limit N] [--after ID]\n"
  "                       the open dead letters, oldest first: id, shard, offer, stage,\n"
  "                       attempts, created, reason; --limit per page (default 100, at most\n"
  "                       the node's limits.page_size_max), --after the id a page ended at\n"
  "  retry-dead ID [ID...] | --stage S [--since T] [--until T]\n"
  "                       release dead letters and put each offer into its stage's queue,\n"
  "                       due now (the stage runs again); a filter must name something\n"
  "  discard-dead ID [ID...] | --stage S [--since T] [--until T]\n"
  "                       release dead letters without running the stage again\n"
  "  drain [NODE]         hand every shard of the node (default: the one at --addr) to the\n"
  "                       other nodes and take none until undrain; waits until done, printing\n"
  "                       the shards still held; refused when no other node is alive\n"
  "  undrain [NODE]       end a drain: the node takes its share of the shards again\n"
  "  nodes                cluster members: addresses, alive, heartbeat age, shards held\n"
  "  shards               every shard's lease: owner, epoch, heartbeat age, moves in progress\n"
  "  task ID              a task (TaskService.GetTask): state, pending events, results,\n"
  "                       inputs and results decoded with the node's published types, and\n"
  "                       its actor's recent events and what it waits on (as `entity`)\n"
  "  tasks --group G [--state S] [--after ID] [--limit N]\n"
  "                       the tasks of a group (in state S), by id\n"
  "  actions [--due] [--failing] [--paused] [--after ID] [--limit N]\n"
  "                       scheduled actions by id: next time, successes, failures in a row,\n"
  "                       last error; --due only those due now, --failing only those whose\n"
  "                       last attempts failed, --paused only the paused ones\n"
  "  action ID            one scheduled action: spec, status, its live queue row and its\n"
  "                       recent attempts (newest first: when, occurrence, attempt, outcome,\n"
  "                       error, duration, node)\n"
  "  action pause ID      the action fires nothing until resumed (logged with --who)\n"
  "  action resume ID     it fires again; occurrences missed while paused fire once, now\n"
  "  action run-now ID    one attempt now, outside its schedule (which stays as it was)\n"
  "  feeds --seller S [--removed]\n"
  "                       a seller's feeds (FeedService): namespace, kind, version, URL and\n"
  "                       period, next fetch, newest load; --removed lists removed ones too\n"
  "  feed-load SELLER LOAD_ID\n"
  "                       one load of a feed: status, origin, format, fatal error, statistics\n"
  "                       (the processor's counts and the offer store's answers) and its\n"
  "                       first 20 per-offer errors (a parsed feed's hidden ones included)\n"
  "  feed-errors SELLER LOAD_ID [--level error|warning] [--type T] [--csv]\n"
  "                       every per-offer error of a load, by external id: level, type, field,\n"
  "                       line, title, message; --csv prints them as the node's\n"
  "                       /feeds/errors.csv does (a header row, RFC 4180 quoting)\n"
  "  demo [--count N] [--concurrency C] [--status STATUS]\n"
  "                       create N offers (default 1000, status active) from C concurrent\n"
  "                       clients (default 16), read every one back, check it, print a summary\n\n"
  "Options:\n"
  "  --addr HOST:PORT     the node (default 127.0.0.1:50051, or GOST_ADDR)\n"
  "  --status STATUS      draft, active, inactive or banned (gost.v1.OfferStatus); stages such\n"
  "                       as `expire` act on active offers only\n"
  "  --photos URL,...     the offer's photos, in this order (Photo.order 1, 2, ...)\n"
  "  --token T            the node's `console.token` for the verbs (or GOST_TOKEN)\n"
  "  --who NAME           who asks (default: $USER), sent on every call (metadata x-gost-who):\n"
  "                       logged with a verb, recorded with a change in the offer's history\n"
  "  --since T, --until T a time: RFC 3339 (2026-11-26T17:00:00Z) or an age (90s, 30m, 2h,\n"
  "                       7d ago); --since is inclusive, --until exclusive\n"
  "Exit code: 0 on success, 1 when the node answered an error, 2 on bad usage.\n";

struct cli {
  std::string cmd;
  std::vector<std::string> positional;
  std::map<std::string, std::string> opts;
};

bool parse(int argc, char** argv, cli& out) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help")
      return false;
    if (a.rfind("--", 0) == 0) {
      auto eq = a.find('=');
      if (eq != std::string::npos)
        out.opts[a.substr(2, eq - 2)] = a.substr(eq + 1);
      else if (a == "--once" || a == "--all" || a == "--due" || a == "--failing" || a == "--paused"
               || a == "--csv" || a == "--removed"
               || (a == "--json" && out.cmd == "trace")) // flags without a value (create and
                                                         // update take --json JSON)
        out.opts[a.substr(2)] = "";
      else if (i + 1 < argc)
        out.opts[a.substr(2)] = argv[++i];
      else
        return false;
    } else if (out.cmd.empty()) {
      out.cmd = a;
    } else {
      out.positional.push_back(a);
    }
  }
  return !out.cmd.empty();
}

std::string opt(const cli& c, const std::string& k, const std::string& def = "") {
  auto i = c.opts.find(k);
  return i == c.opts.end() ? def : i->second;
}

void print_json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  std::fputs(out.c_str(), stdout);
}

int fail(const grpc::Status& s) {
  std::fprintf(stderr, "gostctl: %s: %s\n", std::to_string(s.error_code()).c_str(),
               s.error_message().c_str());
  return 1;
}

void set_deadline(grpc::ClientContext& ctx) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{30});
}

// --status: the statuses a client sets (DELETED is the result of DeleteOffer, not a choice).
bool status_from(const std::string& name, gost::v1::OfferStatus& out) {
  static const std::map<std::string, gost::v1::OfferStatus> names{
    {"draft", gost::v1::OFFER_STATUS_DRAFT},
    {"active", gost::v1::OFFER_STATUS_ACTIVE},
    {"inactive", gost::v1::OFFER_STATUS_INACTIVE},
    {"banned", gost::v1::OFFER_STATUS_BANNED},
  };
  auto i = names.find(name);
  if (i == names.end())
    return false;
  out = i->second;
  return true;
}

// Applies --status and --photos when given. False (after saying why) on a bad value.
bool apply_status_and_photos(const cli& c, const char* cmd, gost::v1::Offer& o) {
  if (c.opts.count("status") != 0) {
    gost::v1::OfferStatus st{};
    if (!status_from(opt(c, "status"), st)) {
      std::fprintf(stderr,
                   "gostctl %s: --status must be draft, active, inactive or banned, not `%s`\n",
                   cmd, opt(c, "status").c_str());
      return false;
    }
    o.set_status(st);
  }
  if (c.opts.count("photos") != 0) {
    // Comma-separated URLs; empty pieces are skipped, so `--photos ''` removes all photos.
    o.clear_photos();
    auto list = opt(c, "photos");
    size_t from = 0;
    while (from <= list.size()) {
      auto comma = list.find(',', from);
      if (comma == std::string::npos)
        comma = list.size();
      if (comma > from) {
        auto* p = o.add_photos();
        p->set_url(list.substr(from, comma - from));
        p->set_order(o.photos_size());
      }
      from = comma + 1;
    }
  }
  return true;
}

/// A whole-number option (--price, --expected-version) into `out` when given; false (after
/// naming it) when it is not one: a typo never becomes 0.
bool whole_opt(const cli& c, const char* name, int64_t& out) {
  if (c.opts.count(name) == 0)
    return true;
  auto text = opt(c, name);
  char* end = nullptr;
  errno = 0;
  auto v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0') {
    std::fprintf(stderr, "gostctl %s: --%s `%s` is not a whole number\n", c.cmd.c_str(), name,
                 text.c_str());
    return false;
  }
  out = v;
  return true;
}

bool ref_from(const cli& c, gost::v1::OfferRef& ref) {
  if (!c.positional.empty()) {
    ref.set_id(c.positional[0]);
    return true;
  }
  if (c.opts.count("seller") != 0 && c.opts.count("external-id") != 0) {
    auto* k = ref.mutable_key();
    k->set_seller_id(opt(c, "seller"));
    k->set_namespace_(opt(c, "ns"));
    k->set_external_id(opt(c, "external-id"));
    return true;
  }
  return false;
}

int demo(OfferService::Stub& stub, const cli& c) {
  int count = std::atoi(opt(c, "count", "1000").c_str());
  int conc = std::atoi(opt(c, "concurrency", "16").c_str());
  if (count <= 0 || conc <= 0) {
    std::fputs("gostctl demo: --count and --concurrency must be positive\n", stderr);
    return 2;
  }
  // Active by default: the stages (e.g. `expire`) act on active offers.
  gost::v1::OfferStatus status = gost::v1::OFFER_STATUS_ACTIVE;
  if (!status_from(opt(c, "status", "active"), status)) {
    std::fputs("gostctl demo: --status must be draft, active, inactive or banned\n", stderr);
    return 2;
  }
  std::atomic<int> next{0}, created{0}, read_back{0}, errors{0};
  std::atomic<bool> first_error_printed{false};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < conc; ++w) {
    workers.emplace_back([&] {
      for (int i = next++; i < count; i = next++) {
        gost::v1::CreateOfferRequest req;
        auto* o = req.mutable_offer();
        o->set_seller_id("demo-seller-" + std::to_string(i % 10));
        o->set_namespace_("demo");
        o->set_external_id("demo-" + std::to_string(i) + "-"
                           + std::to_string(t0.time_since_epoch().count()));
        o->set_title("Demo offer #" + std::to_string(i));
        o->mutable_price()->set_amount_minor(100'00 + i);
        o->mutable_price()->set_currency("RUB");
        o->set_status(status);
        gost::v1::CreateOfferResponse resp;
        grpc::ClientContext ctx;
        set_deadline(ctx);
        auto s = stub.CreateOffer(&ctx, req, &resp);
        if (!s.ok()) {
          if (!first_error_printed.exchange(true))
            fail(s);
          ++errors;
          continue;
        }
        ++created;
        gost::v1::GetOfferRequest g;
        g.mutable_ref()->set_id(resp.offer().id());
        gost::v1::GetOfferResponse gr;
        grpc::ClientContext gctx;
        set_deadline(gctx);
        s = stub.GetOffer(&gctx, g, &gr);
        // The content as created. Not the version or status: a stage may already have
        // changed the offer (e.g. `expire` with a short `stages.expire.after`).
        if (s.ok() && gr.offer().title() == o->title()
            && gr.offer().price().amount_minor() == o->price().amount_minor()
            && gr.offer().external_id() == o->external_id() && gr.offer().version() >= 1)
          ++read_back;
        else {
          if (!s.ok() && !first_error_printed.exchange(true))
            fail(s);
          ++errors;
        }
      }
    });
  }
  for (auto& t : workers)
    t.join();
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("demo: created %d %s offers and read back %d intact through gRPC in %.2fs "
              "(%.0f create+get pairs/s, %d clients); errors: %d\n",
              created.load(), opt(c, "status", "active").c_str(), read_back.load(), secs,
              created.load() / secs, conc, errors.load());
  return errors == 0 ? 0 : 1;
}

std::string who(const cli& c) {
  return opt(c, "who", std::getenv("USER") ? std::getenv("USER") : "");
}

/// Every call says who asks (metadata x-gost-who): the node logs it with a verb and records it
/// with a change in the offer's history.
void call_context(grpc::ClientContext& ctx, const cli& c) {
  set_deadline(ctx);
  if (auto w = who(c); !w.empty())
    ctx.AddMetadata("x-gost-who", w);
}

/// The node's console token and who asks, on every admin call (the verbs need them).
void admin_context(grpc::ClientContext& ctx, const cli& c) {
  call_context(ctx, c);
  auto token = opt(c, "token", std::getenv("GOST_TOKEN") ? std::getenv("GOST_TOKEN") : "");
  if (!token.empty())
    ctx.AddMetadata("x-gost-token", token);
}

using gost::runtime::rpc::type_pool;

/// The types the node publishes (AdminService.DescribeTypes), plus gostctl's own API messages
/// `envelopes` (a reply that holds Anys): states, inputs and results decode with the node's
/// files, never with types linked into gostctl, so a type gostctl was not built with decodes.
std::unique_ptr<type_pool>
node_types(gost::v1::AdminService::Stub& admin, const cli& c,
           const std::vector<const google::protobuf::Descriptor*>& envelopes = {}) {
  grpc::ClientContext ctx;
  admin_context(ctx, c);
  gost::v1::DescribeTypesResponse resp;
  auto s = admin.DescribeTypes(&ctx, gost::v1::DescribeTypesRequest{}, &resp);
  if (!s.ok())
    std::fprintf(stderr,
                 "gostctl: the node published no types (%s): states show as type URL "
                 "and size\n",
                 s.error_message().c_str());
  auto files = resp.files(); // the node's first: its version of a file wins
  std::set<std::string> have;
  for (auto& f : files.file())
    have.insert(f.name());
  auto own = gost::runtime::rpc::files_of(envelopes);
  for (auto& f : own.file())
    if (have.insert(f.name()).second)
      *files.add_file() = f;
  return std::make_unique<type_pool>(files);
}

/// A reply holding Anys, as JSON decoded through `pool` (print_json's format).
void print_decoded(const type_pool& pool, const google::protobuf::Message& m) {
  google::protobuf::Any any;
  any.PackFrom(m);
  std::string out;
  if (pool.to_json(any, out, true))
    std::fputs(out.c_str(), stdout);
  else
    print_json(m);
}

/// A field's change as history prints it.
std::string change_text(const gost::v1::FieldChange& c) {
  switch (c.kind()) {
    case gost::v1::FieldChange::ADDED: return c.path() + " added: " + c.after();
    case gost::v1::FieldChange::REMOVED: return c.path() + " removed: " + c.before();
    default: return c.path() + ": " + c.before() + " -> " + c.after();
  }
}

/// history ID [--limit N] [--after TOKEN]
int history(gost::v1::AdminService::Stub& admin, const cli& c) {
  if (c.positional.empty()) {
    std::fputs("gostctl history: give an offer id\n", stderr);
    return 2;
  }
  gost::v1::OfferHistoryRequest req;
  req.set_offer_id(c.positional[0]);
  if (c.opts.count("limit")) {
    char* end = nullptr;
    auto n = std::strtol(opt(c, "limit").c_str(), &end, 10);
    if (opt(c, "limit").empty() || *end != '\0' || n <= 0 || n > INT32_MAX) {
      std::fprintf(stderr, "gostctl history: --limit `%s` is not a page size (1 or more)\n",
                   opt(c, "limit").c_str());
      return 2;
    }
    req.set_page_size(static_cast<int32_t>(n));
  }
  req.set_page_token(opt(c, "after"));
  grpc::ClientContext ctx;
  admin_context(ctx, c);
  gost::v1::OfferHistoryResponse resp;
  auto s = admin.OfferHistory(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  if (resp.changes().empty()) {
    std::printf("offer %s: no changes kept%s\n", req.offer_id().c_str(),
                resp.enabled() ? "" : " (history.retention is 0 on the node: history is off)");
    return 0;
  }
  std::printf("offer %s: %d change(s), newest first\n", req.offer_id().c_str(),
              resp.changes_size());
  for (auto& ch : resp.changes()) {
    std::string what = ch.source();
    if (ch.deleted())
      what += ", deleted";
    else if (ch.first_kept())
      what += ch.version() == 1 ? ", created" : ", earlier changes no longer kept";
    std::printf("\n#%lld v%lld %s %s%s%s\n", static_cast<long long>(ch.id()),
                static_cast<long long>(ch.version()),
                google::protobuf::util::TimeUtil::ToString(ch.at()).c_str(), what.c_str(),
                ch.by().empty() ? "" : " by ", ch.by().c_str());
    for (auto& f : ch.offer())
      std::printf("  %s\n", change_text(f).c_str());
    for (auto& st : ch.states()) {
      if (!st.decoded()) {
        std::printf("  state %s: %s changed (%lld -> %lld bytes, type not published by the "
                    "node)\n",
                    st.stage_id().c_str(), st.type_url().c_str(),
                    static_cast<long long>(st.before_bytes()),
                    static_cast<long long>(st.after_bytes()));
        continue;
      }
      std::printf("  state %s (%s)%s\n", st.stage_id().c_str(), st.type_url().c_str(),
                  st.before_bytes() < 0  ? " new"
                  : st.after_bytes() < 0 ? " gone"
                                         : "");
      for (auto& f : st.changes())
        std::printf("    %s\n", change_text(f).c_str());
    }
  }
  if (!resp.next_page_token().empty())
    std::printf("\nmore: gostctl history %s --after %s\n", req.offer_id().c_str(),
                resp.next_page_token().c_str());
  return 0;
}

/// --json: a gost.v1.Offer in proto3 JSON into `out`; false (after naming the field or the
/// position protobuf's parser found wrong) when it is not one. `fields`: the top-level fields
/// it names.
bool offer_from_json(const cli& c, gost::v1::Offer& out, std::vector<std::string>& fields) {
  auto text = opt(c, "json");
  google::protobuf::util::JsonParseOptions o;
  auto st = google::protobuf::util::JsonStringToMessage(text, &out, o);
  if (!st.ok()) {
    std::fprintf(stderr, "gostctl %s: --json is not a gost.v1.Offer: %s\n", c.cmd.c_str(),
                 std::string{st.message()}.c_str());
    return false;
  }
  // Which top-level fields it names (also those set to their default), for an update.
  google::protobuf::Struct keys;
  if (google::protobuf::util::JsonStringToMessage(text, &keys).ok())
    for (auto& [k, v] : keys.fields()) {
      const auto* d = gost::v1::Offer::descriptor();
      const auto* f = d->FindFieldByName(k);
      if (f == nullptr)
        f = d->FindFieldByCamelcaseName(k);
      if (f != nullptr)
        fields.push_back(f->name());
    }
  return true;
}

double per_second(uint64_t now, uint64_t before, double secs) {
  return now > before && secs > 0 ? static_cast<double>(now - before) / secs : 0.0;
}

/// One frame of `top` for one node: `now` with rates against `before` (same node, earlier).
void print_top(const gost::v1::TopResponse& now, const gost::v1::TopResponse* before,
               const std::string& addr) {
  double secs = before != nullptr ? static_cast<double>(now.at_us() - before->at_us()) / 1e6 : 0;
  std::map<uint32_t, const gost::v1::ShardTop*> prev_shards;
  std::map<std::string, const gost::v1::StageTop*> prev_stages;
  if (before != nullptr) {
    for (auto& t : before->shards())
      prev_shards[t.shard()] = &t;
    for (auto& t : before->stages())
      prev_stages[t.stage_id()] = &t;
  }
  int64_t resident = 0;
  int64_t mailbox = 0;
  uint64_t runs = 0;
  uint64_t failures = 0;
  for (auto& t : now.shards()) {
    resident += t.resident();
    mailbox += t.mailbox();
    runs += t.runs();
    failures += t.failures();
  }
  std::printf("node %s (%s): %d shard(s), resident=%lld mailbox=%lld runs=%llu failures=%llu"
              " (rates over %.1fs)\n",
              now.node_id().c_str(), addr.c_str(), now.shards_size(),
              static_cast<long long>(resident), static_cast<long long>(mailbox),
              static_cast<unsigned long long>(runs), static_cast<unsigned long long>(failures),
              secs);
  std::printf("\n%6s %8s %9s %8s %8s %8s %8s %8s %12s %9s %7s\n", "shard", "epoch", "resident",
              "mailbox", "runs/s", "fail/s", "running", "backlog", "oldest due", "wlag ms",
              "wbatch");
  for (auto& t : now.shards()) {
    auto p = prev_shards.find(t.shard());
    const gost::v1::ShardTop* b = p == prev_shards.end() ? nullptr : p->second;
    std::printf("%6u %8lld %9lld %8lld %8.1f %8.1f %8lld %8lld %10.1fs %9lld %7llu\n", t.shard(),
                static_cast<long long>(t.epoch()), static_cast<long long>(t.resident()),
                static_cast<long long>(t.mailbox()),
                b != nullptr ? per_second(t.runs(), b->runs(), secs) : 0.0,
                b != nullptr ? per_second(t.failures(), b->failures(), secs) : 0.0,
                static_cast<long long>(t.running()), static_cast<long long>(t.backlog()),
                static_cast<double>(t.oldest_due_age_ms()) / 1000,
                static_cast<long long>(t.write_lag_ms()),
                static_cast<unsigned long long>(t.write_batch()));
  }
  std::printf("\n%-20s %-7s %9s %12s %8s %8s %8s\n", "stage", "state", "queued", "oldest due",
              "runs/s", "fail/s", "dead");
  for (auto& t : now.stages()) {
    auto p = prev_stages.find(t.stage_id());
    const gost::v1::StageTop* b = p == prev_stages.end() ? nullptr : p->second;
    std::printf("%-20s %-7s %9llu %10.1fs %8.1f %8.1f %8llu\n", t.stage_id().c_str(),
                t.paused() ? "PAUSED" : "running", static_cast<unsigned long long>(t.queued()),
                static_cast<double>(t.oldest_due_age_ms()) / 1000,
                b != nullptr ? per_second(t.runs(), b->runs(), secs) : 0.0,
                b != nullptr ? per_second(t.failures(), b->failures(), secs) : 0.0,
                static_cast<unsigned long long>(t.dead_letters()));
  }
  if (now.images_size() == 0)
    return;
  std::map<std::string, const gost::v1::ImageTop*> prev_images;
  if (before != nullptr)
    for (auto& t : before->images())
      prev_images[t.function()] = &t;
  std::printf("\n%-12s %7s %9s %8s %8s %8s %8s %8s %8s %8s\n", "image fn", "workers", "in flight",
              "waiting", "queued", "done/s", "fail/s", "hit/s", "miss/s", "dup/s");
  for (auto& t : now.images()) {
    auto p = prev_images.find(t.function());
    const gost::v1::ImageTop* b = p == prev_images.end() ? nullptr : p->second;
    auto rate = [&](uint64_t v, uint64_t (gost::v1::ImageTop::*prev)() const) {
      return b != nullptr ? per_second(v, (b->*prev)(), secs) : 0.0;
    };
    std::printf("%-12s %7lld %9lld %8lld %8s %8.1f %8.1f %8.1f %8.1f %8.1f\n", t.function().c_str(),
                static_cast<long long>(t.workers()), static_cast<long long>(t.in_flight()),
                static_cast<long long>(t.waiting()),
                t.queued() < 0 ? "-" : std::to_string(t.queued()).c_str(),
                rate(t.computed(), &gost::v1::ImageTop::computed),
                rate(t.failed(), &gost::v1::ImageTop::failed),
                rate(t.cache_hits(), &gost::v1::ImageTop::cache_hits),
                rate(t.cache_misses(), &gost::v1::ImageTop::cache_misses),
                rate(t.skipped(), &gost::v1::ImageTop::skipped));
  }
}

int top(const cli& c, const std::string& addr) {
  bool once = c.opts.count("once") != 0;
  double interval = std::atof(opt(c, "interval", once ? "1" : "2").c_str());
  if (interval <= 0 || interval > 3600) {
    std::fputs("gostctl top: --interval must be a number of seconds in (0, 3600]\n", stderr);
    return 2;
  }
  // The nodes to show: the one at --addr, or with --all every alive member it lists.
  std::vector<std::string> addrs{addr};
  if (c.opts.count("all") != 0) {
    auto admin = gost::v1::AdminService::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    admin_context(ctx, c);
    gost::v1::ListNodesResponse nodes;
    auto s = admin->ListNodes(&ctx, gost::v1::ListNodesRequest{}, &nodes);
    if (!s.ok())
      return fail(s);
    addrs.clear();
    for (auto& n : nodes.nodes())
      if (n.alive())
        addrs.push_back(n.grpc_addr());
  }
  std::vector<std::unique_ptr<gost::v1::AdminService::Stub>> stubs;
  for (auto& a : addrs)
    stubs.push_back(
      gost::v1::AdminService::NewStub(grpc::CreateChannel(a, grpc::InsecureChannelCredentials())));
  auto sample = [&](std::vector<gost::v1::TopResponse>& out) -> grpc::Status {
    out.assign(stubs.size(), {});
    for (size_t i = 0; i < stubs.size(); ++i) {
      grpc::ClientContext ctx;
      admin_context(ctx, c);
      auto s = stubs[i]->Top(&ctx, gost::v1::TopRequest{}, &out[i]);
      if (!s.ok())
        return grpc::Status{s.error_code(), addrs[i] + ": " + s.error_message()};
    }
    return grpc::Status::OK;
  };
  std::vector<gost::v1::TopResponse> before;
  std::vector<gost::v1::TopResponse> now;
  auto s = sample(before);
  if (!s.ok())
    return fail(s);
  auto wait = std::chrono::microseconds{static_cast<int64_t>(interval * 1e6)};
  for (;;) {
    std::this_thread::sleep_for(wait);
    s = sample(now);
    if (!s.ok())
      return fail(s);
    if (!once)
      std::fputs("\033[H\033[2J", stdout); // like top: the frame replaces the last one
    for (size_t i = 0; i < now.size(); ++i) {
      if (i > 0)
        std::printf("\n");
      print_top(now[i], &before[i], addrs[i]);
    }
    std::fflush(stdout);
    if (once)
      return 0;
    before.swap(now);
  }
}

/// Whether the command got `n` positional arguments; else says what to give (exit code 2).
bool given(const cli& c, size_t n, const char* what) {
  if (c.positional.size() >= n)
    return true;
  std::fprintf(stderr, "gostctl %s: give %s\n", c.cmd.c_str(), what);
  return false;
}

/// A verb's call with the token; prints the error and returns false when it failed.
template <class Req, class Resp, class Call>
bool verb_call(const cli& c, Call call, const Req& req, Resp& resp) {
  grpc::ClientContext ctx;
  admin_context(ctx, c);
  auto s = call(&ctx, req, &resp);
  if (!s.ok())
    fail(s);
  return s.ok();
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

/// drain / undrain [NODE]: the node at --addr, or NODE found among the cluster's members
/// (gostctl nodes) and asked at its gRPC address. A drain prints the shards it still holds
/// every second while it waits (on stderr).
int drain_verb(gost::v1::AdminService::Stub& admin, const cli& c) {
  using namespace gost::v1;
  bool drain = c.cmd == "drain";
  std::unique_ptr<AdminService::Stub> other;
  AdminService::Stub* target = &admin;
  DrainNodeRequest req;
  req.set_who(who(c));
  if (!c.positional.empty()) {
    req.set_node_id(c.positional[0]);
    grpc::ClientContext ctx;
    set_deadline(ctx);
    ListNodesResponse nodes;
    if (auto s = admin.ListNodes(&ctx, ListNodesRequest{}, &nodes); !s.ok())
      return fail(s);
    auto n = std::find_if(nodes.nodes().begin(), nodes.nodes().end(),
                          [&](const NodeInfo& x) { return x.node_id() == req.node_id(); });
    if (n == nodes.nodes().end()) {
      std::fprintf(stderr, "gostctl %s: no node %s in the cluster (gostctl nodes lists them)\n",
                   c.cmd.c_str(), req.node_id().c_str());
      return 1;
    }
    if (n->node_id() != nodes.answered_by()) {
      other = AdminService::NewStub(
        grpc::CreateChannel(n->grpc_addr(), grpc::InsecureChannelCredentials()));
      target = other.get();
    }
  }
  std::atomic<bool> done{false};
  std::thread progress;
  if (drain)
    progress = std::thread([&] {
      // The node's own count of the shards it still holds, as ListShards sees the leases.
      long last = -1;
      while (!done.load()) {
        for (int i = 0; i < 10 && !done.load(); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds{100});
        if (done.load())
          break;
        grpc::ClientContext ctx;
        set_deadline(ctx);
        ListShardsResponse shards;
        if (!target->ListShards(&ctx, ListShardsRequest{}, &shards).ok())
          continue;
        std::string node = req.node_id();
        if (node.empty()) { // the node at --addr: the one whose leases are marked leaving
          grpc::ClientContext nctx;
          set_deadline(nctx);
          ListNodesResponse nodes;
          if (!target->ListNodes(&nctx, ListNodesRequest{}, &nodes).ok())
            continue;
          node = nodes.answered_by();
        }
        long held =
          std::count_if(shards.shards().begin(), shards.shards().end(),
                        [&](const ShardInfo& s) { return s.owner() == node && !s.free(); });
        if (held != last)
          std::fprintf(stderr, "draining %s: %ld shard(s) still held\n", node.c_str(), held);
        last = held;
      }
    });
  grpc::ClientContext ctx;
  admin_context(ctx, c);
  // Every shard drains at once, each for at most 30 s before the node cuts it.
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{120});
  DrainNodeResponse resp;
  auto s = drain ? target->DrainNode(&ctx, req, &resp) : target->UndrainNode(&ctx, req, &resp);
  done = true;
  if (progress.joinable())
    progress.join();
  if (!s.ok())
    return fail(s);
  if (drain)
    std::printf("node %s drained: %u shard(s) handed off; it takes none until `gostctl undrain "
                "%s`\n",
                resp.node_id().c_str(), resp.handed_off(), resp.node_id().c_str());
  else
    std::printf("node %s %s\n", resp.node_id().c_str(),
                resp.changed() ? "undrained: it takes its share of the shards again"
                               : "was not drained");
  return 0;
}

/// --since / --until into `out` (unset when not given); false, after saying why, when it is
/// neither RFC 3339 nor an age such as 30m.
bool time_opt(const cli& c, const char* name, google::protobuf::Timestamp* out, bool& given) {
  auto text = opt(c, name);
  given = c.opts.count(name) > 0;
  if (!given)
    return true;
  if (google::protobuf::util::TimeUtil::FromString(text, out))
    return true;
  static const std::map<char, int64_t> unit_s{{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
  char* end = nullptr;
  auto n = text.empty() ? -1 : std::strtoll(text.c_str(), &end, 10);
  if (n >= 0 && end != nullptr && end != text.c_str() && unit_s.count(*end) && end[1] == '\0') {
    auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
    *out = google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(
      now - n * unit_s.at(*end) * 1000000);
    return true;
  }
  std::fprintf(stderr,
               "gostctl %s: --%s `%s` is neither an RFC 3339 time (2026-11-26T17:00:00Z) nor an "
               "age (90s, 30m, 2h, 7d)\n",
               c.cmd.c_str(), name, text.c_str());
  return false;
}

/// --stage, --since, --until into a filter; false on a bad one (exit code 2).
bool dead_filter(const cli& c, gost::v1::DeadLetterFilter& f) {
  f.set_stage_id(opt(c, "stage"));
  bool given = false;
  if (!time_opt(c, "since", f.mutable_since(), given))
    return false;
  if (!given)
    f.clear_since();
  if (!time_opt(c, "until", f.mutable_until(), given))
    return false;
  if (!given)
    f.clear_until();
  return true;
}

/// A whole decimal number >= 1 (a dead letter id, a page size); false when `text` is not one.
bool positive(const std::string& text, int64_t& out) {
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(text.c_str(), &end, 10);
  return !text.empty() && errno == 0 && *end == '\0' && out > 0;
}

/// deadletters [--stage S] [--since T] [--until T] [--limit N] [--after ID]
int list_dead(gost::v1::AdminService::Stub& admin, const cli& c) {
  gost::v1::ListDeadLettersRequest req;
  if (!dead_filter(c, *req.mutable_filter()))
    return 2;
  int64_t n = 0;
  if (c.opts.count("limit")) {
    if (!positive(opt(c, "limit"), n) || n > INT32_MAX) {
      std::fprintf(stderr, "gostctl deadletters: --limit `%s` is not a page size (1 or more)\n",
                   opt(c, "limit").c_str());
      return 2;
    }
    req.set_page_size(static_cast<int32_t>(n));
  }
  if (c.opts.count("after")) {
    if (!positive(opt(c, "after"), n)) {
      std::fprintf(stderr, "gostctl deadletters: --after `%s` is not a dead letter id\n",
                   opt(c, "after").c_str());
      return 2;
    }
    req.set_page_token(opt(c, "after"));
  }
  grpc::ClientContext ctx;
  admin_context(ctx, c);
  gost::v1::ListDeadLettersResponse resp;
  auto s = admin.ListDeadLetters(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  if (resp.letters().empty()) {
    auto& f = req.filter();
    bool filtered = !f.stage_id().empty() || f.has_since() || f.has_until();
    std::printf("no open dead letters%s\n", filtered ? " match" : "");
    return 0;
  }
  std::printf("%-8s %-5s %-36s %-16s %-8s %-20s %s\n", "id", "shard", "offer", "stage", "attempts",
              "created", "reason");
  for (auto& d : resp.letters())
    std::printf("%-8lld %-5u %-36s %-16s %-8d %-20s %s\n", static_cast<long long>(d.id()),
                d.shard(), d.offer_id().c_str(), d.stage_id().c_str(), d.attempts(),
                google::protobuf::util::TimeUtil::ToString(d.created_at()).substr(0, 19).c_str(),
                d.reason().c_str());
  if (!resp.next_page_token().empty())
    std::printf("more: gostctl deadletters --after %s (with the same filter)\n",
                resp.next_page_token().c_str());
  return 0;
}

/// retry-dead / discard-dead ID... | --stage S [--since T] [--until T]
int dead_verb(gost::v1::AdminService::Stub& admin, const cli& c) {
  bool retry = c.cmd == "retry-dead";
  gost::v1::DeadLettersVerbRequest req;
  for (auto& p : c.positional) {
    int64_t id = 0;
    if (!positive(p, id)) {
      std::fprintf(stderr,
                   "gostctl %s: `%s` is not a dead letter id (gostctl deadletters lists "
                   "them)\n",
                   c.cmd.c_str(), p.c_str());
      return 2;
    }
    req.add_ids(id);
  }
  if (!dead_filter(c, *req.mutable_filter()))
    return 2;
  auto& f = req.filter();
  if (req.ids().empty() && f.stage_id().empty() && !f.has_since() && !f.has_until()) {
    std::fprintf(stderr,
                 "gostctl %s: give dead letter ids, or --stage S (and/or --since, "
                 "--until); there is no `all`\n",
                 c.cmd.c_str());
    return 2;
  }
  req.set_who(who(c));
  gost::v1::DeadLettersVerbResponse resp;
  auto call = [&](grpc::ClientContext* ctx, const gost::v1::DeadLettersVerbRequest& r,
                  gost::v1::DeadLettersVerbResponse* o) {
    return retry ? admin.RetryDeadLetters(ctx, r, o) : admin.DiscardDeadLetters(ctx, r, o);
  };
  if (!verb_call(c, call, req, resp))
    return 1;
  if (retry)
    std::printf("%llu dead letter(s) released, %llu offer(s) queued again, due now\n",
                static_cast<unsigned long long>(resp.released()),
                static_cast<unsigned long long>(resp.requeued()));
  else
    std::printf("%llu dead letter(s) discarded\n",
                static_cast<unsigned long long>(resp.released()));
  return 0;
}

} // namespace

/// "60s", "5m", "1h", "250ms" or plain seconds -> milliseconds; -1 when not a duration.
int64_t duration_ms(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  auto n = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || n < 0)
    return -1;
  std::string unit{end};
  if (unit.empty() || unit == "s")
    return n * 1000;
  if (unit == "ms")
    return n;
  if (unit == "m")
    return n * 60'000;
  if (unit == "h")
    return n * 3'600'000;
  return -1;
}

std::string short_time(const google::protobuf::Timestamp& t) {
  auto text = google::protobuf::util::TimeUtil::ToString(t); // 2026-11-26T17:00:00.123456Z
  auto pos = text.find('T');
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

void print_event(const gost::v1::TraceEvent& e, bool with_offer) {
  if (e.kind() == "owner") {
    std::printf("-- owner changed: %s %s (shard %u) is now served by node %s\n",
                e.offer_id().empty() ? "entity" : "offer",
                e.offer_id().empty() ? e.entity_key().c_str() : e.offer_id().c_str(), e.shard(),
                e.node().c_str());
    return;
  }
  std::printf("  %-17s %s%s%-12s %-7s %-8s %-14s %-9s %8lld us  v%lld\n",
              short_time(e.at()).c_str(),
              !with_offer            ? ""
              : e.offer_id().empty() ? e.entity_key().c_str()
                                     : e.offer_id().c_str(),
              with_offer ? " " : "", e.node().c_str(), e.kind().c_str(), e.source().c_str(),
              e.stage().empty() ? "-" : e.stage().c_str(), e.result().c_str(),
              static_cast<long long>(e.duration_us()), static_cast<long long>(e.version()));
}

/// What an inspection tells of the actor on the owner node (InspectOffer, InspectEntity):
/// residency, owner, epoch, write lag, what it waits on, the event in progress, recent events.
template <class Response>
void print_activity(const Response& resp) {
  if (!resp.owner().empty()) {
    std::printf("owner %s  epoch %lld  write lag %lld ms", resp.owner().c_str(),
                static_cast<long long>(resp.epoch()), static_cast<long long>(resp.write_lag_ms()));
    if (resp.resident())
      std::printf("  waiting on %s%s", resp.waiting().c_str(),
                  resp.waiting() == "nothing" || resp.waiting().empty()
                    ? ""
                    : (" for " + std::to_string(resp.waiting_ms()) + " ms").c_str());
    std::printf("\n");
  }
  if (resp.has_current()) {
    std::printf("in progress:\n");
    print_event(resp.current(), false);
  }
  if (resp.resident()) {
    std::printf("recent events (oldest first; time, node, kind, source, stage, result, "
                "duration, version):\n");
    if (resp.recent().empty())
      std::printf("  (none)\n");
    for (auto& e : resp.recent())
      print_event(e, false);
  }
}

/// Residency as one phrase (an inspection's mailbox is -1 when the actor was busy).
template <class Response>
std::string residency(const Response& resp) {
  if (!resp.resident())
    return "not resident";
  return resp.mailbox() >= 0
           ? "resident, " + std::to_string(resp.mailbox()) + " message(s) in its mailbox"
           : std::string{"resident, busy in an event"};
}

int trace(gost::v1::AdminService::Stub& admin, const cli& c) {
  gost::v1::TraceRequest req;
  if (!c.positional.empty()) {
    // kind/id names a durable entity (a task's key: gostctl task ID prints it); offer ids
    // never hold a '/'.
    if (c.positional[0].find('/') != std::string::npos)
      req.set_entity_key(c.positional[0]);
    else
      req.set_offer_id(c.positional[0]);
  }
  req.set_stage_id(opt(c, "stage"));
  if (c.positional.empty() == req.stage_id().empty()) {
    std::fputs("gostctl trace: give an offer id or an entity key (kind/id), or --stage S (not "
               "both)\n",
               stderr);
    return 2;
  }
  if (c.opts.count("for") != 0) {
    auto ms = duration_ms(opt(c, "for"));
    if (ms <= 0) {
      std::fprintf(stderr, "gostctl trace: --for `%s` is not a duration (90s, 5m, 1h)\n",
                   opt(c, "for").c_str());
      return 2;
    }
    req.set_for_ms(ms);
  }
  if (c.opts.count("max") != 0) {
    char* end = nullptr;
    auto n = std::strtoll(opt(c, "max").c_str(), &end, 10);
    if (*end != '\0' || n <= 0) {
      std::fprintf(stderr, "gostctl trace: --max `%s` is not a positive number\n",
                   opt(c, "max").c_str());
      return 2;
    }
    req.set_max_events(n);
  }
  bool json = c.opts.count("json") != 0;
  grpc::ClientContext ctx; // no deadline: the node ends the trace at --for
  auto reader = admin.Trace(&ctx, req);
  if (!json)
    std::printf("tracing %s %s (until %lld events or %lld s; Ctrl-C stops)\n",
                !req.stage_id().empty()   ? "stage"
                : !req.offer_id().empty() ? "offer"
                                          : "entity",
                !req.stage_id().empty()   ? req.stage_id().c_str()
                : !req.offer_id().empty() ? req.offer_id().c_str()
                                          : req.entity_key().c_str(),
                static_cast<long long>(req.max_events() ? req.max_events() : 1000),
                static_cast<long long>((req.for_ms() ? req.for_ms() : 60'000) / 1000));
  std::fflush(stdout);
  gost::v1::TraceEvent e;
  long n = 0;
  while (reader->Read(&e)) {
    if (json) {
      std::string out;
      google::protobuf::util::JsonPrintOptions o;
      o.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(e, &out, o);
      std::printf("%s\n", out.c_str());
    } else {
      print_event(e, !req.stage_id().empty());
    }
    std::fflush(stdout);
    if (e.kind() != "owner")
      ++n;
  }
  auto s = reader->Finish();
  if (!s.ok())
    return fail(s);
  if (!json)
    std::printf("trace ended: %ld event(s)\n", n);
  return 0;
}

/// The feed verbs: feeds --seller S, feed-load SELLER LOAD_ID, feed-errors SELLER LOAD_ID.
int feeds_cmd(const cli& c, const std::string& addr) {
  using google::protobuf::util::TimeUtil;
  using gost::v1::FeedService;
  auto feeds = FeedService::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  auto when = [](const google::protobuf::Timestamp& t, bool set) {
    return set ? TimeUtil::ToString(t).substr(0, 19) : std::string{"-"};
  };
  if (c.cmd == "feeds") {
    if (opt(c, "seller").empty()) {
      std::fputs("gostctl feeds: give --seller S\n", stderr);
      return 2;
    }
    gost::v1::ListFeedsRequest req;
    req.set_seller_id(opt(c, "seller"));
    req.set_include_removed(c.opts.count("removed") != 0);
    gost::v1::ListFeedsResponse resp;
    grpc::ClientContext ctx;
    call_context(ctx, c);
    auto s = feeds->ListFeeds(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    std::printf("%-24s %-7s %7s %-19s %-19s %10s  %s\n", "namespace", "kind", "version",
                "next fetch (UTC)", "last fetch (UTC)", "last load", "url (period)");
    for (auto& f : resp.feeds()) {
      auto& st = f.settings();
      auto kind = gost::v1::FeedSettings::Kind_Name(st.kind());
      auto url = st.url().empty() ? std::string{"-"}
                                  : st.url() + " (" + TimeUtil::ToString(st.period()) + ")";
      std::printf(
        "%-24s %-7s %7lld %-19s %-19s %10lld  %s%s\n", f.namespace_().c_str(), kind.c_str(),
        static_cast<long long>(f.version()), when(f.next_fetch_at(), f.has_next_fetch_at()).c_str(),
        when(f.last_fetched_at(), f.has_last_fetched_at()).c_str(),
        static_cast<long long>(f.last_load_id()), url.c_str(), f.removed() ? "  [removed]" : "");
    }
    std::printf("%d feed(s)\n", resp.feeds_size());
    return 0;
  }
  if (!given(c, 2, "SELLER and LOAD_ID"))
    return 2;
  int64_t load_id = 0;
  if (!positive(c.positional[1], load_id)) {
    std::fprintf(stderr, "gostctl %s: LOAD_ID `%s` is not a load id\n", c.cmd.c_str(),
                 c.positional[1].c_str());
    return 2;
  }
  // One page of errors after `after` (external id, error id).
  auto page = [&](int32_t limit, const gost::v1::OfferError* after,
                  gost::v1::ListErrorsResponse& resp) {
    gost::v1::ListErrorsRequest req;
    req.set_seller_id(c.positional[0]);
    req.set_load_id(load_id);
    req.set_level(opt(c, "level"));
    req.set_type(opt(c, "type"));
    req.set_limit(limit);
    req.set_include_hidden(true); // operators see what sellers of parsed feeds do not
    if (after != nullptr) {
      req.set_after_external_id(after->external_id());
      req.set_after_error_id(after->error_id());
    }
    grpc::ClientContext ctx;
    call_context(ctx, c);
    return feeds->ListErrors(&ctx, req, &resp);
  };
  auto print_error = [](const gost::v1::OfferError& e) {
    std::printf("%-24s %5lld %-7s %-16s %-16s %6lld  %s%s%s\n", e.external_id().c_str(),
                static_cast<long long>(e.error_id()), e.level().c_str(), e.type().c_str(),
                e.field().c_str(), static_cast<long long>(e.line()), e.message().c_str(),
                e.title().empty() ? "" : "  | ", e.title().c_str());
  };
  auto error_head = [] {
    std::printf("%-24s %5s %-7s %-16s %-16s %6s  %s\n", "external_id", "id", "level", "type",
                "field", "line", "message | title");
  };
  if (c.cmd == "feed-load") {
    gost::v1::GetLoadRequest req;
    req.set_seller_id(c.positional[0]);
    req.set_load_id(load_id);
    gost::v1::GetLoadResponse resp;
    grpc::ClientContext ctx;
    call_context(ctx, c);
    auto s = feeds->GetLoad(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    auto& l = resp.load();
    std::printf("load %lld of %s/%s (feed version %lld): %s\n", static_cast<long long>(l.load_id()),
                l.seller_id().c_str(), l.namespace_().c_str(),
                static_cast<long long>(l.feed_version()),
                gost::v1::FeedLoad::Status_Name(l.status()).c_str());
    std::printf("origin %s%s%s  format %s  attempts %d\n", l.origin().c_str(),
                l.source_url().empty() ? "" : "  from ", l.source_url().c_str(),
                l.format().empty() ? "-" : l.format().c_str(), l.attempts());
    std::printf("file %s  created %s  updated %s\n", l.sha256().empty() ? "-" : l.sha256().c_str(),
                when(l.created_at(), true).c_str(), when(l.updated_at(), true).c_str());
    if (!l.error().empty())
      std::printf("error (%s): %s\n", l.error_kind().empty() ? "-" : l.error_kind().c_str(),
                  l.error().c_str());
    auto& st = l.statistics();
    std::printf("offers %lld  sent %lld  rejected here %lld  duplicates %lld  warnings %lld  "
                "batches %d  bytes %lld\n",
                static_cast<long long>(st.offers()), static_cast<long long>(st.sent()),
                static_cast<long long>(st.rejected_here()), static_cast<long long>(st.duplicates()),
                static_cast<long long>(st.warnings()), st.batches(),
                static_cast<long long>(st.bytes()));
    std::printf("store: added %lld  updated %lld  unchanged %lld  deleted %lld  made manual %lld  "
                "rejected %lld\n",
                static_cast<long long>(st.added()), static_cast<long long>(st.updated()),
                static_cast<long long>(st.unchanged()), static_cast<long long>(st.deleted()),
                static_cast<long long>(st.made_manual()), static_cast<long long>(st.rejected()));
    gost::v1::ListErrorsResponse errors;
    auto es = page(20, nullptr, errors);
    if (!es.ok())
      return fail(es);
    std::printf("\n%lld error(s)%s\n", static_cast<long long>(errors.total()),
                errors.total() > errors.errors_size() ? " (the first 20; all: gostctl feed-errors)"
                                                      : "");
    if (errors.errors_size() > 0)
      error_head();
    for (auto& e : errors.errors())
      print_error(e);
    return 0;
  }
  // feed-errors: every page, printed as it comes.
  bool csv = c.opts.count("csv") != 0;
  if (csv)
    std::fputs(gost::runtime::rpc::offer_errors_csv_header().c_str(), stdout);
  else
    error_head();
  gost::v1::OfferError last;
  bool any = false;
  int64_t total = 0;
  for (;;) {
    gost::v1::ListErrorsResponse resp;
    auto s = page(1000, any ? &last : nullptr, resp);
    if (!s.ok())
      return fail(s);
    total = resp.total();
    for (auto& e : resp.errors()) {
      if (csv)
        std::fputs(gost::runtime::rpc::offer_error_csv_row(e).c_str(), stdout);
      else
        print_error(e);
    }
    if (resp.errors_size() < 1000)
      break;
    last = *resp.errors().rbegin();
    any = true;
  }
  if (!csv)
    std::printf("%lld error(s)\n", static_cast<long long>(total));
  return 0;
}

int main(int argc, char** argv) {
  cli c;
  if (!parse(argc, argv, c)) {
    std::fputs(usage, argc > 1 && std::string{argv[1]} != "--help" && std::string{argv[1]} != "-h"
                        ? stderr
                        : stdout);
    return argc > 1 && std::string{argv[1]} != "--help" && std::string{argv[1]} != "-h" ? 2 : 0;
  }
  auto addr =
    opt(c, "addr", std::getenv("GOST_ADDR") ? std::getenv("GOST_ADDR") : "127.0.0.1:50051");
  auto stub = OfferService::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  call_context(ctx, c);
  if (c.cmd == "create") {
    gost::v1::CreateOfferRequest req;
    auto* o = req.mutable_offer();
    std::vector<std::string> named;
    if (c.opts.count("json") != 0 && !offer_from_json(c, *o, named))
      return 2;
    // The flags given override what --json holds.
    if (c.opts.count("seller") != 0)
      o->set_seller_id(opt(c, "seller"));
    if (c.opts.count("ns") != 0)
      o->set_namespace_(opt(c, "ns"));
    if (c.opts.count("external-id") != 0)
      o->set_external_id(opt(c, "external-id"));
    if (c.opts.count("title") != 0)
      o->set_title(opt(c, "title"));
    int64_t price = 0;
    if (!whole_opt(c, "price", price))
      return 2;
    if (c.opts.count("price") != 0) {
      o->mutable_price()->set_amount_minor(price);
      o->mutable_price()->set_currency(opt(c, "currency", "RUB"));
    }
    if (!apply_status_and_photos(c, "create", *o))
      return 2;
    gost::v1::CreateOfferResponse resp;
    auto s = stub->CreateOffer(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    print_json(resp.offer());
    return 0;
  }
  if (c.cmd == "get") {
    gost::v1::GetOfferRequest req;
    if (!ref_from(c, *req.mutable_ref())) {
      std::fputs("gostctl get: give an offer id, or --seller and --external-id\n", stderr);
      return 2;
    }
    gost::v1::GetOfferResponse resp;
    auto s = stub->GetOffer(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    print_json(resp.offer());
    return 0;
  }
  if (c.cmd == "update") {
    gost::v1::GetOfferRequest g;
    if (!ref_from(c, *g.mutable_ref())) {
      std::fputs("gostctl update: give an offer id\n", stderr);
      return 2;
    }
    gost::v1::GetOfferResponse cur;
    auto s = stub->GetOffer(&ctx, g, &cur);
    if (!s.ok())
      return fail(s);
    gost::v1::UpdateOfferRequest req;
    *req.mutable_offer() = cur.offer();
    *req.mutable_ref() = g.ref();
    if (c.opts.count("json") != 0) {
      // The fields --json names replace the stored ones whole; the others are kept.
      gost::v1::Offer patch;
      std::vector<std::string> named;
      if (!offer_from_json(c, patch, named))
        return 2;
      const auto* d = gost::v1::Offer::descriptor();
      for (auto& name : named)
        req.mutable_offer()->GetReflection()->SwapFields(req.mutable_offer(), &patch,
                                                         {d->FindFieldByName(name)});
    }
    if (c.opts.count("title") != 0)
      req.mutable_offer()->set_title(opt(c, "title"));
    int64_t price = 0;
    int64_t expected = cur.offer().version();
    if (!whole_opt(c, "price", price) || !whole_opt(c, "expected-version", expected))
      return 2;
    if (c.opts.count("price") != 0)
      req.mutable_offer()->mutable_price()->set_amount_minor(price);
    if (!apply_status_and_photos(c, "update", *req.mutable_offer()))
      return 2;
    req.set_expected_version(expected);
    gost::v1::UpdateOfferResponse resp;
    grpc::ClientContext uctx;
    call_context(uctx, c);
    s = stub->UpdateOffer(&uctx, req, &resp);
    if (!s.ok())
      return fail(s);
    print_json(resp.offer());
    return 0;
  }
  if (c.cmd == "delete") {
    gost::v1::DeleteOfferRequest req;
    if (!ref_from(c, *req.mutable_ref())) {
      std::fputs("gostctl delete: give an offer id\n", stderr);
      return 2;
    }
    int64_t expected = 0;
    if (!whole_opt(c, "expected-version", expected))
      return 2;
    if (c.opts.count("expected-version") != 0)
      req.set_expected_version(expected);
    gost::v1::DeleteOfferResponse resp;
    auto s = stub->DeleteOffer(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    std::printf("deleted at version %lld\n", static_cast<long long>(resp.version()));
    return 0;
  }
  if (c.cmd == "feeds" || c.cmd == "feed-load" || c.cmd == "feed-errors")
    return feeds_cmd(c, addr);
  if (c.cmd == "demo")
    return demo(*stub, c);
  auto admin =
    gost::v1::AdminService::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  if (c.cmd == "top")
    return top(c, addr);
  if (c.cmd == "pause" || c.cmd == "resume" || c.cmd == "passivate" || c.cmd == "requeue")
    return verb(*admin, c);
  if (c.cmd == "drain" || c.cmd == "undrain")
    return drain_verb(*admin, c);
  if (c.cmd == "deadletters")
    return list_dead(*admin, c);
  if (c.cmd == "history")
    return history(*admin, c);
  if (c.cmd == "types") {
    gost::v1::DescribeTypesResponse resp;
    auto s = admin->DescribeTypes(&ctx, gost::v1::DescribeTypesRequest{}, &resp);
    if (!s.ok())
      return fail(s);
    std::printf("%-7s %-24s %-32s %s\n", "kind", "id", "state type", "event type / note");
    for (auto& t : resp.types())
      std::printf("%-7s %-24s %-32s %s\n",
                  t.kind() == gost::v1::PublishedType::STAGE ? "stage" : "entity", t.id().c_str(),
                  t.state_type().empty() ? "-" : t.state_type().c_str(),
                  t.event_type().empty() ? t.note().c_str() : t.event_type().c_str());
    std::printf("%d file(s) published\n", resp.files().file_size());
    return 0;
  }
  if (c.cmd == "trace")
    return trace(*admin, c);
  if (c.cmd == "retry-dead" || c.cmd == "discard-dead")
    return dead_verb(*admin, c);
  if (c.cmd == "offer") {
    if (c.positional.empty()) {
      std::fputs("gostctl offer: give an offer id\n", stderr);
      return 2;
    }
    gost::v1::InspectOfferRequest req;
    req.set_offer_id(c.positional[0]);
    gost::v1::InspectOfferResponse resp;
    auto s = admin->InspectOffer(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    if (!resp.found()) {
      std::printf("offer %s: not found (shard %u)\n", req.offer_id().c_str(), resp.shard());
      return 1;
    }
    std::printf("offer %s  version %lld  shard %u  %s\n", req.offer_id().c_str(),
                static_cast<long long>(resp.offer().version()), resp.shard(),
                residency(resp).c_str());
    print_activity(resp);
    print_json(resp.offer());
    // States decode with the types the node publishes, not those linked into gostctl.
    auto types = node_types(*admin, c);
    std::printf("\nstage states:\n");
    if (resp.states().empty())
      std::printf("  (none)\n");
    for (auto& [stage, any] : resp.states()) {
      auto v = resp.state_versions().find(stage);
      auto label = stage + " v" + std::to_string(v == resp.state_versions().end() ? 0 : v->second);
      std::printf("  %-20s %s\n", label.c_str(), types->render(any).c_str());
    }
    std::printf("\nqueues and timers:\n");
    if (resp.queue().empty())
      std::printf("  (none)\n");
    for (auto& q : resp.queue())
      std::printf("  %-16s %s  %s%s\n", q.stage_id().c_str(),
                  google::protobuf::util::TimeUtil::ToString(q.due_at()).c_str(),
                  q.timer() ? "timer" : "due", q.background() ? " (background)" : "");
    return 0;
  }
  if (c.cmd == "nodes") {
    gost::v1::ListNodesRequest req;
    gost::v1::ListNodesResponse resp;
    auto s = admin->ListNodes(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    std::printf("%-20s %-8s %7s %9s  %-22s %-22s %-22s %s\n", "node", "state", "shards",
                "hb age ms", "caf", "grpc", "http", "started");
    for (auto& n : resp.nodes())
      std::printf("%-20s %-8s %7u %9lld  %-22s %-22s %-22s %s\n", n.node_id().c_str(),
                  n.leaving() ? "leaving"
                  : n.alive() ? "alive"
                              : "dead",
                  n.shards(), static_cast<long long>(n.heartbeat_age_ms()), n.caf_addr().c_str(),
                  n.grpc_addr().c_str(), n.http_addr().c_str(),
                  google::protobuf::util::TimeUtil::ToString(n.started_at()).c_str());
    std::printf("(answered by %s)\n", resp.answered_by().c_str());
    return 0;
  }
  if (c.cmd == "shards") {
    gost::v1::ListShardsRequest req;
    gost::v1::ListShardsResponse resp;
    auto s = admin->ListShards(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    std::printf("%6s %-20s %8s %9s  %s\n", "shard", "owner", "epoch", "hb age ms", "state");
    int moving = 0;
    for (auto& l : resp.shards()) {
      std::string state = l.free() ? "free" : "owned";
      if (!l.handoff_to().empty() && !l.free()) {
        state = "moving to " + l.handoff_to();
        ++moving;
      }
      std::printf("%6u %-20s %8lld %9lld  %s\n", l.shard(),
                  l.owner().empty() ? "-" : l.owner().c_str(), static_cast<long long>(l.epoch()),
                  static_cast<long long>(l.heartbeat_age_ms()), state.c_str());
    }
    std::printf("%d shard(s), %d move(s) in progress\n", resp.shards_size(), moving);
    return 0;
  }
  if (c.cmd == "stages") {
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
      std::printf(
        "%-16s %-10s %-7s %9llu %10.1fs %9llu %8llu %9llu %8llu %17s %17s %7d %8s  %s%s\n",
        st.stage_id().c_str(), st.registered() ? "yes" : "NO", st.paused() ? "PAUSED" : "running",
        static_cast<unsigned long long>(st.queued()),
        static_cast<double>(st.oldest_due_age_ms()) / 1000,
        static_cast<unsigned long long>(st.timers()),
        static_cast<unsigned long long>(st.dead_letters()),
        static_cast<unsigned long long>(st.runs()), static_cast<unsigned long long>(st.failures()),
        run, proc, st.max_parallelism(),
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
  if (c.cmd == "entity") {
    if (c.positional.size() != 2) {
      std::fputs("gostctl entity: give KIND ID (gostctl types lists the kinds)\n", stderr);
      return 2;
    }
    gost::v1::InspectEntityRequest req;
    req.set_kind(c.positional[0]);
    req.set_id(c.positional[1]);
    gost::v1::InspectEntityResponse resp;
    auto s = admin->InspectEntity(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    if (!resp.exists()) {
      std::printf("entity %s: nothing was ever sent to it (shard %u)\n", resp.entity_key().c_str(),
                  resp.shard());
      return 1;
    }
    std::printf("entity %s  version %lld  shard %u  lane %s  %s\n", resp.entity_key().c_str(),
                static_cast<long long>(resp.version()), resp.shard(),
                resp.lane().empty() ? "-" : resp.lane().c_str(), residency(resp).c_str());
    print_activity(resp);
    std::printf("pending events: %lld%s%s\n", static_cast<long long>(resp.pending_events()),
                resp.has_next_due() ? ", next due " : "",
                resp.has_next_due()
                  ? google::protobuf::util::TimeUtil::ToString(resp.next_due()).c_str()
                  : "");
    auto types = node_types(*admin, c);
    std::printf("state: %s\n",
                resp.has_state() ? types->render(resp.state()).c_str() : "(none yet)");
    return 0;
  }
  if (c.cmd == "task" || c.cmd == "tasks") {
    auto tasks =
      gost::v1::TaskService::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
    if (c.cmd == "task") {
      if (c.positional.size() != 1) {
        std::fputs("gostctl task: give one task id (<group>:<key>)\n", stderr);
        return 2;
      }
      gost::v1::GetTaskRequest req;
      req.set_task_id(c.positional[0]);
      gost::v1::GetTaskResponse resp;
      auto s = tasks->GetTask(&ctx, req, &resp);
      if (!s.ok())
        return fail(s);
      // Inputs, states and results decode with the node's published types.
      print_decoded(*node_types(*admin, c, {gost::v1::GetTaskResponse::descriptor()}), resp);
      // Its actor on the owner node: what it did lately and waits on.
      auto slash = resp.entity_key().find('/');
      if (slash == std::string::npos)
        return 0;
      gost::v1::InspectEntityRequest ireq;
      ireq.set_kind(resp.entity_key().substr(0, slash));
      ireq.set_id(resp.entity_key().substr(slash + 1));
      gost::v1::InspectEntityResponse ir;
      grpc::ClientContext ictx;
      admin_context(ictx, c);
      auto is = admin->InspectEntity(&ictx, ireq, &ir);
      if (!is.ok())
        return fail(is);
      std::printf("\nentity %s  shard %u  %s (trace it: gostctl trace %s)\n",
                  ir.entity_key().c_str(), ir.shard(), residency(ir).c_str(),
                  ir.entity_key().c_str());
      print_activity(ir);
      return 0;
    }
    if (opt(c, "group").empty()) {
      std::fputs("gostctl tasks: give --group G\n", stderr);
      return 2;
    }
    gost::v1::ListTasksRequest req;
    req.set_group_id(opt(c, "group"));
    req.set_state_name(opt(c, "state"));
    req.set_after_id(opt(c, "after"));
    req.set_limit(std::atoi(opt(c, "limit", "100").c_str()));
    gost::v1::ListTasksResponse resp;
    auto s = tasks->ListTasks(&ctx, req, &resp);
    if (!s.ok())
      return fail(s);
    std::printf("%-40s %s\n", "task", "state");
    for (auto& t : resp.tasks())
      std::printf("%-40s %s\n", t.task_id().c_str(), t.state_name().c_str());
    std::printf("%d task(s)%s\n", resp.tasks_size(),
                resp.tasks_size() > 0
                  ? (" (next page: --after " + resp.tasks().rbegin()->task_id() + ")").c_str()
                  : "");
    return 0;
  }
  if (c.cmd == "action" || c.cmd == "actions") {
    auto actions = gost::v1::ScheduledActionService::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
    if (c.cmd == "action" && c.positional.size() == 2) {
      auto& v = c.positional[0];
      using service = gost::v1::ScheduledActionService::Stub;
      grpc::Status (service::*call)(grpc::ClientContext*,
                                    const gost::v1::ScheduledActionVerbRequest&,
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
  std::fprintf(stderr, "gostctl: unknown command `%s`\n\n%s", c.cmd.c_str(), usage);
  return 2;
}
