/* JWT HS256 for zeus daemon: base64url, signing, and every way a token is refused. */
#include <time.h>

#include <openssl/hmac.h>

#include "test_util.h"

#include "daemon/daemon_internal.h"

static const unsigned char KEY[] = "integration-test-signing-key!!!!";
#define KEYLEN (sizeof KEY - 1)

static char *sign(const char *sub, unsigned scopes, bool has_exp, long long exp) {
  char *t = NULL;
  assert_zeus_ok(zeus__jwt_sign(KEY, KEYLEN, sub, scopes, has_exp, exp, &t));
  return t;
}

/* A token made by hand: header and payload JSON, signed with `key`. */
static char *forge(const char *header, const char *payload, const unsigned char *key, size_t keylen) {
  char *h, *p, *s;
  assert_zeus_ok(zeus__b64url_encode((const unsigned char *)header, strlen(header), &h));
  assert_zeus_ok(zeus__b64url_encode((const unsigned char *)payload, strlen(payload), &p));
  char msg[2048];
  snprintf(msg, sizeof msg, "%s.%s", h, p);
  unsigned char mac[32];
  unsigned len = 0;
  HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, strlen(msg), mac, &len);
  assert_zeus_ok(zeus__b64url_encode(mac, len, &s));
  char *out = malloc(strlen(msg) + strlen(s) + 2);
  sprintf(out, "%s.%s", msg, s);
  free(h);
  free(p);
  free(s);
  return out;
}

static void b64url_round_trips_every_length(void **state) {
  (void)state;
  unsigned char in[40];
  for (int i = 0; i < 40; i++) in[i] = (unsigned char)(i * 37 + 250);
  for (size_t n = 0; n <= sizeof in; n++) {
    char *e;
    assert_zeus_ok(zeus__b64url_encode(in, n, &e));
    assert_null(strchr(e, '='));
    assert_null(strchr(e, '+'));
    assert_null(strchr(e, '/'));
    unsigned char *d;
    size_t dn;
    assert_zeus_ok(zeus__b64url_decode(e, strlen(e), &d, &dn));
    assert_int_equal(dn, n);
    assert_memory_equal(d, in, n);
    free(e);
    free(d);
  }
  unsigned char *d;
  size_t dn;
  assert_zeus_err(zeus__b64url_decode("ab=c", 4, &d, &dn), ZEUS_EPARSE, "character '='");
  assert_zeus_err(zeus__b64url_decode("abcde", 5, &d, &dn), ZEUS_EPARSE, "length");
  assert_zeus_err(zeus__b64url_decode("QR", 2, &d, &dn), ZEUS_EPARSE, "non-canonical"); /* "QQ" is canonical */
}

static void jwt_signed_token_verifies_with_claims(void **state) {
  (void)state;
  long long now = time(NULL);
  char *t = sign("alice", ZEUS_DAEMON_GPU_READ | ZEUS_DAEMON_CPU_READ, true, now + 3600);
  zeus__jwt_claims c;
  assert_zeus_ok(zeus__jwt_verify(KEY, KEYLEN, t, now, &c));
  assert_string_equal(c.sub, "alice");
  assert_int_equal(c.scopes, ZEUS_DAEMON_GPU_READ | ZEUS_DAEMON_CPU_READ);
  assert_true(c.has_exp);
  assert_int_equal(c.exp, now + 3600);
  /* The header is zeusd's: HS256, JWT. */
  char *dot = strchr(t, '.');
  unsigned char *h;
  size_t hn;
  assert_zeus_ok(zeus__b64url_decode(t, (size_t)(dot - t), &h, &hn));
  assert_non_null(memmem(h, hn, "\"alg\":\"HS256\"", 13));
  free(h);
  free(t);
  t = sign("bob", ZEUS_DAEMON_GPU_CONTROL, false, 0);
  assert_zeus_ok(zeus__jwt_verify(KEY, KEYLEN, t, now + 100LL * 365 * 86400, &c));
  assert_false(c.has_exp);
  free(t);
}

static void jwt_expired_token_is_refused(void **state) {
  (void)state;
  long long now = time(NULL);
  char *t = sign("alice", ZEUS_DAEMON_GPU_READ, true, now - 1);
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, t, now, NULL), ZEUS_EPERM, "Token has expired.");
  /* exp == now is expired too (valid strictly before exp). */
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, t, now - 1, NULL), ZEUS_EPERM, "expired");
  assert_zeus_ok(zeus__jwt_verify(KEY, KEYLEN, t, now - 2, NULL));
  free(t);
}

static void jwt_tampered_token_is_refused(void **state) {
  (void)state;
  long long now = time(NULL);
  char *t = sign("alice", ZEUS_DAEMON_GPU_READ, true, now + 3600);
  /* A payload that grants more, with the old signature. */
  char *forged = forge("{\"alg\":\"HS256\",\"typ\":\"JWT\"}",
                       "{\"sub\":\"alice\",\"scopes\":[\"gpu-read\",\"gpu-control\"]}", KEY, KEYLEN);
  char *sig = strrchr(t, '.'), *fdot = strrchr(forged, '.');
  strcpy(fdot, sig); /* same length: both are 43 characters of 32 bytes */
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, forged, now, NULL), ZEUS_EPERM, "signature mismatch");
  /* One flipped character of the signature. */
  char *t2 = strdup(t);
  char *last = t2 + strlen(t2) - 2;
  *last = *last == 'A' ? 'B' : 'A';
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, t2, now, NULL), ZEUS_EPERM, "signature");
  /* Another key. */
  static const unsigned char other[] = "wrong-key!!!!!!!!!!!!!!!!!!!!!!!!";
  char *t3 = forge("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", "{\"sub\":\"alice\",\"scopes\":[\"gpu-read\"]}", other,
                   sizeof other - 1);
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, t3, now, NULL), ZEUS_EPERM, "signature mismatch");
  /* A signature shorter than HMAC-SHA256's. */
  char *t4 = strdup(t);
  strcpy(strrchr(t4, '.') + 1, "AAAA");
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, t4, now, NULL), ZEUS_EPERM, "signature");
  free(t);
  free(t2);
  free(t3);
  free(t4);
  free(forged);
}

static void jwt_other_algorithms_are_refused(void **state) {
  (void)state;
  long long now = time(NULL);
  const char *payload = "{\"sub\":\"mallory\",\"scopes\":[\"gpu-control\"]}";
  /* "none" with an empty signature: the classic bypass. */
  char *h, *p;
  assert_zeus_ok(zeus__b64url_encode((const unsigned char *)"{\"alg\":\"none\"}", 14, &h));
  assert_zeus_ok(zeus__b64url_encode((const unsigned char *)payload, strlen(payload), &p));
  char none[512];
  snprintf(none, sizeof none, "%s.%s.", h, p);
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, none, now, NULL), ZEUS_EPERM, "algorithm 'none' is not HS256");
  /* HS512 and HS384 signed with the right key, still refused: the algorithm is fixed. */
  char *t = forge("{\"alg\":\"HS512\",\"typ\":\"JWT\"}", payload, KEY, KEYLEN);
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, t, now, NULL), ZEUS_EPERM, "'HS512' is not HS256");
  free(t);
  t = forge("{\"alg\":\"RS256\"}", payload, KEY, KEYLEN);
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, t, now, NULL), ZEUS_EPERM, "'RS256'");
  free(t);
  t = forge("{\"typ\":\"JWT\"}", payload, KEY, KEYLEN);
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, t, now, NULL), ZEUS_EPERM, "(none)");
  free(t);
  free(h);
  free(p);
}

static void jwt_malformed_tokens_say_why(void **state) {
  (void)state;
  long long now = time(NULL);
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, "not-a-valid-jwt", now, NULL), ZEUS_EPERM, "three dot-separated parts");
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, "a.b.c.d", now, NULL), ZEUS_EPERM, "three");
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, "", now, NULL), ZEUS_EPERM, "empty");
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, "!!.e30.e30", now, NULL), ZEUS_EPERM, "header is not base64url");
  /* Well signed, but claims of the wrong type or unknown scopes. */
  struct { const char *payload, *needle; } cases[] = {
      {"{\"scopes\":[\"gpu-read\"]}", "'sub'"},
      {"{\"sub\":7,\"scopes\":[\"gpu-read\"]}", "'sub'"},
      {"{\"sub\":\"a\"}", "'scopes'"},
      {"{\"sub\":\"a\",\"scopes\":\"gpu-read\"}", "'scopes'"},
      {"{\"sub\":\"a\",\"scopes\":[\"root\"]}", "scope 'root' is not an API group"},
      {"{\"sub\":\"a\",\"scopes\":[\"gpu-read\"],\"exp\":\"soon\"}", "'exp'"},
      {"{\"sub\":\"a\",\"scopes\":[],\"nbf\":9999999999}", "not valid before"},
      {"[1,2]", "payload is not a JSON object"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *t = forge("{\"alg\":\"HS256\"}", cases[i].payload, KEY, KEYLEN);
    assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, t, now, NULL), ZEUS_EPERM, cases[i].needle);
    free(t);
  }
  char big[9000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_zeus_err(zeus__jwt_verify(KEY, KEYLEN, big, now, NULL), ZEUS_EPERM, "8192");
}

static void groups_parse_and_name(void **state) {
  (void)state;
  unsigned g;
  assert_zeus_ok(zeus_daemon_parse_groups("gpu-read, cpu-read", &g));
  assert_int_equal(g, ZEUS_DAEMON_GPU_READ | ZEUS_DAEMON_CPU_READ);
  assert_zeus_ok(zeus_daemon_parse_groups("gpu-control,gpu-read,cpu-read,cpu-control", &g));
  assert_int_equal(g, 0xf);
  assert_zeus_err(zeus_daemon_parse_groups("gpu-read,gpu-write", &g), ZEUS_EINVAL, "'gpu-write' is not an API group");
  assert_zeus_err(zeus_daemon_parse_groups("", &g), ZEUS_EINVAL, "empty");
  assert_string_equal(zeus__daemon_group_name(ZEUS_DAEMON_GPU_CONTROL), "gpu-control");
  assert_null(zeus__daemon_group_name(3));
}

static void token_issue_reads_the_key_file_as_it_is(void **state) {
  (void)state;
  char dir[256], path[300];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/signing.key", dir);
  /* openssl rand -base64 32 | tee: the newline is part of the key, as zeusd reads it. */
  zeus_test_write_file(path, "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYnl0ZXM=\n");
  chmod(path, 0600);
  char *t;
  long long exp = time(NULL) + 60;
  assert_zeus_ok(zeus_daemon_token_issue(path, "carol", ZEUS_DAEMON_GPU_CONTROL, exp, &t));
  static const char key[] = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYnl0ZXM=\n";
  zeus__jwt_claims c;
  assert_zeus_ok(zeus__jwt_verify((const unsigned char *)key, sizeof key - 1, t, time(NULL), &c));
  assert_string_equal(c.sub, "carol");
  assert_int_equal(c.exp, exp);
  /* Without the newline it is another key. */
  assert_zeus_err(zeus__jwt_verify((const unsigned char *)key, sizeof key - 2, t, time(NULL), NULL), ZEUS_EPERM,
                  "signature");
  zeus_free(t);
  zeus_test_write_file(path, "");
  assert_zeus_err(zeus_daemon_token_issue(path, "carol", ZEUS_DAEMON_GPU_READ, 0, &t), ZEUS_EINVAL, "empty");
  snprintf(path, sizeof path, "%s/missing.key", dir);
  assert_zeus_err(zeus_daemon_token_issue(path, "carol", ZEUS_DAEMON_GPU_READ, 0, &t), ZEUS_ENOENT, "missing.key");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(b64url_round_trips_every_length),
      cmocka_unit_test(jwt_signed_token_verifies_with_claims),
      cmocka_unit_test(jwt_expired_token_is_refused),
      cmocka_unit_test(jwt_tampered_token_is_refused),
      cmocka_unit_test(jwt_other_algorithms_are_refused),
      cmocka_unit_test(jwt_malformed_tokens_say_why),
      cmocka_unit_test(groups_parse_and_name),
      cmocka_unit_test(token_issue_reads_the_key_file_as_it_is),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
