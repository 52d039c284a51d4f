/* Dumps of a job (ranks.json, <n>.sched.json, <n>.prof.json) and the instruction CSV. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pfo/pfo_internal.h"
#include "zeus/format.h"

static char *dump_path(const char *dir, const char *name) {
  zeus__buf b = {0};
  if (zeus__buf_printf(&b, "%s/%s", dir, name)) return NULL;
  return b.data;
}

/* A JSON list of n `size`-byte items, each converted by to_jt, as text ending in a newline. */
typedef json_t *(*to_jt_fn)(const void *);
static int list_text(const void *items, size_t size, size_t n, to_jt_fn to_jt, const char *what, char **out,
                     size_t *len) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) json_array_append_new(a, to_jt((const char *)items + i * size));
  char *s = a ? zeus_json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  size_t k = s ? strlen(s) : 0;
  char *t = s ? realloc(s, k + 2) : NULL;
  if (!t) {
    free(s);
    return zeus__oom(what);
  }
  t[k] = '\n';
  t[k + 1] = '\0';
  *out = t;
  *len = k + 1;
  return ZEUS_OK;
}

/* Writes <dir>/<name> (a path) or <loc>/<name> (a job folder under an open dump root) atomically. */
static int save_list(const char *dir, const zeus__pfo_dump_loc *loc, const char *name, const void *items, size_t size,
                     size_t n, to_jt_fn to_jt, const char *what) {
  char *text = NULL;
  size_t len = 0;
  int rc = list_text(items, size, n, to_jt, what, &text, &len);
  if (rc) return rc;
  if (loc) {
    rc = zeus__pfo_dump_write(loc, name, text, len);
  } else {
    char *p = dump_path(dir, name);
    rc = p ? zeus__write_file_atomic(p, text, len) : zeus__oom(what);
    free(p);
  }
  free(text);
  return rc;
}

static json_t *rank_jt(const void *v) { return zeus__pfo_rank_info_to_jt(v); }
static json_t *schedule_jt(const void *v) { return zeus__pfo_schedule_to_jt(v); }
static json_t *prof_jt(const void *v) { return zeus__pfo_prof_result_to_jt(v); }

int zeus_pfo_save_ranks(const char *dir, const zeus_pfo_rank_info *r, size_t n) {
  return save_list(dir, NULL, "ranks.json", r, sizeof *r, n, rank_jt, "saving ranks");
}

int zeus_pfo_save_schedules(const char *dir, int num, const zeus_pfo_schedule *s, size_t n) {
  char name[64];
  snprintf(name, sizeof name, "%d.sched.json", num);
  return save_list(dir, NULL, name, s, sizeof *s, n, schedule_jt, "saving schedules");
}

int zeus_pfo_save_prof(const char *dir, int num, const zeus_pfo_prof_result *r, size_t n) {
  char name[64];
  snprintf(name, sizeof name, "%d.prof.json", num);
  return save_list(dir, NULL, name, r, sizeof *r, n, prof_jt, "saving profiling results");
}

/* ---- dumps under an open dump root (the server) ---- */

int zeus__pfo_dump_mkdir(const zeus__pfo_dump_loc *loc) {
  if (mkdirat(loc->root_fd, loc->job, 0700) == 0) return ZEUS_OK;
  int e = errno;
  if (e == EEXIST) return zeus__error(ZEUS_EEXIST, "the job folder '%s' exists already", loc->path);
  return zeus__error(e == EACCES ? ZEUS_EPERM : ZEUS_EIO, "cannot create the job folder '%s': %s", loc->path,
                     strerror(e));
}

int zeus__pfo_dump_write(const zeus__pfo_dump_loc *loc, const char *name, const void *data, size_t len) {
  /* The job folder is opened relative to the root we hold, without following a symlink: a folder
   * replaced by a link elsewhere fails here instead of redirecting our writes. */
  int dfd = openat(loc->root_fd, loc->job, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0 && errno == ENOENT) { /* removed behind our back: make it again */
    if (mkdirat(loc->root_fd, loc->job, 0700) == 0 || errno == EEXIST)
      dfd = openat(loc->root_fd, loc->job, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  }
  if (dfd < 0) {
    int e = errno;
    if (e == ELOOP || e == ENOTDIR)
      return zeus__error(ZEUS_EPERM, "the job folder '%s' is a symbolic link or not a directory; not writing "
                         "'%s' through it", loc->path, name);
    return zeus__error(e == EACCES ? ZEUS_EPERM : ZEUS_EIO, "cannot open the job folder '%s': %s", loc->path,
                       strerror(e));
  }
  zeus__buf what = {0};
  if (zeus__buf_printf(&what, "%s/%s", loc->path, name)) {
    close(dfd);
    return zeus__oom("writing a dump");
  }
  int rc = zeus__write_file_atomic_at(dfd, name, data, len, what.data);
  zeus__buf_free(&what);
  close(dfd);
  return rc;
}

int zeus__pfo_dump_ranks(const zeus__pfo_dump_loc *loc, const zeus_pfo_rank_info *r, size_t n) {
  return save_list(NULL, loc, "ranks.json", r, sizeof *r, n, rank_jt, "saving ranks");
}

int zeus__pfo_dump_schedules(const zeus__pfo_dump_loc *loc, int num, const zeus_pfo_schedule *s, size_t n) {
  char name[64];
  snprintf(name, sizeof name, "%d.sched.json", num);
  return save_list(NULL, loc, name, s, sizeof *s, n, schedule_jt, "saving schedules");
}

int zeus__pfo_dump_prof(const zeus__pfo_dump_loc *loc, int num, const zeus_pfo_prof_result *r, size_t n) {
  char name[64];
  snprintf(name, sizeof name, "%d.prof.json", num);
  return save_list(NULL, loc, name, r, sizeof *r, n, prof_jt, "saving profiling results");
}

/* Loads a JSON list from `path` and converts every element with `conv` into an array of
 * `size`-byte elements. */
typedef int (*conv_fn)(const json_t *, const char *, void *);
typedef void (*clear_fn)(void *);
static int load_list(const char *path, size_t size, conv_fn conv, clear_fn clear, void **out, size_t *n) {
  json_t *v;
  int rc = zeus__json_load_file(path, &v);
  if (rc) return rc;
  if (!json_is_array(v)) {
    rc = zeus__error(ZEUS_EPARSE, "%s: expected a JSON list, got %s", path, zeus__json_type_name(v));
    json_decref(v);
    return rc;
  }
  size_t len = json_array_size(v);
  char *arr = calloc(len ? len : 1, size);
  if (!arr) { json_decref(v); return zeus__oom("loading a dump"); }
  for (size_t i = 0; i < len; i++) {
    char ctx[512];
    snprintf(ctx, sizeof ctx, "%s: element %zu", path, i);
    if ((rc = conv(json_array_get(v, i), ctx, arr + i * size))) {
      for (size_t j = 0; j < i; j++) clear(arr + j * size);
      free(arr);
      json_decref(v);
      return rc;
    }
  }
  json_decref(v);
  *out = arr;
  *n = len;
  return ZEUS_OK;
}

static int conv_rank(const json_t *v, const char *c, void *o) { return zeus__pfo_rank_info_from_jt(v, c, o); }
static int conv_sched(const json_t *v, const char *c, void *o) { return zeus__pfo_schedule_from_jt(v, c, o); }
static int conv_prof(const json_t *v, const char *c, void *o) { return zeus__pfo_prof_result_from_jt(v, c, o); }
static void clear_rank(void *o) { zeus_pfo_rank_info_clear(o); }
static void clear_sched(void *o) { zeus_pfo_schedule_clear(o); }
static void clear_prof(void *o) { zeus_pfo_prof_result_clear(o); }

int zeus_pfo_load_ranks(const char *dir, zeus_pfo_rank_info **out, size_t *n) {
  char *p = dump_path(dir, "ranks.json");
  if (!p) return zeus__oom("loading ranks");
  int rc = load_list(p, sizeof **out, conv_rank, clear_rank, (void **)out, n);
  free(p);
  return rc;
}

int zeus_pfo_load_schedules_file(const char *path, zeus_pfo_schedule **out, size_t *n) {
  return load_list(path, sizeof **out, conv_sched, clear_sched, (void **)out, n);
}

int zeus_pfo_load_prof_file(const char *path, zeus_pfo_prof_result **out, size_t *n) {
  return load_list(path, sizeof **out, conv_prof, clear_prof, (void **)out, n);
}

/* Loads <dir>/<num><suffix> (a round's dump) as a list of `size`-byte elements. */
static int load_round(const char *dir, int num, const char *suffix, size_t size, conv_fn conv, clear_fn clear,
                      void **out, size_t *n) {
  zeus__buf p = {0};
  if (zeus__buf_printf(&p, "%s/%d%s", dir, num, suffix)) return zeus__oom("loading a dump");
  int rc = load_list(p.data, size, conv, clear, out, n);
  zeus__buf_free(&p);
  return rc;
}

int zeus_pfo_load_schedules(const char *dir, int num, zeus_pfo_schedule **out, size_t *n) {
  return load_round(dir, num, ".sched.json", sizeof **out, conv_sched, clear_sched, (void **)out, n);
}

int zeus_pfo_load_prof(const char *dir, int num, zeus_pfo_prof_result **out, size_t *n) {
  return load_round(dir, num, ".prof.json", sizeof **out, conv_prof, clear_prof, (void **)out, n);
}

static int cmp_measure_desc(const void *a, const void *b) {
  const zeus_pfo_freq_measure *x = a, *y = b;
  return (y->frequency_mhz > x->frequency_mhz) - (y->frequency_mhz < x->frequency_mhz);
}

int zeus__pfo_instruction_csv(const zeus_pfo_offline_result *res, size_t n, zeus__buf *b) {
  int rc = zeus__buf_puts(b, "rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy\n");
  for (size_t i = 0; !rc && i < n; i++) {
    const zeus_pfo_offline_result *r = &res[i];
    const struct { const char *name; const zeus_pfo_freq_measure *m; size_t n; } in[] = {
        {"forward", r->forward, r->n_forward}, {"backward", r->backward, r->n_backward}};
    for (size_t k = 0; !rc && k < 2; k++) {
      zeus_pfo_freq_measure *sorted = malloc((in[k].n + 1) * sizeof *sorted);
      if (!sorted) { rc = zeus__oom("writing the instruction CSV"); break; }
      if (in[k].n) memcpy(sorted, in[k].m, in[k].n * sizeof *sorted);
      qsort(sorted, in[k].n, sizeof *sorted, cmp_measure_desc);
      for (size_t j = 0; !rc && j < in[k].n; j++) {
        /* Means of measured figures: at the ns and the uJ, shortest (docs/output.md). */
        char t[ZEUS_FORMAT_DOUBLE_MAX], e[ZEUS_FORMAT_DOUBLE_MAX];
        zeus_format_double(zeus_round_decimals(sorted[j].time_s, 9), t, sizeof t);
        zeus_format_double(zeus_round_decimals(sorted[j].energy_j, 6), e, sizeof e);
        rc = zeus__buf_printf(b, "%d,%d,%d,%d,%d,%s,%d,%s,%s\n", r->rank, r->dp_rank, r->pp_rank, r->tp_rank,
                              r->pp_rank, in[k].name, sorted[j].frequency_mhz, t, e);
      }
      free(sorted);
    }
  }
  return rc;
}

int zeus_pfo_write_instruction_csv(const char *path, const zeus_pfo_offline_result *res, size_t n) {
  zeus__buf b = {0};
  int rc = zeus__pfo_instruction_csv(res, n, &b);
  if (!rc) rc = zeus__write_file_atomic(path, b.data, b.len);
  zeus__buf_free(&b);
  return rc;
}
