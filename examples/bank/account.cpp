#include "account.hpp"

namespace bank {

namespace {

/// Records what happened, for consumers of the "statements" lane.
void statement(gost::entity_context& ctx, const v1::Account& a, const std::string& what,
               int64_t amount) {
  v1::Statement s;
  s.set_account(ctx.id());
  s.set_what(what);
  s.set_amount_minor(amount);
  s.set_balance_minor(a.balance_minor());
  ctx.emit(s, "statements");
}

/// Amounts must be positive: anything else is a bug of the sender. Throwing fails the event:
/// gost retries it and dead-letters it after options().max_attempts.
int64_t positive(int64_t amount) {
  if (amount <= 0)
    throw std::invalid_argument("amount_minor must be positive, got " + std::to_string(amount));
  return amount;
}

} // namespace

void account::handle(v1::Account& a, const v1::AccountEvent& e, gost::entity_context& ctx) const {
  switch (e.kind_case()) {
    case v1::AccountEvent::kDeposit: {
      a.set_balance_minor(a.balance_minor() + positive(e.deposit().amount_minor()));
      a.set_transactions(a.transactions() + 1);
      statement(ctx, a, "deposit", e.deposit().amount_minor());
      return;
    }
    case v1::AccountEvent::kWithdraw:
    case v1::AccountEvent::kTransfer: {
      bool transfer = e.kind_case() == v1::AccountEvent::kTransfer;
      auto amount = positive(transfer ? e.transfer().amount_minor() : e.withdraw().amount_minor());
      if (amount > a.balance_minor()) {
        // Not an error of the event: the account refuses it. An ask's caller hears why; a sent
        // withdrawal is recorded as rejected for the statement's reader.
        if (ctx.asked())
          throw gost::refused(gost::errc::failed_precondition,
                              "the balance " + std::to_string(a.balance_minor()) + " is less than "
                                + std::to_string(amount));
        statement(ctx, a, "rejected", amount);
        return;
      }
      a.set_balance_minor(a.balance_minor() - amount);
      a.set_transactions(a.transactions() + 1);
      statement(ctx, a, transfer ? "transfer" : "withdrawal", amount);
      if (transfer) {
        // The money goes to the other account as an event of its own, committed with this
        // withdrawal: both happen, or neither.
        v1::AccountEvent in;
        in.mutable_deposit()->set_amount_minor(amount);
        in.mutable_deposit()->set_from(ctx.id());
        ctx.send(e.transfer().to(), in);
      }
      return;
    }
    case v1::AccountEvent::kOpenSavings: {
      auto& o = e.open_savings();
      if (o.interest_bp() < 1 || o.interest_bp() > 10'000 || o.period_ms() < 100)
        throw std::invalid_argument("open_savings needs interest_bp 1..10000 and period_ms >= 100");
      a.set_interest_bp(o.interest_bp());
      a.set_interest_period_ms(o.period_ms());
      // A named timer: opening savings again (another period) moves it, never adds a second.
      v1::AccountEvent tick;
      tick.mutable_pay_interest();
      ctx.set_timer("interest", std::chrono::milliseconds{o.period_ms()}, tick);
      return;
    }
    case v1::AccountEvent::kPayInterest: {
      if (a.interest_bp() == 0)
        return;
      auto interest = a.balance_minor() * a.interest_bp() / 10'000;
      a.set_balance_minor(a.balance_minor() + interest);
      a.set_interest_paid_minor(a.interest_paid_minor() + interest);
      statement(ctx, a, "interest", interest);
      v1::AccountEvent tick;
      tick.mutable_pay_interest();
      ctx.set_timer("interest", std::chrono::milliseconds{a.interest_period_ms()}, tick);
      return;
    }
    default: throw std::invalid_argument("an AccountEvent without a kind");
  }
}

} // namespace bank
