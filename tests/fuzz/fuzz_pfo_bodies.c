/* libFuzzer target for the Perseus request-body parsers and the plan-file parser.
 * The first byte picks the parser; the rest is the body. Bodies also go through the job table
 * (register_job / register_rank / post_result) of a live two-rank job, so the request paths of
 * the server are covered without the HTTP layer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zeus.h>

#include "pfo_server/job_table.h"

static zeus__job_table *g_reg;
static char g_job[256];

static void ignore(void *w, zeus__reply *rep) { (void)w; free(rep->body); }

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
  zeus__job_table_register_rank(g_reg, g_job, r0, strlen(r0), &rep);
  free(rep.body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_reg) setup();
  if (size < 1) return 0;
  const char *body = (const char *)data + 1;
  size_t len = size - 1;
  zeus__reply rep = {0};
  switch (data[0] % 9) {
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
      zeus__job_table_register_rank(g_reg, g_job, body, len, &rep);
      break;
    case 8:
      zeus__job_table_post_result(g_reg, g_job, body, len, &rep);
      break;
  }
  free(rep.body);
  return 0;
}
