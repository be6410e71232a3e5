/*
 * The CPUs this process may use (cpus.h). A quota is found the way the
 * kernel applies it: the process's cgroup path (/proc/self/cgroup) under the
 * hierarchy's mount point (/proc/self/mountinfo), then every ancestor up to
 * that mount point, the smallest quota winning. Anything unreadable counts
 * as no quota: the affinity alone is never wrong, only generous.
 */
#include "node/cpus.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "placement/placement.h"

/* Whether the comma-separated list holds item. */
static bool has_item(const char *list, const char *item)
{
    size_t n = strlen(item);
    for (const char *p = list;; p++) {
        if (strncmp(p, item, n) == 0 && (p[n] == ',' || p[n] == 0))
            return true;
        if (!(p = strchr(p, ',')))
            return false;
    }
}

/* The process's cgroup path in the v2 hierarchy (v2) or in the v1 one that
 * holds the cpu controller; false when it has none. */
static bool cgroup_path(const char *fsroot, bool v2, char *path, size_t len)
{
    char file[PATH_MAX], line[4096];
    snprintf(file, sizeof(file), "%s/proc/self/cgroup", fsroot);
    FILE *f = fopen(file, "re");
    bool found = false;
    while (f && !found && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        char *ctrl = strchr(line, ':'), *p = ctrl ? strchr(ctrl + 1, ':') : NULL;
        if (!p)
            continue;
        *p++ = 0;
        *ctrl++ = 0; /* line: the hierarchy's number, ctrl: its controllers */
        if (v2 ? strcmp(line, "0") == 0 && !*ctrl : has_item(ctrl, "cpu"))
            found = snprintf(path, len, "%s", p) < (int)len;
    }
    if (f)
        fclose(f);
    return found;
}

/* The mount point and mount root of that hierarchy (mountinfo fields 5 and
 * 4; after " - ": the file system type and its options). */
static bool cgroup_mount(const char *fsroot, bool v2, char *point, char *root, size_t len)
{
    char file[PATH_MAX], line[4096];
    snprintf(file, sizeof(file), "%s/proc/self/mountinfo", fsroot);
    FILE *f = fopen(file, "re");
    bool found = false;
    while (f && !found && fgets(line, sizeof(line), f)) {
        char r[PATH_MAX], mp[PATH_MAX], type[64], opts[1024];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", r, mp) != 2 ||
            sscanf(dash + 3, "%63s %*s %1023s", type, opts) != 2)
            continue;
        if (v2 ? strcmp(type, "cgroup2") == 0
               : strcmp(type, "cgroup") == 0 && has_item(opts, "cpu"))
            found = snprintf(point, len, "%s", mp) < (int)len &&
                    snprintf(root, len, "%s", r) < (int)len;
    }
    if (f)
        fclose(f);
    return found;
}

static bool read_line(const char *file, char *buf, size_t len)
{
    FILE *f = fopen(file, "re");
    bool ok = f && fgets(buf, (int)len, f);
    if (f)
        fclose(f);
    return ok;
}

/* The quota of one cgroup directory, in CPUs rounded up; 0: none. */
static long dir_quota(const char *dir, bool v2)
{
    char file[PATH_MAX + 32], a[64], b[64];
    long long quota = -1, period = 0;
    if (v2) {
        char line[128];
        snprintf(file, sizeof(file), "%s/cpu.max", dir);
        if (read_line(file, line, sizeof(line)) && sscanf(line, "%63s %63s", a, b) == 2 &&
            strcmp(a, "max") != 0) {
            quota = atoll(a);
            period = atoll(b);
        }
    } else {
        snprintf(file, sizeof(file), "%s/cpu.cfs_quota_us", dir);
        if (read_line(file, a, sizeof(a)))
            quota = atoll(a);
        snprintf(file, sizeof(file), "%s/cpu.cfs_period_us", dir);
        if (read_line(file, b, sizeof(b)))
            period = atoll(b);
    }
    if (quota <= 0 || period <= 0)
        return 0;
    return (long)((quota + period - 1) / period);
}

/* The smallest quota from the process's cgroup up to its hierarchy's mount
 * point; 0: none. */
static long hierarchy_quota(const char *fsroot, bool v2)
{
    char path[PATH_MAX], point[PATH_MAX], root[PATH_MAX];
    if (!cgroup_path(fsroot, v2, path, sizeof(path)) ||
        !cgroup_mount(fsroot, v2, point, root, sizeof(point)))
        return 0;
    /* The path is from the hierarchy's root; the mount shows it from root. */
    size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
    const char *rel = strncmp(path, root, rl) == 0 ? path + rl : path;
    char dir[PATH_MAX];
    int base = snprintf(dir, sizeof(dir), "%s%s", fsroot, point);
    if (base < 0 || (size_t)base >= sizeof(dir) ||
        (size_t)snprintf(dir + base, sizeof(dir) - (size_t)base, "%s", rel) >=
            sizeof(dir) - (size_t)base)
        return 0;
    long best = 0;
    for (;;) {
        long q = dir_quota(dir, v2);
        if (q > 0 && (best == 0 || q < best))
            best = q;
        char *slash = strrchr(dir + base, '/');
        if (!slash)
            break;
        *slash = 0; /* the parent; the mount point itself last */
    }
    return best;
}

int node_usable_cpus_at(const char *fsroot)
{
    cpu_set_t set;
    long cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                             : sysconf(_SC_NPROCESSORS_ONLN);
    for (int v2 = 0; v2 < 2; v2++) {
        long q = hierarchy_quota(fsroot, v2);
        if (q > 0 && q < cpus)
            cpus = q;
    }
    return cpus > 0 ? (int)cpus : 1;
}

int node_usable_cpus(void)
{
    return node_usable_cpus_at("");
}

/* A wildcard listen address ("0.0.0.0:P", "[::]:P", ":P"): every address of
 * this machine. */
static bool wildcard_host(const char *host)
{
    return host[0] == ':' || (strncmp(host, "0.0.0.0", 7) == 0 && (!host[7] || host[7] == ':')) ||
           strcmp(host, "::") == 0 || strncmp(host, "[::]", 4) == 0;
}

/* The map's nodes on any address of this machine's interfaces, or "localhost". */
static int nodes_on_this_machine(const struct place_map *m)
{
    int n = place_map_nodes_on_host(m, "localhost");
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs))
        return n;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        char a[INET6_ADDRSTRLEN + 2] = "[";
        if (!i->ifa_addr)
            continue;
        if (i->ifa_addr->sa_family == AF_INET) {
            const struct sockaddr_in *in = (const struct sockaddr_in *)i->ifa_addr;
            if (!inet_ntop(AF_INET, &in->sin_addr, a, sizeof(a)))
                continue;
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)i->ifa_addr;
            if (!inet_ntop(AF_INET6, &in6->sin6_addr, a + 1, sizeof(a) - 2))
                continue;
            strcat(a, "]"); /* as a map writes it: [v6]:port */
        } else {
            continue;
        }
        n += place_map_nodes_on_host(m, a);
    }
    freeifaddrs(ifs);
    return n;
}

bool node_host_crowded(const struct place_map *m, const char *host)
{
    int here = wildcard_host(host) ? nodes_on_this_machine(m) : place_map_nodes_on_host(m, host);
    return here >= node_usable_cpus();
}
