/* zeus/grid.h: measurement windows in grams of CO2 and in money (the original's
 * zeus.monitor.carbon.CarbonEmissionMonitor and zeus.monitor.price.EnergyCostMonitor).
 *
 * Optional component ZEUS_WITH_GRID (it links libcurl; zeus/config.h says whether this libzeus
 * has it: ZEUS_HAVE_GRID).
 *
 * Two layers:
 *
 *   zeus_grid  a provider of a factor per kWh of the electricity grid at a place:
 *     ZEUS_GRID_ELECTRICITYMAPS  the carbon intensity in gCO2eq/kWh (and that of the last 24 hours:
 *       zeus_grid_history),
 *       GET <url>/v3/carbon-intensity/latest?lat=..&lon=..&disableEstimations=True|False
 *       &emissionFactorType=direct|lifecycle, answer {"carbonIntensity": N, ...}; the API key
 *       (where one is given) goes in the "auth-token" header.
 *     ZEUS_GRID_OPENEI  the price per kWh from a utility rate of the OpenEI Utility Rate Database,
 *       GET <url>/utility_rates?version=latest&format=json&api_key=..&lat=..&lon=..&radius=..
 *       &detail=full&sector=.., and in the answer the object whose "label" is the rate's label:
 *       its "energyratestructure" (per period, tiers with a "rate"), "energyweekdayschedule" and
 *       "energyweekendschedule" (12 months x 24 hours of period numbers). As the original, the
 *       price at a time is the rate of the first tier of the period the schedule gives for that
 *       time's month, hour and day of the week, in UTC.
 *   zeus_grid_monitor  measurement windows on a zeus_monitor whose energy is multiplied by the
 *     provider's factor: a thread fetches the factor every poll_interval_s, and at each fetch ends
 *     every open window's current segment (the energy since the previous fetch, per GPU, CPU
 *     package and DRAM zone) and adds that energy times the factor just fetched. A segment's
 *     energy is added once the monitor's estimate at its cuts is final (about 1 s later, or when
 *     the window ends), so that on GPUs whose sensors tick (docs/sim.md) the segments add up to
 *     the window's energy. A window's grams or cost are the sum over its segments, so a factor
 *     that changes during a window is followed to within one poll interval.
 *
 * Base URL: opts->url, else the environment (ZEUS_ELECTRICITYMAPS_URL, ZEUS_OPENEI_URL), else the
 * public service (https://api.electricitymap.org, https://api.openei.org). API key: opts->api_key,
 * else the file opts->api_key_file, else ZEUS_ELECTRICITYMAPS_API_KEY / ZEUS_OPENEI_API_KEY, else
 * the file named by ZEUS_ELECTRICITYMAPS_API_KEY_FILE / ZEUS_OPENEI_API_KEY_FILE (its first line).
 * OpenEI needs one; ElectricityMaps is asked without one when none is given. A key is never
 * written to a log or an error message: errors name the service, the base URL and the path, and
 * an answer quoted in an error has the key blanked out.
 *
 * A provider that fails never gives a made-up figure: a window whose factor was missing for any
 * of its segments (no answer yet, an HTTP error, malformed JSON, a value older than max_age_s)
 * still gets its energy, and its grams or cost are marked invalid with the reason.
 *
 *   zeus_grid_opts go;
 *   zeus_grid_opts_init(&go);
 *   go.provider = ZEUS_GRID_ELECTRICITYMAPS;  go.lat = 42.2776;  go.lon = -83.7409;
 *   zeus_grid *g;   zeus_grid_open(&g, &go);
 *   zeus_grid_monitor_opts mo;
 *   zeus_grid_monitor_opts_init(&mo);
 *   mo.grid = g;
 *   zeus_grid_monitor *gm;   zeus_grid_monitor_open(&gm, &mo);
 *   zeus_grid_monitor_begin_window(gm, "epoch");
 *   ...
 *   zeus_grid_measurement r;
 *   zeus_grid_monitor_end_window(gm, "epoch", &r);
 *   if (r.valid) printf("%.3f g\n", r.total);  else printf("%s\n", r.error);
 *   zeus_grid_monitor_close(gm);  zeus_grid_close(g);
 *
 * Thread safety: a zeus_grid and a zeus_grid_monitor may be used from several threads, except
 * their close.
 */
#ifndef ZEUS_GRID_H
#define ZEUS_GRID_H

#include "zeus/common.h"
#include "zeus/monitor.h"

ZEUS_BEGIN_DECLS

typedef struct zeus_grid zeus_grid;
typedef struct zeus_grid_monitor zeus_grid_monitor;

typedef enum zeus_grid_provider {
  ZEUS_GRID_ELECTRICITYMAPS = 0, /* carbon intensity, gCO2eq/kWh */
  ZEUS_GRID_OPENEI = 1,          /* price, <currency>/kWh */
} zeus_grid_provider;

typedef struct zeus_grid_opts {
  zeus_grid_provider provider;
  double lat, lon;          /* degrees: lat in [-90, 90], lon in [-180, 180] */
  const char *url;          /* base URL (http:// or https://); NULL: environment, then public */
  const char *api_key;      /* NULL: api_key_file, then the environment (see above) */
  const char *api_key_file;
  double timeout_s;         /* per request; 0: 10 s */
  /* ElectricityMaps */
  bool estimate;                    /* ask for estimated values where measured ones are missing */
  const char *emission_factor_type; /* "direct" (default) or "lifecycle" */
  /* OpenEI */
  const char *label;    /* the rate's label (required) */
  const char *sector;   /* "Residential" (default), "Commercial", "Industrial", "Lighting" */
  unsigned radius;      /* search radius in miles around lat, lon (0: the place itself) */
  const char *currency; /* the rates' currency, reported with costs; NULL: "USD" */
} zeus_grid_opts;

/* Fills *o with the defaults (ElectricityMaps at 0, 0; every other field as documented). */
ZEUS_EXTERN void zeus_grid_opts_init(zeus_grid_opts *o /* out */);
/* Opens a provider; no request is made yet. Errors: ZEUS_EINVAL naming a bad field (a place out
 * of range, an unknown emission factor type or sector, a URL that is not http(s), an OpenEI
 * rate without label or API key), ZEUS_ENOENT/ZEUS_EIO for an API key file that cannot be read. */
ZEUS_EXTERN int zeus_grid_open(zeus_grid **out /* out */, const zeus_grid_opts *o);
/* Frees the provider; NULL does nothing. Close its monitors first. */
ZEUS_EXTERN void zeus_grid_close(zeus_grid *g);
/* "gCO2eq/kWh" or "<currency>/kWh" (borrowed, valid until close). */
ZEUS_EXTERN const char *zeus_grid_unit(const zeus_grid *g);
/* Which service it asks, and (OpenEI) the rates' currency ("" for ElectricityMaps; borrowed). */
ZEUS_EXTERN zeus_grid_provider zeus_grid_kind(const zeus_grid *g);
ZEUS_EXTERN const char *zeus_grid_currency(const zeus_grid *g);
/* The base URL requests go to (borrowed, valid until close; no key in it). */
ZEUS_EXTERN const char *zeus_grid_url(const zeus_grid *g);
/* Asks the service once and keeps what it answered (the latest intensity, or the rate's tables).
 * Errors: ZEUS_ENET (no connection), ZEUS_ETIMEDOUT (no answer within timeout_s), ZEUS_EHTTP
 * (an answer other than 2xx, quoted), ZEUS_EPARSE (malformed JSON), ZEUS_ENOENT (the answer has
 * no carbonIntensity, or no rate with that label, or its tables are incomplete); what was kept
 * from an earlier fetch stays. */
ZEUS_EXTERN int zeus_grid_fetch(zeus_grid *g);
/* The factor per kWh at unix time `unix_time_s` from the last successful fetch (ElectricityMaps:
 * the latest intensity whatever the time; OpenEI: the schedule's rate at that time), and in
 * *fetched_unix_s (may be NULL) when that fetch was. ZEUS_ESTATE when no fetch has succeeded. */
ZEUS_EXTERN int zeus_grid_rate(zeus_grid *g, double unix_time_s, double *per_kwh /* out */,
                               double *fetched_unix_s /* out */);

/* OpenEI: the tables of the last successful fetch: the first tier's rate of each period (at most
 * `cap` written to rates, their number in *num_periods) and the weekday and weekend schedules
 * (period numbers by month and hour; either may be NULL). ZEUS_ESTATE when nothing was fetched,
 * ZEUS_EINVAL for an ElectricityMaps provider. */
ZEUS_EXTERN int zeus_grid_openei_tables(zeus_grid *g, double *rates /* out */, size_t cap,
                                        size_t *num_periods /* out */, int weekday[12][24] /* out */,
                                        int weekend[12][24] /* out */);

/* OpenEI: the rate's fields as the last successful fetch found them, as one JSON object
 * {"energy_rate_structure": [...], "energy_weekday_schedule": [...], "energy_weekend_schedule":
 * [...]} (the original's get_current_electricity_prices) in *json (free with zeus_free).
 * ZEUS_ESTATE when nothing was fetched, ZEUS_EINVAL for an ElectricityMaps provider. */
ZEUS_EXTERN int zeus_grid_openei_json(zeus_grid *g, char **json /* out */);

/* ElectricityMaps: the carbon intensity of recent hours at the provider's place (the original's
 * ElectrictyMapsClient.get_recent_carbon_intensity): GET <url>/v3/carbon-intensity/history?lat=..
 * &lon=..&disableEstimations=..&emissionFactorType=.. (the query and the key as zeus_grid_fetch),
 * answer {"history": [{"datetime": "2024-11-30T06:00:00.000Z", "carbonIntensity": N, ...}, ...]},
 * the last 24 hours, one value per hour (ZEUS_GRID_UPDATE_PERIOD_S, ZEUS_GRID_HISTORY_LENGTH).
 * One request per call; nothing is kept and zeus_grid_rate is not changed. */
#define ZEUS_GRID_UPDATE_PERIOD_S 3600 /* how long one value holds */
#define ZEUS_GRID_HISTORY_LENGTH 24    /* how many values the service gives */
#define ZEUS_GRID_HISTORY_MAX 1024     /* an answer with more entries is refused (ZEUS_ERANGE) */

typedef struct zeus_grid_history_point {
  double time_unix_s;         /* the start of the hour ("datetime"), s since 1970 UTC */
  double intensity_g_per_kwh; /* "carbonIntensity", gCO2eq/kWh; NAN where the service has none (null) */
} zeus_grid_history_point;

/* Writes the answer's entries, in the answer's order (oldest first as the service gives them), to
 * points[0 .. min(n, cap)) and their number n to *num (so a caller with cap < n may ask again with
 * more room; cap ZEUS_GRID_HISTORY_MAX always suffices; points may be NULL when cap is 0).
 * Memory is bounded: the answer's size (8 MiB) and its entries (ZEUS_GRID_HISTORY_MAX).
 * Thread safe; may run while a zeus_grid_monitor polls the same provider.
 * Errors: ZEUS_EINVAL (NULL arguments, an OpenEI provider: it has no history), ZEUS_ENET,
 * ZEUS_ETIMEDOUT, ZEUS_EHTTP (as zeus_grid_fetch), ZEUS_EPARSE (malformed JSON), ZEUS_ENOENT (no
 * "history" list, or an entry without a "datetime" ISO 8601 string or a non-negative number
 * or null "carbonIntensity": the message names the entry and the field, and quotes the answer),
 * ZEUS_ERANGE (more than ZEUS_GRID_HISTORY_MAX entries, or an answer over 8 MiB). */
ZEUS_EXTERN int zeus_grid_history(zeus_grid *g, zeus_grid_history_point *points /* out */,
                                  size_t cap, size_t *num /* out */);

typedef struct zeus_grid_monitor_opts {
  zeus_grid *grid;        /* borrowed; required; must outlive the monitor */
  zeus_monitor *monitor;  /* borrowed; NULL: one of its own on gpu_indices and cpu_indices */
  const unsigned *gpu_indices;
  size_t num_gpu_indices;
  const unsigned *cpu_indices;
  size_t num_cpu_indices;
  double poll_interval_s; /* between fetches; 0: 60 s */
  double max_age_s;       /* a factor fetched longer ago than this is not used; 0: 3600 s for
                             ElectricityMaps (its values are hourly), no limit for OpenEI (a
                             rate's tables hold for every hour) */
} zeus_grid_monitor_opts;

typedef struct zeus_grid_measurement {
  zeus_measurement energy; /* the window's time and energy, as zeus_monitor_end_window */
  bool valid;              /* whether the figures below are real; when false, error says why */
  double gpu[ZEUS_MAX_GPUS]; /* per entry of energy.gpu_indices: grams of CO2eq, or money */
  double cpu[ZEUS_MAX_CPUS]; /* per CPU package */
  double dram[ZEUS_MAX_CPUS]; /* per DRAM zone (energy.dram_valid) */
  double total;            /* every GPU + every CPU package (DRAM not included), as total_energy_j */
  unsigned num_segments;   /* the fetches the window's energy was split at, plus one */
  int error_code;          /* ZEUS_OK when valid */
  char error[512];         /* why not valid ("" when valid) */
} zeus_grid_measurement;

/* Fills *o with the defaults. */
ZEUS_EXTERN void zeus_grid_monitor_opts_init(zeus_grid_monitor_opts *o /* out */);
/* Opens a grid monitor and starts its thread, which fetches at once and then every
 * poll_interval_s. Errors: ZEUS_EINVAL (no grid, a bad interval), those of zeus_monitor_open. */
ZEUS_EXTERN int zeus_grid_monitor_open(zeus_grid_monitor **out /* out */, const zeus_grid_monitor_opts *o);
/* Stops the thread (waiting for a request in flight, at most timeout_s) and frees the monitor
 * (and the zeus_monitor it opened); open windows are discarded. NULL does nothing. */
ZEUS_EXTERN void zeus_grid_monitor_close(zeus_grid_monitor *gm);
/* Begins window `key` (non-empty, at most 200 bytes). ZEUS_EEXIST when it is open. */
ZEUS_EXTERN int zeus_grid_monitor_begin_window(zeus_grid_monitor *gm, const char *key);
/* Ends window `key`: its last segment takes the latest factor (waiting, at most timeout_s, for
 * the thread's first fetch when none has finished yet). ZEUS_OK whenever the energy was measured,
 * even when the grams or cost could not be (out->valid false, out->error_code, out->error);
 * ZEUS_ENOENT for a window that is not open; errors of zeus_monitor_end_window. */
ZEUS_EXTERN int zeus_grid_monitor_end_window(zeus_grid_monitor *gm, const char *key,
                                             zeus_grid_measurement *out /* out */);
/* The last factor the thread fetched (as zeus_grid_rate at now), for gauges. ZEUS_ESTATE when
 * none yet or it is older than max_age_s. */
ZEUS_EXTERN int zeus_grid_monitor_rate(zeus_grid_monitor *gm, double *per_kwh /* out */);

ZEUS_END_DECLS
#endif
