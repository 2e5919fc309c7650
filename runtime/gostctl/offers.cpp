// gostctl, offers: create, get, update, delete (OfferService), offer (AdminService.InspectOffer),
// history (AdminService.OfferHistory) and the demo load.
#include "gostctl/cli.hpp"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/videos.pb.h"
#include "gostctl/print.hpp"

namespace gost::ctl {

namespace {

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

int demo(const cli& c) {
  auto client = v1::OfferService::NewStub(channel(c));
  auto& stub = *client;
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
    int64_t n = 0;
    if (!positive(opt(c, "limit"), n) || n > INT32_MAX) {
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

int create(const cli& c) {
  auto stub = v1::OfferService::NewStub(channel(c));
  grpc::ClientContext ctx;
  call_context(ctx, c);
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

int get(const cli& c) {
  auto stub = v1::OfferService::NewStub(channel(c));
  grpc::ClientContext ctx;
  call_context(ctx, c);
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

int update(const cli& c) {
  auto stub = v1::OfferService::NewStub(channel(c));
  grpc::ClientContext ctx;
  call_context(ctx, c);
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

int remove(const cli& c) {
  auto stub = v1::OfferService::NewStub(channel(c));
  grpc::ClientContext ctx;
  call_context(ctx, c);
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

/// The offer named by the first argument, inspected on its owner (AdminService.InspectOffer):
/// 0 with `resp` filled, else the exit code, the reason printed.
int inspect_offer(const cli& c, const char* verb, gost::v1::InspectOfferResponse& resp) {
  if (c.positional.empty()) {
    std::fprintf(stderr, "gostctl %s: give an offer id\n", verb);
    return 2;
  }
  auto admin = admin_stub(c);
  grpc::ClientContext ctx;
  call_context(ctx, c);
  gost::v1::InspectOfferRequest req;
  req.set_offer_id(c.positional[0]);
  auto s = admin->InspectOffer(&ctx, req, &resp);
  if (!s.ok())
    return fail(s);
  if (!resp.found()) {
    std::printf("offer %s: not found (shard %u)\n", req.offer_id().c_str(), resp.shard());
    return 1;
  }
  return 0;
}

int offer(const cli& c) {
  gost::v1::InspectOfferResponse resp;
  if (auto rc = inspect_offer(c, "offer", resp); rc != 0)
    return rc;
  auto admin = admin_stub(c);
  std::printf("offer %s  version %lld  shard %u  %s\n", c.positional[0].c_str(),
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

/// A time in ms since the epoch as RFC 3339 and relative to `now_ms` ("3s ago", "in 59m").
std::string when(int64_t ms, int64_t now_ms) {
  auto t = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(ms);
  auto diff = ms - now_ms;
  auto a = diff < 0 ? -diff : diff; // ms
  auto span = a < 1000        ? std::to_string(a) + "ms"
              : a < 120000    ? std::to_string(a / 1000) + "s"
              : a < 7200000   ? std::to_string(a / 60000) + "m"
              : a < 172800000 ? std::to_string(a / 3600000) + "h"
                              : std::to_string(a / 86400000) + "d";
  return google::protobuf::util::TimeUtil::ToString(t)
         + (diff <= 0 ? " (" + span + " ago)" : " (in " + span + ")");
}

/// The video.check stage's view of one offer: per URL what the last check found and why, when
/// it ran and runs next, the back-off, and whether the offer shows it.
int videos(const cli& c) {
  if (!given(c, 1, "an offer id"))
    return 2;
  gost::v1::InspectOfferResponse resp;
  if (auto rc = inspect_offer(c, "videos", resp); rc != 0)
    return rc;
  const std::string stage = "video.check";
  auto& o = resp.offer();
  std::printf("offer %s  version %lld  shard %u  %d video(s)\n", c.positional[0].c_str(),
              static_cast<long long>(o.version()), resp.shard(), o.videos_size());
  gost::v1::VideoChecks checks;
  auto st = resp.states().find(stage);
  if (st == resp.states().end()) {
    std::printf("stage %s: no state: not run for this offer yet%s\n", stage.c_str(),
                o.videos_size() == 0 ? " (it has no video)"
                                     : " (is stages.video.enabled on the offer's node?)");
  } else if (!st->second.UnpackTo(&checks)) {
    std::printf("stage %s: a state of type %s, not gost.v1.VideoChecks\n", stage.c_str(),
                st->second.type_url().c_str());
    return 1;
  } else {
    auto v = resp.state_versions().find(stage);
    std::printf("stage %s  state v%lld\n", stage.c_str(),
                static_cast<long long>(v == resp.state_versions().end() ? 0 : v->second));
  }
  for (auto& q : resp.queue())
    if (q.stage_id() == stage)
      std::printf("next run %s (%s)\n",
                  google::protobuf::util::TimeUtil::ToString(q.due_at()).c_str(),
                  q.timer() ? "timer" : "due");

  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  for (auto& e : checks.videos()) {
    std::printf("\n%s\n", e.url().c_str());
    if (e.status() == gost::v1::VIDEO_STATUS_UNSPECIFIED) {
      std::printf("  not checked yet\n");
      continue;
    }
    auto result = gost::v1::VideoStatus_Name(e.status());
    result = result.substr(result.rfind('_') + 1); // VIDEO_STATUS_UNAVAILABLE -> UNAVAILABLE
    for (auto& ch : result)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::printf("  result      %s\n", result.c_str());
    std::printf("  reason      %s\n", e.reason().c_str());
    if (e.http_status() != 0)
      std::printf("  http        %d\n", e.http_status());
    std::printf("  checked     %s\n", when(e.checked_at_ms(), now).c_str());
    std::printf("  next check  %s\n", when(e.next_check_ms(), now).c_str());
    if (e.failures() > 0)
      std::printf("  back-off    %d passing error(s) in a row: checked again sooner\n",
                  e.failures());
    bool shown = false;
    for (auto& v : o.videos())
      shown = shown || (v.url() == e.url() && v.status() == e.status());
    if (!shown)
      std::printf("  the offer's videos do not show this result yet (the stage's next run "
                  "copies it)\n");
  }
  for (auto& v : o.videos()) {
    bool known = false;
    for (auto& e : checks.videos())
      known = known || e.url() == v.url();
    if (!known && !v.url().empty())
      std::printf("\n%s\n  not checked yet (queued: see `next run`)\n", v.url().c_str());
  }
  return 0;
}

int history_cmd(const cli& c) {
  auto admin = admin_stub(c);
  return history(*admin, c);
}

} // namespace

std::vector<command> offer_commands() {
  return {
    {"create", "offers",
     "[--json OFFER] [--seller S] [--ns N] [--external-id X] [--title T] [--price MINOR]\n"
     "       [--currency C] [--status STATUS] [--photos URL,URL,...]",
     "create an offer; prints it as JSON. --json is a gost.v1.Offer in\n"
     "proto3 JSON ('{\"title\":\"Bike\",\"price\":{\"amount_minor\":100}}');\n"
     "the other flags, when given, override its fields",
     create},
    {"get", "offers", "ID | get --seller S [--ns N] --external-id X",
     "print one offer as JSON, by id or by the seller's key", get},
    {"update", "offers",
     "ID [--json OFFER] [--title T] [--price MINOR] [--status STATUS]\n"
     "       [--photos URL,URL,...] [--expected-version V]",
     "change an offer: the top-level fields --json names replace the\n"
     "stored ones, then the flags apply; other fields are kept\n"
     "(--photos '' removes all)",
     update},
    {"delete", "offers", "ID [--expected-version V]", "delete an offer", remove},
    {"offer", "offers", "ID",
     "inspect an offer: version, shard, whether an actor holds it and\n"
     "what it waits on (load, stage pool, writer), its last events\n"
     "(kind, source, stage, result, duration, version), the shard's\n"
     "epoch and write lag, stage states as JSON, queue entries, timers",
     offer},
    {"videos", "offers", "ID",
     "the video.check stage's view of an offer: per video URL the result\n"
     "(available, unavailable, unknown) and its reason (http 404,\n"
     "timeout: ..., host_not_allowed: ...), the HTTP status, when it was\n"
     "checked and is checked next, the back-off after passing errors",
     videos},
    {"history", "offers", "ID [--limit N] [--after TOKEN]",
     "the offer's committed changes, newest first: version, time, what\n"
     "made it (api, feed, a stage, state-api) and who, with the diff of\n"
     "the offer and of each stage state; --limit per page (default 20)",
     history_cmd},
    {"demo", "offers", "[--count N] [--concurrency C] [--status STATUS]",
     "create N offers (default 1000, status active) from C concurrent\n"
     "clients (default 16), read every one back, check it, print a summary",
     demo},
  };
}

} // namespace gost::ctl
