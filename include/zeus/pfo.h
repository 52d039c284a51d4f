/* zeus/pfo.h: the pipeline frequency optimizer (Perseus): models, dumps, plan files, job ids.
 *
 * What the Perseus server (zeus/pfo_server.h) and the client in each rank (zeus/pfo_client.h)
 * say to each other and write down. The models keep the JSON shapes of the original system
 * (JobInfo, RankInfo, FrequencySchedule, ProfilingResult, OfflineProfilingResult), so a client of
 * the original can talk to our server and its dumps can be read by either side.
 *
 * Models are plain structs owned by the caller. A struct filled by a zeus_pfo_*_from_json or
 * zeus_pfo_load_* function owns its heap members; release them with the matching
 * zeus_pfo_*_clear (one struct) or zeus_pfo_*s_free (an array). Strings returned by *_to_json
 * functions and zeus_pfo_make_job_id are released with zeus_free(). All functions are
 * thread-safe on distinct data.
 */
#ifndef ZEUS_PFO_H
#define ZEUS_PFO_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

/* ---------------------------------------------------------------------------------------------
 * Models
 * ------------------------------------------------------------------------------------------- */

/* Schema bounds. The parsers below refuse larger inputs with ZEUS_EINVAL naming the field and the
 * bound, so that a small request cannot make a server hold a large structure. */
#define ZEUS_PFO_MAX_WORLD 65536        /* degrees and world_size */
#define ZEUS_PFO_MAX_FREQUENCIES 4096   /* available_frequencies: as many SM clocks as the device
                                           layer reads from NVML for one GPU */
/* instructions of one iteration (pipe_schedule, a schedule's frequencies, values of one iteration
 * in a breakdown): forward and backward of 8192 microbatches */
#define ZEUS_PFO_MAX_INSTRUCTIONS 16384
#define ZEUS_PFO_MAX_NAME 64            /* bytes of an instruction name */
#define ZEUS_PFO_MAX_ITERS 100000       /* iterations in one ProfilingResult */
#define ZEUS_PFO_MAX_RESULT_VALUES 1048576 /* numbers in one ProfilingResult, all lists together */
#define ZEUS_PFO_MAX_METADATA 1024      /* bytes of job_metadata */

/* Training job information. When registering a job, job_id must be empty (or NULL); the server
 * generates it. Degrees and world_size are >= 1 and world_size = pp × dp × tp. */
typedef struct zeus_pfo_job_info {
  char *job_id;       /* "" when registering */
  int pp_degree;
  int dp_degree;
  int tp_degree;
  int world_size;
  char *job_metadata; /* optional, NULL when absent */
} zeus_pfo_job_info;

/* One rank's information. */
typedef struct zeus_pfo_rank_info {
  int rank;
  int dp_rank;
  int pp_rank;
  int tp_rank;
  int *available_frequencies; /* MHz, non-empty */
  size_t n_available_frequencies;
  char **pipe_schedule;       /* optional instruction names of one iteration, NULL when absent */
  size_t n_pipe_schedule;
} zeus_pfo_rank_info;

/* One (instruction, MHz) pair of a schedule. */
typedef struct zeus_pfo_freq {
  char *instruction;
  int frequency_mhz;
} zeus_pfo_freq;

/* The frequency schedule of one rank for one iteration ("frequencies": [[inst, MHz], ...]). */
typedef struct zeus_pfo_schedule {
  int rank;
  zeus_pfo_freq *frequencies;
  size_t n_frequencies;
} zeus_pfo_schedule;

/* Per-instruction breakdown: for each iteration, one value per occurrence of the instruction.
 * Values of iteration i are values[offsets[i] .. offsets[i+1]). offsets has n_iters + 1 entries. */
typedef struct zeus_pfo_breakdown {
  char *instruction;
  size_t n_iters;
  size_t *offsets;
  double *values;
} zeus_pfo_breakdown;

/* Profiling results of one rank for one schedule (seconds and joules). */
typedef struct zeus_pfo_prof_result {
  int rank;
  double *iter_time;
  size_t n_iter_time;
  double *iter_energy;
  size_t n_iter_energy;
  zeus_pfo_breakdown *time_breakdown;
  size_t n_time_breakdown;
  zeus_pfo_breakdown *energy_breakdown;
  size_t n_energy_breakdown;
} zeus_pfo_prof_result;

/* Average time (s) and energy (J) of one instruction at one frequency. */
typedef struct zeus_pfo_freq_measure {
  int frequency_mhz;
  double time_s;
  double energy_j;
} zeus_pfo_freq_measure;

/* Offline profiling result of one rank: forward/backward time and energy per frequency.
 * JSON: {"rank","dp_rank","pp_rank","tp_rank","forward_time":{"MHz":s},"forward_energy",
 * "backward_time","backward_energy"}. */
typedef struct zeus_pfo_offline_result {
  int rank;
  int dp_rank;
  int pp_rank;
  int tp_rank;
  zeus_pfo_freq_measure *forward;
  size_t n_forward;
  zeus_pfo_freq_measure *backward;
  size_t n_backward;
} zeus_pfo_offline_result;

/* Parse one model from JSON text. `what` names the input in errors (NULL: the model's name).
 * Errors: ZEUS_EPARSE "<what>:<line>:<col>: ..." for malformed JSON, ZEUS_EINVAL naming the
 * field for a missing or wrong field (validation included) or a list longer than its bound
 * (ZEUS_PFO_MAX_*, named in the message). On failure *out is untouched. */
ZEUS_EXTERN int zeus_pfo_job_info_from_json(const char *json, size_t len, const char *what,
                                            zeus_pfo_job_info *out /* out */);
ZEUS_EXTERN int zeus_pfo_rank_info_from_json(const char *json, size_t len, const char *what,
                                             zeus_pfo_rank_info *out /* out */);
ZEUS_EXTERN int zeus_pfo_schedule_from_json(const char *json, size_t len, const char *what,
                                            zeus_pfo_schedule *out /* out */);
ZEUS_EXTERN int zeus_pfo_prof_result_from_json(const char *json, size_t len, const char *what,
                                               zeus_pfo_prof_result *out /* out */);
ZEUS_EXTERN int zeus_pfo_offline_result_from_json(const char *json, size_t len, const char *what,
                                                  zeus_pfo_offline_result *out /* out */);

/* Serialise one model to compact JSON (release with zeus_free()). ZEUS_ENOMEM only. */
ZEUS_EXTERN int zeus_pfo_job_info_to_json(const zeus_pfo_job_info *v, char **out /* out */);
ZEUS_EXTERN int zeus_pfo_rank_info_to_json(const zeus_pfo_rank_info *v, char **out /* out */);
ZEUS_EXTERN int zeus_pfo_schedule_to_json(const zeus_pfo_schedule *v, char **out /* out */);
ZEUS_EXTERN int zeus_pfo_prof_result_to_json(const zeus_pfo_prof_result *v, char **out /* out */);
ZEUS_EXTERN int zeus_pfo_offline_result_to_json(const zeus_pfo_offline_result *v,
                                                char **out /* out */);

/* Validation (the from_json functions already apply it). ZEUS_EINVAL naming the field.
 * job_info: `registering` requires an empty job_id. rank_info: ranks must lie within the job's
 * degrees when `job` is not NULL. */
ZEUS_EXTERN int zeus_pfo_job_info_validate(const zeus_pfo_job_info *v, bool registering);
ZEUS_EXTERN int zeus_pfo_rank_info_validate(const zeus_pfo_rank_info *v,
                                            const zeus_pfo_job_info *job /* may be NULL */);

ZEUS_EXTERN void zeus_pfo_job_info_clear(zeus_pfo_job_info *v);
ZEUS_EXTERN void zeus_pfo_rank_info_clear(zeus_pfo_rank_info *v);
ZEUS_EXTERN void zeus_pfo_schedule_clear(zeus_pfo_schedule *v);
ZEUS_EXTERN void zeus_pfo_prof_result_clear(zeus_pfo_prof_result *v);
ZEUS_EXTERN void zeus_pfo_offline_result_clear(zeus_pfo_offline_result *v);
/* Clear every element, then free the array itself. NULL does nothing. */
ZEUS_EXTERN void zeus_pfo_ranks_free(zeus_pfo_rank_info *v, size_t n);
ZEUS_EXTERN void zeus_pfo_schedules_free(zeus_pfo_schedule *v, size_t n);
ZEUS_EXTERN void zeus_pfo_prof_results_free(zeus_pfo_prof_result *v, size_t n);

/* The job id of the original: "<YYYY-MM-DD-HH-MM-SS>+dp<d>+pp<p>+tp<t>+<scheduler>[+<metadata>]"
 * with `when` in local time. The metadata is sanitised (characters other than letters, digits,
 * '.', '_' and '-' become '_'; at most 64 of them), so the id is always a safe directory name.
 * This part is guessable from the time and the job's shape: the server appends "~" and 26
 * random characters, which make the id unique and a secret of the job's ranks. */
ZEUS_EXTERN int zeus_pfo_make_job_id(const zeus_pfo_job_info *job, const char *scheduler,
                                     long long when_unix_s, char **out /* out, zeus_free */);

/* ---------------------------------------------------------------------------------------------
 * Dumps: <dir>/ranks.json, <dir>/<n>.sched.json, <dir>/<n>.prof.json (JSON lists of the models),
 * written atomically. Loading accepts the same files; errors name the file and the element.
 * ------------------------------------------------------------------------------------------- */
ZEUS_EXTERN int zeus_pfo_save_ranks(const char *dir, const zeus_pfo_rank_info *ranks, size_t n);
ZEUS_EXTERN int zeus_pfo_load_ranks(const char *dir, zeus_pfo_rank_info **out /* out */,
                                    size_t *n /* out */);
ZEUS_EXTERN int zeus_pfo_save_schedules(const char *dir, int schedule_num,
                                        const zeus_pfo_schedule *s, size_t n);
ZEUS_EXTERN int zeus_pfo_load_schedules(const char *dir, int schedule_num,
                                        zeus_pfo_schedule **out /* out */, size_t *n /* out */);
ZEUS_EXTERN int zeus_pfo_save_prof(const char *dir, int schedule_num,
                                   const zeus_pfo_prof_result *r, size_t n);
ZEUS_EXTERN int zeus_pfo_load_prof(const char *dir, int schedule_num,
                                   zeus_pfo_prof_result **out /* out */, size_t *n /* out */);
/* The same loaders on one file path (any name). */
ZEUS_EXTERN int zeus_pfo_load_prof_file(const char *path, zeus_pfo_prof_result **out /* out */,
                                        size_t *n /* out */);
ZEUS_EXTERN int zeus_pfo_load_schedules_file(const char *path, zeus_pfo_schedule **out /* out */,
                                             size_t *n /* out */);

/* Writes the instruction profile CSV atomically:
 * rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy (stage = pp_rank;
 * instruction forward or backward; time and energy averaged). */
ZEUS_EXTERN int zeus_pfo_write_instruction_csv(const char *path,
                                               const zeus_pfo_offline_result *results, size_t n);

/* Parses a frequency plan file: lowtime's Python-literal list (one entry per rank of
 * ("forward"|"backward", MHz) tuples, '#' comments allowed), or JSON when the name ends in
 * ".json". Nothing is evaluated. Errors: ZEUS_ENOENT/EIO naming the file, ZEUS_EPARSE
 * "<file>:<line>:<col>: expected ..." for malformed text. *out[i].rank = i. */
ZEUS_EXTERN int zeus_pfo_parse_plan_file(const char *path, zeus_pfo_schedule **out /* out */,
                                         size_t *n /* out */);
/* The same on text in memory; `name` names it in errors. */
ZEUS_EXTERN int zeus_pfo_parse_plan(const char *text, size_t len, const char *name, bool json,
                                    zeus_pfo_schedule **out /* out */, size_t *n /* out */);

ZEUS_END_DECLS
#endif
