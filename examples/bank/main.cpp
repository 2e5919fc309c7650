// gost_bank: a gost node that hosts bank accounts (docs/adding-an-actor-type.md). Everything
// gostd does, plus one actor type: register it, run the node.
#include "account.hpp"
#include "gost/runtime/node_builder.hpp"

int main(int argc, char** argv) {
  return gost::node_builder{}.add_entity_type<bank::account>().run(argc, argv);
}
