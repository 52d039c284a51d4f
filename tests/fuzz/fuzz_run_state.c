/* libFuzzer target for the `zeus run` state (issue 19): the SQLite file `zeus run` keeps what it
 * learnt in, as a later run opens it. Two kinds of input, chosen by the first byte:
 *   - raw bytes written as the state file (a truncated or foreign file, a damaged page);
 *   - edits of a valid state, as a later run or a person could leave it: a program of operations
 *     (set or delete a meta row, set a driver column, add, change or delete history rows, drop a
 *     table), each a fixed statement over our own schema with the input's values bound as
 *     parameters. It reaches the checks of what the tables hold far more often than damaged pages
 *     do, and never runs the input as SQL (which could ATTACH or VACUUM INTO any path).
 * Then the driver opens it (zeus_runner_open: refuse a damaged state, or load it) and, when it
 * opens, lists its history. No trainee is ever started. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>
#include <zeus.h>

static char g_dir[64], g_state[128], g_logs[128];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag;
  if (ftw->level > 0) remove(path);
  return 0;
}

static void clear_dir(void) { nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void cleanup(void) {
  clear_dir();
  rmdir(g_dir);
}

typedef struct input {
  const uint8_t *p;
  size_t n;
} input;

static unsigned take(input *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}

/* Binds the next value the input gives: an integer, a real, a short text, or NULL. */
static void bind_value(sqlite3_stmt *st, int i, input *in) {
  unsigned kind = take(in) % 4;
  if (kind == 3) { sqlite3_bind_null(st, i); return; }
  if (kind == 2) {
    size_t len = take(in);
    if (len > in->n) len = in->n;
    sqlite3_bind_text(st, i, (const char *)in->p, (int)len, SQLITE_TRANSIENT);
    in->p += len, in->n -= len;
    return;
  }
  uint64_t v = 0;
  for (int k = 0; k < 8; k++) v = v << 8 | take(in);
  if (kind == 0) sqlite3_bind_int64(st, i, (int64_t)v);
  else {
    double d;
    memcpy(&d, &v, sizeof d);
    sqlite3_bind_double(st, i, d);
  }
}

static void run(sqlite3 *db, const char *sql, input *in, int nvalues) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return;
  for (int i = 1; i <= nvalues; i++) bind_value(st, i, in);
  while (sqlite3_step(st) == SQLITE_ROW) {
  }
  sqlite3_finalize(st);
}

static const char *const meta_keys[] = {"version", "config", "trainee"};
static const char *const driver_cols[] = {"next_recurrence", "next_try", "next_seed", "min_cost", "cost_acc",
                                          "optimizer", "id"};
static const char *const history_cols[] = {"recurrence", "try", "batch_size", "learning_rate", "seed",
                                           "cost_threshold", "energy_j", "time_s", "cost", "epochs",
                                           "reached", "status", "exit_code", "finished_at", "id"};
static const char *const tables[] = {"meta", "driver", "history"};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* One edit the input picks; statement texts come from the lists above, values from the input. */
static void edit(sqlite3 *db, input *in) {
  char sql[256];
  switch (take(in) % 8) {
    case 0:
      snprintf(sql, sizeof sql, "UPDATE meta SET value = ? WHERE key = '%s'", meta_keys[take(in) % COUNT(meta_keys)]);
      run(db, sql, in, 1);
      break;
    case 1:
      snprintf(sql, sizeof sql, "DELETE FROM meta WHERE key = '%s'", meta_keys[take(in) % COUNT(meta_keys)]);
      run(db, sql, in, 0);
      break;
    case 2:
      run(db, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", in, 2);
      break;
    case 3:
      snprintf(sql, sizeof sql, "UPDATE driver SET %s = ?", driver_cols[take(in) % COUNT(driver_cols)]);
      run(db, sql, in, 1);
      break;
    case 4:
      run(db,
          "INSERT INTO history(recurrence, try, batch_size, learning_rate, seed, cost_threshold, energy_j, "
          "time_s, cost, epochs, reached, status, exit_code, finished_at) VALUES "
          "(1, 1, 64, 0.1, 123456, NULL, 100.0, 10.0, 120.0, 3, 1, 'reached', 0, 0.0)",
          in, 0);
      break;
    case 5:
      snprintf(sql, sizeof sql, "UPDATE history SET %s = ? WHERE id = ?", history_cols[take(in) % COUNT(history_cols)]);
      run(db, sql, in, 2);
      break;
    case 6:
      run(db, "DELETE FROM history WHERE id = ?", in, 1);
      break;
    default:
      snprintf(sql, sizeof sql, "DROP TABLE %s", tables[take(in) % COUNT(tables)]);
      run(db, sql, in, 0);
      break;
  }
}

static void spec_of(zeus_run_spec *s) {
  static const char *const command[] = {"true", NULL};
  static const long bs[] = {32, 64, 128};
  zeus_run_spec_init(s);
  s->command = command;
  s->batch_sizes = bs;
  s->num_batch_sizes = 3;
  s->default_bs = 64;
  s->target_metric = 0.5;
  s->max_epochs = 5;
  s->max_power_w = 300;
  s->log_base = g_logs;
  s->state_path = g_state;
  s->recurrences = 3;
}

static bool open_and_list(void) {
  zeus_run_spec s;
  spec_of(&s);
  zeus_runner *r;
  if (zeus_runner_open(&r, &s, NULL) != ZEUS_OK) return false;
  char *json = NULL;
  if (zeus_runner_history_json(r, &json) == ZEUS_OK) zeus_free(json);
  zeus_runner_close(r);
  return true;
}

/* The state a first run makes, kept in memory: made once by the driver itself (which must make
 * a valid one), then copied for each edit program instead of being made again, which doubles the
 * executions per second. Its journal mode leaves no side file once closed. */
static uint8_t *g_template;
static size_t g_template_n;

static void read_template(void) {
  if (!open_and_list()) abort(); /* a first run must make a valid state */
  FILE *f = fopen(g_state, "rb");
  if (!f) abort();
  if (fseek(f, 0, SEEK_END) != 0) abort();
  long n = ftell(f);
  if (n <= 0 || fseek(f, 0, SEEK_SET) != 0) abort();
  g_template = malloc((size_t)n);
  if (!g_template || fread(g_template, 1, (size_t)n, f) != (size_t)n) abort();
  g_template_n = (size_t)n;
  fclose(f);
  clear_dir();
}

static void write_file(const void *bytes, size_t n) {
  int fd = open(g_state, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || (n && write(fd, bytes, n) != (ssize_t)n)) abort();
  close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "%s/zeus-fuzz-state-%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
             (int)getpid());
    if (mkdir(g_dir, 0700) != 0 && errno != EEXIST) abort();
    snprintf(g_state, sizeof g_state, "%s/state.sqlite", g_dir);
    snprintf(g_logs, sizeof g_logs, "%s/logs", g_dir);
    atexit(cleanup);
    zeus_set_log_level(ZEUS_LOG_OFF);
    clear_dir();
    read_template();
  }
  if (size < 1) return 0;
  clear_dir();
  if (data[0] & 1) {
    write_file(data + 1, size - 1);
  } else {
    /* The edits run on an in-memory copy of the template, then its bytes become the state file:
     * the same file as editing it on disk, without the journal and syncs of each statement. */
    sqlite3 *db;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) abort();
    unsigned char *copy = sqlite3_malloc64(g_template_n);
    if (!copy) abort();
    memcpy(copy, g_template, g_template_n);
    if (sqlite3_deserialize(db, "main", copy, (sqlite3_int64)g_template_n, (sqlite3_int64)g_template_n,
                            SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE) != SQLITE_OK)
      abort();
    input in = {data + 1, size - 1};
    for (int step = 0; step < 32 && in.n > 0; step++) edit(db, &in);
    sqlite3_int64 n = 0;
    unsigned char *bytes = sqlite3_serialize(db, "main", &n, 0);
    if (!bytes) abort();
    write_file(bytes, (size_t)n);
    sqlite3_free(bytes);
    sqlite3_close(db);
  }
  open_and_list();
  return 0;
}
