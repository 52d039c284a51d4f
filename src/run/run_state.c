/* run_state.c: the SQLite state of `zeus run`: the job folder, the knobs the state was made for, the
 * history of tries and the driver's and optimizer's state, one transaction per try. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "run/run_internal.h"
#include "store/store.h"
#include "zeus/format.h"

#define STATE_VERSION "1"
#define STATE_FILE "state.sqlite"

static const char *const SCHEMA =
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS driver ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  next_recurrence INTEGER NOT NULL, next_try INTEGER NOT NULL, next_seed INTEGER NOT NULL,"
    "  min_cost REAL, cost_acc REAL NOT NULL, optimizer TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS history ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT, recurrence INTEGER NOT NULL, try INTEGER NOT NULL,"
    "  batch_size INTEGER NOT NULL, learning_rate REAL, seed INTEGER NOT NULL, cost_threshold REAL,"
    "  energy_j REAL NOT NULL, time_s REAL NOT NULL, cost REAL NOT NULL, epochs INTEGER,"
    "  reached INTEGER NOT NULL, status TEXT NOT NULL, exit_code INTEGER NOT NULL, finished_at REAL NOT NULL);";

/* What went wrong, said plainly for the cases a user can act on (a full disk, a read-only file). */
static const char *db_why(zeus_runner *r, char *buf, size_t len, const char *msg) {
  int ext = r->db ? sqlite3_extended_errcode(r->db) : SQLITE_OK;
  int prim = ext & 0xff;
  if (prim == SQLITE_FULL)
    snprintf(buf, len, "the disk is full (no space left on the file system of '%s' for it or its journal; "
             "nothing of this step was kept, the state is as before)", r->state_path);
  else if (prim == SQLITE_READONLY)
    snprintf(buf, len, "the file is read-only (%s)", msg);
  else
    snprintf(buf, len, "%s", msg);
  return buf;
}

static int db_error(zeus_runner *r, const char *what) {
  char why[512];
  return zeus__error(ZEUS_EIO, "state '%s': %s: %s", r->state_path, what,
                     db_why(r, why, sizeof why, r->db ? sqlite3_errmsg(r->db) : "not open"));
}

static int exec(zeus_runner *r, const char *sql, const char *what) {
  char *err = NULL;
  if (sqlite3_exec(r->db, sql, NULL, NULL, &err) != SQLITE_OK) {
    char why[512];
    int rc = zeus__error(ZEUS_EIO, "state '%s': %s: %s", r->state_path, what,
                         db_why(r, why, sizeof why, err ? err : sqlite3_errmsg(r->db)));
    sqlite3_free(err);
    return rc;
  }
  return ZEUS_OK;
}

/* After a failed step of a transaction: rolls it back if SQLite has not already (it does by itself
 * on a full disk, an I/O error, ...), keeping the step's own error as the one reported. */
static void rollback(zeus_runner *r) {
  if (!r->db || sqlite3_get_autocommit(r->db)) return; /* no transaction is active any more */
  char *err = NULL;
  if (sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, &err) != SQLITE_OK)
    zeus__log(ZEUS_LOG_WARN, "run", "state '%s': rolling back: %s", r->state_path, err ? err : "?");
  sqlite3_free(err);
}

/* ---- names ---- */

static void safe_name(const char *s, zeus__buf *b) {
  for (; *s; s++) {
    char c = *s;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
              c == '_';
    zeus__buf_append(b, ok ? s : "_", 1);
  }
}

/* "<dataset>+<network>+bs<b>+<optimizer>+lr<lr>+tm<target>+me<epochs>" and "+eta<eta>+beta<beta>+". */
static int job_names(const zeus_run_spec *s, zeus__buf *job, zeus__buf *knobs) {
  char lr[40], tm[40], eta[40], beta[40];
  if (isnan(s->default_lr)) snprintf(lr, sizeof lr, "None");
  else zeus__py_repr(s->default_lr, lr, sizeof lr);
  zeus__py_repr(s->target_metric, tm, sizeof tm);
  zeus__py_repr(s->eta, eta, sizeof eta);
  zeus__py_repr(s->beta, beta, sizeof beta);
  safe_name(s->dataset ? s->dataset : "job", job);
  zeus__buf_puts(job, "+");
  safe_name(s->network ? s->network : "model", job);
  zeus__buf_printf(job, "+bs%ld+", s->default_bs);
  safe_name(s->optimizer ? s->optimizer : "none", job);
  zeus__buf_printf(job, "+lr%s+tm%s+me%ld", lr, tm, s->max_epochs);
  return zeus__buf_printf(knobs, "+eta%s+beta%s+", eta, beta);
}

static bool file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* The latest folder of this job and knobs under base holding a state, or NULL. */
static char *find_job_folder(const char *base, const char *job, const char *knobs) {
  DIR *d = opendir(base);
  if (!d) return NULL;
  char *best = NULL;
  size_t jl = strlen(job);
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *n = e->d_name;
    if (strncmp(n, job, jl) != 0 || strncmp(n + jl, "+x", 2) != 0) continue;
    const char *p = n + jl + 2;
    if (*p < '0' || *p > '9') continue;
    while (*p >= '0' && *p <= '9') p++;
    if (strncmp(p, knobs, strlen(knobs)) != 0) continue;
    zeus__buf path = {0};
    zeus__buf_printf(&path, "%s/%s/%s", base, n, STATE_FILE);
    bool ok = path.data && file_exists(path.data);
    zeus__buf_free(&path);
    if (ok && (!best || strcmp(n, best) > 0)) {
      free(best);
      best = strdup(n);
    }
  }
  closedir(d);
  if (!best) return NULL;
  zeus__buf full = {0};
  zeus__buf_printf(&full, "%s/%s", base, best);
  free(best);
  return full.data;
}

static char *absolute(const char *p) {
  if (p[0] == '/') return strdup(p);
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) return NULL;
  zeus__buf b = {0};
  zeus__buf_printf(&b, "%s/%s", cwd, p);
  return b.data;
}

static char *new_job_folder(const char *base, const char *job, const char *knobs, long recurrences) {
  char stamp[32];
  time_t now = time(NULL);
  struct tm tmv;
  localtime_r(&now, &tmv);
  strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", &tmv);
  zeus__buf b = {0};
  zeus__buf_printf(&b, "%s/%s+x%ld%s%s", base, job, recurrences, knobs, stamp);
  return b.data;
}

/* Creates a new job folder; a name taken already (two jobs started in the same second) gets a
 * suffix -1, -2, ... so that no two states share a folder. */
static int make_unique_dir(char **path) {
  char *slash = strrchr(*path, '/');
  if (slash && slash != *path) {
    *slash = '\0';
    int rc = zeus__mkdirs(*path);
    *slash = '/';
    if (rc) return rc;
  }
  for (int i = 0; i < 1000; i++) {
    zeus__buf b = {0};
    if (i == 0 ? zeus__buf_puts(&b, *path) : zeus__buf_printf(&b, "%s-%d", *path, i))
      return zeus__oom("naming the job folder");
    if (mkdir(b.data, 0755) == 0) {
      free(*path);
      *path = b.data;
      return ZEUS_OK;
    }
    int e = errno;
    zeus__buf_free(&b);
    if (e != EEXIST) return zeus__error(ZEUS_EIO, "cannot create the job folder '%s': %s", *path, strerror(e));
  }
  return zeus__error(ZEUS_EIO, "cannot find a free name for the job folder '%s'", *path);
}

/* ---- the knobs the state was made for ---- */

static json_t *config_json(const zeus_run_spec *s) {
  json_t *bs = json_array();
  long *sorted = malloc((s->num_batch_sizes + 1) * sizeof *sorted);
  if (!bs || !sorted) {
    json_decref(bs);
    free(sorted);
    return NULL;
  }
  memcpy(sorted, s->batch_sizes, s->num_batch_sizes * sizeof *sorted);
  for (size_t i = 1; i < s->num_batch_sizes; i++)
    for (size_t k = i; k > 0 && sorted[k - 1] > sorted[k]; k--) {
      long t = sorted[k];
      sorted[k] = sorted[k - 1];
      sorted[k - 1] = t;
    }
  for (size_t i = 0; i < s->num_batch_sizes; i++) json_array_append_new(bs, json_integer(sorted[i]));
  free(sorted);
  char seed[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
  json_t *o = json_object();
  json_object_set_new(o, "batch_sizes", bs);
  json_object_set_new(o, "default_batch_size", json_integer(s->default_bs));
  json_object_set_new(o, "eta", zeus__json_double(s->eta));
  json_object_set_new(o, "beta", zeus__json_double(s->beta));
  json_object_set_new(o, "seed", json_string(seed));
  json_object_set_new(o, "window_size", json_integer(s->window_size));
  json_object_set_new(o, "target_metric", zeus__json_double(s->target_metric));
  json_object_set_new(o, "max_epochs", json_integer(s->max_epochs));
  return o;
}

/* A value for a message: numbers in their shortest exact form (0.3, not 0.29999999999999999). */
static char *show(const json_t *v) {
  if (json_is_real(v)) {
    char buf[40];
    zeus__py_repr(json_real_value(v), buf, sizeof buf);
    return strdup(buf);
  }
  return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
}

static int check_config(zeus_runner *r, const char *stored_text) {
  json_t *stored;
  int rc = zeus__json_parse(stored_text, strlen(stored_text), "state config", &stored);
  if (rc) return zeus__error_ctx(ZEUS_EPARSE, "state '%s'", r->state_path);
  json_t *now = config_json(&r->s);
  if (!now) {
    json_decref(stored);
    return zeus__oom("checking the state");
  }
  const char *key;
  json_t *v;
  json_object_foreach(now, key, v) {
    json_t *was = json_object_get(stored, key);
    if (was && json_equal(was, v)) continue;
    char *a = was ? show(was) : strdup("nothing");
    char *b = show(v);
    rc = zeus__error(ZEUS_EINVAL,
                     "state '%s' was made for %s = %s, this run has %s: use the same knobs or another --state",
                     r->state_path, key, a ? a : "?", b ? b : "?");
    free(a);
    free(b);
    break;
  }
  json_decref(now);
  json_decref(stored);
  return rc;
}

/* ---- open ---- */

static int lock_state(zeus_runner *r) {
  zeus__buf b = {0};
  int rc = zeus__buf_printf(&b, "%s.lock", r->state_path);
  if (rc) return rc;
  r->lock_path = b.data;
  r->lock_fd = open(r->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (r->lock_fd < 0)
    return zeus__error(ZEUS_EIO, "cannot create the lock file '%s': %s", r->lock_path, strerror(errno));
  if (flock(r->lock_fd, LOCK_EX | LOCK_NB) != 0)
    return zeus__error(ZEUS_EEXIST, "another zeus run is using the state '%s' (lock '%s')", r->state_path,
                       r->lock_path);
  return ZEUS_OK;
}

/* One lock per job identity (its name and knobs) under the log base, taken before the job folder
 * is looked for or made: two first runs of a job started together would otherwise each make a
 * folder and split the job's state between them. The file is named by a hash of the identity
 * (names can be longer than a file name may be). */
static int lock_identity(zeus_runner *r, const char *base, const char *job, const char *knobs) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const char *p = job; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  for (const char *p = knobs; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  int rc = zeus__mkdirs(base);
  if (rc) return rc;
  zeus__buf b = {0};
  if (zeus__buf_printf(&b, "%s/.zeus-run-%016llx.lock", base, (unsigned long long)h))
    return zeus__oom("naming the job's lock");
  r->id_lock_fd = open(b.data, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (r->id_lock_fd < 0)
    rc = zeus__error(ZEUS_EIO, "cannot create the job's lock file '%s': %s", b.data, strerror(errno));
  else if (flock(r->id_lock_fd, LOCK_EX | LOCK_NB) != 0)
    rc = zeus__error(ZEUS_EEXIST, "another zeus run is running the job %s%s under '%s' (lock '%s')", job, knobs, base,
                     b.data);
  zeus__buf_free(&b);
  return rc;
}

static int meta_get(zeus_runner *r, const char *key, char **out) {
  sqlite3_stmt *st;
  *out = NULL;
  if (sqlite3_prepare_v2(r->db, "SELECT value FROM meta WHERE key = ?1", -1, &st, NULL) != SQLITE_OK)
    return db_error(r, "reading");
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  int s = sqlite3_step(st), rc = ZEUS_OK;
  if (s == SQLITE_ROW) {
    *out = strdup((const char *)sqlite3_column_text(st, 0));
    if (!*out) rc = zeus__oom("reading the state");
  } else if (s != SQLITE_DONE) {
    rc = db_error(r, "reading");
  }
  sqlite3_finalize(st);
  return rc;
}

static int meta_put(zeus_runner *r, const char *key, const char *value) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(r->db, "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", -1, &st, NULL) != SQLITE_OK)
    return db_error(r, "writing");
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st) == SQLITE_DONE ? ZEUS_OK : db_error(r, "writing");
  sqlite3_finalize(st);
  return rc;
}

/* A PostgreSQL state: the in-memory database's image written back (after every change). */
static int persist(zeus_runner *r) {
  if (!r->pg) return ZEUS_OK;
  sqlite3_int64 n = 0;
  unsigned char *img = sqlite3_serialize(r->db, "main", &n, 0);
  if (!img) return db_error(r, "serializing the state");
  int rc = zeus__run_pg_save(r->pg, img, (size_t)n);
  sqlite3_free(img);
  return rc;
}

static bool is_pg_url(const char *s) {
  return s && (strncmp(s, "postgresql://", 13) == 0 || strncmp(s, "postgres://", 11) == 0);
}

static int write_driver(zeus_runner *r) {
  char *bso;
  int rc = zeus_bso_save_state(r->bso, &bso);
  if (rc) return rc;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(r->db,
                         "INSERT OR REPLACE INTO driver (id, next_recurrence, next_try, next_seed, min_cost, cost_acc, "
                         "optimizer) VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6)",
                         -1, &st, NULL) != SQLITE_OK) {
    free(bso);
    return db_error(r, "writing");
  }
  sqlite3_bind_int64(st, 1, r->next_rec);
  sqlite3_bind_int64(st, 2, r->next_try);
  sqlite3_bind_int64(st, 3, r->next_seed);
  if (isfinite(r->min_cost)) sqlite3_bind_double(st, 4, r->min_cost);
  else sqlite3_bind_null(st, 4);
  sqlite3_bind_double(st, 5, r->cost_acc);
  sqlite3_bind_text(st, 6, bso, -1, SQLITE_STATIC);
  rc = sqlite3_step(st) == SQLITE_DONE ? ZEUS_OK : db_error(r, "writing");
  sqlite3_finalize(st);
  free(bso);
  return rc;
}

static int read_driver(zeus_runner *r) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(
          r->db, "SELECT next_recurrence, next_try, next_seed, min_cost, cost_acc, optimizer FROM driver WHERE id = 1",
          -1, &st, NULL) != SQLITE_OK)
    return db_error(r, "reading");
  int rc;
  if (sqlite3_step(st) != SQLITE_ROW) {
    rc = zeus__error(ZEUS_EPARSE, "state '%s': the driver's state is missing", r->state_path);
  } else {
    r->next_rec = (long)sqlite3_column_int64(st, 0);
    r->next_try = (long)sqlite3_column_int64(st, 1);
    r->next_seed = sqlite3_column_int64(st, 2);
    r->min_cost = sqlite3_column_type(st, 3) == SQLITE_NULL ? INFINITY : sqlite3_column_double(st, 3);
    r->cost_acc = sqlite3_column_double(st, 4);
    rc = zeus_bso_load_state(&r->bso, (const char *)sqlite3_column_text(st, 5));
    if (rc) rc = zeus__error_ctx(rc, "state '%s'", r->state_path);
    else if (r->next_rec < 1 || r->next_try < 1)
      rc = zeus__error(ZEUS_EPARSE, "state '%s': impossible driver position (recurrence %ld, try %ld)", r->state_path,
                       r->next_rec, r->next_try);
  }
  sqlite3_finalize(st);
  return rc;
}

static int create_state(zeus_runner *r) {
  zeus_bso_opts bo;
  zeus_bso_opts_init(&bo);
  bo.seed = r->s.seed;
  bo.window_size = r->s.window_size;
  int rc = zeus_bso_open(&r->bso, r->s.batch_sizes, r->s.num_batch_sizes, r->s.default_bs, &bo);
  if (rc) return rc;
  r->next_rec = 1;
  r->next_try = 1;
  r->next_seed = (long long)r->s.seed;
  r->min_cost = INFINITY;
  r->cost_acc = 0;
  json_t *cfg = config_json(&r->s);
  char *text = cfg ? zeus_json_dumps(cfg, JSON_COMPACT) : NULL;
  json_decref(cfg);
  if (!text) return zeus__oom("creating the state");
  char created[32];
  snprintf(created, sizeof created, "%.3f", zeus_wall_s());
  rc = exec(r, "BEGIN IMMEDIATE", "starting a transaction");
  if (!rc) rc = meta_put(r, "version", STATE_VERSION);
  if (!rc) rc = meta_put(r, "config", text);
  if (!rc) rc = meta_put(r, "logdir", r->logdir);
  if (!rc) rc = meta_put(r, "created", created);
  if (!rc) rc = write_driver(r);
  if (!rc) rc = exec(r, "COMMIT", "committing");
  else rollback(r);
  if (!rc) rc = persist(r);
  free(text);
  return rc;
}

/* ---- damage, resets and orphans ---- */

static int damaged(zeus_runner *r, const char *why) {
  return zeus__error(ZEUS_EPARSE,
                     "state '%s' is damaged: %s. It was left as it is; restore it from a copy, or start this job "
                     "over with --reset-state (which keeps the damaged file beside it as %s.reset-<time>)",
                     r->state_path, why, r->state_path);
}

/* --reset-state: the old state (and a journal of it) renamed to <state>.reset-<time>, kept. */
static int set_aside(zeus_runner *r) {
  char stamp[32];
  time_t now = time(NULL);
  struct tm tmv;
  localtime_r(&now, &tmv);
  strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", &tmv);
  static const char *const suffix[] = {"", "-journal", "-wal", "-shm"};
  int rc = ZEUS_OK;
  for (size_t i = 0; !rc && i < sizeof suffix / sizeof suffix[0]; i++) {
    zeus__buf from = {0}, to = {0};
    if (zeus__buf_printf(&from, "%s%s", r->state_path, suffix[i]) ||
        zeus__buf_printf(&to, "%s.reset-%s%s", r->state_path, stamp, suffix[i]))
      rc = zeus__oom("setting the state aside");
    else if (rename(from.data, to.data) != 0 && !(i > 0 && errno == ENOENT))
      rc = zeus__error(ZEUS_EIO, "--reset-state: cannot rename '%s' to '%s': %s", from.data, to.data, strerror(errno));
    else if (i == 0)
      zeus__log(ZEUS_LOG_WARN, "run", "--reset-state: the old state is kept as %s; starting over", to.data);
    zeus__buf_free(&from);
    zeus__buf_free(&to);
  }
  return rc;
}

static int check_tables(zeus_runner *r) {
  static const char *const tables[] = {"meta", "driver", "history"};
  for (size_t i = 0; i < 3; i++) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(r->db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1", -1, &st, NULL) !=
        SQLITE_OK)
      return db_error(r, "reading");
    sqlite3_bind_text(st, 1, tables[i], -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    sqlite3_finalize(st);
    if (s == SQLITE_DONE) {
      char why[64];
      snprintf(why, sizeof why, "its table '%s' is gone", tables[i]);
      return damaged(r, why);
    }
    if (s != SQLITE_ROW) return db_error(r, "reading");
  }
  return ZEUS_OK;
}

/* The history must end before where the driver stands (a history that ran ahead of its driver was
 * edited or mixed with another state's). */
static int check_history(zeus_runner *r) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(r->db, "SELECT recurrence, try FROM history ORDER BY id DESC LIMIT 1", -1, &st, NULL) !=
      SQLITE_OK)
    return db_error(r, "reading the history");
  int rc = ZEUS_OK;
  if (sqlite3_step(st) == SQLITE_ROW) {
    long rec = (long)sqlite3_column_int64(st, 0), tr = (long)sqlite3_column_int64(st, 1);
    if (rec > r->next_rec || (rec == r->next_rec && tr >= r->next_try)) {
      char why[160];
      snprintf(why, sizeof why,
               "its history ends at recurrence %ld, try %ld, not before where its driver stands "
               "(recurrence %ld, try %ld)",
               rec, tr, r->next_rec, r->next_try);
      rc = damaged(r, why);
    }
  }
  sqlite3_finalize(st);
  return rc;
}

/* Fields of /proc/<pid>/stat: the state letter, the process group and the start time (clock ticks
 * after boot). false when the process is gone. */
static bool proc_stat(pid_t pid, char *state, long *pgrp, unsigned long long *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* after the command name, which may hold spaces */
  if (!p || p[1] != ' ') return false;
  p += 2; /* field 3 */
  *state = *p;
  int field = 3;
  for (; *p && field < 5; p++)
    if (*p == ' ') field++;
  *pgrp = strtol(p, NULL, 10); /* field 5 */
  for (; *p && field < 22; p++)
    if (*p == ' ') field++;
  *start = field == 22 ? strtoull(p, NULL, 10) : 0;
  return true;
}

static unsigned long long start_time(pid_t pid) {
  char state;
  long pgrp;
  unsigned long long start;
  return proc_stat(pid, &state, &pgrp, &start) ? start : 0;
}

/* Whether a live (not zombie) process is in process group pgid. */
static bool group_alive(pid_t pgid) {
  if (kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR *d = opendir("/proc");
  if (!d) return true; /* no /proc: kill() said it exists */
  bool alive = false;
  struct dirent *e;
  while (!alive && (e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    char state;
    long pgrp;
    unsigned long long start;
    if (*end || pid <= 0) continue;
    if (proc_stat((pid_t)pid, &state, &pgrp, &start) && pgrp == pgid && state != 'Z' && state != 'X') alive = true;
  }
  closedir(d);
  return alive;
}

void zeus__run_state_trainee_started(zeus_runner *r, pid_t pid) {
  char v[128];
  snprintf(v, sizeof v, "%d %llu %ld %ld", (int)pid, start_time(pid), r->cur_rec, r->cur_try);
  if (meta_put(r, "trainee", v) || persist(r))
    zeus__log(ZEUS_LOG_WARN, "run", "cannot record the running trainee in the state: %s", zeus_errmsg());
}

void zeus__run_state_trainee_ended(zeus_runner *r) {
  if (exec(r, "DELETE FROM meta WHERE key = 'trainee'", "forgetting the trainee") || persist(r))
    zeus__log(ZEUS_LOG_WARN, "run", "%s", zeus_errmsg());
}

/* A trainee an earlier driver recorded as running, whose process group is still alive. */
static int check_orphan(zeus_runner *r) {
  char *v = NULL;
  int rc = meta_get(r, "trainee", &v);
  if (rc || !v) return rc;
  int pgid = 0;
  unsigned long long started = 0;
  long rec = 0, tr = 0;
  bool parsed = sscanf(v, "%d %llu %ld %ld", &pgid, &started, &rec, &tr) == 4 && pgid > 1;
  free(v);
  if (parsed && group_alive((pid_t)pgid)) {
    unsigned long long now = start_time(pgid);
    /* The leader gone (its group lives on in its children) or the same process as recorded. */
    if (now == 0 || now == started)
      return zeus__error(ZEUS_EEXIST,
                         "the trainee of recurrence %ld, try %ld (process group %d), started by an earlier zeus run "
                         "of state '%s', is still running: wait for it to end or stop it (kill -TERM -- -%d), then "
                         "run again (this run would repeat that try beside it)",
                         rec, tr, pgid, r->state_path, pgid);
  }
  zeus__log(ZEUS_LOG_INFO, "run", "the trainee an earlier run left recorded has ended");
  zeus__run_state_trainee_ended(r);
  return ZEUS_OK;
}

int zeus__run_state_open(zeus_runner *r) {
  zeus__buf job = {0}, knobs = {0};
  int rc = job_names(&r->s, &job, &knobs);
  char *base = absolute(r->s.log_base ? r->s.log_base : "zeus_logs");
  if (!base && !rc) rc = zeus__oom("finding the log folder");
  bool existing = false;
  char *fresh = base && !rc ? new_job_folder(base, job.data, knobs.data, r->s.recurrences) : NULL;
  if (!rc && !fresh) rc = zeus__oom("naming the job folder");
  bool pg = is_pg_url(r->s.state_path);
  unsigned char *image = NULL;
  size_t image_len = 0;
  if (!rc && pg) {
    /* The state in PostgreSQL, by job identity; the job folder (logs) on this node as by default. */
    zeus__buf label = {0}, key = {0};
    if (zeus__buf_printf(&key, "%s%s", job.data, knobs.data) ||
        zeus__buf_printf(&label, "postgresql state of %s%s", job.data, knobs.data))
      rc = zeus__oom("naming the state");
    if (!rc) rc = zeus__run_pg_open(r->s.state_path, key.data, &r->pg, &image, &image_len);
    r->state_path = label.data;
    zeus__buf_free(&key);
    existing = image != NULL;
    if (!rc) {
      r->logdir = find_job_folder(base, job.data, knobs.data);
      if (!r->logdir) {
        r->logdir = fresh;
        fresh = NULL;
        rc = make_unique_dir(&r->logdir);
      }
    }
  } else if (!rc && r->s.state_path) {
    r->state_path = absolute(r->s.state_path);
    if (!r->state_path) rc = zeus__oom("finding the state");
    existing = !rc && file_exists(r->state_path);
    if (!rc && !existing) {
      char *dir = strdup(r->state_path);
      if (!dir) rc = zeus__oom("creating the state");
      char *slash = dir ? strrchr(dir, '/') : NULL;
      if (!rc && slash && slash != dir) {
        *slash = '\0';
        rc = zeus__mkdirs(dir);
      }
      free(dir);
    }
  } else if (!rc) {
    rc = lock_identity(r, base, job.data, knobs.data);
  }
  if (!rc && !r->s.state_path && !pg) {
    r->logdir = find_job_folder(base, job.data, knobs.data);
    existing = r->logdir != NULL;
    if (!existing) {
      r->logdir = fresh;
      fresh = NULL;
    }
    if (!existing) rc = make_unique_dir(&r->logdir);
    zeus__buf sp = {0};
    if (!rc && zeus__buf_printf(&sp, "%s/%s", r->logdir, STATE_FILE)) rc = zeus__oom("finding the state");
    r->state_path = sp.data;
  }
  zeus__buf_free(&job);
  zeus__buf_free(&knobs);
  free(base);
  if (!rc && !pg) rc = lock_state(r);
  if (rc) {
    free(fresh);
    sqlite3_free(image);
    return rc;
  }
  if (existing && r->s.reset_state) {
    if (pg) {
      char stamp[32];
      time_t now = time(NULL);
      struct tm tmv;
      localtime_r(&now, &tmv);
      strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", &tmv);
      rc = zeus__run_pg_set_aside(r->pg, stamp);
      sqlite3_free(image);
      image = NULL;
    } else {
      rc = set_aside(r);
    }
    existing = false;
  }
  struct stat st;
  if (!rc && !pg && existing && stat(r->state_path, &st) == 0 && st.st_size == 0)
    rc = damaged(r, "it is empty (0 bytes)");
  if (!rc && pg && existing && image_len == 0) rc = damaged(r, "it is empty (0 bytes)");
  if (rc) {
    free(fresh);
    sqlite3_free(image);
    return rc;
  }
  if (sqlite3_open_v2(pg ? ":memory:" : r->state_path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
      SQLITE_OK) {
    free(fresh);
    sqlite3_free(image);
    return db_error(r, "cannot open");
  }
  if (image && sqlite3_deserialize(r->db, "main", image, (sqlite3_int64)image_len, (sqlite3_int64)image_len,
                                   SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE) != SQLITE_OK) {
    free(fresh);
    return db_error(r, "loading the state's image");
  }
  sqlite3_busy_timeout(r->db, ZEUS__STORE_RUN_STATE_BUSY_TIMEOUT_MS);
  rc = exec(r, "PRAGMA synchronous = FULL", "configuring");
  if (!rc && sqlite3_db_readonly(r->db, "main") == 1)
    rc = zeus__error(ZEUS_EPERM, "state '%s' cannot be written (read-only): a try's result could not be kept",
                     r->state_path);
  /* An existing state keeps its tables: one that lacks one is damaged, not started over. */
  if (!rc && existing) rc = check_tables(r);
  if (!rc) rc = exec(r, SCHEMA, "creating the tables");
  char *version = NULL, *config = NULL, *logdir = NULL;
  if (!rc) rc = meta_get(r, "version", &version);
  if (!rc) rc = meta_get(r, "config", &config);
  if (!rc) rc = meta_get(r, "logdir", &logdir);
  if (!rc && version && strcmp(version, STATE_VERSION) != 0)
    rc = zeus__error(ZEUS_EPARSE, "state '%s' has version %s; this zeus reads version %s", r->state_path, version,
                     STATE_VERSION);
  if (!rc && existing && (!version || !config))
    rc = damaged(r, !version && !config ? "its meta rows (version and config) are gone"
                    : !version          ? "its meta row 'version' is gone"
                                        : "its meta row 'config' is gone");
  if (!rc && config) {
    rc = check_config(r, config);
    if (!rc && logdir) {
      free(r->logdir);
      r->logdir = logdir;
      logdir = NULL;
    }
    if (!rc && !r->logdir) rc = zeus__error(ZEUS_EPARSE, "state '%s' does not name its job folder", r->state_path);
    if (!rc) rc = zeus__mkdirs(r->logdir); /* recreated if someone removed it */
    if (!rc) rc = read_driver(r);
    if (!rc) rc = check_history(r);
    /* A shared state's trainee may run on another node: its process group means nothing here. */
    if (!rc && !pg) rc = check_orphan(r);
    if (!rc)
      zeus__log(ZEUS_LOG_INFO, "run", "continuing %s at recurrence %ld, try %ld", r->state_path, r->next_rec,
                r->next_try);
  } else if (!rc) {
    if (!r->logdir) {
      r->logdir = fresh;
      fresh = NULL;
      rc = make_unique_dir(&r->logdir);
    } else {
      rc = zeus__mkdirs(r->logdir);
    }
    if (!rc) rc = create_state(r);
  }
  free(fresh);
  free(version);
  free(config);
  free(logdir);
  return rc;
}

int zeus__run_state_reload(zeus_runner *r) {
  zeus_bso_close(r->bso);
  r->bso = NULL;
  return read_driver(r);
}

void zeus__run_state_close(zeus_runner *r) {
  if (r->db) sqlite3_close(r->db);
  r->db = NULL;
  zeus__run_pg_close(r->pg); /* releases the job's lock */
  r->pg = NULL;
  if (r->lock_fd >= 0) close(r->lock_fd); /* releases the lock */
  if (r->id_lock_fd >= 0) close(r->id_lock_fd);
  r->lock_fd = r->id_lock_fd = -1;
}

int zeus__run_state_commit(zeus_runner *r, const zeus_run_try *t) {
  int rc = exec(r, "BEGIN IMMEDIATE", "starting a transaction");
  if (rc) return rc;
  if (t) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(r->db,
                           "INSERT INTO history (recurrence, try, batch_size, learning_rate, seed, cost_threshold, "
                           "energy_j, time_s, cost, epochs, reached, status, exit_code, finished_at) VALUES "
                           "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                           -1, &st, NULL) != SQLITE_OK) {
      rc = db_error(r, "writing the history");
    } else {
      sqlite3_bind_int64(st, 1, t->recurrence);
      sqlite3_bind_int64(st, 2, t->try_index);
      sqlite3_bind_int64(st, 3, t->batch_size);
      if (isnan(t->learning_rate)) sqlite3_bind_null(st, 4);
      else sqlite3_bind_double(st, 4, t->learning_rate);
      sqlite3_bind_int64(st, 5, t->seed);
      if (isfinite(t->cost_threshold)) sqlite3_bind_double(st, 6, t->cost_threshold);
      else sqlite3_bind_null(st, 6);
      sqlite3_bind_double(st, 7, t->energy_j);
      sqlite3_bind_double(st, 8, t->time_s);
      sqlite3_bind_double(st, 9, t->cost);
      if (t->epochs >= 0) sqlite3_bind_int64(st, 10, t->epochs);
      else sqlite3_bind_null(st, 10);
      sqlite3_bind_int(st, 11, t->reached);
      sqlite3_bind_text(st, 12, t->status, -1, SQLITE_STATIC);
      sqlite3_bind_int(st, 13, t->exit_code);
      sqlite3_bind_double(st, 14, zeus_wall_s());
      if (sqlite3_step(st) != SQLITE_DONE) rc = db_error(r, "writing the history");
      sqlite3_finalize(st);
    }
  }
  if (!rc) rc = write_driver(r);
  if (!rc) rc = exec(r, "COMMIT", "committing a try");
  else rollback(r);
  if (!rc) rc = persist(r);
  return rc;
}

static json_t *col_real(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? json_null() : json_real(sqlite3_column_double(st, i));
}

/* A measured column at `decimals` places (J from mJ: 3; s from ns: 9), a derived one (a cost) at
 * ZEUS_DERIVED_DIGITS significant digits (zeus/format.h); null stays null. */
static json_t *col_measured(sqlite3_stmt *st, int i, int decimals) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? json_null()
                                                   : zeus__json_measured(sqlite3_column_double(st, i), decimals);
}
static json_t *col_derived(sqlite3_stmt *st, int i) {
  return sqlite3_column_type(st, i) == SQLITE_NULL ? json_null() : zeus__json_derived(sqlite3_column_double(st, i));
}

/* A derived real in J (a cost), or null for none (NaN, an infinite threshold). */
static json_t *real_or_null(double v) { return zeus__json_derived(v); }

/* 1 / sqrt(precision): the standard deviation a precision stands for (0 for an exact belief, null
 * for none at all). */
static json_t *sd_of(double precision) {
  if (isinf(precision)) return json_real(0);
  if (!(precision > 0)) return json_null();
  return zeus__json_derived(1 / sqrt(precision));
}

/* The optimizer as a report: its phase, the costs it learnt (a try stopped before its first epoch
 * is learnt as a prohibitive cost) and, during Thompson sampling, each arm's belief about the cost
 * of its batch size (rewards are -cost). The exact state (random generator included) stays in
 * SQLite for the next run. */
static json_t *optimizer_report(const zeus_bso *b) {
  bool pruning = zeus_bso_get_phase(b) == ZEUS_BSO_PRUNING;
  json_t *arms = json_array();
  const zeus_gts *g = zeus_bso_bandit(b);
  for (size_t i = 0; g && arms && i < zeus_gts_num_arms(g); i++) {
    zeus_gts_arm a;
    if (zeus_gts_arm_at(g, i, &a)) continue;
    json_array_append_new(arms, json_pack("{s:I,s:o,s:o,s:o,s:I}", "batch_size", (json_int_t)a.arm, "mean_cost_j",
                                          real_or_null(-a.mean), "mean_cost_sd_j", sd_of(a.precision), "cost_sd_j",
                                          sd_of(a.reward_precision), "num_observations",
                                          (json_int_t)a.num_observations));
  }
  json_t *obs = json_array();
  for (size_t i = 0; obs && i < zeus_bso_num_observations(b); i++) {
    long bs;
    double reward;
    if (zeus_bso_observation(b, i, &bs, &reward)) continue;
    json_array_append_new(obs, json_pack("{s:I,s:o}", "batch_size", (json_int_t)bs, "cost_j", real_or_null(-reward)));
  }
  long expecting = zeus_bso_expecting(b);
  return json_pack("{s:s,s:o,s:o,s:o}", "phase", pruning ? "pruning" : "thompson", "expecting_batch_size",
                   pruning && expecting > 0 ? json_integer(expecting) : json_null(), "observations", obs, "arms",
                   arms);
}

int zeus__run_state_json(zeus_runner *r, char **out) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(r->db,
                         "SELECT recurrence, try, batch_size, learning_rate, seed, cost_threshold, energy_j, time_s, "
                         "cost, epochs, reached, status, exit_code FROM history ORDER BY id",
                         -1, &st, NULL) != SQLITE_OK)
    return db_error(r, "reading the history");
  json_t *hist = json_array();
  int s;
  while ((s = sqlite3_step(st)) == SQLITE_ROW) {
    json_t *e = json_object();
    json_object_set_new(e, "recurrence", json_integer(sqlite3_column_int64(st, 0)));
    json_object_set_new(e, "try", json_integer(sqlite3_column_int64(st, 1)));
    json_object_set_new(e, "batch_size", json_integer(sqlite3_column_int64(st, 2)));
    json_object_set_new(e, "learning_rate", col_real(st, 3));
    json_object_set_new(e, "seed", json_integer(sqlite3_column_int64(st, 4)));
    json_object_set_new(e, "cost_threshold_j", col_derived(st, 5));
    json_object_set_new(e, "energy_j", col_measured(st, 6, 3));
    json_object_set_new(e, "time_s", col_measured(st, 7, 9));
    json_object_set_new(e, "cost_j", col_derived(st, 8));
    bool no_epochs = sqlite3_column_type(st, 9) == SQLITE_NULL;
    json_object_set_new(e, "epochs", no_epochs ? json_null() : json_integer(sqlite3_column_int64(st, 9)));
    json_object_set_new(e, "reached", json_boolean(sqlite3_column_int(st, 10)));
    json_object_set_new(e, "status", json_string((const char *)sqlite3_column_text(st, 11)));
    json_object_set_new(e, "exit_code", json_integer(sqlite3_column_int(st, 12)));
    json_array_append_new(hist, e);
  }
  sqlite3_finalize(st);
  if (s != SQLITE_DONE) {
    json_decref(hist);
    return db_error(r, "reading the history");
  }
  json_t *root = json_object();
  json_object_set_new(root, "logdir", json_string(r->logdir));
  json_object_set_new(root, "state", json_string(r->state_path));
  json_object_set_new(root, "recurrences_done", json_integer(r->next_rec - 1));
  json_object_set_new(root, "next_try", json_integer(r->next_try));
  json_object_set_new(root, "min_cost_j", real_or_null(r->min_cost));
  json_object_set_new(root, "max_power_w", json_real(r->max_power_w));
  json_object_set_new(root, "history", hist);
  json_object_set_new(root, "optimizer", optimizer_report(r->bso));
  char *text = zeus_json_dumps(root, JSON_INDENT(1));
  json_decref(root);
  if (!text) return zeus__oom("serialising the history");
  *out = text;
  return ZEUS_OK;
}
