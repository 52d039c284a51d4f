/* zeus/power_stream.h: the event parser, and the client against scripted servers in this process
 * (Unix sockets): chunked answers cut anywhere, the clock offset, a line over the bound, garbage,
 * a stall, a refusal, backoff, and a bad server never holding up a good one. */
#include <math.h>
#include <poll.h>
#include <stdatomic.h>

#include "test_http_server.h"
#include "test_util.h"

#include "zeus.h"

/* ---- the parser ---- */

static void parse_gpu_event_gives_watts_and_daemon_time(void **state) {
  (void)state;
  zeus_power_stream_event e;
  const char *t = "data: {\"timestamp_ms\":1700000000123,\"gpu_id\":3,\"power_mw\":250500}";
  assert_int_equal(zeus_power_stream_parse_event(t, strlen(t), ZEUS_POWER_STREAM_GPU, &e), 1);
  assert_int_equal(e.device, 3);
  assert_near(e.power_w, 250.5, 1e-9);
  assert_near(e.timestamp_s, 1700000000.123, 1e-6);
  assert_true(isnan(e.dram_w));
  /* CRLF lines, no space after the colon, an event name and an id (ignored) */
  const char *u = "event: power\r\nid: 7\r\ndata:{\"timestamp_ms\":5,\"gpu_id\":0,\"power_mw\":1}\r\n";
  assert_int_equal(zeus_power_stream_parse_event(u, strlen(u), ZEUS_POWER_STREAM_GPU, &e), 1);
  assert_near(e.power_w, 0.001, 1e-12);
}

static void parse_cpu_event_dram_null_or_number(void **state) {
  (void)state;
  zeus_power_stream_event e;
  const char *a = "data: {\"timestamp_ms\": 2000, \"cpu_id\": 1, \"cpu_mw\": 85000, \"dram_mw\": null}";
  assert_int_equal(zeus_power_stream_parse_event(a, strlen(a), ZEUS_POWER_STREAM_CPU, &e), 1);
  assert_int_equal(e.device, 1);
  assert_near(e.power_w, 85.0, 1e-9);
  assert_true(isnan(e.dram_w));
  const char *b = "data: {\"timestamp_ms\": 2000, \"cpu_id\": 0, \"cpu_mw\": 45000, \"dram_mw\": 12000}";
  assert_int_equal(zeus_power_stream_parse_event(b, strlen(b), ZEUS_POWER_STREAM_CPU, &e), 1);
  assert_near(e.dram_w, 12.0, 1e-9);
}

static void parse_comment_or_no_data_is_no_event(void **state) {
  (void)state;
  zeus_power_stream_event e = {.device = 99};
  assert_int_equal(zeus_power_stream_parse_event(": keepalive", 11, ZEUS_POWER_STREAM_GPU, &e), 0);
  assert_int_equal(zeus_power_stream_parse_event("event: x\nid: 3", 14, ZEUS_POWER_STREAM_GPU, &e), 0);
  assert_int_equal(e.device, 99);
}

static void parse_rejects_what_the_stream_never_sends(void **state) {
  (void)state;
  zeus_power_stream_event e;
  struct {
    const char *text;
    int kind;
    const char *needle;
  } bad[] = {
      {"data: not json", ZEUS_POWER_STREAM_GPU, "not a JSON object"},
      {"data: [1,2]", ZEUS_POWER_STREAM_GPU, "not a JSON object"},
      /* the old all-GPUs format: power_mw is a map */
      {"data: {\"timestamp_ms\":1,\"power_mw\":{\"0\":30000}}", ZEUS_POWER_STREAM_GPU, "lacks gpu_id"},
      {"data: {\"timestamp_ms\":1,\"gpu_id\":0,\"power_mw\":\"x\"}", ZEUS_POWER_STREAM_GPU, "power_mw"},
      {"data: {\"timestamp_ms\":1,\"gpu_id\":-1,\"power_mw\":5}", ZEUS_POWER_STREAM_GPU, "gpu_id"},
      {"data: {\"gpu_id\":0,\"power_mw\":5}", ZEUS_POWER_STREAM_GPU, "timestamp_ms"},
      {"data: {\"timestamp_ms\":1,\"gpu_id\":0,\"power_mw\":5}", ZEUS_POWER_STREAM_CPU, "cpu_id"},
      {"data: {\"timestamp_ms\":1,\"cpu_id\":0,\"cpu_mw\":5,\"dram_mw\":\"a\"}", ZEUS_POWER_STREAM_CPU, "dram_mw"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int rc = zeus_power_stream_parse_event(bad[i].text, strlen(bad[i].text), bad[i].kind, &e);
    if (rc != ZEUS_EPARSE || !strstr(zeus_errmsg(), bad[i].needle))
      fail_msg("case %zu '%s': rc %d, message '%s' (wanted '%s')", i, bad[i].text, rc, zeus_errmsg(), bad[i].needle);
  }
}

/* ---- scripted servers ---- */

enum { GOOD_CHUNKED, LONG_LINE, GARBAGE, STALL, REFUSE_404, RANDOM };

typedef struct fake {
  zeus_test_http_server http; /* on a Unix socket: http.unix_path; http.accepted: connections */
  const char *path;           /* http.unix_path */
  int mode;
  bool time_close;      /* GET /time answered with Connection: close, then closed */
  atomic_int streams;   /* stream requests answered */
  atomic_int bearer_ok; /* requests that carried the token */
} fake;

static char g_dir[256];

static void count_bearer(fake *f, const zeus_test_http_request *rq) {
  if (strstr(rq->head, "Authorization: Bearer s3cret\r\n")) atomic_fetch_add(&f->bearer_ok, 1);
}

static void serve_one(void *ud, int fd, const zeus_test_http_request *first) {
  fake *f = ud;
  zeus_test_http_server *s = &f->http;
  const zeus_test_http_request *rq = first;
  zeus_test_http_request next;
  count_bearer(f, rq);
  if (strcmp(rq->method, "GET") == 0 && strcmp(rq->path, "/time") == 0 && !rq->query[0]) {
    /* The daemon's clock 5 s behind ours. */
    char body[64];
    snprintf(body, sizeof body, "{\"timestamp_ms\":%.0f}", (zeus_wall_s() - 5.0) * 1000);
    if (f->time_close) {
      zeus_test_http_reply(fd, 200, "application/json", body);
      return;
    }
    zeus_test_http_reply_keep(fd, 200, "application/json", body);
    if (!zeus_test_http_next(s, fd, &next)) return;
    rq = &next;
    count_bearer(f, rq);
  }
  if (!strstr(rq->path, "/stream_power")) return;
  atomic_fetch_add(&f->streams, 1);
  if (f->mode == REFUSE_404) {
    zeus_test_http_reply_keep(fd, 404, NULL, "");
    zeus_test_http_hold(s, fd);
    return;
  }
  if (f->mode == RANDOM) {
    /* Random bytes after a random choice of framing: none (not even a status line), chunked, or
     * plain; each connection its own bytes (a fixed sequence: the test is repeatable). */
    static unsigned seed = 12345;
    unsigned n = (unsigned)atomic_load(&f->streams);
    const char *heads[] = {"", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\n"};
    zeus_test_http_send(fd, heads[n % 3]);
    char junk[3000];
    for (size_t i = 0; i < sizeof junk; i++) {
      seed = seed * 1103515245u + 12345u;
      unsigned r = seed >> 16;
      /* mostly the bytes the parsers look for, so that every state is reached */
      const char alphabet[] = "data: {\"}:,\r\n\n0123456789abcdef;gpu_idpower_mwtimestamp";
      junk[i] = r % 4 ? alphabet[r % (sizeof alphabet - 1)] : (char)(r & 0xff);
    }
    (void)!send(fd, junk, sizeof junk, MSG_NOSIGNAL);
    zeus_test_http_hold(s, fd);
    return;
  }
  if (f->mode == GOOD_CHUNKED) {
    zeus_test_http_reply_stream(fd, "text/event-stream", true);
    /* One event cut across three chunks, a keepalive, a second event: the parser must see through. */
    zeus_test_http_chunk(fd, "data: {\"timestamp_ms\":17000000");
    zeus_test_http_chunk(fd, "00000,\"gpu_id\":0,\"pow");
    zeus_test_http_chunk(fd,
                         "er_mw\":100000}\n\n: keepalive\n\ndata: "
                         "{\"timestamp_ms\":1700000000500,\"gpu_id\":3,\"power_mw\":250500}\n\n");
    /* then a keepalive every 100 ms */
    while (!zeus_test_http_stopping(s)) {
      struct pollfd p = {.fd = fd, .events = POLLIN};
      if (poll(&p, 1, 100) > 0) {
        char b[64];
        if (recv(fd, b, sizeof b, 0) <= 0) return;
      }
      zeus_test_http_chunk(fd, ": keepalive\n\n");
    }
    return;
  }
  zeus_test_http_reply_stream(fd, "text/event-stream", false);
  if (f->mode == LONG_LINE) {
    char big[2049];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    zeus_test_http_send(fd, "data: ");
    for (int i = 0; i < 5 && !zeus_test_http_stopping(s); i++) zeus_test_http_send(fd, big); /* 10 KiB, no newline */
  } else if (f->mode == GARBAGE) {
    zeus_test_http_send(fd, "data: {\"timestamp_ms\":1,\"gpu_id\":0,\"power_mw\":5}\n\ndata: }{ not json\n\n");
  } else if (f->mode == STALL) {
    zeus_test_http_send(fd, "data: {\"timestamp_ms\":1,\"gpu_id\":0,\"power_mw\":5000}\n\n");
  }
  zeus_test_http_hold(s, fd);
}

static void fake_start(fake *f, const char *name, int mode) {
  char path[300];
  memset(f, 0, sizeof *f);
  snprintf(path, sizeof path, "%s/%s.sock", g_dir, name);
  f->mode = mode;
  zeus_test_http_start_unix(&f->http, path, serve_one, f);
  f->path = f->http.unix_path;
}

static void fake_stop(fake *f) { zeus_test_http_stop(&f->http); }

static int setup(void **state) {
  (void)state;
  zeus_test_tmpdir(g_dir, sizeof g_dir);
  return 0;
}

static zeus_power_stream *open_one(fake *f, double delay, double max_delay, double stall, size_t max_line) {
  char addr[320];
  snprintf(addr, sizeof addr, "unix:%s", f->path);
  zeus_power_stream_server s = {.address = addr, .token = "s3cret", .cpu_ids = ""};
  zeus_power_stream_opts o;
  zeus_power_stream_opts_init(&o);
  o.servers = &s;
  o.num_servers = 1;
  o.reconnect_delay_s = delay;
  o.max_reconnect_delay_s = max_delay;
  o.stall_timeout_s = stall;
  o.connect_timeout_s = stall; /* the answer's headers too */
  o.max_line_bytes = max_line;
  o.queue_max = 16;
  zeus_power_stream *ps = NULL;
  assert_zeus_ok(zeus_power_stream_open(&ps, &o));
  return ps;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static void chunked_events_cut_anywhere_reach_snapshot_and_queue_with_clock_offset(void **state) {
  (void)state;
  fake f;
  fake_start(&f, "good", GOOD_CHUNKED);
  zeus_power_stream *ps = open_one(&f, 1, 2, 5, 4096);
  assert_string_equal(zeus_power_stream_endpoint(ps, 0), f.path);
  zeus_power_stream_event e[2];
  assert_zeus_ok(zeus_power_stream_next(ps, 3, &e[0]));
  assert_zeus_ok(zeus_power_stream_next(ps, 3, &e[1]));
  assert_int_equal(e[0].device, 0);
  assert_near(e[0].power_w, 100.0, 1e-9);
  assert_int_equal(e[1].device, 3);
  assert_near(e[1].power_w, 250.5, 1e-9);
  assert_true(e[1].seq == e[0].seq + 1);
  /* the daemon's clock runs 5 s behind: its timestamps are moved 5 s on (within the round trip) */
  assert_near(e[0].timestamp_s, 1700000000.0 + 5.0, 0.2);
  zeus_power_stream_status st;
  assert_zeus_ok(zeus_power_stream_server_status(ps, 0, &st));
  assert_near(st.clock_offset_s, 5.0, 0.2);
  assert_true(st.connected);
  assert_int_equal((int)st.connects, 1);
  assert_int_equal((int)st.events, 2);
  zeus_power_stream_reading *r;
  size_t n;
  assert_zeus_ok(zeus_power_stream_snapshot(ps, &r, &n));
  assert_int_equal(n, 2);
  assert_int_equal(r[0].device, 0);
  assert_int_equal(r[1].device, 3);
  assert_near(r[1].power_w, 250.5, 1e-9);
  zeus_free(r);
  /* keepalives keep the stream alive past the stall timeout of 5 s? here: no event for 0.5 s and
   * no reconnect */
  sleep_s(0.5);
  assert_zeus_err(zeus_power_stream_next(ps, 0, &e[0]), ZEUS_ETIMEDOUT, "no power event");
  assert_zeus_ok(zeus_power_stream_server_status(ps, 0, &st));
  assert_int_equal((int)st.failures, 0);
  /* the token went with both requests (GET /time and the stream) */
  assert_int_equal(atomic_load(&f.bearer_ok), 2);
  double t0 = zeus_wall_s();
  zeus_power_stream_close(ps);
  assert_true(zeus_wall_s() - t0 < 0.5);
  fake_stop(&f);
}

static void time_answer_that_closes_gets_the_stream_on_a_new_connection(void **state) {
  (void)state;
  fake f;
  fake_start(&f, "close", GOOD_CHUNKED);
  f.time_close = true;
  zeus_power_stream *ps = open_one(&f, 1, 2, 5, 4096);
  zeus_power_stream_event e;
  assert_zeus_ok(zeus_power_stream_next(ps, 3, &e));
  zeus_power_stream_status st;
  assert_zeus_ok(zeus_power_stream_server_status(ps, 0, &st));
  zeus_power_stream_close(ps);
  fake_stop(&f);
  assert_int_equal(atomic_load(&f.http.accepted), 2);
  assert_int_equal((int)st.failures, 0);
  assert_near(st.clock_offset_s, 5.0, 0.2);
  assert_near(e.timestamp_s, 1700000000.0 + 5.0, 0.2);
}

static void line_over_the_bound_is_refused_and_reconnects_with_capped_backoff(void **state) {
  (void)state;
  fake f;
  fake_start(&f, "long", LONG_LINE);
  zeus_power_stream *ps = open_one(&f, 0.05, 0.2, 5, 256);
  sleep_s(1.5);
  zeus_power_stream_status st;
  assert_zeus_ok(zeus_power_stream_server_status(ps, 0, &st));
  zeus_power_stream_close(ps);
  fake_stop(&f);
  /* delays 0.05, 0.1, 0.2, 0.2, ...: about 8 tries in 1.5 s; without backoff hundreds, with no cap 4 */
  int streams = atomic_load(&f.streams);
  if (streams < 5 || streams > 11) fail_msg("%d stream connections in 1.5 s (expected 5 to 11)", streams);
  assert_true(st.bad_events >= 5);
  assert_true(st.failures >= 5);
  assert_int_equal((int)st.events, 0);
  assert_non_null(strstr(st.last_error, "longer than 256 bytes"));
  assert_null(strstr(st.last_error, "s3cret"));
}

static void stall_is_noticed_and_the_stream_made_again(void **state) {
  (void)state;
  fake f;
  fake_start(&f, "stall", STALL);
  zeus_power_stream *ps = open_one(&f, 0.05, 0.05, 0.3, 4096);
  sleep_s(1.3);
  zeus_power_stream_status st;
  assert_zeus_ok(zeus_power_stream_server_status(ps, 0, &st));
  zeus_power_stream_close(ps);
  fake_stop(&f);
  /* each connection: one event, 0.3 s of silence, 0.05 s of backoff: 3 or 4 in 1.3 s */
  assert_in_range(st.events, 3, 4);
  assert_in_range(atomic_load(&f.streams), 3, 4);
  assert_non_null(strstr(st.last_error, "stalled"));
}

static void refusal_404_is_final(void **state) {
  (void)state;
  fake f;
  fake_start(&f, "refuse", REFUSE_404);
  zeus_power_stream *ps = open_one(&f, 0.05, 0.05, 5, 4096);
  sleep_s(0.6);
  zeus_power_stream_status st;
  assert_zeus_ok(zeus_power_stream_server_status(ps, 0, &st));
  zeus_power_stream_close(ps);
  fake_stop(&f);
  assert_int_equal(atomic_load(&f.streams), 1);
  assert_true(st.gave_up);
  assert_false(st.connected);
  assert_non_null(strstr(st.last_error, "HTTP 404"));
}

static void garbage_and_a_dead_server_never_hold_up_a_good_one(void **state) {
  (void)state;
  fake good, bad;
  fake_start(&good, "good2", GOOD_CHUNKED);
  fake_start(&bad, "bad", GARBAGE);
  char a[320], b[320], c[320];
  snprintf(a, sizeof a, "unix:%s", bad.path);
  snprintf(b, sizeof b, "unix:%s/nobody-listens.sock", g_dir);
  snprintf(c, sizeof c, "unix:%s", good.path);
  zeus_power_stream_server s[3] = {{.address = a, .cpu_ids = ""}, {.address = b}, {.address = c, .cpu_ids = ""}};
  zeus_power_stream_opts o;
  zeus_power_stream_opts_init(&o);
  o.servers = s;
  o.num_servers = 3;
  o.reconnect_delay_s = 0.02;
  o.max_reconnect_delay_s = 0.02;
  zeus_power_stream *ps;
  assert_zeus_ok(zeus_power_stream_open(&ps, &o));
  uint64_t seq = 0;
  assert_zeus_ok(zeus_power_stream_wait(ps, 0, 3, &seq));
  sleep_s(0.5);
  zeus_power_stream_status sg, sb, sd;
  assert_zeus_ok(zeus_power_stream_server_status(ps, 2, &sg));
  assert_zeus_ok(zeus_power_stream_server_status(ps, 0, &sb));
  assert_zeus_ok(zeus_power_stream_server_status(ps, 1, &sd));
  zeus_power_stream_reading *r;
  size_t n;
  assert_zeus_ok(zeus_power_stream_snapshot(ps, &r, &n));
  zeus_power_stream_close(ps);
  fake_stop(&good);
  fake_stop(&bad);
  assert_true(sg.connected);
  assert_int_equal((int)sg.events, 2);
  assert_int_equal((int)sg.failures, 0);
  /* the bad one: its valid first event each time, then garbage, again and again */
  assert_true(sb.bad_events >= 5);
  assert_true(sb.events >= 5);
  assert_non_null(strstr(sb.last_error, "garbage"));
  assert_true(sd.failures >= 5);
  assert_int_equal((int)sd.events, 0);
  assert_non_null(strstr(sd.last_error, "cannot connect"));
  /* snapshot: server 0's GPU 0 (from the garbage server's valid event), server 2's GPUs 0 and 3 */
  assert_int_equal(n, 3);
  assert_int_equal(r[0].server, 0);
  assert_int_equal(r[1].server, 2);
  assert_int_equal(r[2].server, 2);
  assert_int_equal(r[2].device, 3);
  zeus_free(r);
}

static void random_bytes_in_any_framing_never_crash_and_are_retried(void **state) {
  (void)state;
  fake f;
  fake_start(&f, "random", RANDOM);
  zeus_power_stream *ps = open_one(&f, 0.01, 0.01, 0.2, 512);
  sleep_s(2.0);
  zeus_power_stream_status st;
  assert_zeus_ok(zeus_power_stream_server_status(ps, 0, &st));
  double t0 = zeus_wall_s();
  zeus_power_stream_close(ps);
  assert_true(zeus_wall_s() - t0 < 0.5);
  fake_stop(&f);
  /* each connection ends (garbage, a bad chunk, no HTTP, or a stall) and is made again */
  if (atomic_load(&f.streams) < 8) fail_msg("only %d connections in 2 s", atomic_load(&f.streams));
  assert_true(st.failures >= 8);
  assert_int_equal((int)st.events, 0);
}

static void open_refuses_bad_servers_and_options(void **state) {
  (void)state;
  zeus_power_stream *ps = (zeus_power_stream *)1;
  zeus_power_stream_opts o;
  zeus_power_stream_opts_init(&o);
  zeus_power_stream_server s[2] = {{.address = "tcp:127.0.0.1:4938"}, {.address = "127.0.0.1:4938"}};
  o.servers = s;
  o.num_servers = 2;
  assert_zeus_err(zeus_power_stream_open(&ps, &o), ZEUS_EINVAL, "Duplicate server endpoints");
  assert_null(ps);
  s[1].address = "tcp:host";
  assert_zeus_err(zeus_power_stream_open(&ps, &o), ZEUS_EINVAL, "not HOST:PORT");
  s[1].address = "tcp:h:2";
  s[1].gpu_ids = "0;1";
  assert_zeus_err(zeus_power_stream_open(&ps, &o), ZEUS_EINVAL, "gpu_ids '0;1'");
  s[1].gpu_ids = NULL;
  s[1].token = "a\r\nX-Evil: 1";
  assert_zeus_err(zeus_power_stream_open(&ps, &o), ZEUS_EINVAL, "line break");
  s[1].token = NULL;
  o.max_line_bytes = 10;
  assert_zeus_err(zeus_power_stream_open(&ps, &o), ZEUS_EINVAL, "max_line_bytes");
  zeus_power_stream_opts_init(&o);
  o.servers = s;
  o.num_servers = 2;
  o.max_reconnect_delay_s = 0.5;
  assert_zeus_err(zeus_power_stream_open(&ps, &o), ZEUS_EINVAL, "max_reconnect_delay_s");
  o.num_servers = 0;
  assert_zeus_err(zeus_power_stream_open(&ps, &o), ZEUS_EINVAL, "1 to 1024 servers");
  zeus_power_stream_close(NULL);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parse_gpu_event_gives_watts_and_daemon_time),
      cmocka_unit_test(parse_cpu_event_dram_null_or_number),
      cmocka_unit_test(parse_comment_or_no_data_is_no_event),
      cmocka_unit_test(parse_rejects_what_the_stream_never_sends),
      cmocka_unit_test(chunked_events_cut_anywhere_reach_snapshot_and_queue_with_clock_offset),
      cmocka_unit_test(time_answer_that_closes_gets_the_stream_on_a_new_connection),
      cmocka_unit_test(line_over_the_bound_is_refused_and_reconnects_with_capped_backoff),
      cmocka_unit_test(stall_is_noticed_and_the_stream_made_again),
      cmocka_unit_test(refusal_404_is_final),
      cmocka_unit_test(garbage_and_a_dead_server_never_hold_up_a_good_one),
      cmocka_unit_test(random_bytes_in_any_framing_never_crash_and_are_retried),
      cmocka_unit_test(open_refuses_bad_servers_and_options),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, setup, NULL);
}
