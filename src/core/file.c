/* Reading whole files and writing them atomically. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

int zeus__read_file(const char *path, char **data, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    int e = errno;
    return zeus__error(e == ENOENT ? ZEUS_ENOENT : e == EACCES ? ZEUS_EPERM : ZEUS_EIO,
                       "cannot open '%s': %s", path, strerror(e));
  }
  zeus__buf b = {0};
  char chunk[65536];
  size_t n;
  int rc = ZEUS_OK;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if ((rc = zeus__buf_append(&b, chunk, n))) break;
  }
  if (!rc && ferror(f)) rc = zeus__error(ZEUS_EIO, "error reading '%s': %s", path, strerror(errno));
  fclose(f);
  if (rc) { zeus__buf_free(&b); return rc; }
  if (!b.data && (rc = zeus__buf_append(&b, "", 0))) return rc;
  *data = b.data;
  *len = b.len;
  return ZEUS_OK;
}

int zeus__write_file_atomic(const char *path, const void *data, size_t len) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 32);
  if (!tmp) return zeus__oom("writing a file");
  snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int e = errno;
    free(tmp);
    return zeus__error(e == EACCES ? ZEUS_EPERM : ZEUS_EIO, "cannot create '%s': %s", path, strerror(e));
  }
  const char *p = data;
  size_t left = len;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      unlink(tmp);
      free(tmp);
      return zeus__error(ZEUS_EIO, "cannot write '%s': %s", path, strerror(e));
    }
    p += w;
    left -= (size_t)w;
  }
  if (fsync(fd) != 0 && errno != EINVAL) {
    int e = errno;
    close(fd);
    unlink(tmp);
    free(tmp);
    return zeus__error(ZEUS_EIO, "cannot sync '%s': %s", path, strerror(e));
  }
  close(fd);
  if (rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);
    free(tmp);
    return zeus__error(ZEUS_EIO, "cannot rename the new '%s' into place: %s", path, strerror(e));
  }
  free(tmp);
  return ZEUS_OK;
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
