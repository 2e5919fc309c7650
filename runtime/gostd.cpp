// gostd: one gost node, with the built-in stages and no actor types of an application's own.
// An application builds its own node the same way (gost/runtime/node_builder.hpp). See
// `gostd --help` and docs/config.md.
#include "gost/runtime/node_builder.hpp"

int main(int argc, char** argv) {
  return gost::node_builder{}.run(argc, argv);
}
