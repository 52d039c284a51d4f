/* zeus/error.h: status codes and per-thread error messages. */
#ifndef ZEUS_ERROR_H
#define ZEUS_ERROR_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

/* X(name, value, description). The one list the enum and zeus_strerror() come from. */
#define ZEUS_ERRNO_MAP(X)                                                   \
  X(OK, 0, "success")                                                       \
  X(EINVAL, -1, "invalid argument")                                         \
  X(ENOMEM, -2, "out of memory")                                            \
  X(ENOTSUP, -3, "not supported")                                           \
  X(EPERM, -4, "permission denied")                                         \
  X(ENOENT, -5, "not found")                                                \
  X(EEXIST, -6, "already exists")                                           \
  X(ERANGE, -7, "value out of range")                                       \
  X(EPARSE, -8, "malformed input")                                          \
  X(EIO, -9, "input/output error")                                          \
  X(ESTATE, -10, "operation not valid in the current state")                \
  X(EDEVICE, -11, "device error")                                           \
  X(EGPULOST, -12, "GPU is lost or needs a reset")                          \
  X(ENOLIB, -13, "vendor library missing or unusable")                      \
  X(ETIMEDOUT, -14, "timed out")                                            \
  X(ENET, -15, "network error")                                             \
  X(EHTTP, -16, "the server answered with an error")                        \
  X(EINTERNAL, -17, "internal error")                                      \
  X(EBUSY, -18, "held by another client")

typedef enum zeus_status {
#define ZEUS__ERRNO_ENUM(name, value, desc) ZEUS_##name = (value),
  ZEUS_ERRNO_MAP(ZEUS__ERRNO_ENUM)
#undef ZEUS__ERRNO_ENUM
} zeus_status;

/* A short, constant description of a status code ("not supported"). Never NULL; an unknown
 * code gives "unknown error". Thread-safe. */
ZEUS_EXTERN const char *zeus_strerror(int code);

/* The constant name of a status code ("ZEUS_ENOTSUP"), or "ZEUS_E?" for an unknown code. */
ZEUS_EXTERN const char *zeus_errname(int code);

/* The detailed message of the last failure on this thread, in words a user can act on
 * ("NVML NO_PERMISSION on GPU 2 while setting the power limit: needs root or CAP_SYS_ADMIN").
 * Valid until the next zeus call on this thread fails. Empty string when nothing failed yet.
 * Successful calls do not clear it. */
ZEUS_EXTERN const char *zeus_errmsg(void);

/* The status code of the last failure on this thread (ZEUS_OK when none). */
ZEUS_EXTERN int zeus_errcode(void);

/* Sets this thread's failure (code and message, printf-style) and returns code. For callbacks
 * the library calls (collectives, selectors, schedulers) so that their failure reads like the
 * library's own. */
ZEUS_EXTERN int zeus_set_errmsg(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

ZEUS_END_DECLS
#endif
