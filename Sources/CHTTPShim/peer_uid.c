// See peer_uid.h.
#include "peer_uid.h"
#include <arpa/inet.h>
#include <stdbool.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static bool is_loopback(const struct sockaddr_storage *a) {
    if (a->ss_family == AF_INET) return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->ss_family != AF_INET6) return false;
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127;
}

int64_t sl_http_peer_uid(int fd) {
    struct sockaddr_storage local, remote;
    socklen_t local_length = sizeof local, remote_length = sizeof remote;
    if (getsockname(fd, (struct sockaddr *)&local, &local_length) != 0 || getpeername(fd, (struct sockaddr *)&remote, &remote_length) != 0) return -1;
    if (!is_loopback(&remote) || local.ss_family != remote.ss_family) return -1;
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } query;
    memset(&query, 0, sizeof query);
    query.header.nlmsg_len = sizeof query;
    query.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    query.header.nlmsg_flags = NLM_F_REQUEST;
    query.request.sdiag_family = (uint8_t)remote.ss_family;
    query.request.sdiag_protocol = IPPROTO_TCP;
    query.request.idiag_states = ~0u;
    query.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    query.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    if (remote.ss_family == AF_INET) {
        const struct sockaddr_in *l = (const struct sockaddr_in *)&local, *r = (const struct sockaddr_in *)&remote;
        query.request.id.idiag_sport = r->sin_port;
        query.request.id.idiag_dport = l->sin_port;
        memcpy(query.request.id.idiag_src, &r->sin_addr, 4);
        memcpy(query.request.id.idiag_dst, &l->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *l = (const struct sockaddr_in6 *)&local, *r = (const struct sockaddr_in6 *)&remote;
        query.request.id.idiag_sport = r->sin6_port;
        query.request.id.idiag_dport = l->sin6_port;
        memcpy(query.request.id.idiag_src, &r->sin6_addr, 16);
        memcpy(query.request.id.idiag_dst, &l->sin6_addr, 16);
    }
    int netlink = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (netlink < 0) return -1;
    // The kernel answers at once; a bound wait all the same, as the server's thread must not block.
    struct timeval wait = {.tv_sec = 1};
    setsockopt(netlink, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int64_t uid = -1;
    union {
        struct nlmsghdr header;
        char bytes[8192];
    } answer;
    if (sendto(netlink, &query, sizeof query, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)sizeof query) {
        ssize_t n = recv(netlink, &answer, sizeof answer, 0);
        if (n >= (ssize_t)NLMSG_LENGTH(sizeof(struct inet_diag_msg)) && NLMSG_OK(&answer.header, (size_t)n)
            && answer.header.nlmsg_type == SOCK_DIAG_BY_FAMILY) {
            const struct inet_diag_msg *found = NLMSG_DATA(&answer.header);
            uid = found->idiag_uid;
        }
    }
    close(netlink);
    return uid;
}

