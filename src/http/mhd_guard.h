/* The connection guard (http/guard.h) behind libmicrohttpd: the notices that every server passes
 * on to it in the same way. Header-only, so that src/http builds and links without libmicrohttpd
 * (only the servers, which link it, include this).
 *
 *   zeus__http_mhd_listener on = {guard, 0};
 *   MHD_start_daemon(..., MHD_OPTION_NOTIFY_CONNECTION, zeus__http_mhd_notify, &on, ...);
 *   handler, once a whole request is in:  zeus__http_mhd_busy(guard, connection, true);
 *   MHD_OPTION_NOTIFY_COMPLETED callback: zeus__http_mhd_busy(guard, connection, false);
 *
 * `on` must outlive the MHD daemon. */
#ifndef ZEUS_HTTP_MHD_GUARD_H
#define ZEUS_HTTP_MHD_GUARD_H

#include <stdbool.h>

#include <microhttpd.h>

#include "http/guard.h"

/* The closure of MHD_OPTION_NOTIFY_CONNECTION: the guard, and the listener number this MHD daemon
 * is to it (zeus__http_guard_admit_on; 0 for a server with one listener). */
typedef struct zeus__http_mhd_listener {
  zeus__http_guard *guard;
  unsigned listener;
} zeus__http_mhd_listener;

/* Admits a connection that starts (MHD's socket context becomes its record; a refused one has had
 * its 503 and is shut down) and releases one that closes. */
static inline void zeus__http_mhd_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                                         enum MHD_ConnectionNotificationCode code) {
  const zeus__http_mhd_listener *on = cls;
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    zeus__http_guard_release(on->guard, *socket_context);
    *socket_context = NULL;
    return;
  }
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  *socket_context = ci ? zeus__http_guard_admit_on(on->guard, ci->connect_fd, on->listener) : NULL;
}

/* The guard's record of a connection (MHD's socket context), or NULL. */
static inline zeus__http_conn *zeus__http_mhd_conn(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *sc = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return sc ? (zeus__http_conn *)sc->socket_context : NULL;
}

/* A whole request arrived on c (busy) or its reply is done (not busy). */
static inline void zeus__http_mhd_busy(zeus__http_guard *g, struct MHD_Connection *c, bool busy) {
  zeus__http_guard_busy(g, zeus__http_mhd_conn(c), busy);
}

#endif
