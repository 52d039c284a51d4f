/* Reading whole files and writing them atomically. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

/* Every file a user names is read through here: opened without blocking (a FIFO with no writer
 * would block open() forever), checked to be a regular file (a FIFO, /dev/zero, a terminal or a
 * folder never ends or never answers) of at most `max` bytes, and read to at most max + 1 bytes
 * even if it grows meanwhile, so no input can make a reader hold more than its cap. */
int zeus__read_file_max(const char *path, size_t max, const char *what, char **data, size_t *len) {
  if (!what) what = "file";
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    return zeus__error(e == ENOENT   ? ZEUS_ENOENT
                       : e == EACCES ? ZEUS_EPERM
                                     : ZEUS_EIO,
                       "cannot open '%s': %s", path, strerror(e));
  }
  struct stat st;
  int rc = ZEUS_OK;
  if (fstat(fd, &st) != 0)
    rc = zeus__error(ZEUS_EIO, "cannot read '%s': %s", path, strerror(errno));
  else if (!S_ISREG(st.st_mode))
    rc = zeus__error(ZEUS_EINVAL, "'%s' is not a regular file (a %s must be one: a FIFO, device or folder is refused)",
                     path, what);
  else if ((unsigned long long)st.st_size > (unsigned long long)max)
    rc = zeus__error(ZEUS_ERANGE, "'%s' has %lld bytes, more than the limit of %s for a %s", path,
                     (long long)st.st_size, zeus__size_text(max).s, what);
  /* Back to blocking reads: a regular file never blocks, and O_NONBLOCK is only for the open. */
  if (!rc) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  size_t cap = rc ? 0 : (size_t)st.st_size + 1, n = 0;
  char *buf = NULL;
  if (!rc && !(buf = malloc(cap + 1))) rc = zeus__oom("reading a file");
  while (!rc) {
    if (n == cap) { /* it grew since fstat: keep going up to max + 1 bytes */
      size_t more = cap < max + 1 ? (max + 1 - cap < cap ? max + 1 - cap : cap) : 0;
      if (more == 0) {
        rc = zeus__error(ZEUS_ERANGE, "'%s' grew past the limit of %s for a %s while it was read", path,
                         zeus__size_text(max).s, what);
        break;
      }
      char *nb = realloc(buf, cap + more + 1);
      if (!nb) {
        rc = zeus__oom("reading a file");
        break;
      }
      buf = nb;
      cap += more;
    }
    ssize_t r = read(fd, buf + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) rc = zeus__error(ZEUS_EIO, "error reading '%s': %s", path, strerror(errno));
    if (r <= 0) break;
    n += (size_t)r;
  }
  if (!rc && n > max)
    rc = zeus__error(ZEUS_ERANGE, "'%s' grew past the limit of %s for a %s while it was read", path,
                     zeus__size_text(max).s, what);
  close(fd);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return ZEUS_OK;
}

int zeus__read_file(const char *path, char **data, size_t *len) {
  return zeus__read_file_max(path, ZEUS__READ_MAX, "file", data, len);
}

zeus__size_str zeus__size_text(size_t bytes) {
  zeus__size_str t;
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
    snprintf(t.s, sizeof t.s, "%zu MiB", bytes >> 20);
  else if (bytes >= 1024 && bytes % 1024 == 0)
    snprintf(t.s, sizeof t.s, "%zu KiB", bytes >> 10);
  else
    snprintf(t.s, sizeof t.s, "%zu bytes", bytes);
  return t;
}

int zeus__write_file_atomic_at(int dirfd, const char *name, const void *data, size_t len, const char *what) {
  if (!what) what = name;
  if (!*name || strchr(name, '/')) return zeus__error(ZEUS_EINVAL, "'%s' is not a plain file name", name);
  char rnd[17];
  int rc = zeus__random_token(rnd, 16);
  if (rc) return rc;
  size_t tlen = strlen(name) + 32;
  char *tmp = malloc(tlen);
  if (!tmp) return zeus__oom("writing a file");
  /* A hidden name with a random part: not guessable in advance, and O_EXCL|O_NOFOLLOW refuse
   * anything already there, a symlink included. */
  snprintf(tmp, tlen, ".%s.%s.tmp", name, rnd);
  int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    int e = errno;
    free(tmp);
    return zeus__error(e == EACCES ? ZEUS_EPERM : ZEUS_EIO, "cannot create '%s': %s", what, strerror(e));
  }
  const char *p = data;
  size_t left = len;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      unlinkat(dirfd, tmp, 0);
      free(tmp);
      return zeus__error(ZEUS_EIO, "cannot write '%s': %s", what, strerror(e));
    }
    p += w;
    left -= (size_t)w;
  }
  if (fsync(fd) != 0 && errno != EINVAL) {
    int e = errno;
    close(fd);
    unlinkat(dirfd, tmp, 0);
    free(tmp);
    return zeus__error(ZEUS_EIO, "cannot sync '%s': %s", what, strerror(e));
  }
  close(fd);
  if (renameat(dirfd, tmp, dirfd, name) != 0) {
    int e = errno;
    unlinkat(dirfd, tmp, 0);
    free(tmp);
    return zeus__error(ZEUS_EIO, "cannot rename the new '%s' into place: %s", what, strerror(e));
  }
  free(tmp);
  return ZEUS_OK;
}

int zeus__write_file_atomic(const char *path, const void *data, size_t len) {
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  if (!*name) return zeus__error(ZEUS_EINVAL, "cannot write '%s': the path names a directory", path);
  char *dir = slash ? malloc((size_t)(slash - path) + 2) : NULL;
  if (slash && !dir) return zeus__oom("writing a file");
  if (dir) {
    size_t n = slash == path ? 1 : (size_t)(slash - path); /* "/name" lives in "/" */
    memcpy(dir, path, n);
    dir[n] = '\0';
  }
  int dfd = open(dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    int e = errno;
    free(dir);
    return zeus__error(e == EACCES ? ZEUS_EPERM : ZEUS_EIO, "cannot create '%s': %s",
                       path, strerror(e));
  }
  free(dir);
  int rc = zeus__write_file_atomic_at(dfd, name, data, len, path);
  close(dfd);
  return rc;
}

int zeus__mkdirs(const char *path) {
  size_t n = strlen(path);
  char *p = malloc(n + 1);
  if (!p) return zeus__oom("creating a directory");
  memcpy(p, path, n + 1);
  for (char *q = p + 1;; q++) {
    if (*q == '/' || *q == '\0') {
      char c = *q;
      *q = '\0';
      if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        int e = errno;
        int rc = zeus__error(e == EACCES ? ZEUS_EPERM : ZEUS_EIO, "cannot create the directory '%s': %s", p,
                             strerror(e));
        free(p);
        return rc;
      }
      *q = c;
      if (!c) break;
    }
  }
  free(p);
  return ZEUS_OK;
}

int zeus__open_private_dir(const char *path, int *out) {
  if (!path || !*path) return zeus__error(ZEUS_EINVAL, "a directory path is required");
  /* The parents as mkdir -p makes them, the last component private. */
  const char *slash = strrchr(path, '/');
  if (slash && slash != path) {
    size_t n = (size_t)(slash - path);
    char *parent = malloc(n + 1);
    if (!parent) return zeus__oom("creating a directory");
    memcpy(parent, path, n);
    parent[n] = '\0';
    int rc = zeus__mkdirs(parent);
    free(parent);
    if (rc) return rc;
  }
  if (mkdir(path, 0700) != 0 && errno != EEXIST) {
    int e = errno;
    return zeus__error(e == EACCES ? ZEUS_EPERM : ZEUS_EIO, "cannot create the directory '%s': %s", path, strerror(e));
  }
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ELOOP || e == ENOTDIR)
      return zeus__error(ZEUS_EPERM, "'%s' is a symbolic link or not a directory; refusing to write into it "
                         "(give a directory of your own)", path);
    return zeus__error(e == EACCES ? ZEUS_EPERM : ZEUS_EIO, "cannot open the directory '%s': %s", path, strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return zeus__error(ZEUS_EIO, "cannot inspect the directory '%s': %s", path, strerror(e));
  }
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    close(fd);
    return zeus__error(ZEUS_EPERM, "the directory '%s' belongs to user %ld, not to this user (%ld): another user "
                       "could replace its files; give a directory of your own", path, (long)st.st_uid,
                       (long)geteuid());
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    close(fd);
    return zeus__error(ZEUS_EPERM, "the directory '%s' is writable by %s (mode %04o): another user could plant "
                       "symlinks in it; run 'chmod go-w %s' or give a private directory", path,
                       (st.st_mode & S_IWOTH) ? "everyone" : "its group", (unsigned)(st.st_mode & 07777), path);
  }
  *out = fd;
  return ZEUS_OK;
}
