/* The cluster secret and the mutual HMAC handshake (see inec/auth.h). */
#include "inec/auth.h"
#include "inec/hostport.h"
#include "codecs/errf.h"

#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

static const char MAGIC[8] = "INECAUT1";
static const char *const ROLE[] = {"current", "next", "previous"};

static void key_id(const uint8_t key[INEC_SECRET_BYTES], uint8_t id[8])
{
    uint8_t mac[32];
    unsigned n = 0;
    HMAC(EVP_sha256(), key, INEC_SECRET_BYTES, (const uint8_t *)"inec key id", 11, mac, &n);
    memcpy(id, mac, 8);
}

void inec_keyring_clear(struct inec_keyring *kr)
{
    OPENSSL_cleanse(kr, sizeof(*kr));
}

void inec_key_id_hex(const uint8_t id[8], char out[17])
{
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", id[i]);
}

/* ---- the secret file ------------------------------------------------------ */

static int unhex(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    return strspn(s, "0123456789abcdefABCDEF") == 2 * n ? 0 : -1;
}

static int keyring_add(struct inec_keyring *kr, enum inec_key_role role, const uint8_t *key)
{
    for (int i = 0; i < kr->n; i++)
        if (kr->role[i] == role)
            return -EEXIST;
    if (kr->n == INEC_AUTH_KEYS)
        return -E2BIG;
    kr->role[kr->n] = role;
    memcpy(kr->key[kr->n], key, INEC_SECRET_BYTES);
    key_id(key, kr->id[kr->n]);
    kr->n++;
    return 0;
}

int inec_secret_load(const char *path, struct inec_keyring *kr, char *err, size_t errlen)
{
    memset(kr, 0, sizeof(*kr));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return codec_errf(err, errlen, -errno, "cluster secret %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return codec_errf(err, errlen, -EINVAL, "cluster secret %s: %s", path,
                          "not a regular file");
    }
    if (st.st_mode & 077) {
        close(fd);
        return codec_errf(err, errlen, -EACCES,
                          "cluster secret %s: refused, group or others may access it: chmod 600 it",
                          path);
    }
    char text[1024];
    ssize_t got = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (got < 0 || got == (ssize_t)sizeof(text) - 1)
        return codec_errf(err, errlen, -EINVAL, "cluster secret %s: %s", path,
                          got < 0 ? strerror(errno) : "too large");
    text[got] = 0;
    int rc = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && !rc;
         line = strtok_r(NULL, "\n", &save)) {
        line += strspn(line, " \t");
        if (!*line || *line == '#')
            continue;
        char word[16] = "", hex[2 * INEC_SECRET_BYTES + 2] = "";
        uint8_t key[INEC_SECRET_BYTES];
        int role = -1;
        if (sscanf(line, "%15s %65s", word, hex) == 2)
            for (int r = 0; r < 3; r++)
                if (!strcmp(word, ROLE[r]))
                    role = r;
        if (role < 0 || strlen(hex) != 2 * INEC_SECRET_BYTES || unhex(hex, key, INEC_SECRET_BYTES))
            rc =
                codec_errf(err, errlen, -EINVAL,
                           "cluster secret %s: bad line '%.20s...' (want current|next|previous and "
                           "64 hex digits)",
                           path, line);
        else if ((rc = keyring_add(kr, (enum inec_key_role)role, key)))
            rc = codec_errf(err, errlen, -EINVAL, "cluster secret %s: two '%s' keys", path, word);
    }
    if (!rc && (kr->n == 0 || kr->role[0] != INEC_KEY_CURRENT)) {
        /* keep `current` first: it is the one we prove with */
        int c = -1;
        for (int i = 0; i < kr->n; i++)
            if (kr->role[i] == INEC_KEY_CURRENT)
                c = i;
        if (c < 0)
            rc = codec_errf(err, errlen, -EINVAL, "cluster secret %s: no 'current' key", path);
        else {
            struct inec_keyring t = *kr;
            kr->role[0] = t.role[c], kr->role[c] = t.role[0];
            memcpy(kr->key[0], t.key[c], INEC_SECRET_BYTES);
            memcpy(kr->key[c], t.key[0], INEC_SECRET_BYTES);
            memcpy(kr->id[0], t.id[c], 8);
            memcpy(kr->id[c], t.id[0], 8);
            OPENSSL_cleanse(&t, sizeof(t));
        }
    }
    OPENSSL_cleanse(text, sizeof(text));
    if (rc)
        OPENSSL_cleanse(kr, sizeof(*kr));
    return rc;
}

/* Writes the keyring to a temporary file beside path (0600, synced) and
 * either links it to path (exclusive: fails if path exists) or renames it. */
static int secret_write(const char *path, const struct inec_keyring *kr, bool exclusive, char *err,
                        size_t errlen)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return codec_errf(err, errlen, -errno, "cluster secret %s: %s", tmp, strerror(errno));
    char text[600];
    int len = snprintf(text, sizeof(text),
                       "# inec cluster secret: keep it mode 0600, the same on every host\n");
    for (int i = 0; i < kr->n; i++) {
        len += snprintf(text + len, sizeof(text) - (size_t)len, "%s ", ROLE[kr->role[i]]);
        for (int b = 0; b < INEC_SECRET_BYTES; b++)
            len += snprintf(text + len, sizeof(text) - (size_t)len, "%02x", kr->key[i][b]);
        len += snprintf(text + len, sizeof(text) - (size_t)len, "\n");
    }
    int rc = write(fd, text, (size_t)len) == len && fsync(fd) == 0 ? 0 : -errno;
    OPENSSL_cleanse(text, sizeof(text));
    if (close(fd) && !rc)
        rc = -errno;
    if (!rc && exclusive)
        rc = link(tmp, path) ? -errno : 0;
    else if (!rc)
        rc = rename(tmp, path) ? -errno : 0;
    unlink(tmp);
    if (rc && rc != -EEXIST)
        return codec_errf(err, errlen, rc, "cluster secret %s: %s", path, strerror(-rc));
    return rc;
}

static int random_key(uint8_t key[INEC_SECRET_BYTES], char *err, size_t errlen)
{
    if (RAND_bytes(key, INEC_SECRET_BYTES) != 1)
        return codec_errf(err, errlen, -EIO, "cluster secret: RAND_bytes failed");
    return 0;
}

int inec_secret_create(const char *path, char *err, size_t errlen)
{
    if (access(path, F_OK) == 0)
        return 1;
    struct inec_keyring kr = {0};
    uint8_t key[INEC_SECRET_BYTES];
    int rc = random_key(key, err, errlen);
    if (!rc)
        keyring_add(&kr, INEC_KEY_CURRENT, key);
    if (!rc)
        rc = secret_write(path, &kr, true, err, errlen);
    OPENSSL_cleanse(key, sizeof(key));
    OPENSSL_cleanse(&kr, sizeof(kr));
    return rc == -EEXIST ? 1 : rc;
}

int inec_secret_step(const char *path, const char *step, char *err, size_t errlen)
{
    struct inec_keyring kr, out = {0};
    int rc = inec_secret_load(path, &kr, err, errlen);
    if (rc)
        return rc;
    const uint8_t *cur = NULL, *next = NULL, *prev = NULL;
    for (int i = 0; i < kr.n; i++)
        *(kr.role[i] == INEC_KEY_CURRENT ? &cur
          : kr.role[i] == INEC_KEY_NEXT  ? &next
                                         : &prev) = kr.key[i];
    uint8_t fresh[INEC_SECRET_BYTES];
    if (!strcmp(step, "stage")) {
        if (!(rc = random_key(fresh, err, errlen))) {
            keyring_add(&out, INEC_KEY_CURRENT, cur);
            keyring_add(&out, INEC_KEY_NEXT, fresh);
            if (prev)
                keyring_add(&out, INEC_KEY_PREVIOUS, prev);
        }
    } else if (!strcmp(step, "rotate")) {
        if (!next && !(rc = random_key(fresh, err, errlen)))
            next = fresh;
        if (!rc) {
            keyring_add(&out, INEC_KEY_CURRENT, next);
            keyring_add(&out, INEC_KEY_PREVIOUS, cur);
        }
    } else if (!strcmp(step, "retire")) {
        keyring_add(&out, INEC_KEY_CURRENT, cur);
        if (next)
            keyring_add(&out, INEC_KEY_NEXT, next);
    } else {
        rc = codec_errf(err, errlen, -EINVAL, "unknown rotation step '%s' (stage|rotate|retire)",
                        step);
    }
    if (!rc)
        rc = secret_write(path, &out, false, err, errlen);
    OPENSSL_cleanse(fresh, sizeof(fresh));
    OPENSSL_cleanse(&kr, sizeof(kr));
    OPENSSL_cleanse(&out, sizeof(out));
    return rc;
}

static struct inec_keyring ephemeral;
static void ephemeral_init(void)
{
    uint8_t key[INEC_SECRET_BYTES];
    if (RAND_bytes(key, sizeof(key)) != 1)
        abort(); /* no randomness: nothing can be authenticated */
    keyring_add(&ephemeral, INEC_KEY_CURRENT, key);
    OPENSSL_cleanse(key, sizeof(key));
}

void inec_keyring_ephemeral(struct inec_keyring *kr)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, ephemeral_init);
    *kr = ephemeral;
}

int inec_keyring_get(const char *path, struct inec_keyring *kr, char *err, size_t errlen)
{
    if (!path || !path[0]) {
        inec_keyring_ephemeral(kr);
        return 0;
    }
    return inec_secret_load(path, kr, err, errlen);
}

/* ---- the handshake ------------------------------------------------------------ */

static void name_set(char dst[INEC_AUTH_NAME], const char *s)
{
    memset(dst, 0, INEC_AUTH_NAME);
    snprintf(dst, INEC_AUTH_NAME, "%s", s ? s : "");
}

static bool name_ok(const char s[INEC_AUTH_NAME])
{
    return memchr(s, 0, INEC_AUTH_NAME) != NULL;
}

static void transcript_mac(const uint8_t *key, char label, const char *ctx,
                           const struct inec_auth_m1 *m1, const struct inec_auth_m2 *m2,
                           uint8_t out[32])
{
    uint8_t buf[1 + 16 + sizeof(*m1) + sizeof(m2->nonce) + sizeof(m2->name)];
    size_t n = 0, cl = strnlen(ctx, 15);
    buf[n++] = (uint8_t)label;
    memcpy(buf + n, ctx, cl);
    n += cl;
    buf[n++] = 0;
    memcpy(buf + n, m1, sizeof(*m1));
    n += sizeof(*m1);
    memcpy(buf + n, m2->nonce, sizeof(m2->nonce));
    n += sizeof(m2->nonce);
    memcpy(buf + n, m2->name, sizeof(m2->name));
    n += sizeof(m2->name);
    unsigned ol = 0;
    HMAC(EVP_sha256(), key, INEC_SECRET_BYTES, buf, n, out, &ol);
}

void inec_auth_m1_make(const struct inec_keyring *kr, const char *from, const char *to,
                       struct inec_auth_m1 *m1)
{
    memset(m1, 0, sizeof(*m1));
    memcpy(m1->magic, MAGIC, sizeof(MAGIC));
    memcpy(m1->key_id, kr->id[0], 8);
    RAND_bytes(m1->nonce, sizeof(m1->nonce));
    name_set(m1->from, from);
    name_set(m1->to, to);
}

static const char *skip_scheme(const char *a)
{
    return strncmp(a, "tcp:", 4) == 0 ? a + 4 : a;
}

/* Whether HOST:PORT addresses a and b name the same IP (names resolved). */
static bool same_ip(const char *a, const char *b)
{
    struct sockaddr_storage x, y;
    socklen_t xl, yl;
    if (inec_hostport_resolve(a, false, &x, &xl) || inec_hostport_resolve(b, false, &y, &yl) ||
        x.ss_family != y.ss_family)
        return false;
    if (x.ss_family == AF_INET)
        return ((struct sockaddr_in *)&x)->sin_addr.s_addr ==
               ((struct sockaddr_in *)&y)->sin_addr.s_addr;
    return x.ss_family == AF_INET6 && memcmp(&((struct sockaddr_in6 *)&x)->sin6_addr,
                                             &((struct sockaddr_in6 *)&y)->sin6_addr, 16) == 0;
}

bool inec_auth_addr_matches(const char *to, const char *self)
{
    to = skip_scheme(to);
    self = skip_scheme(self);
    const char *tc = strrchr(to, ':'), *sc = strrchr(self, ':');
    if (!tc || !sc || strcmp(tc, sc) != 0)
        return false;
    size_t sl = (size_t)(sc - self), tl = (size_t)(tc - to);
    bool wildcard = sl == 0 || (sl == 7 && strncmp(self, "0.0.0.0", 7) == 0) ||
                    (sl == 4 && strncmp(self, "[::]", 4) == 0);
    return wildcard || (tl == sl && !strncmp(to, self, sl)) || same_ip(to, self);
}

int inec_auth_m2_make(const struct inec_keyring *kr, const char *ctx, const char *self_addr,
                      const char *self_name, const struct inec_auth_m1 *m1, struct inec_auth_m2 *m2,
                      const uint8_t **key, char *err, size_t errlen)
{
    if (memcmp(m1->magic, MAGIC, sizeof(MAGIC)) || !name_ok(m1->from) || !name_ok(m1->to))
        return codec_errf(err, errlen, -EPROTO, "not an inec handshake");
    int k = -1;
    for (int i = 0; i < kr->n; i++)
        if (CRYPTO_memcmp(kr->id[i], m1->key_id, 8) == 0)
            k = i;
    if (k < 0)
        return codec_errf(err, errlen, -EACCES,
                          "peer %s proves with a key not in our cluster secret (wrong or "
                          "unrotated secret file?)",
                          m1->from);
    if (self_addr && !inec_auth_addr_matches(m1->to, self_addr))
        return codec_errf(err, errlen, -EACCES, "peer %s dialed %s, not us", m1->from, m1->to);
    memset(m2, 0, sizeof(*m2));
    RAND_bytes(m2->nonce, sizeof(m2->nonce));
    name_set(m2->name, self_name);
    transcript_mac(kr->key[k], 'R', ctx, m1, m2, m2->mac);
    *key = kr->key[k];
    return 0;
}

int inec_auth_m2_check(const struct inec_keyring *kr, const char *ctx,
                       const struct inec_auth_m1 *m1, const struct inec_auth_m2 *m2,
                       struct inec_auth_m3 *m3, char *err, size_t errlen)
{
    uint8_t want[32];
    transcript_mac(kr->key[0], 'R', ctx, m1, m2, want);
    if (!name_ok(m2->name) || CRYPTO_memcmp(want, m2->mac, 32) != 0)
        return codec_errf(err, errlen, -EACCES,
                          "peer %s failed authentication: it does not hold our cluster secret",
                          m1->to);
    transcript_mac(kr->key[0], 'I', ctx, m1, m2, m3->mac);
    return 0;
}

int inec_auth_m3_check(const uint8_t *key, const char *ctx, const struct inec_auth_m1 *m1,
                       const struct inec_auth_m2 *m2, const struct inec_auth_m3 *m3, char *err,
                       size_t errlen)
{
    uint8_t want[32];
    transcript_mac(key, 'I', ctx, m1, m2, want);
    if (CRYPTO_memcmp(want, m3->mac, 32) != 0)
        return codec_errf(err, errlen, -EACCES, "peer %s failed authentication: wrong proof",
                          m1->from);
    return 0;
}

/* ---- on a blocking socket ------------------------------------------------------ */

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int io_all(int fd, void *buf, size_t len, bool out, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    for (size_t done = 0; done < len;) {
        int64_t left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = out ? POLLOUT : POLLIN};
        int r = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r == 0 ? -ETIMEDOUT : -errno;
        ssize_t n = out ? send(fd, (uint8_t *)buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(fd, (uint8_t *)buf + done, len - done, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n <= 0)
            return n == 0 ? -ECONNRESET : -errno;
        done += (size_t)n;
    }
    return 0;
}

static int io_fail(int rc, const char *what, const char *peer, char *err, size_t errlen)
{
    return codec_errf(err, errlen, rc == -ECONNRESET ? -EACCES : rc,
                      rc == -ECONNRESET
                          ? "%s: %s closed the connection (it refused our proof, or died)"
                          : "%s: %s did not answer in time or the connection broke",
                      what, peer);
}

int inec_auth_initiate(int fd, const struct inec_keyring *kr, const char *ctx, const char *self,
                       const char *to, char peer_name[INEC_AUTH_NAME], int timeout_ms, char *err,
                       size_t errlen)
{
    struct inec_auth_m1 m1;
    struct inec_auth_m2 m2;
    struct inec_auth_m3 m3;
    inec_auth_m1_make(kr, self, to, &m1);
    int rc = io_all(fd, &m1, sizeof(m1), true, timeout_ms);
    if (!rc)
        rc = io_all(fd, &m2, sizeof(m2), false, timeout_ms);
    if (rc)
        return io_fail(rc, "authentication", to, err, errlen);
    if ((rc = inec_auth_m2_check(kr, ctx, &m1, &m2, &m3, err, errlen)))
        return rc;
    if ((rc = io_all(fd, &m3, sizeof(m3), true, timeout_ms)))
        return io_fail(rc, "authentication", to, err, errlen);
    if (peer_name)
        memcpy(peer_name, m2.name, INEC_AUTH_NAME);
    return 0;
}

int inec_auth_respond(int fd, const struct inec_keyring *kr, const char *ctx, const char *self_addr,
                      const char *self_name, char peer_name[INEC_AUTH_NAME], int timeout_ms,
                      char *err, size_t errlen)
{
    struct inec_auth_m1 m1;
    struct inec_auth_m2 m2;
    struct inec_auth_m3 m3;
    const uint8_t *key = NULL;
    int rc = io_all(fd, &m1, sizeof(m1), false, timeout_ms);
    if (rc)
        return codec_errf(err, errlen, rc == -ECONNRESET ? -EPROTO : rc,
                          "no handshake from the peer (%s)",
                          rc == -ECONNRESET ? "closed" : strerror(-rc));
    if ((rc = inec_auth_m2_make(kr, ctx, self_addr, self_name, &m1, &m2, &key, err, errlen)))
        return rc;
    if ((rc = io_all(fd, &m2, sizeof(m2), true, timeout_ms)) ||
        (rc = io_all(fd, &m3, sizeof(m3), false, timeout_ms)))
        return codec_errf(
            err, errlen, rc == -ECONNRESET ? -EACCES : rc, "peer %s sent no proof (%s)", m1.from,
            rc == -ECONNRESET ? "it closed the connection: not our secret?" : strerror(-rc));
    if ((rc = inec_auth_m3_check(key, ctx, &m1, &m2, &m3, err, errlen)))
        return rc;
    if (peer_name)
        memcpy(peer_name, m1.from, INEC_AUTH_NAME);
    return 0;
}
