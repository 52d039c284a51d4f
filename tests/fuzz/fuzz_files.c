/* libFuzzer target for every parser of a user's file (issue 19): the frontier instruction profile
 * (CSV), the power-limit optimizer's profile (JSON), the `zeus run` job spec (JSON), the simulated
 * GPU model (profile CSV and JSON, then opened, which checks every value), the train and power
 * traces (CSV) and the frequency plan (CSV and JSON). The first byte picks the parser; the rest is
 * written to a file of the right extension and loaded through the public loader, so core's bounded
 * reader is on the path too. The `zeus run` state is SQLite's own format and is not fuzzed here. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zeus.h>

static char g_dir[64];
static char g_train[128], g_power[128];

static void put(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) abort();
  const char *p = data;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w <= 0) abort();
    p += w;
    len -= (size_t)w;
  }
  close(fd);
}

static void cleanup(void) {
  static const char *const names[] = {"train.csv", "power.csv", "input.csv", "input.json"};
  char path[160];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", g_dir, names[i]);
    unlink(path);
  }
  rmdir(g_dir);
}

static void setup(void) {
  snprintf(g_dir, sizeof g_dir, "%s/zeus-fuzz-files-%d", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
           (int)getpid());
  if (mkdir(g_dir, 0700) != 0 && errno != EEXIST) abort();
  atexit(cleanup);
  zeus_set_log_level(ZEUS_LOG_OFF);
  snprintf(g_train, sizeof g_train, "%s/train.csv", g_dir);
  snprintf(g_power, sizeof g_power, "%s/power.csv", g_dir);
  static const char train[] =
      "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
      "d,n,32,adam,0.1,0,0.5,3\n";
  static const char power[] =
      "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
      "d,n,32,adam,100,1.0,90\n";
  put(g_train, train, sizeof train - 1);
  put(g_power, power, sizeof power - 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_dir[0]) setup();
  if (size < 1) return 0;
  static const char *const ext[] = {"csv", "json", "json", "csv", "json", "csv", "csv", "csv", "json"};
  unsigned which = data[0] % 9;
  char path[128];
  snprintf(path, sizeof path, "%s/input.%s", g_dir, ext[which]);
  put(path, data + 1, size - 1);
  switch (which) {
    case 0: {
      zeus_frontier_profile *p;
      if (zeus_frontier_profile_load(&p, path) == ZEUS_OK) zeus_frontier_profile_free(p);
      break;
    }
    case 1: {
      zeus_plo_measurement *m;
      size_t n;
      if (zeus_plo_profile_load(path, &m, &n) == ZEUS_OK) zeus_free(m);
      break;
    }
    case 2: {
#ifdef FUZZ_RUN_SPEC /* a build with `zeus run` */
      zeus_run_spec s;
      zeus_run_spec_init(&s);
      void *storage = NULL;
      long recs;
      if (zeus_run_spec_load(&s, path, &storage, &recs) == ZEUS_OK) zeus_free(storage);
#endif
      break;
    }
    case 3:
    case 4: {
      zeus_sim_config *cfg;
      if (zeus_sim_config_load(&cfg, path, 40) == ZEUS_OK) {
        zeus_sim_node *node;
        if (zeus_sim_node_open(&node, cfg) == ZEUS_OK) zeus_sim_node_close(node);
        zeus_sim_config_free(cfg);
      }
      break;
    }
    case 5:
    case 6: {
      zeus_trace *t;
      int rc = which == 5 ? zeus_trace_open_files(&t, path, g_power) : zeus_trace_open_files(&t, g_train, path);
      if (rc == ZEUS_OK) zeus_trace_close(t);
      break;
    }
    case 7:
    case 8: {
      zeus_pfo_schedule *s;
      size_t n;
      if (zeus_pfo_parse_plan_file(path, &s, &n) == ZEUS_OK) zeus_pfo_schedules_free(s, n);
      break;
    }
  }
  return 0;
}
