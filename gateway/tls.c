/* Loading and checking the gateway's certificate and key (tls.h). */
#include "gateway/tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#define PEM_MAX   (1u << 20)
#define CHAIN_MAX 16 /* certificates in the file: the leaf and its intermediates */

static int read_pem(const char *what, const char *path, char **out, char *msg, size_t msglen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        snprintf(msg, msglen, "cannot read the TLS %s %s: %s", what, path, strerror(e));
        return -e;
    }
    char *buf = malloc(PEM_MAX + 1);
    size_t n = buf ? fread(buf, 1, PEM_MAX + 1, f) : 0;
    int err = ferror(f);
    fclose(f);
    if (!buf)
        return -ENOMEM;
    if (err || n == 0 || n > PEM_MAX) {
        snprintf(msg, msglen, "the TLS %s %s is %s", what, path,
                 err ? "unreadable"
                 : n ? "larger than 1 MiB"
                     : "empty");
        free(buf);
        return -EINVAL;
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

struct gw_tls_cert {
    struct gw_tls_cert *next;
    gnutls_pcert_st pcert[CHAIN_MAX];
    unsigned npcert;
    gnutls_privkey_t key;
};

/* The gw_tls the retrieve function serves: its signature has no argument
 * of ours. */
static struct gw_tls *serving;

static void cert_free(struct gw_tls_cert *c)
{
    for (unsigned i = 0; i < c->npcert; i++)
        gnutls_pcert_deinit(&c->pcert[i]);
    gnutls_privkey_deinit(c->key);
    free(c);
}

/* Checks the pair as libmicrohttpd would have loaded it (each parses; the
 * key belongs to the certificate), here where the error can be told, and
 * imports it for handshakes into *out. */
static int import(const char *cert_path, const char *key_path, const char *cert_pem,
                  const char *key_pem, struct gw_tls_cert **out, char *msg, size_t msglen)
{
    gnutls_datum_t cert = {(unsigned char *)cert_pem, (unsigned)strlen(cert_pem)};
    gnutls_datum_t key = {(unsigned char *)key_pem, (unsigned)strlen(key_pem)};
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0)
        return -ENOMEM;
    int g = gnutls_certificate_set_x509_key_mem2(cred, &cert, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(cred);
    struct gw_tls_cert *c = g >= 0 ? calloc(1, sizeof(*c)) : NULL;
    if (g >= 0 && !c)
        return -ENOMEM;
    if (c) {
        c->npcert = CHAIN_MAX;
        g = gnutls_pcert_list_import_x509_raw(c->pcert, &c->npcert, &cert, GNUTLS_X509_FMT_PEM, 0);
        if (g < 0)
            c->npcert = 0;
        else if ((g = gnutls_privkey_init(&c->key)) >= 0)
            g = gnutls_privkey_import_x509_raw(c->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    }
    if (g < 0) {
        snprintf(msg, msglen, "the TLS certificate %s and key %s cannot be used: %s", cert_path,
                 key_path, gnutls_strerror(g));
        if (c)
            cert_free(c);
        return -EINVAL;
    }
    *out = c;
    return 0;
}

/* Reads, checks and imports both files into *cert_pem, *key_pem and *out. */
static int load(const char *cert_path, const char *key_path, char **cert_pem, char **key_pem,
                struct gw_tls_cert **out, char *msg, size_t msglen)
{
    *cert_pem = *key_pem = NULL;
    int rc = read_pem("certificate", cert_path, cert_pem, msg, msglen);
    if (rc == 0)
        rc = read_pem("key", key_path, key_pem, msg, msglen);
    if (rc == 0 && !strstr(*cert_pem, "-----BEGIN CERTIFICATE-----")) {
        snprintf(msg, msglen, "the TLS certificate %s is not a PEM certificate", cert_path);
        rc = -EINVAL;
    } else if (rc == 0 && !strstr(*key_pem, "PRIVATE KEY-----")) {
        snprintf(msg, msglen, "the TLS key %s is not a PEM private key", key_path);
        rc = -EINVAL;
    }
    if (rc == 0)
        rc = import(cert_path, key_path, *cert_pem, *key_pem, out, msg, msglen);
    if (rc) {
        free(*cert_pem);
        free(*key_pem);
        *cert_pem = *key_pem = NULL;
    }
    return rc;
}

int gw_tls_load(const char *cert_path, const char *key_path, struct gw_tls *out, char *msg,
                size_t msglen)
{
    *out = (struct gw_tls){0};
    pthread_mutex_init(&out->lock, NULL);
    if (!cert_path || !key_path) {
        snprintf(msg, msglen, "TLS needs both a certificate (--tls-cert) and a key (--tls-key)");
        return -EINVAL;
    }
    int rc = load(cert_path, key_path, &out->cert_pem, &out->key_pem, &out->certs, msg, msglen);
    if (rc == 0 && (!(out->cert_path = strdup(cert_path)) || !(out->key_path = strdup(key_path))))
        rc = -ENOMEM;
    if (rc)
        gw_tls_free(out);
    return rc;
}

int gw_tls_reload(struct gw_tls *t, char *msg, size_t msglen)
{
    char *cert_pem, *key_pem;
    struct gw_tls_cert *c;
    int rc = load(t->cert_path, t->key_path, &cert_pem, &key_pem, &c, msg, msglen);
    if (rc)
        return rc;
    pthread_mutex_lock(&t->lock);
    c->next = t->certs;
    t->certs = c;
    pthread_mutex_unlock(&t->lock);
    free(t->cert_pem);
    free(t->key_pem);
    t->cert_pem = cert_pem;
    t->key_pem = key_pem;
    return 0;
}

void gw_tls_free(struct gw_tls *t)
{
    if (!t)
        return;
    while (t->certs) {
        struct gw_tls_cert *next = t->certs->next;
        cert_free(t->certs);
        t->certs = next;
    }
    pthread_mutex_destroy(&t->lock); /* a zeroed one (never loaded) is an unlocked one */
    if (serving == t)
        serving = NULL;
    free(t->cert_pem);
    free(t->key_pem);
    free(t->cert_path);
    free(t->key_path);
    *t = (struct gw_tls){0};
}

/* GnuTLS's question in a handshake: which certificate. The newest; what it
 * hands out stays ours (see tls.h). */
static int retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                    const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                    gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *pkey)
{
    (void)session, (void)req_ca_rdn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
    struct gw_tls *t = serving;
    if (!t)
        return -1;
    pthread_mutex_lock(&t->lock);
    struct gw_tls_cert *c = t->certs;
    pthread_mutex_unlock(&t->lock);
    if (!c)
        return -1;
    *pcert = c->pcert;
    *pcert_length = c->npcert;
    *pkey = c->key;
    return 0;
}

void gw_tls_mhd_options(const struct gw_tls *t, struct MHD_OptionItem out[3], unsigned *flags)
{
    out[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)retrieve};
    out[1] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    out[2] = out[1];
    if (!t) {
        out[0].option = MHD_OPTION_END;
        return;
    }
    serving = (struct gw_tls *)t;
    *flags |= MHD_USE_TLS;
}

void gw_tls_serve(const struct gw_tls *t, gnutls_certificate_credentials_t cred)
{
    serving = (struct gw_tls *)t;
    gnutls_certificate_set_retrieve_function2(cred, retrieve);
}
