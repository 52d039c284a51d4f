/* The lease table of zeus daemon over a fake device: layers, give-back, override, persistence,
 * TTL lapse, process exit, and the state file replayed after a crash. */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "test_util.h"

#include "daemon/daemon_internal.h"

#define NG 2

/* The fake device: current values, and a log of every write. */
typedef struct fakedev {
  zeus__dval v[NG][ZEUS__SET_COUNT];
  int writes;
  char log[4096];
  int fail_writes; /* the next N writes fail with ZEUS_EPERM */
  int resets, fail_resets; /* one-operation resets of both locks (f_reset_locks), and failures to come */
} fakedev;

static int f_read(void *ctx, unsigned gpu, zeus__setting s, zeus__dval *out) {
  fakedev *f = ctx;
  *out = f->v[gpu][s];
  return ZEUS_OK;
}

static int f_write(void *ctx, unsigned gpu, zeus__setting s, const zeus__dval *v) {
  fakedev *f = ctx;
  if (f->fail_writes > 0) {
    f->fail_writes--;
    return zeus__error(ZEUS_EPERM, "fake: no permission on GPU %u", gpu);
  }
  f->v[gpu][s] = *v;
  f->writes++;
  size_t n = strlen(f->log);
  snprintf(f->log + n, sizeof f->log - n, "%u:%s=%u%s;", gpu, zeus__setting_name(s),
           s == ZEUS__SET_PERSISTENCE ? v->on : v->a, (s >= ZEUS__SET_GPU_LOCK && !v->on) ? "(unlocked)" : "");
  return ZEUS_OK;
}

static int f_reset_locks(void *ctx, unsigned gpu) {
  fakedev *f = ctx;
  if (f->fail_resets > 0) {
    f->fail_resets--;
    return zeus__error(ZEUS_EIO, "fake: reset failed on GPU %u", gpu);
  }
  f->v[gpu][ZEUS__SET_GPU_LOCK] = (zeus__dval){0};
  f->v[gpu][ZEUS__SET_MEM_LOCK] = (zeus__dval){0};
  f->resets++;
  return ZEUS_OK;
}

static fakedev F;
static const char *const UUIDS[NG] = {"GPU-aaaa", "GPU-bbbb"};

/* The table over a fresh fake device; reset_locks: its one-operation lock reset (NULL: none). */
static zeus__leases *open_table_with(const char *state, int (*reset_locks)(void *, unsigned)) {
  memset(&F, 0, sizeof F);
  F.v[0][ZEUS__SET_POWER_LIMIT].a = 300000;
  F.v[1][ZEUS__SET_POWER_LIMIT].a = 300000;
  zeus__lease_dev dev = {f_read, f_write, &F, reset_locks};
  zeus__leases *L;
  assert_zeus_ok(zeus__leases_open(&L, NG, UUIDS, &dev, state, 16));
  return L;
}

static zeus__leases *open_table(const char *state) { return open_table_with(state, NULL); }

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A child process that waits for SIGKILL: a peer we can kill. */
static pid_t spawn_sleeper(void) {
  pid_t parent = getpid();
  pid_t p = fork();
  if (p == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives a failed test */
    if (getppid() != parent) _exit(0);
    for (;;) pause();
  }
  assert_true(p > 0);
  /* Its start time must be readable before we make a lease of it. */
  for (int i = 0; i < 100 && !zeus__proc_start_time(p); i++) usleep(1000);
  return p;
}

static void reap(pid_t p) {
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
}

static void lease_gives_back_the_value_it_replaced(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL);
  zeus__leases_lock(L);
  zeus__lease *a = zeus__leases_create(L, 0, 1000, "alice", "127.0.0.1", 0);
  assert_non_null(a);
  assert_zeus_ok(zeus__leases_change(L, a, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 200000}, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(zeus__leases_change(L, a, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 150000}, ZEUS__CHANGE_NORMAL));
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 150000);
  json_t *j = zeus__leases_json(L);
  json_t *s0 = json_array_get(json_object_get(json_array_get(json_object_get(j, "leases"), 0), "settings"), 0);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(s0, "replaced"), "power_limit_mw")), 300000);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(s0, "value"), "power_limit_mw")), 150000);
  json_decref(j);
  zeus__leases_end(L, a, "test");
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 300000);
  assert_string_equal(F.log, "0:power_limit=200000;0:power_limit=150000;0:power_limit=300000;");
  assert_int_equal(zeus__leases_restores(L), 1);
  assert_int_equal(zeus__leases_live(L), 0);
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
}

static void second_client_gets_busy_naming_the_holder_until_override(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL);
  zeus__leases_lock(L);
  zeus__lease *a = zeus__leases_create(L, 0, 1000, "alice", "127.0.0.1", 0);
  zeus__lease *b = zeus__leases_create(L, 0, 1001, "bob", "127.0.0.2", 0);
  char desc[192];
  zeus__lease_describe(a, desc, sizeof desc);
  assert_zeus_ok(zeus__leases_change(L, a, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 200000}, ZEUS__CHANGE_NORMAL));
  assert_zeus_err(zeus__leases_change(L, b, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 150000}, ZEUS__CHANGE_NORMAL),
                  ZEUS_EBUSY, desc);
  assert_string_equal(F.log, "0:power_limit=200000;"); /* the refused change never reached the device */
  /* Another GPU and another setting are free. */
  assert_zeus_ok(zeus__leases_change(L, b, 1, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 150000}, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(zeus__leases_change(L, b, 0, ZEUS__SET_GPU_LOCK, &(zeus__dval){.on = true, .a = 900, .b = 1200},
                                     ZEUS__CHANGE_NORMAL));
  /* Override: b on top; when b goes, a's value comes back, and a holds it again. */
  assert_zeus_ok(
      zeus__leases_change(L, b, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 150000}, ZEUS__CHANGE_OVERRIDE));
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 150000);
  zeus__leases_end(L, b, "b went");
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 200000);
  assert_int_equal(F.v[1][ZEUS__SET_POWER_LIMIT].a, 300000);
  assert_false(F.v[0][ZEUS__SET_GPU_LOCK].on);
  zeus__lease *c = zeus__leases_create(L, 0, 1002, "carol", "127.0.0.3", 0);
  assert_zeus_err(zeus__leases_change(L, c, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 100000}, ZEUS__CHANGE_NORMAL),
                  ZEUS_EBUSY, "alice");
  zeus__leases_end(L, a, "a went");
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 300000);
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
}

static void overridden_holder_leaving_first_hands_its_value_down(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL);
  zeus__leases_lock(L);
  zeus__lease *a = zeus__leases_create(L, 0, 1, NULL, "a", 0), *b = zeus__leases_create(L, 0, 2, NULL, "b", 0);
  assert_zeus_ok(zeus__leases_change(L, a, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 200000}, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(
      zeus__leases_change(L, b, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 150000}, ZEUS__CHANGE_OVERRIDE));
  /* a (under b) leaves: nothing changes on the device; b now gives back a's replaced value. */
  int writes = F.writes;
  zeus__leases_end(L, a, "a went");
  assert_int_equal(F.writes, writes);
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 150000);
  zeus__leases_end(L, b, "b went");
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 300000);
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
}

static void persistent_change_drops_the_records(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL);
  zeus__leases_lock(L);
  zeus__lease *a = zeus__leases_create(L, 0, 1, NULL, "a", 0), *anon = zeus__leases_anonymous(L);
  assert_zeus_ok(zeus__leases_change(L, a, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 200000}, ZEUS__CHANGE_NORMAL));
  /* A permanent change over a live holder is refused like any other... */
  assert_zeus_err(
      zeus__leases_change(L, NULL, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 300000}, ZEUS__CHANGE_PERSIST),
      ZEUS_EBUSY, "held by");
  zeus__leases_end(L, a, "a went");
  /* ...and over an anonymous one it goes through, leaving nothing to give back. */
  assert_zeus_ok(
      zeus__leases_change(L, anon, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 120000}, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(
      zeus__leases_change(L, NULL, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 250000}, ZEUS__CHANGE_PERSIST));
  zeus__leases_unlock(L);
  zeus__leases_close(L, "the daemon stopped");
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 250000);
}

static void anonymous_changes_hold_nothing_and_come_back_at_close(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL);
  zeus__leases_lock(L);
  zeus__lease *anon = zeus__leases_anonymous(L), *b = zeus__leases_create(L, 0, 2, NULL, "b", 0);
  assert_zeus_ok(
      zeus__leases_change(L, anon, 1, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 200000}, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(
      zeus__leases_change(L, anon, 1, ZEUS__SET_PERSISTENCE, &(zeus__dval){.on = true}, ZEUS__CHANGE_NORMAL));
  /* A leased client may change it without override; it gives back the anonymous value. */
  assert_zeus_ok(zeus__leases_change(L, b, 1, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 150000}, ZEUS__CHANGE_NORMAL));
  zeus__leases_end(L, b, "b went");
  assert_int_equal(F.v[1][ZEUS__SET_POWER_LIMIT].a, 200000);
  zeus__leases_unlock(L);
  zeus__leases_close(L, "the daemon stopped");
  assert_int_equal(F.v[1][ZEUS__SET_POWER_LIMIT].a, 300000);
  assert_false(F.v[1][ZEUS__SET_PERSISTENCE].on);
}

static void failed_device_write_leaves_no_record(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL);
  zeus__leases_lock(L);
  zeus__lease *a = zeus__leases_create(L, 0, 1, NULL, "a", 0), *b = zeus__leases_create(L, 0, 2, NULL, "b", 0);
  F.fail_writes = 1;
  assert_zeus_err(zeus__leases_change(L, a, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 200000}, ZEUS__CHANGE_NORMAL),
                  ZEUS_EPERM, "no permission on GPU 0");
  /* Nothing is held: b may change it without override. */
  assert_zeus_ok(zeus__leases_change(L, b, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 150000}, ZEUS__CHANGE_NORMAL));
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 300000);
}

/* A change that fails after the holder's older (overridden) record left the stack puts it back:
 * when the overrider goes, the holder's own value comes back, not the one from before it. */
static void failed_change_keeps_the_holders_older_record(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL);
  zeus__leases_lock(L);
  zeus__lease *a = zeus__leases_create(L, 0, 1, NULL, "a", 0), *b = zeus__leases_create(L, 0, 2, NULL, "b", 0);
  assert_zeus_ok(zeus__leases_change(L, a, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 200000}, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(
      zeus__leases_change(L, b, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 150000}, ZEUS__CHANGE_OVERRIDE));
  F.fail_writes = 1;
  assert_zeus_err(
      zeus__leases_change(L, a, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 250000}, ZEUS__CHANGE_OVERRIDE),
      ZEUS_EPERM, "no permission on GPU 0");
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 150000);
  zeus__leases_end(L, b, "b went");
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 200000); /* a's, still held by a */
  zeus__leases_end(L, a, "a went");
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 300000);
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
}

/* The same for a reset of both clock locks in one device operation that fails: each domain's
 * older record of the holder is put back. */
static void failed_lock_reset_keeps_the_holders_older_records(void **state) {
  (void)state;
  zeus__leases *L = open_table_with(NULL, f_reset_locks);
  zeus__leases_lock(L);
  zeus__lease *a = zeus__leases_create(L, 0, 1, NULL, "a", 0), *b = zeus__leases_create(L, 0, 2, NULL, "b", 0);
  const zeus__dval a_gpu = {.on = true, .a = 900, .b = 1200}, a_mem = {.on = true, .a = 1500, .b = 1500};
  const zeus__dval b_gpu = {.on = true, .a = 600, .b = 700}, b_mem = {.on = true, .a = 800, .b = 800};
  assert_zeus_ok(zeus__leases_change(L, a, 0, ZEUS__SET_GPU_LOCK, &a_gpu, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(zeus__leases_change(L, a, 0, ZEUS__SET_MEM_LOCK, &a_mem, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(zeus__leases_change(L, b, 0, ZEUS__SET_GPU_LOCK, &b_gpu, ZEUS__CHANGE_OVERRIDE));
  assert_zeus_ok(zeus__leases_change(L, b, 0, ZEUS__SET_MEM_LOCK, &b_mem, ZEUS__CHANGE_OVERRIDE));
  F.fail_resets = 1;
  assert_zeus_err(zeus__leases_reset_locks(L, a, 0, ZEUS__CHANGE_OVERRIDE), ZEUS_EIO, "reset failed on GPU 0");
  assert_int_equal(F.v[0][ZEUS__SET_GPU_LOCK].a, 600);
  zeus__leases_end(L, b, "b went");
  assert_int_equal(F.v[0][ZEUS__SET_GPU_LOCK].a, 900); /* a's locks, still held by a */
  assert_int_equal(F.v[0][ZEUS__SET_MEM_LOCK].a, 1500);
  /* A reset that works: a's records now hold "unlocked" over the values from before a. */
  assert_zeus_ok(zeus__leases_reset_locks(L, a, 0, ZEUS__CHANGE_NORMAL));
  assert_int_equal(F.resets, 1);
  assert_false(F.v[0][ZEUS__SET_GPU_LOCK].on);
  zeus__leases_end(L, a, "a went");
  assert_false(F.v[0][ZEUS__SET_GPU_LOCK].on);
  assert_false(F.v[0][ZEUS__SET_MEM_LOCK].on);
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
}

static void ttl_lease_lapses_and_renewal_keeps_it(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL);
  zeus__leases_lock(L);
  zeus__lease *a = zeus__leases_create(L, 0, 1, NULL, "a", 1), *b = zeus__leases_create(L, 0, 2, NULL, "b", 1);
  char tok_b[33];
  memcpy(tok_b, b->token, sizeof tok_b);
  assert_zeus_ok(zeus__leases_change(L, a, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 200000}, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(zeus__leases_change(L, b, 1, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 210000}, ZEUS__CHANGE_NORMAL));
  double t0 = mono();
  assert_int_equal(zeus__leases_sweep(L, t0 + 0.5), 0);
  usleep(50 * 1000);
  zeus__leases_renew(L, b);
  assert_true(zeus__leases_next_expiry(L) > t0 + 0.5);
  /* 1.05 s later: a lapsed (given back), b (renewed at ~t0) not yet. */
  assert_int_equal(zeus__leases_sweep(L, a->expires + 0.01), 1);
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 300000);
  assert_int_equal(F.v[1][ZEUS__SET_POWER_LIMIT].a, 210000);
  assert_ptr_equal(zeus__leases_find(L, tok_b), b);
  assert_null(zeus__leases_find(L, "0123456789abcdef0123456789abcdef"));
  assert_null(zeus__leases_find(L, "short"));
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
}

static void peer_lease_ends_when_its_process_is_killed(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL);
  pid_t child = spawn_sleeper();
  zeus__leases_lock(L);
  zeus__lease *p = zeus__leases_peer(L, child, getuid());
  assert_non_null(p);
  assert_true(p->pidfd >= 0);
  assert_ptr_equal(zeus__leases_peer(L, child, getuid()), p); /* one lease per process */
  assert_zeus_ok(zeus__leases_change(L, p, 1, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 180000}, ZEUS__CHANGE_NORMAL));
  int fds[4];
  assert_int_equal(zeus__leases_pidfds(L, fds, 4), 1);
  assert_int_equal(zeus__leases_sweep(L, mono()), 0);
  zeus__leases_unlock(L);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  zeus__leases_lock(L);
  assert_int_equal(zeus__leases_sweep(L, mono()), 1);
  assert_int_equal(F.v[1][ZEUS__SET_POWER_LIMIT].a, 300000);
  assert_int_equal(zeus__leases_live(L), 0);
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
}

static void state_file_replay_adopts_live_clients_and_restores_dead_ones(void **state) {
  (void)state;
  char dir[256], path[300];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/state.json", dir);
  pid_t alive = spawn_sleeper(), dead = spawn_sleeper();
  zeus__leases *L = open_table(path);
  zeus__leases_lock(L);
  zeus__lease *a = zeus__leases_peer(L, alive, 1000), *d = zeus__leases_peer(L, dead, 1001);
  zeus__lease *t = zeus__leases_create(L, 0, 0, "alice", "127.0.0.1:5", 600);
  char tok[33];
  memcpy(tok, t->token, sizeof tok);
  assert_zeus_ok(zeus__leases_change(L, a, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 200000}, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(zeus__leases_change(L, d, 1, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 150000}, ZEUS__CHANGE_NORMAL));
  assert_zeus_ok(zeus__leases_change(L, t, 1, ZEUS__SET_GPU_LOCK, &(zeus__dval){.on = true, .a = 800, .b = 900},
                                     ZEUS__CHANGE_NORMAL));
  unsigned a_id = a->id;
  zeus__leases_unlock(L);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  /* The daemon is killed: nothing is given back, the file stays. */
  zeus__leases_close(L, NULL);
  assert_int_equal(F.v[1][ZEUS__SET_POWER_LIMIT].a, 150000);
  reap(dead);
  /* A new daemon on a device as the old one left it. */
  zeus__lease_dev dev = {f_read, f_write, &F, NULL};
  F.log[0] = '\0';
  assert_zeus_ok(zeus__leases_open(&L, NG, UUIDS, &dev, path, 16));
  assert_string_equal(F.log, "1:power_limit=300000;"); /* the dead client's change, given back at start */
  zeus__leases_lock(L);
  assert_int_equal(zeus__leases_live(L), 2); /* the live peer and the TTL lease, adopted again */
  zeus__lease *t2 = zeus__leases_find(L, tok);
  assert_non_null(t2);
  assert_string_equal(t2->user, "alice");
  zeus__lease *a2 = zeus__leases_peer(L, alive, 1000);
  assert_int_equal(a2->id, a_id); /* found, not made anew */
  assert_true(a2->pidfd >= 0);
  /* The adopted peer still holds GPU 0 against others. */
  zeus__lease *x = zeus__leases_create(L, 0, 5, NULL, "x", 0);
  assert_zeus_err(zeus__leases_change(L, x, 0, ZEUS__SET_POWER_LIMIT, &(zeus__dval){.a = 100000}, ZEUS__CHANGE_NORMAL),
                  ZEUS_EBUSY, "held by");
  zeus__leases_unlock(L);
  reap(alive);
  zeus__leases_lock(L);
  assert_int_equal(zeus__leases_sweep(L, mono()), 1);
  assert_int_equal(F.v[0][ZEUS__SET_POWER_LIMIT].a, 300000);
  zeus__leases_unlock(L);
  zeus__leases_close(L, "the daemon stopped");
  assert_false(F.v[1][ZEUS__SET_GPU_LOCK].on);
  assert_int_equal(stat(path, &st), -1); /* a clean stop removes it */
}

static void corrupt_state_file_is_moved_aside(void **state) {
  (void)state;
  char dir[256], path[300], bad[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/state.json", dir);
  snprintf(bad, sizeof bad, "%s.bad", path);
  zeus_test_write_file(path, "{\"format\": \"zeus-daemon-state\", \"leases\": [{\"kind\": \"peer\"}], \"stacks\": []}");
  zeus__leases *L = open_table(path);
  struct stat st;
  assert_int_equal(stat(bad, &st), 0);
  assert_int_equal(F.writes, 0);
  zeus__leases_lock(L);
  assert_int_equal(zeus__leases_live(L), 0);
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
  zeus_test_write_file(path, "not json");
  L = open_table(path);
  assert_int_equal(stat(bad, &st), 0);
  zeus__leases_close(L, "end");
}

static void state_file_for_another_gpu_is_not_replayed(void **state) {
  (void)state;
  char dir[256], path[300];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/state.json", dir);
  zeus_test_write_file(
      path,
      "{\"format\":\"zeus-daemon-state\",\"version\":1,\"leases\":[{\"id\":4,\"kind\":\"peer\",\"pid\":999999,"
      "\"start\":1,\"uid\":0,\"comm\":\"x\",\"token\":\"\",\"user\":\"\",\"addr\":\"\",\"ttl_s\":0,"
      "\"expires_unix\":0,\"implicit\":true}],\"stacks\":[{\"gpu\":0,\"uuid\":\"GPU-other\",\"setting\":"
      "\"power_limit\",\"layers\":[{\"lease\":4,\"replaced\":{\"on\":false,\"a\":250000,\"b\":0},"
      "\"set\":{\"on\":false,\"a\":100000,\"b\":0}}]}]}");
  zeus__leases *L = open_table(path);
  assert_int_equal(F.writes, 0); /* not this daemon's GPU 0: nothing written to it */
  zeus__leases_close(L, "end");
}

/* Issue 26: one client cannot fill the table; the last slots are root's; an owner is the uid on
 * the socket, a token's subject, or an address without its port. */
static void per_client_limit_and_root_reserve(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL); /* 16 leases */
  zeus__leases_set_limits(L, 0, 4, 3);
  zeus__leases_lock(L);
  pid_t me = getpid();
  for (int i = 0; i < 4; i++) assert_non_null(zeus__leases_create(L, me, 65534, NULL, NULL, 0));
  assert_null(zeus__leases_create(L, me, 65534, NULL, NULL, 0));
  assert_non_null(strstr(zeus_errmsg(), "uid 65534 holds 4 leases, the most one client may hold"));
  /* The same user by token over TCP from two ports is one client; another subject is another. */
  for (int i = 0; i < 4; i++) {
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", 4000 + i);
    assert_non_null(zeus__leases_create(L, 0, 0, NULL, addr, 60));
  }
  assert_null(zeus__leases_create(L, 0, 0, NULL, "127.0.0.1:5000", 60));
  assert_non_null(strstr(zeus_errmsg(), "address 127.0.0.1 holds 4 leases"));
  for (int i = 0; i < 4; i++) assert_non_null(zeus__leases_create(L, 0, 0, "alice", "127.0.0.1:6000", 60));
  assert_null(zeus__leases_create(L, 0, 0, "alice", "127.0.0.2:1", 60));
  assert_non_null(strstr(zeus_errmsg(), "user 'alice' holds 4 leases"));
  /* 12 of 16 held: one more for others (13 = 16 - 3), then only root. */
  assert_non_null(zeus__leases_create(L, 0, 0, "bob", "x", 60));
  assert_null(zeus__leases_create(L, 0, 0, "carol", "x", 60));
  assert_non_null(strstr(zeus_errmsg(), "the last 3 of its 16 are kept for root"));
  for (int i = 0; i < 3; i++) assert_non_null(zeus__leases_create(L, me, 0, NULL, NULL, 0));
  assert_null(zeus__leases_create(L, me, 0, NULL, NULL, 0)); /* the table itself is full */
  assert_non_null(strstr(zeus_errmsg(), "its limit"));
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
}

/* Issue 26: a process that cannot be proved alive holds nothing (its start time is 0: never
 * "0 == 0, alive"). */
static void a_dead_process_gets_no_lease(void **state) {
  (void)state;
  zeus__leases *L = open_table(NULL);
  pid_t dead = spawn_sleeper();
  reap(dead);
  zeus__leases_lock(L);
  assert_null(zeus__leases_peer(L, dead, 1000));
  assert_int_equal(zeus_errcode(), ZEUS_EPERM);
  assert_non_null(strstr(zeus_errmsg(), "has exited"));
  assert_null(zeus__leases_create(L, dead, 1000, NULL, NULL, 0));
  assert_int_equal(zeus_errcode(), ZEUS_EPERM);
  assert_int_equal(zeus__leases_live(L), 0);
  zeus__leases_unlock(L);
  zeus__leases_close(L, "end");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lease_gives_back_the_value_it_replaced),
      cmocka_unit_test(second_client_gets_busy_naming_the_holder_until_override),
      cmocka_unit_test(overridden_holder_leaving_first_hands_its_value_down),
      cmocka_unit_test(persistent_change_drops_the_records),
      cmocka_unit_test(anonymous_changes_hold_nothing_and_come_back_at_close),
      cmocka_unit_test(failed_device_write_leaves_no_record),
      cmocka_unit_test(failed_change_keeps_the_holders_older_record),
      cmocka_unit_test(failed_lock_reset_keeps_the_holders_older_records),
      cmocka_unit_test(ttl_lease_lapses_and_renewal_keeps_it),
      cmocka_unit_test(peer_lease_ends_when_its_process_is_killed),
      cmocka_unit_test(state_file_replay_adopts_live_clients_and_restores_dead_ones),
      cmocka_unit_test(corrupt_state_file_is_moved_aside),
      cmocka_unit_test(state_file_for_another_gpu_is_not_replayed),
      cmocka_unit_test(per_client_limit_and_root_reserve),
      cmocka_unit_test(a_dead_process_gets_no_lease),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
