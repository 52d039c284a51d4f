/* zeus daemon over HTTP, in process: every route and status code, bad input naming the parameter,
 * authentication, streams, the legacy zeusd form, leases over TCP, and 100 concurrent clients.
 * GPUs are simulated; CPU packages are a fake powercap tree (ZEUS_RAPL_ROOT). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <jansson.h>

#include "test_util.h"

#include "daemon/daemon_internal.h"
#include "zeus.h"

static char g_dir[256], g_sock[300], g_state[300], g_rapl[300], g_key[300];
static const unsigned char KEY[] = "test-signing-key-bytes-0123456789";

typedef struct resp {
  int status;
  char head[4096];
  char *body;
  json_t *json;
} resp;

static void resp_free(resp *r) {
  free(r->body);
  json_decref(r->json);
  memset(r, 0, sizeof *r);
}

static int connect_to(const char *sock, int port) {
  int fd;
  if (sock) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) { close(fd); return -1; }
  } else {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) { close(fd); return -1; }
  }
  return fd;
}

/* One request on a fresh connection ("Connection: close"); reads the whole reply. */
static void http(const char *sock, int port, const char *method, const char *target, const char *headers,
                 const char *body, resp *r) {
  memset(r, 0, sizeof *r);
  int fd = connect_to(sock, port);
  if (fd < 0) fail_msg("cannot connect to the daemon");
  char req[8192];
  int n = snprintf(req, sizeof req,
                   "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: %zu\r\n%s\r\n%s", method,
                   target, body ? strlen(body) : 0, headers ? headers : "", body ? body : "");
  assert_true(write(fd, req, (size_t)n) == n);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (len + 4096 > cap) buf = realloc(buf, cap *= 2);
    ssize_t k = read(fd, buf + len, cap - len - 1);
    if (k <= 0) break;
    len += (size_t)k;
  }
  close(fd);
  buf[len] = '\0';
  assert_int_equal(sscanf(buf, "HTTP/1.%*d %d", &r->status), 1);
  char *hend = strstr(buf, "\r\n\r\n");
  assert_non_null(hend);
  snprintf(r->head, sizeof r->head, "%.*s", (int)(hend - buf), buf);
  r->body = strdup(hend + 4);
  json_error_t e;
  r->json = json_loads(r->body, 0, &e);
  free(buf);
}

static void uds(const char *method, const char *target, resp *r) { http(g_sock, 0, method, target, NULL, NULL, r); }

/* Asserts status and that the body contains `needle`. */
static void expect(const resp *r, int code, const char *needle, int line) {
  if (r->status != code) fail_msg("line %d: HTTP %d, expected %d: %s", line, r->status, code, r->body);
  if (needle && !strstr(r->body, needle)) fail_msg("line %d: body '%s' lacks '%s'", line, r->body, needle);
}
#define EXPECT(r, code, needle) expect(&(r), (code), (needle), __LINE__)

static void write_file(const char *dir, const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  zeus_test_write_file(p, text);
}

/* Two packages: 0 with a DRAM zone, 1 without. */
static void make_rapl(void) {
  snprintf(g_rapl, sizeof g_rapl, "%s/powercap", g_dir);
  char d[400];
  mkdir(g_rapl, 0755);
  snprintf(d, sizeof d, "%s/intel-rapl:0", g_rapl);
  mkdir(d, 0755);
  write_file(d, "energy_uj", "123456789\n");
  write_file(d, "max_energy_range_uj", "262143328850\n");
  write_file(d, "name", "package-0\n");
  snprintf(d, sizeof d, "%s/intel-rapl:0:0", g_rapl);
  mkdir(d, 0755);
  write_file(d, "energy_uj", "5555\n");
  write_file(d, "name", "dram\n");
  write_file(d, "max_energy_range_uj", "65712999613\n");
  snprintf(d, sizeof d, "%s/intel-rapl:1", g_rapl);
  mkdir(d, 0755);
  write_file(d, "energy_uj", "42000\n");
  write_file(d, "name", "package-1\n");
}

static const char *g_state_path_next; /* start()'s state file when set ("" for none) */

static unsigned g_per_client_next; /* 0: the defaults */

static zeus_daemon *start(unsigned groups, bool auth, bool tcp) {
  zeus_devices_opts dev = {.backend = "sim"};
  zeus_daemon_opts o;
  zeus_daemon_opts_init(&o);
  o.socket_path = g_sock;
  o.state_path = g_state_path_next ? (*g_state_path_next ? g_state_path_next : NULL) : g_state;
  g_state_path_next = NULL;
  o.groups = groups;
  o.devices = &dev;
  o.tcp_address = tcp ? "127.0.0.1:0" : NULL;
  o.signing_key_path = auth ? g_key : NULL;
  o.gpu_poll_hz = 50;
  o.cpu_poll_hz = 50;
  /* Tests of many clients in one process (one uid) lift the per-client limits for one start(). */
  o.max_connections_per_client = g_per_client_next;
  o.max_leases_per_client = g_per_client_next;
  g_per_client_next = 0;
  zeus_daemon *d;
  assert_zeus_ok(zeus_daemon_open(&d, &o));
  return d;
}

static int setup(void **state) {
  (void)state;
  zeus_test_tmpdir(g_dir, sizeof g_dir);
  snprintf(g_sock, sizeof g_sock, "%s/run/zeusd.sock", g_dir);
  snprintf(g_state, sizeof g_state, "%s/run/state.json", g_dir);
  snprintf(g_key, sizeof g_key, "%s/signing.key", g_dir);
  FILE *f = fopen(g_key, "w");
  fwrite(KEY, 1, sizeof KEY - 1, f);
  fclose(f);
  chmod(g_key, 0600);
  make_rapl();
  setenv("ZEUS_RAPL_ROOT", g_rapl, 1);
  setenv("ZEUS_SIM_GPUS", "2", 1);
  unsetenv("ZEUSD_SOCK_PATH");
  unsetenv("ZEUSD_HOST_PORT");
  return 0;
}

static long long json_int_at(json_t *o, const char *k1, const char *k2) {
  json_t *v = json_object_get(o, k1);
  if (k2) v = json_object_get(v, k2);
  if (!json_is_integer(v)) fail_msg("no integer at %s.%s", k1, k2 ? k2 : "");
  return json_integer_value(v);
}

static void discover_lists_devices_groups_and_auth(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  resp r;
  uds("GET", "/discover", &r);
  EXPECT(r, 200, NULL);
  json_t *gpus = json_object_get(r.json, "gpus");
  assert_int_equal(json_array_size(gpus), 2);
  json_t *g1 = json_array_get(gpus, 1);
  assert_int_equal(json_int_at(g1, "id", NULL), 1);
  assert_string_equal(json_string_value(json_object_get(g1, "pci_address")), "0000:02:00.0");
  assert_true(json_is_true(json_object_get(g1, "cumulative_energy_available")));
  assert_string_equal(json_string_value(json_object_get(g1, "uuid")), "GPU-5a1a0000-0000-4000-8000-000000000001");
  json_t *cpus = json_object_get(r.json, "cpus");
  assert_int_equal(json_array_size(cpus), 2);
  assert_true(json_is_true(json_object_get(json_array_get(cpus, 0), "dram_available")));
  assert_true(json_is_false(json_object_get(json_array_get(cpus, 1), "dram_available")));
  assert_int_equal(json_int_at(json_array_get(cpus, 0), "energy_range_uj", NULL), 262143328850LL);
  char *groups = json_dumps(json_object_get(r.json, "enabled_api_groups"), JSON_COMPACT);
  assert_string_equal(groups, "[\"gpu-control\",\"gpu-read\",\"cpu-read\"]");
  free(groups);
  assert_true(json_is_false(json_object_get(r.json, "auth_required")));
  assert_int_equal(json_array_size(json_object_get(r.json, "gpu_ids")), 2); /* older clients' shape */
  resp_free(&r);
  uds("GET", "/time", &r);
  EXPECT(r, 200, "timestamp_ms");
  long long ms = json_int_at(r.json, "timestamp_ms", NULL);
  assert_true(llabs(ms - (long long)time(NULL) * 1000) < 5000);
  resp_free(&r);
  uds("GET", "/time?now=1", &r);
  EXPECT(r, 400, "unknown parameter 'now'");
  resp_free(&r);
  zeus_daemon_close(d);
}

static void gpu_read_routes_answer_per_gpu(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  resp r;
  uds("GET", "/gpu/get_power_limit", &r);
  EXPECT(r, 200, NULL);
  assert_int_equal(json_int_at(r.json, "0", "power_limit_mw"), 300000);
  assert_int_equal(json_int_at(r.json, "1", "power_limit_mw"), 300000);
  resp_free(&r);
  uds("GET", "/gpu/get_power_limit_constraints?gpu_ids=1", &r);
  EXPECT(r, 200, NULL);
  assert_null(json_object_get(r.json, "0"));
  assert_int_equal(json_int_at(r.json, "1", "min_power_limit_mw"), 100000);
  assert_int_equal(json_int_at(r.json, "1", "max_power_limit_mw"), 300000);
  assert_int_equal(json_int_at(r.json, "1", "default_power_limit_mw"), 300000);
  resp_free(&r);
  uds("GET", "/gpu/get_persistence_mode?gpu_ids=0", &r);
  EXPECT(r, 200, "{\"0\":{\"enabled\":");
  resp_free(&r);
  uds("GET", "/gpu/get_cumulative_energy", &r);
  EXPECT(r, 200, NULL);
  assert_true(json_int_at(r.json, "1", "energy_mj") >= 0);
  resp_free(&r);
  uds("GET", "/gpu/get_power?gpu_ids=0,1", &r);
  EXPECT(r, 200, NULL);
  assert_true(json_int_at(r.json, "power_mw", "0") > 0);
  assert_true(json_int_at(r.json, "power_mw", "1") > 0);
  assert_true(json_int_at(r.json, "timestamp_ms", NULL) > 0);
  resp_free(&r);
  zeus_daemon_close(d);
}

/* POST with an explicit lease (its token in X-Zeus-Lease). */
static void post_leased(const char *lease, const char *target, resp *r) {
  char h[128];
  snprintf(h, sizeof h, "X-Zeus-Lease: %s\r\n", lease);
  http(g_sock, 0, "POST", target, h, NULL, r);
}

static char *new_lease(const char *sock, int port, const char *query) {
  resp r;
  char target[64];
  snprintf(target, sizeof target, "/leases%s", query ? query : "");
  http(sock, port, "POST", target, NULL, NULL, &r);
  EXPECT(r, 200, "\"lease\"");
  char *tok = strdup(json_string_value(json_object_get(r.json, "lease")));
  assert_int_equal(strlen(tok), 32);
  resp_free(&r);
  return tok;
}

static void gpu_write_routes_change_and_release_gives_back(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  char *lease = new_lease(g_sock, 0, NULL);
  resp r;
  const char *writes[] = {
      "/gpu/set_power_limit?gpu_ids=0,1&power_limit_mw=200000&block=true",
      "/gpu/set_persistence_mode?gpu_ids=1&enabled=true&block=true",
      "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=900&max_clock_mhz=1200&block=true",
      "/gpu/set_mem_locked_clocks?gpu_ids=0&min_clock_mhz=5001&max_clock_mhz=5001&block=true",
      "/gpu/reset_mem_locked_clocks?gpu_ids=0&block=true",
      "/gpu/set_mem_locked_clocks?gpu_ids=1&min_clock_mhz=5001&max_clock_mhz=5001&block=true",
      "/gpu/reset_gpu_locked_clocks?gpu_ids=0&block=true",
      "/gpu/set_gpu_locked_clocks?gpu_ids=1&min_clock_mhz=600&max_clock_mhz=600&block=true",
      "/gpu/reset_locked_clocks?gpu_ids=1&block=true",
  };
  for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++) {
    post_leased(lease, writes[i], &r);
    if (r.status != 200) fail_msg("%s -> %d %s", writes[i], r.status, r.body);
    assert_string_equal(r.body, ""); /* zeusd answers writes with an empty 200 */
    resp_free(&r);
  }
  uds("GET", "/gpu/get_power_limit", &r);
  assert_int_equal(json_int_at(r.json, "0", "power_limit_mw"), 200000);
  resp_free(&r);
  uds("GET", "/gpu/get_persistence_mode?gpu_ids=1", &r);
  EXPECT(r, 200, "{\"1\":{\"enabled\":true}}");
  resp_free(&r);
  uds("GET", "/leases", &r);
  EXPECT(r, 200, "\"kind\":\"lease\"");
  assert_non_null(strstr(r.body, "\"setting\":\"gpu_locked_clocks\""));
  assert_null(strstr(r.body, lease)); /* the secret is never listed */
  resp_free(&r);
  post_leased(lease, "/leases/renew", &r);
  EXPECT(r, 200, "\"id\":\"L");
  resp_free(&r);
  post_leased(lease, "/leases/release", &r);
  EXPECT(r, 200, "\"released\":true");
  resp_free(&r);
  uds("GET", "/gpu/get_power_limit", &r);
  assert_int_equal(json_int_at(r.json, "0", "power_limit_mw"), 300000);
  assert_int_equal(json_int_at(r.json, "1", "power_limit_mw"), 300000);
  resp_free(&r);
  uds("GET", "/gpu/get_persistence_mode?gpu_ids=1", &r);
  EXPECT(r, 200, "{\"1\":{\"enabled\":false}}");
  resp_free(&r);
  post_leased(lease, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000", &r);
  EXPECT(r, 410, "no such lease");
  resp_free(&r);
  free(lease);
  zeus_daemon_close(d);
}

/* GET /gpu/get_locked_clocks says the locks (the simulated GPU knows them), and a give-back puts
 * back the lock a change replaced, not "unlocked". */
static void locked_clocks_are_read_and_a_replaced_lock_is_given_back(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  resp r;
  uds("GET", "/gpu/get_locked_clocks?gpu_ids=0", &r);
  EXPECT(r, 200, NULL);
  assert_string_equal(r.body, "{\"0\":{\"gpu_locked_clocks\":{\"locked\":false},\"mem_locked_clocks\":{\"locked\":false}}}");
  resp_free(&r);
  /* A permanent lock, held by nobody, then a lease's lock over it. */
  uds("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=600&max_clock_mhz=600&persist=true", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  char *lease = new_lease(g_sock, 0, NULL);
  post_leased(lease, "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=900&max_clock_mhz=1200", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  post_leased(lease, "/gpu/set_mem_locked_clocks?gpu_ids=1&min_clock_mhz=5001&max_clock_mhz=5001", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  uds("GET", "/gpu/get_locked_clocks", &r);
  EXPECT(r, 200, NULL);
  assert_int_equal(json_int_at(json_object_get(r.json, "0"), "gpu_locked_clocks", "min_clock_mhz"), 900);
  assert_int_equal(json_int_at(json_object_get(r.json, "0"), "gpu_locked_clocks", "max_clock_mhz"), 1200);
  assert_true(json_is_true(json_object_get(json_object_get(json_object_get(r.json, "1"), "mem_locked_clocks"), "locked")));
  assert_true(json_is_false(json_object_get(json_object_get(json_object_get(r.json, "1"), "gpu_locked_clocks"), "locked")));
  resp_free(&r);
  post_leased(lease, "/leases/release", &r);
  EXPECT(r, 200, "\"released\":true");
  resp_free(&r);
  uds("GET", "/gpu/get_locked_clocks", &r);
  EXPECT(r, 200, NULL);
  assert_int_equal(json_int_at(json_object_get(r.json, "0"), "gpu_locked_clocks", "min_clock_mhz"), 600);
  assert_int_equal(json_int_at(json_object_get(r.json, "0"), "gpu_locked_clocks", "max_clock_mhz"), 600);
  assert_true(json_is_false(json_object_get(json_object_get(json_object_get(r.json, "1"), "mem_locked_clocks"), "locked")));
  resp_free(&r);
  uds("GET", "/gpu/get_locked_clocks?gpu_ids=7", &r);
  EXPECT(r, 400, "7");
  resp_free(&r);
  free(lease);
  zeus_daemon_close(d);
}

static void bad_input_is_400_naming_the_parameter(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  struct { const char *method, *target, *needle;
  } cases[] = {
      {"POST", "/gpu/set_power_limit?power_limit_mw=200000", "parameter 'gpu_ids' is required"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0", "parameter 'power_limit_mw' is required"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=lots", "parameter 'power_limit_mw': expected an integer"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=-5", "parameter 'power_limit_mw'"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=99999999999", "parameter 'power_limit_mw'"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=50000", "outside the allowed range [100000, 300000]"},
      {"POST", "/gpu/set_power_limit?gpu_ids=7&power_limit_mw=200000", "GPU index 7 does not exist"},
      {"POST", "/gpu/set_power_limit?gpu_ids=&power_limit_mw=200000", "gpu_ids must contain at least one GPU index"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0,a&power_limit_mw=200000", "parameter 'gpu_ids': '0,a'"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0,0&power_limit_mw=200000", "lists GPU 0 twice"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0,&power_limit_mw=200000", "ends with a comma"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=maybe",
       "parameter 'block': expected true or false"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&gpu=1", "unknown parameter 'gpu'"},
      {"POST", "/gpu/set_power_limit?gpu_ids=0&gpu_ids=1&power_limit_mw=200000", "parameter 'gpu_ids' given twice"},
      {"POST", "/gpu/set_persistence_mode?gpu_ids=0&enabled=yes", "parameter 'enabled': expected true or false"},
      {"POST", "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=1500&max_clock_mhz=900",
       "'min_clock_mhz' (1500) and 'max_clock_mhz' (900)"},
      {"POST", "/gpu/set_mem_locked_clocks?gpu_ids=0&min_clock_mhz=100", "parameter 'max_clock_mhz' is required"},
      {"GET", "/gpu/get_power_limit?gpu_ids=2", "GPU index 2 does not exist"},
      {"GET", "/gpu/get_power?gpus=0", "unknown parameter 'gpus'"},
      {"GET", "/cpu/get_cumulative_energy?cpu=true", "parameter 'dram' is required"},
      {"GET", "/cpu/get_cumulative_energy?dram=true&cpu=1.5", "parameter 'cpu': expected true or false"},
      {"GET", "/cpu/get_power?cpu_ids=5", "CPU index 5 does not exist"},
      {"POST", "/leases?ttl_s=999999", "parameter 'ttl_s'"},
      {"POST", "/gpu/0/set_power_limit", "parameter 'power_limit_mw' is required"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    resp r;
    uds(cases[i].method, cases[i].target, &r);
    if (r.status != 400 || !strstr(r.body, cases[i].needle))
      fail_msg("%s %s -> %d '%s', expected 400 with '%s'", cases[i].method, cases[i].target, r.status, r.body,
               cases[i].needle);
    resp_free(&r);
  }
  /* The legacy form's body, malformed. */
  resp r;
  http(g_sock, 0, "POST", "/gpu/0/set_power_limit", "Content-Type: application/json\r\n", "{\"power_limit_mw\": \"a\"}",
       &r);
  EXPECT(r, 400, "field 'power_limit_mw' of the request body must be a number or a boolean");
  resp_free(&r);
  http(g_sock, 0, "POST", "/gpu/0/set_power_limit", NULL, "[1", &r);
  EXPECT(r, 400, "not a JSON object");
  resp_free(&r);
  zeus_daemon_close(d);
}

static void status_codes_404_405_409_410_413(void **state) {
  (void)state;
  zeus_daemon *d = start(ZEUS_DAEMON_GPU_CONTROL | ZEUS_DAEMON_GPU_READ, false, false);
  resp r;
  uds("GET", "/gpu/nothing", &r);
  EXPECT(r, 404, "no route");
  resp_free(&r);
  uds("GET", "/cpu/get_power", &r);
  EXPECT(r, 404, "API group 'cpu-read' is not enabled on this server.");
  resp_free(&r);
  uds("GET", "/auth/whoami", &r);
  EXPECT(r, 404, "Authentication is not enabled");
  resp_free(&r);
  uds("POST", "/gpu/get_power", &r);
  EXPECT(r, 405, "takes GET");
  assert_non_null(strstr(r.head, "Allow: GET"));
  resp_free(&r);
  uds("DELETE", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000", &r);
  EXPECT(r, 405, "takes POST");
  assert_non_null(strstr(r.head, "Allow: POST\r"));
  resp_free(&r);
  uds("PUT", "/leases", &r);
  EXPECT(r, 405, "/leases takes GET, POST or DELETE, not PUT");
  assert_non_null(strstr(r.head, "Allow: GET, POST, DELETE\r"));
  resp_free(&r);
  char big[6000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  http(g_sock, 0, "POST", "/gpu/0/set_power_limit", NULL, big, &r);
  EXPECT(r, 413, "larger than 4096 bytes");
  resp_free(&r);
  /* Two leases contend for GPU 0; per-GPU aggregation: GPU 1 succeeds, GPU 0 is 409. */
  char *a = new_lease(g_sock, 0, NULL), *b = new_lease(g_sock, 0, NULL);
  post_leased(a, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  post_leased(b, "/gpu/set_power_limit?gpu_ids=0,1&power_limit_mw=150000", &r);
  EXPECT(r, 409, "GPU 0's power_limit (200000 mW) is held by L");
  assert_non_null(strstr(r.body, "pass override=true"));
  assert_null(json_object_get(json_object_get(r.json, "errors"), "1"));
  assert_non_null(json_object_get(json_object_get(r.json, "errors"), "0"));
  resp_free(&r);
  uds("GET", "/gpu/get_power_limit", &r);
  assert_int_equal(json_int_at(r.json, "0", "power_limit_mw"), 200000);
  assert_int_equal(json_int_at(r.json, "1", "power_limit_mw"), 150000);
  resp_free(&r);
  post_leased(b, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=150000&override=true", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  post_leased(b, "/leases/release", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  uds("GET", "/gpu/get_power_limit", &r);
  assert_int_equal(json_int_at(r.json, "0", "power_limit_mw"), 200000); /* a's value is back */
  assert_int_equal(json_int_at(r.json, "1", "power_limit_mw"), 300000);
  resp_free(&r);
  post_leased("0123456789abcdef0123456789abcdef", "/leases/renew", &r);
  EXPECT(r, 410, "no such lease");
  resp_free(&r);
  uds("POST", "/leases/renew", &r);
  EXPECT(r, 400, "header 'X-Zeus-Lease' is required");
  resp_free(&r);
  http(g_sock, 0, "DELETE", "/leases", "X-Zeus-Lease: 0123\r\n", NULL, &r);
  EXPECT(r, 410, NULL);
  resp_free(&r);
  free(a);
  free(b);
  zeus_daemon_close(d);
}

static char *token(const char *sub, unsigned scopes, long long exp_off) {
  char *t;
  assert_zeus_ok(zeus__jwt_sign(KEY, sizeof KEY - 1, sub, scopes, exp_off != 0, (long long)time(NULL) + exp_off, &t));
  return t;
}

static void bearer(const char *method, const char *target, const char *tok, resp *r) {
  char h[9000];
  snprintf(h, sizeof h, "Authorization: Bearer %s\r\n", tok);
  http(g_sock, 0, method, target, tok ? h : NULL, NULL, r);
}

static void auth_matrix_of_tokens_and_scopes(void **state) {
  (void)state;
  zeus_daemon *d = start(ZEUS_DAEMON_GPU_CONTROL | ZEUS_DAEMON_GPU_READ, true, false);
  resp r;
  uds("GET", "/discover", &r);
  EXPECT(r, 200, "\"auth_required\":true");
  resp_free(&r);
  uds("GET", "/time", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  bearer("GET", "/gpu/get_power", NULL, &r);
  EXPECT(r, 401, "Authentication required");
  assert_non_null(strstr(r.head, "WWW-Authenticate: Bearer"));
  resp_free(&r);
  bearer("GET", "/gpu/get_power", "not-a-valid-jwt", &r);
  EXPECT(r, 401, "Invalid token");
  resp_free(&r);
  char *expired = token("alice", ZEUS_DAEMON_GPU_READ, -10);
  bearer("GET", "/gpu/get_power", expired, &r);
  EXPECT(r, 401, "Token has expired.");
  resp_free(&r);
  char *reader = token("alice", ZEUS_DAEMON_GPU_READ, 3600);
  char *tampered = strdup(reader);
  tampered[strlen(tampered) - 3] ^= 1;
  bearer("GET", "/gpu/get_power", tampered, &r);
  EXPECT(r, 401, "Invalid token");
  resp_free(&r);
  char *other_key;
  assert_zeus_ok(
      zeus__jwt_sign((const unsigned char *)"another key", 11, "alice", ZEUS_DAEMON_GPU_READ, false, 0, &other_key));
  bearer("GET", "/gpu/get_power", other_key, &r);
  EXPECT(r, 401, "signature mismatch");
  resp_free(&r);
  bearer("GET", "/gpu/get_power", reader, &r);
  EXPECT(r, 200, "power_mw");
  resp_free(&r);
  bearer("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true", reader, &r);
  EXPECT(r, 403, "Token for user 'alice' lacks required scope 'gpu-control'. Token scopes: ['gpu-read']");
  resp_free(&r);
  bearer("GET", "/cpu/get_power", reader, &r);
  EXPECT(r, 404, "cpu-read"); /* a disabled group is 404 whatever the token */
  resp_free(&r);
  char *admin = token("root-bob", ZEUS_DAEMON_GPU_CONTROL | ZEUS_DAEMON_GPU_READ, 0);
  bearer("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000&block=true", admin, &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  bearer("GET", "/leases", reader, &r); /* listing holders needs gpu-read or gpu-control */
  EXPECT(r, 200, "\"user\":\"root-bob\"");
  resp_free(&r);
  bearer("POST", "/leases", reader, &r);
  EXPECT(r, 403, "gpu-control");
  resp_free(&r);
  bearer("GET", "/auth/whoami", NULL, &r);
  EXPECT(r, 401, NULL);
  resp_free(&r);
  bearer("GET", "/auth/whoami", reader, &r);
  EXPECT(r, 200, "\"sub\":\"alice\"");
  assert_non_null(strstr(r.body, "\"scopes\":[\"gpu-read\"]"));
  assert_true(json_int_at(r.json, "exp", NULL) > time(NULL));
  resp_free(&r);
  bearer("GET", "/auth/whoami", admin, &r);
  EXPECT(r, 200, "root-bob");
  assert_null(json_object_get(r.json, "exp")); /* issued with --expires never */
  resp_free(&r);
  free(expired);
  free(reader);
  free(tampered);
  free(other_key);
  free(admin);
  zeus_daemon_close(d);
}

/* ---- power streams: zeusd's per-device SSE events ---- */

static long long wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A stream read the way an SSE client reads one: events end at a blank line; "data: " lines carry
 * the JSON; lines starting with ':' are comments. HTTP/1.0, so the body is the bare event text. */
typedef struct sse {
  int fd;
  char buf[1 << 16];
  size_t len;
  unsigned comments;
} sse;

static void sse_open(sse *s, const char *target) {
  memset(s, 0, sizeof *s);
  s->fd = connect_to(g_sock, 0);
  assert_true(s->fd >= 0);
  char req[256];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", target);
  assert_true(write(s->fd, req, (size_t)n) == n);
  double deadline = mono_s() + 10;
  char *end = NULL;
  while (!(end = strstr(s->buf, "\r\n\r\n")) && mono_s() < deadline) {
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    if (poll(&p, 1, 200) <= 0) continue;
    ssize_t k = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
    if (k <= 0) break;
    s->len += (size_t)k;
    s->buf[s->len] = '\0';
  }
  if (!end) fail_msg("no reply headers from %s: '%s'", target, s->buf);
  int status = 0;
  sscanf(s->buf, "HTTP/1.%*d %d", &status);
  if (status != 200) fail_msg("%s: HTTP %d: %s", target, status, s->buf);
  assert_non_null(strstr(s->buf, "Content-Type: text/event-stream"));
  size_t head = (size_t)(end + 4 - s->buf);
  memmove(s->buf, s->buf + head, s->len - head + 1);
  s->len -= head;
}

/* The next data event's JSON, or NULL when none came within timeout_s. Fails on anything that is
 * not one "data: " line or comment lines, ended by a blank line. */
static json_t *sse_next(sse *s, double timeout_s) {
  double deadline = mono_s() + timeout_s;
  for (;;) {
    char *end;
    while ((end = strstr(s->buf, "\n\n"))) {
      *end = '\0';
      json_t *j = NULL;
      for (char *line = s->buf, *nl; line; line = nl) {
        nl = strchr(line, '\n');
        if (nl) *nl++ = '\0';
        if (line[0] == ':') {
          s->comments++;
        } else if (strncmp(line, "data: ", 6) == 0 && !j) {
          json_error_t e;
          if (!(j = json_loads(line + 6, 0, &e))) fail_msg("event data is not JSON: '%s'", line);
        } else {
          fail_msg("unexpected line in an SSE event: '%s'", line);
        }
      }
      size_t used = (size_t)(end + 2 - s->buf);
      memmove(s->buf, s->buf + used, s->len - used + 1);
      s->len -= used;
      if (j) return j;
    }
    double left = deadline - mono_s();
    if (left <= 0) return NULL;
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
    ssize_t k = read(s->fd, s->buf + s->len, sizeof s->buf - 1 - s->len);
    if (k <= 0) fail_msg("the stream ended");
    s->len += (size_t)k;
    s->buf[s->len] = '\0';
  }
}

static void sse_close(sse *s) { close(s->fd); }

/* Checks a GPU event's shape (exactly zeusd's three integer keys) and its time; returns gpu_id. */
static long long gpu_event(json_t *j, long long since_ms, unsigned *mw) {
  if (!j) fail_msg("no GPU event within the time allowed");
  assert_int_equal(json_object_size(j), 3);
  long long ts = json_int_at(j, "timestamp_ms", NULL), id = json_int_at(j, "gpu_id", NULL);
  long long p = json_int_at(j, "power_mw", NULL);
  if (ts < since_ms - 5 || ts > wall_ms() + 5) fail_msg("timestamp_ms %lld outside [%lld, now]", ts, since_ms);
  assert_true(p > 0 && p < 10000000);
  *mw = (unsigned)p;
  return id;
}

static void gpu_stream_sends_one_event_per_gpu_when_its_power_changes(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  unsigned idle0, idle1, mw;
  assert_zeus_ok(zeus_gpu_power(d->dev, 0, ZEUS_POWER_INSTANT, &idle0));
  assert_zeus_ok(zeus_gpu_power(d->dev, 1, ZEUS_POWER_INSTANT, &idle1));
  long long t0 = wall_ms();
  sse s;
  sse_open(&s, "/gpu/stream_power");
  /* Every GPU's reading first, one event each, in id order. */
  json_t *j = sse_next(&s, 5);
  assert_int_equal(gpu_event(j, t0, &mw), 0);
  assert_int_equal(mw, idle0);
  long long ts0 = json_int_at(j, "timestamp_ms", NULL);
  json_decref(j);
  j = sse_next(&s, 5);
  assert_int_equal(gpu_event(j, t0, &mw), 1);
  assert_int_equal(mw, idle1);
  assert_true(json_int_at(j, "timestamp_ms", NULL) >= ts0);
  json_decref(j);
  /* Idle power stands still: no event for 1.5 s (75 samples at 50 Hz), only keepalive comments. */
  assert_null(sse_next(&s, 1.5));
  assert_true(s.comments >= 1);
  /* GPU 1 busy: its events come, with its new power; GPU 0 stays quiet. */
  zeus_sim_node *node = zeus_devices_sim_node(d->dev);
  assert_non_null(node);
  long long t1 = wall_ms();
  assert_zeus_ok(zeus_sim_gpu_set_load(node, 1, true));
  unsigned busy_events = 0;
  long long last_ts = t1;
  while ((j = sse_next(&s, busy_events ? 0.5 : 5))) {
    assert_int_equal(gpu_event(j, t1, &mw), 1);
    assert_true(mw > idle1);
    long long ts = json_int_at(j, "timestamp_ms", NULL);
    assert_true(ts >= last_ts);
    last_ts = ts;
    json_decref(j);
    if (++busy_events == 3) break;
  }
  assert_true(busy_events >= 1);
  /* Back to idle: GPU 1's idle power again. */
  long long t2 = wall_ms();
  assert_zeus_ok(zeus_sim_gpu_set_load(node, 1, false));
  bool back = false;
  double deadline = mono_s() + 5;
  while (!back && mono_s() < deadline && (j = sse_next(&s, 5))) {
    long long id = gpu_event(j, t1, &mw);
    assert_int_equal(id, 1);
    back = mw == idle1 && json_int_at(j, "timestamp_ms", NULL) >= t2 - 5;
    json_decref(j);
  }
  assert_true(back);
  sse_close(&s);
  zeus_daemon_close(d);
}

/* A still stream sends only keepalive comments; they are what shows that its client went away, so
 * its thread and stream slot come back within about a second, not when the power next changes. */
static void gpu_stream_of_a_gone_client_ends_within_seconds_while_power_stands_still(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  sse s;
  unsigned mw, open = 0;
  unsigned long long refused, timed_out;
  sse_open(&s, "/gpu/stream_power?gpu_ids=0");
  json_t *j = sse_next(&s, 5);
  assert_int_equal(gpu_event(j, 0, &mw), 0);
  json_decref(j);
  zeus__daemon_conn_stats(d, &open, &refused, &timed_out);
  assert_int_equal(open, 1);
  sse_close(&s);
  double t0 = mono_s();
  while (mono_s() - t0 < 5) {
    zeus__daemon_conn_stats(d, &open, &refused, &timed_out);
    if (!open) break;
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  if (open) fail_msg("the stream of a client that left is still open after %.1f s", mono_s() - t0);
  assert_true(mono_s() - t0 < 3.5);
  zeus_daemon_close(d);
}

static void gpu_stream_gpu_ids_choose_and_bad_ids_are_400_as_zeusd(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  sse s;
  unsigned mw;
  long long t0 = wall_ms();
  /* Duplicates and spaces are taken as zeusd takes them (" 1 ,1" is GPU 1). */
  sse_open(&s, "/gpu/stream_power?gpu_ids=%201%20,1");
  json_t *j = sse_next(&s, 5);
  assert_int_equal(gpu_event(j, t0, &mw), 1);
  json_decref(j);
  zeus_sim_node *node = zeus_devices_sim_node(d->dev);
  assert_zeus_ok(zeus_sim_gpu_set_load(node, 0, true)); /* GPU 0 changes; this stream does not carry it */
  assert_null(sse_next(&s, 1.0));
  assert_zeus_ok(zeus_sim_gpu_set_load(node, 0, false));
  sse_close(&s);
  static const struct {
    const char *target, *error;
  } bad[] = {
      {"/gpu/stream_power?gpu_ids=9", "Unknown GPU indices: [9]. Available: [0, 1]"},
      {"/gpu/stream_power?gpu_ids=7,0,12,7", "Unknown GPU indices: [7, 12]. Available: [0, 1]"},
      {"/gpu/stream_power?gpu_ids=", "gpu_ids must contain at least one GPU index"},
      {"/gpu/stream_power?gpu_ids=0,,1", "gpu_ids contains an empty GPU index"},
      {"/gpu/stream_power?gpu_ids=0,x1", "Invalid GPU index: x1"},
      {"/gpu/stream_power?gpu_ids=-1", "Invalid GPU index: -1"},
      {"/cpu/stream_power?cpu_ids=0,5", "Unknown CPU indices: [5]. Available: [0, 1]"},
      {"/cpu/stream_power?cpu_ids=,", "cpu_ids contains an empty CPU index"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    resp r;
    uds("GET", bad[i].target, &r);
    if (r.status != 400) fail_msg("%s: HTTP %d, expected 400: %s", bad[i].target, r.status, r.body);
    assert_int_equal(json_object_size(r.json), 1);
    const char *msg = json_string_value(json_object_get(r.json, "error"));
    if (!msg || strcmp(msg, bad[i].error) != 0)
      fail_msg("%s: '%s', expected '%s'", bad[i].target, r.body, bad[i].error);
    resp_free(&r);
  }
  zeus_daemon_close(d);
}

/* Writes a RAPL counter in place, the same width (the daemon holds the file open and preads it). */
static void rapl_set(const char *zone, const char *value) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s/energy_uj", g_rapl, zone);
  int fd = open(p, O_WRONLY);
  assert_true(fd >= 0);
  assert_true(pwrite(fd, value, strlen(value), 0) == (ssize_t)strlen(value));
  close(fd);
}

/* Checks a CPU event's shape (zeusd's four keys) and time; returns cpu_id. */
static long long cpu_event(json_t *j, long long since_ms, long long *cpu_mw, long long *dram_mw /* -1: null */) {
  if (!j) fail_msg("no CPU event within the time allowed");
  assert_int_equal(json_object_size(j), 4);
  long long ts = json_int_at(j, "timestamp_ms", NULL), id = json_int_at(j, "cpu_id", NULL);
  if (ts < since_ms - 5 || ts > wall_ms() + 5) fail_msg("timestamp_ms %lld outside [%lld, now]", ts, since_ms);
  *cpu_mw = json_int_at(j, "cpu_mw", NULL);
  json_t *dr = json_object_get(j, "dram_mw");
  if (!json_is_null(dr) && !json_is_integer(dr)) fail_msg("dram_mw is neither an integer nor null");
  *dram_mw = json_is_null(dr) ? -1 : json_integer_value(dr);
  return id;
}

static void cpu_stream_sends_one_event_per_package_in_mw(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  long long t0 = wall_ms(), cmw, dmw;
  sse s;
  sse_open(&s, "/cpu/stream_power");
  /* One period later (two counter readings make a power), each package once: the counters stand
   * still, so 0 mW; package 1 has no DRAM zone: null. */
  json_t *j = sse_next(&s, 5);
  assert_int_equal(cpu_event(j, t0, &cmw, &dmw), 0);
  assert_int_equal(cmw, 0);
  assert_int_equal(dmw, 0);
  json_decref(j);
  j = sse_next(&s, 5);
  assert_int_equal(cpu_event(j, t0, &cmw, &dmw), 1);
  assert_int_equal(cmw, 0);
  assert_int_equal(dmw, -1);
  json_decref(j);
  assert_null(sse_next(&s, 0.5));
  /* Package 0 draws 1 J (and its DRAM 1 mJ) at once: over one 20 ms period that is about
   * 50 000 mW (1 mW DRAM per ms of the period); then it stands still again, and 0 mW goes out. */
  long long t1 = wall_ms();
  rapl_set("intel-rapl:0", "124456789\n");
  rapl_set("intel-rapl:0:0", "6555\n");
  bool pkg_seen = false, dram_seen = false, zero_again = false;
  double deadline = mono_s() + 5;
  while (!zero_again && mono_s() < deadline && (j = sse_next(&s, 5))) {
    long long id = cpu_event(j, t1, &cmw, &dmw);
    json_decref(j);
    assert_int_equal(id, 0); /* package 1 stands still: nothing more from it */
    /* 1 J over a period between 5 ms and 1 s: mW, not W or uW. */
    if (cmw) assert_true(cmw >= 1000 && cmw <= 200000);
    if (dmw > 0) assert_true(dmw >= 1 && dmw <= 200);
    pkg_seen = pkg_seen || cmw > 0;
    dram_seen = dram_seen || dmw > 0;
    zero_again = pkg_seen && dram_seen && cmw == 0 && dmw == 0;
  }
  assert_true(pkg_seen && dram_seen && zero_again);
  sse_close(&s);
  /* cpu_ids chooses: package 1 alone. */
  sse_open(&s, "/cpu/stream_power?cpu_ids=1");
  j = sse_next(&s, 5);
  assert_int_equal(cpu_event(j, t1, &cmw, &dmw), 1);
  json_decref(j);
  sse_close(&s);
  zeus_daemon_close(d);
  rapl_set("intel-rapl:0", "123456789\n"); /* as the other tests expect them */
  rapl_set("intel-rapl:0:0", "5555\n");
}

static void cpu_routes_read_rapl(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  resp r;
  uds("GET", "/cpu/get_cumulative_energy?cpu=true&dram=true", &r);
  EXPECT(r, 200, NULL);
  assert_int_equal(json_int_at(r.json, "0", "cpu_energy_uj"), 123456789);
  assert_int_equal(json_int_at(r.json, "0", "dram_energy_uj"), 5555);
  assert_int_equal(json_int_at(r.json, "1", "cpu_energy_uj"), 42000);
  assert_true(json_is_null(json_object_get(json_object_get(r.json, "1"), "dram_energy_uj")));
  resp_free(&r);
  uds("GET", "/cpu/get_cumulative_energy?cpu_ids=0&cpu=false&dram=true", &r);
  EXPECT(r, 200, NULL);
  assert_true(json_is_null(json_object_get(json_object_get(r.json, "0"), "cpu_energy_uj")));
  assert_null(json_object_get(r.json, "1"));
  resp_free(&r);
  uds("GET", "/cpu/get_power?cpu_ids=0", &r);
  EXPECT(r, 200, NULL);
  assert_int_equal(json_int_at(json_object_get(r.json, "power_mw"), "0", "cpu_mw"),
                   0); /* the fake counter stands still */
  resp_free(&r);
  zeus_daemon_close(d);
}

static void legacy_path_form_and_nonblocking_writes_apply(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  resp r;
  http(g_sock, 0, "POST", "/gpu/1/set_power_limit", "Content-Type: application/json\r\n",
       "{\"power_limit_mw\": 175000, \"block\": true}", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  uds("POST", "/gpu/0/set_power_limit?power_limit_mw=225000&block=false", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  uds("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=0,1&min_clock_mhz=900&max_clock_mhz=900&block=false", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  /* A later read sees the queued write: the queue runs before any other device call. */
  uds("GET", "/gpu/get_power_limit", &r);
  assert_int_equal(json_int_at(r.json, "0", "power_limit_mw"), 225000);
  assert_int_equal(json_int_at(r.json, "1", "power_limit_mw"), 175000);
  resp_free(&r);
  uds("POST", "/gpu/9/set_power_limit?power_limit_mw=225000", &r);
  EXPECT(r, 400, "GPU index 9 does not exist");
  resp_free(&r);
  zeus_daemon_close(d);
}

static void tcp_lease_lapses_and_is_given_back_within_a_second(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, true);
  int port = zeus_daemon_tcp_port(d);
  assert_true(port > 0);
  resp r;
  http(NULL, port, "POST", "/leases?ttl_s=0", NULL, NULL, &r);
  EXPECT(r, 400, "a TCP lease needs a time to live > 0");
  resp_free(&r);
  char *lease = new_lease(NULL, port, "?ttl_s=1");
  char h[128];
  snprintf(h, sizeof h, "X-Zeus-Lease: %s\r\n", lease);
  http(NULL, port, "POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=150000", h, NULL, &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* Without renewal: back to 300 W once 1 s has passed, and within a second after that. */
  for (;;) {
    http(NULL, port, "GET", "/gpu/get_power_limit?gpu_ids=0", NULL, NULL, &r);
    long long v = json_int_at(r.json, "0", "power_limit_mw");
    resp_free(&r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    if (v == 300000) {
      assert_true(dt >= 0.9);
      break;
    }
    if (dt > 2.5) fail_msg("the lapsed lease's change was not given back after %.2f s", dt);
    usleep(20 * 1000);
  }
  http(NULL, port, "POST", "/leases/renew", h, NULL, &r);
  EXPECT(r, 410, NULL);
  resp_free(&r);
  /* A TCP change without a lease (an original zeusd client) is held by nobody. */
  http(NULL, port, "POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=250000", NULL, NULL, &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  uds("GET", "/leases", &r);
  EXPECT(r, 200, "\"kind\":\"anonymous\"");
  resp_free(&r);
  char *other = new_lease(g_sock, 0, NULL);
  post_leased(other, "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=200000", &r);
  EXPECT(r, 200, NULL); /* no override needed over an anonymous change */
  resp_free(&r);
  free(other);
  free(lease);
  zeus_daemon_close(d);
}

typedef struct worker_arg {
  int id, ok, busy, other;
} worker_arg;

/* One client: its own lease and connections; reads, and writes with override. */
static void *client_main(void *p) {
  worker_arg *a = p;
  resp r;
  http(g_sock, 0, "POST", "/leases", NULL, NULL, &r);
  char lease[64] = "";
  if (r.status == 200) snprintf(lease, sizeof lease, "%s", json_string_value(json_object_get(r.json, "lease")));
  else a->other++;
  resp_free(&r);
  char h[128], target[160];
  snprintf(h, sizeof h, "X-Zeus-Lease: %s\r\n", lease);
  for (int k = 0; k < 5; k++) {
    http(g_sock, 0, "GET", k % 2 ? "/gpu/get_power_limit" : "/discover", NULL, NULL, &r);
    if (r.status == 200) a->ok++; else a->other++;
    resp_free(&r);
    snprintf(target, sizeof target, "/gpu/set_power_limit?gpu_ids=%d&power_limit_mw=%d%s", a->id % 2,
             100000 + 1000 * a->id, k % 2 ? "&override=true" : "");
    http(g_sock, 0, "POST", target, h, NULL, &r);
    if (r.status == 200) a->ok++; else if (r.status == 409) a->busy++; else a->other++;
    resp_free(&r);
  }
  http(g_sock, 0, "POST", "/leases/release", h, NULL, &r);
  if (r.status == 200) a->ok++; else a->other++;
  resp_free(&r);
  return NULL;
}

static void hundred_concurrent_clients_are_served_and_leave_nothing_changed(void **state) {
  (void)state;
  g_per_client_next = 1000; /* every client here is this process's uid */
  zeus_daemon *d = start(0, false, false);
  enum { N = 100 };
  pthread_t th[N];
  worker_arg args[N];
  for (int i = 0; i < N; i++) {
    args[i] = (worker_arg){.id = i};
    assert_int_equal(pthread_create(&th[i], NULL, client_main, &args[i]), 0);
  }
  int ok = 0, busy = 0, other = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    ok += args[i].ok;
    busy += args[i].busy;
    other += args[i].other;
  }
  /* Every request answered: 200, or 409 for a change without override over another live lease. */
  assert_int_equal(other, 0);
  assert_int_equal(ok + busy, N * 11);
  assert_true(ok >= N * 8); /* reads, overrides and releases always succeed */
  resp r;
  uds("GET", "/gpu/get_power_limit", &r);
  assert_int_equal(json_int_at(r.json, "0", "power_limit_mw"), 300000);
  assert_int_equal(json_int_at(r.json, "1", "power_limit_mw"), 300000);
  resp_free(&r);
  uds("GET", "/leases", &r);
  EXPECT(r, 200, "{\"leases\":[]}");
  resp_free(&r);
  unsigned live;
  unsigned long long restores;
  zeus_daemon_lease_stats(d, &live, &restores);
  assert_int_equal(live, 0);
  assert_true(restores >= 2);
  zeus_daemon_close(d);
}

typedef struct counted {
  unsigned long long set_200, leases_200, discover_200, other_404;
} counted;

static void count_cb(const char *route, int status, unsigned long long n, void *u) {
  counted *c = u;
  if (!strcmp(route, "/gpu/set_power_limit") && status == 200) c->set_200 += n;
  if (!strcmp(route, "/leases") && status == 200) c->leases_200 += n;
  if (!strcmp(route, "/discover") && status == 200) c->discover_200 += n;
  if (!strcmp(route, "(unknown)") && status == 404) c->other_404 += n;
}

/* The lease table is bounded (1024): the next lease, and a change that would need a new holder,
 * get 503 saying so; a lease released makes room again. */
static void full_lease_table_is_503_until_one_leaves(void **state) {
  (void)state;
  g_state_path_next = ""; /* no state file: 1024 leases, 1024 fsyncs otherwise */
  g_per_client_next = 100000;
  zeus_daemon *d = start(0, false, false);
  /* Run as root, the whole table; otherwise all but the 64 kept for root (docs/daemon.md). */
  bool root = getuid() == 0;
  enum { TABLE = 1024, RESERVED = 64 };
  const unsigned MAX = root ? TABLE : TABLE - RESERVED;
  char *first = NULL;
  unsigned granted = 0;
  resp r;
  for (unsigned i = 0; i <= MAX + 5; i++) {
    http(g_sock, 0, "POST", "/leases", NULL, NULL, &r);
    if (r.status == 503) break;
    EXPECT(r, 200, "\"lease\"");
    if (!first) first = strdup(json_string_value(json_object_get(r.json, "lease")));
    granted++;
    resp_free(&r);
  }
  assert_int_equal(granted, MAX);
  EXPECT(r, 503, root ? "the daemon holds 1024 leases, its limit" : "the last 64 of its 1024 are kept for root");
  resp_free(&r);
  /* A change without a lease header would make this process a holder: refused too, nothing set. */
  uds("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000", &r);
  EXPECT(r, 503, root ? "1024 leases" : "kept for root");
  resp_free(&r);
  uds("GET", "/gpu/get_power_limit?gpu_ids=0", &r);
  EXPECT(r, 200, "\"power_limit_mw\":300000");
  resp_free(&r);
  post_leased(first, "/leases/release", &r);
  EXPECT(r, 200, "\"released\":true");
  resp_free(&r);
  char *again = new_lease(g_sock, 0, NULL);
  post_leased(again, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  free(again);
  free(first);
  zeus_daemon_close(d);
}

/* The route table server.c routes by: unique paths, a method and a handler each, zeusd's older
 * /gpu/<n>/<op> form for exactly the GPU writes, and only /auth/whoami tied to a signing key. */
static void route_table_is_consistent(void **state) {
  (void)state;
  unsigned legacy = 0;
  for (int r = 0; r < ZEUS__R_COUNT; r++) {
    const zeus__droute_def *rd = &zeus__droute_table[r];
    assert_non_null(rd->path);
    assert_non_null(rd->handler);
    assert_true(rd->flags & ZEUS__RF_METHODS);
    if (r == ZEUS__R_OTHER) continue;
    assert_int_equal(rd->path[0], '/');
    for (int o = 0; o < r; o++)
      if (!strcmp(rd->path, zeus__droute_table[o].path)) fail_msg("%s twice in the route table", rd->path);
    if (rd->flags & ZEUS__RF_LEGACY) {
      legacy++;
      assert_true(r >= ZEUS__R_GPU_SET_POWER_LIMIT && r <= ZEUS__R_GPU_RESET_LOCKS);
      assert_int_equal(rd->group, ZEUS_DAEMON_GPU_CONTROL);
    }
    assert_int_equal(!!(rd->flags & ZEUS__RF_WITH_KEY), r == ZEUS__R_WHOAMI);
    /* A method a route takes without a token must be one of a route open to all (discover, time). */
    if ((rd->flags & ZEUS__RF_GET) && !rd->get_scopes) assert_true(r == ZEUS__R_DISCOVER || r == ZEUS__R_TIME);
    /* /metrics: any valid token when tokens are on (it counts requests; it changes nothing). */
    if (r == ZEUS__R_METRICS) assert_true(rd->get_scopes == ZEUS__DSCOPE_ANY && rd->flags == ZEUS__RF_GET);
    if ((rd->flags & (ZEUS__RF_POST | ZEUS__RF_DELETE)) && !rd->write_scopes)
      fail_msg("%s: a write without a scope", rd->path);
  }
  assert_int_equal(legacy, 7);
  assert_int_equal(ZEUS__R_OTHER, ZEUS__R_COUNT - 1);
}

static void counters_count_by_route_and_status(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  resp r;
  for (int i = 0; i < 3; i++) {
    uds("GET", "/discover", &r);
    resp_free(&r);
  }
  uds("GET", "/nope", &r);
  resp_free(&r);
  uds("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000", &r);
  resp_free(&r);
  counted c = {0};
  zeus_daemon_counters(d, count_cb, &c);
  assert_int_equal(c.discover_200, 3);
  assert_int_equal(c.other_404, 1);
  assert_int_equal(c.set_200, 1);
  assert_int_equal(c.leases_200, 0);
  zeus_daemon_close(d);
}

static double metric_value(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *p = text; (p = strstr(p, series)); p += n)
    if ((p == text || p[-1] == '\n') && p[n] == ' ') return strtod(p + n + 1, NULL);
  fail_msg("no series %s in:\n%s", series, text);
  return -1;
}

/* GET /metrics: requests by route template and code, live leases, restores; a token when tokens
 * are on; the client's path never becomes a label. */
static void metrics_count_requests_leases_and_restores(void **state) {
  (void)state;
  zeus_daemon *d = start(0, false, false);
  resp r;
  for (int i = 0; i < 2; i++) {
    uds("GET", "/discover", &r);
    resp_free(&r);
  }
  uds("GET", "/no-such-route-xyzzy", &r);
  resp_free(&r);
  char *lease = new_lease(g_sock, 0, NULL);
  post_leased(lease, "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=200000", &r);
  EXPECT(r, 200, NULL);
  resp_free(&r);
  uds("GET", "/metrics", &r);
  EXPECT(r, 200, "# TYPE zeus_daemon_requests_total counter");
  assert_non_null(strstr(r.head, "text/plain; version=0.0.4"));
  assert_int_equal((int)metric_value(r.body, "zeus_daemon_requests_total{route=\"/discover\",code=\"200\"}"), 2);
  assert_int_equal((int)metric_value(r.body, "zeus_daemon_requests_total{route=\"other\",code=\"404\"}"), 1);
  assert_int_equal((int)metric_value(r.body, "zeus_daemon_requests_total{route=\"/gpu/set_power_limit\",code=\"200\"}"), 1);
  assert_int_equal((int)metric_value(r.body, "zeus_daemon_leases"), 1);
  assert_int_equal((int)metric_value(r.body, "zeus_daemon_restores_total"), 0);
  assert_null(strstr(r.body, "xyzzy"));
  resp_free(&r);
  post_leased(lease, "/leases/release", &r);
  EXPECT(r, 200, "\"released\":true");
  resp_free(&r);
  uds("GET", "/metrics", &r);
  EXPECT(r, 200, NULL);
  assert_int_equal((int)metric_value(r.body, "zeus_daemon_leases"), 0);
  assert_int_equal((int)metric_value(r.body, "zeus_daemon_restores_total"), 1);
  assert_int_equal((int)metric_value(r.body, "zeus_daemon_requests_total{route=\"/metrics\",code=\"200\"}"), 1);
  resp_free(&r);
  uds("POST", "/metrics", &r);
  EXPECT(r, 405, NULL);
  resp_free(&r);
  free(lease);
  zeus_daemon_close(d);
  /* With tokens on, /metrics needs one (any scope). */
  d = start(0, true, false);
  uds("GET", "/metrics", &r);
  EXPECT(r, 401, NULL);
  resp_free(&r);
  zeus_daemon_close(d);
}

static void socket_is_made_with_the_mode_asked_and_stale_ones_replaced(void **state) {
  (void)state;
  zeus_devices_opts dev = {.backend = "sim"};
  zeus_daemon_opts o;
  zeus_daemon_opts_init(&o);
  o.socket_path = g_sock;
  o.socket_mode = 0660;
  o.socket_gid = getgid();
  o.devices = &dev;
  zeus_daemon *d, *d2;
  assert_zeus_ok(zeus_daemon_open(&d, &o));
  struct stat st;
  assert_int_equal(lstat(g_sock, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0660);
  /* A second daemon on the same live socket is refused. */
  assert_zeus_err(zeus_daemon_open(&d2, &o), ZEUS_EEXIST, "already listens");
  zeus_daemon_close(d);
  assert_int_equal(lstat(g_sock, &st), -1); /* removed on close */
  /* A stale socket (nothing listening) is replaced; a regular file is not. */
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", g_sock);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  close(fd);
  assert_zeus_ok(zeus_daemon_open(&d, &o));
  zeus_daemon_close(d);
  zeus_test_write_file(g_sock, "not a socket");
  assert_zeus_err(zeus_daemon_open(&d, &o), ZEUS_EEXIST, "is not a socket");
  unlink(g_sock);
  o.tcp_address = "0.0.0.0:0";
  o.socket_path = NULL;
  assert_zeus_err(zeus_daemon_open(&d, &o), ZEUS_EINVAL, "refusing unauthenticated TCP");
  o.tcp_address = "localhost-is-not:a-port";
  assert_zeus_err(zeus_daemon_open(&d, &o), ZEUS_EINVAL, "TCP port");
  o.tcp_address = NULL;
  assert_zeus_err(zeus_daemon_open(&d, &o), ZEUS_EINVAL, "needs a Unix socket path or a TCP address");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(discover_lists_devices_groups_and_auth),
      cmocka_unit_test(gpu_read_routes_answer_per_gpu),
      cmocka_unit_test(gpu_write_routes_change_and_release_gives_back),
      cmocka_unit_test(locked_clocks_are_read_and_a_replaced_lock_is_given_back),
      cmocka_unit_test(bad_input_is_400_naming_the_parameter),
      cmocka_unit_test(status_codes_404_405_409_410_413),
      cmocka_unit_test(auth_matrix_of_tokens_and_scopes),
      cmocka_unit_test(gpu_stream_sends_one_event_per_gpu_when_its_power_changes),
      cmocka_unit_test(gpu_stream_of_a_gone_client_ends_within_seconds_while_power_stands_still),
      cmocka_unit_test(gpu_stream_gpu_ids_choose_and_bad_ids_are_400_as_zeusd),
      cmocka_unit_test(cpu_stream_sends_one_event_per_package_in_mw),
      cmocka_unit_test(cpu_routes_read_rapl),
      cmocka_unit_test(legacy_path_form_and_nonblocking_writes_apply),
      cmocka_unit_test(tcp_lease_lapses_and_is_given_back_within_a_second),
      cmocka_unit_test(hundred_concurrent_clients_are_served_and_leave_nothing_changed),
      cmocka_unit_test(full_lease_table_is_503_until_one_leaves),
      cmocka_unit_test(route_table_is_consistent),
      cmocka_unit_test(counters_count_by_route_and_status),
      cmocka_unit_test(metrics_count_requests_leases_and_restores),
      cmocka_unit_test(socket_is_made_with_the_mode_asked_and_stale_ones_replaced),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, setup, NULL);
}
