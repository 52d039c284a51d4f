/* PFO models: validation, JSON shapes, job ids, plan files, dumps and the instruction CSV. */
#include "test_util.h"

#include <zeus.h>

#include "core/core.h"
#include "pfo/pfo_internal.h"

#define S(x) x, strlen(x)

/* The tree-free ProfilingResult reader (prof_fast.c) takes the plain shape, giving the jansson
 * path's model bit for bit, and declines anything else without touching *out. */
static void same_result(const zeus_pfo_prof_result *a, const zeus_pfo_prof_result *b) {
  assert_int_equal(a->rank, b->rank);
  assert_int_equal(a->n_iter_time, b->n_iter_time);
  assert_int_equal(a->n_iter_energy, b->n_iter_energy);
  assert_memory_equal(a->iter_time, b->iter_time, a->n_iter_time * sizeof(double));
  assert_memory_equal(a->iter_energy, b->iter_energy, a->n_iter_energy * sizeof(double));
  const zeus_pfo_breakdown *x[2] = {a->time_breakdown, a->energy_breakdown};
  const zeus_pfo_breakdown *y[2] = {b->time_breakdown, b->energy_breakdown};
  size_t nx[2] = {a->n_time_breakdown, a->n_energy_breakdown}, ny[2] = {b->n_time_breakdown, b->n_energy_breakdown};
  for (int f = 0; f < 2; f++) {
    assert_int_equal(nx[f], ny[f]);
    for (size_t i = 0; i < nx[f]; i++) {
      assert_string_equal(x[f][i].instruction, y[f][i].instruction);
      assert_int_equal(x[f][i].n_iters, y[f][i].n_iters);
      assert_memory_equal(x[f][i].offsets, y[f][i].offsets, (x[f][i].n_iters + 1) * sizeof(size_t));
      assert_memory_equal(x[f][i].values, y[f][i].values, x[f][i].offsets[x[f][i].n_iters] * sizeof(double));
    }
  }
}

static void fast_result_reader_matches_jansson_or_declines(void **state) {
  (void)state;
  const char *plain[] = {
      "{\"rank\":1,\"iter_time\":[1.5,2],\"iter_energy\":[10,20],"
      "\"time_breakdown\":{\"forward\":[[0.1,0.2],[0.3]]},\"energy_breakdown\":{\"forward\":[[1,2],[3]]}}",
      /* as Python's json.dumps writes it, fields in another order, odd but valid numbers */
      " {\"energy_breakdown\": {\"backward\": [[40.5], []], \"forward\": [[20.000001, 1e2]]}, \"rank\": 0, "
      "\"iter_time\": [1.0000000000000002, 0.1, -0.0, 0, 123456789012345678, 2.5E-308, 4.9e-324, "
      "0.30000000000000004, 1.7976931348623157e308, 12345678901234567890.5], \"iter_energy\": [], "
      "\"time_breakdown\": {\"backward\": [[0.04], [0.041]], \"forward\": [[0.02, 0.0200001]]}}\n",
      "{\"rank\":0,\"iter_time\":[],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}}",
  };
  for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) {
    zeus_pfo_prof_result f, t;
    assert_true(zeus__pfo_prof_result_fast(S(plain[i]), &f));
    assert_zeus_ok(zeus__pfo_prof_result_from_json_tree(S(plain[i]), NULL, &t));
    same_result(&f, &t);
    zeus_pfo_prof_result_clear(&f);
    zeus_pfo_prof_result_clear(&t);
  }
  const char *odd[] = {
      "{\"rank\":1,\"rank\":1,\"iter_time\":[],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}}",
      "{\"rank\":1,\"iter_time\":[],\"iter_energy\":[],\"time_breakdown\":{\"f\":[],\"f\":[]},\"energy_breakdown\":{}}",
      "{\"r\\u0061nk\":1,\"iter_time\":[],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}}",
      "{\"rank\":1,\"extra\":0,\"iter_time\":[],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}}",
      "{\"rank\":1.0,\"iter_time\":[],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}}",
      "{\"rank\":-1,\"iter_time\":[],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}}",
      "{\"rank\":1,\"iter_time\":[1e999],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}}",
      "{\"rank\":1,\"iter_time\":[99999999999999999999],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}}",
      "{\"rank\":1,\"iter_time\":[01],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}}",
      "{\"rank\":1,\"iter_time\":[],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}} x",
      "{\"rank\":1,\"iter_time\":[],\"iter_energy\":[],\"time_breakdown\":{}}",
      "{\"rank\":1,\"iter_time\":[],\"iter_energy\":[],\"time_breakdown\":{\"f\\u00e9\":[]},\"energy_breakdown\":{}}",
      "{\"rank\":1,\"iter_time\":[NaN],\"iter_energy\":[],\"time_breakdown\":{},\"energy_breakdown\":{}}",
      "",
  };
  for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
    zeus_pfo_prof_result f;
    memset(&f, 0x5a, sizeof f);
    assert_false(zeus__pfo_prof_result_fast(S(odd[i]), &f));
    for (size_t k = 0; k < sizeof f; k++) assert_int_equal(((unsigned char *)&f)[k], 0x5a);
  }
  /* Declined bodies still parse (or fail) through jansson, as before. */
  zeus_pfo_prof_result p;
  assert_zeus_ok(zeus_pfo_prof_result_from_json(S(odd[2]), NULL, &p));
  assert_int_equal(p.rank, 1);
  zeus_pfo_prof_result_clear(&p);
  assert_zeus_err(zeus_pfo_prof_result_from_json(S(odd[0]), NULL, &p), ZEUS_EPARSE, "duplicate");
  assert_zeus_err(zeus_pfo_prof_result_from_json(S(odd[4]), NULL, &p), ZEUS_EINVAL, "'rank' must be an integer");
}

static void job_info_validation_names_the_field(void **state) {
  (void)state;
  zeus_pfo_job_info j;
  assert_zeus_ok(zeus_pfo_job_info_from_json(S("{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":2,"
                                               "\"tp_degree\":2,\"world_size\":8}"), NULL, &j));
  assert_int_equal(j.world_size, 8);
  assert_null(j.job_metadata);
  assert_zeus_ok(zeus_pfo_job_info_validate(&j, true));
  zeus_pfo_job_info_clear(&j);
  assert_zeus_err(zeus_pfo_job_info_from_json(S("{\"job_id\":\"\",\"pp_degree\":2,\"dp_degree\":2,"
                                                "\"tp_degree\":2,\"world_size\":6}"), NULL, &j),
                  ZEUS_EINVAL, "world_size");
  assert_zeus_err(zeus_pfo_job_info_from_json(S("{\"job_id\":\"\",\"pp_degree\":0,\"dp_degree\":1,"
                                                "\"tp_degree\":1,\"world_size\":0}"), NULL, &j),
                  ZEUS_EINVAL, "pp_degree");
  assert_zeus_err(zeus_pfo_job_info_from_json(S("{\"job_id\":\"\",\"dp_degree\":1,"
                                                "\"tp_degree\":1,\"world_size\":1}"), NULL, &j),
                  ZEUS_EINVAL, "missing field 'pp_degree'");
  assert_zeus_err(zeus_pfo_job_info_from_json(S("{\"job_id\":\"\",\"pp_degree\":\"1\",\"dp_degree\":1,"
                                                "\"tp_degree\":1,\"world_size\":1}"), NULL, &j),
                  ZEUS_EINVAL, "'pp_degree' must be an integer");
  assert_zeus_err(zeus_pfo_job_info_from_json(S("{\"job_id\":\"\",\"pp_degree\":1,\"dp_degree\":1,"
                                                "\"tp_degree\":1,\"world_size\":1,\"job_metadata\":3}"), NULL, &j),
                  ZEUS_EINVAL, "job_metadata");
  assert_zeus_err(zeus_pfo_job_info_from_json(S("{\"job_id\":\"\",\n \"pp_degree\":1,}"), NULL, &j),
                  ZEUS_EPARSE, "JobInfo:2:");
  assert_zeus_ok(zeus_pfo_job_info_from_json(S("{\"job_id\":\"x\",\"pp_degree\":1,\"dp_degree\":1,"
                                               "\"tp_degree\":1,\"world_size\":1,\"job_metadata\":\"m\"}"), NULL, &j));
  assert_zeus_err(zeus_pfo_job_info_validate(&j, true), ZEUS_EINVAL, "job_id");
  char *txt;
  assert_zeus_ok(zeus_pfo_job_info_to_json(&j, &txt));
  assert_non_null(strstr(txt, "\"job_metadata\":\"m\""));
  zeus_free(txt);
  zeus_pfo_job_info_clear(&j);
}

static void rank_info_validation_checks_ranges_and_frequencies(void **state) {
  (void)state;
  zeus_pfo_job_info job = {.pp_degree = 2, .dp_degree = 1, .tp_degree = 1, .world_size = 2};
  zeus_pfo_rank_info r;
  assert_zeus_ok(zeus_pfo_rank_info_from_json(S("{\"rank\":1,\"dp_rank\":0,\"pp_rank\":1,\"tp_rank\":0,"
      "\"available_frequencies\":[1410,1000],\"pipe_schedule\":[\"forward\",\"backward\"]}"), NULL, &r));
  assert_int_equal(r.n_pipe_schedule, 2);
  assert_string_equal(r.pipe_schedule[1], "backward");
  assert_zeus_ok(zeus_pfo_rank_info_validate(&r, &job));
  r.pp_rank = 2;
  assert_zeus_err(zeus_pfo_rank_info_validate(&r, &job), ZEUS_EINVAL, "pp_rank");
  r.pp_rank = 1;
  r.rank = 5;
  assert_zeus_err(zeus_pfo_rank_info_validate(&r, &job), ZEUS_EINVAL, "'rank'");
  zeus_pfo_rank_info_clear(&r);
  assert_zeus_err(zeus_pfo_rank_info_from_json(S("{\"rank\":1,\"dp_rank\":0,\"pp_rank\":1,\"tp_rank\":0,"
      "\"available_frequencies\":[]}"), NULL, &r), ZEUS_EINVAL, "available_frequencies");
  assert_zeus_err(zeus_pfo_rank_info_from_json(S("{\"rank\":-1,\"dp_rank\":0,\"pp_rank\":1,\"tp_rank\":0,"
      "\"available_frequencies\":[1]}"), NULL, &r), ZEUS_EINVAL, "'rank'");
  assert_zeus_err(zeus_pfo_rank_info_from_json(S("{\"rank\":1,\"dp_rank\":0,\"pp_rank\":1,\"tp_rank\":0,"
      "\"available_frequencies\":[1410,\"x\"]}"), NULL, &r), ZEUS_EINVAL, "available_frequencies'[1]");
  assert_zeus_err(zeus_pfo_rank_info_from_json(S("{\"rank\":1,\"dp_rank\":0,\"pp_rank\":1,\"tp_rank\":0,"
      "\"available_frequencies\":[1410],\"pipe_schedule\":[\"\"]}"), NULL, &r), ZEUS_EINVAL, "pipe_schedule");
}

static void schedule_and_result_round_trip_in_original_shapes(void **state) {
  (void)state;
  zeus_pfo_schedule s;
  assert_zeus_ok(
      zeus_pfo_schedule_from_json(S("{\"rank\":3,\"frequencies\":[[\"forward\",1410],[\"backward\",990]]}"), NULL, &s));
  char *txt;
  assert_zeus_ok(zeus_pfo_schedule_to_json(&s, &txt));
  assert_string_equal(txt, "{\"rank\":3,\"frequencies\":[[\"forward\",1410],[\"backward\",990]]}");
  zeus_free(txt);
  zeus_pfo_schedule_clear(&s);
  assert_zeus_err(zeus_pfo_schedule_from_json(S("{\"rank\":3,\"frequencies\":[[\"forward\"]]}"), NULL, &s),
                  ZEUS_EINVAL, "frequencies'[0]");
  zeus_pfo_prof_result p;
  const char *pj = "{\"rank\":1,\"iter_time\":[1.5,2],\"iter_energy\":[10,20],"
                   "\"time_breakdown\":{\"forward\":[[0.1,0.2],[0.3]]},\"energy_breakdown\":{\"forward\":[[1,2],[3]]}}";
  assert_zeus_ok(zeus_pfo_prof_result_from_json(S(pj), NULL, &p));
  assert_int_equal(p.n_time_breakdown, 1);
  assert_int_equal(p.time_breakdown[0].n_iters, 2);
  assert_int_equal(p.time_breakdown[0].offsets[2], 3);
  assert_true(p.energy_breakdown[0].values[2] == 3.0);
  assert_zeus_ok(zeus_pfo_prof_result_to_json(&p, &txt));
  zeus_pfo_prof_result q;
  assert_zeus_ok(zeus_pfo_prof_result_from_json(S(txt), NULL, &q));
  assert_true(q.iter_time[0] == 1.5 && q.time_breakdown[0].values[1] == 0.2);
  zeus_free(txt);
  zeus_pfo_prof_result_clear(&p);
  zeus_pfo_prof_result_clear(&q);
  assert_zeus_err(zeus_pfo_prof_result_from_json(S("{\"rank\":1,\"iter_time\":[1],\"iter_energy\":[1],"
      "\"time_breakdown\":{\"forward\":[[0.1,\"x\"]]},\"energy_breakdown\":{}}"), NULL, &p),
      ZEUS_EINVAL, "time_breakdown'['forward'][0][1]");
  assert_zeus_err(zeus_pfo_prof_result_from_json(S("{\"rank\":1,\"iter_time\":[1],\"iter_energy\":[1],"
      "\"time_breakdown\":{}}"), NULL, &p), ZEUS_EINVAL, "energy_breakdown");
  zeus_pfo_offline_result o;
  assert_zeus_ok(zeus_pfo_offline_result_from_json(S("{\"rank\":0,\"dp_rank\":0,\"pp_rank\":0,\"tp_rank\":0,"
                                                     "\"forward_time\":{\"1410\":0.1},\"forward_energy\":{\"1410\":20},"
                                                     "\"backward_time\":{},\"backward_energy\":{}}"),
                                                   NULL, &o));
  assert_int_equal(o.n_forward, 1);
  assert_int_equal(o.forward[0].frequency_mhz, 1410);
  zeus_pfo_offline_result_clear(&o);
  assert_zeus_err(zeus_pfo_offline_result_from_json(S("{\"rank\":0,\"dp_rank\":0,\"pp_rank\":0,\"tp_rank\":0,"
      "\"forward_time\":{\"fast\":0.1},\"forward_energy\":{},\"backward_time\":{},\"backward_energy\":{}}"), NULL, &o),
      ZEUS_EINVAL, "fast");
}

static void job_ids_have_the_original_shape_and_safe_metadata(void **state) {
  (void)state;
  zeus_pfo_job_info j = {.job_id = "", .pp_degree = 4, .dp_degree = 2, .tp_degree = 1, .world_size = 8,
                         .job_metadata = "../../etc/passwd x+y"};
  char *id;
  setenv("TZ", "UTC", 1);
  assert_zeus_ok(zeus_pfo_make_job_id(&j, "PointSolution", 0, &id));
  assert_string_equal(id, "1970-01-01-00-00-00+dp2+pp4+tp1+PointSolution+.._.._etc_passwd_x_y");
  assert_null(strchr(id, '/'));
  zeus_free(id);
  j.job_metadata = NULL;
  assert_zeus_ok(zeus_pfo_make_job_id(&j, "AllMaxFrequency", 0, &id));
  assert_string_equal(id, "1970-01-01-00-00-00+dp2+pp4+tp1+AllMaxFrequency");
  zeus_free(id);
}

static const char *write_tmp(char *dir, const char *name, const char *text, char *path, size_t n) {
  snprintf(path, n, "%s/%s", dir, name);
  zeus_test_write_file(path, text);
  return path;
}

static void plan_parser_reads_lowtime_files_and_json(void **state) {
  (void)state;
  char dir[256], path[512];
  zeus_test_tmpdir(dir, sizeof dir);
  zeus_pfo_schedule *s;
  size_t n;
  write_tmp(dir, "freqs_pipeline_00001.py",
            "# lowtime output\n[\n  [(\"forward\", 1410), ('backward', 1200),],  # stage 0\n"
            "  [(\"forward\", 990), (\"backward\", 1005)]\n]\n", path, sizeof path);
  assert_zeus_ok(zeus_pfo_parse_plan_file(path, &s, &n));
  assert_int_equal(n, 2);
  assert_int_equal(s[0].n_frequencies, 2);
  assert_string_equal(s[0].frequencies[1].instruction, "backward");
  assert_int_equal(s[0].frequencies[1].frequency_mhz, 1200);
  assert_int_equal(s[1].rank, 1);
  assert_int_equal(s[1].frequencies[0].frequency_mhz, 990);
  zeus_pfo_schedules_free(s, n);
  write_tmp(dir, "plan.json", "[[[\"forward\",1410],[\"backward\",1410]],"
            "{\"rank\":1,\"frequencies\":[[\"forward\",800]]}]", path, sizeof path);
  assert_zeus_ok(zeus_pfo_parse_plan_file(path, &s, &n));
  assert_int_equal(n, 2);
  assert_int_equal(s[1].frequencies[0].frequency_mhz, 800);
  zeus_pfo_schedules_free(s, n);
}

static void plan_parser_reports_file_line_and_expectation(void **state) {
  (void)state;
  static const struct { const char *text; const char *needle; } bad[] = {
      {"[[(\"forward\", 1410)]\n", ":2:1: expected ',' or ']'"},
      {"[[(\"forward\" 1410)]]", ":1:14: expected ',' after the instruction"},
      {"[[(\"sideways\", 1410)]]", ":1:4: expected the instruction \"forward\" or \"backward\", got \"sideways\""},
      {"[[(\"forward\", -5)]]", "expected a frequency in MHz"},
      {"[[(\"forward\", 14.5)]]", "expected a frequency in MHz"},
      {"[[(\"forward\", 0)]]", "within 1..1000000"},
      {"__import__('os').system('true')", ":1:1: expected '[' opening the list of ranks"},
      {"[[(\"forward\", 1410)]] + [[]]", "expected the end of the file"},
      {"[[(\"forward\", 1410)", "the end of the file"},
      {"[[(\"forward, 1410)]]", "closing quote"},
      {"[]", "lists no ranks"},
      {"", "expected '['"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    zeus_pfo_schedule *s = NULL;
    size_t n;
    int rc = zeus_pfo_parse_plan(bad[i].text, strlen(bad[i].text), "p.py", false, &s, &n);
    if (rc != ZEUS_EPARSE || !strstr(zeus_errmsg(), bad[i].needle))
      fail_msg("case %zu: rc %d, message '%s' lacks '%s'", i, rc, zeus_errmsg(), bad[i].needle);
    assert_true(strncmp(zeus_errmsg(), "p.py", 4) == 0);
  }
  zeus_pfo_schedule *s;
  size_t n;
  assert_zeus_err(zeus_pfo_parse_plan(S("[[[\"forward\", 1410]],"), "p.json", true, &s, &n), ZEUS_EPARSE, "p.json:1:");
  assert_zeus_err(zeus_pfo_parse_plan(S("[[[\"load\", 1410]]]"), "p.json", true, &s, &n), ZEUS_EPARSE, "load");
  assert_zeus_err(zeus_pfo_parse_plan_file("/nonexistent/plan.py", &s, &n), ZEUS_ENOENT, "/nonexistent/plan.py");
}

static void dumps_round_trip_and_real_dump_loads(void **state) {
  (void)state;
  char dir[256];
  zeus_test_tmpdir(dir, sizeof dir);
  int freqs[] = {1410, 1000};
  char *ps[] = {"forward", "backward"};
  zeus_pfo_rank_info ranks[2] = {
      {0, 0, 0, 0, freqs, 2, NULL, 0}, {1, 0, 1, 0, freqs, 2, ps, 2}};
  assert_zeus_ok(zeus_pfo_save_ranks(dir, ranks, 2));
  zeus_pfo_rank_info *lr;
  size_t n;
  assert_zeus_ok(zeus_pfo_load_ranks(dir, &lr, &n));
  assert_int_equal(n, 2);
  assert_int_equal(lr[1].pp_rank, 1);
  assert_null(lr[0].pipe_schedule);
  assert_string_equal(lr[1].pipe_schedule[0], "forward");
  zeus_pfo_ranks_free(lr, n);
  zeus_pfo_freq f[] = {{"forward", 1410}};
  zeus_pfo_schedule sc[] = {{0, f, 1}};
  assert_zeus_ok(zeus_pfo_save_schedules(dir, 3, sc, 1));
  zeus_pfo_schedule *ls;
  assert_zeus_ok(zeus_pfo_load_schedules(dir, 3, &ls, &n));
  assert_int_equal(ls[0].frequencies[0].frequency_mhz, 1410);
  zeus_pfo_schedules_free(ls, n);
  assert_zeus_err(zeus_pfo_load_schedules(dir, 4, &ls, &n), ZEUS_ENOENT, "4.sched.json");

  ZEUS_SKIP_WITHOUT_DATA();
  char path[512];
  snprintf(path, sizeof path, "%s/perseus-sosp24/pfo-dump/bert-huge-pp4-0.prof.json", zeus_test_data_dir());
  zeus_pfo_prof_result *pr;
  assert_zeus_ok(zeus_pfo_load_prof_file(path, &pr, &n));
  assert_int_equal(n, 4);
  assert_int_equal(pr[0].n_iter_time, 30);
  assert_int_equal(pr[0].n_time_breakdown, 3);
  assert_zeus_ok(zeus_pfo_save_prof(dir, 0, pr, n));
  zeus_pfo_prof_result *pr2;
  size_t n2;
  assert_zeus_ok(zeus_pfo_load_prof(dir, 0, &pr2, &n2));
  assert_int_equal(n2, 4);
  assert_true(pr2[3].time_breakdown[1].values[5] == pr[3].time_breakdown[1].values[5]);
  zeus_pfo_prof_results_free(pr, n);
  zeus_pfo_prof_results_free(pr2, n2);
  /* The old schedule format (power_states) is refused with the field named. */
  snprintf(path, sizeof path, "%s/perseus-sosp24/pfo-dump/bert-huge-pp4-0.sched.json", zeus_test_data_dir());
  assert_zeus_err(zeus_pfo_load_schedules_file(path, &ls, &n), ZEUS_EINVAL, "missing field 'frequencies'");
}

static void instruction_csv_has_the_original_columns(void **state) {
  (void)state;
  char dir[256], path[512];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/prof.csv", dir);
  zeus_pfo_freq_measure fw[] = {{1000, 0.2, 30}, {1410, 0.1, 40}}, bw[] = {{1410, 0.25, 90}};
  zeus_pfo_offline_result r = {5, 1, 2, 0, fw, 2, bw, 1};
  assert_zeus_ok(zeus_pfo_write_instruction_csv(path, &r, 1));
  char *data;
  size_t len;
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  data = calloc(1, 4096);
  len = fread(data, 1, 4095, f);
  fclose(f);
  (void)len;
  assert_string_equal(data, "rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy\n"
                            "5,1,2,0,2,forward,1410,0.1,40\n"
                            "5,1,2,0,2,forward,1000,0.2,30\n"
                            "5,1,2,0,2,backward,1410,0.25,90\n");
  free(data);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(job_info_validation_names_the_field),
      cmocka_unit_test(rank_info_validation_checks_ranges_and_frequencies),
      cmocka_unit_test(schedule_and_result_round_trip_in_original_shapes),
      cmocka_unit_test(job_ids_have_the_original_shape_and_safe_metadata),
      cmocka_unit_test(plan_parser_reads_lowtime_files_and_json),
      cmocka_unit_test(plan_parser_reports_file_line_and_expectation),
      cmocka_unit_test(dumps_round_trip_and_real_dump_loads),
      cmocka_unit_test(instruction_csv_has_the_original_columns),
      cmocka_unit_test(fast_result_reader_matches_jansson_or_declines),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
