/*
 * How many CPUs this process may use: the CPUs of its affinity, capped by a
 * cgroup CPU quota on its cgroup or any ancestor (cgroup v2 cpu.max, v1
 * cpu.cfs_quota_us / cpu.cfs_period_us), rounded up. A container started
 * with `docker run --cpus=2`, or a Kubernetes pod with a CPU limit, sees
 * every core of its host in its affinity but may only run on 2 of them.
 */
#pragma once

/* At least 1. */
int node_usable_cpus(void);

/* The same, reading /proc/self/{cgroup,mountinfo} and the cgroup files
 * under fsroot ("" for /): a test's fake tree. */
int node_usable_cpus_at(const char *fsroot);
