/* zeus/exporter.h: a Prometheus exporter of the GPUs and CPU packages (`zeus exporter`).
 *
 * GET /metrics answers in the Prometheus text exposition format (0.0.4) with, for every visible
 * GPU (labels gpu = visible index, uuid, name): the energy used as a counter in joules (from the
 * GPU's energy counter, or integrated from its power where it has none; never decreasing, across
 * a counter reset too), power now and averaged, power limit and its range, SM and memory clocks,
 * temperature; and for every readable RAPL CPU package (labels cpu, name) the package and DRAM
 * energy in joules (wrap-around of the RAPL counters handled); on an NVIDIA Jetson (zeus/soc.h),
 * for each power rail (labels rail = cpu, gpu or total, label = the rail's own name) its energy
 * integrated from its power and its power now. docs/metrics.md lists every series and the
 * dcgm-exporter fields they correspond to.
 *
 * A background thread samples every sample_interval_s to integrate power and to catch each RAPL
 * wrap-around; a scrape reads the devices again, so values are current to the scrape.
 *
 * Part of the optional component ZEUS_WITH_EXPORTER (libmicrohttpd). Thread-safe: scrapes may run
 * concurrently (they are served one at a time internally), and the functions below may be called
 * from any thread.
 */
#ifndef ZEUS_EXPORTER_H
#define ZEUS_EXPORTER_H

#include "zeus/common.h"
#include "zeus/device.h"

ZEUS_BEGIN_DECLS

/* Zero-initialised (or NULL) means defaults. */
typedef struct zeus_exporter_opts {
  zeus_devices *devices;    /* borrowed, must outlive the exporter; NULL: zeus_devices_default() */
  const char *host;         /* address to listen on; default "127.0.0.1" (loopback) */
  int port;                 /* default 9401; -1: any free port (see zeus_exporter_port) */
  const char *token;        /* bearer token; NULL or "": no authentication */
  bool no_http;             /* collect only: no listening socket, use zeus_exporter_render */
  bool no_cpus;             /* leave the RAPL CPU packages out */
  double sample_interval_s; /* background sampling period; default 0.1, at most 10 */
  /* Connections served at once (0: 64). When all are held, a new one takes the slot of the
   * oldest that has not sent a whole request (a slow or idle client); only when every slot is
   * busy answering is the new one refused (503). */
  unsigned max_connections;
  /* A request's headers must have arrived within this many seconds of the connection opening
   * or of its previous reply (0: 5); slower connections are closed. */
  double request_timeout_s;
  /* Grid providers (zeus/grid.h, component ZEUS_WITH_GRID; borrowed, they must outlive the
   * exporter) whose last fetched factor every scrape serves: ElectricityMaps as
   * zeus_grid_carbon_intensity_grams_per_kilowatt_hour, OpenEI as zeus_grid_price_per_kilowatt_hour
   * {currency} (the rate at the scrape's hour), each labelled {url} and with
   * zeus_grid_fetch_age_seconds {url, provider}. The exporter does not ask the services: the caller fetches
   * (zeus exporter --carbon/--price runs a thread). A provider with nothing fetched yet has no
   * sample. ZEUS_EINVAL when given to a libzeus without ZEUS_WITH_GRID. */
  struct zeus_grid *const *grids;
  size_t num_grids;
} zeus_exporter_opts;

typedef struct zeus_exporter zeus_exporter;

/* Fills *o with the defaults: host "127.0.0.1", port 9401, sample_interval_s 0.1, the rest zero
 * (default devices, no token, HTTP on, CPUs in). Reads no environment. */
ZEUS_EXTERN void zeus_exporter_opts_init(zeus_exporter_opts *o /* out */);

/* Opens the exporter: reads every GPU and CPU package once, starts the sampling thread and
 * (unless no_http) serves GET /metrics on host:port from its own threads. Errors: ZEUS_EINVAL for
 * a bad option (named), ZEUS_ENET when the address cannot be bound, ZEUS_ENOMEM. */
ZEUS_EXTERN int zeus_exporter_open(zeus_exporter **out /* out */, const zeus_exporter_opts *opts);

/* The port bound (-1 with no_http). */
ZEUS_EXTERN int zeus_exporter_port(const zeus_exporter *e);

/* One scrape: the text GET /metrics would answer now, NUL-terminated, in *text (free with
 * zeus_free()); *len (may be NULL) its length without the NUL. ZEUS_ENOMEM. */
ZEUS_EXTERN int zeus_exporter_render(zeus_exporter *e, char **text /* out */, size_t *len /* out */);

/* Stops serving and sampling and frees everything (not the devices). NULL does nothing. */
ZEUS_EXTERN void zeus_exporter_close(zeus_exporter *e);

ZEUS_END_DECLS
#endif
