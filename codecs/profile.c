/* Profile text: "scheme:key=value,..." <-> struct codec_profile. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "codecs/internal.h"

static const char *const scheme_names[] = {
    [CODEC_RS] = "rs",         [CODEC_LRC] = "lrc",   [CODEC_PPR] = "ppr",
    [CODEC_ECPIPE] = "ecpipe", [CODEC_TRIEC] = "tri",
};

#define NSCHEMES ((int)(sizeof(scheme_names) / sizeof(scheme_names[0])))

int codec_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

const char *codec_scheme_name(enum codec_scheme scheme)
{
    if ((int)scheme < 0 || (int)scheme >= NSCHEMES)
        return "unknown";
    return scheme_names[scheme];
}

/* A decimal in [1, CODEC_MAX_CHUNKS], the whole of [s, end). */
static int parse_count(const char *s, const char *end, int *out)
{
    if (s == end || end - s > 3)
        return -EINVAL;
    int v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > CODEC_MAX_CHUNKS)
        return -EINVAL;
    *out = v;
    return 0;
}

int codec_profile_parse(const char *text, struct codec_profile *out, char *err, size_t errlen)
{
    if (!text || !out)
        return codec_errf(err, errlen, -EINVAL, "no profile given");
    const char *colon = strchr(text, ':');
    size_t slen = colon ? (size_t)(colon - text) : strlen(text);
    int scheme = -1;
    for (int i = 0; i < NSCHEMES; i++)
        if (strlen(scheme_names[i]) == slen && strncmp(text, scheme_names[i], slen) == 0)
            scheme = i;
    if (scheme < 0)
        return codec_errf(err, errlen, -EINVAL,
                          "unknown scheme '%.*s' in profile '%s' (want rs, lrc, ppr, ecpipe, tri)",
                          (int)slen, text, text);
    struct codec_profile p = {.scheme = (enum codec_scheme)scheme};
    const char *s = colon ? colon + 1 : text + slen;
    while (*s) {
        const char *end = strchr(s, ',');
        if (!end)
            end = s + strlen(s);
        const char *eq = memchr(s, '=', (size_t)(end - s));
        if (!eq)
            return codec_errf(err, errlen, -EINVAL, "profile '%s': '%.*s' is not key=value", text,
                              (int)(end - s), s);
        int klen = (int)(eq - s);
        int *field = NULL;
        if (klen == 1 && *s == 'k')
            field = &p.k;
        else if (klen == 1 && *s == 'm' && scheme != CODEC_LRC)
            field = &p.m;
        else if (klen == 1 && *s == 'l' && scheme == CODEC_LRC)
            field = &p.l;
        else if (klen == 1 && *s == 'r' && scheme == CODEC_LRC)
            field = &p.r;
        if (!field)
            return codec_errf(err, errlen, -EINVAL, "profile '%s': unknown key '%.*s' for %s", text,
                              klen, s, scheme_names[scheme]);
        if (*field)
            return codec_errf(err, errlen, -EINVAL, "profile '%s': key '%.*s' given twice", text,
                              klen, s);
        if (parse_count(eq + 1, end, field) < 0)
            return codec_errf(err, errlen, -EINVAL,
                              "profile '%s': bad value '%.*s' for key '%.*s' (want 1..%d)", text,
                              (int)(end - eq - 1), eq + 1, klen, s, CODEC_MAX_CHUNKS);
        s = *end ? end + 1 : end;
    }
    const char *need = scheme == CODEC_LRC ? (!p.k   ? "k"
                                              : !p.l ? "l"
                                              : !p.r ? "r"
                                                     : NULL)
                                           : (!p.k   ? "k"
                                              : !p.m ? "m"
                                                     : NULL);
    if (need)
        return codec_errf(err, errlen, -EINVAL, "profile '%s': missing key '%s'", text, need);
    if (scheme == CODEC_LRC)
        p.m = p.l + p.r;
    int rc = codec_profile_check(&p, err, errlen);
    if (rc < 0)
        return rc;
    *out = p;
    return 0;
}

int codec_profile_check(const struct codec_profile *p, char *err, size_t errlen)
{
    if (!p)
        return codec_errf(err, errlen, -EINVAL, "no profile given");
    if ((int)p->scheme < 0 || (int)p->scheme >= NSCHEMES)
        return codec_errf(err, errlen, -EINVAL, "unknown scheme %d", (int)p->scheme);
    if (p->k < 1)
        return codec_errf(err, errlen, -EINVAL, "k=%d: need at least one data chunk", p->k);
    if (p->m < 1)
        return codec_errf(err, errlen, -EINVAL, "m=%d: need at least one parity chunk", p->m);
    if (p->k + p->m > CODEC_MAX_CHUNKS)
        return codec_errf(err, errlen, -EINVAL, "k+m=%d: at most %d chunks", p->k + p->m,
                          CODEC_MAX_CHUNKS);
    if (p->scheme == CODEC_LRC) {
        if (p->l < 1 || p->r < 1 || p->l + p->r != p->m)
            return codec_errf(err, errlen, -EINVAL,
                              "lrc: need l>=1, r>=1 and m=l+r (l=%d r=%d m=%d)", p->l, p->r, p->m);
        if (p->k % p->l)
            return codec_errf(err, errlen, -EINVAL, "lrc: k=%d is not a multiple of l=%d", p->k,
                              p->l);
    } else if (p->l || p->r) {
        return codec_errf(err, errlen, -EINVAL, "%s: l and r are for lrc only",
                          codec_scheme_name(p->scheme));
    }
    return 0;
}

int codec_profile_format(const struct codec_profile *p, char *buf, size_t len)
{
    if (p->scheme == CODEC_LRC)
        return snprintf(buf, len, "lrc:k=%d,l=%d,r=%d", p->k, p->l, p->r);
    return snprintf(buf, len, "%s:k=%d,m=%d", codec_scheme_name(p->scheme), p->k, p->m);
}
