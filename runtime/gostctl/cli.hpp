#pragma once
// gostctl's shared part: the parsed command line, the command table's row, the call contexts
// (deadline, who asks, the console token) and the checks of option values every group uses.
// One file per command group (offers.cpp, stages.cpp, ...) defines its rows; main.cpp looks a
// command up in the table (commands.cpp), and --help is printed from it.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/timestamp.pb.h>
#include <grpcpp/grpcpp.h>

#include "gost/v1/admin.grpc.pb.h"

namespace gost::ctl {

/// The command line: the command, its positional arguments and its --options.
struct cli {
  std::string cmd;
  std::vector<std::string> positional;
  std::map<std::string, std::string> opts;
  std::string addr;  ///< --addr, GOST_ADDR or 127.0.0.1:50051
  bool help = false; ///< -h or --help was given
};

/// One command: its name, the group --help lists it under, its synopsis (after the name; may
/// hold "\n" for more lines), its help text (lines of at most 70 characters), the options it
/// takes without a value (" --once --all"), and the function that runs it (its exit code: 0,
/// 1 when the node answered an error, 2 on bad usage).
struct command {
  const char* name;
  const char* group;
  const char* synopsis;
  const char* help;
  int (*run)(const cli&);
  const char* flags = "";
};

/// Every command, by group, in the order --help lists them (commands.cpp).
const std::vector<command>& commands();
/// The command called `name`, or null.
const command* find_command(const std::string& name);
/// The whole --help text, generated from the table.
std::string usage();
/// One command's help (gostctl CMD --help).
std::string usage(const command& c);

/// Parses argv; false when no command is given or an option lacks its value.
bool parse(int argc, char** argv, cli& out);

/// The option's value, or `def` when not given.
std::string opt(const cli& c, const std::string& k, const std::string& def = "");
/// Whether the option was given (with or without a value).
inline bool has(const cli& c, const std::string& k) {
  return c.opts.count(k) != 0;
}

/// Who asks: --who, else $USER.
std::string who(const cli& c);

/// A channel to the node at --addr (one per process: every stub shares it). Every channel sends
/// --token (GOST_TOKEN) as `authorization: Bearer <token>` on every call, and speaks TLS with
/// --tls-ca (GOST_TLS_CA; the CA of the node's certificate) and/or --cert/--key (GOST_CERT,
/// GOST_KEY; a client certificate).
std::shared_ptr<grpc::Channel> channel(const cli& c);
/// A channel to another node (`top --all`, `drain NODE`).
std::shared_ptr<grpc::Channel> channel_to(const std::string& addr);
/// The node's AdminService at --addr.
std::unique_ptr<v1::AdminService::Stub> admin_stub(const cli& c);

/// A call's deadline: 30 s.
void set_deadline(grpc::ClientContext& ctx);
/// Every call says who asks (metadata x-gost-who): the node logs it with a verb and records it
/// with a change in the offer's history.
void call_context(grpc::ClientContext& ctx, const cli& c);
/// Who asks, on every admin call (the token goes with every call: `channel`).
void admin_context(grpc::ClientContext& ctx, const cli& c);

/// Prints the node's error (`gostctl: CODE: message`); returns 1.
int fail(const grpc::Status& s);

/// Whether the command got `n` positional arguments; else says what to give (exit code 2).
bool given(const cli& c, size_t n, const char* what);
/// A whole-number option (--price, --expected-version) into `out` when given; false (after
/// naming it) when it is not one: a typo never becomes 0.
bool whole_opt(const cli& c, const char* name, int64_t& out);
/// A whole decimal number >= 1 (a dead letter id, a page size); false when `text` is not one.
bool positive(const std::string& text, int64_t& out);
/// "60s", "5m", "1h", "250ms" or plain seconds -> milliseconds; -1 when not a duration.
int64_t duration_ms(const std::string& text);
/// --since / --until into `out` (unset when not given); false, after saying why, when it is
/// neither RFC 3339 nor an age such as 30m.
bool time_opt(const cli& c, const char* name, google::protobuf::Timestamp* out, bool& given);

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

/// Each group's rows, one file each (offers.cpp, stages.cpp, ...).
std::vector<command> offer_commands();
std::vector<command> stage_commands();
std::vector<command> cluster_commands();
std::vector<command> dead_letter_commands();
std::vector<command> watch_commands();
std::vector<command> entity_commands();
std::vector<command> task_commands();
std::vector<command> action_commands();
std::vector<command> feed_commands();

} // namespace gost::ctl
