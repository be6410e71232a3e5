/* S3 key pairs: the primary one and a persisted list, behind a rwlock. */
#include "gateway/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "gateway/credentials.h"

struct gw_keys {
    pthread_rwlock_t lock;
    char *dir;
    char primary_access[129], primary_secret[129];
    json_t *list; /* [{"access_key", "secret_key", "name", "created"}] */
};

static int load(struct gw_keys *k, char *msg, size_t msglen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", k->dir, GW_KEYS_FILE);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            return snprintf(msg, msglen, "%s: %s", path, strerror(errno)), -errno;
        k->list = json_array();
        return 0;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (st.st_mode & 077)) {
        close(fd);
        snprintf(msg, msglen, "%s can be read by others: chmod 600 it", path);
        return -EPERM;
    }
    json_error_t jerr;
    json_t *j = json_loadfd(fd, 0, &jerr);
    close(fd);
    json_t *a = json_object_get(j, "keys");
    size_t i;
    json_t *e;
    bool ok = json_is_array(a);
    json_array_foreach(a, i, e) ok = ok && json_is_string(json_object_get(e, "access_key")) &&
                                     json_is_string(json_object_get(e, "secret_key"));
    if (!ok) {
        json_decref(j);
        snprintf(msg, msglen, "%s: want {\"keys\": [{\"access_key\", \"secret_key\", ...}]} (%s)",
                 path, jerr.text);
        return -EINVAL;
    }
    k->list = json_incref(a);
    json_decref(j);
    return 0;
}

int gw_keys_open(const char *dir, const char *primary_access, const char *primary_secret,
                 struct gw_keys **out, char *msg, size_t msglen)
{
    if (!primary_access || !primary_secret || strlen(primary_access) >= 129 ||
        strlen(primary_secret) >= 129)
        return snprintf(msg, msglen, "no primary key pair"), -EINVAL;
    struct gw_keys *k = calloc(1, sizeof(*k));
    if (!k || !(k->dir = strdup(dir))) {
        free(k);
        return -ENOMEM;
    }
    strcpy(k->primary_access, primary_access);
    strcpy(k->primary_secret, primary_secret);
    pthread_rwlock_init(&k->lock, NULL);
    int rc = load(k, msg, msglen);
    if (rc) {
        gw_keys_close(k);
        return rc;
    }
    *out = k;
    return 0;
}

void gw_keys_close(struct gw_keys *k)
{
    if (!k)
        return;
    json_decref(k->list);
    pthread_rwlock_destroy(&k->lock);
    OPENSSL_cleanse(k->primary_secret, sizeof(k->primary_secret));
    free(k->dir);
    free(k);
}

/* Constant time in the key's bytes, so timing does not spell out a valid key. */
static bool same(const char *a, const char *b)
{
    size_t n = strlen(a);
    return n == strlen(b) && CRYPTO_memcmp(a, b, n) == 0;
}

int gw_keys_secret(struct gw_keys *k, const char *access_key, char *secret, size_t len)
{
    int rc = -ENOENT;
    pthread_rwlock_rdlock(&k->lock);
    if (same(access_key, k->primary_access)) {
        snprintf(secret, len, "%s", k->primary_secret);
        rc = 0;
    }
    size_t i;
    json_t *e;
    json_array_foreach(k->list, i, e)
    {
        if (rc == 0)
            break;
        if (same(access_key, json_string_value(json_object_get(e, "access_key")))) {
            snprintf(secret, len, "%s", json_string_value(json_object_get(e, "secret_key")));
            rc = 0;
        }
    }
    pthread_rwlock_unlock(&k->lock);
    return rc;
}

/* Makes `next` the list, durably first: a key works only once it is on disk,
 * and a revoked one stays revoked after a restart. Takes next; under the
 * write lock. */
static int replace(struct gw_keys *k, json_t *next)
{
    char msg[256];
    int rc = gw_credentials_write_private(k->dir, GW_KEYS_FILE, json_pack("{s:O}", "keys", next),
                                          msg, sizeof(msg));
    if (rc) {
        json_decref(next);
        return rc;
    }
    json_decref(k->list);
    k->list = next;
    return 0;
}

static bool good_name(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n < 1 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return false;
    return true;
}

int gw_keys_create(struct gw_keys *k, const char *name, json_t **out)
{
    if (!good_name(name))
        return -EINVAL;
    char access[21], secret[41];
    int rc = gw_credentials_generate_pair(access, secret);
    if (rc)
        return rc;
    char created[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    json_t *e = json_pack("{s:s,s:s,s:s,s:s}", "access_key", access, "secret_key", secret, "name",
                          name, "created", created);
    OPENSSL_cleanse(secret, sizeof(secret));
    if (!e)
        return -ENOMEM;
    pthread_rwlock_wrlock(&k->lock);
    if (json_array_size(k->list) >= GW_KEYS_MAX) {
        rc = -ENOSPC;
    } else {
        json_t *next = json_copy(k->list);
        json_array_append(next, e);
        rc = replace(k, next);
    }
    pthread_rwlock_unlock(&k->lock);
    if (rc) {
        json_decref(e);
        return rc;
    }
    *out = e;
    return 0;
}

int gw_keys_list(struct gw_keys *k, json_t **out)
{
    json_t *a = json_array();
    pthread_rwlock_rdlock(&k->lock);
    json_array_append_new(a, json_pack("{s:s,s:s,s:b}", "access_key", k->primary_access, "name",
                                       "primary (credentials.json)", "primary", 1));
    size_t i;
    json_t *e;
    json_array_foreach(k->list, i, e)
    {
        json_t *v = json_deep_copy(e);
        json_object_del(v, "secret_key");
        json_object_set_new(v, "primary", json_false());
        json_array_append_new(a, v);
    }
    pthread_rwlock_unlock(&k->lock);
    *out = a;
    return 0;
}

int gw_keys_revoke(struct gw_keys *k, const char *access_key)
{
    int rc = -ENOENT;
    pthread_rwlock_wrlock(&k->lock);
    if (same(access_key, k->primary_access)) {
        rc = -EPERM;
    } else {
        size_t i;
        json_t *e;
        json_array_foreach(k->list, i, e)
        {
            if (!same(access_key, json_string_value(json_object_get(e, "access_key"))))
                continue;
            json_t *next = json_copy(k->list);
            json_array_remove(next, i);
            rc = replace(k, next);
            break;
        }
    }
    pthread_rwlock_unlock(&k->lock);
    return rc;
}
