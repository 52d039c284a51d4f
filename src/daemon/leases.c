/* Leases: who changed which GPU setting, and the value each change replaced.
 *
 * Every (GPU, setting) has a stack of layers, bottom to top; a layer is {holder, replaced, set}.
 * The device holds the top layer's value, and each layer's `replaced` is the `set` of the layer
 * below it (the bottom one's: the value before the daemon changed anything). Rules:
 *   - a change by the top layer's holder updates that layer;
 *   - a change by anyone else pushes a layer (after dropping an older layer of the same holder),
 *     unless the top's holder is a live client: then 409 naming it, unless the change overrides;
 *   - when a holder goes (its process exits, its lease lapses or is released), each of its layers
 *     leaves: a top layer puts its `replaced` value back on the device; a middle layer hands its
 *     `replaced` to the layer above, so that value comes back when that one goes;
 *   - a persistent change (zeus gpus reset) is held by nobody: the stack is dropped after it;
 *   - anonymous layers (TCP clients of the original zeusd, without a lease) hold nothing against
 *     other clients and are given back when the daemon stops.
 *
 * The state file is written (atomically, mode 0600, never through a symlink) whenever the layers
 * change and before the device is changed, so a daemon killed at any point can replay it: leases
 * of clients still alive (same pid and start time, TTL not lapsed) are adopted again; the others'
 * values are put back at start. Writes that only update the top layer's value do not touch the
 * file: its `replaced` values, the ones that matter, are unchanged. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "core/json.h"
#include "daemon/daemon_internal.h"

typedef struct layer {
  zeus__lease *who;
  zeus__dval replaced, set;
} layer;

/* At most one layer per lease (and the anonymous one): bounded by the lease limit. */
typedef struct stack {
  unsigned n, cap;
  layer *l;
} stack;

static bool stack_room(stack *k) {
  if (k->n < k->cap) return true;
  unsigned cap = k->cap ? k->cap * 2 : 4;
  layer *nl = realloc(k->l, cap * sizeof *nl);
  if (!nl) return false;
  k->l = nl;
  k->cap = cap;
  return true;
}

struct zeus__leases {
  pthread_mutex_t mu;
  unsigned ngpus;
  char (*uuid)[ZEUS_NAME_LEN];
  zeus__lease_dev dev;
  char *state_path;
  stack *st; /* ngpus * ZEUS__SET_COUNT */
  zeus__lease *leases;
  unsigned nleases, max_leases, next_id;
  unsigned per_client, reserve; /* zeus__leases_set_limits */
  zeus__lease *anon;
  atomic_uint live;
  atomic_ullong restores;
};

static const char *const SETTING_NAMES[ZEUS__SET_COUNT] = {"power_limit", "persistence_mode", "gpu_locked_clocks",
                                                           "mem_locked_clocks"};

const char *zeus__setting_name(zeus__setting s) { return (unsigned)s < ZEUS__SET_COUNT ? SETTING_NAMES[s] : "?"; }

static stack *stk(zeus__leases *L, unsigned gpu, zeus__setting s) { return &L->st[gpu * ZEUS__SET_COUNT + s]; }

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

unsigned long long zeus__proc_start_time(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  /* The name may hold spaces and parentheses: fields start after the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p) return 0;
  p++;
  /* After ')': state is field 3; the start time is field 22. */
  for (int field = 3; field < 22 && p; field++) p = strchr(p + 1, ' ');
  return p ? strtoull(p + 1, NULL, 10) : 0;
}

static void proc_comm(pid_t pid, char *buf, size_t len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
  buf[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, buf, len - 1);
  close(fd);
  if (n <= 0) { buf[0] = '\0'; return; }
  buf[n] = '\0';
  buf[strcspn(buf, "\n")] = '\0';
  /* Keep it printable: it ends up in messages and JSON. */
  for (char *c = buf; *c; c++)
    if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) *c = '?';
}

static int pidfd_open_(pid_t pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  errno = ENOSYS;
  return -1;
#endif
}

void zeus__lease_describe(const zeus__lease *l, char *buf, size_t len) {
  if (!l) { snprintf(buf, len, "nobody"); return; }
  switch (l->kind) {
    case ZEUS__LEASE_ANONYMOUS:
      snprintf(buf, len, "L%u (changes over TCP without a lease)", l->id);
      break;
    case ZEUS__LEASE_PEER:
      snprintf(buf, len, "L%u: pid %ld (%s, uid %lu)", l->id, (long)l->pid, l->comm[0] ? l->comm : "?",
               (unsigned long)l->uid);
      break;
    default:
      if (l->pid < 0)
        snprintf(buf, len, "L%u: lease of uid %lu over TCP (%s%s%s)", l->id, (unsigned long)l->uid,
                 l->addr[0] ? l->addr : "loopback", l->user[0] ? ", user " : "", l->user);
      else if (l->pid)
        snprintf(buf, len, "L%u: lease of pid %ld (%s, uid %lu%s%s)", l->id, (long)l->pid, l->comm[0] ? l->comm : "?",
                 (unsigned long)l->uid, l->user[0] ? ", user " : "", l->user);
      else
        snprintf(buf, len, "L%u: lease of %s%s%s", l->id, l->addr[0] ? l->addr : "a TCP client",
                 l->user[0] ? ", user " : "", l->user);
  }
}

static void dval_text(zeus__setting s, const zeus__dval *v, char *buf, size_t len) {
  switch (s) {
    case ZEUS__SET_POWER_LIMIT: snprintf(buf, len, "%u mW", v->a); break;
    case ZEUS__SET_PERSISTENCE: snprintf(buf, len, "%s", v->on ? "enabled" : "disabled"); break;
    default:
      if (v->on) snprintf(buf, len, "locked to [%u, %u] MHz", v->a, v->b);
      else snprintf(buf, len, "unlocked");
  }
}

static bool dval_eq(zeus__setting s, const zeus__dval *x, const zeus__dval *y) {
  switch (s) {
    case ZEUS__SET_POWER_LIMIT: return x->a == y->a;
    case ZEUS__SET_PERSISTENCE: return x->on == y->on;
    default: return x->on == y->on && (!x->on || (x->a == y->a && x->b == y->b));
  }
}

/* ---- the state file ---- */

static json_t *dval_state(const zeus__dval *v) {
  return json_pack("{s:b,s:I,s:I}", "on", v->on, "a", (json_int_t)v->a, "b", (json_int_t)v->b);
}

static json_t *lease_state(const zeus__lease *l) {
  static const char *const kinds[] = {"peer", "lease", "anonymous"};
  return json_pack("{s:I,s:s,s:I,s:I,s:I,s:s,s:s,s:s,s:s,s:I,s:I,s:b}", "id", (json_int_t)l->id, "kind", kinds[l->kind],
                   "pid", (json_int_t)l->pid, "start", (json_int_t)l->start, "uid", (json_int_t)l->uid, "comm", l->comm,
                   "token", l->token, "user", l->user, "addr", l->addr, "ttl_s", (json_int_t)l->ttl_s, "expires_unix",
                   (json_int_t)l->expires_unix, "implicit", l->implicit);
}

/* Writes `data` to path.tmp (created fresh, 0600, no symlink followed), fsyncs, renames. */
static int write_private_atomic(const char *path, const char *data, size_t len) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 8);
  if (!tmp) return zeus__oom("writing the state file");
  snprintf(tmp, plen + 8, "%s.tmp", path);
  unlink(tmp); /* a leftover of a crash, or a planted link: never opened */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  int rc = ZEUS_OK;
  if (fd < 0) {
    rc = zeus__error(errno == EACCES ? ZEUS_EPERM : ZEUS_EIO, "cannot create '%s': %s", tmp, strerror(errno));
  } else {
    size_t off = 0;
    while (off < len && !rc) {
      ssize_t w = write(fd, data + off, len - off);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) rc = zeus__error(ZEUS_EIO, "cannot write '%s': %s", tmp, strerror(errno));
      else off += (size_t)w;
    }
    if (!rc && fsync(fd) != 0 && errno != EINVAL)
      rc = zeus__error(ZEUS_EIO, "cannot sync '%s': %s", tmp, strerror(errno));
    close(fd);
    if (!rc && rename(tmp, path) != 0)
      rc = zeus__error(ZEUS_EIO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (rc) unlink(tmp);
  }
  free(tmp);
  return rc;
}

static int save_state(zeus__leases *L) {
  if (!L->state_path) return ZEUS_OK;
  json_t *root = json_pack("{s:s,s:i}", "format", "zeus-daemon-state", "version", 1);
  json_t *leases = json_array(), *stacks = json_array();
  for (zeus__lease *l = L->leases; l; l = l->next)
    if (!l->dead) json_array_append_new(leases, lease_state(l));
  for (unsigned g = 0; g < L->ngpus; g++) {
    for (unsigned s = 0; s < ZEUS__SET_COUNT; s++) {
      stack *k = stk(L, g, s);
      if (!k->n) continue;
      json_t *layers = json_array();
      for (unsigned i = 0; i < k->n; i++)
        json_array_append_new(layers, json_pack("{s:I,s:o,s:o}", "lease", (json_int_t)k->l[i].who->id, "replaced",
                                                dval_state(&k->l[i].replaced), "set", dval_state(&k->l[i].set)));
      json_array_append_new(stacks, json_pack("{s:I,s:s,s:s,s:o}", "gpu", (json_int_t)g, "uuid", L->uuid[g], "setting",
                                              SETTING_NAMES[s], "layers", layers));
    }
  }
  json_object_set_new(root, "leases", leases);
  json_object_set_new(root, "stacks", stacks);
  char *text = json_dumps(root, JSON_INDENT(1));
  json_decref(root);
  if (!text) return zeus__oom("writing the state file");
  int rc = write_private_atomic(L->state_path, text, strlen(text));
  free(text);
  if (rc) zeus__log(ZEUS_LOG_ERROR, "daemon", "state file not written: %s", zeus_errmsg());
  return rc;
}

/* ---- leases ---- */

/* Who a lease counts against (zeus__lease_owner). */
void zeus__lease_owner(const zeus__lease *l, char *buf, size_t len) {
  if (l->kind == ZEUS__LEASE_ANONYMOUS) {
    snprintf(buf, len, "anonymous");
  } else if (l->pid > 0) {
    snprintf(buf, len, "uid %lu", (unsigned long)l->uid);
  } else if (l->user[0]) {
    snprintf(buf, len, "user '%s'", l->user);
  } else if (l->pid < 0) { /* loopback TCP from a uid the kernel told: its aliases are one client */
    snprintf(buf, len, "uid %lu", (unsigned long)l->uid);
  } else {
    /* The host without its port: every connection of one address is one client. Addresses are
     * "127.0.0.1:5", "127.0.0.1", "[::1]:5" or "[::1]". */
    char host[64];
    snprintf(host, sizeof host, "%s", l->addr);
    char *h = host;
    if (h[0] == '[') {
      h++;
      char *close_ = strchr(h, ']');
      if (close_) *close_ = '\0';
    } else {
      char *colon = strrchr(h, ':');
      if (colon) *colon = '\0';
    }
    snprintf(buf, len, "address %s", h);
  }
}

void zeus__leases_set_limits(zeus__leases *L, unsigned max_leases, unsigned per_client, unsigned reserve) {
  if (max_leases) L->max_leases = max_leases;
  L->per_client = per_client;
  L->reserve = reserve < L->max_leases ? reserve : L->max_leases - 1;
}

/* Whether one more lease of `owner` (root: a Unix peer of uid 0) fits: the table's limit, the
 * last `reserve` slots kept for root, and at most `per_client` per owner (root is not limited per
 * client). Sets ZEUS_EBUSY with the reason when not. */
static bool lease_fits(zeus__leases *L, const char *owner, bool root) {
  if (L->nleases >= L->max_leases)
    return zeus__error(ZEUS_EBUSY, "the daemon holds %u leases, its limit (--max-leases); try again when clients have "
                       "gone", L->max_leases), false;
  if (!root && L->reserve && L->nleases + L->reserve >= L->max_leases)
    return zeus__error(ZEUS_EBUSY, "the daemon holds %u leases; the last %u of its %u are kept for root "
                       "(--reserved-leases)", L->nleases, L->reserve, L->max_leases), false;
  if (!root && owner && L->per_client) {
    unsigned mine = 0;
    char o[192];
    for (zeus__lease *l = L->leases; l; l = l->next) {
      if (l->dead) continue;
      zeus__lease_owner(l, o, sizeof o);
      if (strcmp(o, owner) == 0) mine++;
    }
    if (mine >= L->per_client)
      return zeus__error(ZEUS_EBUSY, "%s holds %u leases, the most one client may hold (--max-leases-per-client); "
                         "release some (POST /leases/release) or let them lapse", owner, mine), false;
  }
  return true;
}

static zeus__lease *lease_new(zeus__leases *L, zeus__lease_kind kind) {
  if (L->nleases >= L->max_leases) {
    zeus__error(ZEUS_EBUSY, "the daemon holds %u leases, its limit; try again when clients have gone", L->max_leases);
    return NULL;
  }
  zeus__lease *l = calloc(1, sizeof *l);
  if (!l) { zeus__oom("making a lease"); return NULL; }
  l->id = ++L->next_id;
  l->kind = kind;
  l->pidfd = -1;
  l->next = L->leases;
  L->leases = l;
  L->nleases++;
  atomic_store(&L->live, L->nleases);
  return l;
}

static void lease_free(zeus__leases *L, zeus__lease *l) {
  for (zeus__lease **p = &L->leases; *p; p = &(*p)->next) {
    if (*p == l) { *p = l->next; break; }
  }
  if (l->pidfd >= 0) close(l->pidfd);
  if (l == L->anon) L->anon = NULL;
  OPENSSL_cleanse(l->token, sizeof l->token);
  free(l);
  L->nleases--;
  atomic_store(&L->live, L->nleases);
}

/* Binds a lease to a process: start time (against pid reuse), name, and a pidfd to wait on. A
 * process that cannot be proved alive (no start time: it has exited, or /proc cannot say) is
 * refused: its lease would hold settings that nothing ever gives back (ZEUS_EPERM). */
static int bind_process(zeus__lease *l, pid_t pid, uid_t uid) {
  l->pid = pid;
  l->uid = uid;
  l->start = zeus__proc_start_time(pid);
  if (!l->start)
    return zeus__error(ZEUS_EPERM, "the process that opened this connection (pid %ld) has exited; a change needs a live "
                       "holder (open a new connection from a live process)", (long)pid);
  proc_comm(pid, l->comm, sizeof l->comm);
  l->pidfd = pidfd_open_(pid);
  if (l->pidfd < 0 && errno == ESRCH)
    return zeus__error(ZEUS_EPERM, "the process that opened this connection (pid %ld) has exited; a change needs a live "
                       "holder (open a new connection from a live process)", (long)pid);
  if (l->pidfd < 0)
    zeus__log(ZEUS_LOG_WARN, "daemon", "pidfd_open(%ld): %s; the exit of pid %ld is noticed by polling /proc",
              (long)pid, strerror(errno), (long)pid);
  /* pidfd_open may have found a new process under a reused pid: the start time must still match. */
  if (zeus__proc_start_time(pid) != l->start)
    return zeus__error(ZEUS_EPERM, "the process that opened this connection (pid %ld) has exited; a change needs a live "
                       "holder", (long)pid);
  return ZEUS_OK;
}

static bool make_token(char token[33]) {
  unsigned char r[16];
  size_t got = 0;
  while (got < sizeof r) {
    ssize_t n = getrandom(r + got, sizeof r - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    got += (size_t)n;
  }
  for (int i = 0; i < 16; i++) snprintf(token + 2 * i, 3, "%02x", r[i]);
  OPENSSL_cleanse(r, sizeof r);
  return true;
}

zeus__lease *zeus__leases_peer(zeus__leases *L, pid_t pid, uid_t uid) {
  unsigned long long start = zeus__proc_start_time(pid);
  if (!start) {
    zeus__error(ZEUS_EPERM, "the process that opened this connection (pid %ld) has exited; a change needs a live "
                "holder (open a new connection from a live process)", (long)pid);
    return NULL;
  }
  for (zeus__lease *l = L->leases; l; l = l->next) {
    if (l->dead || l->kind != ZEUS__LEASE_PEER || l->pid != pid) continue;
    if (l->start == start) return l;
  }
  char owner[64];
  snprintf(owner, sizeof owner, "uid %lu", (unsigned long)uid);
  if (!lease_fits(L, owner, uid == 0)) return NULL;
  zeus__lease *l = lease_new(L, ZEUS__LEASE_PEER);
  if (!l) return NULL;
  l->implicit = true;
  if (bind_process(l, pid, uid)) {
    char saved[512];
    snprintf(saved, sizeof saved, "%s", zeus_errmsg());
    lease_free(L, l);
    zeus__error(ZEUS_EPERM, "%s", saved);
    return NULL;
  }
  return l;
}

zeus__lease *zeus__leases_create(zeus__leases *L, pid_t pid, uid_t uid, const char *user, const char *addr,
                                 unsigned ttl_s) {
  zeus__lease probe = {.kind = ZEUS__LEASE_TTL, .pid = pid, .uid = uid};
  snprintf(probe.user, sizeof probe.user, "%s", user ? user : "");
  snprintf(probe.addr, sizeof probe.addr, "%s", addr ? addr : "");
  char owner[192];
  zeus__lease_owner(&probe, owner, sizeof owner);
  if (!lease_fits(L, owner, pid > 0 && uid == 0)) return NULL;
  zeus__lease *l = lease_new(L, ZEUS__LEASE_TTL);
  if (!l) return NULL;
  if (!make_token(l->token)) {
    zeus__error(ZEUS_EIO, "no random bytes for a lease id: %s", strerror(errno));
    lease_free(L, l);
    return NULL;
  }
  if (pid > 0 && bind_process(l, pid, uid)) {
    char saved[512];
    snprintf(saved, sizeof saved, "%s", zeus_errmsg());
    lease_free(L, l);
    zeus__error(ZEUS_EPERM, "%s", saved);
    return NULL;
  }
  if (pid <= 0) {
    l->uid = uid;
    l->pid = pid < 0 ? -1 : 0; /* -1: loopback TCP from that uid (zeus__lease_owner) */
  }
  snprintf(l->user, sizeof l->user, "%s", user ? user : "");
  snprintf(l->addr, sizeof l->addr, "%s", addr ? addr : "");
  l->ttl_s = ttl_s;
  zeus__leases_renew(L, l);
  save_state(L);
  return l;
}

zeus__lease *zeus__leases_find(zeus__leases *L, const char *token) {
  if (!token || strlen(token) != 32) return NULL;
  zeus__lease *found = NULL;
  for (zeus__lease *l = L->leases; l; l = l->next)
    if (!l->dead && l->token[0] && CRYPTO_memcmp(l->token, token, 32) == 0) found = l;
  return found;
}

zeus__lease *zeus__leases_find_implicit(zeus__leases *L, const char *owner) {
  char o[192];
  for (zeus__lease *l = L->leases; l; l = l->next) {
    if (l->dead || !l->implicit || l->kind != ZEUS__LEASE_TTL) continue;
    zeus__lease_owner(l, o, sizeof o);
    if (strcmp(o, owner) == 0) return l;
  }
  return NULL;
}

zeus__lease *zeus__leases_anonymous(zeus__leases *L) {
  if (!L->anon) {
    L->anon = lease_new(L, ZEUS__LEASE_ANONYMOUS);
    if (L->anon) L->anon->implicit = true;
  }
  return L->anon;
}

void zeus__leases_renew(zeus__leases *L, zeus__lease *l) {
  (void)L;
  if (!l || !l->ttl_s) return;
  l->expires = mono_now() + l->ttl_s;
  l->expires_unix = (long long)time(NULL) + l->ttl_s;
}

/* Whether `l` holds its layers against other clients. */
static bool holds(const zeus__lease *l) { return l && !l->dead && l->kind != ZEUS__LEASE_ANONYMOUS; }

/* Removes layer i of a stack: a top layer gives its replaced value back to the device. */
static void remove_layer(zeus__leases *L, unsigned gpu, zeus__setting s, unsigned i, const char *why) {
  stack *k = stk(L, gpu, s);
  layer *y = &k->l[i];
  char desc[192], from[64], to[64];
  zeus__lease_describe(y->who, desc, sizeof desc);
  if (i + 1 == k->n) {
    dval_text(s, &y->set, from, sizeof from);
    dval_text(s, &y->replaced, to, sizeof to);
    if (dval_eq(s, &y->set, &y->replaced)) {
      zeus__log(ZEUS_LOG_INFO, "daemon", "GPU %u: %s stays %s (already the value %s replaced): %s", gpu,
                SETTING_NAMES[s], to, desc, why);
    } else if (L->dev.write(L->dev.ctx, gpu, s, &y->replaced) == ZEUS_OK) {
      atomic_fetch_add(&L->restores, 1);
      zeus__log(ZEUS_LOG_INFO, "daemon", "GPU %u: %s given back: %s -> %s (%s; %s)", gpu, SETTING_NAMES[s], from, to,
                desc, why);
    } else {
      zeus__log(ZEUS_LOG_ERROR, "daemon", "GPU %u: %s could not be given back to %s (%s; %s): %s", gpu,
                SETTING_NAMES[s], to, desc, why, zeus_errmsg());
    }
  } else {
    k->l[i + 1].replaced = y->replaced;
    char above[192];
    zeus__lease_describe(k->l[i + 1].who, above, sizeof above);
    dval_text(s, &y->replaced, to, sizeof to);
    zeus__log(ZEUS_LOG_INFO, "daemon",
              "GPU %u: %s of %s leaves (%s); %s, which overrode it, now gives back %s when it goes", gpu,
              SETTING_NAMES[s], desc, why, above, to);
  }
  memmove(&k->l[i], &k->l[i + 1], (k->n - i - 1) * sizeof k->l[0]);
  k->n--;
}

/* Where the top layers of both clock locks of a GPU are to leave (held by `l`; NULL: by anyone)
 * and both give back "unlocked" in place of a lock, the two give-backs are one reset of both
 * (dev.reset_locks: on amdsmi one call where remove_layer's two would make three). Returns whether
 * it removed them; otherwise nothing changed and remove_layer does each. */
static bool remove_lock_tops(zeus__leases *L, unsigned gpu, const zeus__lease *l, const char *why) {
  static const zeus__setting S[2] = {ZEUS__SET_GPU_LOCK, ZEUS__SET_MEM_LOCK};
  if (!L->dev.reset_locks) return false;
  for (int m = 0; m < 2; m++) {
    stack *k = stk(L, gpu, S[m]);
    if (!k->n) return false;
    layer *y = &k->l[k->n - 1];
    if ((l && y->who != l) || y->replaced.on || !y->set.on) return false;
  }
  int rc = L->dev.reset_locks(L->dev.ctx, gpu);
  char err[512] = "";
  if (rc) snprintf(err, sizeof err, "%s", zeus_errmsg());
  else atomic_fetch_add(&L->restores, 2);
  for (int m = 0; m < 2; m++) {
    stack *k = stk(L, gpu, S[m]);
    layer *y = &k->l[k->n - 1];
    char desc[192], from[64];
    zeus__lease_describe(y->who, desc, sizeof desc);
    dval_text(S[m], &y->set, from, sizeof from);
    if (!rc)
      zeus__log(ZEUS_LOG_INFO, "daemon", "GPU %u: %s given back: %s -> unlocked, with the other clock lock (%s; %s)",
                gpu, SETTING_NAMES[S[m]], from, desc, why);
    else
      zeus__log(ZEUS_LOG_ERROR, "daemon", "GPU %u: %s could not be given back to unlocked (%s; %s): %s", gpu,
                SETTING_NAMES[S[m]], desc, why, err);
    k->n--;
  }
  return true;
}

static bool has_layers(zeus__leases *L, const zeus__lease *l) {
  for (unsigned g = 0; g < L->ngpus; g++)
    for (unsigned s = 0; s < ZEUS__SET_COUNT; s++) {
      stack *k = stk(L, g, s);
      for (unsigned i = 0; i < k->n; i++)
        if (k->l[i].who == l) return true;
    }
  return false;
}

/* Removes every layer of `l` (tops first, so values come back in order), without saving. */
static bool drop_layers(zeus__leases *L, zeus__lease *l, const char *why) {
  bool any = false;
  for (unsigned g = 0; g < L->ngpus; g++)
    for (unsigned s = 0; s < ZEUS__SET_COUNT; s++) {
      if (s == ZEUS__SET_GPU_LOCK && remove_lock_tops(L, g, l, why)) any = true; /* both locks in one reset */
      stack *k = stk(L, g, s);
      for (unsigned i = k->n; i-- > 0;)
        if (k->l[i].who == l) { remove_layer(L, g, (zeus__setting)s, i, why); any = true; }
    }
  return any;
}

void zeus__leases_end(zeus__leases *L, zeus__lease *l, const char *why) {
  if (!l) return;
  drop_layers(L, l, why);
  l->dead = true;
  lease_free(L, l);
  save_state(L);
}

/* ZEUS_EBUSY naming the holder when another live client holds the top layer of (gpu, s) and the
 * change does not override; ZEUS_OK otherwise. */
static int conflict(zeus__leases *L, const zeus__lease *who, unsigned gpu, zeus__setting s, zeus__change_mode mode) {
  stack *k = stk(L, gpu, s);
  layer *top = k->n ? &k->l[k->n - 1] : NULL;
  bool override = mode == ZEUS__CHANGE_OVERRIDE || mode == ZEUS__CHANGE_PERSIST_OVERRIDE;
  if (top && !override && holds(top->who) && top->who != who) {
    char desc[192], cur[64];
    zeus__lease_describe(top->who, desc, sizeof desc);
    dval_text(s, &top->set, cur, sizeof cur);
    return zeus__error(ZEUS_EBUSY,
                       "GPU %u's %s (%s) is held by %s; it is given back when that client goes, or pass override=true "
                       "to take it over",
                       gpu, SETTING_NAMES[s], cur, desc);
  }
  return ZEUS_OK;
}

/* A holder's older layer taken out of a stack (it was overridden, so it is not the top), with
 * what putting it back needs: a change that fails after it left must not lose the holder's record
 * (the value its holder set would not come back when the overrider goes). */
typedef struct removal {
  bool done;
  unsigned at;
  layer gone;
  zeus__dval above_replaced; /* the replaced value of the layer above it, before it inherited */
} removal;

static removal remove_older(stack *k, const zeus__lease *who) {
  removal r = {0};
  for (unsigned i = 0; i < k->n; i++) {
    if (k->l[i].who != who) continue;
    r = (removal){.done = true, .at = i, .gone = k->l[i], .above_replaced = k->l[i + 1].replaced};
    k->l[i + 1].replaced = k->l[i].replaced; /* i is not the top: the caller checked */
    memmove(&k->l[i], &k->l[i + 1], (k->n - i - 1) * sizeof k->l[0]);
    k->n--;
    break;
  }
  return r;
}

/* Puts back what remove_older took (the stack holds what it held then: room for one more). */
static void undo_removal(stack *k, const removal *r) {
  if (!r->done) return;
  memmove(&k->l[r->at + 1], &k->l[r->at], (k->n - r->at) * sizeof k->l[0]);
  k->l[r->at] = r->gone;
  k->l[r->at + 1].replaced = r->above_replaced;
  k->n++;
}

int zeus__leases_change(zeus__leases *L, zeus__lease *who, unsigned gpu, zeus__setting s, const zeus__dval *v,
                        zeus__change_mode mode) {
  if (gpu >= L->ngpus || (unsigned)s >= ZEUS__SET_COUNT) return zeus__error(ZEUS_EINVAL, "GPU %u does not exist", gpu);
  stack *k = stk(L, gpu, s);
  layer *top = k->n ? &k->l[k->n - 1] : NULL;
  int rc;
  if ((rc = conflict(L, who, gpu, s, mode))) return rc;
  if (mode == ZEUS__CHANGE_PERSIST || mode == ZEUS__CHANGE_PERSIST_OVERRIDE) {
    if ((rc = L->dev.write(L->dev.ctx, gpu, s, v))) return rc;
    if (k->n) {
      char now[64];
      dval_text(s, v, now, sizeof now);
      zeus__log(ZEUS_LOG_INFO, "daemon", "GPU %u: %s set to %s for good; %u earlier record%s dropped", gpu,
                SETTING_NAMES[s], now, k->n, k->n == 1 ? "" : "s");
      k->n = 0;
      save_state(L);
    }
    return ZEUS_OK;
  }
  if (top && top->who == who) {
    if ((rc = L->dev.write(L->dev.ctx, gpu, s, v))) return rc;
    top->set = *v;
    return ZEUS_OK;
  }
  /* A new layer: the holder's older one (it was overridden) leaves first, silently; it comes back
   * if the change fails. */
  removal older = remove_older(k, who);
  if (!stack_room(k)) {
    undo_removal(k, &older);
    return zeus__oom("recording a change");
  }
  layer y = {.who = who, .set = *v};
  if (k->n) {
    y.replaced = k->l[k->n - 1].set;
  } else if ((rc = L->dev.read(L->dev.ctx, gpu, s, &y.replaced))) {
    undo_removal(k, &older);
    return rc;
  }
  k->l[k->n++] = y;
  if ((rc = save_state(L))) {
    k->n--;
    undo_removal(k, &older);
    return zeus__error_ctx(rc, "GPU %u's %s was not changed, because the value it replaces could not be recorded",
                           gpu, SETTING_NAMES[s]);
  }
  if ((rc = L->dev.write(L->dev.ctx, gpu, s, v))) {
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", zeus_errmsg());
    k->n--;
    undo_removal(k, &older);
    save_state(L);
    return zeus__error(rc, "%s", saved);
  }
  return ZEUS_OK;
}

int zeus__leases_reset_locks(zeus__leases *L, zeus__lease *who, unsigned gpu, zeus__change_mode mode) {
  static const zeus__setting S[2] = {ZEUS__SET_GPU_LOCK, ZEUS__SET_MEM_LOCK};
  const zeus__dval off = {0};
  if (gpu >= L->ngpus) return zeus__error(ZEUS_EINVAL, "GPU %u does not exist", gpu);
  int rc;
  for (int m = 0; m < 2; m++)
    if ((rc = conflict(L, who, gpu, S[m], mode))) return rc;
  if (!L->dev.reset_locks) {
    for (int m = 0; m < 2; m++)
      if ((rc = zeus__leases_change(L, who, gpu, S[m], &off, mode))) return rc;
    return ZEUS_OK;
  }
  if (mode == ZEUS__CHANGE_PERSIST || mode == ZEUS__CHANGE_PERSIST_OVERRIDE) {
    if ((rc = L->dev.reset_locks(L->dev.ctx, gpu))) return rc;
    bool dropped = false;
    for (int m = 0; m < 2; m++) {
      stack *k = stk(L, gpu, S[m]);
      if (!k->n) continue;
      zeus__log(ZEUS_LOG_INFO, "daemon", "GPU %u: %s set to unlocked for good; %u earlier record%s dropped", gpu,
                SETTING_NAMES[S[m]], k->n, k->n == 1 ? "" : "s");
      k->n = 0;
      dropped = true;
    }
    if (dropped) save_state(L);
    return ZEUS_OK;
  }
  /* Each domain as zeus__leases_change: `who`'s top layer is updated after the write; otherwise
   * its older layer leaves and a new one is pushed, both pushed ones recorded before the write. */
  bool pushed[2] = {false, false};
  removal older[2] = {{0}, {0}};
  for (int m = 0; m < 2 && !rc; m++) {
    stack *k = stk(L, gpu, S[m]);
    if (k->n && k->l[k->n - 1].who == who) continue;
    older[m] = remove_older(k, who);
    if (!stack_room(k)) {
      rc = zeus__oom("recording a change");
      break;
    }
    layer y = {.who = who, .set = off};
    if (k->n) y.replaced = k->l[k->n - 1].set;
    else if ((rc = L->dev.read(L->dev.ctx, gpu, S[m], &y.replaced))) break;
    k->l[k->n++] = y;
    pushed[m] = true;
  }
  if (!rc && (pushed[0] || pushed[1]) && (rc = save_state(L)))
    rc = zeus__error_ctx(rc, "GPU %u's clock locks were not reset, because the values they replace could not be recorded",
                    gpu);
  if (!rc && (rc = L->dev.reset_locks(L->dev.ctx, gpu)) && (pushed[0] || pushed[1])) {
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", zeus_errmsg());
    for (int m = 0; m < 2; m++) {
      if (pushed[m]) stk(L, gpu, S[m])->n--;
      undo_removal(stk(L, gpu, S[m]), &older[m]);
    }
    save_state(L);
    return zeus__error(rc, "%s", saved);
  }
  if (rc) {
    for (int m = 0; m < 2; m++) {
      if (pushed[m]) stk(L, gpu, S[m])->n--;
      undo_removal(stk(L, gpu, S[m]), &older[m]);
    }
    return rc;
  }
  for (int m = 0; m < 2; m++) {
    stack *k = stk(L, gpu, S[m]);
    if (!pushed[m]) k->l[k->n - 1].set = off; /* `who`'s own top layer */
  }
  return ZEUS_OK;
}

unsigned zeus__leases_sweep(zeus__leases *L, double now) {
  unsigned ended = 0;
  bool changed = false;
  zeus__lease *next;
  for (zeus__lease *l = L->leases; l; l = next) {
    next = l->next;
    char why[160];
    why[0] = '\0';
    if (l->pid > 0) {
      bool gone;
      if (l->pidfd >= 0) {
        struct pollfd p = {.fd = l->pidfd, .events = POLLIN};
        gone = poll(&p, 1, 0) > 0;
      } else {
        /* No start time proves nothing alive: 0 (gone, or unreadable) never matches. */
        unsigned long long st = zeus__proc_start_time(l->pid);
        gone = !st || st != l->start;
      }
      if (gone) snprintf(why, sizeof why, "pid %ld (%s) exited", (long)l->pid, l->comm[0] ? l->comm : "?");
    }
    if (!why[0] && l->expires > 0 && now >= l->expires)
      snprintf(why, sizeof why, "lease L%u lapsed (not renewed within %u s)", l->id, l->ttl_s);
    if (why[0]) {
      drop_layers(L, l, why);
      l->dead = true;
      lease_free(L, l);
      ended++;
      changed = true;
    } else if (l->implicit && l->kind == ZEUS__LEASE_PEER && !has_layers(L, l)) {
      lease_free(L, l); /* a peer that holds nothing needs no watching */
    }
  }
  if (changed) save_state(L);
  return ended;
}

unsigned zeus__leases_pidfds(zeus__leases *L, int *fds, unsigned cap) {
  unsigned n = 0;
  for (zeus__lease *l = L->leases; l && n < cap; l = l->next)
    if (!l->dead && l->pidfd >= 0) fds[n++] = l->pidfd;
  return n;
}

double zeus__leases_next_expiry(zeus__leases *L) {
  double t = 0;
  for (zeus__lease *l = L->leases; l; l = l->next) {
    if (l->dead) continue;
    if (l->expires > 0 && (t == 0 || l->expires < t)) t = l->expires;
    /* Without a pidfd a process is polled through /proc: wake up to look. */
    if (l->pid > 0 && l->pidfd < 0) {
      double soon = mono_now() + 0.2;
      if (t == 0 || soon < t) t = soon;
    }
  }
  return t;
}

static json_t *dval_json(zeus__setting s, const zeus__dval *v) {
  switch (s) {
    case ZEUS__SET_POWER_LIMIT: return json_pack("{s:I}", "power_limit_mw", (json_int_t)v->a);
    case ZEUS__SET_PERSISTENCE: return json_pack("{s:b}", "enabled", v->on);
    default:
      return v->on ? json_pack("{s:b,s:I,s:I}", "locked", 1, "min_clock_mhz", (json_int_t)v->a, "max_clock_mhz",
                               (json_int_t)v->b)
                   : json_pack("{s:b}", "locked", 0);
  }
}

json_t *zeus__leases_json(zeus__leases *L) {
  static const char *const kinds[] = {"peer", "lease", "anonymous"};
  json_t *arr = json_array();
  double now = mono_now();
  for (zeus__lease *l = L->leases; l; l = l->next) {
    if (l->dead) continue;
    json_t *settings = json_array();
    for (unsigned g = 0; g < L->ngpus; g++)
      for (unsigned s = 0; s < ZEUS__SET_COUNT; s++) {
        stack *k = stk(L, g, s);
        for (unsigned i = 0; i < k->n; i++)
          if (k->l[i].who == l)
            json_array_append_new(settings, json_pack("{s:I,s:s,s:o,s:o,s:b}", "gpu_id", (json_int_t)g, "setting",
                                                      SETTING_NAMES[s], "value", dval_json(s, &k->l[i].set), "replaced",
                                                      dval_json(s, &k->l[i].replaced), "on_top", i + 1 == k->n));
      }
    char desc[192];
    zeus__lease_describe(l, desc, sizeof desc);
    char id[16];
    snprintf(id, sizeof id, "L%u", l->id);
    json_t *o = json_pack("{s:s,s:s,s:s,s:o}", "id", id, "kind", kinds[l->kind], "holder", desc, "settings", settings);
    json_object_set_new(o, "pid", l->pid ? json_integer(l->pid) : json_null());
    json_object_set_new(o, "uid", l->kind == ZEUS__LEASE_ANONYMOUS ? json_null() : json_integer(l->uid));
    json_object_set_new(o, "process", l->comm[0] ? json_string(l->comm) : json_null());
    json_object_set_new(o, "user", l->user[0] ? json_string(l->user) : json_null());
    json_object_set_new(o, "address", l->addr[0] ? json_string(l->addr) : json_null());
    json_object_set_new(o, "ttl_s", l->ttl_s ? json_integer(l->ttl_s) : json_null());
    json_object_set_new(o, "expires_in_s", l->expires > 0 ? json_real(zeus_round_decimals(l->expires - now, 9)) : json_null());
    json_array_append_new(arr, o);
  }
  return json_pack("{s:o}", "leases", arr);
}

unsigned zeus__leases_live(zeus__leases *L) { return L ? atomic_load(&L->live) : 0; }
unsigned long long zeus__leases_restores(zeus__leases *L) { return L ? atomic_load(&L->restores) : 0; }

void zeus__leases_lock(zeus__leases *L) { pthread_mutex_lock(&L->mu); }
void zeus__leases_unlock(zeus__leases *L) { pthread_mutex_unlock(&L->mu); }
pthread_mutex_t *zeus__leases_mutex(zeus__leases *L) { return &L->mu; }

/* ---- replay ---- */

static bool dval_from(const json_t *o, zeus__dval *v) {
  json_t *on = json_object_get(o, "on"), *a = json_object_get(o, "a"), *b = json_object_get(o, "b");
  if (!json_is_boolean(on) || !json_is_integer(a) || !json_is_integer(b)) return false;
  json_int_t av = json_integer_value(a), bv = json_integer_value(b);
  if (av < 0 || av > UINT32_MAX || bv < 0 || bv > UINT32_MAX) return false;
  v->on = json_is_true(on);
  v->a = (unsigned)av;
  v->b = (unsigned)bv;
  return true;
}

static int setting_from(const char *name) {
  for (int s = 0; s < ZEUS__SET_COUNT; s++)
    if (name && strcmp(name, SETTING_NAMES[s]) == 0) return s;
  return -1;
}

/* Rebuilds the leases and stacks of a state file; returns false (nothing kept) when malformed. */
static bool replay_parse(zeus__leases *L, json_t *root, const char **why) {
  json_t *leases = json_object_get(root, "leases"), *stacks = json_object_get(root, "stacks");
  const char *fmt = json_string_value(json_object_get(root, "format"));
  if (!fmt || strcmp(fmt, "zeus-daemon-state") != 0 || !json_is_array(leases) || !json_is_array(stacks)) {
    *why = "not a zeus daemon state file (format, leases, stacks)";
    return false;
  }
  size_t i;
  json_t *v;
  json_array_foreach(leases, i, v) {
    const char *kind = json_string_value(json_object_get(v, "kind"));
    json_t *id = json_object_get(v, "id");
    if (!kind || !json_is_integer(id) || json_integer_value(id) <= 0 || json_integer_value(id) > 0x7fffffff) {
      *why = "a lease without kind or id";
      return false;
    }
    zeus__lease_kind k = strcmp(kind, "peer") == 0 ? ZEUS__LEASE_PEER
                         : strcmp(kind, "lease") == 0 ? ZEUS__LEASE_TTL
                         : strcmp(kind, "anonymous") == 0 ? ZEUS__LEASE_ANONYMOUS
                                                           : (zeus__lease_kind)-1;
    if ((int)k < 0) { *why = "a lease of unknown kind"; return false; }
    zeus__lease *l = lease_new(L, k);
    if (!l) { *why = "more leases than the limit"; return false; }
    l->id = (unsigned)json_integer_value(id);
    if (l->id > L->next_id) L->next_id = l->id;
    l->pid = (pid_t)json_integer_value(json_object_get(v, "pid"));
    l->start = (unsigned long long)json_integer_value(json_object_get(v, "start"));
    l->uid = (uid_t)json_integer_value(json_object_get(v, "uid"));
    l->ttl_s = (unsigned)json_integer_value(json_object_get(v, "ttl_s"));
    l->expires_unix = json_integer_value(json_object_get(v, "expires_unix"));
    l->implicit = json_is_true(json_object_get(v, "implicit"));
    const char *s;
    if ((s = json_string_value(json_object_get(v, "comm")))) snprintf(l->comm, sizeof l->comm, "%s", s);
    if ((s = json_string_value(json_object_get(v, "user")))) snprintf(l->user, sizeof l->user, "%s", s);
    if ((s = json_string_value(json_object_get(v, "addr")))) snprintf(l->addr, sizeof l->addr, "%s", s);
    if ((s = json_string_value(json_object_get(v, "token"))) && strlen(s) == 32) memcpy(l->token, s, 33);
    if (k == ZEUS__LEASE_ANONYMOUS) L->anon = l;
  }
  json_array_foreach(stacks, i, v) {
    json_t *gj = json_object_get(v, "gpu"), *layers = json_object_get(v, "layers");
    const char *uuid = json_string_value(json_object_get(v, "uuid"));
    int s = setting_from(json_string_value(json_object_get(v, "setting")));
    if (!json_is_integer(gj) || s < 0 || !json_is_array(layers) || !uuid) {
      *why = "a malformed settings record";
      return false;
    }
    json_int_t g = json_integer_value(gj);
    if (g < 0 || g >= L->ngpus || strcmp(uuid, L->uuid[g]) != 0) {
      zeus__log(ZEUS_LOG_WARN, "daemon",
                "state file: GPU %lld (%s) is not this daemon's GPU %lld; its %s records are dropped unrestored",
                (long long)g, uuid, (long long)g, SETTING_NAMES[s]);
      continue;
    }
    stack *k = stk(L, (unsigned)g, (zeus__setting)s);
    size_t j;
    json_t *y;
    json_array_foreach(layers, j, y) {
      json_int_t lid = json_integer_value(json_object_get(y, "lease"));
      layer ly = {0};
      for (zeus__lease *l = L->leases; l; l = l->next)
        if ((json_int_t)l->id == lid) ly.who = l;
      if (!ly.who || !dval_from(json_object_get(y, "replaced"), &ly.replaced) ||
          !dval_from(json_object_get(y, "set"), &ly.set) || !stack_room(k)) {
        *why = "a malformed layer";
        return false;
      }
      k->l[k->n++] = ly;
    }
  }
  return true;
}

/* Re-adopts the leases of clients still alive; gives back what the others held. */
static void replay(zeus__leases *L) {
  struct stat st;
  if (lstat(L->state_path, &st) != 0) return;
  if (!S_ISREG(st.st_mode)) {
    zeus__log(ZEUS_LOG_ERROR, "daemon", "state file '%s' is not a regular file; ignored", L->state_path);
    return;
  }
  json_t *root = NULL;
  const char *why = NULL;
  if (zeus__json_load_file(L->state_path, &root) != ZEUS_OK) why = zeus_errmsg();
  if (!why && !replay_parse(L, root, &why)) {
    /* Forget whatever was half-read: nothing from a malformed file touches a GPU. */
    for (unsigned i = 0; i < L->ngpus * ZEUS__SET_COUNT; i++) L->st[i].n = 0; /* arrays stay for reuse */
    while (L->leases) lease_free(L, L->leases);
  }
  json_decref(root);
  if (why) {
    char bad[4200];
    snprintf(bad, sizeof bad, "%s.bad", L->state_path);
    rename(L->state_path, bad);
    zeus__log(ZEUS_LOG_ERROR, "daemon",
              "state file '%s' is unreadable (%s): moved to '%s'; settings it recorded are not "
              "given back",
              L->state_path, why, bad);
    return;
  }
  long long now_unix = time(NULL);
  double now = mono_now();
  unsigned kept = 0, ended = 0;
  zeus__lease *next;
  for (zeus__lease *l = L->leases; l; l = next) {
    next = l->next;
    char reason[160] = "";
    if (l->pid > 0) {
      unsigned long long start = zeus__proc_start_time(l->pid);
      if (!start || start != l->start)
        snprintf(reason, sizeof reason, "pid %ld (%s) exited while the daemon was down", (long)l->pid, l->comm);
    }
    if (!reason[0] && l->ttl_s && l->expires_unix <= now_unix)
      snprintf(reason, sizeof reason, "lease L%u lapsed while the daemon was down", l->id);
    if (reason[0]) {
      drop_layers(L, l, reason);
      l->dead = true;
      lease_free(L, l);
      ended++;
      continue;
    }
    if (l->pid > 0) {
      l->pidfd = pidfd_open_(l->pid);
      if (l->start != zeus__proc_start_time(l->pid)) { /* exited just now: the next sweep sees it */
        if (l->pidfd >= 0) close(l->pidfd);
        l->pidfd = -1;
      }
    }
    if (l->ttl_s) l->expires = now + (double)(l->expires_unix - now_unix);
    kept++;
  }
  zeus__log(ZEUS_LOG_INFO, "daemon", "state file '%s' replayed: %u lease%s adopted again, %u ended", L->state_path,
            kept, kept == 1 ? "" : "s", ended);
  save_state(L);
}

int zeus__leases_open(zeus__leases **out, unsigned ngpus, const char *const *uuids, const zeus__lease_dev *dev,
                      const char *state_path, unsigned max_leases) {
  zeus__leases *L = calloc(1, sizeof *L);
  if (!L) return zeus__oom("making the lease table");
  pthread_mutex_init(&L->mu, NULL);
  L->ngpus = ngpus;
  L->dev = *dev;
  L->max_leases = max_leases ? max_leases : 1024;
  L->uuid = calloc(ngpus ? ngpus : 1, sizeof *L->uuid);
  L->st = calloc((size_t)(ngpus ? ngpus : 1) * ZEUS__SET_COUNT, sizeof *L->st);
  L->state_path = state_path ? strdup(state_path) : NULL;
  if (!L->uuid || !L->st || (state_path && !L->state_path)) {
    zeus__leases_close(L, NULL);
    return zeus__oom("making the lease table");
  }
  for (unsigned g = 0; g < ngpus; g++) snprintf(L->uuid[g], ZEUS_NAME_LEN, "%s", uuids && uuids[g] ? uuids[g] : "");
  if (L->state_path) replay(L);
  *out = L;
  return ZEUS_OK;
}

void zeus__leases_close(zeus__leases *L, const char *why) {
  if (!L) return;
  if (why && L->st) {
    pthread_mutex_lock(&L->mu);
    /* Every layer leaves, tops first: each stack ends at its bottom layer's replaced value. */
    for (unsigned g = 0; g < L->ngpus; g++)
      for (unsigned s = 0; s < ZEUS__SET_COUNT; s++) {
        if (s == ZEUS__SET_GPU_LOCK)
          while (remove_lock_tops(L, g, NULL, why)) {} /* both locks back to unlocked in one reset */
        stack *k = stk(L, g, s);
        while (k->n) remove_layer(L, g, (zeus__setting)s, k->n - 1, why);
      }
    while (L->leases) lease_free(L, L->leases);
    if (L->state_path && unlink(L->state_path) != 0 && errno != ENOENT)
      zeus__log(ZEUS_LOG_WARN, "daemon", "cannot remove the state file '%s': %s", L->state_path, strerror(errno));
    pthread_mutex_unlock(&L->mu);
  } else {
    while (L->leases) lease_free(L, L->leases);
  }
  pthread_mutex_destroy(&L->mu);
  free(L->uuid);
  if (L->st)
    for (unsigned i = 0; i < (L->ngpus ? L->ngpus : 1) * ZEUS__SET_COUNT; i++) free(L->st[i].l);
  free(L->st);
  free(L->state_path);
  free(L);
}
