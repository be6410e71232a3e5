/* Loading and checking the gateway's certificate and key (tls.h). */
#include "gateway/tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/gnutls.h>

#define PEM_MAX (1u << 20)

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

int gw_tls_load(const char *cert_path, const char *key_path, struct gw_tls *out, char *msg,
                size_t msglen)
{
    *out = (struct gw_tls){0};
    if (!cert_path || !key_path) {
        snprintf(msg, msglen, "TLS needs both a certificate (--tls-cert) and a key (--tls-key)");
        return -EINVAL;
    }
    int rc = read_pem("certificate", cert_path, &out->cert_pem, msg, msglen);
    if (rc == 0)
        rc = read_pem("key", key_path, &out->key_pem, msg, msglen);
    if (rc == 0 && !strstr(out->cert_pem, "-----BEGIN CERTIFICATE-----")) {
        snprintf(msg, msglen, "the TLS certificate %s is not a PEM certificate", cert_path);
        rc = -EINVAL;
    } else if (rc == 0 && !strstr(out->key_pem, "PRIVATE KEY-----")) {
        snprintf(msg, msglen, "the TLS key %s is not a PEM private key", key_path);
        rc = -EINVAL;
    }
    if (rc) {
        gw_tls_free(out);
        return rc;
    }
    /* The same load libmicrohttpd does, here where its error can be told. */
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) < 0) {
        gw_tls_free(out);
        return -ENOMEM;
    }
    gnutls_datum_t cert = {(unsigned char *)out->cert_pem, (unsigned)strlen(out->cert_pem)};
    gnutls_datum_t key = {(unsigned char *)out->key_pem, (unsigned)strlen(out->key_pem)};
    int g = gnutls_certificate_set_x509_key_mem2(cred, &cert, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(cred);
    if (g < 0) {
        snprintf(msg, msglen, "the TLS certificate %s and key %s cannot be used: %s", cert_path,
                 key_path, gnutls_strerror(g));
        gw_tls_free(out);
        return -EINVAL;
    }
    return 0;
}

void gw_tls_free(struct gw_tls *t)
{
    if (!t)
        return;
    free(t->cert_pem);
    free(t->key_pem);
    *t = (struct gw_tls){0};
}

void gw_tls_mhd_options(const struct gw_tls *t, struct MHD_OptionItem out[3], unsigned *flags)
{
    out[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, t ? t->cert_pem : NULL};
    out[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, t ? t->key_pem : NULL};
    out[2] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    if (!t)
        out[0].option = MHD_OPTION_END;
    else
        *flags |= MHD_USE_TLS;
}
