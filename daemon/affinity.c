// SPDX-License-Identifier: MIT
#include "affinity.h"

int affinity_pick(const cpu_set_t *allowed, unsigned i)
{
	int n = CPU_COUNT(allowed), cpu;
	unsigned want;

	if (n <= 0)
		return -1;
	want = i % (unsigned)n;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, allowed) && !want--)
			return cpu;
	return -1;
}
