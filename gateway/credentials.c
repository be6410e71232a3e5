/* Credentials: configuration, environment, stored file, or generated once. */
#include "gateway/credentials.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/rand.h>

static const struct field {
    const char *json, *env;
    size_t off;
} fields[] = {
    {"access_key", "INEC_ACCESS_KEY", offsetof(struct gw_credentials, access_key)},
    {"secret_key", "INEC_SECRET_KEY", offsetof(struct gw_credentials, secret_key)},
    {"admin_token", "INEC_ADMIN_TOKEN", offsetof(struct gw_credentials, admin_token)},
};
#define NFIELDS   (sizeof(fields) / sizeof(fields[0]))
#define FIELD_LEN sizeof(((struct gw_credentials *)0)->access_key)

static char *field(struct gw_credentials *c, size_t i)
{
    return (char *)c + fields[i].off;
}

static bool fill(char *dst, const char *src)
{
    if (dst[0] || !src || !src[0] || strlen(src) >= FIELD_LEN)
        return false;
    strcpy(dst, src);
    return true;
}

/* Random characters from an alphabet: access keys look like AWS's (upper
 * case and digits, 20), secrets and tokens are base62 (40 and 48). */
static const char upper[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
static const char base62[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

static int generate(char *dst, size_t n, const char *alphabet)
{
    unsigned char raw[64];
    size_t alen = strlen(alphabet);
    size_t o = 0;
    while (o < n) {
        if (RAND_bytes(raw, sizeof(raw)) != 1)
            return -EIO;
        for (size_t i = 0; i < sizeof(raw) && o < n; i++)
            if (raw[i] < 256 - 256 % alen) /* no modulo bias */
                dst[o++] = alphabet[raw[i] % alen];
    }
    dst[n] = '\0';
    return 0;
}

static int read_file(const char *path, struct gw_credentials *c, char *msg, size_t msglen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        int e = errno;
        snprintf(msg, msglen, "%s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (st.st_mode & 077)) {
        close(fd);
        snprintf(msg, msglen, "%s can be read by others (mode %03o): chmod 600 it", path,
                 (unsigned)(st.st_mode & 0777));
        return -EPERM;
    }
    json_error_t jerr;
    json_t *j = json_loadfd(fd, 0, &jerr);
    close(fd);
    if (!json_is_object(j)) {
        json_decref(j);
        snprintf(msg, msglen, "%s: not a JSON object (%s)", path, jerr.text);
        return -EINVAL;
    }
    for (size_t i = 0; i < NFIELDS; i++)
        if (fill(field(c, i), json_string_value(json_object_get(j, fields[i].json))))
            c->from_file = true;
    json_decref(j);
    return 0;
}

int gw_credentials_write_private(const char *dir, const char *file, json_t *j, char *msg,
                                 size_t msglen)
{
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, file);
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (!j)
        return -ENOMEM;
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int rc = 0;
    if (fd < 0 || json_dumpfd(j, fd, JSON_INDENT(2) | JSON_SORT_KEYS) != 0 ||
        write(fd, "\n", 1) != 1 || fsync(fd) != 0)
        rc = -errno;
    json_decref(j);
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc) {
        unlink(tmp);
        snprintf(msg, msglen, "cannot store %s: %s", path, strerror(-rc));
    }
    return rc;
}

static int write_file(const char *dir, const struct gw_credentials *c, char *msg, size_t msglen)
{
    return gw_credentials_write_private(dir, GW_CREDENTIALS_FILE,
                                        json_pack("{ssssss}", "access_key", c->access_key,
                                                  "secret_key", c->secret_key, "admin_token",
                                                  c->admin_token),
                                        msg, msglen);
}

int gw_credentials_note_endpoints(const char *dir, const char *s3_url, const char *admin_url,
                                  char *msg, size_t msglen)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, GW_CREDENTIALS_FILE) >= sizeof(path))
        return snprintf(msg, msglen, "data directory path too long"), -ENAMETOOLONG;
    json_t *j = json_load_file(path, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return 0; /* credentials from elsewhere (environment, configuration) */
    }
    json_object_set_new(j, "s3_endpoint", json_string(s3_url));
    json_object_set_new(j, "admin_endpoint", json_string(admin_url));
    return gw_credentials_write_private(dir, GW_CREDENTIALS_FILE, j, msg, msglen);
}

int gw_credentials_load(const char *dir, struct gw_credentials *c, char *msg, size_t msglen)
{
    c->generated = c->from_file = false;
    for (size_t i = 0; i < NFIELDS; i++)
        fill(field(c, i), getenv(fields[i].env));
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        int e = errno;
        snprintf(msg, msglen, "cannot create %s: %s", dir, strerror(e));
        return -e;
    }
    char path[4096];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, GW_CREDENTIALS_FILE) >= sizeof(path)) {
        snprintf(msg, msglen, "data directory path too long");
        return -ENAMETOOLONG;
    }
    int rc = read_file(path, c, msg, msglen);
    if (rc)
        return rc;
    static const size_t lens[NFIELDS] = {20, 40, 48};
    for (size_t i = 0; i < NFIELDS; i++) {
        if (field(c, i)[0])
            continue;
        rc = generate(field(c, i), lens[i], i == 0 ? upper : base62);
        if (rc) {
            snprintf(msg, msglen, "RAND_bytes failed");
            return rc;
        }
        c->generated = true;
    }
    return c->generated ? write_file(dir, c, msg, msglen) : 0;
}

int gw_credentials_generate_pair(char access[21], char secret[41])
{
    int rc = generate(access, 20, upper);
    return rc ? rc : generate(secret, 40, base62);
}
