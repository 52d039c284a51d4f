/* Load generator for zeus bso-server: C clients (threads, one keep-alive loopback connection
 * each) spread over J jobs, each repeating predict (GET /jobs/batch_size) + report (POST /report
 * of a finished trial) pairs; the server runs in this process on each backend in turn: SQLite
 * (a file in a temporary folder) and PostgreSQL (a throwaway server from scripts/pg-temp.sh, or
 * $ZEUS_BENCH_PG_URL; skipped with the reason when neither is available).
 *
 *   bench_bso_server                 env BENCH_CLIENTS (64), BENCH_JOBS (8), BENCH_PAIRS (per
 *                                    client, 100), BENCH_THREADS (server HTTP threads, 8)
 *
 * Prints pairs per second and the p50/p99 latency of a pair. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zeus.h>

static int port, njobs, npairs;
static double *lat;
static int failures;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int connect_lo(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Sends one request and reads the reply; returns the status, body in buf. */
static int http(int fd, const char *method, const char *path, const char *body, char *buf, size_t cap) {
  char req[2048];
  int n = snprintf(req, sizeof req,
                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: %zu\r\n\r\n%s",
                   method, path, body ? strlen(body) : 0, body ? body : "");
  if (write(fd, req, (size_t)n) != n) return -1;
  size_t len = 0;
  char *end = NULL;
  while (!end) {
    ssize_t k = read(fd, buf + len, cap - 1 - len);
    if (k <= 0) return -1;
    len += (size_t)k;
    buf[len] = '\0';
    end = strstr(buf, "\r\n\r\n");
  }
  const char *cl = strcasestr(buf, "content-length:");
  size_t want = cl ? strtoul(cl + 15, NULL, 10) : 0, have = len - (size_t)(end + 4 - buf);
  while (have < want) {
    ssize_t k = read(fd, buf + len, cap - 1 - len);
    if (k <= 0) return -1;
    len += (size_t)k;
    have += (size_t)k;
  }
  buf[len] = '\0';
  int status = atoi(buf + 9);
  memmove(buf, end + 4, have + 1);
  return status;
}

static void *client(void *arg) {
  long c = (long)arg;
  int fd = connect_lo();
  char buf[8192], path[128], body[512];
  for (int i = 0; fd >= 0 && i < npairs; i++) {
    double t0 = now_s();
    snprintf(path, sizeof path, "/jobs/batch_size?job_id=bench-%ld", c % njobs);
    if (http(fd, "GET", path, NULL, buf, sizeof buf) != 200) {
      failures++;
      break;
    }
    long bs = 0, tn = 0;
    const char *p = strstr(buf, "\"batch_size\":"), *q = strstr(buf, "\"trial_number\":");
    if (p) bs = strtol(p + 13, NULL, 10);
    if (q) tn = strtol(q + 15, NULL, 10);
    snprintf(body, sizeof body,
             "{\"job_id\":\"bench-%ld\",\"batch_size\":%ld,\"trial_number\":%ld,\"time\":%g,"
             "\"energy\":%g,\"metric\":0.9,\"current_epoch\":1}",
             c % njobs, bs, tn, 10.0 + (double)bs / 64, 1000.0 + (double)(i % 7));
    if (http(fd, "POST", "/report", body, buf, sizeof buf) != 200) {
      failures++;
      break;
    }
    lat[c * npairs + i] = now_s() - t0;
  }
  if (fd >= 0) close(fd);
  return NULL;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int run(const char *name, const char *url, int nclients, int threads) {
  zeus_bso_server_opts o = {.port = -1, .database = url, .threads = threads};
  zeus_bso_server *s;
  if (zeus_bso_server_open(&s, &o)) {
    printf("%-10s  cannot start: %s\n", name, zeus_errmsg());
    return 1;
  }
  port = zeus_bso_server_port(s);
  int fd = connect_lo();
  char buf[8192], body[1024];
  for (int j = 0; j < njobs; j++) {
    snprintf(body, sizeof body,
             "{\"job_id\":\"bench-%d\",\"job_id_prefix\":\"bench\",\"batch_sizes\":[32,64,128,256,"
             "512],\"default_batch_size\":128,\"max_epochs\":1,\"beta_knob\":null,\"mab_seed\":%d,\"max_power\":300,"
             "\"number_of_gpus\":1,\"gpu_model\":\"A100\"}",
             j, j);
    int st = http(fd, "POST", "/jobs", body, buf, sizeof buf);
    if (st != 201 && st != 200) {
      printf("%-10s  registering: %d %s\n", name, st, buf);
      close(fd);
      zeus_bso_server_close(s);
      return 1;
    }
  }
  close(fd);
  lat = calloc((size_t)nclients * (size_t)npairs, sizeof *lat);
  failures = 0;
  pthread_t *t = calloc((size_t)nclients, sizeof *t);
  double t0 = now_s();
  for (long c = 0; c < nclients; c++) pthread_create(&t[c], NULL, client, (void *)c);
  for (int c = 0; c < nclients; c++) pthread_join(t[c], NULL);
  double el = now_s() - t0;
  size_t n = (size_t)nclients * (size_t)npairs;
  qsort(lat, n, sizeof *lat, cmp_d);
  printf("%-10s  %d clients, %d jobs, %d pairs each: %.0f pairs/s (p50 %.2f ms, p99 %.2f ms)%s\n", name, nclients,
         njobs, npairs, (double)n / el, lat[n / 2] * 1e3, lat[n * 99 / 100] * 1e3, failures ? "  FAILURES" : "");
  free(lat);
  free(t);
  zeus_bso_server_close(s);
  return failures != 0;
}

static int env_int(const char *k, int def) {
  const char *v = getenv(k);
  return v && *v ? atoi(v) : def;
}

int main(void) {
  int nclients = env_int("BENCH_CLIENTS", 64), threads = env_int("BENCH_THREADS", 8);
  njobs = env_int("BENCH_JOBS", 8);
  npairs = env_int("BENCH_PAIRS", 100);
  (void)mu;
  char dir[] = "/tmp/zeus-bench-bso.XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char url[256];
  snprintf(url, sizeof url, "sqlite://%s/bso.db", dir);
  int rc = run("sqlite", url, nclients, threads);
  const char *pg = getenv("ZEUS_BENCH_PG_URL");
  char cmd[1024], pgurl[512] = "";
  bool started = false;
  if (!pg) {
    snprintf(cmd, sizeof cmd, "%s/scripts/pg-temp.sh start %s/pg 2>&1 | tail -n 1", ZEUS_SOURCE_DIR, dir);
    FILE *f = popen(cmd, "r");
    if (f && fgets(pgurl, sizeof pgurl, f)) pgurl[strcspn(pgurl, "\n")] = '\0';
    if (f) pclose(f);
    started = strncmp(pgurl, "postgresql://", 13) == 0;
    if (started)
      pg = pgurl;
    else
      printf("postgresql  skipped: no throwaway server (scripts/pg-temp.sh: %s)\n", pgurl);
  }
  if (pg) rc |= run("postgresql", pg, nclients, threads);
  if (started) {
    snprintf(cmd, sizeof cmd, "%s/scripts/pg-temp.sh stop %s/pg", ZEUS_SOURCE_DIR, dir);
    if (system(cmd) != 0) fprintf(stderr, "bench_bso_server: stopping PostgreSQL failed\n");
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_bso_server: cannot remove %s\n", dir);
  return rc;
}
