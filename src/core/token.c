/* token.c: secrets servers share: the bearer token read from a file, and whether an address is
 * a loopback one (servers warn when they listen elsewhere without a token). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

/* The bearer token from the first line of `path`: a regular file of at most 4 KiB. */
int zeus__read_token_file(const char *path, const char *domain, char **out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return zeus__error(ZEUS_EINVAL, "token file '%s': cannot open it: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 4096) {
    close(fd);
    return zeus__error(ZEUS_EINVAL, "token file '%s': expected a regular file of at most 4096 bytes", path);
  }
  if (st.st_mode & (S_IRGRP | S_IROTH))
    zeus__log(ZEUS_LOG_WARN, domain, "token file '%s' may be read by %s (mode %04o); run 'chmod go-r %s'", path,
              (st.st_mode & S_IROTH) ? "every user" : "its group", (unsigned)(st.st_mode & 07777), path);
  char buf[4097];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n < 0) return zeus__error(ZEUS_EINVAL, "token file '%s': %s", path, strerror(errno));
  buf[n] = '\0';
  buf[strcspn(buf, "\r\n")] = '\0';
  size_t k = strlen(buf);
  while (k && (buf[k - 1] == ' ' || buf[k - 1] == '\t')) buf[--k] = '\0';
  if (!k) return zeus__error(ZEUS_EINVAL, "token file '%s': the first line is empty", path);
  if (!(*out = zeus__strdup(buf))) return zeus__oom("reading the token file");
  memset(buf, 0, sizeof buf);
  return ZEUS_OK;
}

bool zeus__sockaddr_is_loopback(const struct sockaddr *a) {
  if (a->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa_family == AF_INET6) {
    const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(x)) return true;
    return IN6_IS_ADDR_V4MAPPED(x) && x->s6_addr[12] == 127;
  }
  return false;
}

