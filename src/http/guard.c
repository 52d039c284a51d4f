/* The connection guard: see guard.h. */
#include "http/guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/core.h"

#define REAP_EVERY_S 0.25

struct zeus__http_conn {
  int fd;
  char who[96];   /* "uid 1000", "address 10.0.0.7" */
  bool root;      /* uid 0: counted by no per-client bound */
  bool busy;      /* a whole request arrived and its reply is not done */
  bool cut;       /* refused or timed out: shut down, waiting for the server to close it */
  double since;   /* opened, or its last reply ended (monotonic s) */
  struct zeus__http_conn *next;
};

struct zeus__http_guard {
  zeus__http_guard_opts o;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  pthread_t reaper;
  bool reaper_started;
  zeus__http_conn *conns;
  unsigned long long refused, timed_out;
};

/* Tells the client why and shuts the connection down (both directions: the server's next read
 * sees the end). Called with g->mu held; the descriptor is still the server's. */
static void cut(zeus__http_conn *k, const char *msg) {
  if (msg) {
    char reply[640];
    int n = snprintf(reply, sizeof reply,
                     "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     "Retry-After: 1\r\nContent-Length: %zu\r\n\r\n{\"detail\":\"%s\"}",
                     strlen(msg) + 13, msg);
    if (n > 0 && (size_t)n < sizeof reply && send(k->fd, reply, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
      /* the peer is gone already: nothing to tell */
    }
  }
  shutdown(k->fd, SHUT_RDWR);
  k->cut = true;
}

static void *reaper_main(void *arg) {
  zeus__http_guard *g = arg;
  pthread_mutex_lock(&g->mu);
  while (!g->stop) {
    double now = zeus_monotonic_s();
    unsigned n = 0;
    for (zeus__http_conn *k = g->conns; k; k = k->next)
      if (!k->cut && !k->busy && now - k->since > g->o.request_timeout_s) {
        cut(k, NULL);
        n++;
      }
    g->timed_out += n;
    if (n)
      zeus__log(ZEUS_LOG_DEBUG, "http", "%s: %u connection%s closed: no whole request within %g s (%s)",
                g->o.server, n, n == 1 ? "" : "s", g->o.request_timeout_s, g->o.timeout_option);
    struct timespec dl = zeus__deadline_in(REAP_EVERY_S);
    while (!g->stop && zeus__cond_wait_until(&g->cv, &g->mu, &dl) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&g->mu);
  return NULL;
}

int zeus__http_guard_open(zeus__http_guard **out, const zeus__http_guard_opts *o) {
  zeus__http_guard *g = calloc(1, sizeof *g);
  if (!g) return zeus__oom("starting the connection guard");
  g->o = *o;
  if (!g->o.server) g->o.server = "server";
  if (!g->o.max_connections) g->o.max_connections = 1024;
  if (!g->o.max_per_client) g->o.max_per_client = g->o.max_connections / 4 ? g->o.max_connections / 4 : 1;
  if (!g->o.reserved) g->o.reserved = g->o.max_connections / 16;
  if (g->o.reserved >= g->o.max_connections) g->o.reserved = g->o.max_connections - 1;
  if (!(g->o.request_timeout_s > 0)) g->o.request_timeout_s = 10;
  if (!g->o.per_client_option) g->o.per_client_option = "--max-connections-per-client";
  if (!g->o.connections_option) g->o.connections_option = "--max-connections";
  if (!g->o.timeout_option) g->o.timeout_option = "--request-timeout";
  pthread_mutex_init(&g->mu, NULL);
  int rc = zeus__cond_init(&g->cv);
  if (!rc && pthread_create(&g->reaper, NULL, reaper_main, g) != 0)
    rc = zeus__error(ZEUS_EINTERNAL, "%s: cannot start the connection reaper", g->o.server);
  if (rc) {
    pthread_mutex_destroy(&g->mu);
    free(g);
    return rc;
  }
  g->reaper_started = true;
  *out = g;
  return ZEUS_OK;
}

void zeus__http_guard_close(zeus__http_guard *g) {
  if (!g) return;
  pthread_mutex_lock(&g->mu);
  g->stop = true;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  if (g->reaper_started) pthread_join(g->reaper, NULL);
  while (g->conns) {
    zeus__http_conn *k = g->conns;
    g->conns = k->next;
    free(k);
  }
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
  free(g);
}

zeus__http_conn *zeus__http_guard_admit(zeus__http_guard *g, int fd) {
  zeus__http_conn *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->fd = fd;
  k->since = zeus_monotonic_s();
  uid_t uid = 1;
  bool by_uid = zeus__peer_who(fd, k->who, sizeof k->who, &uid);
  k->root = by_uid && uid == 0;
  char msg[320] = "";
  pthread_mutex_lock(&g->mu);
  unsigned total = 0, mine = 0;
  for (const zeus__http_conn *o = g->conns; o; o = o->next) {
    if (o->cut) continue;
    total++;
    if (strcmp(o->who, k->who) == 0) mine++;
  }
  if (!k->root && mine >= g->o.max_per_client)
    snprintf(msg, sizeof msg, "%s holds %u connections, the most one client may hold (%s)", k->who, mine,
             g->o.per_client_option);
  else if (!k->root && mine && total + g->o.reserved >= g->o.max_connections)
    snprintf(msg, sizeof msg, "%u connections are open; the last %u of %u are kept for clients that hold none (%s)",
             total, g->o.reserved, g->o.max_connections, g->o.connections_option);
  k->next = g->conns;
  g->conns = k;
  if (msg[0]) {
    cut(k, msg);
    g->refused++;
  }
  pthread_mutex_unlock(&g->mu);
  if (msg[0]) zeus__log(ZEUS_LOG_DEBUG, "http", "%s: connection refused: %s", g->o.server, msg);
  return k;
}

void zeus__http_guard_release(zeus__http_guard *g, zeus__http_conn *k) {
  if (!k) return;
  pthread_mutex_lock(&g->mu);
  for (zeus__http_conn **p = &g->conns; *p; p = &(*p)->next)
    if (*p == k) {
      *p = k->next;
      break;
    }
  pthread_mutex_unlock(&g->mu);
  free(k);
}

void zeus__http_guard_busy(zeus__http_guard *g, zeus__http_conn *k, bool busy) {
  if (!k) return;
  pthread_mutex_lock(&g->mu);
  k->busy = busy;
  if (!busy) k->since = zeus_monotonic_s();
  pthread_mutex_unlock(&g->mu);
}

void zeus__http_guard_stats(zeus__http_guard *g, unsigned *open, unsigned long long *refused,
                            unsigned long long *timed_out) {
  unsigned n = 0;
  pthread_mutex_lock(&g->mu);
  for (const zeus__http_conn *k = g->conns; k; k = k->next)
    if (!k->cut) n++;
  if (refused) *refused = g->refused;
  if (timed_out) *timed_out = g->timed_out;
  pthread_mutex_unlock(&g->mu);
  if (open) *open = n;
}
