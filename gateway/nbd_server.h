/*
 * The NBD server: every volume (volume.h) as an export, to block clients
 * (qemu, nbdcopy, nbd-client, fio's nbd engine, libnbd) over TCP and a Unix
 * socket. The protocol is NBD's newstyle fixed handshake
 * (github.com/NetworkBlockDevice/nbd, doc/proto.md).
 *
 * What it speaks: NBD_OPT_EXPORT_NAME, INFO, GO (with NBD_INFO_EXPORT, NAME,
 * BLOCK_SIZE: minimum 1, preferred 4096, maximum payload 8 MiB), LIST,
 * STRUCTURED_REPLY, ABORT, STARTTLS (GnuTLS: TLS-PSK, the PSK identity a
 * volume's name and the key its secret; or, when configured, the gateway's
 * X.509 certificate, as S3's HTTPS uses).
 * LIST_META_CONTEXT and SET_META_CONTEXT with the one context
 * "base:allocation". Commands READ, WRITE (FUA), FLUSH, TRIM, WRITE_ZEROES
 * (NO_HOLE), BLOCK_STATUS (REQ_ONE; stripes with data are data, the others
 * hole and zero; at most 4096 stripes per answer), DISC; the others answer
 * NBD_EINVAL. Up to 16 requests of a connection run at once.
 *
 * Access: the export name is "NAME" for a volume without a secret, else
 * "NAME/SECRET"; a wrong or missing secret is answered as an unknown export
 * (NBD_REP_ERR_UNKNOWN), so names cannot be probed through it. After
 * STARTTLS with a PSK the key proved the secret: the export is "NAME" of the
 * PSK identity, and no other volume. TLS with the certificate proves the
 * server only: the export name still carries the secret. LIST names the volumes (not their
 * secrets). GnuTLS writes to the socket with plain send(): the process must ignore SIGPIPE (inec
 * server and gateway do).
 *
 * Durability: a write is acknowledged only when it is durable on the pool's
 * write quorum (gw_volume_write), so FUA is implied, FLUSH only waits for the
 * requests received before it, and NBD_FLAG_CAN_MULTI_CONN holds.
 *
 * Bad input: an option longer than 64 KiB, a wrong magic, more than 64
 * options, or a handshake slower than 30 s closes that connection (logged);
 * a request beyond the export or above the maximum payload gets an NBD error
 * and the connection goes on (a write of more than 64 MiB closes it). Other connections never
 * notice.
 */
#ifndef INEC_GATEWAY_NBD_SERVER_H
#define INEC_GATEWAY_NBD_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct gw_objects;
struct gw_nbd_server;
struct gw_tls;

#define GW_NBD_DEFAULT_LISTEN "127.0.0.1:10809"
#define GW_NBD_MAX_PAYLOAD    (8u << 20)

struct gw_nbd_config {
    const char *listen;       /* "HOST:PORT" (port 0 picks one), NULL or "": no TCP */
    const char *unix_path;    /* a Unix socket path, NULL or "": none */
    const struct gw_tls *tls; /* the certificate STARTTLS may present (tls.h), NULL: PSK only */
    bool tls_required;        /* TCP clients must STARTTLS before anything else (the Unix
                               * socket is local: its file's mode guards it) */
};

int gw_nbd_server_start(const struct gw_nbd_config *cfg, struct gw_objects *o,
                        struct gw_nbd_server **out, char *msg, size_t msglen);
uint16_t gw_nbd_server_port(const struct gw_nbd_server *s); /* 0: no TCP */
/* Stops accepting, ends every connection, removes the Unix socket. */
void gw_nbd_server_stop(struct gw_nbd_server *s); /* NULL is a no-op */

#endif
