/* libFuzzer target for the Perseus request-body parsers and the plan-file parser.
 * The first byte picks the parser; the rest is the body. Bodies also go through the job table
 * (register_job / register_rank / post_result / leave) of a live two-rank job, so the request
 * paths of the server are covered without the HTTP layer.
 *
 * Selector 9 is different: the rest of the input is a program for a fresh job table (register
 * jobs, register ranks with or without credentials, park and answer schedule requests, hold
 * presences, post results, leave, cancel waiters (a cancelled presence fails its job), reap),
 * run against small memory bounds. It checks the table's
 * promises: every parked request is completed at most once and never after it was cancelled,
 * and once every job is reaped the table holds no memory.
 *
 * Selector 11 compares the tree-free ProfilingResult reader (src/pfo/prof_fast.c) with the jansson
 * path: whatever the fast reader accepts, jansson accepts too, with the same model bit for bit;
 * whatever it declines, the public parser answers as jansson does (the same error text). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zeus.h>

#include "core/core.h"
#include "pfo/pfo_internal.h"
#include "pfo_server/job_table.h"

static zeus__job_table *g_reg;
static char g_job[256];

static void ignore(void *w, zeus__reply *rep) { (void)w; free(rep->body); }

/* ---- selector 9: a program for a fresh table ---- */

#define NSLOT 8
typedef struct slot {
  bool parked;   /* handed to the table, not completed or cancelled yet */
  int completed; /* completions seen */
} slot;
static slot g_slot[NSLOT];

static void on_slot(void *w, zeus__reply *rep) {
  slot *x = w;
  if (!x->parked) abort(); /* completed twice, or after it was cancelled */
  x->parked = false;
  x->completed++;
  free(rep->body);
}

static const char *const g_tokens[] = {NULL, "credential-number-one-0000", "credential-number-two-1111", "short"};

static void run_program(const uint8_t *p, size_t n) {
  zeus__job_table *t;
  zeus__job_table_opts o = {.scheduler = "AllMaxFrequency", .scheduler_args = "{\"num_microbatches\": 2}",
                            .on_complete = on_slot, .max_job_idle_time_s = 100, .max_jobs = 3,
                            .max_job_bytes = 64 << 10, .max_total_bytes = 96 << 10};
  if (zeus__job_table_open(&t, &o)) abort();
  memset(g_slot, 0, sizeof g_slot);
  char ids[3][256] = {{0}};
  int njobs = 0;
  if (n > 3 * 48) n = 3 * 48; /* 48 steps: long enough for a few rounds, short enough to run fast */
  for (size_t i = 0; i + 2 < n; i += 3) {
    unsigned op = p[i] % 9, a = p[i + 1], b = p[i + 2];
    const char *id = njobs ? ids[a % njobs] : "none";
    const char *tok = g_tokens[(b >> 4) % 4];
    int rank = (int)(b & 3) - (b == 0xff); /* 0..3, and -1 */
    zeus__reply rep = {0};
    char body[256];
    switch (op) {
      case 0: { /* register a job of 1..3 ranks */
        int w = 1 + a % 3;
        snprintf(body, sizeof body, "{\"job_id\":\"\",\"pp_degree\":%d,\"dp_degree\":1,\"tp_degree\":1,"
                 "\"world_size\":%d}", w, w);
        if (zeus__job_table_register_job(t, body, strlen(body), &rep) == 200 && njobs < 3)
          snprintf(ids[njobs++], sizeof ids[0], "%.*s", (int)rep.len - 2, rep.body + 1);
        break;
      }
      case 1:
        snprintf(body, sizeof body, "{\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,"
                 "\"available_frequencies\":[1410,%d]}", rank, rank, 900 + a);
        zeus__job_table_register_rank(t, id, tok, body, strlen(body), &rep);
        break;
      case 2:   /* a schedule request parked in slot a */
      case 8: { /* a rank's presence held in slot a */
        slot *x = &g_slot[a % NSLOT];
        if (x->parked) break;
        char r[8];
        snprintf(r, sizeof r, "%d", rank);
        x->parked = true;
        int st = op == 2 ? zeus__job_table_request_schedule(t, id, r, tok, x, &rep)
                         : zeus__job_table_presence(t, id, r, tok, x, &rep);
        if (st != 0) x->parked = false;
        break;
      }
      case 3:
        snprintf(body, sizeof body, "{\"rank\":%d,\"iter_time\":[%d],\"iter_energy\":[1],\"time_breakdown\":"
                 "{\"forward\":[[0.5,%d]]},\"energy_breakdown\":{}}", rank, a, b);
        zeus__job_table_post_result(t, id, tok, body, strlen(body), &rep);
        break;
      case 4:
        snprintf(body, sizeof body, "{\"rank\":%d,\"reason\":\"fuzz %u\"}", rank, a);
        zeus__job_table_leave(t, id, tok, body, strlen(body), &rep);
        break;
      case 5: { /* the connection of slot a went away */
        slot *x = &g_slot[a % NSLOT];
        bool was = zeus__job_table_cancel_waiter(t, x);
        if (was != x->parked) abort(); /* the table and the transport disagree */
        x->parked = false;
        break;
      }
      case 6:
        zeus__job_table_reap(t, zeus_monotonic_s() + (a % 2 ? 1e6 : 0));
        if (a % 2) njobs = 0;
        break;
      case 7:
        zeus__job_table_register_job(t, (const char *)p + i, 3, &rep); /* a fragment as a body */
        break;
    }
    free(rep.body);
  }
  zeus__job_table_reap(t, zeus_monotonic_s() + 1e6);
  if (zeus__job_table_njobs(t) != 0 || zeus__job_table_bytes(t) != 0) abort(); /* memory charged and never released */
  for (int k = 0; k < NSLOT; k++)
    if (g_slot[k].parked) abort(); /* a parked request the reap did not answer */
  zeus__job_table_close(t);
}

static bool same_doubles(const double *a, const double *b, size_t n) {
  return n == 0 || memcmp(a, b, n * sizeof *a) == 0;
}

static bool same_breakdowns(const zeus_pfo_breakdown *a, size_t na, const zeus_pfo_breakdown *b, size_t nb) {
  if (na != nb) return false;
  for (size_t i = 0; i < na; i++) {
    if (strcmp(a[i].instruction, b[i].instruction) || a[i].n_iters != b[i].n_iters) return false;
    if (memcmp(a[i].offsets, b[i].offsets, (a[i].n_iters + 1) * sizeof(size_t))) return false;
    if (!same_doubles(a[i].values, b[i].values, a[i].offsets[a[i].n_iters])) return false;
  }
  return true;
}

static void compare_result_readers(const char *body, size_t len) {
  zeus_pfo_prof_result f, t;
  memset(&f, 0x5a, sizeof f);
  bool fast = zeus__pfo_prof_result_fast(body, len, &f);
  int rc = zeus__pfo_prof_result_from_json_tree(body, len, "ProfilingResult", &t);
  char tree_err[ZEUS__ERRMSG_MAX]; /* the whole message: a long key echoed in it must compare whole */
  snprintf(tree_err, sizeof tree_err, "%s", rc ? zeus_errmsg() : "");
  if (fast) {
    if (rc) abort(); /* the fast reader accepted what jansson refuses */
    if (f.rank != t.rank || f.n_iter_time != t.n_iter_time || f.n_iter_energy != t.n_iter_energy ||
        !same_doubles(f.iter_time, t.iter_time, f.n_iter_time) ||
        !same_doubles(f.iter_energy, t.iter_energy, f.n_iter_energy) ||
        !same_breakdowns(f.time_breakdown, f.n_time_breakdown, t.time_breakdown, t.n_time_breakdown) ||
        !same_breakdowns(f.energy_breakdown, f.n_energy_breakdown, t.energy_breakdown, t.n_energy_breakdown))
      abort(); /* a different model */
    zeus_pfo_prof_result_clear(&f);
  } else {
    const unsigned char *x = (const unsigned char *)&f;
    for (size_t i = 0; i < sizeof f; i++)
      if (x[i] != 0x5a) abort(); /* declined, but touched *out */
  }
  if (!rc) zeus_pfo_prof_result_clear(&t);
  /* The public entry point: same outcome, same error text. */
  zeus_pfo_prof_result p;
  int prc = zeus_pfo_prof_result_from_json(body, len, "ProfilingResult", &p);
  if ((prc != 0) != (rc != 0)) abort();
  if (prc) {
    if (strcmp(zeus_errmsg(), tree_err)) abort();
  } else {
    zeus_pfo_prof_result_clear(&p);
  }
}

static void setup(void) {
  zeus__job_table_opts o = {.scheduler = "AllMaxFrequency", .scheduler_args = "{\"num_microbatches\": 2}",
                           .on_complete = ignore, .max_job_idle_time_s = 1e9};
  if (zeus__job_table_open(&g_reg, &o)) abort();
  const char *job = "{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":2}";
  zeus__reply rep = {0};
  if (zeus__job_table_register_job(g_reg, job, strlen(job), &rep) != 200) abort();
  snprintf(g_job, sizeof g_job, "%.*s", (int)rep.len - 2, rep.body + 1);
  free(rep.body);
  const char *r0 = "{\"rank\":0,\"dp_rank\":0,\"pp_rank\":0,\"tp_rank\":0,\"available_frequencies\":[1410]}";
  zeus__job_table_register_rank(g_reg, g_job, NULL, r0, strlen(r0), &rep);
  free(rep.body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_reg) setup();
  if (size < 1) return 0;
  const char *body = (const char *)data + 1;
  size_t len = size - 1;
  zeus__reply rep = {0};
  switch (data[0] % 12) {
    case 0: {
      zeus_pfo_job_info v;
      if (!zeus_pfo_job_info_from_json(body, len, NULL, &v)) zeus_pfo_job_info_clear(&v);
      break;
    }
    case 1: {
      zeus_pfo_rank_info v;
      if (!zeus_pfo_rank_info_from_json(body, len, NULL, &v)) zeus_pfo_rank_info_clear(&v);
      break;
    }
    case 2: {
      zeus_pfo_schedule v;
      if (!zeus_pfo_schedule_from_json(body, len, NULL, &v)) zeus_pfo_schedule_clear(&v);
      break;
    }
    case 3: {
      zeus_pfo_prof_result v;
      if (!zeus_pfo_prof_result_from_json(body, len, NULL, &v)) {
        char *s;
        if (!zeus_pfo_prof_result_to_json(&v, &s)) zeus_free(s);
        zeus_pfo_prof_result_clear(&v);
      }
      break;
    }
    case 4: {
      zeus_pfo_offline_result v;
      if (!zeus_pfo_offline_result_from_json(body, len, NULL, &v)) zeus_pfo_offline_result_clear(&v);
      break;
    }
    case 5:
    case 6: {
      zeus_pfo_schedule *s;
      size_t n;
      if (!zeus_pfo_parse_plan(body, len, "fuzz", data[0] % 9 == 6, &s, &n)) zeus_pfo_schedules_free(s, n);
      break;
    }
    case 7:
      zeus__job_table_register_rank(g_reg, g_job, NULL, body, len, &rep);
      break;
    case 8:
      zeus__job_table_post_result(g_reg, g_job, NULL, body, len, &rep);
      break;
    case 9:
      run_program((const uint8_t *)body, len);
      break;
    case 10: /* leave, for a rank the fuzzer's live job never registered (the job must live on) */
      zeus__job_table_leave(g_reg, g_job, "credential-number-one-0000", body, len, &rep);
      break;
    case 11:
      compare_result_readers(body, len);
      break;
  }
  free(rep.body);
  return 0;
}
