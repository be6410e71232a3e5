/* Preconditions of GET/HEAD Object and of a copy's source (s3_conditions.h). */
#include "gateway/s3_conditions.h"

#include <stdbool.h>
#include <string.h>
#include <time.h>

/* Whether the entity-tag list `list` ("*", or "a", W/"b", ...) names etag. */
static bool etag_listed(const char *list, const char *etag)
{
    size_t want = strlen(etag);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        const char *t = p;
        if (n >= 2 && strncmp(t, "W/", 2) == 0)
            t += 2, n -= 2;
        if (n >= 2 && t[0] == '"' && t[n - 1] == '"')
            t++, n -= 2;
        if ((n == 1 && *t == '*') || (n == want && n > 0 && strncmp(t, etag, n) == 0))
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

/* An HTTP date (IMF-fixdate, the obsolete RFC 850 and asctime forms) in
 * seconds since the epoch; false when it is none of them. */
static bool http_date(const char *s, int64_t *out)
{
    static const char *const forms[] = {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                                        "%a %b %e %H:%M:%S %Y"};
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        struct tm tm = {0};
        const char *end = strptime(s, forms[i], &tm);
        if (end && *end == '\0') {
            *out = (int64_t)timegm(&tm);
            return true;
        }
    }
    return false;
}

enum gw_condition gw_conditions_eval(const struct gw_conditions *c, const char *etag,
                                     int64_t mtime_s)
{
    int64_t t;
    if (c->if_match) {
        if (!etag_listed(c->if_match, etag))
            return GW_COND_FAILED;
    } else if (c->if_unmodified_since && http_date(c->if_unmodified_since, &t) && mtime_s > t) {
        return GW_COND_FAILED;
    }
    if (c->if_none_match) {
        if (etag_listed(c->if_none_match, etag))
            return GW_COND_NOT_MODIFIED;
    } else if (c->if_modified_since && http_date(c->if_modified_since, &t) && mtime_s <= t) {
        return GW_COND_NOT_MODIFIED;
    }
    return GW_COND_OK;
}
