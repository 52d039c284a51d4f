/* child.c: one try of a recurring job as a child process in its own process group: its output
 * streamed to the caller and to the try's log file, a timeout, and stopping on request. The
 * trainee dies with its driver (PR_SET_PDEATHSIG), and nothing of its process group outlives the
 * try: whatever is left of the group when the trainee ends, times out or is stopped is killed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run/run_internal.h"

#define KILL_GRACE_S 5.0
/* How long output is still read after the trainee exited (a helper of the trainee may hold its
 * output open: it is killed with the group, but one that left the group is not waited for). */
#define DRAIN_GRACE_S 1.0

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

/* In the child after fork: only async-signal-safe calls until exec. */
static void child_exec(char *const *argv, char *const *env, const char *workdir, int out_fd, pid_t parent, int go_fd) {
  setpgid(0, 0);
  /* Killed when the driver dies (kill -9 included), so that a restart never finds it running
   * beside the try it repeats; if the driver died before this line, exit now. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(125);
  /* Wait until the driver has recorded this trainee in the state: one it did not record could
   * outlive a driver killed meanwhile unseen by the next run. */
  char go = 0;
  ssize_t got;
  while ((got = read(go_fd, &go, 1)) < 0 && errno == EINTR) {}
  if (got != 1) _exit(125);
  close(go_fd);
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  if (out_fd > STDERR_FILENO) close(out_fd);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) {
    dup2(devnull, STDIN_FILENO);
    if (devnull > STDIN_FILENO) close(devnull);
  }
  /* Children start with default signal handling. */
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (workdir && chdir(workdir) != 0) {
    static const char msg[] = "zeus run: cannot enter the working folder\n";
    write_all(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(126);
  }
  execvpe(argv[0], argv, env);
  int e = errno;
  static const char a[] = "zeus run: cannot run '";
  write_all(STDERR_FILENO, a, sizeof a - 1);
  write_all(STDERR_FILENO, argv[0], strlen(argv[0]));
  static const char b[] = "': ";
  write_all(STDERR_FILENO, b, sizeof b - 1);
  const char *es = strerror(e);
  write_all(STDERR_FILENO, es, strlen(es));
  write_all(STDERR_FILENO, "\n", 1);
  _exit(127);
}

/* On a stop request or past the timeout: SIGTERM to the trainee's process group, then SIGKILL
 * after KILL_GRACE_S (once). *term_at is when SIGTERM went out (0: not yet). */
static void enforce_stop(const zeus_runner *r, pid_t pid, double start, double *term_at, zeus__child_result *res) {
  double now = zeus_monotonic_s();
  bool want_stop = r->stop || (r->s.timeout_s > 0 && now - start > r->s.timeout_s);
  if (want_stop && *term_at == 0) {
    res->stopped = r->stop;
    res->timed_out = !r->stop;
    kill(-pid, SIGTERM);
    *term_at = now;
  } else if (*term_at > 0 && now - *term_at > KILL_GRACE_S) {
    kill(-pid, SIGKILL);
    *term_at = now + 1e9; /* once */
  }
}

/* Whether the trainee (pid) has exited, without reaping it: while it is a zombie its pid stays
 * the id of its process group, so the group can still be killed safely. */
static bool has_exited(pid_t pid) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0) return errno == ECHILD;
  return si.si_pid == pid;
}

/* Kills what is left of the trainee's process group (helpers it started and left running). */
static void kill_leftovers(pid_t pid) {
  if (kill(-pid, 0) != 0) return;
  kill(-pid, SIGKILL);
}

int zeus__run_child(zeus_runner *r, char *const *argv, char *const *env, const char *log_path,
                    zeus__child_result *res) {
  memset(res, 0, sizeof *res);
  int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (log_fd < 0) return zeus__error(ZEUS_EIO, "cannot create the log file '%s': %s", log_path, strerror(errno));
  int p[2], go[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    close(log_fd);
    return zeus__error(ZEUS_EIO, "cannot create a pipe for the trainee's output: %s", strerror(errno));
  }
  /* A socket pair, so that the go byte is sent without SIGPIPE should the child be gone. */
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) != 0) {
    close(p[0]);
    close(p[1]);
    close(log_fd);
    return zeus__error(ZEUS_EIO, "cannot create a pipe to start the trainee: %s", strerror(errno));
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(p[0]);
    close(p[1]);
    close(go[0]);
    close(go[1]);
    close(log_fd);
    return zeus__error(ZEUS_EIO, "cannot start the trainee: fork: %s", strerror(e));
  }
  if (pid == 0) {
    close(p[0]);
    close(go[1]);
    int out = fcntl(p[1], F_DUPFD, 3); /* without FD_CLOEXEC, above the standard streams */
    child_exec(argv, env, r->s.workdir, out >= 0 ? out : p[1], parent, go[0]);
  }
  setpgid(pid, pid); /* also in the parent, so that killing the group works at once */
  close(p[1]);
  close(go[0]);
  zeus__run_state_trainee_started(r, pid);
  ssize_t sent;
  while ((sent = send(go[1], "g", 1, MSG_NOSIGNAL)) < 0 && errno == EINTR) {}
  close(go[1]);
  double start = zeus_monotonic_s(), term_at = 0, exited_at = 0;
  bool open_pipe = true;
  char buf[8192];
  while (open_pipe) {
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    int n = poll(&pfd, 1, 200);
    if (n < 0 && errno != EINTR) break;
    if (n > 0) {
      ssize_t got = read(p[0], buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        open_pipe = false;
      } else {
        write_all(log_fd, buf, (size_t)got);
        if (r->cb.output) r->cb.output(r->cb.ctx, buf, (size_t)got);
      }
    }
    if (exited_at == 0 && has_exited(pid)) {
      exited_at = zeus_monotonic_s();
      kill_leftovers(pid); /* a helper in the group holding the output */
    }
    if (exited_at == 0)
      enforce_stop(r, pid, start, &term_at, res);
    else if (zeus_monotonic_s() - exited_at > DRAIN_GRACE_S)
      break; /* held by one outside the group */
  }
  close(p[0]);
  /* Reap the trainee (stopping it if asked or past the timeout meanwhile). */
  int status = 0;
  for (;;) {
    if (has_exited(pid)) kill_leftovers(pid);
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      status = 0;
      break;
    }
    enforce_stop(r, pid, start, &term_at, res);
    usleep(20000);
  }
  close(log_fd);
  zeus__run_state_trainee_ended(r);
  if (WIFEXITED(status)) res->exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) {
    res->signal = WTERMSIG(status);
    res->exit_code = 128 + res->signal;
  }
  return ZEUS_OK;
}
