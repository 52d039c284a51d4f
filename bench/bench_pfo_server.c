/* Load generator for the Perseus server: W ranks of one job (8 pipeline stages, AllMaxFrequency)
 * for R rounds over keep-alive loopback connections (GET schedule, POST a result of ~3 KB with 10
 * iterations of breakdowns, as the original client sends), driven by one epoll loop. The server
 * runs in a forked child so its CPU time and peak RSS are its own.
 *
 *   bench_pfo_server [W ...]        default: 64 1024 8192; R = 50, 20 from 4,096 ranks on
 *                                   (env BENCH_ROUNDS)
 *   env BENCH_THREADS               server HTTP threads (default: the server's, online CPUs up to 8)
 *   env BENCH_BASELINE=0            skip the baseline runs
 *   env BENCH_POLL=0                skip the runs of the server on libmicrohttpd's poll thread
 *                                   (its event loop before issue 36, ZEUS__PFO_BENCH_LOOP=poll)
 *   env BENCH_IDLE=0                skip the idle table (issue 36): W = 1,024 and 8,192 ranks
 *                                   registering one after another, each keeping its connection
 *                                   open, then 200 GET /info with them open; libmicrohttpd's poll
 *                                   thread (before) beside the server's own epoll loops (now)
 *   env BENCH_TASKS=1               also print each server thread's CPU seconds (registration
 *                                   included) and the load client's CPU per round
 *
 * Every W runs three times in the same process, one after the other: the baseline (the server as
 * it was before issue 28: results parsed through a jansson tree, 16 KiB per connection, started
 * with --max-connections 19000 since its default of 8192 refuses an 8,192-rank job; selected by
 * the bench-only environment variable ZEUS__PFO_BENCH_BASELINE=1 in the server's process), the
 * server on libmicrohttpd's poll thread (as it was before issue 36), then the server as it is.
 * Prints a line per run, then the table: rounds per second, p50/p99 round latency (first GET of a
 * round sent -> last schedule of that round received), the server's CPU per round, the time to
 * register the W ranks (one connection each, as the original client does) and the server's peak
 * RSS (VmHWM). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zeus.h>

typedef struct {
  int fd, rank, round;
  int phase; /* 0: sending GET, 1: reading GET reply, 2: sending POST, 3: reading POST reply, 4: done */
  char *out;
  size_t out_len, out_off;
  char in[16384];
  size_t in_len;
} client;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The CPU seconds (user + system) process `pid` has used so far; *sys_s: the system part. */
static double cpu_split_s(pid_t pid, double *sys_s) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  double v = 0;
  if (fgets(line, sizeof line, f)) {
    char *p = strrchr(line, ')'); /* after the command name */
    unsigned long ut = 0, st = 0;
    if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
    {
      v = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
      *sys_s = (double)st / (double)sysconf(_SC_CLK_TCK);
    }
  }
  fclose(f);
  return v;
}

static int http_once(int port, const char *req, char *resp, size_t cap) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) { close(fd); return -1; }
  if (write(fd, req, strlen(req)) < 0) { close(fd); return -1; }
  size_t n = 0;
  ssize_t r;
  while (n < cap - 1 && (r = read(fd, resp + n, cap - 1 - n)) > 0) {
    n += (size_t)r;
    resp[n] = '\0';
    char *h = strstr(resp, "\r\n\r\n");
    const char *cl = strcasestr(resp, "Content-Length:");
    if (h && cl && (size_t)(h + 4 - resp) + strtoul(cl + 15, NULL, 10) <= n) break;
  }
  resp[n] = '\0';
  close(fd);
  return 0;
}

static char *result_body(int rank, int nmb) {
  static char buf[65536];
  size_t k = 0;
  k += (size_t)snprintf(buf + k, sizeof buf - k, "{\"rank\":%d,\"iter_time\":[", rank);
  for (int i = 0; i < 10; i++) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%.6f", i ? "," : "", 1.0 + i * 0.001);
  k += (size_t)snprintf(buf + k, sizeof buf - k, "],\"iter_energy\":[");
  for (int i = 0; i < 10; i++) k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%.4f", i ? "," : "", 300.0 + i);
  k += (size_t)snprintf(buf + k, sizeof buf - k, "]");
  const char *fields[] = {"time_breakdown", "energy_breakdown"};
  for (int f = 0; f < 2; f++) {
    k += (size_t)snprintf(buf + k, sizeof buf - k, ",\"%s\":{", fields[f]);
    const char *insts[] = {"forward", "backward"};
    for (int in = 0; in < 2; in++) {
      k += (size_t)snprintf(buf + k, sizeof buf - k, "%s\"%s\":[", in ? "," : "", insts[in]);
      for (int it = 0; it < 10; it++) {
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s[", it ? "," : "");
        for (int m = 0; m < nmb; m++)
          k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%.6f", m ? "," : "", (f ? 20.0 : 0.02) * (1 + 0.01 * m));
        k += (size_t)snprintf(buf + k, sizeof buf - k, "]");
      }
      k += (size_t)snprintf(buf + k, sizeof buf - k, "]");
    }
    k += (size_t)snprintf(buf + k, sizeof buf - k, "}");
  }
  k += (size_t)snprintf(buf + k, sizeof buf - k, "}");
  return strdup(buf);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static long vm_hwm_kib(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmHWM:", 6) == 0) v = strtol(line + 6, NULL, 10);
  if (f) fclose(f);
  return v;
}

/* Starts the server (AllMaxFrequency, 8 microbatches) in a forked child with the environment
 * variable env_name=env_value set there when env_name is not NULL and at most max_conn
 * connections (0: its default); *port: its port. The child waits for SIGTERM (blocked by main,
 * taken with sigwait). The child's pid, or -1. */
static pid_t server_child(int threads, int max_conn, const char *env_name, const char *env_value, int *port) {
  int pfd[2];
  if (pipe(pfd)) return -1;
  /* A forked child maps the pages this process's heap has touched, and its RSS counts them: the
   * bodies of an earlier run at 8,192 ranks, freed but kept by malloc, added 35 MiB (and up to
   * 70 MiB) to the next server's peak. Given back first, the peak is the server's own. */
  malloc_trim(0);
  pid_t child = fork();
  if (child == 0) {
    close(pfd[0]);
    if (env_name) setenv(env_name, env_value, 1);
    zeus_pfo_server *s;
    zeus_pfo_server_opts o = {.port = -1, .scheduler = "AllMaxFrequency",
                              .scheduler_args = "{\"num_microbatches\": 8}", .threads = threads,
                              .max_connections = max_conn,
                              .idle_timeout_s = 600 /* so that it also runs under valgrind */};
    if (zeus_pfo_server_open(&s, &o)) { fprintf(stderr, "server: %s\n", zeus_errmsg()); _exit(1); }
    int p = zeus_pfo_server_port(s);
    if (write(pfd[1], &p, sizeof p) != sizeof p) _exit(1);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    int sig;
    sigwait(&set, &sig);
    zeus_pfo_server_close(s);
    _exit(0);
  }
  close(pfd[1]);
  bool ok = child > 0 && read(pfd[0], port, sizeof *port) == sizeof *port;
  close(pfd[0]);
  if (!ok) {
    fprintf(stderr, "server did not start\n");
    if (child > 0) waitpid(child, NULL, 0);
    return -1;
  }
  return child;
}

typedef struct {
  double rounds_s, p50, p99, cpu_ms, reg_s, rss_mib;
} figures;

/* The servers measured: the baseline (before issue 28), libmicrohttpd's poll thread (before
 * issue 36), the server as it is. */
enum { BASELINE, POLL, NOW };
static const char *const kind_name[] = {"baseline", "poll", "now"};

static int run(int W, int R, int threads, int kind, figures *fig) {
  if (W < 1 || W > 1000000 || R < 1) return 1;
  int pp = W >= 8 ? 8 : 1, dp = W / pp, nmb = 8;
  int port = 0;
  pid_t child = server_child(threads, kind == BASELINE ? 19000 : 0,
                             kind == BASELINE ? "ZEUS__PFO_BENCH_BASELINE"
                             : kind == POLL   ? "ZEUS__PFO_BENCH_LOOP"
                                              : NULL,
                             kind == BASELINE ? "1" : "poll", &port);
  if (child < 0) return 1;

  char req[1024], resp[4096], job[256];
  char body[256];
  snprintf(body, sizeof body, "{\"job_id\":\"\",\"pp_degree\":%d,\"dp_degree\":%d,\"tp_degree\":1,\"world_size\":%d}",
           pp, dp, W);
  snprintf(req, sizeof req,
           "POST /register_job HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s", strlen(body),
           body);
  http_once(port, req, resp, sizeof resp);
  char *q = strstr(resp, "\r\n\r\n\"");
  if (!q) { fprintf(stderr, "register_job failed: %s\n", resp); kill(child, SIGTERM); return 1; }
  snprintf(job, sizeof job, "%s", q + 5);
  *strchr(job, '"') = '\0';
  double treg = now_s();
  for (int r = 0; r < W; r++) {
    snprintf(body, sizeof body,
             "{\"rank\":%d,\"dp_rank\":%d,\"pp_rank\":%d,\"tp_rank\":0,\"available_frequencies\":[1410,1200,1000]}", r,
             r % dp, r / dp);
    snprintf(req, sizeof req,
             "POST /register_rank/%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s", job,
             strlen(body), body);
    http_once(port, req, resp, sizeof resp);
    if (strncmp(resp, "HTTP/1.1 200", 12) != 0) {
      fprintf(stderr, "register_rank %d failed: %s\n", r, resp);
      kill(child, SIGKILL);
      return 1;
    }
  }
  treg = now_s() - treg;

  int ep = epoll_create1(0);
  client *cs = calloc((size_t)W, sizeof *cs);
  char **gets = calloc((size_t)W, sizeof *gets), **posts = calloc((size_t)W, sizeof *posts);
  size_t *get_len = calloc((size_t)W, sizeof *get_len), *post_len = calloc((size_t)W, sizeof *post_len);
  double *first_get = calloc((size_t)R, sizeof(double)), *last_sched = calloc((size_t)R, sizeof(double));
  int *sched_count = calloc((size_t)R, sizeof(int));
  for (int r = 0; r < W; r++) {
    char *b = result_body(r, nmb);
    size_t bl = strlen(b);
    posts[r] = malloc(bl + 512);
    post_len[r] = (size_t)sprintf(
        posts[r],
        "POST /result/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", job,
        bl, b);
    free(b);
    gets[r] = malloc(512);
    get_len[r] = (size_t)sprintf(gets[r], "GET /schedule/%s?rank=%d HTTP/1.1\r\nHost: x\r\n\r\n", job, r);
    client *c = &cs[r];
    c->rank = r;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 1; }
    fcntl(c->fd, F_SETFL, O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
  }
  size_t post_bytes = post_len[0];
  double csys0 = 0, csys1 = 0, ccpu0 = cpu_split_s(getpid(), &csys0);
  double sys0 = 0, sys1 = 0, cpu0 = cpu_split_s(child, &sys0), t0 = now_s();
  for (int r = 0; r < W; r++) { cs[r].out = gets[r]; cs[r].out_len = get_len[r]; cs[r].out_off = 0; cs[r].phase = 0; }
  first_get[0] = t0;
  int done = 0;
  struct epoll_event evs[256];
  while (done < W) {
    int n = epoll_wait(ep, evs, 256, 30000);
    if (n <= 0) {
      fprintf(stderr, "timeout: %d of %d ranks done\n", done, W);
      for (int r = 0; r < W; r++)
        if (cs[r].phase != 4)
          fprintf(stderr, "  rank %d round %d phase %d in %zu\n", r, cs[r].round, cs[r].phase, cs[r].in_len);
      kill(child, SIGKILL);
      return 1;
    }
    for (int i = 0; i < n; i++) {
      client *c = evs[i].data.ptr;
      for (bool progress = true; progress && c->phase != 4;) {
        progress = false;
        if (c->phase == 0 || c->phase == 2) {
          while (c->out_off < c->out_len) {
            ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
            if (w < 0) break;
            c->out_off += (size_t)w;
          }
          if (c->out_off == c->out_len) { c->phase++; c->in_len = 0; progress = true; }
        } else {
          ssize_t rd;
          while ((rd = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len - 1, 0)) > 0) c->in_len += (size_t)rd;
          c->in[c->in_len] = '\0';
          char *h = strstr(c->in, "\r\n\r\n");
          const char *cl = strcasestr(c->in, "Content-Length:");
          if (!h || !cl || (size_t)(h + 4 - c->in) + strtoul(cl + 15, NULL, 10) > c->in_len) {
            if (rd == 0) { fprintf(stderr, "rank %d: connection closed\n", c->rank); kill(child, SIGKILL); return 1; }
            break;
          }
          if (strncmp(c->in, "HTTP/1.1 200", 12) != 0) {
            fprintf(stderr, "rank %d round %d: %s\n", c->rank, c->round, c->in);
            kill(child, SIGKILL);
            return 1;
          }
          if (c->phase == 1) {
            double t = now_s();
            if (t > last_sched[c->round]) last_sched[c->round] = t;
            sched_count[c->round]++;
            c->out = posts[c->rank];
            c->out_len = post_len[c->rank];
            c->phase = 2;
          } else {
            c->round++;
            if (c->round == R) { c->phase = 4; done++; break; }
            if (!first_get[c->round]) first_get[c->round] = now_s();
            c->out = gets[c->rank];
            c->out_len = get_len[c->rank];
            c->phase = 0;
          }
          c->out_off = 0;
          progress = true;
        }
      }
    }
  }
  double total = last_sched[R - 1] - t0;
  double cpu = cpu_split_s(child, &sys1) - cpu0;
  double ccpu = cpu_split_s(getpid(), &csys1) - ccpu0;
  if (getenv("BENCH_TASKS")) { /* each thread's CPU seconds so far (registration included) */
    printf("load client CPU %.2f ms/round (system %.2f)\n", ccpu * 1e3 / R, (csys1 - csys0) * 1e3 / R);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "cat /proc/%d/task/*/stat | awk '{printf \"%%s:%%.2f \", $2, ($14+$15)/100}'; echo", (int)child);
    if (system(cmd) != 0) fprintf(stderr, "could not read the threads' CPU\n");
  }
  long hwm = vm_hwm_kib(child);
  kill(child, SIGTERM);
  waitpid(child, NULL, 0);
  double *lat = malloc((size_t)R * sizeof(double));
  for (int r = 0; r < R; r++) lat[r] = last_sched[r] - first_get[r];
  qsort(lat, (size_t)R, sizeof(double), cmp_d);
  double p50 = lat[R / 2], p99 = lat[(int)(0.99 * (R - 1) + 0.5)];
  printf(
      "pfo-server %-8s W=%-5d R=%d threads=%d  %8.2f rounds/s  round latency p50 %7.2f ms  p99 %7.2f ms  "
      "server CPU %.2f ms/round (system %.2f)  registering %.2f s  server peak RSS %.1f MiB  (result body %zu B)\n",
      kind_name[kind], W, R, threads, R / total, p50 * 1e3, p99 * 1e3, cpu * 1e3 / R, (sys1 - sys0) * 1e3 / R, treg,
      hwm / 1024.0, post_bytes);
  *fig = (figures){R / total, p50 * 1e3, p99 * 1e3, cpu * 1e3 / R, treg, hwm / 1024.0};
  fflush(stdout);
  for (int r = 0; r < W; r++) { close(cs[r].fd); free(gets[r]); free(posts[r]); }
  free(cs); free(gets); free(posts); free(get_len); free(post_len); free(first_get); free(last_sched);
  free(sched_count); free(lat);
  close(ep);
  return 0;
}

/* One request on an open keep-alive connection; its answer read whole into resp. */
static int http_keep(int fd, const char *req, char *resp, size_t cap) {
  if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) return -1;
  size_t n = 0;
  ssize_t r;
  while (n < cap - 1 && (r = read(fd, resp + n, cap - 1 - n)) > 0) {
    n += (size_t)r;
    resp[n] = '\0';
    char *h = strstr(resp, "\r\n\r\n");
    const char *cl = strcasestr(resp, "Content-Length:");
    if (h && cl && (size_t)(h + 4 - resp) + strtoul(cl + 15, NULL, 10) <= n) return 0;
  }
  return -1;
}

static int connect_port(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  return fd;
}

typedef struct {
  double reg_s, p50_ms, p99_ms;
} idle_figures;

/* Issue 36's cost: W ranks register one after another, each on its own connection that stays
 * open (kept alive, idle: as ranks hold theirs between rounds); then 200 GET /info one after
 * another with the W idle connections open. poll_loop: libmicrohttpd's poll thread (before issue
 * 36, ZEUS__PFO_BENCH_LOOP=poll), else the server as it is (its own epoll loops). */
static int idle_run(int W, int threads, bool poll_loop, idle_figures *fig) {
  int port = 0;
  pid_t child = server_child(threads, 2 * W + 256, poll_loop ? "ZEUS__PFO_BENCH_LOOP" : NULL, "poll", &port);
  if (child < 0) return 1;
  char req[1024], resp[4096], job[256], body[256];
  int pp = W >= 8 ? 8 : 1, dp = W / pp;
  snprintf(body, sizeof body, "{\"job_id\":\"\",\"pp_degree\":%d,\"dp_degree\":%d,\"tp_degree\":1,\"world_size\":%d}",
           pp, dp, W);
  snprintf(req, sizeof req,
           "POST /register_job HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
           strlen(body), body);
  http_once(port, req, resp, sizeof resp);
  char *q = strstr(resp, "\r\n\r\n\"");
  int rc = 1;
  int *fds = calloc((size_t)W, sizeof *fds);
  double *lat = calloc(200, sizeof *lat);
  int open_n = 0;
  if (!q || !fds || !lat) { fprintf(stderr, "register_job failed: %s\n", resp); goto out; }
  snprintf(job, sizeof job, "%s", q + 5);
  *strchr(job, '"') = '\0';
  double t0 = now_s();
  for (int r = 0; r < W; r++) {
    snprintf(body, sizeof body,
             "{\"rank\":%d,\"dp_rank\":%d,\"pp_rank\":%d,\"tp_rank\":0,\"available_frequencies\":[1410,1200,1000]}", r,
             r % dp, r / dp);
    snprintf(req, sizeof req, "POST /register_rank/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s", job,
             strlen(body), body);
    int fd = connect_port(port);
    if (fd < 0 || http_keep(fd, req, resp, sizeof resp) || strncmp(resp, "HTTP/1.1 200", 12) != 0) {
      fprintf(stderr, "register_rank %d failed: %s\n", r, fd < 0 ? "no connection" : resp);
      if (fd >= 0) close(fd);
      goto out;
    }
    fds[open_n++] = fd;
  }
  fig->reg_s = now_s() - t0;
  int fd = connect_port(port);
  if (fd < 0) goto out;
  for (int i = 0; i < 200; i++) {
    double a = now_s();
    if (http_keep(fd, "GET /info HTTP/1.1\r\nHost: x\r\n\r\n", resp, sizeof resp)) {
      fprintf(stderr, "GET /info failed\n");
      close(fd);
      goto out;
    }
    lat[i] = 1e3 * (now_s() - a);
  }
  close(fd);
  qsort(lat, 200, sizeof *lat, cmp_d);
  fig->p50_ms = lat[100];
  fig->p99_ms = lat[198];
  rc = 0;
  printf(
      "idle %s: %d ranks registered one after another, each keeping its connection: %.2f s; then GET /info "
      "with %d idle connections: p50 %.3f ms, p99 %.3f ms\n",
      poll_loop ? "poll (before)" : "epoll loops (now)", W, fig->reg_s, W, fig->p50_ms, fig->p99_ms);
out:
  for (int i = 0; i < open_n; i++) close(fds[i]);
  free(fds);
  free(lat);
  kill(child, SIGTERM);
  waitpid(child, NULL, 0);
  return rc;
}

int main(int argc, char **argv) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_BLOCK, &set, NULL); /* the server child waits for it with sigwait */
  signal(SIGPIPE, SIG_IGN);
  int R = getenv("BENCH_ROUNDS") ? atoi(getenv("BENCH_ROUNDS")) : 0;
  bool with_base = !getenv("BENCH_BASELINE") || strcmp(getenv("BENCH_BASELINE"), "0") != 0;
  bool with_poll = !getenv("BENCH_POLL") || strcmp(getenv("BENCH_POLL"), "0") != 0;
  /* Default: the server's own default (online CPUs, at most 8), shown resolved. */
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = getenv("BENCH_THREADS") ? atoi(getenv("BENCH_THREADS")) : (ncpu < 1 ? 1 : ncpu > 8 ? 8 : (int)ncpu);
  if (R < 0) R = 1;
  int ws[16] = {64, 1024, 8192}, nw = 3;
  if (argc > 1) {
    nw = 0;
    for (int i = 1; i < argc && nw < 16; i++) ws[nw++] = atoi(argv[i]);
  }
  int rc = 0;
  figures fig[16][3] = {{{0}}};
  bool ok[16][3] = {{0}};
  for (int i = 0; i < nw; i++) {
    int r = R ? R : ws[i] >= 4096 ? 20 : 50;
    if (with_base) ok[i][BASELINE] = run(ws[i], r, threads, BASELINE, &fig[i][BASELINE]) == 0;
    if (with_poll) ok[i][POLL] = run(ws[i], r, threads, POLL, &fig[i][POLL]) == 0;
    ok[i][NOW] = run(ws[i], r, threads, NOW, &fig[i][NOW]) == 0;
    rc |= !ok[i][NOW] || (with_base && !ok[i][BASELINE]) || (with_poll && !ok[i][POLL]);
  }
  /* Issue 36: sequential registration and a request's latency with the ranks' idle connections
   * open, libmicrohttpd's poll thread (before) beside the server's epoll loops (BENCH_IDLE=0 skips it). */
  if (!getenv("BENCH_IDLE") || strcmp(getenv("BENCH_IDLE"), "0") != 0) {
    int iw[2] = {1024, 8192};
    idle_figures ib[2] = {{0}}, in[2] = {{0}};
    bool okb[2], okn[2];
    for (int i = 0; i < 2; i++) {
      okb[i] = idle_run(iw[i], threads, true, &ib[i]) == 0;
      okn[i] = idle_run(iw[i], threads, false, &in[i]) == 0;
      rc |= !okb[i] || !okn[i];
    }
    printf(
        "\n| ranks (idle connections) | registering one after another (poll before -> epoll loops now) | GET /info p50 "
        "| p99 |\n"
        "|---|---|---|---|\n");
    for (int i = 0; i < 2; i++) {
      if (!okb[i] || !okn[i]) { printf("| %d | failed |\n", iw[i]); continue; }
      printf("| %d | %.2f -> %.2f s | %.3f -> %.3f ms | %.3f -> %.3f ms |\n", iw[i], ib[i].reg_s, in[i].reg_s,
             ib[i].p50_ms, in[i].p50_ms, ib[i].p99_ms, in[i].p99_ms);
    }
  }
  printf(
      "\n| ranks | rounds/s (baseline -> poll -> now) | round latency p50 | p99 | server CPU per round | registering | "
      "server peak RSS |\n|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < nw; i++) {
    if (!ok[i][NOW]) {
      printf("| %d | failed |\n", ws[i]);
      continue;
    }
    char b[6][64];
    for (int c = 0; c < 6; c++) b[c][0] = '\0';
    for (int k = BASELINE; k <= NOW; k++) {
      if (k != NOW && !ok[i][k]) continue; /* not run, or failed: left out */
      const figures *x = &fig[i][k];
      const char *sep = k == NOW ? "" : " -> ";
      size_t l;
      l = strlen(b[0]);
      snprintf(b[0] + l, 64 - l, "%.2f%s", x->rounds_s, sep);
      l = strlen(b[1]);
      snprintf(b[1] + l, 64 - l, "%.1f%s", x->p50, sep);
      l = strlen(b[2]);
      snprintf(b[2] + l, 64 - l, "%.1f%s", x->p99, sep);
      l = strlen(b[3]);
      snprintf(b[3] + l, 64 - l, "%.1f%s", x->cpu_ms, sep);
      l = strlen(b[4]);
      snprintf(b[4] + l, 64 - l, "%.2f%s", x->reg_s, sep);
      l = strlen(b[5]);
      snprintf(b[5] + l, 64 - l, "%.0f%s", x->rss_mib, sep);
    }
    printf("| %d | %s | %s ms | %s ms | %s ms | %s s | %s MiB |\n", ws[i], b[0], b[1], b[2], b[3], b[4], b[5]);
  }
  return rc;
}
