// The bank account's rules, tested with gost's handler harness (gost/testing/entity_harness.hpp):
// no node, no database. What a test of an actor type checks: the state after each event, the
// events it sends and the outputs it emits, its refusals and failures, and its named timers.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "account.hpp"
#include "gost/testing/entity_harness.hpp"

using namespace std::chrono_literals;
using harness = gost::testing::entity_harness<bank::account>;
using bank::v1::AccountEvent;

namespace {

AccountEvent deposit(int64_t amount) {
  AccountEvent e;
  e.mutable_deposit()->set_amount_minor(amount);
  return e;
}

AccountEvent withdraw(int64_t amount) {
  AccountEvent e;
  e.mutable_withdraw()->set_amount_minor(amount);
  return e;
}

AccountEvent open_savings(int32_t bp, int64_t period_ms) {
  AccountEvent e;
  e.mutable_open_savings()->set_interest_bp(bp);
  e.mutable_open_savings()->set_period_ms(period_ms);
  return e;
}

bank::v1::Statement statement(const gost::testing::handled_event& r, size_t i = 0) {
  REQUIRE(r.outputs.size() > i);
  CHECK(r.outputs[i].lane == "statements");
  bank::v1::Statement s;
  REQUIRE(r.outputs[i].output.UnpackTo(&s));
  return s;
}

} // namespace

TEST_CASE("deposits and withdrawals move the balance, each with its statement") {
  harness a{"acc-1"};
  auto d = a.send(deposit(500));
  REQUIRE(d.ok());
  CHECK(a.state.balance_minor() == 500);
  auto s = statement(d);
  CHECK(s.account() == "acc-1");
  CHECK(s.what() == "deposit");
  CHECK(s.balance_minor() == 500);

  auto w = a.send(withdraw(200));
  REQUIRE(w.ok());
  CHECK(a.state.balance_minor() == 300);
  CHECK(a.state.transactions() == 2);
  CHECK(statement(w).what() == "withdrawal");
  CHECK(a.version == 2);
}

TEST_CASE("an overdraft: an ask is refused and changes nothing; a send records a rejection") {
  harness a;
  REQUIRE(a.send(deposit(100)).ok());

  auto asked = a.ask(withdraw(150));
  CHECK(asked.refused());
  CHECK(asked.refusal == gost::errc::failed_precondition);
  CHECK(asked.message == "the balance 100 is less than 150");
  CHECK(asked.outputs.empty());
  CHECK(a.state.balance_minor() == 100);
  CHECK(a.version == 1); // a refusal keeps nothing of the event

  auto sent = a.send(withdraw(150));
  REQUIRE(sent.ok());
  CHECK(statement(sent).what() == "rejected");
  CHECK(a.state.balance_minor() == 100);
  CHECK(a.state.transactions() == 1);
}

TEST_CASE("a transfer withdraws here and sends the deposit to the other account") {
  harness a{"from"};
  REQUIRE(a.send(deposit(1000)).ok());
  AccountEvent t;
  t.mutable_transfer()->set_amount_minor(400);
  t.mutable_transfer()->set_to("to");
  auto r = a.send(t);
  REQUIRE(r.ok());
  CHECK(a.state.balance_minor() == 600);
  REQUIRE(r.sends.size() == 1);
  CHECK(r.sends[0].kind == "bank.account");
  CHECK(r.sends[0].id == "to");
  AccountEvent in;
  REQUIRE(r.sends[0].event.UnpackTo(&in));
  CHECK(in.deposit().amount_minor() == 400);
  CHECK(in.deposit().from() == "from");
}

TEST_CASE("a bad amount fails the event (retried, then dead-lettered) and changes nothing") {
  harness a;
  auto r = a.send(deposit(-5));
  CHECK(r.failed());
  CHECK(r.message.find("amount_minor must be positive, got -5") != std::string::npos);
  CHECK(a.state.balance_minor() == 0);
  CHECK(a.version == 0);
  CHECK(a.send(AccountEvent{}).failed()); // no kind
}

TEST_CASE("savings: interest paid by the named timer; opening again moves it, never doubles it") {
  harness a;
  REQUIRE(a.send(deposit(10'000)).ok());
  REQUIRE(a.send(open_savings(100, 1000)).ok()); // 1 % a second
  REQUIRE(a.has_timer("interest"));
  CHECK(a.timers().at("interest").due == a.now + 1s);

  auto paid = a.advance(2500ms); // due at 1 s and 2 s; each payment sets the next
  REQUIRE(paid.size() == 2);
  CHECK(paid[0].timer == "interest");
  CHECK(a.state.balance_minor() == 10'201);
  CHECK(a.state.interest_paid_minor() == 201);
  CHECK(statement(paid[1]).what() == "interest");

  REQUIRE(a.send(open_savings(100, 10'000)).ok()); // a longer period replaces the timer
  CHECK(a.timers().size() == 1);
  CHECK(a.advance(9s).empty());
  CHECK(a.advance(1s).size() == 1);

  CHECK(a.send(open_savings(0, 1000)).failed());
}
