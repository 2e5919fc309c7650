// gostctl: the command-line client of a gost node (gRPC): the inspection console, its verbs,
// and clients of the public services. The commands are a table (commands.cpp), one file per
// group; `gostctl --help` and `gostctl COMMAND --help` are printed from it.
#include <cstdio>
#include <string>

#include "gostctl/cli.hpp"

int main(int argc, char** argv) {
  using namespace gost::ctl;
  cli c;
  bool parsed = parse(argc, argv, c);
  const command* cmd = parsed ? find_command(c.cmd) : nullptr;
  if (cmd != nullptr && c.help) {
    std::fputs(usage(*cmd).c_str(), stdout);
    return 0;
  }
  if (!parsed || c.help) {
    // No command, or --help alone: the whole help on stdout; a bad command line on stderr.
    bool asked = argc == 1 || c.help;
    std::fputs(usage().c_str(), asked ? stdout : stderr);
    return asked ? 0 : 2;
  }
  if (cmd == nullptr) {
    std::fprintf(stderr, "gostctl: unknown command `%s`\n\n%s", c.cmd.c_str(), usage().c_str());
    return 2;
  }
  return cmd->run(c);
}
