/*
 * The gateway's TLS certificate and key (S3 and the control API): PEM files
 * read whole and checked with GnuTLS (each parses; the key belongs to the
 * certificate) before the servers start, so a wrong file is a clear error at startup rather than a
 * failed handshake later. libmicrohttpd serves HTTPS with them
 * (MHD_USE_TLS, MHD_OPTION_HTTPS_MEM_CERT/KEY). The certificate file may
 * hold a chain (leaf first); the key must not be encrypted.
 */
#ifndef INEC_GATEWAY_TLS_H
#define INEC_GATEWAY_TLS_H

#include <stddef.h>

#include <microhttpd.h>

struct gw_tls {
    char *cert_pem, *key_pem; /* NUL-terminated file contents */
};

/* Returns 0 or a negative errno with msg naming the file and the reason. */
int gw_tls_load(const char *cert_path, const char *key_path, struct gw_tls *out, char *msg,
                size_t msglen);
void gw_tls_free(struct gw_tls *t); /* frees the contents; t itself is the caller's */

/* The MHD_OPTION_ARRAY (3 items) and the MHD_USE_TLS flag that serve t (the
 * array is empty and flags unchanged for NULL: plain HTTP). */
void gw_tls_mhd_options(const struct gw_tls *t, struct MHD_OptionItem out[3], unsigned *flags);

#endif
