/* src/device/zeusd_client.h: libzeus as a client of a zeus daemon or the original zeusd (internal).
 *
 * The device layer sends privileged calls (and RAPL reads the process cannot make itself) to the
 * daemon named by ZEUSD_SOCK_PATH (a Unix socket) or ZEUSD_HOST_PORT (TCP), with ZEUSD_TOKEN as
 * bearer token, exactly as the original Python package finds zeusd; or to the daemon and with the
 * token that zeus_devices_opts names (a client object of zeusc carrying its own token).
 *
 * Transport: a small HTTP/1.1 client over one persistent socket per handle (keep-alive, no
 * libcurl: the device layer is always built, and libzeus without its optional parts must not
 * link libcurl; one request is a write() and a read() on a warm socket, tens of microseconds).
 * A connection made before fork() is never used by the child: it reconnects, and it does not
 * inherit the parent's lease.
 *
 * Leases (our daemon; the original has none): the first change makes one (POST /leases). On the
 * Unix socket it lives as long as this process; over TCP it has a TTL (ZEUS_DAEMON_LEASE_TTL_S,
 * default 30 s) that a thread renews every third of it. Releasing it (zeus__zeusd_release) has the
 * daemon put back what this handle changed. Against the original zeusd, changes are made without.
 */
#ifndef ZEUS_DEVICE_ZEUSD_CLIENT_H
#define ZEUS_DEVICE_ZEUSD_CLIENT_H

#include <stdbool.h>

#include <jansson.h>

typedef struct zeus__zeusd zeus__zeusd;

/* Whether a daemon is configured: `spec` NULL reads ZEUSD_SOCK_PATH / ZEUSD_HOST_PORT, "" means
 * none, "unix:PATH" / "tcp:HOST:PORT" / "/path" / "HOST:PORT" name one. Connects to nothing. */
bool zeus__zeusd_configured(const char *spec);

/* Connects (lazily: the first request connects). *out is NULL, with ZEUS_OK, when no daemon is
 * configured. `token`: the bearer token, NULL: ZEUSD_TOKEN (unset or empty: none), "": none; it is
 * copied, and never logged nor put into an error message. `persist`: changes are permanent (held by
 * nobody, as zeus gpus reset wants); `override`: changes take over settings other clients hold.
 * ZEUS_EINVAL for a malformed spec, or a token with a control character (a line break). */
int zeus__zeusd_open(zeus__zeusd **out, const char *spec, const char *token, bool persist, bool override);
void zeus__zeusd_close(zeus__zeusd *z);
/* "/run/zeusd/zeusd.sock" or "host:port", for messages. */
const char *zeus__zeusd_endpoint(const zeus__zeusd *z);

/* GET path?query; *reply (may be NULL) receives the JSON body of a 200 (new reference). Errors
 * carry the daemon's own message: 400 ZEUS_EINVAL, 401/403 ZEUS_EPERM, 404 ZEUS_ENOTSUP (route or
 * API group missing), 409 ZEUS_EBUSY, other statuses ZEUS_EHTTP, no daemon ZEUS_ENET, no answer in
 * time ZEUS_ETIMEDOUT. `gpu` >= 0 picks that GPU's entry of a per-device error map. */
int zeus__zeusd_get(zeus__zeusd *z, const char *path_query, int gpu, json_t **reply);
/* POST /gpu/<op>?gpu_ids=<gpu>&<extra>&block=true under this handle's lease (made on first use). */
int zeus__zeusd_write(zeus__zeusd *z, const char *op, unsigned gpu, const char *extra);
/* The daemon's /discover answer (cached; borrowed), or NULL with the error set. */
json_t *zeus__zeusd_discover(zeus__zeusd *z);
/* Gives back everything this handle changed (releases its lease). ZEUS_OK when there is none. */
int zeus__zeusd_release(zeus__zeusd *z);

/* A process-wide client for reads that need no lease (RAPL through the daemon), opened from the
 * environment on first use; NULL when no daemon is configured. Borrowed; closed at exit. */
zeus__zeusd *zeus__zeusd_shared(void);

#endif
