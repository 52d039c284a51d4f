/* src/grid/grid_internal.h: what the grid monitor asks of a provider beyond zeus/grid.h. */
#ifndef ZEUS_GRID_INTERNAL_H
#define ZEUS_GRID_INTERNAL_H

#include "zeus/grid.h"

/* The provider's per-request timeout in s. */
double zeus__grid_timeout(const zeus_grid *g);
/* Whether it is ElectricityMaps (hourly values that go stale) or OpenEI (tables for every hour). */
zeus_grid_provider zeus__grid_provider(const zeus_grid *g);
/* Unix time now, in s. */
double zeus__grid_unix_now(void);

#endif
