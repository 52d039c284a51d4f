/* bounded_reads: every file parser reads through core's bounded reader (issue 19, item 13): a
 * FIFO, /dev/zero or a folder is refused at once (never blocks, never fills memory), a file over
 * its cap is refused with its size and the cap, before anything is allocated for it; plus the
 * loaders that were quadratic (item 15) stay fast at 100,000 entries, and a simulated GPU's power
 * cannot wrap its 32-bit mW readings. Every check is bounded in time. */
#include <fcntl.h>
#include <sys/stat.h>

#include "test_util.h"

#include <zeus.h>

#include "core/core.h"

/* A sparse file of `size` bytes (no disk space, no time). */
static void sparse(const char *path, off_t size) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, size), 0);
  close(fd);
}

static void core_reader_refuses_fifos_devices_folders_and_oversized_files(void **state) {
  (void)state;
  char dir[256], fifo[320], big[320], small[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(big, sizeof big, "%s/big", dir);
  snprintf(small, sizeof small, "%s/small", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  char *data = NULL;
  size_t len = 0;
  double t0 = zeus_monotonic_s();
  /* A FIFO without a writer would block open() forever. */
  assert_zeus_err(zeus__read_file_max(fifo, 1024, "job spec", &data, &len), ZEUS_EINVAL,
                  "is not a regular file (a job spec must be one");
  assert_zeus_err(zeus__read_file_max("/dev/zero", 1024, NULL, &data, &len), ZEUS_EINVAL,
                  "'/dev/zero' is not a regular file");
  assert_zeus_err(zeus__read_file_max(dir, 1024, NULL, &data, &len), ZEUS_EINVAL, "is not a regular file");
  assert_zeus_err(zeus__read_file_max("/nonexistent/x", 1024, NULL, &data, &len), ZEUS_ENOENT, "/nonexistent/x");
  /* Over the cap by one byte: refused naming the size and the cap; at the cap: read whole. */
  sparse(big, 1025);
  assert_zeus_err(zeus__read_file_max(big, 1024, "plan", &data, &len), ZEUS_ERANGE,
                  "has 1025 bytes, more than the limit of 1 KiB for a plan");
  zeus_test_write_file(small, "0123456789");
  assert_zeus_ok(zeus__read_file_max(small, 10, NULL, &data, &len));
  assert_int_equal(len, 10);
  assert_string_equal(data, "0123456789");
  free(data);
  assert_zeus_err(zeus__read_file_max(small, 9, NULL, &data, &len), ZEUS_ERANGE, "more than the limit of 9 bytes");
  /* An empty file is an empty, NUL-terminated string. */
  zeus_test_write_file(small, "");
  assert_zeus_ok(zeus__read_file_max(small, 10, NULL, &data, &len));
  assert_int_equal(len, 0);
  assert_string_equal(data, "");
  free(data);
  /* The default cap: 16 MiB. */
  sparse(big, ((off_t)16 << 20) + 1);
  assert_zeus_err(zeus__read_file(big, &data, &len), ZEUS_ERANGE, "more than the limit of 16 MiB");
  assert_true(zeus_monotonic_s() - t0 < 10);
  assert_string_equal(zeus__size_text((size_t)64 << 20).s, "64 MiB");
  assert_string_equal(zeus__size_text(1536).s, "1536 bytes");
}

/* Each public loader of a user's file refuses /dev/zero, a FIFO and an oversized file at once
 * (`zeus frontier --profile /dev/zero` once grew to 17.8 GB in a minute). */
static void every_file_parser_is_bounded(void **state) {
  (void)state;
  char dir[256], fifo[320], big[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(fifo, sizeof fifo, "%s/fifo.csv", dir);
  snprintf(big, sizeof big, "%s/big.json", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  sparse(big, ((off_t)64 << 20) + 1);
  double t0 = zeus_monotonic_s();
  const char *bad[] = {"/dev/zero", fifo, big};
  for (int i = 0; i < 3; i++) {
    const char *p = bad[i];
    int want = i == 2 ? ZEUS_ERANGE : ZEUS_EINVAL;
    zeus_frontier_profile *fp = NULL;
    assert_zeus_err(zeus_frontier_profile_load(&fp, p), want, p);
    zeus_plo_measurement *m = NULL;
    size_t n = 0;
    assert_zeus_err(zeus_plo_profile_load(p, &m, &n), want, "power-limit profile");
    zeus_pfo_schedule *sch = NULL;
    assert_zeus_err(zeus_pfo_parse_plan_file(p, &sch, &n), want, "frequency plan");
    zeus_sim_config *cfg = NULL;
    assert_zeus_err(zeus_sim_config_load(&cfg, p, 0), want, p);
    zeus_trace *t = NULL;
    assert_zeus_err(zeus_trace_open_files(&t, p, p), want, "train trace");
  }
  /* The frontier profile's cap is 64 MiB, named. */
  assert_zeus_err(zeus_frontier_profile_load(&(zeus_frontier_profile *){NULL}, big), ZEUS_ERANGE, "limit of 64 MiB");
  assert_true(zeus_monotonic_s() - t0 < 10);
}

/* ---- item 15: loaders that were quadratic, and 32-bit wrap ---- */

static void large_profiles_and_traces_load_in_linear_time(void **state) {
  (void)state;
  char dir[256], plo[320], tr[320], pw[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(plo, sizeof plo, "%s/plo.json", dir);
  snprintf(tr, sizeof tr, "%s/train.csv", dir);
  snprintf(pw, sizeof pw, "%s/power.csv", dir);
  enum { N = 100000 };
  FILE *f = fopen(plo, "w");
  assert_non_null(f);
  fputs("{\"measurements\": [", f);
  for (long i = 0; i < N; i++)
    fprintf(f, "%s{\"power_limit\": %ld, \"energy\": %ld.5, \"time\": 2.0}", i ? "," : "", i + 1, 100 + i);
  fputs("]}\n", f);
  fclose(f);
  f = fopen(tr, "w");
  assert_non_null(f);
  fputs("dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n", f);
  for (long i = 0; i < N / 2; i++) fprintf(f, "data%ld,net%ld,32,adam,0.1,0,0.5,3\n", i, i);
  fclose(f);
  f = fopen(pw, "w");
  assert_non_null(f);
  fputs("dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n", f);
  for (long i = 0; i < N / 2; i++) fprintf(f, "data%ld,net%ld,32,adam,100,1.0,90\n", i, i);
  fclose(f);
  /* Linear: well under a second each (ASan included); comparing every pair took 18.5 s for the
   * profile and about a minute for the trace's 100,000 names. */
  double t0 = zeus_monotonic_s();
  zeus_plo_measurement *m;
  size_t n;
  assert_zeus_ok(zeus_plo_profile_load(plo, &m, &n));
  assert_int_equal(n, N);
  assert_int_equal(m[N - 1].power_limit_w, N);
  zeus_free(m);
  double t_plo = zeus_monotonic_s() - t0;
  t0 = zeus_monotonic_s();
  zeus_trace *t;
  assert_zeus_ok(zeus_trace_open_files(&t, tr, pw));
  zeus_trace_close(t);
  double t_trace = zeus_monotonic_s() - t0;
  if (t_plo > 8 || t_trace > 8) fail_msg("loading took %.1f s (profile) and %.1f s (trace)", t_plo, t_trace);
  /* The sorted duplicate check names the first repeat and its original. */
  zeus_test_write_file(plo,
                       "{\"measurements\": [{\"power_limit\": 300, \"energy\": 1, \"time\": 1},"
                       "{\"power_limit\": 200, \"energy\": 1, \"time\": 1},"
                       "{\"power_limit\": 250, \"energy\": 1, \"time\": 1},"
                       "{\"power_limit\": 200, \"energy\": 1, \"time\": 1},"
                       "{\"power_limit\": 300, \"energy\": 1, \"time\": 1}]}");
  assert_zeus_err(zeus_plo_profile_load(plo, &m, &n), ZEUS_EPARSE,
                  "power limit 200 W appears twice (measurements[1] and [3])");
}

static void sim_power_cannot_wrap_its_milliwatt_readings(void **state) {
  (void)state;
  char dir[256], csv[320];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(csv, sizeof csv, "%s/profile.csv", dir);
  /* 99,999,999,999 W once read back as 276,446.2 W (a 32-bit wrap of the mW value). */
  zeus_test_write_file(csv,
                       "start_time,window_name,elapsed_time,gpu0_energy\n"
                       "0,__PowerLimitOptimizer_300,1.0,8000\n"
                       "0,__PowerLimitOptimizer_99999999999,1.0,9000\n");
  zeus_sim_config *cfg;
  assert_zeus_ok(zeus_sim_config_load(&cfg, csv, 40));
  zeus_sim_node *node = NULL;
  assert_zeus_err(zeus_sim_node_open(&node, cfg), ZEUS_EINVAL, "table row 2 is out of range (1e+11 W");
  zeus_sim_config_free(cfg);
  /* Duplicates are still found (after sorting). */
  zeus_test_write_file(csv,
                       "start_time,window_name,elapsed_time,gpu0_energy\n"
                       "0,__PowerLimitOptimizer_300,1.0,8000\n"
                       "0,__PowerLimitOptimizer_250,1.0,7000\n"
                       "0,__PowerLimitOptimizer_300,1.0,9000\n");
  assert_zeus_ok(zeus_sim_config_load(&cfg, csv, 40));
  assert_zeus_err(zeus_sim_node_open(&node, cfg), ZEUS_EINVAL, "power limit 300 W appears twice");
  zeus_sim_config_free(cfg);
  /* The highest allowed power reads back exactly. */
  zeus_test_write_file(csv,
                       "start_time,window_name,elapsed_time,gpu0_energy\n"
                       "0,__PowerLimitOptimizer_100000,1.0,8000\n"
                       "0,__PowerLimitOptimizer_250,1.0,7000\n");
  assert_zeus_ok(zeus_sim_config_load(&cfg, csv, 40));
  assert_zeus_ok(zeus_sim_node_open(&node, cfg));
  unsigned mn, mx, def;
  assert_zeus_ok(zeus_sim_gpu_power_limit_constraints(node, 0, &mn, &mx, &def));
  assert_int_equal(mx, 100000000u);
  assert_int_equal(mn, 250000u);
  zeus_sim_node_close(node);
  zeus_sim_config_free(cfg);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(core_reader_refuses_fifos_devices_folders_and_oversized_files),
      cmocka_unit_test(every_file_parser_is_bounded),
      cmocka_unit_test(large_profiles_and_traces_load_in_linear_time),
      cmocka_unit_test(sim_power_cannot_wrap_its_milliwatt_readings),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
