/* The grid's factor per kWh from ElectricityMaps (carbon intensity) or OpenEI (utility rates),
 * over libcurl (zeus/grid.h). */
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/core.h"
#include "core/json.h"
#include "grid/grid_internal.h"
#include "http_client/client.h"

#define MOD "grid"
#define MAX_ANSWER ((size_t)8 << 20) /* a utility's rates with detail=full: ~100 KiB each */
#define MAX_KEY 4096

struct zeus_grid {
  zeus_grid_provider provider;
  char *url; /* base, without a trailing '/' */
  char *key; /* NULL: none */
  double lat, lon, timeout;
  bool estimate;
  char *factor_type, *label, *sector, *currency;
  unsigned radius;
  char unit[64];
  pthread_mutex_t mu; /* what was fetched */
  pthread_mutex_t fetch_mu; /* one request at a time */
  bool have;
  double fetched_at;
  double intensity; /* ElectricityMaps */
  /* OpenEI: per period the first tier's rate; the schedules, period numbers */
  double *rates;
  size_t nrates;
  int weekday[12][24], weekend[12][24];
  json_t *tables; /* as found: {"energy_rate_structure", "energy_weekday_schedule", ...} */
};

static const char *const names[] = {"ElectricityMaps", "OpenEI"};

void zeus_grid_opts_init(zeus_grid_opts *o) {
  memset(o, 0, sizeof *o);
  o->emission_factor_type = "direct";
  o->sector = "Residential";
}

double zeus__grid_unix_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
#define unix_now zeus__grid_unix_now

double zeus__grid_timeout(const zeus_grid *g) { return g->timeout; }
zeus_grid_provider zeus__grid_provider(const zeus_grid *g) { return g->provider; }

/* The shortest decimal that reads back as v (what Python's f-string writes for a float). */
static void fmt_double(char *buf, size_t len, double v) {
  for (int p = 1; p <= 17; p++) {
    snprintf(buf, len, "%.*g", p, v);
    if (strtod(buf, NULL) == v) return;
  }
}

/* The first line of a key file, without blanks around it. */
static int read_key_file(const char *path, char **out) {
  char *data = NULL;
  size_t len = 0;
  int rc = zeus__read_file_max(path, MAX_KEY, "API key file", &data, &len);
  if (rc) return rc;
  char *s = data;
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strcspn(s, "\r\n");
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  s[n] = '\0';
  if (!n) {
    free(data);
    return zeus__error(ZEUS_EINVAL, "API key file '%s' is empty: expected the key on its first line", path);
  }
  *out = zeus__strdup(s);
  free(data);
  return *out ? ZEUS_OK : zeus__oom("reading an API key");
}

static int find_key(zeus_grid *g, const zeus_grid_opts *o) {
  const char *env_key = g->provider == ZEUS_GRID_OPENEI ? "ZEUS_OPENEI_API_KEY" : "ZEUS_ELECTRICITYMAPS_API_KEY";
  const char *env_file =
      g->provider == ZEUS_GRID_OPENEI ? "ZEUS_OPENEI_API_KEY_FILE" : "ZEUS_ELECTRICITYMAPS_API_KEY_FILE";
  if (o->api_key && o->api_key[0]) {
    g->key = zeus__strdup(o->api_key);
    return g->key ? ZEUS_OK : zeus__oom("copying an API key");
  }
  if (o->api_key_file && o->api_key_file[0]) return read_key_file(o->api_key_file, &g->key);
  const char *v = zeus__env_str(env_key);
  if (v) {
    g->key = zeus__strdup(v);
    return g->key ? ZEUS_OK : zeus__oom("copying an API key");
  }
  v = zeus__env_str(env_file);
  if (v) {
    int rc = read_key_file(v, &g->key);
    return rc ? zeus__error_ctx(rc, "%s", env_file) : ZEUS_OK;
  }
  return ZEUS_OK;
}

void zeus_grid_close(zeus_grid *g) {
  if (!g) return;
  if (g->key) memset(g->key, 0, strlen(g->key));
  free(g->key);
  free(g->url);
  free(g->factor_type);
  free(g->label);
  free(g->sector);
  free(g->currency);
  free(g->rates);
  json_decref(g->tables);
  pthread_mutex_destroy(&g->mu);
  pthread_mutex_destroy(&g->fetch_mu);
  free(g);
}

int zeus_grid_open(zeus_grid **out, const zeus_grid_opts *o) {
  if (!out || !o) return zeus__error(ZEUS_EINVAL, "zeus_grid_open: NULL argument");
  *out = NULL;
  if (o->provider != ZEUS_GRID_ELECTRICITYMAPS && o->provider != ZEUS_GRID_OPENEI)
    return zeus__error(ZEUS_EINVAL, "grid provider %d: expected ELECTRICITYMAPS (0) or OPENEI (1)", (int)o->provider);
  const char *name = names[o->provider];
  if (!(o->lat >= -90 && o->lat <= 90) || !(o->lon >= -180 && o->lon <= 180))
    return zeus__error(ZEUS_EINVAL, "%s: the place %g, %g is not a latitude in [-90, 90] and a longitude in [-180, 180]",
                       name, o->lat, o->lon);
  if (!(o->timeout_s >= 0 && o->timeout_s <= 3600))
    return zeus__error(ZEUS_EINVAL, "%s: timeout %g s: expected 0 (the default, 10 s) to 3600 s", name, o->timeout_s);
  const char *ft = o->emission_factor_type && o->emission_factor_type[0] ? o->emission_factor_type : "direct";
  if (strcmp(ft, "direct") && strcmp(ft, "lifecycle"))
    return zeus__error(ZEUS_EINVAL, "ElectricityMaps: emission factor type '%s': expected direct or lifecycle", ft);
  const char *sector = o->sector && o->sector[0] ? o->sector : "Residential";
  static const char *const sectors[] = {"Residential", "Commercial", "Industrial", "Lighting"};
  bool sector_ok = false;
  for (size_t i = 0; i < ZEUS__ARRAY_LEN(sectors); i++) sector_ok |= !strcmp(sector, sectors[i]);
  if (!sector_ok)
    return zeus__error(ZEUS_EINVAL, "OpenEI: sector '%s': expected Residential, Commercial, Industrial or Lighting",
                       sector);
  if (o->provider == ZEUS_GRID_OPENEI && !(o->label && o->label[0]))
    return zeus__error(ZEUS_EINVAL, "OpenEI: no rate label: expected the label of a utility rate (a 24-character id "
                                    "from the OpenEI Utility Rate Database)");
  const char *url = o->url && o->url[0] ? o->url : NULL;
  const char *env_url = o->provider == ZEUS_GRID_OPENEI ? "ZEUS_OPENEI_URL" : "ZEUS_ELECTRICITYMAPS_URL";
  if (!url) url = zeus__env_str(env_url);
  if (!url) url = o->provider == ZEUS_GRID_OPENEI ? "https://api.openei.org" : "https://api.electricitymap.org";
  if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
    return zeus__error(ZEUS_EINVAL, "%s: base URL '%s': expected http://HOST[:PORT][/PATH] or https://...", name, url);
  if (strchr(url, '?') || strchr(url, '#'))
    return zeus__error(ZEUS_EINVAL, "%s: base URL '%s': expected no query or fragment", name, url);

  zeus_grid *g = calloc(1, sizeof *g);
  if (!g) return zeus__oom("opening a grid provider");
  pthread_mutex_init(&g->mu, NULL);
  pthread_mutex_init(&g->fetch_mu, NULL);
  g->provider = o->provider;
  g->lat = o->lat;
  g->lon = o->lon;
  g->timeout = o->timeout_s > 0 ? o->timeout_s : 10;
  g->estimate = o->estimate;
  g->radius = o->radius;
  g->url = zeus__strdup(url);
  g->factor_type = zeus__strdup(ft);
  g->sector = zeus__strdup(sector);
  g->label = zeus__strdup(o->label ? o->label : "");
  g->currency = zeus__strdup(o->currency && o->currency[0] ? o->currency : "USD");
  if (!g->url || !g->factor_type || !g->sector || !g->label || !g->currency) {
    zeus_grid_close(g);
    return zeus__oom("opening a grid provider");
  }
  size_t n = strlen(g->url);
  while (n > 0 && g->url[n - 1] == '/') g->url[--n] = '\0';
  int rc = find_key(g, o);
  if (!rc && o->provider == ZEUS_GRID_OPENEI && !g->key)
    rc = zeus__error(ZEUS_EINVAL, "OpenEI needs an API key: set ZEUS_OPENEI_API_KEY, or ZEUS_OPENEI_API_KEY_FILE "
                                  "to a file holding it (a free key: https://openei.org/services/api/signup)");
  if (rc) {
    zeus_grid_close(g);
    return rc;
  }
  if (o->provider == ZEUS_GRID_OPENEI)
    snprintf(g->unit, sizeof g->unit, "%.50s/kWh", g->currency);
  else
    snprintf(g->unit, sizeof g->unit, "gCO2eq/kWh");
  *out = g;
  return ZEUS_OK;
}

const char *zeus_grid_unit(const zeus_grid *g) { return g ? g->unit : ""; }
const char *zeus_grid_url(const zeus_grid *g) { return g ? g->url : ""; }
zeus_grid_provider zeus_grid_kind(const zeus_grid *g) { return g ? g->provider : ZEUS_GRID_ELECTRICITYMAPS; }
const char *zeus_grid_currency(const zeus_grid *g) {
  return g && g->provider == ZEUS_GRID_OPENEI ? g->currency : "";
}

/* ---- HTTP ---- */

/* GET <url><path_query>; on 2xx the body parsed as JSON in *out. `path` (no query, no key) names
 * the request in errors; the key is blanked in whatever they quote. */
static int get_json(zeus_grid *g, const char *path, const char *query, struct curl_slist *headers, json_t **out) {
  int rc = zeus__http_init(NULL);
  if (rc) return rc;
  const char *name = names[g->provider];
  zeus__buf url = {0};
  rc = zeus__buf_printf(&url, "%s%s?%s", g->url, path, query);
  CURL *c = rc ? NULL : curl_easy_init();
  if (!rc && !c) rc = zeus__error(ZEUS_ENOMEM, "cannot create a libcurl handle");
  zeus__http_body a = {.cap = MAX_ANSWER};
  if (!rc) {
    char errbuf[CURL_ERROR_SIZE];
    zeus__http_opts o = {.user_agent = "zeus-grid", .headers = headers, .timeout_s = g->timeout,
                         .connect_timeout_s = g->timeout, .web_only = true, .any_encoding = true};
    zeus__http_setup(c, url.data, &o, &a, errbuf);
    long code;
    CURLcode cc = zeus__http_perform(c, &code);
    char what[512];
    snprintf(what, sizeof what, "%s at %s: GET %s", name, g->url, path);
    zeus__http_report r = {.what = what, .timeout_s = g->timeout, .status_prefix = "HTTP ", .secret = g->key};
    rc = zeus__http_result(cc, code, &a, errbuf, NULL, &r);
    if (!rc) {
      snprintf(what, sizeof what, "%s answer to GET %s", name, path);
      rc = zeus__json_parse(a.b.len ? a.b.data : "", a.b.len, what, out);
    }
    curl_easy_cleanup(c);
  }
  if (url.data) memset(url.data, 0, url.len);
  zeus__buf_free(&url);
  zeus__buf_free(&a.b);
  return rc;
}

/* ---- ElectricityMaps ---- */

/* GET <url><path> with the original's query for the provider's place and the key in the
 * auth-token header; the answer's JSON in *doc. lat and lon (as sent) for errors. */
static int get_electricitymaps(zeus_grid *g, const char *path, char lat[32], char lon[32], json_t **doc) {
  fmt_double(lat, 32, g->lat);
  fmt_double(lon, 32, g->lon);
  char query[256];
  /* The original's query: disableEstimations is the negation of estimate, spelled as Python's bool. */
  snprintf(query, sizeof query, "lat=%s&lon=%s&disableEstimations=%s&emissionFactorType=%s", lat, lon,
           g->estimate ? "False" : "True", g->factor_type);
  struct curl_slist *h = NULL;
  zeus__buf hk = {0};
  if (g->key) {
    if (zeus__buf_printf(&hk, "auth-token: %s", g->key)) return zeus__oom("building a request");
    h = curl_slist_append(NULL, hk.data);
    memset(hk.data, 0, hk.len);
    zeus__buf_free(&hk);
    if (!h) return zeus__oom("building a request");
  }
  int rc = get_json(g, path, query, h, doc);
  curl_slist_free_all(h); /* the header's copy of the key goes with it */
  return rc;
}

static int fetch_electricitymaps(zeus_grid *g) {
  char lat[32], lon[32];
  json_t *doc = NULL;
  int rc = get_electricitymaps(g, "/v3/carbon-intensity/latest", lat, lon, &doc);
  if (rc) return rc;
  json_t *ci = json_is_object(doc) ? json_object_get(doc, "carbonIntensity") : NULL;
  if (!json_is_number(ci) || !(json_number_value(ci) >= 0) || !isfinite(json_number_value(ci))) {
    char *text = json_dumps(doc, JSON_COMPACT);
    if (text) zeus__http_redact(text, g->key);
    rc = zeus__error(ZEUS_ENOENT,
                     "ElectricityMaps at %s: no current carbon intensity (a non-negative number 'carbonIntensity') "
                     "at (%s, %s) with estimate %s and emission factor type %s; the answer: %.300s",
                     g->url, lat, lon, g->estimate ? "on" : "off", g->factor_type, text ? text : "?");
    free(text);
    json_decref(doc);
    return rc;
  }
  pthread_mutex_lock(&g->mu);
  g->intensity = json_number_value(ci);
  g->have = true;
  g->fetched_at = unix_now();
  pthread_mutex_unlock(&g->mu);
  zeus__log(ZEUS_LOG_DEBUG, MOD, "ElectricityMaps: %g gCO2eq/kWh", json_number_value(ci));
  json_decref(doc);
  return ZEUS_OK;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant's
 * days_from_civil), so no time zone of the process is involved. */
static long days_from_civil(long y, unsigned m, unsigned d) {
  y -= m <= 2;
  long era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (long)doe - 719468;
}

static int digits(const char *s, int n) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

/* An ISO 8601 date and time as ElectricityMaps writes it ("2024-11-30T06:00:00.000Z"):
 * YYYY-MM-DDTHH:MM[:SS[.fraction]] then Z, +HH:MM, -HH:MM or nothing (UTC), in s since 1970 UTC.
 * false when it is not one. */
static bool parse_iso8601(const char *s, double *out) {
  int y = digits(s, 4), mo = s[4] == '-' ? digits(s + 5, 2) : -1, d = s[7] == '-' ? digits(s + 8, 2) : -1;
  if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ')) return false;
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap)) return false;
  const char *p = s + 11;
  int h = digits(p, 2), mi = p[2] == ':' ? digits(p + 3, 2) : -1, sec = 0;
  if (h < 0 || h > 23 || mi < 0 || mi > 59) return false;
  p += 5;
  double frac = 0;
  if (*p == ':') {
    sec = digits(p + 1, 2);
    if (sec < 0 || sec > 60) return false;
    p += 3;
    if (*p == '.' || *p == ',') {
      p++;
      if (*p < '0' || *p > '9') return false;
      for (double scale = 0.1; *p >= '0' && *p <= '9'; p++, scale /= 10) frac += (*p - '0') * scale;
    }
  }
  long offset_s = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int oh = digits(p + 1, 2), om = p[3] == ':' ? digits(p + 4, 2) : digits(p + 3, 2);
    if (oh < 0 || oh > 23 || om < 0 || om > 59) return false;
    offset_s = (long)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
    p += p[3] == ':' ? 6 : 5;
  }
  if (*p) return false;
  *out = (double)days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400.0 + h * 3600 + mi * 60 + sec + frac -
         (double)offset_s;
  return true;
}

/* An error about the history answer `doc` that names what was wrong; the answer is quoted
 * (without the key). */
static int history_error(zeus_grid *g, int code, const char *lat, const char *lon, json_t *doc, const char *what) {
  char *text = json_dumps(doc, JSON_COMPACT);
  if (text) zeus__http_redact(text, g->key);
  int rc = zeus__error(code,
                       "ElectricityMaps at %s: GET /v3/carbon-intensity/history at (%s, %s) with estimate %s and "
                       "emission factor type %s: %s; the answer: %.300s",
                       g->url, lat, lon, g->estimate ? "on" : "off", g->factor_type, what, text ? text : "?");
  free(text);
  return rc;
}

int zeus_grid_history(zeus_grid *g, zeus_grid_history_point *points, size_t cap, size_t *num) {
  if (!g || !num || (cap && !points)) return zeus__error(ZEUS_EINVAL, "zeus_grid_history: NULL argument");
  *num = 0;
  if (g->provider != ZEUS_GRID_ELECTRICITYMAPS)
    return zeus__error(ZEUS_EINVAL, "%s has no carbon intensity history (only ElectricityMaps has)",
                       names[g->provider]);
  char lat[32], lon[32];
  json_t *doc = NULL;
  int rc = get_electricitymaps(g, "/v3/carbon-intensity/history", lat, lon, &doc);
  if (rc) return rc;
  json_t *hist = json_is_object(doc) ? json_object_get(doc, "history") : NULL;
  if (!json_is_array(hist)) {
    rc = history_error(g, ZEUS_ENOENT, lat, lon, doc,
                       hist ? "'history' is not a list" : "no recent carbon intensity (no 'history' list)");
    json_decref(doc);
    return rc;
  }
  size_t n = json_array_size(hist);
  if (n > ZEUS_GRID_HISTORY_MAX) {
    json_decref(doc);
    return zeus__error(ZEUS_ERANGE,
                       "ElectricityMaps at %s: GET /v3/carbon-intensity/history answered %zu entries: expected at "
                       "most %d",
                       g->url, n, ZEUS_GRID_HISTORY_MAX);
  }
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(hist, i);
    json_t *dt = json_is_object(e) ? json_object_get(e, "datetime") : NULL;
    json_t *ci = json_is_object(e) ? json_object_get(e, "carbonIntensity") : NULL;
    char what[160];
    double t = 0;
    if (!json_is_object(e))
      snprintf(what, sizeof what, "history[%zu] is not an object", i);
    else if (!dt)
      snprintf(what, sizeof what, "history[%zu] has no 'datetime'", i);
    else if (!json_is_string(dt) || !parse_iso8601(json_string_value(dt), &t))
      snprintf(what, sizeof what, "history[%zu].datetime: expected an ISO 8601 date and time as a string "
                                  "(2024-11-30T06:00:00.000Z)", i);
    else if (!ci)
      snprintf(what, sizeof what, "history[%zu] has no 'carbonIntensity'", i);
    else if (!json_is_null(ci) &&
             (!json_is_number(ci) || !(json_number_value(ci) >= 0) || !isfinite(json_number_value(ci))))
      snprintf(what, sizeof what,
               "history[%zu].carbonIntensity: expected a non-negative number (gCO2eq/kWh) or null", i);
    else
      what[0] = '\0';
    if (what[0]) {
      rc = history_error(g, ZEUS_ENOENT, lat, lon, doc, what);
      json_decref(doc);
      return rc;
    }
    /* null: the service has no value for that hour (a gap it leaves, which the original passes on) */
    if (i < cap) points[i] = (zeus_grid_history_point){t, json_is_null(ci) ? NAN : json_number_value(ci)};
  }
  json_decref(doc);
  *num = n;
  zeus__log(ZEUS_LOG_DEBUG, MOD, "ElectricityMaps: %zu hours of carbon intensity history", n);
  return ZEUS_OK;
}

/* ---- OpenEI ---- */

/* The first object (depth first, as the original's search_json) whose "label" is `label` and
 * that holds `field`; NULL when none does. */
static json_t *search(json_t *v, const char *label, const char *field, bool *label_seen, int depth) {
  if (depth > 64) return NULL;
  if (json_is_object(v)) {
    json_t *l = json_object_get(v, "label");
    if (l) *label_seen = true;
    if (json_is_string(l) && !strcmp(json_string_value(l), label)) {
      json_t *f = json_object_get(v, field);
      if (f && !json_is_null(f)) return f;
    }
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
      json_t *r = search(x, label, field, label_seen, depth + 1);
      if (r) return r;
    }
  } else if (json_is_array(v)) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
      json_t *r = search(x, label, field, label_seen, depth + 1);
      if (r) return r;
    }
  }
  return NULL;
}

static int read_schedule(const json_t *s, const char *what, size_t nperiods, int out[12][24], const char *label) {
  if (!json_is_array(s) || json_array_size(s) != 12)
    return zeus__error(ZEUS_ENOENT, "OpenEI rate '%s': %s is not 12 months of 24 hours", label, what);
  for (size_t m = 0; m < 12; m++) {
    json_t *row = json_array_get(s, m);
    if (!json_is_array(row) || json_array_size(row) != 24)
      return zeus__error(ZEUS_ENOENT, "OpenEI rate '%s': %s month %zu is not 24 hours", label, what, m + 1);
    for (size_t h = 0; h < 24; h++) {
      json_t *p = json_array_get(row, h);
      if (!json_is_integer(p) || json_integer_value(p) < 0 || (size_t)json_integer_value(p) >= nperiods)
        return zeus__error(ZEUS_ENOENT,
                           "OpenEI rate '%s': %s month %zu hour %zu: expected a period number in [0, %zu)", label,
                           what, m + 1, h, nperiods);
      out[m][h] = (int)json_integer_value(p);
    }
  }
  return ZEUS_OK;
}

static int fetch_openei(zeus_grid *g) {
  char lat[32], lon[32];
  fmt_double(lat, sizeof lat, g->lat);
  fmt_double(lon, sizeof lon, g->lon);
  zeus__buf q = {0};
  char *esc_sector = curl_easy_escape(NULL, g->sector, 0);
  char *esc_key = curl_easy_escape(NULL, g->key, 0);
  int rc = !esc_sector || !esc_key ? zeus__oom("building a request")
                                   : zeus__buf_printf(&q,
                                                      "version=latest&format=json&api_key=%s&lat=%s&lon=%s&radius=%u"
                                                      "&detail=full&sector=%s",
                                                      esc_key, lat, lon, g->radius, esc_sector);
  if (esc_key) memset(esc_key, 0, strlen(esc_key));
  curl_free(esc_key);
  curl_free(esc_sector);
  json_t *doc = NULL;
  if (!rc) rc = get_json(g, "/utility_rates", q.data, NULL, &doc);
  if (q.data) memset(q.data, 0, q.len);
  zeus__buf_free(&q);
  if (rc) return rc;
  bool seen = false;
  json_t *st = search(doc, g->label, "energyratestructure", &seen, 0);
  json_t *wd = search(doc, g->label, "energyweekdayschedule", &seen, 0);
  json_t *we = search(doc, g->label, "energyweekendschedule", &seen, 0);
  if (!seen) {
    json_decref(doc);
    return zeus__error(ZEUS_ENOENT, "OpenEI at %s: no rates found for lat, lon %s, %s (radius %u, sector %s)", g->url,
                       lat, lon, g->radius, g->sector);
  }
  if (!st || !wd || !we) {
    json_decref(doc);
    return zeus__error(ZEUS_ENOENT,
                       "OpenEI at %s: no rates found for the label '%s' (expected an item with that label and its "
                       "energyratestructure, energyweekdayschedule and energyweekendschedule)",
                       g->url, g->label);
  }
  size_t np = json_is_array(st) ? json_array_size(st) : 0;
  double *rates = np ? calloc(np, sizeof *rates) : NULL;
  if (!np) rc = zeus__error(ZEUS_ENOENT, "OpenEI rate '%s': energyratestructure is not a non-empty list", g->label);
  else if (!rates) rc = zeus__oom("reading rates");
  for (size_t p = 0; !rc && p < np; p++) {
    json_t *tiers = json_array_get(st, p);
    json_t *t0 = json_is_array(tiers) ? json_array_get(tiers, 0) : NULL;
    json_t *r = json_is_object(t0) ? json_object_get(t0, "rate") : NULL;
    if (!json_is_number(r) || !isfinite(json_number_value(r)))
      rc = zeus__error(ZEUS_ENOENT, "OpenEI rate '%s': energyratestructure period %zu has no first tier with a "
                                    "number 'rate'", g->label, p);
    else
      rates[p] = json_number_value(r);
  }
  int wdays[12][24], wends[12][24];
  if (!rc) rc = read_schedule(wd, "energyweekdayschedule", np, wdays, g->label);
  if (!rc) rc = read_schedule(we, "energyweekendschedule", np, wends, g->label);
  json_t *tables = rc ? NULL
                      : json_pack("{s:O,s:O,s:O}", "energy_rate_structure", st, "energy_weekday_schedule", wd,
                                  "energy_weekend_schedule", we);
  if (!rc && !tables) rc = zeus__oom("keeping rate tables");
  json_decref(doc);
  if (rc) {
    free(rates);
    return rc;
  }
  pthread_mutex_lock(&g->mu);
  free(g->rates);
  g->rates = rates;
  g->nrates = np;
  memcpy(g->weekday, wdays, sizeof wdays);
  memcpy(g->weekend, wends, sizeof wends);
  json_decref(g->tables);
  g->tables = tables;
  g->have = true;
  g->fetched_at = unix_now();
  pthread_mutex_unlock(&g->mu);
  zeus__log(ZEUS_LOG_DEBUG, MOD, "OpenEI: rate '%s' with %zu periods", g->label, np);
  return ZEUS_OK;
}

int zeus_grid_fetch(zeus_grid *g) {
  if (!g) return zeus__error(ZEUS_EINVAL, "zeus_grid_fetch: NULL provider");
  pthread_mutex_lock(&g->fetch_mu);
  int rc = g->provider == ZEUS_GRID_OPENEI ? fetch_openei(g) : fetch_electricitymaps(g);
  pthread_mutex_unlock(&g->fetch_mu);
  return rc;
}

int zeus_grid_rate(zeus_grid *g, double t, double *per_kwh, double *fetched) {
  if (!g || !per_kwh) return zeus__error(ZEUS_EINVAL, "zeus_grid_rate: NULL argument");
  pthread_mutex_lock(&g->mu);
  int rc = ZEUS_OK;
  if (!g->have) {
    rc = zeus__error(ZEUS_ESTATE, "%s at %s: nothing fetched yet", names[g->provider], g->url);
  } else if (g->provider == ZEUS_GRID_ELECTRICITYMAPS) {
    *per_kwh = g->intensity;
  } else {
    /* As the original: the month, hour and weekday of the time in UTC. */
    time_t s = (time_t)floor(t);
    struct tm tm;
    gmtime_r(&s, &tm);
    bool weekend = tm.tm_wday == 0 || tm.tm_wday == 6;
    int p = weekend ? g->weekend[tm.tm_mon][tm.tm_hour] : g->weekday[tm.tm_mon][tm.tm_hour];
    *per_kwh = g->rates[p];
  }
  if (!rc && fetched) *fetched = g->fetched_at;
  pthread_mutex_unlock(&g->mu);
  return rc;
}

int zeus_grid_openei_tables(zeus_grid *g, double *rates, size_t cap, size_t *num_periods, int weekday[12][24],
                            int weekend[12][24]) {
  if (!g || !num_periods) return zeus__error(ZEUS_EINVAL, "zeus_grid_openei_tables: NULL argument");
  if (g->provider != ZEUS_GRID_OPENEI)
    return zeus__error(ZEUS_EINVAL, "%s has no rate tables (only OpenEI has)", names[g->provider]);
  pthread_mutex_lock(&g->mu);
  int rc = ZEUS_OK;
  if (!g->have) {
    rc = zeus__error(ZEUS_ESTATE, "OpenEI at %s: nothing fetched yet", g->url);
  } else {
    *num_periods = g->nrates;
    for (size_t i = 0; rates && i < g->nrates && i < cap; i++) rates[i] = g->rates[i];
    if (weekday) memcpy(weekday, g->weekday, sizeof g->weekday);
    if (weekend) memcpy(weekend, g->weekend, sizeof g->weekend);
  }
  pthread_mutex_unlock(&g->mu);
  return rc;
}

int zeus_grid_openei_json(zeus_grid *g, char **out) {
  if (!g || !out) return zeus__error(ZEUS_EINVAL, "zeus_grid_openei_json: NULL argument");
  *out = NULL;
  if (g->provider != ZEUS_GRID_OPENEI)
    return zeus__error(ZEUS_EINVAL, "%s has no rate tables (only OpenEI has)", names[g->provider]);
  pthread_mutex_lock(&g->mu);
  int rc = ZEUS_OK;
  if (!g->have || !g->tables)
    rc = zeus__error(ZEUS_ESTATE, "OpenEI at %s: nothing fetched yet", g->url);
  else if (!(*out = json_dumps(g->tables, JSON_COMPACT)))
    rc = zeus__oom("writing rate tables");
  pthread_mutex_unlock(&g->mu);
  return rc;
}
