/* cli/grid_util.h: --carbon and --price of 'zeus monitor energy' (zeus/grid.h): the window's
 * grams of CO2eq and its cost beside its joules. Without ZEUS_WITH_GRID the options are still
 * listed and refused with a message naming the component. */
#ifndef ZEUS_CLI_GRID_UTIL_H
#define ZEUS_CLI_GRID_UTIL_H

#include <jansson.h>

#include "cli.h"

typedef struct cli_grid cli_grid;

/* The options' destinations, and their entries for a cli_opt table (CLI_GRID_OPTS). */
extern const char *cli_grid_carbon, *cli_grid_price, *cli_grid_price_label, *cli_grid_price_sector,
    *cli_grid_price_currency, *cli_grid_em_url, *cli_grid_openei_url, *cli_grid_emission_factor;
extern bool cli_grid_estimate;
extern long cli_grid_price_radius;
extern double cli_grid_poll_s;

/* The options of --carbon and --price after the first (shared by zeus monitor energy and zeus
 * exporter). */
#define CLI_GRID_CARBON_MORE                                                                              \
  {"carbon-estimate", 0, CLI_OPT_FLAG, &cli_grid_estimate, NULL,                                            \
   "accept ElectricityMaps' estimates where it has no measured intensity"},                                \
  {"carbon-emission-factor", 0, CLI_OPT_STRING, &cli_grid_emission_factor, "direct|lifecycle",            \
   "the emission factor ElectricityMaps counts", "direct"},                                                 \
  {"electricitymaps-url", 0, CLI_OPT_STRING, &cli_grid_em_url, "URL",                                       \
   "ElectricityMaps' base URL (a proxy or mirror)", "$ZEUS_ELECTRICITYMAPS_URL, else\n"                    \
   "https://api.electricitymap.org"}
#define CLI_GRID_PRICE_MORE                                                                               \
  {"price-label", 0, CLI_OPT_STRING, &cli_grid_price_label, "LABEL",                                        \
   "the OpenEI rate's label (required with --price)"},                                                      \
  {"price-sector", 0, CLI_OPT_STRING, &cli_grid_price_sector, "SECTOR",                                     \
   "Residential, Commercial, Industrial or Lighting", "Residential"},                                       \
  {"price-radius", 0, CLI_OPT_LONG, &cli_grid_price_radius, "MILES",                                        \
   "search radius for rates around LAT,LON", "0", .min = 0, .max = 200},                                    \
  {"price-currency", 0, CLI_OPT_STRING, &cli_grid_price_currency, "CODE",                                   \
   "the rates' currency, named in the report", "USD"},                                                      \
  {"openei-url", 0, CLI_OPT_STRING, &cli_grid_openei_url, "URL", "OpenEI's base URL (a proxy or mirror)",  \
   "$ZEUS_OPENEI_URL, else https://api.openei.org"}

#define CLI_GRID_OPTS                                                                                       \
  {"carbon", 0, CLI_OPT_STRING, &cli_grid_carbon, "latlon:LAT,LON",                                         \
   "also report the window's carbon emission in grams of CO2eq: its energy times the grid's\n"           \
   "carbon intensity at LAT,LON from ElectricityMaps, fetched every --grid-poll seconds while\n"          \
   "CMD runs (key: ZEUS_ELECTRICITYMAPS_API_KEY or ..._API_KEY_FILE)",                                    \
   .heading = "Carbon and cost (docs/carbon-and-cost.md):"},                                              \
  CLI_GRID_CARBON_MORE,                                                                                     \
  {"price", 0, CLI_OPT_STRING, &cli_grid_price, "latlon:LAT,LON",                                           \
   "also report the window's energy cost: its energy times the price per kWh of the OpenEI\n"            \
   "utility rate --price-label at LAT,LON for the hour (UTC) of each part of the window\n"               \
   "(key: ZEUS_OPENEI_API_KEY or ZEUS_OPENEI_API_KEY_FILE)"},                                              \
  CLI_GRID_PRICE_MORE,                                                                                      \
  {"grid-poll", 0, CLI_OPT_DOUBLE, &cli_grid_poll_s, "S",                                                   \
   "seconds between fetches of the intensity and the price (the window's energy is split at\n"           \
   "each fetch)", "60", .min = 0.01, .max = 86400}

#define CLI_GRID_EXPORTER_OPTS                                                                              \
  {"carbon", 0, CLI_OPT_STRING, &cli_grid_carbon, "latlon:LAT,LON",                                         \
   "also serve the grid's carbon intensity at LAT,LON from ElectricityMaps\n"                             \
   "(zeus_grid_carbon_intensity_grams_per_kilowatt_hour; key: ZEUS_ELECTRICITYMAPS_API_KEY or\n"         \
   "..._API_KEY_FILE)",                                                                                     \
   .heading = "Carbon and cost (docs/carbon-and-cost.md):"},                                              \
  CLI_GRID_CARBON_MORE,                                                                                     \
  {"price", 0, CLI_OPT_STRING, &cli_grid_price, "latlon:LAT,LON",                                           \
   "also serve the price per kWh of the OpenEI utility rate --price-label at LAT,LON at the\n"           \
   "scrape's hour (zeus_grid_price_per_kilowatt_hour; key: ZEUS_OPENEI_API_KEY or ..._FILE)"},            \
  CLI_GRID_PRICE_MORE,                                                                                      \
  {"grid-poll", 0, CLI_OPT_DOUBLE, &cli_grid_poll_s, "S",                                                   \
   "seconds between fetches of the intensity and the price", "60", .min = 0.01, .max = 86400}

/* Whether --carbon or --price was given. */
bool cli_grid_wanted(void);
/* Opens the providers the options ask for on monitor m and begins their windows; prints an error
 * and returns false on a bad option (before CMD starts). *out is NULL when none was asked for. */
bool cli_grid_begin(const char *cmd, zeus_monitor *m, cli_grid **out);
/* Ends the windows (the energy's grams and cost, or why they are missing). */
void cli_grid_end(cli_grid *g);
/* Adds carbon_emission_g, {gpu,cpu,dram}_carbon_emission_g, energy_cost, {gpu,cpu,dram}_energy_cost,
 * energy_cost_currency (and *_error where a figure is missing) to a JSON report. */
void cli_grid_json(const cli_grid *g, json_t *doc);
/* The same as text lines. */
void cli_grid_text(const cli_grid *g, FILE *out);
/* Whether every figure asked for was measured (false after a provider failed). */
bool cli_grid_ok(const cli_grid *g);
void cli_grid_close(cli_grid *g);

/* zeus exporter: opens the providers the options ask for (out[0] ElectricityMaps, out[1] OpenEI,
 * NULL where not asked) and starts a thread that fetches them every --grid-poll seconds (with
 * `once`, fetches once now instead); prints an error and returns false on a bad option. A failed
 * fetch is logged (never with the key) and served as nothing. *out_n is how many were opened. */
typedef struct cli_grid_fetcher cli_grid_fetcher;
bool cli_grid_fetch_start(const char *cmd, bool once, struct zeus_grid **out /* [2] */, size_t *out_n,
                          cli_grid_fetcher **f);
/* Stops the thread and closes the providers. */
void cli_grid_fetch_stop(cli_grid_fetcher *f);

#endif
