// gost_example: an application on gost (gost/runtime/node_builder.hpp). Everything gostd does,
// plus what the application brings: two actor types (bank accounts and watchlists,
// docs/adding-an-actor-type.md) and one stage (photo counts, docs/adding-a-stage.md), each
// registered with one line. It names itself: `gost_example --help` and its logs say so, and
// its stage has a key `stages.photo_count.enabled`.
#include "account.hpp"
#include "gost/runtime/node_builder.hpp"
#include "photo_count.hpp"
#include "watchlist.hpp"

int main(int argc, char** argv) {
  return gost::node_builder{}
    .name("gost_example", "1.0.0")
    .add_entity_type<bank::account>()
    .add_entity_type<watchlist::watchlist>()
    .add_stage<photos::photo_count>("photo_count")
    .run(argc, argv);
}
