/* Looks up the embedded dashboard files. */
#include "gateway/dashboard.h"

#include <string.h>

const char *const gw_dashboard_headers[] = {
    "Content-Security-Policy",
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options",
    "nosniff",
    "X-Frame-Options",
    "DENY",
    "Referrer-Policy",
    "no-referrer",
    NULL,
};

const struct gw_dashboard_asset *gw_dashboard_find(const char *url)
{
    if (strcmp(url, "/index.html") == 0 || strcmp(url, "/ui/") == 0 || strcmp(url, "/ui") == 0)
        url = "/";
    for (const struct gw_dashboard_asset *a = gw_dashboard_assets; a->url; a++)
        if (strcmp(a->url, url) == 0)
            return a;
    return NULL;
}
