/*
 * A raw peer of a soft tcp device, for tests that send it frames by hand: the
 * frame header of inec/providers/soft/tcp.c and the handshake it expects.
 * Include after cmocka.h.
 */
#ifndef INEC_TEST_TCP_RAW_PEER_H
#define INEC_TEST_TCP_RAW_PEER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "inec/auth.h"
#include "inec/inec.h"

struct raw_frame {
    uint32_t dst_qpn, src_qpn;
    uint8_t op, has_imm;
    uint16_t status;
    uint32_t imm, rkey, flags;
    uint64_t len, addr;
};

enum { RAW_F_SEND = 2, RAW_F_PING = 8, RAW_F_PONG = 9 };
enum { RAW_FR_PULL = 2, RAW_FR_HELLO = 4, RAW_FR_PULLS = 8 };

/* A socket to the device at addr ("tcp:127.0.0.1:PORT") that proved the
 * secret of secret_path (NULL: this process's own). */
static inline int raw_peer_connect(const char *addr, const char *secret_path, int timeout_ms)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_port = htons((uint16_t)atoi(strrchr(addr, ':') + 1));
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct inec_keyring kr;
    char err[256], peer[INEC_AUTH_NAME];
    assert_int_equal(inec_keyring_get(secret_path, &kr, err, sizeof(err)), 0);
    assert_int_equal(inec_auth_initiate(fd, &kr, "tcp", "tcp:127.0.0.1:9", addr, peer, timeout_ms,
                                        err, sizeof(err)),
                     0);
    inec_keyring_clear(&kr);
    return fd;
}

#endif
