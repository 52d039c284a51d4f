/* The connection guard: see guard.h. */
#include "http/guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "core/core.h"

#define REAP_EVERY_S 0.25
#define WHO_LEN 96

struct zeus__http_conn {
  int fd;
  char who[WHO_LEN]; /* "uid 1000", "address 10.0.0.7" */
  bool known;        /* who and root are filled in (see identify) */
  bool root;         /* uid 0: counted by no per-client bound */
  bool busy;         /* a whole request arrived and its reply is not done */
  bool cut;          /* refused or timed out: shut down, waiting for the server to close it */
  bool answered;     /* a reply was done: kept alive between requests */
  bool pinned;       /* the reaper is asking who it is, without the lock: not freed meanwhile */
  bool released;     /* released while pinned: the reaper frees it */
  unsigned blk;      /* 1 + its client's entry in blocked, while it counts there; else 0 */
  int tag;           /* the server's (zeus__http_guard_set_tag) */
  unsigned listener; /* zeus__http_guard_admit_on's */
  bool has_uid;      /* who is a uid (known too) */
  bool claimed;      /* holds one of its client's claims (zeus__http_guard_claim) */
  uid_t uid;
  double since;      /* opened, or its last reply ended (monotonic s) */
  struct zeus__http_conn *prev, *next;
};

/* A client at its bound of slow connections, with how many of them are still slow. */
typedef struct blocked_client {
  char who[WHO_LEN];
  unsigned slow;
} blocked_client;

/* What the reaper learnt about a pinned connection, outside the lock. */
typedef struct pending_who {
  zeus__http_conn *k;
  char who[WHO_LEN];
  bool root, has_uid;
  uid_t uid;
} pending_who;

struct zeus__http_guard {
  zeus__http_guard_opts o;
  bool slow_bound; /* max_slow_per_client is on */
  bool walk;       /* admission counts the client's connections (per-client bound, reserve) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  pthread_t reaper;
  bool reaper_started;
  zeus__http_conn *conns;
  unsigned nopen; /* listed and not cut */
  unsigned nopen_on[ZEUS__HTTP_GUARD_LISTENERS]; /* the same, by listener */
  unsigned long long refused, timed_out;
  /* The clients at their slow bound at the reaper's last pass, their slow connections counted
   * down as they finish or close: while one is at the bound its new connections are refused
   * (under mu; a handful at most, unless many clients attack at once). */
  blocked_client *blocked;
  unsigned nblocked, cap_blocked;
  /* The reaper's own: the slow connections of one pass, and those it asks the kernel about. */
  zeus__http_conn **slow;
  size_t cap_slow;
  pending_who *pend;
  size_t cap_pend;
};

/* The connection no longer counts among its client's slow ones (it finished, or is closing).
 * Called with g->mu held. */
static void unslow(zeus__http_guard *g, zeus__http_conn *k) {
  if (k->blk && k->blk <= g->nblocked && g->blocked[k->blk - 1].slow) g->blocked[k->blk - 1].slow--;
  k->blk = 0;
}

/* Tells the client why and shuts the connection down (both directions: the server's next read
 * sees the end). Called with g->mu held; the descriptor is still the server's. */
static void cut(zeus__http_guard *g, zeus__http_conn *k, const char *msg) {
  if (msg) {
    char body[400], reply[640];
    int b = g->o.plain_errors ? snprintf(body, sizeof body, "%s\n", msg)
                              : snprintf(body, sizeof body, "{\"%s\":\"%s\"}", g->o.error_field, msg);
    int n = b < 0 || (size_t)b >= sizeof body ? -1
            : snprintf(reply, sizeof reply,
                       "HTTP/1.1 503 Service Unavailable\r\nContent-Type: %s\r\nConnection: close\r\n"
                       "Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s",
                       g->o.plain_errors ? "text/plain" : "application/json", b, body);
    if (n > 0 && (size_t)n < sizeof reply && send(k->fd, reply, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
      /* the peer is gone already: nothing to tell */
    }
  }
  shutdown(k->fd, SHUT_RDWR);
  if (!k->cut) {
    g->nopen--;
    g->nopen_on[k->listener]--;
  }
  k->cut = true;
  unslow(g, k);
}

/* Whether the kernel holds bytes of this connection that the server has not read yet: then the
 * wait is the server's (a burst it has not reached), not the client's. */
static bool unread_bytes(int fd) {
  int n = 0;
  return ioctl(fd, FIONREAD, &n) != 0 || n > 0; /* an error: not the client's fault either */
}

/* Asks the kernel who the peer on fd is (core/peer.c: a netlink query on loopback TCP). Only the
 * connections that a bound looks at need it: the slow ones, and all of them while a client is at
 * its slow bound or when every admission counts per client; the others (a job's thousands of
 * ranks registering) are spared the query. */
static void identify(int fd, char *who, bool *root, bool *has_uid, uid_t *uid) {
  *uid = 1;
  *has_uid = zeus__peer_who(fd, who, WHO_LEN, uid);
  *root = *has_uid && *uid == 0;
}

static int by_client_then_age(const void *a, const void *b) {
  const zeus__http_conn *x = *(zeus__http_conn *const *)a, *y = *(zeus__http_conn *const *)b;
  int c = strcmp(x->who, y->who);
  if (c) return c;
  return x->since < y->since ? -1 : x->since > y->since;
}

/* Groups this pass's slow connections by client: past the bound the newest are cut (the oldest
 * meet their deadline first), and every client at its bound is listed for admission with the
 * connections it keeps. Called with g->mu held. */
static void bound_slow(zeus__http_guard *g, size_t n) {
  if (!n) return;
  qsort(g->slow, n, sizeof *g->slow, by_client_then_age);
  unsigned max = g->o.max_slow_per_client;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && strcmp(g->slow[j]->who, g->slow[i]->who) == 0) j++;
    size_t count = j - i;
    if (count > max) {
      char msg[320];
      snprintf(msg, sizeof msg, "%s holds %zu connections without a whole request after %g s, the most one client "
               "may hold (%s)", g->slow[i]->who, count, g->o.slow_after_s, g->o.slow_option);
      for (size_t m = i + max; m < j; m++) cut(g, g->slow[m], msg);
      g->refused += count - max;
      zeus__log(ZEUS_LOG_DEBUG, "http", "%s: %zu connection%s cut: %s", g->o.server, count - max,
                count - max == 1 ? "" : "s", msg);
    }
    if (count >= max) {
      if (g->nblocked == g->cap_blocked) {
        unsigned nc = g->cap_blocked ? 2 * g->cap_blocked : 16;
        blocked_client *nb = realloc(g->blocked, nc * sizeof *nb);
        if (!nb) return; /* the cuts above still hold; admission sees fewer clients this time */
        g->blocked = nb;
        g->cap_blocked = nc;
      }
      blocked_client *b = &g->blocked[g->nblocked++];
      memcpy(b->who, g->slow[i]->who, WHO_LEN);
      b->slow = max;
      for (size_t m = i; m < i + max; m++) g->slow[m]->blk = g->nblocked;
    }
    i = j;
  }
}

/* A connection that may be judged slow: no whole request yet, open long enough. */
static bool slow_candidate(const zeus__http_guard *g, const zeus__http_conn *k, double now) {
  return g->slow_bound && !k->cut && !k->busy && !k->answered && now - k->since > g->o.slow_after_s;
}

/* One pass: cuts connections past their deadline; asks, without the lock, who is behind the slow
 * candidates not known yet; then bounds each client's slow connections. Called with g->mu held,
 * which it lets go meanwhile. */
static void reap(zeus__http_guard *g) {
  double now = zeus_monotonic_s();
  unsigned n = 0;
  size_t npend = 0;
  g->nblocked = 0; /* counted again below */
  for (zeus__http_conn *k = g->conns; k; k = k->next) {
    k->blk = 0;
    if (k->cut || k->busy) continue;
    double limit = k->answered && g->o.keepalive_timeout_s > 0 ? g->o.keepalive_timeout_s : g->o.request_timeout_s;
    if (now - k->since > limit) {
      cut(g, k, NULL);
      n++;
      continue;
    }
    if (!k->known && slow_candidate(g, k, now)) {
      if (npend == g->cap_pend) {
        size_t nc = g->cap_pend ? 2 * g->cap_pend : 256;
        pending_who *np = realloc(g->pend, nc * sizeof *np);
        if (!np) continue; /* asked about next time */
        g->pend = np;
        g->cap_pend = nc;
      }
      g->pend[npend++].k = k;
      k->pinned = true;
    }
  }
  g->timed_out += n;
  if (n)
    zeus__log(ZEUS_LOG_DEBUG, "http", "%s: %u connection%s closed: no whole request within %g s (%s)", g->o.server,
              n, n == 1 ? "" : "s", g->o.request_timeout_s, g->o.timeout_option);
  if (!g->slow_bound) return;
  if (npend) {
    /* A pinned record is not freed, and its descriptor is not closed before it is released. */
    pthread_mutex_unlock(&g->mu);
    for (size_t i = 0; i < npend; i++) {
      pending_who *p = &g->pend[i];
      identify(p->k->fd, p->who, &p->root, &p->has_uid, &p->uid);
    }
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < npend; i++) {
      zeus__http_conn *k = g->pend[i].k;
      k->pinned = false;
      if (k->released) {
        free(k);
        continue;
      }
      memcpy(k->who, g->pend[i].who, WHO_LEN);
      k->root = g->pend[i].root;
      k->has_uid = g->pend[i].has_uid;
      k->uid = g->pend[i].uid;
      k->known = true;
    }
  }
  /* Slow: a candidate whose sent bytes the server has all read (nothing unread in the kernel). */
  size_t nslow = 0;
  now = zeus_monotonic_s();
  for (zeus__http_conn *k = g->conns; k; k = k->next) {
    if (!k->known || k->root || !slow_candidate(g, k, now) || unread_bytes(k->fd)) continue;
    if (nslow == g->cap_slow) {
      size_t nc = g->cap_slow ? 2 * g->cap_slow : 256;
      zeus__http_conn **ns = realloc(g->slow, nc * sizeof *ns);
      if (!ns) continue; /* counted next time */
      g->slow = ns;
      g->cap_slow = nc;
    }
    g->slow[nslow++] = k;
  }
  bound_slow(g, nslow);
}

static void *reaper_main(void *arg) {
  zeus__http_guard *g = arg;
  pthread_mutex_lock(&g->mu);
  while (!g->stop) {
    reap(g);
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
  if (g->o.no_reserve) g->o.reserved = 0;
  else if (!g->o.reserved) g->o.reserved = g->o.max_connections / 16;
  if (g->o.reserved >= g->o.max_connections) g->o.reserved = g->o.max_connections - 1;
  if (!(g->o.request_timeout_s > 0)) g->o.request_timeout_s = 10;
  if (!(g->o.slow_after_s > 0)) g->o.slow_after_s = 1;
  if (!g->o.per_client_option) g->o.per_client_option = "--max-connections-per-client";
  if (!g->o.connections_option) g->o.connections_option = "--max-connections";
  if (!g->o.timeout_option) g->o.timeout_option = "--request-timeout";
  if (!g->o.slow_option) g->o.slow_option = "--max-slow-per-client";
  if (!g->o.error_field) g->o.error_field = "detail";
  if (!g->o.claims_option) g->o.claims_option = "--max-claims-per-client";
  g->slow_bound = g->o.max_slow_per_client > 0;
  g->walk = g->o.max_per_client < g->o.max_connections || g->o.reserved > 0 || g->o.identify_all ||
            g->o.max_claims_per_client > 0;
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
  free(g->blocked);
  free(g->slow);
  free(g->pend);
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
  free(g);
}

zeus__http_conn *zeus__http_guard_admit(zeus__http_guard *g, int fd) { return zeus__http_guard_admit_on(g, fd, 0); }

/* Whether the reserve of a connection's listener refuses it (reserve_for_root). Called with g->mu held. */
static bool root_reserve_refuses(const zeus__http_guard *g, const zeus__http_conn *k, char *msg, size_t len) {
  unsigned l = k->listener, total = g->nopen_on[l];
  if (k->root || !g->o.reserved || (g->o.reserve_listeners && !(g->o.reserve_listeners & (1u << l))) ||
      total + g->o.reserved < g->o.max_connections)
    return false;
  snprintf(msg, len, "%u connections are open; the last %u are kept for root (%s)", total, g->o.reserved,
           g->o.connections_option);
  return true;
}

/* take_oldest_idle at max_connections: cuts the oldest connection without a request in progress
 * to make room, or says why the new one is refused when every one is answering. Called with g->mu
 * held, before k is listed. */
static void take_over(zeus__http_guard *g, char *msg, size_t len) {
  if (g->nopen < g->o.max_connections) return;
  zeus__http_conn *oldest = NULL;
  for (zeus__http_conn *o = g->conns; o; o = o->next)
    if (!o->cut && !o->busy && (!oldest || o->since <= oldest->since)) oldest = o; /* newest first: ties go older */
  if (!oldest) {
    snprintf(msg, len, "every connection is busy; try again shortly");
    return;
  }
  cut(g, oldest, NULL);
  g->refused++;
}

zeus__http_conn *zeus__http_guard_admit_on(zeus__http_guard *g, int fd, unsigned listener) {
  zeus__http_conn *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->fd = fd;
  k->listener = listener < ZEUS__HTTP_GUARD_LISTENERS ? listener : ZEUS__HTTP_GUARD_LISTENERS - 1;
  k->since = zeus_monotonic_s();
  pthread_mutex_lock(&g->mu);
  bool need = g->walk || g->nblocked > 0;
  pthread_mutex_unlock(&g->mu);
  if (need) {
    identify(fd, k->who, &k->root, &k->has_uid, &k->uid);
    k->known = true;
  }
  char msg[320] = "";
  pthread_mutex_lock(&g->mu);
  if (g->slow_bound && k->known && !k->root)
    for (unsigned i = 0; i < g->nblocked; i++)
      if (strcmp(g->blocked[i].who, k->who) == 0) {
        /* At its bound at the last pass, and still: those that finished or closed since count no more. */
        if (g->blocked[i].slow >= g->o.max_slow_per_client)
          snprintf(msg, sizeof msg, "%s holds %u connections without a whole request after %g s, the most one "
                   "client may hold (%s)", k->who, g->blocked[i].slow, g->o.slow_after_s, g->o.slow_option);
        break;
      }
  if (!msg[0] && g->walk) {
    unsigned mine = 0;
    for (const zeus__http_conn *o = g->conns; o; o = o->next)
      if (!o->cut && strcmp(o->who, k->who) == 0) mine++;
    if (!k->root && mine >= g->o.max_per_client)
      snprintf(msg, sizeof msg, "%s holds %u connections, the most one client may hold (%s)", k->who, mine,
               g->o.per_client_option);
    else if (g->o.reserve_for_root)
      root_reserve_refuses(g, k, msg, sizeof msg);
    else if (!k->root && mine && g->nopen + g->o.reserved >= g->o.max_connections)
      snprintf(msg, sizeof msg, "%u connections are open; the last %u of %u are kept for clients that hold none (%s)",
               g->nopen, g->o.reserved, g->o.max_connections, g->o.connections_option);
  }
  if (!msg[0] && g->o.take_oldest_idle) take_over(g, msg, sizeof msg);
  k->next = g->conns;
  if (k->next) k->next->prev = k;
  g->conns = k;
  g->nopen++;
  g->nopen_on[k->listener]++;
  if (msg[0]) {
    cut(g, k, msg);
    g->refused++;
  }
  pthread_mutex_unlock(&g->mu);
  if (msg[0]) zeus__log(ZEUS_LOG_DEBUG, "http", "%s: connection refused: %s", g->o.server, msg);
  return k;
}

void zeus__http_guard_release(zeus__http_guard *g, zeus__http_conn *k) {
  if (!k) return;
  pthread_mutex_lock(&g->mu);
  if (k->prev) k->prev->next = k->next;
  else g->conns = k->next;
  if (k->next) k->next->prev = k->prev;
  if (!k->cut) {
    g->nopen--;
    g->nopen_on[k->listener]--;
  }
  unslow(g, k);
  bool pinned = k->pinned;
  if (pinned) k->released = true; /* the reaper frees it */
  pthread_mutex_unlock(&g->mu);
  if (!pinned) free(k);
}

void zeus__http_guard_busy(zeus__http_guard *g, zeus__http_conn *k, bool busy) {
  if (!k) return;
  pthread_mutex_lock(&g->mu);
  k->busy = busy;
  if (busy) unslow(g, k);
  if (!busy) {
    k->since = zeus_monotonic_s();
    k->answered = true;
    k->claimed = false; /* a claim lasts one reply */
  }
  pthread_mutex_unlock(&g->mu);
}

void zeus__http_guard_set_tag(zeus__http_conn *k, int tag) {
  if (k) k->tag = tag;
}

int zeus__http_guard_tag(const zeus__http_conn *k) { return k ? k->tag : 0; }

void zeus__http_guard_stats(zeus__http_guard *g, unsigned *open, unsigned long long *refused,
                            unsigned long long *timed_out) {
  pthread_mutex_lock(&g->mu);
  unsigned n = g->nopen;
  if (refused) *refused = g->refused;
  if (timed_out) *timed_out = g->timed_out;
  pthread_mutex_unlock(&g->mu);
  if (open) *open = n;
}

/* ---- for servers with several listeners, claims and the client's identity (zeus daemon) ---- */

bool zeus__http_guard_claim(zeus__http_guard *g, zeus__http_conn *k, unsigned *held) {
  if (held) *held = 0;
  if (!k) return true;
  pthread_mutex_lock(&g->mu);
  unsigned mine = 0;
  if (g->o.max_claims_per_client && !k->root)
    for (const zeus__http_conn *o = g->conns; o; o = o->next)
      if (o != k && !o->cut && o->claimed && strcmp(o->who, k->who) == 0) mine++;
  bool ok = k->root || !g->o.max_claims_per_client || mine < g->o.max_claims_per_client;
  if (ok) k->claimed = true;
  pthread_mutex_unlock(&g->mu);
  if (held) *held = mine;
  if (!ok) zeus__log(ZEUS_LOG_DEBUG, "http", "%s: claim refused: %s holds %u, the most one client may hold (%s)",
                     g->o.server, k->who, mine, g->o.claims_option);
  return ok;
}

void zeus__http_guard_unclaim(zeus__http_guard *g, zeus__http_conn *k) {
  if (!k) return;
  pthread_mutex_lock(&g->mu);
  k->claimed = false;
  pthread_mutex_unlock(&g->mu);
}

bool zeus__http_guard_uid(const zeus__http_conn *k, uid_t *uid) {
  if (!k || !k->known || !k->has_uid) return false;
  if (uid) *uid = k->uid;
  return true;
}

bool zeus__http_guard_is_root(const zeus__http_conn *k) { return k && k->known && k->root; }

const char *zeus__http_guard_who(const zeus__http_conn *k) { return k && k->known ? k->who : "an unknown peer"; }
