/* uri_check.c: the request target's own check (issue 36): a path or query that, once its percent
 * escapes are decoded, is not UTF-8 or holds a NUL byte is refused before any route sees it.
 * libmicrohttpd hands the routes NUL-terminated decoded strings, so "job_id=j1%00x" read as "j1"
 * (DELETE deleted job j1), and bytes that are not UTF-8 reached PostgreSQL (an ERROR per request,
 * 500) or made an unencodable JSON reply (a bare null on SQLite). The refusals are logged at most
 * once per client a minute (bso_ratelog), so a client cannot flood the log with them. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bso_server/bso_server_internal.h"

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Whether s[0..n) is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
 * U+10FFFF). */
static bool utf8_ok(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + len > n) return false;
    if (s[i + 1] < lo || s[i + 1] > hi) return false;
    for (size_t k = 2; k < len; k++)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
    i += len;
  }
  return true;
}

/* Decodes s[0..n) as libmicrohttpd does ("%XX" escapes; '+' is a space in the query, which
 * changes nothing here) into out (at least n bytes); returns the decoded length. */
static size_t decode(const char *s, size_t n, unsigned char *out) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int h, l;
    if (s[i] == '%' && i + 2 < n && (h = hexval((unsigned char)s[i + 1])) >= 0 &&
        (l = hexval((unsigned char)s[i + 2])) >= 0) {
      out[k++] = (unsigned char)(h * 16 + l);
      i += 2;
    } else {
      out[k++] = (unsigned char)s[i];
    }
  }
  return k;
}

/* What is wrong with the piece s[0..n) once decoded: NULL when nothing. */
static const char *piece_problem(const char *s, size_t n, unsigned char *buf) {
  size_t m = decode(s, n, buf);
  if (memchr(buf, 0, m)) return "holds a NUL byte (%00)";
  if (!utf8_ok(buf, m)) return "is not UTF-8";
  return NULL;
}

static int problem(const char *uri, size_t n, unsigned char *buf, char *msg, size_t msglen);

int bso_uri_problem(const char *uri, char *msg, size_t msglen) {
  size_t n = strlen(uri);
  unsigned char *buf = malloc(n + 1);
  if (!buf) {
    snprintf(msg, msglen, "out of memory checking the request's path");
    return 1;
  }
  int rc = problem(uri, n, buf, msg, msglen);
  free(buf);
  return rc;
}

static int problem(const char *uri, size_t n, unsigned char *buf, char *msg, size_t msglen) {
  const char *q = memchr(uri, '?', n);
  size_t path_n = q ? (size_t)(q - uri) : n;
  const char *why = piece_problem(uri, path_n, buf);
  if (why) {
    snprintf(msg, msglen, "the request's path %s; expected UTF-8 text without NUL bytes", why);
    return 1;
  }
  if (!q) return 0;
  const char *p = q + 1, *end = uri + n;
  while (p < end) {
    const char *amp = memchr(p, '&', (size_t)(end - p));
    const char *stop = amp ? amp : end;
    const char *eq = memchr(p, '=', (size_t)(stop - p));
    const char *key_end = eq ? eq : stop;
    why = piece_problem(p, (size_t)(key_end - p), buf);
    if (why) {
      snprintf(msg, msglen, "a query parameter's name %s; expected UTF-8 text without NUL bytes", why);
      return 1;
    }
    if (eq && (why = piece_problem(eq + 1, (size_t)(stop - eq - 1), buf))) {
      size_t kn = decode(p, (size_t)(key_end - p), buf);
      snprintf(msg, msglen, "query parameter '%.*s' %s; expected UTF-8 text without NUL bytes",
               (int)(kn > 64 ? 64 : kn), (const char *)buf, why);
      return 1;
    }
    p = stop + 1;
  }
  return 0;
}

void bso_ratelog_init(bso_ratelog *rl) {
  memset(rl, 0, sizeof *rl);
  pthread_mutex_init(&rl->mu, NULL);
}

void bso_ratelog_destroy(bso_ratelog *rl) { pthread_mutex_destroy(&rl->mu); }

bool bso_ratelog_allow(bso_ratelog *rl, const char *client, double now_s, unsigned long *suppressed) {
  bool ok = false;
  *suppressed = 0;
  pthread_mutex_lock(&rl->mu);
  int k = -1, free_slot = -1;
  for (int i = 0; i < BSO_RATELOG_CLIENTS; i++) {
    if (rl->e[i].used && strcmp(rl->e[i].client, client) == 0) {
      k = i;
      break;
    }
    if (free_slot < 0 && (!rl->e[i].used || now_s - rl->e[i].last_s >= BSO_RATELOG_PERIOD_S)) free_slot = i;
  }
  if (k >= 0) {
    if (now_s - rl->e[k].last_s >= BSO_RATELOG_PERIOD_S) {
      ok = true;
      *suppressed = rl->e[k].suppressed;
      rl->e[k].suppressed = 0;
      rl->e[k].last_s = now_s;
    } else {
      rl->e[k].suppressed++;
    }
  } else if (free_slot >= 0) {
    /* A slot whose client was last logged a minute ago or more: it may log again anyway. */
    ok = true;
    rl->e[free_slot].used = true;
    snprintf(rl->e[free_slot].client, sizeof rl->e[free_slot].client, "%s", client);
    rl->e[free_slot].last_s = now_s;
    rl->e[free_slot].suppressed = 0;
  } else {
    /* Every slot logged within the minute: stay quiet rather than log one client twice. */
    rl->dropped++;
  }
  pthread_mutex_unlock(&rl->mu);
  return ok;
}
