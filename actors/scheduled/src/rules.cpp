#include "gost/scheduled/rules.hpp"

#include <algorithm>
#include <cctype>

#include "gost/core/http_client.hpp"
#include "gost/scheduled/cron.hpp"

namespace gost::scheduled {

namespace {

std::optional<field_error> err(std::string field, std::string message) {
  return field_error{std::move(field), std::move(message)};
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// The host of an http(s) URL, or an error naming what is wrong.
std::optional<field_error> url_host(const std::string& url, std::string& host) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos)
    return err("spec.http.url", "'" + url + "' is not a URL; use http:// or https://");
  auto scheme = lower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https")
    return err("spec.http.url", "scheme '" + scheme + "' is not allowed; use http:// or https://");
  auto rest = url.substr(scheme_end + 3);
  auto authority = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = authority.rfind('@'); at != std::string::npos)
    authority = authority.substr(at + 1);
  if (!authority.empty() && authority[0] == '[') {
    auto close = authority.find(']');
    if (close == std::string::npos)
      return err("spec.http.url", "unclosed '[' in the host");
    host = authority.substr(0, close + 1);
    authority = authority.substr(close + 1);
  } else {
    auto colon = authority.find(':');
    host = authority.substr(0, colon);
    authority = colon == std::string::npos ? "" : authority.substr(colon);
  }
  if (host.empty() || host == "[]")
    return err("spec.http.url", "has no host");
  if (!authority.empty()) {
    auto port = authority.substr(1);
    if (authority[0] != ':' || port.empty() || port.size() > 5
        || port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535)
      return err("spec.http.url", "bad port '" + authority + "'");
  }
  for (unsigned char c : url)
    if (c <= 0x20 || c == 0x7f)
      return err("spec.http.url", "contains a space or a control character");
  return std::nullopt;
}

} // namespace

std::optional<field_error> check_id(const std::string& id) {
  if (id.empty() || id.size() > 128)
    return err("id", "must be 1..128 characters");
  for (unsigned char c : id)
    if (!std::isalnum(c) && c != '.' && c != '_' && c != '-' && c != ':')
      return err("id", "may hold only letters, digits, '.', '_', '-' and ':'");
  return std::nullopt;
}

std::optional<field_error> check_spec(const v1::ScheduledActionSpec& spec,
                                      const rules_options& opts, int64_t now_ms) {
  if (spec.start_at_ms() < 0)
    return err("spec.start_at_ms", "must not be negative");
  if (spec.end_at_ms() < 0)
    return err("spec.end_at_ms", "must not be negative");
  auto start = spec.start_at_ms() != 0 ? spec.start_at_ms() : now_ms;
  if (spec.end_at_ms() != 0 && start > spec.end_at_ms())
    return err("spec.start_at_ms", "is after spec.end_at_ms");
  switch (spec.period_case()) {
    case v1::ScheduledActionSpec::kIntervalMs:
      if (spec.interval_ms() < opts.min_interval_ms)
        return err("spec.interval_ms",
                   "must be at least " + std::to_string(opts.min_interval_ms) + " ms");
      break;
    case v1::ScheduledActionSpec::kCron: {
      std::string why;
      auto c = cron_expr::parse(spec.cron(), &why);
      if (!c)
        return err("spec.cron", why);
      if (!c->next_after(start - 1))
        return err("spec.cron", "never fires");
      break;
    }
    default: break;
  }
  auto& r = spec.retry();
  if (r.max_attempts() < 0 || r.max_attempts() > 100)
    return err("spec.retry.max_attempts", "must be within 0..100 (0: the default)");
  if (r.backoff_ms() < 0 || r.backoff_ms() > 86'400'000)
    return err("spec.retry.backoff_ms", "must be within 0..86400000 (0: the default)");
  if (r.max_backoff_ms() < 0 || r.max_backoff_ms() > 7 * 86'400'000LL)
    return err("spec.retry.max_backoff_ms", "must be within 0..604800000 (0: 32 × backoff)");
  if (r.attempt_deadline_ms() < 0 || r.attempt_deadline_ms() > 600'000)
    return err("spec.retry.attempt_deadline_ms", "must be within 0..600000 (0: the default)");
  switch (spec.action_case()) {
    case v1::ScheduledActionSpec::kEvent: {
      auto& e = spec.event();
      switch (e.target_case()) {
        case v1::EntityEventAction::kOfferRequeue:
          if (e.offer_requeue().offer_id().empty())
            return err("spec.event.offer_requeue.offer_id", "is empty");
          if (e.offer_requeue().stage_id().empty())
            return err("spec.event.offer_requeue.stage_id", "is empty");
          break;
        case v1::EntityEventAction::kTaskEvent:
          if (e.task_event().task_id().empty())
            return err("spec.event.task_event.task_id", "is empty");
          if (e.task_event().name().empty())
            return err("spec.event.task_event.name", "is empty");
          break;
        default:
          return err("spec.event.target", "unknown event target; set offer_requeue or task_event");
      }
      break;
    }
    case v1::ScheduledActionSpec::kKafka: {
      auto& t = spec.kafka().topic();
      if (t.empty() || t.size() > 249)
        return err("spec.kafka.topic", "must be 1..249 characters");
      for (unsigned char c : t)
        if (!std::isalnum(c) && c != '.' && c != '_' && c != '-')
          return err("spec.kafka.topic", "may hold only letters, digits, '.', '_' and '-'");
      break;
    }
    case v1::ScheduledActionSpec::kHttp: {
      auto& h = spec.http();
      static const char* methods[] = {"", "GET", "POST", "PUT", "PATCH", "DELETE"};
      if (std::none_of(std::begin(methods), std::end(methods),
                       [&](const char* m) { return h.method() == m; }))
        return err("spec.http.method",
                   "'" + h.method() + "' is not GET, POST, PUT, PATCH or DELETE");
      std::string host;
      if (auto e = url_host(h.url(), host))
        return e;
      if (!opts.allow_private_targets && http::is_private_host(host))
        return err("spec.http.url", "host " + host
                                      + " is a loopback or private address; not allowed unless"
                                        " scheduled.allow_private_targets is set");
      for (auto& [k, v] : h.headers()) {
        if (k.empty() || k.find_first_of(":\r\n \t") != std::string::npos)
          return err("spec.http.headers", "bad header name '" + k + "'");
        if (v.find_first_of("\r\n") != std::string::npos)
          return err("spec.http.headers", "the value of '" + k + "' holds a line break");
      }
      break;
    }
    default: return err("spec.action", "unknown action kind; set event, kafka or http");
  }
  return std::nullopt;
}

std::optional<int64_t> first_occurrence(const v1::ScheduledActionSpec& spec, int64_t now_ms) {
  auto start = spec.start_at_ms() != 0 ? spec.start_at_ms() : now_ms;
  std::optional<int64_t> t = start;
  if (spec.period_case() == v1::ScheduledActionSpec::kCron)
    t = next_occurrence(spec, start - 1);
  if (t && spec.end_at_ms() != 0 && *t > spec.end_at_ms())
    return std::nullopt;
  return t;
}

std::optional<int64_t> next_occurrence(const v1::ScheduledActionSpec& spec, int64_t after_ms) {
  std::optional<int64_t> t;
  switch (spec.period_case()) {
    case v1::ScheduledActionSpec::kIntervalMs: {
      auto start = spec.start_at_ms();
      auto step = spec.interval_ms();
      if (step <= 0)
        return std::nullopt;
      t = after_ms < start ? start : start + ((after_ms - start) / step + 1) * step;
      break;
    }
    case v1::ScheduledActionSpec::kCron: {
      auto c = cron_expr::parse(spec.cron(), nullptr);
      if (c)
        t = c->next_after(after_ms);
      break;
    }
    default: return std::nullopt; // once
  }
  if (t && spec.end_at_ms() != 0 && *t > spec.end_at_ms())
    return std::nullopt;
  return t;
}

retry_settings effective_retry(const v1::ScheduledActionSpec& spec, const rules_options& opts) {
  retry_settings r;
  auto& p = spec.retry();
  r.max_attempts = p.max_attempts() > 0 ? p.max_attempts() : opts.default_max_attempts;
  r.backoff_ms = p.backoff_ms() > 0 ? p.backoff_ms() : opts.default_backoff_ms;
  r.max_backoff_ms = p.max_backoff_ms() > 0 ? p.max_backoff_ms() : 32 * r.backoff_ms;
  r.deadline_ms = p.attempt_deadline_ms() > 0 ? p.attempt_deadline_ms() : opts.default_deadline_ms;
  return r;
}

int64_t retry_delay_ms(const retry_settings& r, int32_t attempt) {
  int64_t d = r.backoff_ms;
  for (int32_t i = 1; i < attempt && d < r.max_backoff_ms; ++i)
    d *= 2;
  return std::min(d, std::max(r.max_backoff_ms, r.backoff_ms));
}

std::string idempotency_key(const std::string& action_id, int64_t scheduled_at_ms) {
  return action_id + "/" + std::to_string(scheduled_at_ms);
}

v1::ScheduledActionStatus start_status(const v1::ScheduledActionSpec& spec, int64_t now_ms,
                                       const v1::ScheduledActionStatus* previous) {
  v1::ScheduledActionStatus st;
  if (previous != nullptr) {
    st.set_last_attempt_at_ms(previous->last_attempt_at_ms());
    st.set_successes(previous->successes());
    st.set_failures_in_row(previous->failures_in_row());
    st.set_total_failures(previous->total_failures());
    st.set_last_error(previous->last_error());
    st.set_interrupted(previous->interrupted());
    st.set_gave_up(previous->gave_up());
    st.set_last_success_at_ms(previous->last_success_at_ms());
    st.set_paused(previous->paused()); // an operator's pause outlives an update
    st.set_paused_by(previous->paused_by());
  }
  auto first = first_occurrence(spec, now_ms);
  st.set_scheduled_at_ms(first.value_or(0));
  st.set_finished(!first);
  return st;
}

namespace {

/// Moves to the occurrence after the current one (missed ones coalesce into the next due
/// from `now_ms` on); returns it, or none when nothing is left.
std::optional<int64_t> advance(v1::ScheduledActionStatus& st, const v1::ScheduledActionSpec& spec,
                               int64_t now_ms) {
  st.set_attempt(0);
  auto next = next_occurrence(spec, std::max(st.scheduled_at_ms(), now_ms));
  st.set_scheduled_at_ms(next.value_or(0));
  st.set_finished(!next);
  return next;
}

void count_failure(v1::ScheduledActionStatus& st, const std::string& error) {
  st.set_failures_in_row(st.failures_in_row() + 1);
  st.set_total_failures(st.total_failures() + 1);
  st.set_last_error(error);
}

/// The due time of the regular schedule (the occurrence, or its retry), none when nothing is
/// left.
std::optional<int64_t> schedule_due(const v1::ScheduledActionStatus& st, const retry_settings& r) {
  if (st.finished())
    return std::nullopt;
  int64_t retry_at = st.last_attempt_at_ms() + retry_delay_ms(r, st.attempt());
  return st.attempt() == 0 ? st.scheduled_at_ms() : std::max(st.scheduled_at_ms(), retry_at);
}

} // namespace

std::optional<interrupted_attempt> recount_interrupted(v1::ScheduledActionStatus& st,
                                                       const v1::ScheduledActionSpec& spec,
                                                       const rules_options& opts, int64_t now_ms) {
  if (!st.in_flight())
    return std::nullopt;
  interrupted_attempt out;
  st.set_in_flight(false);
  st.set_interrupted(st.interrupted() + 1);
  count_failure(st, "attempt interrupted (the worker stopped before recording its outcome)");
  if (st.run_now_at_ms() != 0) {
    out.run_now = true;
    out.occurrence_ms = st.run_now_at_ms();
    out.attempt = 1;
    st.set_run_now_at_ms(0);
    return out;
  }
  out.occurrence_ms = st.scheduled_at_ms();
  out.attempt = st.attempt();
  if (st.attempt() >= effective_retry(spec, opts).max_attempts) {
    out.gave_up = true;
    st.set_gave_up(st.gave_up() + 1);
    advance(st, spec, now_ms);
  }
  return out;
}

bool pause(v1::ScheduledActionStatus& st, const v1::ScheduledActionSpec& spec,
           const rules_options& opts, int64_t now_ms, const std::string& who,
           std::optional<interrupted_attempt>* recounted) {
  recounted->reset();
  if (st.paused())
    return false;
  *recounted = recount_interrupted(st, spec, opts, now_ms);
  st.set_paused(true);
  st.set_paused_by(who);
  st.set_run_now_at_ms(0); // a run-now not done yet is dropped: a paused action fires nothing
  return true;
}

bool resume(v1::ScheduledActionStatus& st, const v1::ScheduledActionSpec& spec,
            const rules_options& opts, int64_t now_ms,
            std::optional<interrupted_attempt>* recounted) {
  recounted->reset();
  if (!st.paused())
    return false;
  *recounted = recount_interrupted(st, spec, opts, now_ms);
  st.set_paused(false);
  st.clear_paused_by();
  return true;
}

bool run_now(v1::ScheduledActionStatus& st, const v1::ScheduledActionSpec& spec,
             const rules_options& opts, int64_t now_ms,
             std::optional<interrupted_attempt>* recounted, std::string* refusal) {
  recounted->reset();
  refusal->clear();
  if (st.paused()) {
    *refusal = "is paused; resume it first";
    return false;
  }
  if (st.run_now_at_ms() != 0 && !st.in_flight())
    return false; // asked already, not fired yet
  *recounted = recount_interrupted(st, spec, opts, now_ms);
  st.set_run_now_at_ms(now_ms);
  return true;
}

begin_result begin_attempt(v1::ScheduledActionStatus& st, const v1::ScheduledActionSpec& spec,
                           const rules_options& opts, int64_t now_ms) {
  begin_result out;
  auto r = effective_retry(spec, opts);
  if (st.paused())
    return out; // parked until resumed
  if (auto i = recount_interrupted(st, spec, opts, now_ms)) {
    out.recounted = true;
    out.interrupted = i;
  }
  if (st.run_now_at_ms() != 0) {
    // A run-now: one attempt outside the schedule, ahead of it.
    if (st.run_now_at_ms() > now_ms) {
      out.due_ms = st.run_now_at_ms();
      return out;
    }
    st.set_in_flight(true);
    st.set_last_attempt_at_ms(now_ms);
    out.act = true;
    out.run_now = true;
    out.due_ms = now_ms + retry_delay_ms(r, 1); // a crash now: recounted, then the schedule
    return out;
  }
  auto due = schedule_due(st, r);
  if (!due)
    return out; // parked
  if (*due > now_ms) {
    out.due_ms = due;
    return out;
  }
  st.set_attempt(st.attempt() + 1);
  st.set_in_flight(true);
  st.set_last_attempt_at_ms(now_ms);
  out.act = true;
  out.due_ms = now_ms + retry_delay_ms(r, st.attempt());
  return out;
}

std::optional<int64_t> finish_attempt(v1::ScheduledActionStatus& st,
                                      const v1::ScheduledActionSpec& spec,
                                      const rules_options& opts, int64_t now_ms, bool ok,
                                      const std::string& error) {
  st.set_in_flight(false);
  auto r = effective_retry(spec, opts);
  if (st.run_now_at_ms() != 0) {
    st.set_run_now_at_ms(0);
    if (ok) {
      st.set_successes(st.successes() + 1);
      st.set_failures_in_row(0);
      st.set_last_success_at_ms(now_ms);
    } else {
      count_failure(st, error);
    }
    return schedule_due(st, r);
  }
  if (ok) {
    st.set_successes(st.successes() + 1);
    st.set_failures_in_row(0);
    st.set_last_success_at_ms(now_ms);
    return advance(st, spec, now_ms);
  }
  count_failure(st, error);
  if (st.attempt() >= r.max_attempts) {
    st.set_gave_up(st.gave_up() + 1);
    return advance(st, spec, now_ms);
  }
  return st.last_attempt_at_ms() + retry_delay_ms(r, st.attempt());
}

} // namespace gost::scheduled
