/* zeus/log.h: levelled logging through a callback. The library never prints. */
#ifndef ZEUS_LOG_H
#define ZEUS_LOG_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

typedef enum zeus_log_level {
  ZEUS_LOG_ERROR = 0,
  ZEUS_LOG_WARN = 1,
  ZEUS_LOG_INFO = 2,
  ZEUS_LOG_DEBUG = 3,
  ZEUS_LOG_OFF = -1
} zeus_log_level;

/* Receives one formatted message (no trailing newline). `module` names the part of the
 * library ("device", "monitor", ...). May be called from any thread, including the
 * monitor's polling thread; the callback must be thread-safe. */
typedef void (*zeus_log_fn)(int level, const char *module, const char *msg, void *userdata);

/* Installs the log sink (NULL: discard everything, the default). Thread-safe. */
ZEUS_EXTERN void zeus_set_log_callback(zeus_log_fn fn, void *userdata);

/* Messages above `level` are dropped before they are formatted. Default: ZEUS_LOG_WARN.
 * ZEUS_LOG_OFF drops everything. */
ZEUS_EXTERN void zeus_set_log_level(int level);
ZEUS_EXTERN int zeus_get_log_level(void);

/* Parses "error", "warn"/"warning", "info", "debug", "off" (any case) or 0..3.
 * Returns ZEUS_EINVAL with a message naming the accepted values otherwise. */
ZEUS_EXTERN int zeus_log_level_parse(const char *text, int *level /* out */);

/* "ERROR", "WARN", "INFO", "DEBUG". */
ZEUS_EXTERN const char *zeus_log_level_name(int level);

/* A ready-made sink that writes "zeus[module] LEVEL: message" lines to stderr
 * (userdata: ignored). The CLI and the server install it. */
ZEUS_EXTERN void zeus_log_stderr_sink(int level, const char *module, const char *msg,
                                      void *userdata);

/* Installs zeus_log_stderr_sink with the level from the environment variable `env_var`
 * (NULL: "ZEUS_LOG_LEVEL"; unset: warn). A bad value is ZEUS_EINVAL naming the variable. */
ZEUS_EXTERN int zeus_log_init_stderr(const char *env_var);

ZEUS_END_DECLS
#endif
