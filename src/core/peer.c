/* Who is at the other end of a local connection: the kernel's word, for per-client limits. */
#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/core.h"

static bool is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
  }
  return false;
}

/* The uid that owns the socket `from` -> `to` (TCP), asked of the kernel by its exact address
 * (sock_diag over netlink): one answer, whatever the number of other sockets. */
static bool diag_uid(const struct sockaddr_storage *from, const struct sockaddr_storage *to, uid_t *uid) {
  struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 r;
  } req;
  memset(&req, 0, sizeof req);
  req.nlh.nlmsg_len = sizeof req;
  req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nlh.nlmsg_flags = NLM_F_REQUEST;
  req.r.sdiag_family = (unsigned char)from->ss_family;
  req.r.sdiag_protocol = IPPROTO_TCP;
  req.r.idiag_states = ~0u;
  req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  if (from->ss_family == AF_INET) {
    const struct sockaddr_in *f = (const void *)from, *t = (const void *)to;
    req.r.id.idiag_sport = f->sin_port;
    req.r.id.idiag_dport = t->sin_port;
    memcpy(req.r.id.idiag_src, &f->sin_addr, 4);
    memcpy(req.r.id.idiag_dst, &t->sin_addr, 4);
  } else {
    const struct sockaddr_in6 *f = (const void *)from, *t = (const void *)to;
    req.r.id.idiag_sport = f->sin6_port;
    req.r.id.idiag_dport = t->sin6_port;
    memcpy(req.r.id.idiag_src, &f->sin6_addr, 16);
    memcpy(req.r.id.idiag_dst, &t->sin6_addr, 16);
  }
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return false;
  struct timeval tv = {0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
  bool found = false;
  if (sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&nl, sizeof nl) == (ssize_t)sizeof req) {
    union {
      struct nlmsghdr h;
      char buf[8192];
    } ans;
    ssize_t n = recv(fd, &ans, sizeof ans, 0);
    for (struct nlmsghdr *h = &ans.h; n > 0 && NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) break;
      const struct inet_diag_msg *m = NLMSG_DATA(h);
      *uid = (uid_t)m->idiag_uid;
      found = true;
      break;
    }
  }
  close(fd);
  return found;
}

/* The same from /proc/net/tcp (tcp6), where netlink is not to be had: the entry whose local address
 * is `from` and whose remote one is `to`. */
static bool proc_uid(const struct sockaddr_storage *from, const struct sockaddr_storage *to, uid_t *uid) {
  char want_local[64], want_rem[64];
  const char *table;
  if (from->ss_family == AF_INET) {
    const struct sockaddr_in *f = (const void *)from, *t = (const void *)to;
    /* the kernel prints an address as its 32-bit word in host order, the port in host order */
    snprintf(want_local, sizeof want_local, "%08X:%04X", (unsigned)f->sin_addr.s_addr, (unsigned)ntohs(f->sin_port));
    snprintf(want_rem, sizeof want_rem, "%08X:%04X", (unsigned)t->sin_addr.s_addr, (unsigned)ntohs(t->sin_port));
    table = "/proc/net/tcp";
  } else {
    const struct sockaddr_in6 *f = (const void *)from, *t = (const void *)to;
    uint32_t fw[4], tw[4];
    memcpy(fw, &f->sin6_addr, 16);
    memcpy(tw, &t->sin6_addr, 16);
    snprintf(want_local, sizeof want_local, "%08X%08X%08X%08X:%04X", fw[0], fw[1], fw[2], fw[3],
             (unsigned)ntohs(f->sin6_port));
    snprintf(want_rem, sizeof want_rem, "%08X%08X%08X%08X:%04X", tw[0], tw[1], tw[2], tw[3],
             (unsigned)ntohs(t->sin6_port));
    table = "/proc/net/tcp6";
  }
  FILE *fp = fopen(table, "re");
  if (!fp) return false;
  char line[512];
  bool found = false;
  while (!found && fgets(line, sizeof line, fp)) {
    char local[64], rem[64];
    unsigned long u;
    if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %lu", local, rem, &u) == 3 && strcmp(local, want_local) == 0 &&
        strcmp(rem, want_rem) == 0) {
      *uid = (uid_t)u;
      found = true;
    }
  }
  fclose(fp);
  return found;
}

bool zeus__loopback_peer_uid(int fd, uid_t *uid) {
  struct sockaddr_storage me, peer;
  socklen_t ml = sizeof me, pl = sizeof peer;
  if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 || getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
    return false;
  if (me.ss_family != peer.ss_family || (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) ||
      !is_loopback((const struct sockaddr *)&peer))
    return false;
  return diag_uid(&peer, &me, uid) || proc_uid(&peer, &me, uid);
}

bool zeus__peer_who(int fd, char *who, size_t len, uid_t *uid_out) {
  uid_t uid;
  struct sockaddr_storage peer;
  socklen_t pl = sizeof peer;
  if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0) {
    snprintf(who, len, "an unknown peer");
    return false;
  }
  if (peer.ss_family == AF_UNIX) {
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
      snprintf(who, len, "an unknown local peer");
      return false;
    }
    uid = cr.uid;
  } else if (!zeus__loopback_peer_uid(fd, &uid)) {
    char host[INET6_ADDRSTRLEN] = "?";
    if (peer.ss_family == AF_INET) inet_ntop(AF_INET, &((struct sockaddr_in *)&peer)->sin_addr, host, sizeof host);
    else if (peer.ss_family == AF_INET6)
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&peer)->sin6_addr, host, sizeof host);
    snprintf(who, len, "address %s", host);
    return false;
  }
  snprintf(who, len, "uid %lu", (unsigned long)uid);
  if (uid_out) *uid_out = uid;
  return true;
}
