/* zeus/daemon.h: `zeus daemon`, the privileged daemon that speaks the original zeusd HTTP API.
 *
 * Power limits, locked clocks and persistence mode need root or CAP_SYS_ADMIN, and so does CPU
 * RAPL on current kernels. The daemon holds that privilege; unprivileged processes (the
 * power-limit optimizer, the Perseus frequency controller, `zeus gpus reset`, zeusc, and the
 * original Python package) ask it over HTTP on a Unix socket (and, optionally, TCP). Routes,
 * parameters, JSON shapes and status codes are zeusd's (docs/daemon.md lists them).
 *
 * What zeusd lacks: leases. Every setting a client changes is recorded with the value it replaced
 * and the client that asked. On the Unix socket the client is the peer process (SO_PEERCRED, then
 * a pidfd that tells when it exits, SIGKILL included); over TCP it is a lease with a time to live
 * that the client renews. When the client is gone or its lease lapses, the replaced values are
 * put back within a second and the daemon logs it. A second client asking to change a setting a
 * live client holds gets 409 naming the holder, unless it passes override=true. Closing the daemon
 * (SIGTERM in `zeus daemon serve`) puts back everything it changed. With a state file the daemon
 * survives its own crash: replaced values are written (atomically) before each change and replayed
 * at the next start (docs/daemon.md, "When the daemon itself dies").
 *
 * Thread safety: a zeus_daemon serves from its own threads; zeus_daemon_close() may be called from
 * any one thread once.
 */
#ifndef ZEUS_DAEMON_H
#define ZEUS_DAEMON_H

#include "zeus/common.h"
#include "zeus/device.h"

ZEUS_BEGIN_DECLS

/* API groups (zeusd's names), enabled one by one. */
#define ZEUS_DAEMON_GPU_CONTROL \
  0x1u /* POST /gpu/set_*, /gpu/reset_*: needs root or CAP_SYS_ADMIN */
#define ZEUS_DAEMON_GPU_READ 0x2u    /* GET /gpu/... */
#define ZEUS_DAEMON_CPU_READ 0x4u    /* GET /cpu/...: needs root or CAP_DAC_READ_SEARCH for RAPL */
#define ZEUS_DAEMON_CPU_CONTROL \
  0x8u /* a scope tokens may carry (zeusd's newer group); no routes here */
#define ZEUS_DAEMON_ALL_GROUPS \
  (ZEUS_DAEMON_GPU_CONTROL | ZEUS_DAEMON_GPU_READ | ZEUS_DAEMON_CPU_READ)

typedef struct zeus_daemon zeus_daemon;

typedef struct zeus_daemon_opts {
  /* Unix socket to create (its folder is created 0755 when missing); NULL: no Unix socket. A stale
   * socket (nothing listening) is replaced; a live one or any other file is an error. */
  const char *socket_path;
  /* Mode of the socket file (zeusd's --socket-permissions); 0: 0666. */
  unsigned socket_mode;
  /* Owner and group of the socket file; -1 (set by _init): unchanged. */
  long socket_uid, socket_gid;
  /* "HOST:PORT" ("127.0.0.1:4938", "[::1]:0"); NULL: no TCP. Port 0 picks a free port
   * (zeus_daemon_tcp_port()). A non-loopback address needs a signing key unless
   * allow_unauthenticated_tcp. */
  const char *tcp_address;
  bool allow_unauthenticated_tcp;
  /* ZEUS_DAEMON_* groups to serve; 0: all three. */
  unsigned groups;
  /* HS256 signing key file (its bytes as they are, as zeusd reads it); NULL: no authentication. */
  const char *signing_key_path;
  /* State file of replaced values (docs/daemon.md); NULL: none (a crash then loses them). */
  const char *state_path;
  /* Concurrent connections (0: 256), idle connection timeout in s (0: 30), largest request body
   * in bytes (0: 4096). */
  unsigned max_connections, connection_timeout_s, max_body_bytes;
  /* How often the SSE streams read each device (an event goes out when a reading changed, as in
   * zeusd) and the period of GET /cpu/get_power (0: 20 and 10 Hz, as zeusd). */
  double gpu_poll_hz, cpu_poll_hz;
  /* Largest TTL a client may ask for its lease, in s (0: 3600). */
  unsigned max_lease_ttl_s;
  /* Time to live of a TCP change made without a lease header (a client of the original zeusd):
   * 0 (the default): held by nobody and kept until the daemon stops (zeusd's behaviour); N: the
   * change gets a lease of N seconds that every further request from that address renews. */
  unsigned tcp_anonymous_ttl_s;
  /* Limits on what one client may hold (docs/daemon.md, "Limits"); 0 picks the default in ( ).
   * A client is a uid on the Unix socket and an address over TCP (for leases under a token: the
   * token's subject). Root (uid 0 on the Unix socket) is counted by none of the per-client limits
   * and may use the reserved slots, so it can always act.
   *   max_leases (1024), max_leases_per_client (64), reserved_leases (64): the lease table;
   *   max_connections_per_client (32), reserved_connections (16): connections at once;
   *   max_streams_per_client (8): power streams (/gpu/stream_power, /cpu/stream_power) at once;
   *   request_timeout_s (10): a request (headers and body) must have arrived within this many
   *   seconds of its connection opening or of its previous reply; slower connections are closed. */
  unsigned max_leases, max_leases_per_client, reserved_leases;
  unsigned max_connections_per_client, reserved_connections, max_streams_per_client;
  unsigned request_timeout_s;
  /* Which GPUs: NULL: the backend from ZEUS_GPU_BACKEND (nvml when it loads), every GPU of it
   * (CUDA_VISIBLE_DEVICES is ignored: the daemon's indices are the backend's own). The daemon
   * never uses another daemon, whatever `daemon` says. */
  const zeus_devices_opts *devices;
  /* Skip the privilege check of the root-only groups (tests; a simulated GPU needs none anyway). */
  bool skip_privilege_check;
  /* zeusd's --gpu-command-overrides: a TOML file mapping GPU writes (set_power_limit,
   * set_gpu_locked_clocks, ...) to external commands run instead of NVML, leases' give-backs
   * included (docs/daemon.md, "Command overrides"). Checked at open: a regular file owned by root or
   * by us, not world-writable, every operation, placeholder and pattern known. With at least one
   * operation overridden, gpu-control no longer needs root. NULL: none. Ignored (with a warning)
   * when gpu-control is not served. */
  const char *gpu_command_overrides;
} zeus_daemon_opts;

/* Zero-initialises `o` and sets the fields whose default is not zero (socket_uid, socket_gid). */
ZEUS_EXTERN void zeus_daemon_opts_init(zeus_daemon_opts *o);

/* Opens the GPUs and CPU packages, replays the state file (putting back what dead clients had
 * changed, re-adopting the leases of clients still alive), binds the sockets and starts serving.
 * Errors: ZEUS_EINVAL (a bad option, named), ZEUS_EPERM (a root-only group without the privilege
 * it needs, saying which; a socket path we may not create), ZEUS_EEXIST (a daemon already listens
 * on the socket, or the path is not a socket), ZEUS_EIO, ZEUS_ENET (TCP bind), device errors. */
ZEUS_EXTERN int zeus_daemon_open(zeus_daemon **out /* out */, const zeus_daemon_opts *o);

/* The bound TCP port, or 0 without TCP. */
ZEUS_EXTERN int zeus_daemon_tcp_port(const zeus_daemon *d);

/* Stops serving, puts back every setting the daemon changed (logging each), removes the socket
 * file and the state file, and frees everything. NULL does nothing. */
ZEUS_EXTERN void zeus_daemon_close(zeus_daemon *d);

/* Request counters by route and status class, for a /metrics exporter (issue 16): calls `fn` once
 * per (route, status) pair seen so far, in route-table order, under no lock of the serving
 * threads (values are read atomically). Also reports live leases and restores done. */
typedef void (*zeus_daemon_counter_fn)(const char *route, int status, unsigned long long count,
                                       void *userdata);
ZEUS_EXTERN void zeus_daemon_counters(zeus_daemon *d, zeus_daemon_counter_fn fn, void *userdata);
/* Live leases and settings given back so far. */
ZEUS_EXTERN void zeus_daemon_lease_stats(zeus_daemon *d, unsigned *live_leases /* out */,
                                         unsigned long long *restores /* out */);

/* Issues an HS256 token as `zeus daemon token issue` (zeusd's claims: sub, scopes, exp) signed
 * with the key file's bytes. `scopes`: ZEUS_DAEMON_* bits; `expires_unix`: 0 for no expiry.
 * *token is freed with zeus_free(). Errors: ZEUS_EINVAL, ZEUS_ENOENT / ZEUS_EIO (key file). */
ZEUS_EXTERN int zeus_daemon_token_issue(const char *signing_key_path, const char *user,
                                        unsigned scopes, long long expires_unix,
                                        char **token /* out */);

/* Parses "gpu-control,gpu-read" into ZEUS_DAEMON_* bits (ZEUS_EINVAL naming the bad entry). */
ZEUS_EXTERN int zeus_daemon_parse_groups(const char *list, unsigned *groups /* out */);

ZEUS_END_DECLS
#endif
