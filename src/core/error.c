/* Status codes and the per-thread error message. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"

static _Thread_local char tls_msg[ZEUS__ERRMSG_MAX];
static _Thread_local int tls_code;

const char *zeus_strerror(int code) {
  switch (code) {
#define ZEUS__ERRNO_DESC(name, value, desc) \
  case (value):                             \
    return desc;
    ZEUS_ERRNO_MAP(ZEUS__ERRNO_DESC)
#undef ZEUS__ERRNO_DESC
  }
  return "unknown error";
}

const char *zeus_errname(int code) {
  switch (code) {
#define ZEUS__ERRNO_NAME(name, value, desc) \
  case (value):                             \
    return "ZEUS_" #name;
    ZEUS_ERRNO_MAP(ZEUS__ERRNO_NAME)
#undef ZEUS__ERRNO_NAME
  }
  return "ZEUS_E?";
}

const char *zeus_errmsg(void) { return tls_msg; }

int zeus_errcode(void) { return tls_code; }

static int set_error(int code, const char *fmt, va_list ap) {
  vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
  tls_code = code;
  return code;
}

int zeus__error(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error(code, fmt, ap);
  va_end(ap);
  return code;
}

int zeus_set_errmsg(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set_error(code, fmt, ap);
  va_end(ap);
  return code;
}

int zeus__error_ctx(int code, const char *fmt, ...) {
  char prefix[ZEUS__ERRMSG_MAX];
  char old[ZEUS__ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, tls_msg, sizeof old);
  if (old[0])
    snprintf(tls_msg, sizeof tls_msg, "%s: %s", prefix, old);
  else
    snprintf(tls_msg, sizeof tls_msg, "%s: %s", prefix, zeus_strerror(code));
  tls_code = code;
  return code;
}

int zeus__oom(const char *what) { return zeus__error(ZEUS_ENOMEM, "out of memory while %s", what); }

void zeus__error_save(zeus__saved_error *s) {
  s->code = tls_code;
  memcpy(s->msg, tls_msg, sizeof s->msg);
}

int zeus__error_restore(const zeus__saved_error *s) {
  memcpy(tls_msg, s->msg, sizeof tls_msg);
  tls_code = s->code;
  return s->code;
}

int zeus__error_recode(int code) {
  tls_code = code;
  return code;
}
