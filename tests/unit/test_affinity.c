// SPDX-License-Identifier: MIT
/* worker_cpu_affinity auto: worker i gets the i-th allowed CPU, gaps in
 * the set skipped, wrapping when there are more workers than CPUs, and
 * none from an empty set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "affinity.h"

static void test_all_cpus(void **state)
{
	cpu_set_t s;

	(void)state;
	CPU_ZERO(&s);
	CPU_SET(0, &s);
	CPU_SET(1, &s);
	assert_int_equal(affinity_pick(&s, 0), 0);
	assert_int_equal(affinity_pick(&s, 1), 1);
	assert_int_equal(affinity_pick(&s, 2), 0); /* wraps */
	assert_int_equal(affinity_pick(&s, 3), 1);
}

static void test_gaps(void **state)
{
	cpu_set_t s;

	(void)state;
	CPU_ZERO(&s);
	CPU_SET(2, &s);
	CPU_SET(5, &s);
	CPU_SET(6, &s);
	assert_int_equal(affinity_pick(&s, 0), 2);
	assert_int_equal(affinity_pick(&s, 1), 5);
	assert_int_equal(affinity_pick(&s, 2), 6);
	assert_int_equal(affinity_pick(&s, 3), 2);
	assert_int_equal(affinity_pick(&s, 256), 5); /* 256 % 3 */
}

static void test_last_cpu(void **state)
{
	cpu_set_t s;

	(void)state;
	CPU_ZERO(&s);
	CPU_SET(CPU_SETSIZE - 1, &s);
	assert_int_equal(affinity_pick(&s, 0), CPU_SETSIZE - 1);
	assert_int_equal(affinity_pick(&s, 7), CPU_SETSIZE - 1);
}

static void test_empty(void **state)
{
	cpu_set_t s;

	(void)state;
	CPU_ZERO(&s);
	assert_int_equal(affinity_pick(&s, 0), -1);
	assert_int_equal(affinity_pick(&s, 5), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_cpus),
		cmocka_unit_test(test_gaps),
		cmocka_unit_test(test_last_cpu),
		cmocka_unit_test(test_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
