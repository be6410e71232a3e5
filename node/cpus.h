/*
 * How many CPUs this process may use: the CPUs of its affinity, capped by a
 * cgroup CPU quota on its cgroup or any ancestor (cgroup v2 cpu.max, v1
 * cpu.cfs_quota_us / cpu.cfs_period_us), rounded up. A container started
 * with `docker run --cpus=2`, or a Kubernetes pod with a CPU limit, sees
 * every core of its host in its affinity but may only run on 2 of them.
 * And whether the nodes of a host are as many as those CPUs (their engines
 * then must not spin).
 */
#pragma once

#include <stdbool.h>

/* At least 1. */
int node_usable_cpus(void);

/* The same, reading /proc/self/{cgroup,mountinfo} and the cgroup files
 * under fsroot ("" for /): a test's fake tree. */
int node_usable_cpus_at(const char *fsroot);

struct place_map;

/* Whether a machine that runs this process and the map's nodes on `host` has
 * more engines than cores: as many such nodes as CPUs this process may use
 * (node_usable_cpus: its affinity, capped by a cgroup CPU quota), a gateway
 * beside them. Its devices then open spin=0. A wildcard host (0.0.0.0, [::])
 * is this machine: the nodes on any of its interfaces' addresses count. */
bool node_host_crowded(const struct place_map *m, const char *host);
