/* HS256 JSON Web Tokens, as zeusd issues and checks them: header {"alg":"HS256","typ":"JWT"},
 * claims {"sub": user, "scopes": ["gpu-read", ...], "exp": unix seconds (absent: never)}.
 *
 * HMAC-SHA256 comes from OpenSSL's libcrypto (one-shot HMAC(), CRYPTO_memcmp): the API is the
 * same on every Debian release, where libjwt changed its API between 1.x and 3.x. Everything a
 * token carries is checked before it is trusted: the algorithm is exactly HS256 (never "none",
 * never another), the signature is compared in constant time, then the claims' types, the scope
 * names, exp and nbf. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/json.h"
#include "daemon/daemon_internal.h"

#define JWT_MAX_LEN 8192

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int zeus__b64url_encode(const unsigned char *in, size_t n, char **out) {
  char *s = malloc((n + 2) / 3 * 4 + 1);
  if (!s) return zeus__oom("encoding base64url");
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)in[i] << 16;
    if (i + 1 < n) v |= (unsigned)in[i + 1] << 8;
    if (i + 2 < n) v |= in[i + 2];
    s[o++] = B64URL[(v >> 18) & 63];
    s[o++] = B64URL[(v >> 12) & 63];
    if (i + 1 < n) s[o++] = B64URL[(v >> 6) & 63];
    if (i + 2 < n) s[o++] = B64URL[v & 63];
  }
  s[o] = '\0';
  *out = s;
  return ZEUS_OK;
}

static int b64val(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

int zeus__b64url_decode(const char *in, size_t n, unsigned char **out, size_t *outlen) {
  if (n % 4 == 1) return zeus__error(ZEUS_EPARSE, "not base64url: impossible length %zu", n);
  unsigned char *b = malloc(n / 4 * 3 + 3);
  if (!b) return zeus__oom("decoding base64url");
  size_t o = 0;
  unsigned acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64val(in[i]);
    if (v < 0) {
      free(b);
      return zeus__error(ZEUS_EPARSE, "not base64url: character '%c' at %zu", in[i], i);
    }
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      b[o++] = (unsigned char)(acc >> bits);
      acc &= (1u << bits) - 1;
    }
  }
  /* Leftover bits must be zero, or two encodings would decode alike. */
  if (acc != 0) {
    free(b);
    return zeus__error(ZEUS_EPARSE, "not base64url: non-canonical last character");
  }
  *out = b;
  *outlen = o;
  return ZEUS_OK;
}

static const char *const GROUP_NAMES[] = {"gpu-control", "gpu-read", "cpu-read", "cpu-control"};

const char *zeus__daemon_group_name(unsigned bit) {
  for (unsigned i = 0; i < ZEUS__ARRAY_LEN(GROUP_NAMES); i++)
    if (bit == (1u << i)) return GROUP_NAMES[i];
  return NULL;
}

static int group_bit(const char *name, size_t len, unsigned *bit) {
  for (unsigned i = 0; i < ZEUS__ARRAY_LEN(GROUP_NAMES); i++) {
    if (strlen(GROUP_NAMES[i]) == len && strncmp(GROUP_NAMES[i], name, len) == 0) {
      *bit = 1u << i;
      return ZEUS_OK;
    }
  }
  return ZEUS_EINVAL;
}

int zeus_daemon_parse_groups(const char *list, unsigned *groups) {
  if (!list || !groups) return zeus__error(ZEUS_EINVAL, "no group list given");
  unsigned g = 0;
  const char *p = list;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    while (n && *p == ' ') { p++; n--; }
    while (n && p[n - 1] == ' ') n--;
    unsigned bit;
    if (!n || group_bit(p, n, &bit) != ZEUS_OK)
      return zeus__error(ZEUS_EINVAL, "'%.*s' is not an API group (expected gpu-control, gpu-read, cpu-read%s)",
                         (int)n, p, " or cpu-control for a token's scope");
    g |= bit;
    p = e ? e + 1 : p + strlen(p);
  }
  if (!g) return zeus__error(ZEUS_EINVAL, "the group list is empty (expected gpu-control, gpu-read, cpu-read)");
  *groups = g;
  return ZEUS_OK;
}

int zeus__daemon_read_key(const char *path, unsigned char **key, size_t *len) {
  char *data;
  size_t n;
  int rc = zeus__read_file(path, &data, &n);
  if (rc) return zeus__error_ctx(rc, "signing key");
  if (n == 0) {
    free(data);
    return zeus__error(ZEUS_EINVAL, "signing key file '%s' is empty", path);
  }
  struct stat st;
  if (stat(path, &st) == 0 && (st.st_mode & 077))
    zeus__log(ZEUS_LOG_WARN, "daemon", "signing key file '%s' is readable by others (mode %03o); chmod 600 it", path,
              (unsigned)(st.st_mode & 0777));
  *key = (unsigned char *)data;
  *len = n;
  return ZEUS_OK;
}

/* HMAC-SHA256 of "<header>.<payload>" into mac[32]. */
static int hmac(const unsigned char *key, size_t keylen, const char *msg, size_t n, unsigned char mac[32]) {
  unsigned maclen = 0;
  if (keylen > (size_t)INT32_MAX ||
      !HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, n, mac, &maclen) || maclen != 32)
    return zeus__error(ZEUS_EINTERNAL, "HMAC-SHA256 failed in libcrypto");
  return ZEUS_OK;
}

int zeus__jwt_sign(const unsigned char *key, size_t keylen, const char *sub, unsigned scopes, bool has_exp,
                   long long exp, char **token) {
  if (!key || !keylen) return zeus__error(ZEUS_EINVAL, "no signing key");
  if (!sub || !*sub) return zeus__error(ZEUS_EINVAL, "the token needs a user (sub)");
  json_t *claims = json_object(), *arr = json_array();
  json_object_set_new(claims, "sub", json_string(sub));
  for (unsigned i = 0; i < ZEUS__ARRAY_LEN(GROUP_NAMES); i++)
    if (scopes & (1u << i)) json_array_append_new(arr, json_string(GROUP_NAMES[i]));
  json_object_set_new(claims, "scopes", arr);
  if (has_exp) json_object_set_new(claims, "exp", json_integer(exp));
  char *payload = json_dumps(claims, JSON_COMPACT);
  json_decref(claims);
  static const char header[] = "{\"typ\":\"JWT\",\"alg\":\"HS256\"}";
  char *h64 = NULL, *p64 = NULL, *s64 = NULL;
  int rc = payload ? ZEUS_OK : zeus__oom("signing a token");
  if (!rc) rc = zeus__b64url_encode((const unsigned char *)header, strlen(header), &h64);
  if (!rc) rc = zeus__b64url_encode((const unsigned char *)payload, strlen(payload), &p64);
  zeus__buf b = {0};
  unsigned char mac[32];
  if (!rc) rc = zeus__buf_printf(&b, "%s.%s", h64, p64);
  if (!rc) rc = hmac(key, keylen, b.data, b.len, mac);
  if (!rc) rc = zeus__b64url_encode(mac, sizeof mac, &s64);
  if (!rc) rc = zeus__buf_printf(&b, ".%s", s64);
  free(payload);
  free(h64);
  free(p64);
  free(s64);
  if (rc) { zeus__buf_free(&b); return rc; }
  *token = b.data;
  return ZEUS_OK;
}

static int invalid(const char *why) { return zeus__error(ZEUS_EPERM, "Invalid token: %s", why); }

/* Decodes one base64url part as a JSON object. */
static int part_json(const char *s, size_t n, const char *what, json_t **out) {
  unsigned char *raw;
  size_t len;
  if (zeus__b64url_decode(s, n, &raw, &len))
    return zeus__error(ZEUS_EPERM, "Invalid token: the %s is not base64url", what);
  json_error_t e;
  json_t *j = json_loadb((const char *)raw, len, JSON_REJECT_DUPLICATES, &e);
  free(raw);
  if (!j || !json_is_object(j)) {
    json_decref(j);
    return zeus__error(ZEUS_EPERM, "Invalid token: the %s is not a JSON object", what);
  }
  *out = j;
  return ZEUS_OK;
}

/* A NumericDate claim: an integer (or a real that is one) within int64. */
static bool numeric_date(const json_t *v, long long *out) {
  if (json_is_integer(v)) { *out = json_integer_value(v); return true; }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d > -9.2e18 && d < 9.2e18) { *out = (long long)d; return true; }
  }
  return false;
}

int zeus__jwt_verify(const unsigned char *key, size_t keylen, const char *token, long long now,
                     zeus__jwt_claims *out) {
  if (!token || !*token) return invalid("empty");
  size_t n = strnlen(token, JWT_MAX_LEN + 1);
  if (n > JWT_MAX_LEN) return invalid("longer than 8192 bytes");
  const char *d1 = memchr(token, '.', n);
  const char *d2 = d1 ? memchr(d1 + 1, '.', n - (size_t)(d1 + 1 - token)) : NULL;
  if (!d1 || !d2 || memchr(d2 + 1, '.', n - (size_t)(d2 + 1 - token)))
    return invalid("expected three dot-separated parts (header.payload.signature)");
  json_t *hdr = NULL, *claims = NULL;
  int rc = part_json(token, (size_t)(d1 - token), "header", &hdr);
  if (rc) return rc;
  const char *alg = json_string_value(json_object_get(hdr, "alg"));
  if (!alg || strcmp(alg, "HS256") != 0) {
    char why[96];
    snprintf(why, sizeof why, "algorithm %s%.32s%s is not HS256", alg ? "'" : "", alg ? alg : "(none)", alg ? "'" : "");
    json_decref(hdr);
    return invalid(why);
  }
  json_decref(hdr);
  /* The signature before anything in the payload is believed. */
  unsigned char *sig;
  size_t siglen;
  if (zeus__b64url_decode(d2 + 1, n - (size_t)(d2 + 1 - token), &sig, &siglen))
    return invalid("the signature is not base64url");
  unsigned char mac[32];
  if ((rc = hmac(key, keylen, token, (size_t)(d2 - token), mac))) { free(sig); return rc; }
  bool ok = siglen == sizeof mac && CRYPTO_memcmp(sig, mac, sizeof mac) == 0;
  free(sig);
  if (!ok) return invalid("signature mismatch (another key signed it, or it was changed)");
  if ((rc = part_json(d1 + 1, (size_t)(d2 - d1 - 1), "payload", &claims))) return rc;
  zeus__jwt_claims c = {0};
  const json_t *sub = json_object_get(claims, "sub"), *scopes = json_object_get(claims, "scopes");
  const json_t *exp = json_object_get(claims, "exp"), *nbf = json_object_get(claims, "nbf");
  const char *why = NULL;
  char buf[160];
  if (!json_is_string(sub)) why = "claim 'sub' is missing or not a string";
  else if (!json_is_array(scopes)) why = "claim 'scopes' is missing or not a list";
  else if (exp && !json_is_null(exp) && !numeric_date(exp, &c.exp)) why = "claim 'exp' is not a number";
  if (!why) {
    snprintf(c.sub, sizeof c.sub, "%s", json_string_value(sub));
    size_t i;
    json_t *v;
    json_array_foreach(scopes, i, v) {
      unsigned bit;
      const char *s = json_string_value(v);
      if (!s || group_bit(s, strlen(s), &bit)) {
        snprintf(buf, sizeof buf, "scope %.40s%s%s is not an API group", s ? "'" : "", s ? s : "(not a string)",
                 s ? "'" : "");
        why = buf;
        break;
      }
      c.scopes |= bit;
    }
  }
  long long nbf_v = 0;
  if (!why && nbf && !json_is_null(nbf) && !numeric_date(nbf, &nbf_v)) why = "claim 'nbf' is not a number";
  c.has_exp = !why && exp && !json_is_null(exp);
  json_decref(claims);
  if (why) return invalid(why);
  if (c.has_exp && now >= c.exp) return zeus__error(ZEUS_EPERM, "Token has expired.");
  if (nbf && nbf_v > now) return zeus__error(ZEUS_EPERM, "Invalid token: not valid before %lld", nbf_v);
  if (out) *out = c;
  return ZEUS_OK;
}

int zeus_daemon_token_issue(const char *signing_key_path, const char *user, unsigned scopes, long long expires_unix,
                            char **token) {
  if (!signing_key_path || !token)
    return zeus__error(ZEUS_EINVAL, "zeus_daemon_token_issue: key path and token are required");
  if (!user || !*user) return zeus__error(ZEUS_EINVAL, "the token needs a user");
  if (!scopes || (scopes & ~0xfu)) return zeus__error(ZEUS_EINVAL, "the token needs at least one known scope");
  unsigned char *key;
  size_t n;
  int rc = zeus__daemon_read_key(signing_key_path, &key, &n);
  if (rc) return rc;
  rc = zeus__jwt_sign(key, n, user, scopes, expires_unix != 0, expires_unix, token);
  OPENSSL_cleanse(key, n);
  free(key);
  return rc;
}
