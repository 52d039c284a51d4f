/* Levelled logging through one process-wide callback. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "core/core.h"

int zeus__log_level_cur = ZEUS_LOG_WARN;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static zeus_log_fn log_fn;
static void *log_ud;

void zeus_set_log_callback(zeus_log_fn fn, void *userdata) {
  pthread_mutex_lock(&log_lock);
  log_fn = fn;
  log_ud = userdata;
  pthread_mutex_unlock(&log_lock);
}

void zeus_set_log_level(int level) {
  if (level < ZEUS_LOG_OFF) level = ZEUS_LOG_OFF;
  if (level > ZEUS_LOG_DEBUG) level = ZEUS_LOG_DEBUG;
  __atomic_store_n(&zeus__log_level_cur, level, __ATOMIC_RELAXED);
}

int zeus_get_log_level(void) { return __atomic_load_n(&zeus__log_level_cur, __ATOMIC_RELAXED); }

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

const char *zeus_log_level_name(int level) {
  if (level < 0 || level > ZEUS_LOG_DEBUG) return "OFF";
  return level_names[level];
}

int zeus_log_level_parse(const char *text, int *level) {
  static const struct { const char *name; int level; } names[] = {
      {"error", ZEUS_LOG_ERROR}, {"warn", ZEUS_LOG_WARN}, {"warning", ZEUS_LOG_WARN},
      {"info", ZEUS_LOG_INFO},   {"debug", ZEUS_LOG_DEBUG}, {"off", ZEUS_LOG_OFF},
      {"0", ZEUS_LOG_ERROR},     {"1", ZEUS_LOG_WARN},    {"2", ZEUS_LOG_INFO},
      {"3", ZEUS_LOG_DEBUG}};
  if (!text || !level) return zeus__error(ZEUS_EINVAL, "log level: no value given");
  for (size_t i = 0; i < ZEUS__ARRAY_LEN(names); i++) {
    if (strcasecmp(text, names[i].name) == 0) {
      *level = names[i].level;
      return ZEUS_OK;
    }
  }
  return zeus__error(ZEUS_EINVAL,
                     "log level '%s' is not one of error, warn, info, debug, off (or 0-3)", text);
}

void zeus__log_emit(int level, const char *module, const char *fmt, ...) {
  char msg[2048];
  pthread_mutex_lock(&log_lock);
  zeus_log_fn fn = log_fn;
  void *ud = log_ud;
  pthread_mutex_unlock(&log_lock);
  if (!fn) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fn(level, module, msg, ud);
}

void zeus_log_stderr_sink(int level, const char *module, const char *msg, void *userdata) {
  (void)userdata;
  fprintf(stderr, "zeus[%s] %s: %s\n", module ? module : "-", zeus_log_level_name(level), msg);
}

int zeus_log_init_stderr(const char *env_var) {
  const char *name = env_var ? env_var : "ZEUS_LOG_LEVEL";
  const char *v = zeus__env_str(name);
  int level = ZEUS_LOG_WARN;
  if (v && zeus_log_level_parse(v, &level) != ZEUS_OK)
    return zeus__error(ZEUS_EINVAL, "%s='%s': expected one of error, warn, info, debug, off", name,
                       v);
  zeus_set_log_level(level);
  zeus_set_log_callback(zeus_log_stderr_sink, NULL);
  return ZEUS_OK;
}
