/* Range header parsing with S3's answers (see s3_range.h). */
#include "gateway/s3_range.h"

#include <ctype.h>
#include <string.h>

/* Digits at *s as a saturating integer; false (and *v untouched) when there are none. */
static bool number(const char **s, uint64_t *v)
{
    const char *p = *s;
    uint64_t n = 0;
    for (; isdigit((unsigned char)*p); p++)
        n = n > (UINT64_MAX - 9) / 10 ? UINT64_MAX : n * 10 + (uint64_t)(*p - '0');
    if (p == *s)
        return false;
    *s = p;
    *v = n;
    return true;
}

enum gw_s3_err gw_range_parse(const char *header, uint64_t size, struct gw_range *out)
{
    *out = (struct gw_range){false, 0, size};
    if (!header)
        return GW_S3_OK;
    const char *s = header;
    while (*s == ' ' || *s == '\t')
        s++;
    if (strncmp(s, "bytes=", 6) != 0)
        return GW_S3_OK;
    s += 6;
    uint64_t a = 0, b = UINT64_MAX;
    bool suffix = *s == '-', has_a = false, has_b;
    if (suffix)
        s++;
    else if (!(has_a = number(&s, &a)) || *s++ != '-')
        return GW_S3_OK;
    has_b = number(&s, &b);
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s || (suffix && !has_b) || (!suffix && !has_a) || (has_a && has_b && a > b))
        return GW_S3_OK; /* malformed, reversed or several ranges: ignored */
    if (suffix) {
        if (b == 0 || size == 0)
            return GW_S3_INVALID_RANGE;
        a = b > size ? 0 : size - b;
        b = size - 1;
    } else {
        if (a >= size)
            return GW_S3_INVALID_RANGE;
        if (b > size - 1)
            b = size - 1;
    }
    *out = (struct gw_range){true, a, b - a + 1};
    return GW_S3_OK;
}
