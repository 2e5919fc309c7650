// The example application (examples/app: gost_example, built on node_builder) end to end:
// - its actor type (examples/bank, docs/adding-an-actor-type.md): a plain gRPC client sends
//   events and reads states through gost.v1.EntityService; kill -9 and a restart lose nothing
//   committed, and timers set before the kill fire after it;
// - its second type (examples/watchlist) through the typed client (entity_client.hpp): asks
//   answered after commit, a refusal as the call's status, answers kept by request id across
//   kill -9, a named timer replaced rather than added;
// - its stage (examples/photos, docs/adding-a-stage.md): registered with one line, it runs on
//   offers like a built-in one, its typed state readable through StateService.
// - two nodes: an event sent to an entity of the other node's shard arrives at once (a wake
//   notice), not at that shard's next poll;
// - its name (node_builder::name) in --help, the start log line and gost_build_info, and its
//   stage's key `stages.photo_count.enabled`: listed by --help, false keeps the stage off.
#include <doctest/doctest.h>

#include <grpcpp/grpcpp.h>

#include "bank/v1/account.pb.h"
#include "gost/runtime/entity_client.hpp"
#include "gost/testing/http.hpp"
#include "gost/testing/metrics.hpp"
#include "gost/testing/node.hpp"
#include "gost/testing/pg.hpp"
#include "gost/testing/process.hpp"
#include "gost/v1/admin.grpc.pb.h"
#include "gost/v1/entity_service.grpc.pb.h"
#include "gost/v1/offer_service.grpc.pb.h"
#include "gost/v1/state_service.grpc.pb.h"
#include "photos/v1/photo_count.pb.h"
#include "watchlist.hpp"

using namespace gost;
using namespace std::chrono_literals;
using testing::child_process;

namespace {

struct bank_client {
  std::unique_ptr<v1::EntityService::Stub> stub;

  explicit bank_client(int port)
    : stub(v1::EntityService::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                          grpc::InsecureChannelCredentials()))) {}

  grpc::Status send(const std::string& id, const google::protobuf::Message& event,
                    const std::string& request_id = {}, std::chrono::milliseconds delay = {},
                    const std::string& kind = "bank.account") {
    v1::SendEventRequest req;
    req.set_kind(kind);
    req.set_id(id);
    req.mutable_event()->PackFrom(event);
    req.set_request_id(request_id);
    if (delay.count() > 0)
      req.mutable_delay()->set_nanos(static_cast<int32_t>(delay.count() * 1'000'000));
    v1::SendEventResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    return stub->Send(&ctx, req, &resp);
  }

  bank::v1::Account account(const std::string& id, int64_t* version = nullptr) {
    v1::GetEntityRequest req;
    req.set_kind("bank.account");
    req.set_id(id);
    v1::GetEntityResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto s = stub->Get(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    bank::v1::Account a;
    if (resp.has_state())
      REQUIRE(resp.state().UnpackTo(&a));
    if (version != nullptr)
      *version = resp.version();
    return a;
  }

  /// Every statement after `cursor`, advancing it.
  std::vector<bank::v1::Statement> statements(int64_t& cursor) {
    std::vector<bank::v1::Statement> out;
    for (;;) {
      v1::PullOutputsRequest req;
      req.set_kind("bank.account");
      req.set_lane("statements");
      req.set_after(cursor);
      req.set_limit(100);
      v1::PullOutputsResponse resp;
      grpc::ClientContext ctx;
      auto s = stub->PullOutputs(&ctx, req, &resp);
      REQUIRE_MESSAGE(s.ok(), s.error_message());
      for (auto& o : resp.outputs()) {
        bank::v1::Statement st;
        REQUIRE(o.output().UnpackTo(&st));
        out.push_back(st);
      }
      cursor = resp.cursor();
      if (resp.outputs_size() < 100)
        return out;
    }
  }
};

bank::v1::AccountEvent deposit(int64_t amount) {
  bank::v1::AccountEvent e;
  e.mutable_deposit()->set_amount_minor(amount);
  return e;
}

bank::v1::AccountEvent withdraw(int64_t amount) {
  bank::v1::AccountEvent e;
  e.mutable_withdraw()->set_amount_minor(amount);
  return e;
}

} // namespace

TEST_CASE("an application's actor type: events in, states out, exactly once, across kill -9") {
  testing::temp_db db;
  auto port_file = "/tmp/gost-example-" + std::to_string(getpid());
  std::vector<std::string> args{
    "--pg.dsn=" + db.dsn(),     "--grpc.listen=127.0.0.1:0", "--grpc.port_file=" + port_file,
    "--caf.listen=127.0.0.1:0", "--shard.count=8",           "--queue.poll=50ms",
    "--outbox.relay=false"};
  int64_t cursor = 0;
  size_t pulled = 0; // statements the consumer took, all pulls together
  {
    child_process node{GOST_EXAMPLE_PATH, args};
    auto port = testing::served_port(node, port_file);
    REQUIRE_MESSAGE(port > 0, node.output());
    bank_client bank{port};

    // Deposits with a request id are stored once, however often the client retries.
    REQUIRE(bank.send("alice", deposit(1000), "req-1").ok());
    REQUIRE(bank.send("alice", deposit(1000), "req-1").ok());
    REQUIRE(bank.send("alice", withdraw(300), "req-2").ok());
    REQUIRE(bank.send("alice", withdraw(5000), "req-3").ok()); // refused by the account
    CHECK(testing::eventually(10s, [&] { return bank.account("alice").transactions() == 2; }));
    CHECK(bank.account("alice").balance_minor() == 700);

    // A transfer: an event to another entity, committed with the withdrawal.
    bank::v1::AccountEvent t;
    t.mutable_transfer()->set_amount_minor(200);
    t.mutable_transfer()->set_to("bob");
    REQUIRE(bank.send("alice", t, "req-4").ok());
    CHECK(testing::eventually(10s, [&] { return bank.account("bob").balance_minor() == 200; }));
    CHECK(bank.account("alice").balance_minor() == 500);

    // A durable timer: interest every 300 ms from now on.
    bank::v1::AccountEvent open;
    open.mutable_open_savings()->set_interest_bp(1000); // 10% per period
    open.mutable_open_savings()->set_period_ms(300);
    REQUIRE(bank.send("bob", open, "req-5").ok());
    CHECK(testing::eventually(10s, [&] { return bank.account("bob").interest_paid_minor() > 0; }));

    // Bad input changes nothing: the wrong message type, an unknown kind.
    auto wrong = bank.send("alice", bank::v1::Statement{});
    CHECK(wrong.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(wrong.error_message().find("bank.v1.AccountEvent") != std::string::npos);
    CHECK(bank.send("alice", deposit(1), {}, {}, "no.such.kind").error_code()
          == grpc::StatusCode::NOT_FOUND);

    // A failing event (a negative amount) is retried, then dead-lettered; the account goes on.
    REQUIRE(bank.send("carol", deposit(-5), "req-6").ok());
    REQUIRE(bank.send("carol", deposit(10), "req-7").ok());
    CHECK(testing::eventually(20s, [&] {
      return db.scalar("SELECT count(*) FROM entity_dead_letters WHERE entity_id = 'carol'") == "1";
    }));
    CHECK(db.scalar("SELECT attempts FROM entity_dead_letters WHERE entity_id = 'carol'") == "3");
    CHECK(testing::eventually(10s, [&] { return bank.account("carol").balance_minor() == 10; }));

    auto before = bank.statements(cursor);
    pulled += before.size();
    // alice: deposit, withdrawal, rejected, transfer; bob: deposit, interest...; carol: deposit.
    CHECK(before.size() >= 7);
    int rejected = 0;
    for (auto& st : before)
      rejected += st.what() == "rejected";
    CHECK(rejected == 1);

    node.signal(SIGKILL);
    CHECK(node.wait(10s) == 128 + SIGKILL);
  }
  std::remove(port_file.c_str());
  // Committed before the kill: the states as the database holds them now.
  auto paid_at_kill = std::stoll(db.scalar(
    "SELECT count(*) FROM entity_outputs WHERE entity_id = 'bob' AND lane = 'statements'"));
  child_process again{GOST_EXAMPLE_PATH, args};
  auto port = testing::served_port(again, port_file);
  REQUIRE_MESSAGE(port > 0, again.output());
  bank_client bank{port};
  int64_t version = 0;
  auto alice = bank.account("alice", &version);
  CHECK(alice.balance_minor() == 500);
  CHECK(version
        == 4); // deposit, withdrawal, the refused withdrawal, transfer (the retry stored nothing)
  // The timer set before the kill keeps firing after it.
  CHECK(testing::eventually(10s, [&] {
    return std::stoll(db.scalar("SELECT count(*) FROM entity_outputs WHERE entity_id = 'bob'"
                                " AND lane = 'statements'"))
           > paid_at_kill + 1;
  }));
  // Outputs: a consumer that goes on from its cursor after the restart sees every statement
  // exactly once: what it took in all equals what was emitted up to its cursor.
  auto after = bank.statements(cursor);
  CHECK_FALSE(after.empty());
  for (auto& st : after)
    CHECK(st.account() == "bob"); // only interest since the kill
  pulled += after.size();
  CHECK(db.scalar("SELECT count(*) FROM entity_outputs WHERE lane = 'statements' AND seq <= "
                  + std::to_string(cursor))
        == std::to_string(pulled));
  CHECK(db.scalar("SELECT count(*) FROM entity_events WHERE entity_id = 'alice'") == "0");
  again.signal(SIGTERM);
  CHECK(again.wait(30s) == 0);
  std::remove(port_file.c_str());
}

TEST_CASE("an application's asks: replies after commit, refusals, answers kept by request id "
          "across kill -9; a named timer replaced, not added") {
  testing::temp_db db;
  auto port_file = "/tmp/gost-example-asks-" + std::to_string(getpid());
  std::vector<std::string> args{
    "--pg.dsn=" + db.dsn(),     "--grpc.listen=127.0.0.1:0", "--grpc.port_file=" + port_file,
    "--caf.listen=127.0.0.1:0", "--shard.count=4",           "--outbox.relay=false"};
  auto add = [](const std::string& offer) {
    watchlist::v1::WatchlistEvent e;
    e.mutable_add()->set_offer_id(offer);
    return e;
  };
  auto channel = [](int port) {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                               grpc::InsecureChannelCredentials());
  };
  constexpr int limit = watchlist::watchlist::max_entries;
  google::protobuf::Timestamp first_due;
  {
    child_process node{GOST_EXAMPLE_PATH, args};
    auto port = testing::served_port(node, port_file);
    REQUIRE_MESSAGE(port > 0, node.output());
    gost::entity_client<watchlist::watchlist> lists{channel(port)};

    auto r = lists.ask("buyer", add("offer-0"), "add-0");
    REQUIRE_MESSAGE(r.ok(), r.status.error_message());
    CHECK(r.value.size() == 1);
    CHECK(r.value.changed());
    CHECK(r.version == 1);
    // Answered after commit: the state read now has it.
    v1::GetEntityResponse full;
    auto got = lists.get("buyer", &full);
    REQUIRE(got.ok());
    CHECK(got.value.entries_size() == 1);
    REQUIRE(full.timers_size() == 1);
    CHECK(full.timers(0).name() == "sweep");
    first_due = full.timers(0).due();

    for (int i = 1; i < limit; ++i) {
      auto a = lists.ask("buyer", add("offer-" + std::to_string(i)), "add-" + std::to_string(i));
      REQUIRE_MESSAGE(a.ok(), a.status.error_message());
      CHECK(a.value.size() == i + 1);
    }
    // The 101st: refused with the handler's code and message; nothing of it kept.
    auto full_list = lists.ask("buyer", add("offer-x"), "add-x");
    CHECK(full_list.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(full_list.status.error_message()
          == "the watchlist holds 100 offers already: remove one first");
    got = lists.get("buyer", &full);
    REQUIRE(got.ok());
    CHECK(got.value.entries_size() == limit);
    CHECK(got.version == limit);
    // Every add moved the one "sweep" timer; none was added beside it.
    REQUIRE(full.timers_size() == 1);
    CHECK(full.timers(0).due().seconds() * 1'000'000'000LL + full.timers(0).due().nanos()
          >= first_due.seconds() * 1'000'000'000LL + first_due.nanos());
    CHECK(full.pending_events() == 1);

    // A retried ask is answered from the kept answer: same reply and version, nothing redone.
    auto retry = lists.ask("buyer", add("offer-0"), "add-0");
    REQUIRE(retry.ok());
    CHECK(retry.version == 1);
    CHECK(retry.value.size() == 1);
    CHECK(lists.get("buyer").version == limit);

    // A wrong event type is refused by the owner, naming the type the kind takes.
    v1::AskEntityRequest bad;
    bad.set_kind("watchlist");
    bad.set_id("buyer");
    bad.mutable_event()->PackFrom(deposit(1));
    v1::AskEntityResponse bad_resp;
    grpc::ClientContext ctx;
    auto stub = v1::EntityService::NewStub(channel(port));
    auto st = stub->Ask(&ctx, bad, &bad_resp);
    CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(st.error_message().find("watchlist.v1.WatchlistEvent") != std::string::npos);
    node.signal(SIGKILL);
    CHECK(node.wait(10s) == 128 + SIGKILL);
  }
  std::remove(port_file.c_str());
  // After kill -9: the kept answers still answer their retries, the refusal included.
  child_process node{GOST_EXAMPLE_PATH, args};
  auto port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  gost::entity_client<watchlist::watchlist> lists{channel(port)};
  auto retry = lists.ask("buyer", add("offer-5"), "add-5");
  REQUIRE_MESSAGE(retry.ok(), retry.status.error_message());
  CHECK(retry.version == 6);
  CHECK(retry.value.size() == 6);
  auto refused = lists.ask("buyer", add("offer-x"), "add-x");
  CHECK(refused.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  watchlist::v1::WatchlistEvent rm;
  rm.mutable_remove()->set_offer_id("offer-0");
  auto removed = lists.ask("buyer", rm, "rm-0");
  REQUIRE(removed.ok());
  CHECK(removed.value.size() == limit - 1);
  CHECK(removed.version == limit + 1);
  // Room again: the add that was refused is accepted under a new request id.
  auto later = lists.ask("buyer", add("offer-x"), "add-x2");
  REQUIRE(later.ok());
  CHECK(later.value.size() == limit);
}

TEST_CASE("an application's stage runs on offers like a built-in one, with its typed state") {
  testing::temp_db db;
  auto port_file = "/tmp/gost-example-stage-" + std::to_string(getpid());
  child_process node{GOST_EXAMPLE_PATH,
                     {"--pg.dsn=" + db.dsn(), "--grpc.listen=127.0.0.1:0",
                      "--grpc.port_file=" + port_file, "--caf.listen=127.0.0.1:0",
                      "--shard.count=4", "--queue.poll=50ms", "--outbox.relay=false"}};
  auto port = testing::served_port(node, port_file);
  REQUIRE_MESSAGE(port > 0, node.output());
  auto channel =
    grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto offers = v1::OfferService::NewStub(channel);
  auto states = v1::StateService::NewStub(channel);
  auto create = [&](int photos) {
    v1::CreateOfferRequest req;
    req.mutable_offer()->set_seller_id("s");
    req.mutable_offer()->set_status(v1::OFFER_STATUS_ACTIVE);
    for (int i = 0; i < photos; ++i)
      req.mutable_offer()->add_photos()->set_url(
        i == 0 ? "" : "https://example.org/" + std::to_string(i));
    v1::CreateOfferResponse resp;
    grpc::ClientContext ctx;
    auto s = offers->CreateOffer(&ctx, req, &resp);
    REQUIRE_MESSAGE(s.ok(), s.error_message());
    return resp.offer().id();
  };
  auto with_photos = create(3);
  auto without = create(0);
  photos::v1::PhotoCount count;
  CHECK(testing::eventually(10s, [&] {
    v1::ReadStateRequest req;
    req.set_offer_id(with_photos);
    req.set_stage_id("photo_count");
    v1::ReadStateResponse resp;
    grpc::ClientContext ctx;
    return states->Read(&ctx, req, &resp).ok() && resp.has_state() && resp.state().UnpackTo(&count);
  }));
  CHECK(count.photos() == 3);
  CHECK(count.without_url() == 1);
  // An active offer without photos went back to draft through the stage.
  CHECK(testing::eventually(10s, [&] {
    v1::GetOfferRequest req;
    req.mutable_ref()->set_id(without);
    v1::GetOfferResponse resp;
    grpc::ClientContext ctx;
    return offers->GetOffer(&ctx, req, &resp).ok()
           && resp.offer().status() == v1::OFFER_STATUS_DRAFT;
  }));
  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  std::remove(port_file.c_str());
}

TEST_CASE("an application names itself, and its stage's stages.<id>.enabled turns it off") {
  {
    child_process help{GOST_EXAMPLE_PATH, {"--help"}};
    REQUIRE(help.wait(30s) == 0);
    auto out = help.output();
    CHECK_MESSAGE(out.rfind("gost_example 1.0.0 (gost ", 0) == 0, out);
    CHECK(out.find("\nUsage: gost_example [--config FILE]") != std::string::npos);
    CHECK(out.find("\n  --stages.photo_count.enabled=<boolean>  (default: true;")
          != std::string::npos);
  }
  {
    child_process typo{GOST_EXAMPLE_PATH, {"--stages.photo_cuont.enabled=false"}};
    REQUIRE(typo.wait(30s) == 2);
    CHECK_MESSAGE(typo.output().find("unknown config key `stages.photo_cuont.enabled`")
                    != std::string::npos,
                  typo.output());
  }
  testing::temp_db db;
  auto port_file = testing::temp_path("gost-example-off");
  child_process node{GOST_EXAMPLE_PATH,
                     testing::node_args(db, port_file, {"--stages.photo_count.enabled=false"})};
  auto [port, http_port] = testing::read_ports(node, port_file);
  CHECK(node.output().find("starting gost_example version=1.0.0 gost_version=")
        != std::string::npos);
  auto metrics = testing::http_get(static_cast<uint16_t>(http_port), "/metrics");
  CHECK_MESSAGE(metrics.find("\ngost_build_info{app=\"gost_example\",version=\"1.0.0\","
                             "gost_version=\"")
                  != std::string::npos,
                metrics);
  auto channel =
    grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto admin = v1::AdminService::NewStub(channel);
  v1::ListStagesResponse stages;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  auto s = admin->ListStages(&ctx, v1::ListStagesRequest{}, &stages);
  REQUIRE_MESSAGE(s.ok(), s.error_message());
  bool expire = false;
  for (auto& st : stages.stages()) {
    CHECK_MESSAGE(!(st.stage_id() == "photo_count" && st.registered()),
                  "photo_count is registered with stages.photo_count.enabled=false");
    expire = expire || (st.stage_id() == "expire" && st.registered());
  }
  CHECK(expire); // the listing holds the stages that do run
  node.signal(SIGTERM);
  CHECK(node.wait(30s) == 0);
  std::remove(port_file.c_str());
}

TEST_CASE("two nodes: an event sent to an entity of the other node's shard is delivered at once "
          "(a wake notice), not at that shard's next poll") {
  testing::temp_db db;
  // Shards poll a minute apart at the busy pace and ten minutes apart when idle: without the
  // notice, the transfer's deposit would wait for the receiving shard's next poll, a minute
  // after that shard started at the earliest.
  auto start = [&](const std::string& id, const std::string& port_file) {
    return std::make_unique<child_process>(
      GOST_EXAMPLE_PATH,
      testing::node_args(db, port_file,
                         {"--node.id=" + id, "--http.listen=127.0.0.1:0", "--queue.poll=60s",
                          "--queue.poll_idle=600s", "--outbox.relay=false"}));
  };
  auto pf1 = "/tmp/gost-wake1-" + std::to_string(getpid());
  auto pf2 = "/tmp/gost-wake2-" + std::to_string(getpid());
  auto n1 = start("w1", pf1);
  auto ports1 = testing::read_ports(*n1, pf1);
  auto n2 = start("w2", pf2);
  auto ports2 = testing::read_ports(*n2, pf2);
  auto balanced = testing::eventually(60s, [&] {
    return db.scalar("SELECT count(*) FROM shard_leases WHERE owner = 'w1'") == "4"
           && db.scalar("SELECT count(*) FROM shard_leases WHERE owner = 'w2'") == "4";
  });
  REQUIRE_MESSAGE(balanced, n1->output() << n2->output());
  bank_client bank{ports1.first};
  // Accounts on both nodes' shards (sends through n1 reach the owners wherever they are).
  for (int i = 0; i < 16; ++i)
    REQUIRE(bank.send("acct-" + std::to_string(i), deposit(100)).ok());
  REQUIRE(testing::eventually(20s, [&] {
    return db.scalar("SELECT count(*) FROM entities WHERE kind = 'bank.account' AND version = 1")
           == "16";
  }));
  auto owned_by = [&](const std::string& node) {
    return db.scalar("SELECT min(e.entity_id) FROM entities e JOIN shard_leases l"
                     " ON l.shard = e.shard WHERE e.kind = 'bank.account' AND l.owner = '"
                     + node + "'");
  };
  auto from = owned_by("w1");
  auto to = owned_by("w2");
  REQUIRE_FALSE(from.empty());
  REQUIRE_FALSE(to.empty());
  auto heard = [&] {
    return testing::metric_sample(
      testing::http_get(static_cast<uint16_t>(ports2.second), "/metrics"),
      "gost_wake_notices_total{direction=\"heard\"}");
  };
  auto heard_before = heard();
  // The transfer: committed by w1 with the withdrawal, the deposit an event for w2's shard.
  bank::v1::AccountEvent t;
  t.mutable_transfer()->set_amount_minor(40);
  t.mutable_transfer()->set_to(to);
  REQUIRE(bank.send(from, t, "wake-transfer").ok());
  CHECK_MESSAGE(testing::eventually(20s, [&] { return bank.account(to).balance_minor() == 140; }),
                n2->output());
  CHECK(bank.account(from).balance_minor() == 60);
  CHECK(heard() > heard_before); // w2 heard the notice w1 sent
  n1->signal(SIGTERM);
  n2->signal(SIGTERM);
  CHECK(n1->wait(30s) == 0);
  CHECK(n2->wait(30s) == 0);
  std::remove(pf1.c_str());
  std::remove(pf2.c_str());
}
