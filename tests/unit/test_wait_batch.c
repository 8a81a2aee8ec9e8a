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
		wb_took(&wb, 1, 100, 100, 0);
	}
	assert_int_equal(wb.want, 1);
}

static void test_few_connections_ask_for_one(void **state)
{
	struct wait_batch wb;

	(void)state;
	wb_init(&wb, 100);
	/* Under 16 connections a batch of two arrivals is too many to wait
	 * for. */
	for (int i = 0; i < 10; i++) {
		assert_int_equal(wb_ask(&wb, 15, 3), 1);
		wb_took(&wb, 1, 5, 5, 0);
	}
	assert_int_equal(wb_ask(&wb, 1, 1), 1);
}

static void test_a_lone_client_among_idle_connections(void **state)
{
	struct wait_batch wb;

	(void)state;
	wb_init(&wb, 100);
	/* One arrival per turn (its request; its send's CQE is not one)
	 * is what a plain wait asks for: never more, with 256 connections
	 * open but idle. */
	for (int i = 0; i < 10; i++) {
		assert_int_equal(wb_ask(&wb, 256, 1), 1);
		wb_took(&wb, 1, 2, 1, 20);
	}
	assert_int_equal(wb.want, 1);
}

static void test_grows_while_more_arrive_than_asked(void **state)
{
	struct wait_batch wb;
	unsigned want = 1, ask = 1;

	(void)state;
	wb_init(&wb, 100);
	assert_int_equal(wb_ask(&wb, 256, 5), 1); /* a plain wait first */
	/* Each filled wait that brought more arrivals than it asked for
	 * doubles the ask... */
	for (int i = 0; i < 5; i++) {
		wb_took(&wb, ask, ask + 1, want + 1, 10);
		want *= 2;
		/* ...and a batched wait counts the sends that post at once. */
		ask = wb_ask(&wb, 256, 4);
		assert_int_equal(ask, 4 + want);
	}
	assert_int_equal(want, WB_MAX);
	wb_took(&wb, ask, 100, 100, 10);
	assert_int_equal(wb_ask(&wb, 256, 0), WB_MAX);
	/* 256 connections may ask for 32; 40 for 5. */
	assert_int_equal(wb_ask(&wb, 40, 1), 1 + 5);
}

static void test_filled_by_own_completions_keeps_the_ask(void **state)
{
	struct wait_batch wb;

	(void)state;
	wb_init(&wb, 100);
	wb_took(&wb, 1, 3, 3, 10);
	wb_took(&wb, 3, 5, 3, 10);
	assert_int_equal(wb.want, 4);
	/* Filled, but by the worker's own completions more than by
	 * arrivals: no sign that more clients wait. */
	wb_took(&wb, 6, 6, 3, 10);
	assert_int_equal(wb.want, 4);
	wb_took(&wb, 6, 6, 4, 10);
	assert_int_equal(wb.want, 8);
}

static void test_shrinks_when_the_min_wait_runs_out(void **state)
{
	struct wait_batch wb;
	unsigned ask;

	(void)state;
	wb_init(&wb, 100);
	for (int i = 0; i < 5; i++)
		wb_took(&wb, 1, 64, 64, 10);
	ask = wb_ask(&wb, 256, 0);
	assert_int_equal(ask, 32);
	/* Unfilled, but the wait ended early (a timer, a signal): keep. */
	wb_took(&wb, ask, 3, 3, 99);
	assert_int_equal(wb_ask(&wb, 256, 0), 32);
	/* Unfilled within the min wait: halve, down to a plain wait. */
	wb_took(&wb, ask, 3, 3, 100);
	assert_int_equal(wb_ask(&wb, 256, 0), 16);
	/* A send that did not post at once (a full socket) leaves the
	 * wait unfilled although every arrival asked for came. */
	ask = wb_ask(&wb, 256, 4);
	assert_int_equal(ask, 20);
	wb_took(&wb, ask, 19, 16, 150);
	assert_int_equal(wb.want, 8);
	for (int i = 0; i < 3; i++)
		wb_took(&wb, 8, 0, 0, 150);
	assert_int_equal(wb.want, 1);
	assert_int_equal(wb_ask(&wb, 256, 9), 1);
	wb_took(&wb, 1, 0, 0, 150);
	assert_int_equal(wb.want, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off_asks_for_one),
		cmocka_unit_test(test_few_connections_ask_for_one),
		cmocka_unit_test(test_a_lone_client_among_idle_connections),
		cmocka_unit_test(test_grows_while_more_arrive_than_asked),
		cmocka_unit_test(test_filled_by_own_completions_keeps_the_ask),
		cmocka_unit_test(test_shrinks_when_the_min_wait_runs_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
