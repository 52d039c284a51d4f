/* collective: validation, NULL as one process, and the thread-group collective. */
#include "test_util.h"

#include <pthread.h>
#include <string.h>
#include <zeus.h>

static int fake_allreduce(void *ctx, double *v, size_t n, zeus_reduce_op op) {
  (void)ctx, (void)v, (void)n, (void)op;
  return zeus_set_errmsg(ZEUS_EIO, "peer 3 is gone");
}
static int fake_broadcast(void *ctx, void *buf, size_t len, int root) {
  (void)ctx, (void)buf, (void)len, (void)root;
  return ZEUS_EIO; /* no message of its own */
}

static void check_names_the_bad_field(void **state) {
  (void)state;
  assert_zeus_ok(zeus_collective_check(NULL));
  zeus_collective c = {.rank = 0, .world_size = 2, .allreduce = fake_allreduce, .broadcast = fake_broadcast};
  assert_zeus_ok(zeus_collective_check(&c));
  c.rank = 2;
  assert_zeus_err(zeus_collective_check(&c), ZEUS_EINVAL, "rank 2");
  c.rank = 0, c.world_size = 0;
  assert_zeus_err(zeus_collective_check(&c), ZEUS_EINVAL, "world_size 0");
  c.world_size = 2, c.broadcast = NULL;
  assert_zeus_err(zeus_collective_check(&c), ZEUS_EINVAL, "broadcast");
}

static void null_is_one_process_and_errors_pass_through(void **state) {
  (void)state;
  double v[2] = {1.5, 2.5};
  assert_zeus_ok(zeus_collective_allreduce(NULL, v, 2, ZEUS_REDUCE_SUM));
  assert_true(v[0] == 1.5 && v[1] == 2.5);
  char b[4] = "abc";
  assert_zeus_ok(zeus_collective_broadcast(NULL, b, sizeof b, 0));
  assert_string_equal(b, "abc");

  zeus_collective c = {.rank = 1, .world_size = 2, .allreduce = fake_allreduce, .broadcast = fake_broadcast};
  assert_zeus_err(zeus_collective_allreduce(&c, v, 2, ZEUS_REDUCE_MAX), ZEUS_EIO, "peer 3 is gone");
  zeus_set_errmsg(ZEUS_OK, "%s", "");
  assert_zeus_err(zeus_collective_broadcast(&c, b, sizeof b, 0), ZEUS_EIO, "broadcast failed");
  assert_zeus_err(zeus_collective_broadcast(&c, b, sizeof b, 5), ZEUS_EINVAL, "root 5");
}

enum { NT = 4, ROUNDS = 200 };
static zeus_thread_group *group;
static int failures;

static void *member(void *arg) {
  int rank = (int)(intptr_t)arg;
  zeus_collective c;
  if (zeus_thread_group_collective(group, rank, &c) != ZEUS_OK) {
    __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
    return NULL;
  }
  for (int round = 0; round < ROUNDS; round++) {
    double v[3] = {rank + 1.0, 10.0 * rank - round, round};
    double m[1] = {rank == round % NT ? 100.0 + round : (double)rank};
    char id[16];
    snprintf(id, sizeof id, rank == round % NT ? "job-%d" : "junk", round);
    int rc = zeus_collective_allreduce(&c, v, 3, ZEUS_REDUCE_SUM);
    rc |= zeus_collective_allreduce(&c, m, 1, ZEUS_REDUCE_MAX);
    rc |= zeus_collective_broadcast(&c, id, sizeof id, round % NT);
    char want[16];
    snprintf(want, sizeof want, "job-%d", round);
    /* sum of rank+1 over 4 ranks = 10; sum of 10r - round = 60 - 4 round; sum of round = 4 round */
    if (rc != ZEUS_OK || v[0] != 10.0 || v[1] != 60.0 - 4.0 * round || v[2] != 4.0 * round ||
        m[0] != 100.0 + round || strcmp(id, want) != 0)
      __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
  }
  return NULL;
}

static void thread_group_reduces_and_broadcasts(void **state) {
  (void)state;
  assert_zeus_ok(zeus_thread_group_open(&group, NT));
  zeus_collective c;
  assert_zeus_err(zeus_thread_group_collective(group, NT, &c), ZEUS_EINVAL, "rank 4");
  pthread_t t[NT];
  for (int r = 0; r < NT; r++) assert_int_equal(pthread_create(&t[r], NULL, member, (void *)(intptr_t)r), 0);
  for (int r = 0; r < NT; r++) pthread_join(t[r], NULL);
  assert_int_equal(failures, 0);
  zeus_thread_group_close(group);
  assert_zeus_err(zeus_thread_group_open(&group, 0), ZEUS_EINVAL, "world_size 0");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(check_names_the_bad_field),
      cmocka_unit_test(null_is_one_process_and_errors_pass_through),
      cmocka_unit_test(thread_group_reduces_and_broadcasts),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
