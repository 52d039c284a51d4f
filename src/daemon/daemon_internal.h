/* src/daemon/daemon_internal.h: the parts of `zeus daemon` (internal; see zeus/daemon.h).
 *
 *   jwt.c      HS256 tokens: base64url, sign, verify (alg, signature in constant time, exp, nbf)
 *   leases.c   who changed which setting, and the value it replaced: a stack per (GPU, setting),
 *              conflict checks, give-back, the state file and its replay
 *   server.c   libmicrohttpd on a Unix socket (and TCP), routing, auth, counters
 *   routes.c   the zeusd routes over the device layer, and /leases
 */
#ifndef ZEUS_DAEMON_INTERNAL_H
#define ZEUS_DAEMON_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "core/core.h"
#include "http/mhd_guard.h"
#include "zeus/daemon.h"
#include "zeus/format.h"
#include "zeus/version.h"

/* ---- JWT (jwt.c) ---- */

/* base64url without padding. Encode: *out is malloc'd and NUL-terminated. Decode refuses padding,
 * characters outside the alphabet and impossible lengths (ZEUS_EPARSE). */
int zeus__b64url_encode(const unsigned char *in, size_t n, char **out);
int zeus__b64url_decode(const char *in, size_t n, unsigned char **out, size_t *outlen);

typedef struct zeus__jwt_claims {
  char sub[128];
  unsigned scopes; /* ZEUS_DAEMON_* */
  bool has_exp;
  long long exp;
} zeus__jwt_claims;

/* Signs {"sub","scopes","exp"?} with HMAC-SHA256 over `key`. *token is malloc'd. */
int zeus__jwt_sign(const unsigned char *key, size_t keylen, const char *sub, unsigned scopes, bool has_exp,
                   long long exp, char **token);
/* Verifies a compact token at time `now` (Unix s): three base64url parts, header alg exactly
 * "HS256", the signature (constant-time comparison), then the claims (sub a string, scopes known
 * group names, exp/nbf numbers; exp <= now is expired). ZEUS_EPERM with the reason ("Token has
 * expired.", "Invalid token: ...") on any failure. */
int zeus__jwt_verify(const unsigned char *key, size_t keylen, const char *token, long long now,
                     zeus__jwt_claims *out);
/* "gpu-control" ... for one bit; NULL for none. */
const char *zeus__daemon_group_name(unsigned bit);
/* Reads a signing key file (its bytes as they are); refuses an empty one. *key is malloc'd. */
int zeus__daemon_read_key(const char *path, unsigned char **key, size_t *len);

/* ---- settings and leases (leases.c) ---- */

typedef enum zeus__setting {
  ZEUS__SET_POWER_LIMIT = 0,
  ZEUS__SET_PERSISTENCE = 1,
  ZEUS__SET_GPU_LOCK = 2,
  ZEUS__SET_MEM_LOCK = 3,
  ZEUS__SET_COUNT = 4,
} zeus__setting;

/* A setting's value: the power limit in a (mW); persistence in on; a lock in on (locked), a, b
 * (min, max MHz). */
typedef struct zeus__dval {
  bool on;
  unsigned a, b;
} zeus__dval;

typedef enum zeus__lease_kind {
  ZEUS__LEASE_PEER = 0,      /* a process on the Unix socket: lives as long as the process */
  ZEUS__LEASE_TTL = 1,       /* an explicit lease: lives until released, expired or (Unix) its process dies */
  ZEUS__LEASE_ANONYMOUS = 2, /* TCP change without a lease: held by nobody, given back at shutdown */
} zeus__lease_kind;

typedef struct zeus__lease {
  unsigned id;                 /* public: "L<id>" */
  zeus__lease_kind kind;
  char token[33];              /* the secret of an explicit lease ("" otherwise) */
  pid_t pid;                   /* the process behind it (0 over TCP; -1 over loopback TCP from uid) */
  unsigned long long start;    /* its start time (/proc/<pid>/stat field 22), against pid reuse */
  uid_t uid;
  int pidfd;                   /* -1 when none */
  char comm[32];               /* the process name, for messages */
  char user[128];              /* the token's subject, if any */
  char addr[64];               /* TCP peer address, if any */
  unsigned ttl_s;              /* 0: no expiry */
  double expires;              /* monotonic s; 0: none */
  long long expires_unix;      /* the same in Unix time, for the state file */
  bool implicit;               /* made by the daemon for a peer without a lease header */
  bool dead;                   /* ended: its layers are gone, it is freed at the next sweep */
  struct zeus__lease *next;
} zeus__lease;

/* How a change treats a setting another live client holds. */
typedef enum zeus__change_mode {
  ZEUS__CHANGE_NORMAL = 0,   /* 409 when held by another live client */
  ZEUS__CHANGE_OVERRIDE = 1, /* take it over; its holder's value comes back when we go */
  ZEUS__CHANGE_PERSIST = 2,  /* a permanent change held by nobody (zeus gpus reset): the record is dropped */
  ZEUS__CHANGE_PERSIST_OVERRIDE = 3, /* the same over a live holder */
} zeus__change_mode;

/* The device side of the lease table: reads the current value (the baseline of a new record) and
 * writes one; reset_locks unlocks both clock locks of a GPU in one device operation
 * (zeus_gpu_reset_all_clocks: one amdsmi call), NULL where the two lock writes must be made one
 * by one. Called with the table's lock held. */
typedef struct zeus__lease_dev {
  int (*read)(void *ctx, unsigned gpu, zeus__setting s, zeus__dval *out);
  int (*write)(void *ctx, unsigned gpu, zeus__setting s, const zeus__dval *v);
  void *ctx;
  int (*reset_locks)(void *ctx, unsigned gpu);
} zeus__lease_dev;

typedef struct zeus__leases zeus__leases;

/* `uuids[gpu]` name the GPUs in the state file (copied). `state_path` may be NULL. */
int zeus__leases_open(zeus__leases **out, unsigned ngpus, const char *const *uuids, const zeus__lease_dev *dev,
                      const char *state_path, unsigned max_leases);
/* Gives everything back (`why` in the log) and frees the table. */
void zeus__leases_close(zeus__leases *L, const char *why);
void zeus__leases_lock(zeus__leases *L);
void zeus__leases_unlock(zeus__leases *L);
/* The table's mutex, for a condition variable that waits with it. */
pthread_mutex_t *zeus__leases_mutex(zeus__leases *L);

/* The lease of a peer process (found or made, implicit). With the lock held. NULL when full
 * (ZEUS_EBUSY set) or when the process cannot be proved alive (ZEUS_EPERM: it exited; its lease
 * would never end). */
zeus__lease *zeus__leases_peer(zeus__leases *L, pid_t pid, uid_t uid);
/* An explicit lease (TTL; for a Unix peer (pid > 0) also bound to its process; pid -1: a loopback
 * TCP client whose uid the kernel told, counted as that uid; 0: another TCP client, counted by its
 * token's subject or its address). ttl_s 0: no expiry. With the lock held. */
zeus__lease *zeus__leases_create(zeus__leases *L, pid_t pid, uid_t uid, const char *user, const char *addr,
                                 unsigned ttl_s);
/* The lease whose secret is `token` (constant-time comparison), or NULL. With the lock held. */
zeus__lease *zeus__leases_find(zeus__leases *L, const char *token);
/* The implicit lease of a TCP client without a lease header (tcp_anonymous_ttl_s), by its owner
 * (zeus__lease_owner: "user 'alice'" under a token, "address 127.0.0.1" without). */
zeus__lease *zeus__leases_find_implicit(zeus__leases *L, const char *owner);
/* Who a lease counts against in the per-client limit: "uid 1000" (a Unix peer: the kernel's
 * word), "user 'alice'" (a token's subject over TCP), "address 127.0.0.1" (TCP without a token),
 * "anonymous". */
void zeus__lease_owner(const zeus__lease *l, char *buf, size_t len);
/* Limits of the table (zeus__leases_open's max_leases is the first; 0 keeps it): at most
 * `per_client` leases per owner (0: no limit), and the last `reserve` slots only for root (a Unix
 * peer of uid 0, which no per-client limit counts). A new lease beyond them: NULL, ZEUS_EBUSY
 * naming the limit. With the lock held or before serving. */
void zeus__leases_set_limits(zeus__leases *L, unsigned max_leases, unsigned per_client, unsigned reserve);
/* The shared anonymous holder. With the lock held. */
zeus__lease *zeus__leases_anonymous(zeus__leases *L);
/* Pushes the expiry of a TTL lease to now + ttl. With the lock held. */
void zeus__leases_renew(zeus__leases *L, zeus__lease *l);

/* Changes one setting on behalf of `who` (with the lock held). ZEUS_EBUSY (409) with a message
 * naming the holder when another live client holds it and mode is NORMAL; device errors as the
 * device layer reports them (the record is then as before). */
int zeus__leases_change(zeus__leases *L, zeus__lease *who, unsigned gpu, zeus__setting s, const zeus__dval *v,
                        zeus__change_mode mode);
/* Unlocks both clock locks of a GPU on behalf of `who` (POST /gpu/reset_locked_clocks; with the
 * lock held): the records of the two change exactly as two zeus__leases_change calls with
 * "unlocked" would, but both conflict checks come before anything changes (a 409 on either domain
 * leaves both as they were), the state file is written once, and the device gets one reset of
 * both (dev.reset_locks; without it, the two writes). Errors as zeus__leases_change's; after a
 * device error the records of both are as before. */
int zeus__leases_reset_locks(zeus__leases *L, zeus__lease *who, unsigned gpu, zeus__change_mode mode);
/* Ends a lease: gives back every setting it holds (logged with `why`). With the lock held. */
void zeus__leases_end(zeus__leases *L, zeus__lease *l, const char *why);
/* Ends leases whose process exited (their pidfd is readable) or whose TTL lapsed. With the lock
 * held. Returns how many ended. */
unsigned zeus__leases_sweep(zeus__leases *L, double now_mono);
/* Fills `fds` with the pidfds to watch (at most `cap`); returns their number. With the lock held. */
unsigned zeus__leases_pidfds(zeus__leases *L, int *fds, unsigned cap);
/* The earliest TTL expiry (monotonic s), or 0 when none. With the lock held. */
double zeus__leases_next_expiry(zeus__leases *L);
/* GET /leases: {"leases": [...]} (new reference). With the lock held. */
json_t *zeus__leases_json(zeus__leases *L);
/* Live leases and settings given back so far (atomic reads; no lock needed). */
unsigned zeus__leases_live(zeus__leases *L);
unsigned long long zeus__leases_restores(zeus__leases *L);
/* "L3: pid 1234 (python3, uid 1000)" or "L4: lease of alice at 127.0.0.1" for messages. */
void zeus__lease_describe(const zeus__lease *l, char *buf, size_t len);
/* Setting names as the state file and /leases write them. */
const char *zeus__setting_name(zeus__setting s);
/* The start time of a process (field 22 of /proc/<pid>/stat), 0 when it is gone. */
unsigned long long zeus__proc_start_time(pid_t pid);

/* ---- the server (server.c, routes.c) ---- */

#include <stdatomic.h>

#include "zeus/device.h"

#define ZEUS__DMAX_PARAMS 16

/* ---- the route table ----
 * One line per route, in the order counters report them:
 *   X(NAME, path, flags, group, get_scopes, write_scopes, handler)
 * flags: the methods it takes (ZEUS__RF_GET, _POST, _DELETE), ZEUS__RF_LEGACY (also reachable as
 * zeusd's older /gpu/<n>/<op>), ZEUS__RF_WITH_KEY (exists only when tokens are on: 404 otherwise).
 * group: the API group that must be enabled (0: always served). get_scopes / write_scopes: with a
 * signing key, the token scopes of which a GET / a POST or DELETE needs one (0: no token needed;
 * ZEUS__DSCOPE_ANY: any valid token). handler: `static int handler(zeus__dreq *)` in routes.c.
 * server.c routes a request by this table alone (lookup, 404 / 405 with Allow / group / 401 / 403,
 * counters), so adding a route (a /metrics page, say) is one line here and its handler in routes.c;
 * an X(OTHER, ...) line stays last. */
#define ZEUS__RF_GET 0x1u
#define ZEUS__RF_POST 0x2u
#define ZEUS__RF_DELETE 0x4u
#define ZEUS__RF_METHODS 0x7u
#define ZEUS__RF_LEGACY 0x8u
#define ZEUS__RF_WITH_KEY 0x10u
#define ZEUS__DSCOPE_ANY (~0u)

#define ZEUS__GC ZEUS_DAEMON_GPU_CONTROL
#define ZEUS__GR ZEUS_DAEMON_GPU_READ
#define ZEUS__CR ZEUS_DAEMON_CPU_READ
#define ZEUS__GPU_WRITE (ZEUS__RF_POST | ZEUS__RF_LEGACY), ZEUS__GC, 0, ZEUS__GC, h_gpu_write
#define ZEUS__GPU_READ ZEUS__RF_GET, ZEUS__GR, ZEUS__GR, 0
#define ZEUS__CPU_READ ZEUS__RF_GET, ZEUS__CR, ZEUS__CR, 0

/* The shorthands above stand for several columns: an X that takes the columns one by one is
 * written as X(name, ...) calling X_(name, __VA_ARGS__), so that they are expanded first (see
 * routes.c). */
#define ZEUS__DAEMON_ROUTES(X)                                                                      \
  X(DISCOVER, "/discover", ZEUS__RF_GET, 0, 0, 0, h_discover)                                       \
  X(TIME, "/time", ZEUS__RF_GET, 0, 0, 0, h_time)                                                   \
  X(WHOAMI, "/auth/whoami", ZEUS__RF_GET | ZEUS__RF_WITH_KEY, 0, ZEUS__DSCOPE_ANY, 0, h_whoami)       \
  X(GPU_SET_POWER_LIMIT, "/gpu/set_power_limit", ZEUS__GPU_WRITE)                                   \
  X(GPU_SET_PERSISTENCE, "/gpu/set_persistence_mode", ZEUS__GPU_WRITE)                              \
  X(GPU_SET_GPU_LOCK, "/gpu/set_gpu_locked_clocks", ZEUS__GPU_WRITE)                                \
  X(GPU_RESET_GPU_LOCK, "/gpu/reset_gpu_locked_clocks", ZEUS__GPU_WRITE)                            \
  X(GPU_SET_MEM_LOCK, "/gpu/set_mem_locked_clocks", ZEUS__GPU_WRITE)                                \
  X(GPU_RESET_MEM_LOCK, "/gpu/reset_mem_locked_clocks", ZEUS__GPU_WRITE)                            \
  X(GPU_RESET_LOCKS, "/gpu/reset_locked_clocks", ZEUS__GPU_WRITE)                                   \
  X(GPU_ENERGY, "/gpu/get_cumulative_energy", ZEUS__GPU_READ, h_gpu_read)                           \
  X(GPU_POWER, "/gpu/get_power", ZEUS__GPU_READ, h_gpu_read)                                        \
  X(GPU_STREAM, "/gpu/stream_power", ZEUS__GPU_READ, h_stream)                                      \
  X(GPU_GET_PL, "/gpu/get_power_limit", ZEUS__GPU_READ, h_gpu_read)                                 \
  X(GPU_GET_PLC, "/gpu/get_power_limit_constraints", ZEUS__GPU_READ, h_gpu_read)                    \
  X(GPU_GET_PM, "/gpu/get_persistence_mode", ZEUS__GPU_READ, h_gpu_read)                            \
  X(GPU_GET_LOCKS, "/gpu/get_locked_clocks", ZEUS__GPU_READ, h_gpu_read)                             \
  X(CPU_ENERGY, "/cpu/get_cumulative_energy", ZEUS__CPU_READ, h_cpu)                                \
  X(CPU_POWER, "/cpu/get_power", ZEUS__CPU_READ, h_cpu)                                             \
  X(CPU_STREAM, "/cpu/stream_power", ZEUS__CPU_READ, h_stream)                                      \
  X(LEASES, "/leases", ZEUS__RF_GET | ZEUS__RF_POST | ZEUS__RF_DELETE, ZEUS__GC, ZEUS__GC | ZEUS__GR, \
    ZEUS__GC, h_leases)                                                                             \
  X(LEASES_RENEW, "/leases/renew", ZEUS__RF_POST, ZEUS__GC, 0, ZEUS__GC, h_leases)                  \
  X(LEASES_RELEASE, "/leases/release", ZEUS__RF_POST, ZEUS__GC, 0, ZEUS__GC, h_leases)              \
  X(METRICS, "/metrics", ZEUS__RF_GET, 0, ZEUS__DSCOPE_ANY, 0, h_metrics)                            \
  X(OTHER, "(unknown)", ZEUS__RF_METHODS, 0, 0, 0, h_unknown)

typedef enum zeus__droute {
#define ZEUS__DROUTE_ENUM(name, ...) ZEUS__R_##name,
  ZEUS__DAEMON_ROUTES(ZEUS__DROUTE_ENUM)
#undef ZEUS__DROUTE_ENUM
  ZEUS__R_COUNT
} zeus__droute;

struct zeus__dreq;
typedef struct zeus__droute_def {
  const char *path;
  unsigned flags, group, get_scopes, write_scopes;
  int (*handler)(struct zeus__dreq *q); /* returns MHD_YES/MHD_NO */
} zeus__droute_def;
/* The table above, indexed by zeus__droute (defined in routes.c, next to the handlers). */
extern const zeus__droute_def zeus__droute_table[ZEUS__R_COUNT];

/* Status codes the counters keep apart (any other lands in the last slot). */
#define ZEUS__DSTATUS_CODES {200, 400, 401, 403, 404, 405, 409, 410, 413, 500, 503, 0}
#define ZEUS__DSTATUS_SLOTS 12

typedef struct zeus__dgpu {
  char name[ZEUS_NAME_LEN], uuid[ZEUS_NAME_LEN], pci[32];
  bool energy_ok;
} zeus__dgpu;

typedef struct zeus__dcpu {
  unsigned pkg; /* the N of intel-rapl:N: the id clients use */
  bool dram;
  uint64_t range_uj, dram_range_uj; /* where the counters wrap around */
} zeus__dcpu;

/* A queued non-blocking write (block=false). */
typedef struct zeus__dwrite {
  unsigned gpu;
  zeus__setting s;
  zeus__dval v;
  bool both_locks; /* a reset of both clock locks (s and v unused) */
} zeus__dwrite;

#define ZEUS__DQUEUE 256

typedef struct zeus__dlistener {
  struct zeus_daemon *d;
  bool uds;
  zeus__http_mhd_listener on; /* the guard and this listener's number in it */
} zeus__dlistener;

struct zeus_daemon {
  zeus_daemon_opts o;
  char *socket_path, *tcp_address, *state_path;
  zeus_devices *dev;
  struct zeus__rapl *rapl; /* the CPU packages (cpu-read), scanned once, files kept open */
  bool sim;
  unsigned ngpus, ncpus;
  zeus__dgpu *gpus;
  zeus__dcpu cpus[ZEUS_MAX_CPUS];
  unsigned char *key;
  size_t keylen;
  zeus__leases *L;
  struct MHD_Daemon *uds_d, *tcp_d;
  zeus__dlistener li[2]; /* the Unix socket's and TCP's */
  int uds_fd, tcp_port, wake_fd;
  bool uds_bound; /* the socket file is ours to remove */
  pthread_t reaper, worker;
  bool reaper_started, worker_started;
  atomic_bool stopping;
  /* Non-blocking writes: a ring drained by the worker, or inline before any blocking write, always
   * under the lease table's lock, so writes to the devices keep their order. */
  zeus__dwrite queue[ZEUS__DQUEUE];
  unsigned qhead, qlen;
  pthread_cond_t qcv;
  bool async_now; /* set around a block=false change, under the lease lock */
  atomic_ullong counts[ZEUS__R_COUNT][ZEUS__DSTATUS_SLOTS];
  zeus__http_guard *guard; /* connections: per-client limits, the root reserve, the request deadline */
  struct zeus__overrides *overrides; /* --gpu-command-overrides (overrides.c); NULL: none */
};

/* One request. */
typedef struct zeus__dreq {
  zeus_daemon *d;
  struct MHD_Connection *c;
  bool uds;
  zeus__droute route;
  const char *path, *method;
  zeus__buf body;
  bool too_big;
  unsigned np;
  struct { char *name, *value; bool used; } p[ZEUS__DMAX_PARAMS];
  const char *param_error; /* set while collecting parameters */
  pid_t pid; /* Unix peer */
  uid_t uid;     /* Unix peer; a loopback TCP peer's when tcp_uid */
  bool tcp_uid;  /* a loopback TCP peer whose uid the kernel told: it counts as that uid */
  char addr[64]; /* TCP peer */
  bool authed;
  zeus__jwt_claims claims;
  int legacy_gpu; /* /gpu/<n>/<op>: n; -1 otherwise */
  int status;     /* of the reply queued, for the counters */
  zeus__http_conn *conn; /* its connection's record in the guard (NULL if none) */
} zeus__dreq;

/* server.c helpers for routes.c */
int zeus__dreply(zeus__dreq *q, int status, json_t *body /* stolen; NULL: empty */);
int zeus__dreply_error(zeus__dreq *q, int status, const char *fmt, ...) ZEUS__PRINTF(3, 4);
/* A reply of `len` bytes of `text` (copied) with the given Content-Type, counted as the others. */
int zeus__dreply_text(zeus__dreq *q, int status, const char *content_type, const char *text, size_t len);
int zeus__dreply_stream(zeus__dreq *q, void *ctx, long (*reader)(void *, uint64_t, char *, size_t),
                        void (*free_ctx)(void *));
const char *zeus__dparam(zeus__dreq *q, const char *name);
/* Before a power stream's reply: whether this client may hold one more stream (the per-client
 * limit; root is not limited). When not, the 503 is queued and its MHD result is in *mhd. */
bool zeus__dstream_admit(zeus__dreq *q, int *mhd);
/* Connections open now, refused by a per-client limit or the root reserve, and closed by the
 * request deadline, since the start (for /metrics). */
void zeus__daemon_conn_stats(zeus_daemon *d, unsigned *open, unsigned long long *refused,
                             unsigned long long *timed_out);
/* The device side of the lease table, and the wake-up of the reaper. */
extern const zeus__lease_dev zeus__daemon_lease_dev;
void zeus__daemon_wake(zeus_daemon *d);
/* Runs the queued non-blocking writes now, so that a read sees them. */
void zeus__daemon_sync(zeus_daemon *d);
/* HTTP status of a device error code. */
int zeus__dstatus_of(int zeus_code);

/* ---- GPU command overrides (overrides.c; zeusd's --gpu-command-overrides) ---- */

/* The operations a file may override, in zeusd's order (its table names). */
typedef enum zeus__gpu_op {
  ZEUS__OP_SET_PERSISTENCE = 0,
  ZEUS__OP_SET_POWER_LIMIT,
  ZEUS__OP_SET_GPU_LOCK,
  ZEUS__OP_RESET_GPU_LOCK,
  ZEUS__OP_SET_MEM_LOCK,
  ZEUS__OP_RESET_MEM_LOCK,
  ZEUS__OP_RESET_LOCKS, /* reset_locked_clocks: both locks */
  ZEUS__OP_COUNT
} zeus__gpu_op;

typedef struct zeus__overrides zeus__overrides;

/* What the placeholders stand for in one run. */
typedef struct zeus__override_values {
  unsigned gpu;
  bool enabled;
  unsigned power_limit_mw, min_clock_mhz, max_clock_mhz;
} zeus__override_values;

/* Reads and checks a file: a regular file (not a symlink) owned by root or by us, not writable
 * by others (group-writable: a warning), at most 64 KiB; every table a known operation, every
 * command splittable with only its operation's placeholders, error_pattern a valid POSIX ERE,
 * timeout_s > 0. ZEUS_EPARSE / ZEUS_EPERM / ZEUS_ENOENT naming the file, line and operation. */
int zeus__overrides_load(const char *path, zeus__overrides **out /* out */);
/* The same from text (`what` names it in messages); exposed for tests. */
int zeus__overrides_parse(const char *text, size_t len, const char *what, zeus__overrides **out /* out */);
void zeus__overrides_free(zeus__overrides *o);
bool zeus__overrides_has(const zeus__overrides *o, zeus__gpu_op op);
/* How many operations are overridden; their names, comma-separated, in zeusd's order. */
unsigned zeus__overrides_count(const zeus__overrides *o);
void zeus__overrides_names(const zeus__overrides *o, char *buf, size_t len);
const char *zeus__gpu_op_name(zeus__gpu_op op);
/* Runs the operation's commands in order (no shell; placeholders substituted; each killed with
 * its process group after timeout_s), stopping at the first failure (earlier commands are not
 * rolled back). ZEUS_ENOENT (no message) when `op` is not overridden; ZEUS_EDEVICE or
 * ZEUS_ETIMEDOUT with the command line, what happened and its stdout and stderr (2 KiB of each)
 * when a command fails, exits non-zero, times out or prints what error_pattern matches. */
int zeus__overrides_run(const zeus__overrides *o, zeus__gpu_op op, const zeus__override_values *v);

#endif
