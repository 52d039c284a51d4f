/* The connection guard (src/http/guard.c) without an HTTP server: connections are Unix sockets
 * whose far end the test holds, so that what a refused client reads can be checked. These tests
 * cover the options that zeus daemon and zeus exporter need (issue 36): the reserve kept for
 * root per listener, a client counted once across listeners, claims (power streams), the
 * client's uid, the take-over of the oldest idle slot, and the refusal's body.
 *
 * A client other than root: when the test runs as root, connections made by a child process
 * that took uid 65534 (nobody); otherwise this process. Checks that need a root client run only
 * as root. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

#include "core/core.h"
#include "http/guard.h"
#include "zeus/log.h"

#define MAXC 64
#define NOBODY 65534

/* The server's ends (given to the guard) and the client's ends (held by the test, or by a child). */
static int g_srv[MAXC], g_cli[MAXC], g_n;
static pid_t g_child[8];
static int g_child_release[8], g_nchild;
static char g_dir[256], g_path[300];
static int g_listen = -1;

/* The guard's debug lines, so that a refusal's wording can be checked. */
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_log[8192];

static void log_sink(int level, const char *module, const char *msg, void *userdata) {
  (void)level;
  (void)module;
  (void)userdata;
  pthread_mutex_lock(&g_log_mu);
  size_t n = strlen(g_log);
  snprintf(g_log + n, sizeof g_log - n, "%s\n", msg);
  pthread_mutex_unlock(&g_log_mu);
}

static bool logged(const char *needle) {
  pthread_mutex_lock(&g_log_mu);
  bool found = strstr(g_log, needle) != NULL;
  pthread_mutex_unlock(&g_log_mu);
  return found;
}

static int setup(void **state) {
  (void)state;
  g_n = g_nchild = 0;
  g_log[0] = '\0';
  zeus_set_log_callback(log_sink, NULL);
  zeus_set_log_level(ZEUS_LOG_DEBUG);
  zeus_test_tmpdir(g_dir, sizeof g_dir);
  chmod(g_dir, 0755);
  snprintf(g_path, sizeof g_path, "%s/s", g_dir);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", g_path);
  g_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(g_listen >= 0);
  assert_int_equal(bind(g_listen, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(chmod(g_path, 0777), 0);
  assert_int_equal(listen(g_listen, MAXC), 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < g_n; i++) {
    close(g_srv[i]);
    if (g_cli[i] >= 0) close(g_cli[i]);
  }
  for (int i = 0; i < g_nchild; i++) {
    close(g_child_release[i]);
    waitpid(g_child[i], NULL, 0);
  }
  close(g_listen);
  unlink(g_path);
  rmdir(g_dir);
  zeus_set_log_callback(NULL, NULL);
  zeus_set_log_level(ZEUS_LOG_WARN);
  return 0;
}

static int connect_once(void) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", g_path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) return -1;
  return fd;
}

/* n connections from uid (this process's own, or a child's that took it); returns the index of
 * the first in g_srv. A child's client ends stay in the child until teardown. */
static int conns_from(uid_t uid, int n) {
  assert_true(g_n + n <= MAXC);
  int first = g_n;
  if (uid == geteuid()) {
    for (int i = 0; i < n; i++) {
      g_cli[g_n] = connect_once();
      assert_true(g_cli[g_n] >= 0);
      g_srv[g_n] = accept4(g_listen, NULL, NULL, SOCK_CLOEXEC);
      assert_true(g_srv[g_n] >= 0);
      g_n++;
    }
    return first;
  }
  int ready[2], release[2];
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(release), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    close(release[1]);
    if (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 || setresuid(uid, uid, uid) != 0) _exit(2);
    for (int i = 0; i < n; i++)
      if (connect_once() < 0) _exit(3);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(4);
    while (read(release[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(ready[1]);
  close(release[0]);
  char c;
  if (read(ready[0], &c, 1) != 1) fail_msg("the child that connects as uid %u failed", (unsigned)uid);
  close(ready[0]);
  for (int i = 0; i < n; i++) {
    g_srv[g_n] = accept4(g_listen, NULL, NULL, SOCK_CLOEXEC);
    assert_true(g_srv[g_n] >= 0);
    g_cli[g_n] = -1;
    g_n++;
  }
  g_child[g_nchild] = pid;
  g_child_release[g_nchild++] = release[1];
  return first;
}

/* A client other than root (see the top). */
static uid_t other_uid(void) { return geteuid() == 0 ? NOBODY : geteuid(); }

static unsigned open_now(zeus__http_guard *g, unsigned long long *refused) {
  unsigned open = 0;
  zeus__http_guard_stats(g, &open, refused, NULL);
  return open;
}

/* What the client of connection i reads until the guard's shutdown (its own end). */
static void read_all(int i, char *buf, size_t len) {
  size_t n = 0;
  ssize_t r;
  fcntl(g_cli[i], F_SETFL, 0);
  while (n + 1 < len && (r = read(g_cli[i], buf + n, len - 1 - n)) > 0) n += (size_t)r;
  buf[n] = '\0';
}

/* The daemon's Unix socket (listener 0) keeps its last slots for root; TCP (listener 1) keeps
 * none, and each listener counts its own connections against max_connections. */
static void guard_root_reserve_counts_per_listener_and_only_where_asked(void **state) {
  (void)state;
  zeus__http_guard_opts o = {.server = "test", .max_connections = 4, .max_per_client = 100, .reserved = 2,
                             .reserve_for_root = true, .reserve_listeners = 1u << 0,
                             .connections_option = "--reserved-connections"};
  zeus__http_guard *g;
  assert_zeus_ok(zeus__http_guard_open(&g, &o));
  int a = conns_from(other_uid(), 6);
  zeus__http_conn *k[6];
  unsigned long long refused = 0;
  /* Listener 1 has no reserve: three of its four slots are taken by one non-root client. */
  for (int i = 0; i < 3; i++) k[i] = zeus__http_guard_admit_on(g, g_srv[a + i], 1);
  assert_int_equal(open_now(g, &refused), 3);
  if (refused) fail_msg("listener 1 keeps no reserve, yet %llu of 3 connections were refused", refused);
  /* Listener 0 counts only its own: two slots for others, then its reserve. */
  for (int i = 3; i < 6; i++) k[i] = zeus__http_guard_admit_on(g, g_srv[a + i], 0);
  assert_int_equal(open_now(g, &refused), 5);
  if (refused != 1) fail_msg("listener 0 (4 slots, 2 kept for root) refused %llu of 3, expected 1", refused);
  if (!logged("2 connections are open; the last 2 are kept for root (--reserved-connections)"))
    fail_msg("the refusal does not name the root reserve: %s", g_log);
  if (geteuid() == 0) { /* root takes the reserve */
    int r = conns_from(0, 2);
    zeus__http_conn *kr[2];
    for (int i = 0; i < 2; i++) kr[i] = zeus__http_guard_admit_on(g, g_srv[r + i], 0);
    assert_int_equal(open_now(g, &refused), 7);
    assert_int_equal(refused, 1);
    for (int i = 0; i < 2; i++) zeus__http_guard_release(g, kr[i]);
  }
  for (int i = 0; i < 6; i++) zeus__http_guard_release(g, k[i]);
  assert_int_equal(open_now(g, NULL), 0);
  zeus__http_guard_close(g);
}

/* A uid is one client on every listener: its connections on the Unix socket and over TCP add up. */
static void guard_client_counts_once_across_listeners(void **state) {
  (void)state;
  zeus__http_guard_opts o = {.server = "test", .max_connections = 100, .max_per_client = 3, .no_reserve = true,
                             .reserve_for_root = true, .identify_all = true};
  zeus__http_guard *g;
  assert_zeus_ok(zeus__http_guard_open(&g, &o));
  int a = conns_from(other_uid(), 4);
  zeus__http_conn *k[4];
  unsigned long long refused = 0;
  k[0] = zeus__http_guard_admit_on(g, g_srv[a], 0);
  k[1] = zeus__http_guard_admit_on(g, g_srv[a + 1], 0);
  k[2] = zeus__http_guard_admit_on(g, g_srv[a + 2], 1);
  assert_int_equal(open_now(g, &refused), 3);
  assert_int_equal(refused, 0);
  k[3] = zeus__http_guard_admit_on(g, g_srv[a + 3], 1);
  assert_int_equal(open_now(g, &refused), 3);
  if (refused != 1) fail_msg("a client with 2 connections on listener 0 and 1 on listener 1 got a 4th (bound 3)");
  char want[96];
  snprintf(want, sizeof want, "uid %u holds 3 connections, the most one client may hold", (unsigned)other_uid());
  if (!logged(want)) fail_msg("no '%s' in: %s", want, g_log);
  for (int i = 0; i < 4; i++) zeus__http_guard_release(g, k[i]);
  zeus__http_guard_close(g);
}

/* Claims bound a client's second resource (the daemon's power streams) over its connections; a
 * claim ends with its reply, on unclaim and at close. */
static void guard_claims_bound_a_clients_streams_and_end_with_the_reply(void **state) {
  (void)state;
  zeus__http_guard_opts o = {.server = "test", .max_connections = 100, .max_per_client = 100, .no_reserve = true,
                             .max_claims_per_client = 2};
  zeus__http_guard *g;
  assert_zeus_ok(zeus__http_guard_open(&g, &o));
  int a = conns_from(other_uid(), 4);
  zeus__http_conn *k[4];
  for (int i = 0; i < 4; i++) {
    k[i] = zeus__http_guard_admit_on(g, g_srv[a + i], (unsigned)i % 2);
    zeus__http_guard_busy(g, k[i], true);
  }
  unsigned held = 99;
  assert_true(zeus__http_guard_claim(g, k[0], &held));
  assert_int_equal(held, 0);
  assert_true(zeus__http_guard_claim(g, k[1], &held));
  assert_int_equal(held, 1);
  if (zeus__http_guard_claim(g, k[2], &held)) fail_msg("a third claim past a bound of 2 was granted");
  assert_int_equal(held, 2);
  zeus__http_guard_busy(g, k[0], false); /* its reply is done: its claim ends */
  assert_true(zeus__http_guard_claim(g, k[2], &held));
  assert_false(zeus__http_guard_claim(g, k[3], &held));
  zeus__http_guard_unclaim(g, k[1]);
  assert_true(zeus__http_guard_claim(g, k[3], &held));
  zeus__http_guard_release(g, k[2]); /* closed: its claim ends */
  zeus__http_guard_busy(g, k[0], true);
  assert_true(zeus__http_guard_claim(g, k[0], &held));
  assert_int_equal(held, 1);
  if (geteuid() == 0) { /* root is bound by no claim limit */
    int r = conns_from(0, 3);
    zeus__http_conn *kr[3];
    for (int i = 0; i < 3; i++) {
      kr[i] = zeus__http_guard_admit(g, g_srv[r + i]);
      assert_true(zeus__http_guard_claim(g, kr[i], NULL));
    }
    for (int i = 0; i < 3; i++) zeus__http_guard_release(g, kr[i]);
  }
  zeus__http_guard_release(g, k[0]);
  zeus__http_guard_release(g, k[1]);
  zeus__http_guard_release(g, k[3]);
  zeus__http_guard_close(g);
}

/* identify_all: every connection's uid is known at admission, with no bound that would ask. */
static void guard_identify_all_names_every_connections_uid(void **state) {
  (void)state;
  zeus__http_guard_opts o = {.server = "test", .max_connections = 8, .max_per_client = 8, .no_reserve = true,
                             .identify_all = true};
  zeus__http_guard *g;
  assert_zeus_ok(zeus__http_guard_open(&g, &o));
  int a = conns_from(geteuid(), 1), b = conns_from(other_uid(), 1);
  zeus__http_conn *ka = zeus__http_guard_admit_on(g, g_srv[a], 1), *kb = zeus__http_guard_admit(g, g_srv[b]);
  uid_t uid = 12345;
  if (!zeus__http_guard_uid(ka, &uid)) fail_msg("identify_all: the uid of a Unix peer is not known");
  assert_int_equal(uid, geteuid());
  assert_int_equal(zeus__http_guard_is_root(ka), geteuid() == 0);
  assert_true(zeus__http_guard_uid(kb, &uid));
  assert_int_equal(uid, other_uid());
  assert_false(zeus__http_guard_is_root(kb));
  char want[32];
  snprintf(want, sizeof want, "uid %u", (unsigned)other_uid());
  assert_string_equal(zeus__http_guard_who(kb), want);
  assert_false(zeus__http_guard_uid(NULL, &uid));
  zeus__http_guard_release(g, ka);
  zeus__http_guard_release(g, kb);
  zeus__http_guard_close(g);
  /* Without it (and without a bound that asks), nobody is asked. */
  o.identify_all = false;
  assert_zeus_ok(zeus__http_guard_open(&g, &o));
  int c = conns_from(geteuid(), 1);
  zeus__http_conn *kc = zeus__http_guard_admit(g, g_srv[c]);
  assert_false(zeus__http_guard_uid(kc, &uid));
  assert_string_equal(zeus__http_guard_who(kc), "an unknown peer");
  zeus__http_guard_release(g, kc);
  zeus__http_guard_close(g);
}

/* The exporter's policy: at the limit a new connection takes the slot of the oldest one without
 * a request in progress (cut without a word); when every one is answering, the new one is told
 * 503 in plain text. */
static void guard_take_oldest_idle_takes_its_slot_or_refuses_when_all_are_busy(void **state) {
  (void)state;
  zeus__http_guard_opts o = {.server = "test", .max_connections = 3, .max_per_client = 3, .no_reserve = true,
                             .take_oldest_idle = true, .plain_errors = true};
  zeus__http_guard *g;
  assert_zeus_ok(zeus__http_guard_open(&g, &o));
  int a = conns_from(geteuid(), 5);
  zeus__http_conn *k[5];
  unsigned long long refused = 0;
  for (int i = 0; i < 3; i++) k[i] = zeus__http_guard_admit(g, g_srv[a + i]);
  zeus__http_guard_busy(g, k[0], true); /* the oldest is answering: not it */
  k[3] = zeus__http_guard_admit(g, g_srv[a + 3]);
  assert_int_equal(open_now(g, &refused), 3);
  assert_int_equal(refused, 1);
  char buf[512];
  read_all(a + 1, buf, sizeof buf); /* the oldest idle one: shut down, nothing said */
  if (buf[0]) fail_msg("the connection whose slot was taken read '%s'", buf);
  zeus__http_guard_busy(g, k[2], true);
  zeus__http_guard_busy(g, k[3], true);
  k[4] = zeus__http_guard_admit(g, g_srv[a + 4]); /* all three answering */
  assert_int_equal(open_now(g, &refused), 3);
  assert_int_equal(refused, 2);
  read_all(a + 4, buf, sizeof buf);
  if (!strstr(buf, "HTTP/1.1 503 Service Unavailable\r\n") || !strstr(buf, "Content-Type: text/plain\r\n") ||
      !strstr(buf, "\r\n\r\nevery connection is busy; try again shortly\n"))
    fail_msg("the refused connection read '%s'", buf);
  for (int i = 0; i < 5; i++) zeus__http_guard_release(g, k[i]);
  zeus__http_guard_close(g);
}

/* A refusal's JSON body names its message under the server's field ("error" for the daemon, as
 * zeusd), "detail" by default (bso-server, pfo-server). */
static void guard_refusal_body_uses_the_servers_error_field(void **state) {
  (void)state;
  static const struct {
    const char *field, *want;
  } cases[] = {{NULL, "{\"detail\":\"every connection is busy; try again shortly\"}"},
               {"error", "{\"error\":\"every connection is busy; try again shortly\"}"}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    zeus__http_guard_opts o = {.server = "test", .max_connections = 1, .max_per_client = 1, .no_reserve = true,
                               .take_oldest_idle = true, .error_field = cases[c].field};
    zeus__http_guard *g;
    assert_zeus_ok(zeus__http_guard_open(&g, &o));
    int a = conns_from(geteuid(), 2);
    zeus__http_conn *k0 = zeus__http_guard_admit(g, g_srv[a]);
    zeus__http_guard_busy(g, k0, true);
    zeus__http_conn *k1 = zeus__http_guard_admit(g, g_srv[a + 1]);
    char buf[512], len[32];
    read_all(a + 1, buf, sizeof buf);
    snprintf(len, sizeof len, "Content-Length: %zu\r\n", strlen(cases[c].want));
    if (!strstr(buf, "Content-Type: application/json\r\n") || !strstr(buf, "Retry-After: 1\r\n") ||
        !strstr(buf, len) || !strstr(buf, cases[c].want))
      fail_msg("field %s: the refused connection read '%s', expected a body %s",
               cases[c].field ? cases[c].field : "NULL", buf, cases[c].want);
    zeus__http_guard_release(g, k0);
    zeus__http_guard_release(g, k1);
    zeus__http_guard_close(g);
  }
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(guard_root_reserve_counts_per_listener_and_only_where_asked, setup, teardown),
      cmocka_unit_test_setup_teardown(guard_client_counts_once_across_listeners, setup, teardown),
      cmocka_unit_test_setup_teardown(guard_claims_bound_a_clients_streams_and_end_with_the_reply, setup, teardown),
      cmocka_unit_test_setup_teardown(guard_identify_all_names_every_connections_uid, setup, teardown),
      cmocka_unit_test_setup_teardown(guard_take_oldest_idle_takes_its_slot_or_refuses_when_all_are_busy, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(guard_refusal_body_uses_the_servers_error_field, setup, teardown),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
