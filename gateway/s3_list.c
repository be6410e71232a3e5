/* S3 listing rules over a sorted key stream (see s3_list.h). */
#include "gateway/s3_list.h"

#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

#define TOKEN_TAG "k:" /* tells our tokens from foreign or garbled ones */

int gw_list_begin(struct gw_list *l, const struct gw_list_params *p)
{
    memset(l, 0, sizeof(*l));
    if (p->max_keys < 0)
        return -EINVAL;
    l->p = *p;
    if (l->p.prefix && !*l->p.prefix)
        l->p.prefix = NULL;
    if (l->p.delimiter && !*l->p.delimiter)
        l->p.delimiter = NULL;
    if (l->p.after && !*l->p.after)
        l->p.after = NULL;
    l->prefix_len = l->p.prefix ? strlen(l->p.prefix) : 0;
    l->delim_len = l->p.delimiter ? strlen(l->p.delimiter) : 0;
    l->max_keys = p->max_keys > GW_LIST_MAX_KEYS ? GW_LIST_MAX_KEYS : p->max_keys;
    l->stopped = l->max_keys == 0;
    return 0;
}

/* A new entry is listed unless the page is full; then the page is truncated. */
static enum gw_list_step admit(struct gw_list *l, const char *entry, size_t len,
                               enum gw_list_step step)
{
    if (l->count == l->max_keys) {
        l->truncated = true;
        l->stopped = true;
        return GW_LIST_STOP;
    }
    l->count++;
    memcpy(l->next, entry, len);
    l->next[len] = '\0';
    return step;
}

enum gw_list_step gw_list_offer(struct gw_list *l, const char *key)
{
    if (l->stopped)
        return GW_LIST_STOP;
    size_t klen = strlen(key);
    if (klen > GW_S3_KEY_MAX)
        return GW_LIST_SKIP; /* cannot exist: PUT refuses such keys */
    if (l->p.prefix) {
        int c = strncmp(key, l->p.prefix, l->prefix_len);
        if (c < 0)
            return GW_LIST_SKIP;
        if (c > 0) { /* sorted input: no later key can match the prefix */
            l->stopped = true;
            return GW_LIST_STOP;
        }
    }
    if (l->p.after && strcmp(key, l->p.after) <= 0)
        return GW_LIST_SKIP;
    if (l->p.delimiter) {
        const char *d = strstr(key + l->prefix_len, l->p.delimiter);
        if (d) {
            size_t cplen = (size_t)(d - key) + l->delim_len;
            if (l->common_len == cplen && memcmp(l->common, key, cplen) == 0)
                return GW_LIST_SKIP;
            /* A common prefix at or before the marker was listed by an earlier page. */
            if (l->p.after && strncmp(key, l->p.after, cplen) <= 0)
                return GW_LIST_SKIP;
            enum gw_list_step s = admit(l, key, cplen, GW_LIST_PREFIX);
            if (s == GW_LIST_PREFIX) {
                memcpy(l->common, key, cplen);
                l->common[cplen] = '\0';
                l->common_len = cplen;
            }
            return s;
        }
    }
    return admit(l, key, klen, GW_LIST_CONTENTS);
}

const char *gw_list_prefix(const struct gw_list *l)
{
    return l->common;
}

int gw_list_token_encode(const char *key, char *out, size_t outlen)
{
    size_t klen = strlen(key), n = strlen(TOKEN_TAG) + klen;
    if (klen > GW_S3_KEY_MAX || outlen < 4 * ((n + 2) / 3) + 1)
        return -ENOSPC;
    unsigned char raw[GW_S3_KEY_MAX + sizeof(TOKEN_TAG)];
    memcpy(raw, TOKEN_TAG, strlen(TOKEN_TAG));
    memcpy(raw + strlen(TOKEN_TAG), key, klen);
    EVP_EncodeBlock((unsigned char *)out, raw, (int)n);
    return 0;
}

int gw_list_token_decode(const char *token, char *key, size_t keylen)
{
    size_t n = strlen(token);
    if (n == 0 || n % 4 || n > 4 * ((GW_S3_KEY_MAX + strlen(TOKEN_TAG) + 2) / 3))
        return -EINVAL;
    unsigned char raw[GW_S3_KEY_MAX + 8];
    int got = EVP_DecodeBlock(raw, (const unsigned char *)token, (int)n);
    if (got < 0)
        return -EINVAL;
    /* EVP_DecodeBlock counts the padding as zero bytes. */
    got -= (token[n - 1] == '=') + (token[n - 2] == '=');
    size_t tag = strlen(TOKEN_TAG);
    if ((size_t)got <= tag || memcmp(raw, TOKEN_TAG, tag) != 0 ||
        memchr(raw + tag, '\0', (size_t)got - tag) || (size_t)got - tag + 1 > keylen)
        return -EINVAL;
    memcpy(key, raw + tag, (size_t)got - tag);
    key[(size_t)got - tag] = '\0';
    return 0;
}
