/*
 * The connection manager of a node process: a TCP listener that hands out
 * QPs of the node's RPC device, as rdma_cm does, to peers that proved the
 * cluster secret.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>

#include "codecs/errf.h"
#include "inec/auth.h"
#include "inec/hostport.h"
#include "inec/log.h"
#include "node/service_internal.h"

/* One exchange per TCP connection, after the client proved the cluster secret
 * (inec/auth.h, ctx "cm"): the client's {"addr","qpn"} line, our
 * {"addr","qpn","id"} or {"error","errno"} line. The QP waits for the
 * client's device to connect to ours (authenticated too): a node never dials
 * an address a peer names. */
static void cm_serve(struct node_service *s, int fd, const char *from)
{
    struct inec_keyring kr;
    char aerr[300] = "", peer[INEC_AUTH_NAME];
    int arc = inec_keyring_get(s->secret, &kr, aerr, sizeof(aerr));
    if (!arc)
        arc = inec_auth_respond(fd, &kr, "cm", s->listen, s->id, peer, 5000, aerr, sizeof(aerr));
    inec_keyring_clear(&kr);
    if (arc) {
        inec_log(INEC_LOG_WARN, "node", "connection refused id=%s from=%s why=%s", s->id, from,
                 aerr);
        return;
    }
    inec_log(INEC_LOG_DEBUG, "node", "peer authenticated id=%s peer=%s from=%s", s->id, peer, from);
    char buf[1024];
    size_t got = 0;
    while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
        ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        got += (size_t)n;
    }
    buf[got] = 0;
    json_t *j = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL), *ans;
    const char *addr = json_string_value(json_object_get(j, "addr"));
    uint32_t qpn = 0;
    const char *dev_addr = NULL;
    int rc =
        addr ? node_service_accept(s, addr, (uint32_t)json_integer_value(json_object_get(j, "qpn")),
                                   &qpn, &dev_addr)
             : -EPROTO;
    if (rc)
        ans = json_pack("{s:s,s:i}", "error", strerror(-rc), "errno", -rc);
    else
        ans = json_pack("{s:s,s:i,s:s}", "addr", dev_addr, "qpn", (int)qpn, "id", s->id);
    char *text = json_dumps(ans, JSON_COMPACT);
    if (text) {
        size_t len = strlen(text);
        text[len] = '\n'; /* overwrites the NUL; send exactly len + 1 */
        if (send(fd, text, len + 1, MSG_NOSIGNAL) < 0)
            inec_log(INEC_LOG_WARN, "node", "cm reply failed err=%s", strerror(errno));
    }
    free(text);
    json_decref(ans);
    json_decref(j);
}

void *node_cm_main(void *arg)
{
    pthread_setname_np(pthread_self(), "node-cm");
    struct node_service *s = arg;
    while (!atomic_load(&s->stop)) {
        struct sockaddr_storage sa = {0};
        socklen_t sl = sizeof(sa);
        int fd = accept4(s->cm_fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break; /* shut down */
        }
        char from[64];
        inec_sockaddr_str((struct sockaddr *)&sa, true, from, sizeof(from));
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        cm_serve(s, fd, from);
        close(fd);
    }
    return NULL;
}

int node_cm_listen(struct node_service *s, const char *listen_addr, char *err, size_t errlen)
{
    int fd = inec_tcp_listen_bound(listen_addr, 64, s->listen, sizeof(s->listen), err, errlen);
    if (fd < 0)
        return fd;
    char host[256], port[8], dev_listen[300];
    inec_hostport_split(s->listen, host, sizeof(host), port, sizeof(port));
    inec_hostport_join(host, 0, dev_listen, sizeof(dev_listen));
    s->cm_fd = fd;
    int n = snprintf(s->dev_options, sizeof(s->dev_options),
                     "transport=tcp,listen=%s,timeout_ms=%d", dev_listen, s->timeout_ms);
    if (s->heartbeat_ms > 0 && n > 0 && (size_t)n < sizeof(s->dev_options))
        n += snprintf(s->dev_options + n, sizeof(s->dev_options) - (size_t)n, ",heartbeat_ms=%d",
                      s->heartbeat_ms);
    if (s->secret[0] && n > 0 && (size_t)n < sizeof(s->dev_options))
        snprintf(s->dev_options + n, sizeof(s->dev_options) - (size_t)n, ",secret=%s", s->secret);
    return 0;
}
