/* The defaults of the frontier's public option structs (zeus_frontier_opts_init,
 * zeus_frontier_write_opts_init); zeus_frontier_solve applies the same ones to zero fields. */
#include <string.h>

#include "zeus/frontier.h"

void zeus_frontier_opts_init(zeus_frontier_opts *o) {
  memset(o, 0, sizeof *o);
  o->unit_time_s = 0.001;
  o->noise_factor = 0.95;
}

void zeus_frontier_write_opts_init(zeus_frontier_write_opts *o) { memset(o, 0, sizeof *o); }
