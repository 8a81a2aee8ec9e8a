/* SPDX-License-Identifier: MIT */
/* worker_cpu_affinity auto: which CPU each worker is pinned to. Pure. */
#ifndef ORCD_AFFINITY_H
#define ORCD_AFFINITY_H

#include <sched.h>

/*
 * The CPU for worker i: the i-th CPU of the allowed set (the process's,
 * as started: a cpuset or taskset may leave gaps), wrapping around when
 * there are more workers than CPUs. -1 when the set is empty.
 */
int affinity_pick(const cpu_set_t *allowed, unsigned i);

#endif
