/* src/pfo/pfo_internal.h: the Perseus wire formats shared by the server and the client (not API).
 *
 * src/pfo/ holds what both sides speak: the models and their JSON (models.c), the plan-file
 * parser (plan_parse.c), the dumps (dump.c), job ids (jobid.c) and the ZEUS_PFO_* / PERSEUS_*
 * settings lookup (pfo_env.c). It needs jansson only; the
 * server (src/pfo_server/) and the client (src/pfo_client/) build on it. */
#ifndef ZEUS_PFO_INTERNAL_H
#define ZEUS_PFO_INTERNAL_H

#include <jansson.h>

#include "core/core.h"
#include "core/json.h"
#include "zeus/pfo.h"

/* ---- models <-> jansson values (models.c). `ctx` names the value in errors. ---- */
int zeus__pfo_job_info_from_jt(const json_t *v, const char *ctx, zeus_pfo_job_info *out);
int zeus__pfo_rank_info_from_jt(const json_t *v, const char *ctx, zeus_pfo_rank_info *out);
int zeus__pfo_schedule_from_jt(const json_t *v, const char *ctx, zeus_pfo_schedule *out);
int zeus__pfo_prof_result_from_jt(const json_t *v, const char *ctx, zeus_pfo_prof_result *out);
int zeus__pfo_offline_result_from_jt(const json_t *v, const char *ctx, zeus_pfo_offline_result *out);
json_t *zeus__pfo_job_info_to_jt(const zeus_pfo_job_info *v);
json_t *zeus__pfo_rank_info_to_jt(const zeus_pfo_rank_info *v);
json_t *zeus__pfo_schedule_to_jt(const zeus_pfo_schedule *v);
json_t *zeus__pfo_prof_result_to_jt(const zeus_pfo_prof_result *v);
json_t *zeus__pfo_offline_result_to_jt(const zeus_pfo_offline_result *v);
/* ProfilingResult without a JSON tree (prof_fast.c): true with *out filled when the body has the
 * plain shape the original client sends and the jansson path would accept it with the same
 * values; false, nothing allocated and *out untouched, for anything else (the caller then uses
 * the jansson path, which gives the error). */
bool zeus__pfo_prof_result_fast(const char *json, size_t len, zeus_pfo_prof_result *out);
/* zeus_pfo_prof_result_from_json through jansson only (what it did before prof_fast.c). */
int zeus__pfo_prof_result_from_json_tree(const char *json, size_t len, const char *what, zeus_pfo_prof_result *out);
/* Serialises a schedule straight into a buffer (hot path of the server). */
int zeus__pfo_schedule_to_buf(const zeus_pfo_schedule *v, zeus__buf *b);

/* Deep copies (ZEUS_ENOMEM only). */
int zeus__pfo_rank_info_copy(const zeus_pfo_rank_info *src, zeus_pfo_rank_info *dst);
int zeus__pfo_schedule_copy(const zeus_pfo_schedule *src, zeus_pfo_schedule *dst);
/* A fresh array holding copies of s[0..n) (release with zeus_pfo_schedules_free). */
int zeus__pfo_schedules_copy(const zeus_pfo_schedule *s, size_t n, zeus_pfo_schedule **out, size_t *nout);
int zeus__pfo_breakdown_copy(const zeus_pfo_breakdown *src, zeus_pfo_breakdown *dst);
void zeus__pfo_breakdown_clear(zeus_pfo_breakdown *b);

/* ---- dumps under an open dump root (dump.c), as the server writes them ----
 * The root is a directory only this user may write (zeus__open_private_dir), held open; a job's
 * folder is opened relative to it with O_NOFOLLOW|O_DIRECTORY for every write, and files are
 * written with zeus__write_file_atomic_at (O_EXCL|O_NOFOLLOW temporary, renameat), so neither a
 * symlink planted in place of the folder nor one in place of a file redirects a write. */
typedef struct zeus__pfo_dump_loc {
  int root_fd;      /* borrowed */
  const char *job;  /* the job's folder: one path component (a job id) */
  const char *path; /* "<dump_dir>/<job>", for messages */
} zeus__pfo_dump_loc;
/* Creates the job folder (mode 0700). ZEUS_EEXIST when it exists already. */
int zeus__pfo_dump_mkdir(const zeus__pfo_dump_loc *loc);
/* Writes <job folder>/<name> atomically (re-creating a job folder that was removed). */
int zeus__pfo_dump_write(const zeus__pfo_dump_loc *loc, const char *name, const void *data, size_t len);
int zeus__pfo_dump_ranks(const zeus__pfo_dump_loc *loc, const zeus_pfo_rank_info *r, size_t n);
int zeus__pfo_dump_schedules(const zeus__pfo_dump_loc *loc, int num, const zeus_pfo_schedule *s, size_t n);
int zeus__pfo_dump_prof(const zeus__pfo_dump_loc *loc, int num, const zeus_pfo_prof_result *r, size_t n);
/* The instruction profile CSV (zeus_pfo_write_instruction_csv's text) appended to b. */
int zeus__pfo_instruction_csv(const zeus_pfo_offline_result *res, size_t n, zeus__buf *b);

/* ---- settings (pfo_env.c) ---- */
/* The value of Perseus setting `name` ("SCHEDULER"): ZEUS_PFO_<name> when set and not empty,
 * else PERSEUS_<name> (the original's spelling), else NULL. `var` (at least 64 bytes) receives
 * the name of the variable the value came from (ZEUS_PFO_<name> when none), for messages and
 * for the zeus__env_* readers. */
const char *zeus__pfo_env(const char *name, char *var, size_t len);

#endif
