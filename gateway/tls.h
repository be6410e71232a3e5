/*
 * The gateway's TLS certificate and key (S3, the control API, NBD's
 * STARTTLS): PEM files read whole and checked with GnuTLS (each parses; the
 * key belongs to the certificate) before the servers start, so a wrong file
 * is a clear error at startup rather than a failed handshake later. The
 * certificate file may hold a chain (leaf first); the key must not be
 * encrypted.
 *
 * Handshakes take the certificate through GnuTLS's retrieve function
 * (libmicrohttpd's MHD_OPTION_HTTPS_CERT_CALLBACK; the NBD server's
 * credentials), so
 * gw_tls_reload (SIGHUP) replaces it without a restart: connections already
 * up keep the one they began with. Every certificate loaded stays in memory
 * until gw_tls_free (GnuTLS does not copy what the function hands it, and a
 * session may still use an older one); one process serves one gw_tls.
 */
#ifndef INEC_GATEWAY_TLS_H
#define INEC_GATEWAY_TLS_H

#include <pthread.h>
#include <stddef.h>

#include <gnutls/gnutls.h>
#include <microhttpd.h>

struct gw_tls_cert; /* tls.c: one loaded certificate chain and key */

struct gw_tls {
    char *cert_pem, *key_pem; /* NUL-terminated file contents: the current ones */
    char *cert_path, *key_path;
    pthread_mutex_t lock;      /* certs */
    struct gw_tls_cert *certs; /* newest first: the one new handshakes get */
};

/* Returns 0 or a negative errno with msg naming the file and the reason. */
int gw_tls_load(const char *cert_path, const char *key_path, struct gw_tls *out, char *msg,
                size_t msglen);
void gw_tls_free(struct gw_tls *t); /* frees the contents; t itself is the caller's */

/* Reads the files again: 0, or a negative errno with msg, and the
 * certificate in use unchanged. */
int gw_tls_reload(struct gw_tls *t, char *msg, size_t msglen);

/* The MHD_OPTION_ARRAY (3 items) and the MHD_USE_TLS flag that serve t (the
 * array is empty and flags unchanged for NULL: plain HTTP). */
void gw_tls_mhd_options(const struct gw_tls *t, struct MHD_OptionItem out[3], unsigned *flags);

/* Has cred present t's current certificate. */
void gw_tls_serve(const struct gw_tls *t, gnutls_certificate_credentials_t cred);

#endif
