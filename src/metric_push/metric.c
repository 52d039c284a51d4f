/* Measurement windows pushed to a Prometheus Pushgateway (zeus/metric.h); the body is written by
 * src/metrics, the text-format writer the exporter and the servers use too. */
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "http_client/client.h"
#include "metrics/metrics.h"
#include "zeus/format.h"
#include "zeus/metric.h"

#define MOD "metric"
#define MAX_NAME 255
#define MAX_ANSWER 4096

enum { T_COUNTER, T_GAUGE, T_HISTOGRAM };

typedef struct series {
  char *window;
  char index[16];   /* "" for a series without the index label */
  double value;     /* counter, gauge */
  uint64_t *bucket; /* histogram: observations per bucket (not cumulative), nb + 1 with +Inf */
  uint64_t count;
  double sum;
} series;

typedef struct family {
  const char *name;
  const char *help;
  int type;
  bool has_index;
  double *bounds; /* histogram */
  size_t nb;
  series *s;
  size_t n, cap;
} family;

typedef struct window {
  char *name;
  char *key; /* the monitor window (histogram, counter) */
  pthread_t thread;
  bool has_thread;
  bool stop;
  struct zeus_metric *owner;
  struct window *next;
} window;

/* F_MODULE: the GPUs whose energy and power are their Grace Hopper module's (zeus_gpu_power_scope),
 * named as the module's; empty (and so not pushed) on every discrete GPU. */
enum { F_GPU, F_MODULE, F_CPU, F_DRAM, F_TIME, NUM_F };

struct zeus_metric {
  zeus_metric_kind kind;
  char *url, *job;
  char **lnames, **lvalues;
  size_t nlabels;
  zeus_monitor *mon;
  bool own_mon;
  double period, timeout;
  family f[NUM_F];
  pthread_mutex_t mu;      /* families, windows */
  pthread_cond_t cv;       /* window stops */
  pthread_mutex_t push_mu; /* one push at a time, in order */
  window *windows;
  unsigned long serial;
};

static const double def_gpu[] = {50, 100, 200, 500, 1000};
static const double def_cpu[] = {10, 50, 100, 500, 1000};
static const double def_dram[] = {5, 10, 20, 50, 150};
static const double def_time[] = {0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600};

void zeus_metric_opts_init(zeus_metric_opts *o) { memset(o, 0, sizeof *o); }

/* ---- the registry ---- */

static void family_free(family *f) {
  for (size_t i = 0; i < f->n; i++) {
    free(f->s[i].window);
    free(f->s[i].bucket);
  }
  free(f->s);
  free(f->bounds);
}

/* The series of (window, index) in f, created at zero when new; NULL when memory runs out. */
static series *series_get(family *f, const char *win, const char *index) {
  for (size_t i = 0; i < f->n; i++)
    if (strcmp(f->s[i].window, win) == 0 && strcmp(f->s[i].index, index) == 0) return &f->s[i];
  if (zeus__grow(&f->s, &f->cap, f->n + 1, sizeof *f->s, "adding a metric series")) return NULL;
  series *s = &f->s[f->n];
  memset(s, 0, sizeof *s);
  s->window = zeus__strdup(win);
  snprintf(s->index, sizeof s->index, "%s", index);
  if (f->type == T_HISTOGRAM) s->bucket = calloc(f->nb + 1, sizeof *s->bucket);
  if (!s->window || (f->type == T_HISTOGRAM && !s->bucket)) {
    free(s->window);
    free(s->bucket);
    zeus__oom("adding a metric series");
    return NULL;
  }
  f->n++;
  return s;
}

static int observe(family *f, const char *win, const char *index, double v) {
  series *s = series_get(f, win, index);
  if (!s) return ZEUS_ENOMEM;
  size_t b = 0;
  while (b < f->nb && v > f->bounds[b]) b++;
  s->bucket[b]++;
  s->count++;
  s->sum += v;
  if (b == f->nb && f->nb)
    zeus__log(ZEUS_LOG_WARN, MOD, "%s{window=\"%s\",index=\"%s\"}: %g is above the largest bucket (%g)", f->name, win,
              index, v, f->bounds[f->nb - 1]);
  return ZEUS_OK;
}

static int add(family *f, const char *win, const char *index, double v, bool set) {
  series *s = series_get(f, win, index);
  if (!s) return ZEUS_ENOMEM;
  if (set)
    s->value = v;
  else if (v > 0)
    s->value += v; /* a counter never goes down */
  return ZEUS_OK;
}

/* The text format through the one writer of every /metrics endpoint (src/metrics): escaping,
 * number spelling and line layout are the same as the exporter's. */
static int render_locked(zeus_metric *m, zeus__buf *b) {
  static const char *const types[] = {"counter", "gauge", "histogram"};
  zeus__metrics_writer w;
  zeus__metrics_writer_init(&w);
  for (int k = 0; k < NUM_F; k++) {
    family *f = &m->f[k];
    if (!f->name || f->n == 0) continue;
    zeus__metrics_family(&w, f->name, types[f->type], f->help);
    for (size_t i = 0; i < f->n; i++) {
      const series *s = &f->s[i];
      char le[ZEUS_FORMAT_DOUBLE_MAX];
      zeus__metrics_label l[3] = {{"window", s->window}, {"index", s->index}, {"le", le}};
      size_t nl = f->has_index ? 2 : 1;
      if (!f->has_index) l[1] = l[2]; /* le right after window */
      if (f->type != T_HISTOGRAM) {
        zeus__metrics_sample(&w, f->name, NULL, l, nl, s->value);
        continue;
      }
      uint64_t cum = 0;
      for (size_t j = 0; j <= f->nb; j++) {
        cum += s->bucket[j];
        if (j < f->nb) zeus_format_double(f->bounds[j], le, sizeof le);
        else snprintf(le, sizeof le, "+Inf");
        zeus__metrics_sample(&w, f->name, "_bucket", l, nl + 1, (double)cum);
      }
      zeus__metrics_sample(&w, f->name, "_sum", l, nl, s->sum);
      zeus__metrics_sample(&w, f->name, "_count", l, nl, (double)s->count);
    }
  }
  if (!w.rc && !w.buf.data && zeus__buf_puts(&w.buf, "")) w.rc = ZEUS_ENOMEM;
  if (w.rc) {
    zeus__metrics_writer_free(&w);
    return zeus__oom("rendering metrics");
  }
  *b = w.buf;
  return ZEUS_OK;
}

int zeus_metric_text(zeus_metric *m, char **text) {
  if (!m || !text) return zeus__error(ZEUS_EINVAL, "zeus_metric_text: NULL argument");
  zeus__buf b = {0};
  pthread_mutex_lock(&m->mu);
  int rc = render_locked(m, &b);
  pthread_mutex_unlock(&m->mu);
  if (rc) {
    zeus__buf_free(&b);
    return rc;
  }
  *text = b.data;
  return ZEUS_OK;
}

/* ---- the push ---- */

static bool plain_value(const char *v) {
  if (!*v) return false;
  for (const char *p = v; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
          *p == '~' || *p == '-'))
      return false;
  return true;
}

/* "/<name>/<value>" or "/<name>@base64/<base64url of value, padded>". */
static int put_path_label(zeus__buf *b, const char *name, const char *v) {
  if (plain_value(v)) return zeus__buf_printf(b, "/%s/%s", name, v) ? ZEUS_ENOMEM : ZEUS_OK;
  static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  if (zeus__buf_printf(b, "/%s@base64/", name)) return ZEUS_ENOMEM;
  const unsigned char *p = (const unsigned char *)v;
  size_t n = strlen(v);
  if (n == 0) return zeus__buf_puts(b, "=") ? ZEUS_ENOMEM : ZEUS_OK;
  for (size_t i = 0; i < n; i += 3) {
    unsigned x = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    char q[5] = {al[x >> 18 & 63], al[x >> 12 & 63], i + 1 < n ? al[x >> 6 & 63] : '=', i + 2 < n ? al[x & 63] : '=',
                 0};
    if (zeus__buf_puts(b, q)) return ZEUS_ENOMEM;
  }
  return ZEUS_OK;
}

static int build_url(const zeus_metric *m, zeus__buf *b) {
  int rc = zeus__buf_printf(b, "%s/metrics", m->url) ? ZEUS_ENOMEM : put_path_label(b, "job", m->job);
  for (size_t i = 0; !rc && i < m->nlabels; i++) rc = put_path_label(b, m->lnames[i], m->lvalues[i]);
  return rc ? zeus__oom("building the push URL") : ZEUS_OK;
}

int zeus_metric_push_url(zeus_metric *m, char **url) {
  if (!m || !url) return zeus__error(ZEUS_EINVAL, "zeus_metric_push_url: NULL argument");
  zeus__buf b = {0};
  int rc = build_url(m, &b);
  if (rc) {
    zeus__buf_free(&b);
    return rc;
  }
  *url = b.data;
  return ZEUS_OK;
}

int zeus_metric_push(zeus_metric *m) {
  if (!m) return zeus__error(ZEUS_EINVAL, "zeus_metric_push: NULL handle");
  int rc = zeus__http_init(NULL);
  if (rc) return rc;
  pthread_mutex_lock(&m->push_mu);
  zeus__buf body = {0}, url = {0};
  pthread_mutex_lock(&m->mu);
  rc = render_locked(m, &body);
  pthread_mutex_unlock(&m->mu);
  if (!rc) rc = build_url(m, &url);
  CURL *c = rc ? NULL : curl_easy_init();
  if (!rc && !c) rc = zeus__error(ZEUS_ENOMEM, "cannot create a libcurl handle");
  if (!rc) {
    /* The Pushgateway's answer is quoted in errors only: its start is enough. */
    zeus__http_body a = {.cap = MAX_ANSWER - 1, .truncate = true};
    char errbuf[CURL_ERROR_SIZE];
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: " ZEUS__METRICS_CONTENT_TYPE);
    zeus__http_opts o = {.user_agent = "zeus-metric-push", .headers = h, .post = body.data, .post_len = body.len,
                         .timeout_s = m->timeout, .connect_timeout_s = m->timeout, .web_only = true};
    zeus__http_setup(c, url.data, &o, &a, errbuf);
    long code;
    CURLcode cc = zeus__http_perform(c, &code);
    zeus__buf what = {0};
    rc = cc == CURLE_OK ? zeus__buf_printf(&what, "Pushgateway %s: POST %s", m->url, url.data)
                        : zeus__buf_printf(&what, "Pushgateway %s", m->url);
    zeus__http_report r = {.what = what.data, .timeout_s = m->timeout, .net_hint = "; is it running at that address?"};
    if (!rc) rc = zeus__http_result(cc, code, &a, errbuf, NULL, &r);
    zeus__buf_free(&what);
    zeus__buf_free(&a.b);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
  }
  zeus__buf_free(&body);
  zeus__buf_free(&url);
  pthread_mutex_unlock(&m->push_mu);
  return rc;
}

/* ---- windows ---- */

static window *find_window(zeus_metric *m, const char *name) {
  for (window *w = m->windows; w; w = w->next)
    if (strcmp(w->name, name) == 0) return w;
  return NULL;
}

static void unlink_window(zeus_metric *m, window *w) {
  for (window **p = &m->windows; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      return;
    }
}

static void window_free(window *w) {
  if (!w) return;
  free(w->name);
  free(w->key);
  free(w);
}

/* Adds a measurement to the families (histogram: observe; counter: add). Lock held. */
static int record_locked(zeus_metric *m, const char *name, const zeus_measurement *r) {
  bool hist = m->kind == ZEUS_METRIC_ENERGY_HISTOGRAM;
  char idx[16];
  int rc = ZEUS_OK;
  for (unsigned k = 0; !rc && k < r->num_gpus; k++) {
    snprintf(idx, sizeof idx, "%u", r->gpu_indices[k]);
    family *f = &m->f[r->gpu_power_scope[k] == ZEUS_POWER_SCOPE_MODULE ? F_MODULE : F_GPU];
    rc = hist ? observe(f, name, idx, r->gpu_energy_j[k]) : add(f, name, idx, r->gpu_energy_j[k], false);
  }
  for (unsigned k = 0; !rc && k < r->num_cpus; k++) {
    snprintf(idx, sizeof idx, "%u", r->cpu_indices[k]);
    rc = hist ? observe(&m->f[F_CPU], name, idx, r->cpu_energy_j[k])
              : add(&m->f[F_CPU], name, idx, r->cpu_energy_j[k], false);
    if (!rc && r->dram_valid[k])
      rc = hist ? observe(&m->f[F_DRAM], name, idx, r->dram_energy_j[k])
                : add(&m->f[F_DRAM], name, idx, r->dram_energy_j[k], false);
  }
  if (!rc && hist) rc = observe(&m->f[F_TIME], name, "", r->time_s);
  return rc;
}

/* One tick of a counter (energy since the last tick, the monitor window begun again) or a gauge
 * (every GPU's power now). The handle's lock is not held across device reads. */
static int tick(zeus_metric *m, window *w, bool last) {
  int rc = ZEUS_OK;
  if (m->kind == ZEUS_METRIC_ENERGY_COUNTER) {
    zeus_measurement r;
    rc = zeus_monitor_end_window(m->mon, w->key, false, &r);
    /* Begun again even when ending failed (a begin that failed at the last tick leaves no window
     * to end): the next tick measures from here. */
    int rb = last ? ZEUS_OK : zeus_monitor_begin_window(m->mon, w->key, false);
    if (!rc) {
      pthread_mutex_lock(&m->mu);
      rc = record_locked(m, w->name, &r);
      pthread_mutex_unlock(&m->mu);
    }
    if (!rc) rc = rb;
  } else {
    zeus_devices *d = zeus_monitor_devices(m->mon);
    for (unsigned k = 0; k < zeus_monitor_num_gpus(m->mon); k++) {
      unsigned gpu = zeus_monitor_gpu_index(m->mon, k), mw;
      char idx[16];
      snprintf(idx, sizeof idx, "%u", gpu);
      int r = zeus_gpu_instant_power(d, gpu, &mw);
      if (r) {
        rc = rc ? rc : r;
        continue;
      }
      zeus_power_scope sc = ZEUS_POWER_SCOPE_GPU;
      bool module = zeus_gpu_power_scope(d, gpu, &sc) == ZEUS_OK && sc == ZEUS_POWER_SCOPE_MODULE;
      pthread_mutex_lock(&m->mu);
      r = add(&m->f[module ? F_MODULE : F_GPU], w->name, idx, mw / 1000.0, true);
      pthread_mutex_unlock(&m->mu);
      if (r) rc = rc ? rc : r;
    }
  }
  return rc;
}

static void *window_thread(void *arg) {
  window *w = arg;
  zeus_metric *m = w->owner;
  bool failing = false, first = true;
  pthread_mutex_lock(&m->mu);
  for (;;) {
    if (!first) {
      struct timespec dl = zeus__deadline_in(m->period);
      while (!w->stop && zeus__cond_wait_until(&m->cv, &m->mu, &dl) != ETIMEDOUT) {}
    }
    if (w->stop) break;
    pthread_mutex_unlock(&m->mu);
    /* A counter has nothing to add at its first pass; a gauge reads at once. Values that one
     * GPU could not give do not keep the others from being pushed. */
    int rt = m->kind == ZEUS_METRIC_POWER_GAUGE || !first ? tick(m, w, false) : ZEUS_OK;
    int rp = zeus_metric_push(m);
    int rc = rt ? rt : rp;
    if (rc && !failing)
      zeus__log(ZEUS_LOG_WARN, MOD, "window '%s': %s (values are kept for the next push)", w->name, zeus_errmsg());
    else if (!rc && failing)
      zeus__log(ZEUS_LOG_INFO, MOD, "window '%s': updating and pushing work again", w->name);
    failing = rc != ZEUS_OK;
    first = false;
    pthread_mutex_lock(&m->mu);
  }
  pthread_mutex_unlock(&m->mu);
  return NULL;
}

/* Stops w's thread (if any) and waits for it. Lock not held. */
static void stop_thread(zeus_metric *m, window *w) {
  if (!w->has_thread) return;
  pthread_mutex_lock(&m->mu);
  w->stop = true;
  pthread_cond_broadcast(&m->cv);
  pthread_mutex_unlock(&m->mu);
  pthread_join(w->thread, NULL);
  w->has_thread = false;
}

int zeus_metric_begin_window(zeus_metric *m, const char *name) {
  if (!m || !name) return zeus__error(ZEUS_EINVAL, "zeus_metric_begin_window: NULL argument");
  size_t len = strlen(name);
  if (len == 0 || len > MAX_NAME)
    return zeus__error(ZEUS_EINVAL, "metric window name: expected 1 to %d bytes, got %zu", MAX_NAME, len);
  window *w = calloc(1, sizeof *w);
  if (!w) return zeus__oom("beginning a metric window");
  w->owner = m;
  w->name = zeus__strdup(name);
  pthread_mutex_lock(&m->mu);
  if (find_window(m, name)) {
    pthread_mutex_unlock(&m->mu);
    window_free(w);
    return zeus__error(ZEUS_EEXIST, "metric window '%s' is already open", name);
  }
  zeus__buf key = {0};
  if (zeus__buf_printf(&key, "__zeus_metric_%p_%lu_%s", (void *)m, ++m->serial, name)) key.data = NULL;
  w->key = key.data;
  if (!w->name || !w->key) {
    pthread_mutex_unlock(&m->mu);
    window_free(w);
    return zeus__oom("beginning a metric window");
  }
  w->next = m->windows;
  m->windows = w; /* reserves the name while the monitor and the thread start */
  pthread_mutex_unlock(&m->mu);
  int rc = ZEUS_OK;
  if (m->kind != ZEUS_METRIC_POWER_GAUGE) rc = zeus_monitor_begin_window(m->mon, w->key, false);
  if (!rc && m->kind != ZEUS_METRIC_ENERGY_HISTOGRAM) {
    int e = pthread_create(&w->thread, NULL, window_thread, w);
    if (e) {
      rc = zeus__error(ZEUS_EINTERNAL, "cannot start the thread of metric window '%s': %s", name, strerror(e));
      if (m->kind == ZEUS_METRIC_ENERGY_COUNTER) zeus_monitor_end_window(m->mon, w->key, true, NULL);
    } else {
      w->has_thread = true;
    }
  }
  if (rc) {
    pthread_mutex_lock(&m->mu);
    unlink_window(m, w);
    pthread_mutex_unlock(&m->mu);
    window_free(w);
  }
  return rc;
}

int zeus_metric_end_window(zeus_metric *m, const char *name) {
  if (!m || !name) return zeus__error(ZEUS_EINVAL, "zeus_metric_end_window: NULL argument");
  pthread_mutex_lock(&m->mu);
  window *w = find_window(m, name);
  if (!w || w->stop) {
    pthread_mutex_unlock(&m->mu);
    return zeus__error(ZEUS_ENOENT, "metric window '%s' is not open", name);
  }
  w->stop = true; /* keeps a second end_window of the same name out, and stops the thread */
  pthread_mutex_unlock(&m->mu);
  stop_thread(m, w);
  int rc = ZEUS_OK;
  if (m->kind == ZEUS_METRIC_ENERGY_HISTOGRAM) {
    zeus_measurement r;
    rc = zeus_monitor_end_window(m->mon, w->key, false, &r);
    if (!rc) {
      pthread_mutex_lock(&m->mu);
      rc = record_locked(m, name, &r);
      pthread_mutex_unlock(&m->mu);
    }
  } else if (m->kind == ZEUS_METRIC_ENERGY_COUNTER) {
    rc = tick(m, w, true);
  }
  pthread_mutex_lock(&m->mu);
  unlink_window(m, w);
  pthread_mutex_unlock(&m->mu);
  window_free(w);
  if (rc) return rc;
  return m->kind == ZEUS_METRIC_POWER_GAUGE ? ZEUS_OK : zeus_metric_push(m);
}

int zeus_metric_record(zeus_metric *m, const char *name, const zeus_measurement *r) {
  if (!m || !name || !r) return zeus__error(ZEUS_EINVAL, "zeus_metric_record: NULL argument");
  if (m->kind == ZEUS_METRIC_POWER_GAUGE)
    return zeus__error(ZEUS_EINVAL,
                       "zeus_metric_record: a power gauge records no energy (expected a histogram "
                       "or a counter)");
  size_t len = strlen(name);
  if (len == 0 || len > MAX_NAME)
    return zeus__error(ZEUS_EINVAL, "metric window name: expected 1 to %d bytes, got %zu", MAX_NAME, len);
  pthread_mutex_lock(&m->mu);
  int rc = record_locked(m, name, r);
  pthread_mutex_unlock(&m->mu);
  return rc ? rc : zeus_metric_push(m);
}

/* ---- open and close ---- */

static int set_family(family *f, const char *name, const char *help, int type, bool has_index, const double *b,
                      size_t nb, const double *def, size_t ndef, const char *what) {
  f->name = name;
  f->help = help;
  f->type = type;
  f->has_index = has_index;
  if (type != T_HISTOGRAM) return ZEUS_OK;
  if (!b) {
    b = def;
    nb = ndef;
  }
  if (nb == 0) return zeus__error(ZEUS_EINVAL, "%s buckets: expected at least one upper bound", what);
  for (size_t i = 0; i < nb; i++) {
    if (!isfinite(b[i])) return zeus__error(ZEUS_EINVAL, "%s buckets: bound %zu is not a finite number", what, i);
    if (i && b[i] <= b[i - 1])
      return zeus__error(ZEUS_EINVAL, "%s buckets: expected strictly increasing bounds, got %g after %g", what, b[i],
                         b[i - 1]);
  }
  f->bounds = malloc(nb * sizeof *f->bounds);
  if (!f->bounds) return zeus__oom("copying bucket bounds");
  memcpy(f->bounds, b, nb * sizeof *b);
  f->nb = nb;
  return ZEUS_OK;
}

static bool label_name_ok(const char *n) {
  if (!n || !((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') || *n == '_')) return false;
  for (const char *p = n; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')) return false;
  return true;
}

static int check_opts(zeus_metric_kind kind, const zeus_metric_opts *o) {
  if (kind < ZEUS_METRIC_ENERGY_HISTOGRAM || kind > ZEUS_METRIC_POWER_GAUGE)
    return zeus__error(ZEUS_EINVAL, "unknown metric kind %d (expected 0 histogram, 1 counter or 2 gauge)", (int)kind);
  if (!o || !o->url || !*o->url)
    return zeus__error(ZEUS_EINVAL, "Pushgateway URL: missing (expected http://HOST:PORT)");
  if (strncmp(o->url, "http://", 7) != 0 && strncmp(o->url, "https://", 8) != 0)
    return zeus__error(ZEUS_EINVAL, "Pushgateway URL '%s': expected http://HOST:PORT or https://...", o->url);
  if (strpbrk(o->url, " \t\r\n?#"))
    return zeus__error(ZEUS_EINVAL, "Pushgateway URL '%s': expected a base URL without blanks, query or fragment",
                       o->url);
  if (!o->job || !*o->job) return zeus__error(ZEUS_EINVAL, "Pushgateway job: expected a non-empty name");
  if (o->num_labels && (!o->label_names || !o->label_values))
    return zeus__error(ZEUS_EINVAL, "grouping labels: %zu given without names or values", o->num_labels);
  static const char *const reserved[] = {"job", "window", "index", "le"};
  for (size_t i = 0; i < o->num_labels; i++) {
    const char *n = o->label_names[i];
    if (!label_name_ok(n))
      return zeus__error(ZEUS_EINVAL, "grouping label %zu: name '%s' is not [a-zA-Z_][a-zA-Z0-9_]*", i,
                         n ? n : "(null)");
    for (size_t r = 0; r < ZEUS__ARRAY_LEN(reserved); r++)
      if (strcmp(n, reserved[r]) == 0)
        return zeus__error(ZEUS_EINVAL,
                           "grouping label '%s': reserved (job is its own option; window, index "
                           "and le are the series' own labels)",
                           n);
    if (!o->label_values[i]) return zeus__error(ZEUS_EINVAL, "grouping label '%s': no value", n);
    for (size_t j = 0; j < i; j++)
      if (strcmp(o->label_names[j], n) == 0) return zeus__error(ZEUS_EINVAL, "grouping label '%s': given twice", n);
  }
  if (o->update_period_s != 0 && !(o->update_period_s >= 0.01 && o->update_period_s <= 86400))
    return zeus__error(ZEUS_EINVAL, "update period %g s: expected 0.01 to 86400 s", o->update_period_s);
  if (o->timeout_s != 0 && !(o->timeout_s >= 0.001 && o->timeout_s <= 3600))
    return zeus__error(ZEUS_EINVAL, "push timeout %g s: expected 0.001 to 3600 s", o->timeout_s);
  return ZEUS_OK;
}

int zeus_metric_open(zeus_metric **out, zeus_metric_kind kind, const zeus_metric_opts *o) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_metric_open: NULL out");
  int rc = check_opts(kind, o);
  if (rc) return rc;
  zeus_metric *m = calloc(1, sizeof *m);
  if (!m) return zeus__oom("opening a metric");
  m->kind = kind;
  pthread_mutex_init(&m->mu, NULL);
  pthread_mutex_init(&m->push_mu, NULL);
  zeus__cond_init(&m->cv);
  m->period = o->update_period_s > 0 ? o->update_period_s : 1.0;
  m->timeout = o->timeout_s > 0 ? o->timeout_s : 5.0;
  m->url = zeus__strdup(o->url);
  m->job = zeus__strdup(o->job);
  m->lnames = calloc(o->num_labels + 1, sizeof *m->lnames);
  m->lvalues = calloc(o->num_labels + 1, sizeof *m->lvalues);
  if (!m->url || !m->job || !m->lnames || !m->lvalues) rc = zeus__oom("opening a metric");
  for (size_t i = 0; !rc && i < o->num_labels; i++) {
    m->lnames[i] = zeus__strdup(o->label_names[i]);
    m->lvalues[i] = zeus__strdup(o->label_values[i]);
    m->nlabels = i + 1;
    if (!m->lnames[i] || !m->lvalues[i]) rc = zeus__oom("opening a metric");
  }
  if (!rc) {
    size_t n = strlen(m->url);
    while (n > 0 && m->url[n - 1] == '/') m->url[--n] = '\0';
  }
  if (!rc) {
    switch (kind) {
      case ZEUS_METRIC_ENERGY_HISTOGRAM:
        rc = set_family(&m->f[F_GPU], "energy_monitor_gpu_energy_joules", "GPU energy of each measurement window",
                        T_HISTOGRAM, true, o->gpu_buckets_j, o->num_gpu_buckets, def_gpu, 5, "GPU energy");
        if (!rc)
          rc = set_family(&m->f[F_MODULE], "energy_monitor_module_energy_joules",
                          "Superchip module energy (CPU + memory + GPU) of each measurement window", T_HISTOGRAM,
                          true, o->gpu_buckets_j, o->num_gpu_buckets, def_gpu, 5, "GPU energy");
        if (!rc)
          rc = set_family(&m->f[F_CPU], "energy_monitor_cpu_energy_joules",
                          "CPU package energy of each measurement window", T_HISTOGRAM, true, o->cpu_buckets_j,
                          o->num_cpu_buckets, def_cpu, 5, "CPU energy");
        if (!rc)
          rc = set_family(&m->f[F_DRAM], "energy_monitor_dram_energy_joules", "DRAM energy of each measurement window",
                          T_HISTOGRAM, true, o->dram_buckets_j, o->num_dram_buckets, def_dram, 5, "DRAM energy");
        if (!rc)
          rc = set_family(&m->f[F_TIME], "energy_monitor_window_duration_seconds",
                          "Duration of each measurement window", T_HISTOGRAM, false, o->time_buckets_s,
                          o->num_time_buckets, def_time, ZEUS__ARRAY_LEN(def_time), "duration");
        break;
      case ZEUS_METRIC_ENERGY_COUNTER:
        set_family(&m->f[F_GPU], "energy_monitor_gpu_energy_joules_total", "GPU energy used during open windows",
                   T_COUNTER, true, NULL, 0, NULL, 0, NULL);
        set_family(&m->f[F_MODULE], "energy_monitor_module_energy_joules_total",
                   "Superchip module energy (CPU + memory + GPU) used during open windows", T_COUNTER, true, NULL, 0,
                   NULL, 0, NULL);
        set_family(&m->f[F_CPU], "energy_monitor_cpu_energy_joules_total",
                   "CPU package energy used during open windows", T_COUNTER, true, NULL, 0, NULL, 0, NULL);
        set_family(&m->f[F_DRAM], "energy_monitor_dram_energy_joules_total", "DRAM energy used during open windows",
                   T_COUNTER, true, NULL, 0, NULL, 0, NULL);
        break;
      case ZEUS_METRIC_POWER_GAUGE:
        set_family(&m->f[F_GPU], "power_monitor_gpu_power_watts", "GPU instant power during open windows", T_GAUGE,
                   true, NULL, 0, NULL, 0, NULL);
        set_family(&m->f[F_MODULE], "power_monitor_module_power_watts",
                   "Superchip module instant power (CPU + memory + GPU) during open windows", T_GAUGE, true, NULL, 0,
                   NULL, 0, NULL);
        break;
    }
  }
  if (!rc) {
    if (o->monitor) {
      m->mon = o->monitor;
    } else {
      zeus_monitor_opts mo;
      zeus_monitor_opts_init(&mo);
      mo.gpu_indices = o->gpu_indices;
      mo.num_gpu_indices = o->num_gpu_indices;
      mo.cpu_indices = o->cpu_indices;
      mo.num_cpu_indices = o->num_cpu_indices;
      mo.no_short_window_warning = kind == ZEUS_METRIC_ENERGY_COUNTER;
      rc = zeus_monitor_open(&m->mon, &mo);
      if (!rc) m->own_mon = true;
    }
  }
  if (rc) {
    zeus_metric_close(m);
    return rc;
  }
  *out = m;
  return ZEUS_OK;
}

void zeus_metric_close(zeus_metric *m) {
  if (!m) return;
  for (;;) {
    pthread_mutex_lock(&m->mu);
    window *w = m->windows;
    if (w) unlink_window(m, w);
    pthread_mutex_unlock(&m->mu);
    if (!w) break;
    stop_thread(m, w);
    if (m->mon && m->kind != ZEUS_METRIC_POWER_GAUGE) zeus_monitor_end_window(m->mon, w->key, true, NULL);
    window_free(w);
  }
  if (m->own_mon) zeus_monitor_close(m->mon);
  for (int k = 0; k < NUM_F; k++) family_free(&m->f[k]);
  for (size_t i = 0; i < m->nlabels; i++) {
    free(m->lnames[i]);
    free(m->lvalues[i]);
  }
  free(m->lnames);
  free(m->lvalues);
  free(m->url);
  free(m->job);
  pthread_cond_destroy(&m->cv);
  pthread_mutex_destroy(&m->mu);
  pthread_mutex_destroy(&m->push_mu);
  free(m);
}
