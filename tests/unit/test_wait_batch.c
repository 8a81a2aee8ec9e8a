// SPDX-License-Identifier: MIT
/* How many completions a worker's next wait asks for (wait_batch.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "wait_batch.h"

static void test_off_asks_for_one(void **state)
{
	struct wait_batch wb;

	(void)state;
	wb_init(&wb, 0);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(wb_ask(&wb, 1000, 7), 1);
		wb_took(&wb, 100, 0);
	}
	assert_int_equal(wb.want, 1);
}

static void test_few_connections_ask_for_one(void **state)
{
	struct wait_batch wb;

	(void)state;
	wb_init(&wb, 100);
	/* Under 16 connections a batch of two arrivals is too many to wait
	 * for: a lone client pinging would wait out every min wait. */
	for (int i = 0; i < 10; i++) {
		assert_int_equal(wb_ask(&wb, 15, 3), 1);
		wb_took(&wb, 5, 0);
	}
	assert_int_equal(wb_ask(&wb, 1, 1), 1);
}

static void test_grows_while_arrivals_keep_up(void **state)
{
	struct wait_batch wb;
	unsigned want = 1;

	(void)state;
	wb_init(&wb, 100);
	assert_int_equal(wb_ask(&wb, 256, 5), 1); /* a plain wait first */
	/* Each turn that took what it asked for doubles the ask... */
	for (int i = 0; i < 5; i++) {
		wb_took(&wb, want, 10);
		want *= 2;
		/* ...and a batched wait counts the sends that post at once. */
		assert_int_equal(wb_ask(&wb, 256, 4), 4 + want);
	}
	assert_int_equal(want, WB_MAX);
	wb_took(&wb, 100, 10);
	assert_int_equal(wb_ask(&wb, 256, 0), WB_MAX);
	/* 256 connections may ask for 32; 40 for 5. */
	assert_int_equal(wb_ask(&wb, 40, 1), 1 + 5);
}

static void test_shrinks_when_the_min_wait_runs_out(void **state)
{
	struct wait_batch wb;

	(void)state;
	wb_init(&wb, 100);
	for (int i = 0; i < 5; i++)
		wb_took(&wb, 64, 10);
	assert_int_equal(wb_ask(&wb, 256, 0), 32);
	/* Fewer came, but the wait ended early (a timer, a signal): keep. */
	wb_took(&wb, 3, 99);
	assert_int_equal(wb_ask(&wb, 256, 0), 32);
	/* Fewer came within the min wait: halve, down to a plain wait. */
	wb_took(&wb, 3, 100);
	assert_int_equal(wb_ask(&wb, 256, 0), 16);
	for (int i = 0; i < 4; i++)
		wb_took(&wb, 0, 150);
	assert_int_equal(wb.want, 1);
	assert_int_equal(wb_ask(&wb, 256, 9), 1);
	wb_took(&wb, 0, 150);
	assert_int_equal(wb.want, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off_asks_for_one),
		cmocka_unit_test(test_few_connections_ask_for_one),
		cmocka_unit_test(test_grows_while_arrivals_keep_up),
		cmocka_unit_test(test_shrinks_when_the_min_wait_runs_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
