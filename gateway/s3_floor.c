/* The benchmark floor (gw_s3_config.floor): the same HTTP stack and SigV4
 * checks with no object layer behind them. */
#include "gateway/s3_server_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLOOR_PERIOD ((1u << 20) + 4099)

static uint8_t floor_pattern[2 * FLOOR_PERIOD];
static pthread_once_t floor_once = PTHREAD_ONCE_INIT;

static void floor_init(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < FLOOR_PERIOD; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        floor_pattern[i] = floor_pattern[i + FLOOR_PERIOD] = (uint8_t)(x >> 32);
    }
}

const uint8_t *gw_s3_floor_bytes(const char *key, uint64_t off, size_t *len)
{
    pthread_once(&floor_once, floor_init);
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    *len = FLOOR_PERIOD;
    return floor_pattern + (h % FLOOR_PERIOD + off % FLOOR_PERIOD) % FLOOR_PERIOD;
}

struct floor_stream {
    char key[GW_S3_KEY_MAX + 1];
};

static ssize_t floor_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct floor_stream *f = cls;
    size_t n;
    const uint8_t *p = gw_s3_floor_bytes(f->key, pos, &n);
    n = n < max ? n : max;
    memcpy(buf, p, n);
    return (ssize_t)n;
}

void gw_s3_floor_begin(struct gw_s3_req *r)
{
    struct gw_s3_server *s = r->srv;
    char name[GW_BUCKET_MAX + GW_S3_KEY_MAX + 2];
    snprintf(name, sizeof(name), "%s/%s", r->t.bucket, r->t.key);
    if (r->op == GW_OP_CREATE_BUCKET) {
        gw_s3_answer_empty(r, 200);
    } else if (r->op == GW_OP_PUT_OBJECT) {
        enum gw_s3_err e = gw_s3_body_begin(r);
        if (e)
            gw_s3_answer_error(r, e, r->msg);
    } else if (r->op == GW_OP_GET_OBJECT) {
        pthread_mutex_lock(&s->floor_lock);
        json_t *v = json_object_get(s->floor_sizes, name);
        uint64_t size = (uint64_t)json_integer_value(v);
        pthread_mutex_unlock(&s->floor_lock);
        struct floor_stream *f = v ? malloc(sizeof(*f)) : NULL;
        if (!f) {
            gw_s3_answer_error(r, v ? GW_S3_INTERNAL_ERROR : GW_S3_NO_SUCH_KEY, NULL);
            return;
        }
        snprintf(f->key, sizeof(f->key), "%s", r->t.key);
        struct MHD_Response *resp =
            MHD_create_response_from_callback(size, gw_s3_read_block(size), floor_reader, f, free);
        if (resp) {
            r->bytes_out += size;
            gw_s3_queue(r, 200, resp);
        }
    } else {
        gw_s3_answer_error(r, GW_S3_NOT_IMPLEMENTED, "a benchmark floor serves PUT and GET only");
    }
}

void gw_s3_floor_put_end(struct gw_s3_req *r)
{
    enum gw_s3_err e = gw_s3_body_end(r);
    if (e) {
        gw_s3_answer_error(r, e, r->msg);
        return;
    }
    char name[GW_BUCKET_MAX + GW_S3_KEY_MAX + 2];
    snprintf(name, sizeof(name), "%s/%s", r->t.bucket, r->t.key);
    pthread_mutex_lock(&r->srv->floor_lock);
    int rc = json_object_set_new(r->srv->floor_sizes, name, json_integer((json_int_t)r->decoded));
    pthread_mutex_unlock(&r->srv->floor_lock);
    if (rc)
        gw_s3_answer_error(r, GW_S3_INTERNAL_ERROR, NULL);
    else
        gw_s3_answer_empty(r, 200);
}
