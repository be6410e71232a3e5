/* AWS Signature Version 4 verification for S3 (see sigv4.h). */
#include "gateway/sigv4.h"

#include "gateway/checksum.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>

#define ALGORITHM                "AWS4-HMAC-SHA256"
#define UNSIGNED                 "UNSIGNED-PAYLOAD"
#define STREAMING                "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define STREAMING_UNSIGNED       "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
#define STREAMING_SIGNED_TRAILER "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
#define EMPTY_SHA256             "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define MAX_CANONICAL            (256 * 1024) /* bounds every buffer a hostile request can grow */
#define MAX_QUERY_PARAMS         1024
#define MAX_CHUNK_HEADER         160

/* ---- crypto and hex ---- */

/* Fetched once: OpenSSL 3 looks an algorithm up by name (a provider store
 * lookup under a lock) on every HMAC() and every EVP_sha256() digest, and the
 * five HMACs of each signature were then 11% of the samples of `inec bench s3`
 * (4 KiB, 16 clients: the clients' signing and the gateway's checks). Each
 * thread keeps an HMAC-SHA256
 * context, keyed afresh for every use, and the last signing key it derived:
 * a key is one secret's for one day and region, so a connection's requests
 * share it, as the SDKs' signers do. */
struct sigv4_thread {
    EVP_MAC_CTX *mac;
    char scope[GW_SIGV4_SECRET_MAX + 80]; /* "secret NUL date NUL region" of key */
    size_t scope_len;                     /* 0: no key yet */
    uint8_t key[32];
};

static EVP_MD *sha256_md;
static EVP_MAC *hmac_mac;
static pthread_key_t thread_key;
static bool thread_keyed;
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;

static void thread_free(void *arg)
{
    struct sigv4_thread *t = arg;
    EVP_MAC_CTX_free(t->mac);
    OPENSSL_cleanse(t, sizeof(*t));
    free(t);
}

static void crypto_setup(void)
{
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    hmac_mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    thread_keyed = pthread_key_create(&thread_key, thread_free) == 0;
}

/* The calling thread's state; NULL when it cannot have one (then every
 * HMAC is a one-shot and no key is kept). */
static struct sigv4_thread *thread_state(void)
{
    pthread_once(&crypto_once, crypto_setup);
    if (!hmac_mac || !thread_keyed)
        return NULL;
    struct sigv4_thread *t = pthread_getspecific(thread_key);
    if (t)
        return t;
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0),
                           OSSL_PARAM_construct_end()};
    if (!(t = calloc(1, sizeof(*t))) || !(t->mac = EVP_MAC_CTX_new(hmac_mac)) ||
        !EVP_MAC_CTX_set_params(t->mac, params) || pthread_setspecific(thread_key, t)) {
        if (t)
            EVP_MAC_CTX_free(t->mac);
        free(t);
        return NULL;
    }
    return t;
}

static const EVP_MD *sha256_alg(void)
{
    pthread_once(&crypto_once, crypto_setup);
    return sha256_md ? sha256_md : EVP_sha256();
}

static void sha256(const void *data, size_t len, uint8_t out[32])
{
    unsigned int n = 32;
    EVP_Digest(data, len, out, &n, sha256_alg(), NULL);
}

static void hmac(const uint8_t *key, size_t klen, const void *data, size_t len, uint8_t out[32])
{
    struct sigv4_thread *t = thread_state();
    size_t n = 0;
    if (t && EVP_MAC_init(t->mac, key, klen, NULL) && EVP_MAC_update(t->mac, data, len) &&
        EVP_MAC_final(t->mac, out, &n, 32) && n == 32)
        return;
    unsigned int m = 32; /* without a context of its own: the one-shot, slower */
    HMAC(EVP_sha256(), key, (int)klen, data, len, out, &m);
}

static void hex(const uint8_t *in, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * len] = '\0';
}

/* 64 lowercase hex digits, as AWS writes signatures and payload hashes. */
static bool is_hex64(const char *s, size_t len)
{
    if (len != 64)
        return false;
    for (size_t i = 0; i < 64; i++)
        if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
            return false;
    return true;
}

static void unhex32(const char *s, uint8_t out[32])
{
    for (int i = 0; i < 32; i++)
        out[i] = (uint8_t)(OPENSSL_hexchar2int((unsigned char)s[2 * i]) << 4 |
                           OPENSSL_hexchar2int((unsigned char)s[2 * i + 1]));
}

static bool same_signature(const char *a, const char *b)
{
    return CRYPTO_memcmp(a, b, 64) == 0;
}

/* ---- a bounded growable string ---- */

struct buf {
    char *p;
    size_t len, cap;
    bool bad; /* out of memory or over MAX_CANONICAL: the result is unusable */
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->bad)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = cap <= MAX_CANONICAL ? realloc(b->p, cap) : NULL;
        if (!p) {
            b->bad = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* AWS UriEncode: everything but A-Z a-z 0-9 - _ . ~ as %XX (uppercase). */
static void put_encoded(struct buf *b, const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isalnum(s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.' || s[i] == '~') {
            put(b, (const char *)&s[i], 1);
        } else {
            char e[4];
            snprintf(e, sizeof(e), "%%%02X", s[i]);
            put(b, e, 3);
        }
    }
}

/* Percent-decodes s[0, n) into out (which holds n bytes); an invalid escape
 * stays literal, as it is for any byte that needed no escape. */
static size_t decode(const char *s, size_t n, uint8_t *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && OPENSSL_hexchar2int((unsigned char)s[i + 1]) >= 0 &&
            OPENSSL_hexchar2int((unsigned char)s[i + 2]) >= 0) {
            out[o++] = (uint8_t)(OPENSSL_hexchar2int((unsigned char)s[i + 1]) << 4 |
                                 OPENSSL_hexchar2int((unsigned char)s[i + 2]));
            i += 2;
        } else {
            out[o++] = (uint8_t)s[i];
        }
    }
    return o;
}

/* Decode then encode, so "%24", "$" and "%2a" all canonicalise alike. */
static void put_reencoded(struct buf *b, const char *s, size_t n)
{
    uint8_t stack[256];
    uint8_t *tmp = n <= sizeof(stack) ? stack : malloc(n);
    if (!tmp) {
        b->bad = true;
        return;
    }
    put_encoded(b, tmp, decode(s, n, tmp));
    if (tmp != stack)
        free(tmp);
}

/* ---- query parameters ---- */

struct param {
    char *key, *value; /* canonical (re-encoded) forms */
    char *raw_key;     /* decoded, NUL-terminated, for the X-Amz-* lookups */
    char *raw_value;
};

struct query {
    struct param *v;
    int n;
};

static void query_free(struct query *q)
{
    for (int i = 0; i < q->n; i++) {
        free(q->v[i].key);
        free(q->v[i].value);
        free(q->v[i].raw_key);
        free(q->v[i].raw_value);
    }
    free(q->v);
}

static char *canonical(const char *s, size_t n)
{
    struct buf b = {0};
    put_reencoded(&b, s, n);
    puts_(&b, "");
    if (b.bad) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static char *decoded(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (out)
        out[decode(s, n, (uint8_t *)out)] = '\0';
    return out;
}

static int query_parse(const char *s, struct query *q)
{
    q->v = NULL;
    q->n = 0;
    if (!s)
        return 0;
    while (*s) {
        const char *amp = strchr(s, '&');
        size_t len = amp ? (size_t)(amp - s) : strlen(s);
        if (len > 0) {
            if (q->n == MAX_QUERY_PARAMS)
                return -E2BIG;
            if (!(q->n & (q->n - 1))) {
                struct param *v = realloc(q->v, sizeof(*v) * (size_t)(q->n ? 2 * q->n : 1));
                if (!v)
                    return -ENOMEM;
                q->v = v;
            }
            const char *eq = memchr(s, '=', len);
            size_t klen = eq ? (size_t)(eq - s) : len;
            const char *val = eq ? eq + 1 : s + len;
            size_t vlen = eq ? len - klen - 1 : 0;
            struct param *p = &q->v[q->n++];
            p->key = canonical(s, klen);
            p->value = canonical(val, vlen);
            p->raw_key = decoded(s, klen);
            p->raw_value = decoded(val, vlen);
            if (!p->key || !p->value || !p->raw_key || !p->raw_value)
                return -ENOMEM;
        }
        s += len + (amp != NULL);
    }
    return 0;
}

static const char *query_get(const struct query *q, const char *key)
{
    for (int i = 0; i < q->n; i++)
        if (strcmp(q->v[i].raw_key, key) == 0)
            return q->v[i].raw_value;
    return NULL;
}

static int by_key_value(const void *a, const void *b)
{
    const struct param *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->value, y->value);
}

/* ---- the canonical request ---- */

static void put_path(struct buf *b, const char *path)
{
    if (!path || !*path) {
        puts_(b, "/");
        return;
    }
    /* Segment by segment, so an encoded "%2F" inside a key stays a character
     * of the key and never becomes a separator. */
    const char *s = path;
    for (;;) {
        const char *slash = strchr(s, '/');
        size_t n = slash ? (size_t)(slash - s) : strlen(s);
        put_reencoded(b, s, n);
        if (!slash)
            break;
        puts_(b, "/");
        s = slash + 1;
    }
}

/* Header value with leading/trailing blanks trimmed and inner runs folded. */
static void put_header_value(struct buf *b, const char *v)
{
    if (!v)
        return;
    while (*v == ' ' || *v == '\t')
        v++;
    bool space = false;
    for (; *v; v++) {
        if (*v == ' ' || *v == '\t') {
            space = true;
            continue;
        }
        if (space)
            puts_(b, " ");
        space = false;
        put(b, v, 1);
    }
}

static bool valid_signed_headers(const char *s)
{
    if (!*s || *s == ';')
        return false;
    for (const char *p = s; *p; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' ||
              (*p == ';' && p[1] && p[1] != ';')))
            return false;
    return true;
}

static bool signs(const char *signed_headers, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = signed_headers; p; p = strchr(p, ';'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, n) == 0 && (p[n] == ';' || !p[n]))
            return true;
    return false;
}

struct unsigned_walk {
    const char *signed_headers;
    bool presigned;
    bool content_type; /* a Content-Type is present but not signed */
    char first[64];    /* the first header present but not signed that must be */
};

static void unsigned_one(void *arg, const char *name, const char *value)
{
    (void)value;
    struct unsigned_walk *w = arg;
    if (w->first[0])
        return;
    bool must = strncasecmp(name, "x-amz-", 6) == 0 || strcasecmp(name, "content-md5") == 0 ||
                strcasecmp(name, "content-type") == 0;
    char lower[128];
    size_t n = strlen(name);
    if (!must || n >= sizeof(lower)) {
        if (must)
            snprintf(w->first, sizeof(w->first), "%.60s", name);
        return;
    }
    for (size_t i = 0; i <= n; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    if (signs(w->signed_headers, lower))
        return;
    /* Browsers and HTTP libraries add a Content-Type to a presigned PUT on
     * their own (S3 accepts that); it is then ignored, not refused. */
    if (w->presigned && strcmp(lower, "content-type") == 0)
        w->content_type = true;
    else
        snprintf(w->first, sizeof(w->first), "%.60s", lower);
}

/* The first header that must be signed but is not, or "" (unsigned_one). */
static void first_unsigned(const struct gw_sigv4_request *req, const char *signed_headers,
                           struct gw_sigv4_auth *auth, char out[64])
{
    struct unsigned_walk w = {signed_headers, auth->presigned, false, ""};
    if (req->each)
        req->each(req->header_arg, unsigned_one, &w);
    auth->unsigned_content_type = w.content_type;
    memcpy(out, w.first, sizeof(w.first));
}

static int canonical_request(const struct gw_sigv4_request *req, struct query *q, bool presigned,
                             const char *signed_headers, const char *payload, struct buf *b)
{
    puts_(b, req->method);
    puts_(b, "\n");
    put_path(b, req->path);
    puts_(b, "\n");
    if (q->n > 1)
        qsort(q->v, (size_t)q->n, sizeof(*q->v), by_key_value);
    bool first = true;
    for (int i = 0; i < q->n; i++) {
        if (presigned && strcmp(q->v[i].raw_key, "X-Amz-Signature") == 0)
            continue;
        if (!first)
            puts_(b, "&");
        first = false;
        puts_(b, q->v[i].key);
        puts_(b, "=");
        puts_(b, q->v[i].value);
    }
    puts_(b, "\n");
    char name[128];
    for (const char *p = signed_headers; p;) {
        const char *semi = strchr(p, ';');
        size_t n = semi ? (size_t)(semi - p) : strlen(p);
        if (n >= sizeof(name))
            return -EINVAL;
        memcpy(name, p, n);
        name[n] = '\0';
        puts_(b, name);
        puts_(b, ":");
        put_header_value(b, req->header(req->header_arg, name));
        puts_(b, "\n");
        p = semi ? semi + 1 : NULL;
    }
    puts_(b, "\n");
    puts_(b, signed_headers);
    puts_(b, "\n");
    puts_(b, payload);
    return b->bad ? -E2BIG : 0;
}

/* ---- dates ---- */

/* "YYYYMMDDTHHMMSSZ" to unix seconds; -1 when malformed. */
static int64_t parse_amz_date(const char *s)
{
    struct tm tm = {0};
    if (!s || strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
        return -1;
    for (int i = 0; i < 15; i++)
        if (i != 8 && !isdigit((unsigned char)s[i]))
            return -1;
    tm.tm_year = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0') - 1900;
    tm.tm_mon = (s[4] - '0') * 10 + (s[5] - '0') - 1;
    tm.tm_mday = (s[6] - '0') * 10 + (s[7] - '0');
    tm.tm_hour = (s[9] - '0') * 10 + (s[10] - '0');
    tm.tm_min = (s[11] - '0') * 10 + (s[12] - '0');
    tm.tm_sec = (s[13] - '0') * 10 + (s[14] - '0');
    if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
        tm.tm_sec > 60)
        return -1;
    return (int64_t)timegm(&tm);
}

/* An RFC 1123 Date header ("Fri, 24 May 2013 00:00:00 GMT") as "YYYYMMDDTHHMMSSZ". */
static bool http_date_to_amz(const char *s, char out[17])
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    char mon[4];
    int day, year, hh, mm, ss, used = 0;
    if (!s ||
        sscanf(s, "%*3s, %2d %3s %4d %2d:%2d:%2d GMT%n", &day, mon, &year, &hh, &mm, &ss, &used) !=
            6 ||
        !used || s[used])
        return false;
    const char *m = strstr(months, mon);
    if (!m || (m - months) % 3 || strlen(mon) != 3 || year < 1970 || year > 9999 || day < 1 ||
        day > 31 || hh < 0 || hh > 23 || mm < 0 || mm > 59 || ss < 0 || ss > 60)
        return false;
    char tmp[64];
    snprintf(tmp, sizeof(tmp), "%04u%02u%02uT%02u%02u%02uZ", (unsigned)year % 10000u,
             (unsigned)(m - months) / 3 + 1, (unsigned)day % 100u, (unsigned)hh % 100u,
             (unsigned)mm % 100u, (unsigned)ss % 100u);
    memcpy(out, tmp, 17);
    return true;
}

/* ---- the verdict ---- */

struct sig_parts {
    char credential[256];
    char signed_headers[1024];
    char signature[65];
};

/* "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..." */
static enum gw_s3_err parse_authorization(const char *h, struct sig_parts *sp, char *msg,
                                          size_t msglen)
{
    size_t alen = strlen(ALGORITHM);
    if (strncmp(h, ALGORITHM, alen) != 0 || (h[alen] != ' ' && h[alen] != '\t'))
        return gw_s3_errorf(GW_S3_AUTH_HEADER_MALFORMED, msg, msglen,
                            "the authorization header must use " ALGORITHM);
    bool have[3] = {false, false, false};
    const char *p = h + alen;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        static const char *const keys[] = {"Credential=", "SignedHeaders=", "Signature="};
        char *dst[] = {sp->credential, sp->signed_headers, sp->signature};
        size_t cap[] = {sizeof(sp->credential), sizeof(sp->signed_headers), sizeof(sp->signature)};
        int k = -1;
        for (int i = 0; i < 3; i++)
            if (strncmp(p, keys[i], strlen(keys[i])) == 0)
                k = i;
        if (k < 0 || have[k])
            return gw_s3_errorf(GW_S3_AUTH_HEADER_MALFORMED, msg, msglen,
                                "the authorization header has an unexpected or repeated component "
                                "\"%.*s\"",
                                (int)(n > 40 ? 40 : n), p);
        size_t klen = strlen(keys[k]);
        if (n - klen >= cap[k])
            return gw_s3_errorf(GW_S3_AUTH_HEADER_MALFORMED, msg, msglen, "%.*s is too long",
                                (int)klen - 1, keys[k]);
        memcpy(dst[k], p + klen, n - klen);
        dst[k][n - klen] = '\0';
        have[k] = true;
        p += n;
    }
    if (!have[0] || !have[1] || !have[2])
        return gw_s3_errorf(
            GW_S3_AUTH_HEADER_MALFORMED, msg, msglen,
            "the authorization header needs Credential, SignedHeaders and Signature");
    return GW_S3_OK;
}

/* "AKID/20130524/us-east-1/s3/aws4_request" */
static enum gw_s3_err parse_credential(const char *cred, enum gw_s3_err malformed,
                                       const struct gw_sigv4_config *cfg,
                                       struct gw_sigv4_auth *auth, char date[9], char region[64],
                                       char *msg, size_t msglen)
{
    const char *parts[5];
    size_t lens[5];
    const char *p = cred;
    for (int i = 0; i < 5; i++) {
        const char *slash = i < 4 ? strchr(p, '/') : NULL;
        if (i < 4 && !slash)
            return gw_s3_errorf(malformed, msg, msglen,
                                "the credential \"%.64s\" is not key/date/region/s3/aws4_request",
                                cred);
        parts[i] = p;
        lens[i] = slash ? (size_t)(slash - p) : strlen(p);
        p = slash ? slash + 1 : p;
    }
    if (lens[0] == 0 || lens[0] >= sizeof(auth->access_key))
        return gw_s3_errorf(malformed, msg, msglen,
                            "the access key in the credential is empty or long");
    if (lens[1] != 8 || strspn(parts[1], "0123456789") < 8)
        return gw_s3_errorf(malformed, msg, msglen, "the credential date \"%.*s\" is not YYYYMMDD",
                            (int)(lens[1] > 16 ? 16 : lens[1]), parts[1]);
    if (lens[3] != 2 || strncmp(parts[3], "s3", 2) != 0)
        return gw_s3_errorf(malformed, msg, msglen,
                            "the credential is for service \"%.*s\", not s3",
                            (int)(lens[3] > 32 ? 32 : lens[3]), parts[3]);
    if (strcmp(parts[4], "aws4_request") != 0)
        return gw_s3_errorf(malformed, msg, msglen, "the credential must end in aws4_request");
    if (lens[2] == 0 || lens[2] >= 64)
        return gw_s3_errorf(malformed, msg, msglen, "the credential region is empty or long");
    if (cfg->region &&
        (lens[2] != strlen(cfg->region) || strncmp(parts[2], cfg->region, lens[2]) != 0))
        return gw_s3_errorf(malformed, msg, msglen, "the region '%.*s' is wrong; expecting '%s'",
                            (int)(lens[2] > 32 ? 32 : lens[2]), parts[2], cfg->region);
    memcpy(auth->access_key, parts[0], lens[0]);
    auth->access_key[lens[0]] = '\0';
    memcpy(date, parts[1], 8);
    date[8] = '\0';
    memcpy(region, parts[2], lens[2]);
    region[lens[2]] = '\0';
    return GW_S3_OK;
}

static void signing_key(const char *secret, const char *date, const char *region, uint8_t out[32])
{
    struct sigv4_thread *t = thread_state();
    char scope[sizeof(t->scope)];
    int sl = snprintf(scope, sizeof(scope), "%s%c%s%c%s", secret, 0, date, 0, region);
    bool keep = t && sl > 0 && (size_t)sl < sizeof(scope);
    if (keep && t->scope_len == (size_t)sl && memcmp(t->scope, scope, (size_t)sl) == 0) {
        memcpy(out, t->key, 32);
        OPENSSL_cleanse(scope, sizeof(scope));
        return;
    }
    char k[GW_SIGV4_SECRET_MAX + 8];
    int n = snprintf(k, sizeof(k), "AWS4%s", secret);
    uint8_t a[32], b[32];
    hmac((const uint8_t *)k, (size_t)n, date, strlen(date), a);
    hmac(a, 32, region, strlen(region), b);
    hmac(b, 32, "s3", 2, a);
    hmac(a, 32, "aws4_request", 12, out);
    if (keep) {
        memcpy(t->scope, scope, (size_t)sl);
        t->scope_len = (size_t)sl;
        memcpy(t->key, out, 32);
    }
    OPENSSL_cleanse(scope, sizeof(scope));
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(a, sizeof(a));
    OPENSSL_cleanse(b, sizeof(b));
}

/* The signature of a request dated amz_date ("YYYYMMDDTHHMMSSZ"): what the
 * verifier recomputes and the signer sends. Also returns the signing key,
 * which starts an aws-chunked body's signature chain. */
static int signature(const struct gw_sigv4_request *req, struct query *q, bool presigned,
                     const char *signed_headers, const char *payload, const char *amz_date,
                     const char *region, const char *secret, uint8_t key[32], char sig_hex[65])
{
    struct buf creq = {0};
    if (canonical_request(req, q, presigned, signed_headers, payload, &creq)) {
        free(creq.p);
        return -E2BIG;
    }
    uint8_t h[32];
    char hh[65];
    sha256(creq.p, creq.len, h);
    hex(h, 32, hh);
    free(creq.p);
    char date[9];
    snprintf(date, sizeof(date), "%.8s", amz_date);
    char sts[320];
    int stslen = snprintf(sts, sizeof(sts), ALGORITHM "\n%s\n%s/%s/s3/aws4_request\n%s", amz_date,
                          date, region, hh);
    signing_key(secret, date, region, key);
    uint8_t sig[32];
    hmac(key, 32, sts, (size_t)stslen, sig);
    hex(sig, 32, sig_hex);
    return 0;
}

static enum gw_s3_err verify(const struct gw_sigv4_request *req, const struct gw_sigv4_config *cfg,
                             struct gw_sigv4_auth *auth, struct query *q, char *msg, size_t msglen)
{
    const char *authz = req->header(req->header_arg, "authorization");
    const char *algo = query_get(q, "X-Amz-Algorithm");
    if (authz && algo)
        return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, msg, msglen, "only one auth mechanism allowed");
    if (!authz && !algo) {
        auth->anonymous = true;
        return gw_s3_errorf(GW_S3_ACCESS_DENIED, msg, msglen, "the request is not signed");
    }
    auth->presigned = algo != NULL;
    enum gw_s3_err malformed = algo ? GW_S3_AUTH_QUERY_ERROR : GW_S3_AUTH_HEADER_MALFORMED;
    struct sig_parts sp;
    enum gw_s3_err e;
    int64_t expires = 0;
    const char *payload;
    char region[64] = "";

    if (algo) {
        static const char *const need[] = {"X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                                           "X-Amz-SignedHeaders", "X-Amz-Signature"};
        for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
            if (!query_get(q, need[i]))
                return gw_s3_errorf(malformed, msg, msglen,
                                    "the query is missing %s (X-Amz-Algorithm, X-Amz-Credential, "
                                    "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders and "
                                    "X-Amz-Expires are required)",
                                    need[i]);
        if (strcmp(algo, ALGORITHM) != 0)
            return gw_s3_errorf(malformed, msg, msglen, "X-Amz-Algorithm must be " ALGORITHM);
        const char *fields[3] = {query_get(q, "X-Amz-Credential"),
                                 query_get(q, "X-Amz-SignedHeaders"),
                                 query_get(q, "X-Amz-Signature")};
        char *dst[3] = {sp.credential, sp.signed_headers, sp.signature};
        size_t cap[3] = {sizeof(sp.credential), sizeof(sp.signed_headers), sizeof(sp.signature)};
        for (int i = 0; i < 3; i++) {
            if (strlen(fields[i]) >= cap[i])
                return gw_s3_errorf(malformed, msg, msglen, "a signature parameter is too long");
            strcpy(dst[i], fields[i]);
        }
        const char *ex = query_get(q, "X-Amz-Expires");
        char *end;
        errno = 0;
        long long v = strtoll(ex, &end, 10);
        if (!isdigit((unsigned char)*ex) || *end)
            return gw_s3_errorf(malformed, msg, msglen,
                                "X-Amz-Expires must be a number of seconds");
        /* a URL that never was valid, or valid too long, is refused as S3 does: 403 */
        if (errno || v < 1 || v > GW_SIGV4_MAX_EXPIRES)
            return gw_s3_errorf(GW_S3_ACCESS_DENIED, msg, msglen,
                                "X-Amz-Expires must be from 1 to %d seconds (a week)",
                                GW_SIGV4_MAX_EXPIRES);
        expires = v;
        snprintf(auth->amz_date, sizeof(auth->amz_date), "%s", query_get(q, "X-Amz-Date"));
        if (strlen(query_get(q, "X-Amz-Date")) != 16)
            auth->amz_date[0] = '\0';
        /* A presigned URL cannot carry a body hash unless the signer put it in a header. */
        payload = req->header(req->header_arg, "x-amz-content-sha256");
        if (!payload)
            payload = UNSIGNED;
    } else {
        if ((e = parse_authorization(authz, &sp, msg, msglen)))
            return e;
        const char *d = req->header(req->header_arg, "x-amz-date");
        if (d) {
            snprintf(auth->amz_date, sizeof(auth->amz_date), "%s", d);
            if (strlen(d) != 16)
                auth->amz_date[0] = '\0';
        } else if (!http_date_to_amz(req->header(req->header_arg, "date"), auth->amz_date)) {
            return gw_s3_errorf(GW_S3_ACCESS_DENIED, msg, msglen,
                                "AWS authentication requires a valid Date or x-amz-date header");
        }
        payload = req->header(req->header_arg, "x-amz-content-sha256");
        if (!payload)
            return gw_s3_errorf(GW_S3_INVALID_REQUEST, msg, msglen,
                                "missing required header for this request: x-amz-content-sha256");
    }

    if (!is_hex64(sp.signature, strlen(sp.signature)))
        return gw_s3_errorf(malformed, msg, msglen,
                            "the signature must be 64 lowercase hex digits");
    if (!valid_signed_headers(sp.signed_headers))
        return gw_s3_errorf(malformed, msg, msglen,
                            "SignedHeaders \"%.64s\" is not a ;-list of "
                            "lowercase header names",
                            sp.signed_headers);
    if (!signs(sp.signed_headers, "host"))
        return gw_s3_errorf(malformed, msg, msglen, "SignedHeaders must include host");
    char date[9];
    if ((e = parse_credential(sp.credential, malformed, cfg, auth, date, region, msg, msglen)))
        return e;
    char unsigned_name[64];
    first_unsigned(req, sp.signed_headers, auth, unsigned_name);
    if (unsigned_name[0])
        return gw_s3_errorf(GW_S3_ACCESS_DENIED, msg, msglen,
                            "There were headers present in the request which were not signed: %s",
                            unsigned_name);

    int64_t t = parse_amz_date(auth->amz_date);
    if (t < 0)
        return gw_s3_errorf(algo ? malformed : GW_S3_ACCESS_DENIED, msg, msglen,
                            "X-Amz-Date must be YYYYMMDDTHHMMSSZ");
    if (strncmp(auth->amz_date, date, 8) != 0)
        return gw_s3_errorf(malformed, msg, msglen,
                            "the credential date %s does not match the request date %.8s", date,
                            auth->amz_date);
    if (algo) {
        if (t > cfg->now + GW_SIGV4_MAX_SKEW)
            return gw_s3_errorf(GW_S3_ACCESS_DENIED, msg, msglen, "Request is not valid yet");
        if (cfg->now > t + expires)
            return gw_s3_errorf(GW_S3_REQUEST_EXPIRED, msg, msglen, "Request has expired");
    } else if (t > cfg->now + GW_SIGV4_MAX_SKEW || t < cfg->now - GW_SIGV4_MAX_SKEW) {
        return gw_s3_errorf(GW_S3_REQUEST_TIME_TOO_SKEWED, msg, msglen,
                            "the request time %s is more than %d s from the server time",
                            auth->amz_date, GW_SIGV4_MAX_SKEW);
    }

    size_t plen = strlen(payload);
    bool streaming = strcmp(payload, STREAMING) == 0,
         unsigned_streaming = strcmp(payload, STREAMING_UNSIGNED) == 0,
         signed_trailer = strcmp(payload, STREAMING_SIGNED_TRAILER) == 0;
    if (strcmp(payload, UNSIGNED) == 0) {
        auth->payload = GW_PAYLOAD_UNSIGNED;
    } else if ((streaming || unsigned_streaming || signed_trailer) && !algo) {
        auth->payload = unsigned_streaming ? GW_PAYLOAD_STREAMING_UNSIGNED : GW_PAYLOAD_STREAMING;
        const char *tr = req->header(req->header_arg, "x-amz-trailer");
        if ((tr && (strlen(tr) >= sizeof(auth->trailer) || gw_checksum_from_header(tr) < 0 ||
                    streaming)) ||
            (!tr && signed_trailer))
            return gw_s3_errorf(GW_S3_INVALID_REQUEST, msg, msglen,
                                "x-amz-trailer \"%.40s\" is not supported (an x-amz-checksum-* "
                                "trailer with " STREAMING_UNSIGNED " or " STREAMING_SIGNED_TRAILER
                                " is)",
                                tr ? tr : "");
        if (tr)
            for (size_t i = 0; tr[i]; i++)
                auth->trailer[i] = (char)tolower((unsigned char)tr[i]);
        const char *dl = req->header(req->header_arg, "x-amz-decoded-content-length");
        char *end;
        errno = 0;
        long long v = dl ? strtoll(dl, &end, 10) : -1;
        if (!dl || !isdigit((unsigned char)*dl) || *end || errno || v < 0)
            return gw_s3_errorf(GW_S3_MISSING_CONTENT_LENGTH, msg, msglen,
                                "a streaming upload needs x-amz-decoded-content-length");
        auth->decoded_length = v;
    } else if (is_hex64(payload, plen)) {
        auth->payload = GW_PAYLOAD_SHA256;
        unhex32(payload, auth->payload_sha256);
    } else {
        return gw_s3_errorf(GW_S3_INVALID_ARGUMENT, msg, msglen,
                            "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, " STREAMING
                            ", " STREAMING_SIGNED_TRAILER ", " STREAMING_UNSIGNED
                            " or a lowercase hex SHA-256");
    }

    char secret[GW_SIGV4_SECRET_MAX];
    if (!cfg->secret || cfg->secret(cfg->secret_arg, auth->access_key, secret, sizeof(secret)))
        return gw_s3_errorf(GW_S3_INVALID_ACCESS_KEY_ID, msg, msglen,
                            "the access key \"%s\" does not exist", auth->access_key);
    secret[sizeof(secret) - 1] = '\0';

    snprintf(auth->scope, sizeof(auth->scope), "%s/%s/s3/aws4_request", date, region);
    int rc = signature(req, q, algo != NULL, sp.signed_headers, payload, auth->amz_date, region,
                       secret, auth->signing_key, auth->seed_signature);
    OPENSSL_cleanse(secret, sizeof(secret));
    if (rc)
        return gw_s3_errorf(GW_S3_INVALID_REQUEST, msg, msglen, "the request is too large to sign");
    if (!same_signature(auth->seed_signature, sp.signature))
        return gw_s3_errorf(GW_S3_SIGNATURE_DOES_NOT_MATCH, msg, msglen,
                            "the request signature we calculated does not match the signature you "
                            "provided");
    return GW_S3_OK;
}

enum gw_s3_err gw_sigv4_verify(const struct gw_sigv4_request *req,
                               const struct gw_sigv4_config *cfg, struct gw_sigv4_auth *auth,
                               char *msg, size_t msglen)
{
    memset(auth, 0, sizeof(*auth));
    auth->decoded_length = -1;
    if (msg && msglen)
        msg[0] = '\0';
    if (!req || !req->method || !req->header || !cfg)
        return gw_s3_errorf(GW_S3_INTERNAL_ERROR, msg, msglen, "gw_sigv4_verify: missing argument");
    struct query q;
    int rc = query_parse(req->query, &q);
    enum gw_s3_err e;
    if (rc == -E2BIG)
        e = gw_s3_errorf(GW_S3_INVALID_ARGUMENT, msg, msglen, "more than %d query parameters",
                         MAX_QUERY_PARAMS);
    else if (rc)
        e = gw_s3_errorf(GW_S3_INTERNAL_ERROR, msg, msglen, "out of memory");
    else
        e = verify(req, cfg, auth, &q, msg, msglen);
    query_free(&q);
    if (e) {
        /* Nothing of a failed verification may be used to check a body. */
        OPENSSL_cleanse(auth->signing_key, sizeof(auth->signing_key));
        auth->seed_signature[0] = '\0';
    }
    return e;
}

void gw_sigv4_amz_date(int64_t t, char out[17])
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

int gw_sigv4_sign(const struct gw_sigv4_request *req, const struct gw_sigv4_signer *s, char *authz,
                  size_t len)
{
    if (!req || !req->method || !req->header || !s || !s->signed_headers ||
        !valid_signed_headers(s->signed_headers) || !s->amz_date || strlen(s->amz_date) != 16)
        return -EINVAL;
    const char *payload = req->header(req->header_arg, "x-amz-content-sha256");
    struct query q;
    int rc = query_parse(req->query, &q);
    uint8_t key[32];
    char sig[65];
    if (rc == 0)
        rc = signature(req, &q, false, s->signed_headers, payload ? payload : UNSIGNED, s->amz_date,
                       s->region ? s->region : "us-east-1", s->secret_key, key, sig);
    query_free(&q);
    OPENSSL_cleanse(key, sizeof(key));
    if (rc)
        return rc;
    int n = snprintf(authz, len,
                     ALGORITHM " Credential=%s/%.8s/%s/s3/aws4_request, SignedHeaders=%s, "
                               "Signature=%s",
                     s->access_key, s->amz_date, s->region ? s->region : "us-east-1",
                     s->signed_headers, sig);
    return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

/* ---- signed payloads ---- */

struct gw_payload_check {
    EVP_MD_CTX *md;
    bool check;
    uint8_t want[32];
};

int gw_payload_create(const struct gw_sigv4_auth *auth, struct gw_payload_check **out)
{
    *out = NULL;
    if (auth->payload == GW_PAYLOAD_STREAMING || auth->payload == GW_PAYLOAD_STREAMING_UNSIGNED)
        return -EINVAL;
    struct gw_payload_check *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->check = auth->payload == GW_PAYLOAD_SHA256;
    memcpy(p->want, auth->payload_sha256, 32);
    if (p->check &&
        (!(p->md = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(p->md, sha256_alg(), NULL))) {
        gw_payload_destroy(p);
        return -ENOMEM;
    }
    *out = p;
    return 0;
}

void gw_payload_update(struct gw_payload_check *p, const void *data, size_t len)
{
    if (p->check)
        EVP_DigestUpdate(p->md, data, len);
}

enum gw_s3_err gw_payload_final(struct gw_payload_check *p)
{
    if (!p->check)
        return GW_S3_OK;
    uint8_t got[32];
    unsigned int n = 32;
    EVP_DigestFinal_ex(p->md, got, &n);
    return CRYPTO_memcmp(got, p->want, 32) ? GW_S3_CONTENT_SHA256_MISMATCH : GW_S3_OK;
}

void gw_payload_destroy(struct gw_payload_check *p)
{
    if (!p)
        return;
    EVP_MD_CTX_free(p->md);
    free(p);
}

/* ---- aws-chunked bodies ---- */

enum chunk_state { CH_HEADER, CH_DATA, CH_CR, CH_LF, CH_TRAILER, CH_DONE, CH_FAILED };

struct gw_chunked {
    enum chunk_state state;
    bool sign;                   /* chunk signatures (else a checksum trailer) */
    char line[MAX_CHUNK_HEADER]; /* a chunk header or trailer line being read */
    size_t line_len;
    uint64_t remaining; /* data bytes left in this chunk */
    uint64_t size;      /* of this chunk */
    uint64_t total;
    int64_t decoded_length;
    /* signed chunks */
    char want[65]; /* this chunk's signature from its header */
    char prev[65]; /* the previous signature in the chain */
    EVP_MD_CTX *md;
    uint8_t key[32];
    char amz_date[17];
    char scope[128];
    /* checksum trailer */
    char trailer[32];
    struct gw_checksum sum; /* algo GW_SUM_NONE without a trailer */
    char got[96];           /* the trailer's value */
    char got_signature[65]; /* signed: x-amz-trailer-signature */
    int trailer_lines;
};

int gw_chunked_create(const struct gw_sigv4_auth *auth, struct gw_chunked **out)
{
    *out = NULL;
    bool sign = auth->payload == GW_PAYLOAD_STREAMING;
    if ((!sign && auth->payload != GW_PAYLOAD_STREAMING_UNSIGNED) ||
        (sign && !auth->seed_signature[0]))
        return -EINVAL;
    struct gw_chunked *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->sign = sign;
    c->decoded_length = auth->decoded_length;
    memcpy(c->trailer, auth->trailer, sizeof(c->trailer));
    c->sum.algo = GW_SUM_NONE;
    bool ok = true;
    if (sign) {
        memcpy(c->prev, auth->seed_signature, sizeof(c->prev));
        memcpy(c->key, auth->signing_key, 32);
        memcpy(c->amz_date, auth->amz_date, sizeof(c->amz_date));
        memcpy(c->scope, auth->scope, sizeof(c->scope));
        ok = (c->md = EVP_MD_CTX_new()) != NULL;
    }
    if (ok && c->trailer[0])
        ok = gw_checksum_init(&c->sum, gw_checksum_from_header(c->trailer)) == 0;
    if (!ok) {
        gw_chunked_destroy(c);
        return -ENOMEM;
    }
    *out = c;
    return 0;
}

void gw_chunked_destroy(struct gw_chunked *c)
{
    if (!c)
        return;
    EVP_MD_CTX_free(c->md);
    gw_checksum_free(&c->sum);
    OPENSSL_cleanse(c->key, sizeof(c->key));
    free(c);
}

bool gw_chunked_done(const struct gw_chunked *c)
{
    return c->state == CH_DONE;
}

const char *gw_chunked_trailer(const struct gw_chunked *c)
{
    return c->state == CH_DONE && c->trailer[0] ? c->got : NULL;
}

/* "<hex size>;chunk-signature=<64 hex>", or "<hex size>" without signatures. */
static bool parse_chunk_header(struct gw_chunked *c)
{
    const char *h = c->line;
    uint64_t size = 0;
    int digits = 0;
    for (; OPENSSL_hexchar2int((unsigned char)*h) >= 0; h++, digits++) {
        if (digits == 15)
            return false;
        size = size << 4 | (uint64_t)OPENSSL_hexchar2int((unsigned char)*h);
    }
    c->size = c->remaining = size;
    if (!c->sign)
        return digits && !*h;
    const char *ext = ";chunk-signature=";
    if (!digits || strncmp(h, ext, strlen(ext)) != 0)
        return false;
    h += strlen(ext);
    if (!is_hex64(h, strlen(h)))
        return false;
    memcpy(c->want, h, 65);
    return EVP_DigestInit_ex(c->md, sha256_alg(), NULL) == 1;
}

static bool chunk_signature_ok(struct gw_chunked *c)
{
    uint8_t h[32], sig[32];
    char hh[65], got[65];
    unsigned int n = 32;
    EVP_DigestFinal_ex(c->md, h, &n);
    hex(h, 32, hh);
    char sts[512];
    int len =
        snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n" EMPTY_SHA256 "\n%s",
                 c->amz_date, c->scope, c->prev, hh);
    hmac(c->key, 32, sts, (size_t)len, sig);
    hex(sig, 32, got);
    if (!same_signature(got, c->want))
        return false;
    memcpy(c->prev, got, sizeof(got));
    return true;
}

static bool checksum_ok(struct gw_chunked *c)
{
    uint8_t digest[GW_CHECKSUM_MAX];
    char b64[GW_CHECKSUM_B64_MAX];
    gw_checksum_base64(digest, gw_checksum_final(&c->sum, digest), b64);
    return strcmp(b64, c->got) == 0;
}

/* Signed with a trailer: x-amz-trailer-signature chains from the final
 * chunk's signature over the SHA-256 of the trailer as "name:value\n". */
static bool trailer_signature_ok(struct gw_chunked *c)
{
    char line[160];
    int n = snprintf(line, sizeof(line), "%s:%s\n", c->trailer, c->got);
    if (n < 0 || (size_t)n >= sizeof(line))
        return false;
    uint8_t h[32], sig[32];
    char hh[65], got[65];
    sha256(line, (size_t)n, h);
    hex(h, 32, hh);
    char sts[512];
    int len = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-TRAILER\n%s\n%s\n%s\n%s", c->amz_date,
                       c->scope, c->prev, hh);
    hmac(c->key, 32, sts, (size_t)len, sig);
    hex(sig, 32, got);
    return same_signature(got, c->got_signature);
}

/* The body ended: lengths and the trailer must agree. */
static enum gw_s3_err finish(struct gw_chunked *c, char *msg, size_t msglen)
{
    c->state = CH_FAILED;
    if (c->decoded_length >= 0 && c->total != (uint64_t)c->decoded_length)
        return gw_s3_errorf(GW_S3_INCOMPLETE_BODY, msg, msglen,
                            "the chunks hold %llu bytes, x-amz-decoded-content-length says %lld",
                            (unsigned long long)c->total, (long long)c->decoded_length);
    if (c->trailer[0] && !c->got[0])
        return gw_s3_errorf(GW_S3_INVALID_REQUEST, msg, msglen,
                            "the body ends without its %s trailer", c->trailer);
    if (c->trailer[0] && c->sign && !trailer_signature_ok(c))
        return gw_s3_errorf(GW_S3_SIGNATURE_DOES_NOT_MATCH, msg, msglen,
                            "the trailer signature does not match");
    if (c->trailer[0] && !checksum_ok(c))
        return gw_s3_errorf(GW_S3_BAD_DIGEST, msg, msglen,
                            "The %s you specified did not match the calculated checksum.",
                            c->trailer);
    c->state = CH_DONE;
    return GW_S3_OK;
}

/* One "name:value" trailer line; only the announced checksum is kept. */
static bool trailer_line(struct gw_chunked *c)
{
    char *colon = strchr(c->line, ':');
    if (!colon || colon == c->line || ++c->trailer_lines > 8)
        return false;
    *colon = '\0';
    char *dst;
    size_t cap;
    if (c->trailer[0] && strcasecmp(c->line, c->trailer) == 0) {
        dst = c->got;
        cap = sizeof(c->got);
    } else if (c->sign && strcasecmp(c->line, "x-amz-trailer-signature") == 0) {
        dst = c->got_signature;
        cap = sizeof(c->got_signature);
    } else {
        return true;
    }
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (dst[0] || n == 0 || n >= cap)
        return false;
    memcpy(dst, v, n);
    dst[n] = '\0';
    return true;
}

enum gw_s3_err gw_chunked_feed(struct gw_chunked *c, uint8_t *buf, size_t len, size_t *out_len,
                               char *msg, size_t msglen)
{
    size_t o = 0;
    *out_len = 0;
    if (c->state == CH_FAILED)
        return gw_s3_errorf(GW_S3_INVALID_REQUEST, msg, msglen, "the chunked body already failed");
    for (size_t i = 0; i < len;) {
        switch (c->state) {
        case CH_HEADER:
        case CH_TRAILER:
            if (buf[i] != '\n') {
                if (c->line_len + 1 >= MAX_CHUNK_HEADER)
                    goto malformed;
                c->line[c->line_len++] = (char)buf[i++];
                break;
            }
            i++;
            if (!c->line_len || c->line[c->line_len - 1] != '\r')
                goto malformed;
            c->line[c->line_len - 1] = '\0';
            c->line_len = 0;
            if (c->state == CH_TRAILER) {
                if (!c->line[0]) {
                    enum gw_s3_err e = finish(c, msg, msglen);
                    if (e)
                        return e;
                } else if (!trailer_line(c)) {
                    goto malformed;
                }
                break;
            }
            if (!parse_chunk_header(c))
                goto malformed;
            if (c->size > (uint64_t)INT64_MAX - c->total ||
                (c->decoded_length >= 0 && c->total + c->size > (uint64_t)c->decoded_length)) {
                c->state = CH_FAILED;
                return gw_s3_errorf(GW_S3_INCOMPLETE_BODY, msg, msglen,
                                    "the chunks hold more than x-amz-decoded-content-length bytes");
            }
            /* Signed without a trailer, the final chunk is framed like the
             * others; otherwise the trailer section follows its header directly
             * (the final chunk's signature, over no data, is checked first). */
            if (c->size) {
                c->state = CH_DATA;
            } else if (c->sign && !c->trailer[0]) {
                c->state = CH_CR;
            } else {
                if (c->sign && !chunk_signature_ok(c)) {
                    c->state = CH_FAILED;
                    return gw_s3_errorf(GW_S3_SIGNATURE_DOES_NOT_MATCH, msg, msglen,
                                        "the signature of the final chunk does not match");
                }
                c->state = CH_TRAILER;
            }
            break;
        case CH_DATA: {
            size_t n = len - i < c->remaining ? len - i : (size_t)c->remaining;
            if (c->sign)
                EVP_DigestUpdate(c->md, buf + i, n);
            gw_checksum_update(&c->sum, buf + i, n);
            memmove(buf + o, buf + i, n);
            o += n;
            i += n;
            c->remaining -= n;
            c->total += n;
            if (!c->remaining)
                c->state = CH_CR;
            break;
        }
        case CH_CR:
            if (buf[i++] != '\r')
                goto malformed;
            c->state = CH_LF;
            break;
        case CH_LF:
            if (buf[i++] != '\n')
                goto malformed;
            if (c->sign && !chunk_signature_ok(c)) {
                c->state = CH_FAILED;
                return gw_s3_errorf(GW_S3_SIGNATURE_DOES_NOT_MATCH, msg, msglen,
                                    "the signature of the chunk ending at byte %llu does not match",
                                    (unsigned long long)c->total);
            }
            if (c->size == 0) {
                enum gw_s3_err e = finish(c, msg, msglen);
                if (e)
                    return e;
            } else {
                c->state = CH_HEADER;
            }
            break;
        case CH_DONE:
            c->state = CH_FAILED;
            return gw_s3_errorf(GW_S3_INVALID_REQUEST, msg, msglen,
                                "bytes after the final chunk of the body");
        case CH_FAILED:
            goto malformed;
        }
    }
    *out_len = o;
    return GW_S3_OK;
malformed:
    c->state = CH_FAILED;
    return gw_s3_errorf(GW_S3_INVALID_REQUEST, msg, msglen,
                        "malformed aws-chunked framing after %llu payload bytes",
                        (unsigned long long)c->total);
}
