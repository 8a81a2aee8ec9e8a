// SPDX-License-Identifier: MIT
/* How many completions a worker's next wait asks for (wait_batch.h). */
#include <setjmp.h>
#include <stdbool.h>
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

static void test_grows_while_clients_keep_up(void **state)
{
	struct wait_batch wb;
	unsigned want = 1, ask = 1;

	(void)state;
	wb_init(&wb, 100);
	assert_int_equal(wb_ask(&wb, 256, 5), 1); /* a plain wait first */
	/* Each filled wait that brought what it asked for, two or more,
	 * doubles the ask... */
	for (int i = 0; i < 5; i++) {
		wb_took(&wb, ask, ask + 64, 64, 10);
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
	wb_took(&wb, 1, 5, 3, 10);
	assert_int_equal(wb.want, 4);
	/* Filled, but by the worker's own completions more than by
	 * arrivals: no sign that more clients wait. */
	wb_took(&wb, 6, 6, 3, 10);
	assert_int_equal(wb.want, 4);
	wb_took(&wb, 6, 6, 4, 10);
	assert_int_equal(wb.want, 8);
}

/* Clients served in groups: a turn serves `groups[g]` of them, the next
 * wait can bring only those served the turn before. Returns run-outs in
 * 1000 turns. */
static unsigned replay_groups(const unsigned *groups, unsigned n_groups)
{
	struct wait_batch wb;
	unsigned run_outs = 0, sends = 0;

	wb_init(&wb, 100);
	for (unsigned i = 0; i < 1000; i++) {
		unsigned ask = wb_ask(&wb, 256, sends);
		/* The group served two turns ago has its recvs armed. */
		unsigned arrivals = groups[(i + 1) % n_groups];
		unsigned took = sends + arrivals;
		bool out = took < ask;

		run_outs += out;
		wb_took(&wb, ask, took, arrivals, out ? 100 : 10);
		sends = arrivals;
	}
	return run_outs;
}

static void test_clients_in_step_rarely_run_out(void **state)
{
	/* Two clients served together; groups of three and one; two
	 * groups of eight: every wait asking for more than the group that
	 * can come runs out. The backoff doubles with each run-out, so about log2(1000)
	 * of them. */
	const unsigned two[] = {2, 0}, three_one[] = {3, 1},
		       eight_eight[] = {8, 8};

	(void)state;
	assert_true(replay_groups(two, 2) <= 12);
	assert_true(replay_groups(three_one, 2) <= 12);
	assert_true(replay_groups(eight_eight, 2) <= 12);
}

static void test_runs_out_halves_and_holds(void **state)
{
	struct wait_batch wb;
	unsigned ask;

	(void)state;
	wb_init(&wb, 100);
	for (int i = 0; i < 6; i++)
		wb_took(&wb, 1, 64, 64, 10);
	ask = wb_ask(&wb, 256, 0);
	assert_int_equal(ask, 32);
	/* Unfilled, but the wait ended early (a timer, a signal): keep. */
	wb_took(&wb, ask, 3, 3, 99);
	assert_int_equal(wb.want, 32);
	/* Unfilled within the min wait: halve, and hold for a turn. */
	wb_took(&wb, ask, 3, 3, 100);
	assert_int_equal(wb.want, 16);
	wb_took(&wb, 16, 40, 40, 10);
	assert_int_equal(wb.want, 16); /* held */
	/* Filled at 16, below the 32 that ran out: the backoff stays. */
	wb_took(&wb, 16, 40, 40, 10);
	assert_int_equal(wb.want, 32);
	/* A send that did not post at once (a full socket) leaves a wait
	 * unfilled although every arrival asked for came. */
	ask = wb_ask(&wb, 256, 4);
	assert_int_equal(ask, 4 + 32);
	wb_took(&wb, ask, 35, 32, 150);
	assert_int_equal(wb.want, 16);
	wb_took(&wb, 16, 40, 40, 10);
	wb_took(&wb, 16, 40, 40, 10);
	assert_int_equal(wb.want, 16); /* held for two now */
	wb_took(&wb, 16, 40, 40, 10);
	assert_int_equal(wb.want, 32);
	/* A batch as large as the one that ran out filled: the next
	 * run-out holds for one turn again. */
	wb_took(&wb, 32, 40, 40, 10);
	wb_took(&wb, 32, 0, 0, 150);
	assert_int_equal(wb.want, 16);
	wb_took(&wb, 16, 40, 40, 10);
	wb_took(&wb, 16, 40, 40, 10);
	assert_int_equal(wb.want, 32);
	/* A plain wait that found nothing (the idle tick) is no run-out. */
	for (int i = 0; i < 6; i++)
		wb_took(&wb, 32, 0, 0, 150);
	assert_int_equal(wb.want, 1);
	wb_took(&wb, 1, 0, 0, 1000000);
	wb_took(&wb, 1, 5, 5, 10);
	assert_int_equal(wb.want, 1); /* held by the run-outs above */
	assert_int_equal(wb_ask(&wb, 256, 9), 1);
	/* The backoff is bounded. */
	for (int i = 0; i < 20; i++)
		wb_took(&wb, 8, 0, 0, 150);
	assert_int_equal(wb.backoff, WB_BACKOFF_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off_asks_for_one),
		cmocka_unit_test(test_few_connections_ask_for_one),
		cmocka_unit_test(test_a_lone_client_among_idle_connections),
		cmocka_unit_test(test_grows_while_clients_keep_up),
		cmocka_unit_test(test_filled_by_own_completions_keeps_the_ask),
		cmocka_unit_test(test_clients_in_step_rarely_run_out),
		cmocka_unit_test(test_runs_out_halves_and_holds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
