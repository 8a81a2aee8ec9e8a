// SPDX-License-Identifier: MIT
/* The worker's timer wheel: due timers come out, early ones do not,
 * re-arming moves, cancelling removes, long timers survive turns, and the
 * wait bound points at the next busy slot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "timerwheel.h"

static struct timerwheel *new_wheel(int64_t now)
{
	struct timerwheel *w = malloc(sizeof(*w));

	assert_non_null(w);
	tw_init(w, now);
	return w;
}

static void test_due_only(void **state)
{
	struct timerwheel *w = new_wheel(1000);
	struct tw_timer a = {0}, b = {0};

	(void)state;
	tw_arm(w, &a, 1100);
	tw_arm(w, &b, 1500);
	assert_null(tw_expire(w, 1099));
	assert_ptr_equal(tw_expire(w, 1100), &a);
	assert_false(tw_armed(&a));
	assert_null(tw_expire(w, 1499));
	assert_ptr_equal(tw_expire(w, 2000), &b);
	assert_null(tw_expire(w, 2000));
	assert_int_equal(w->armed, 0);
	free(w);
}

static void test_rearm_and_cancel(void **state)
{
	struct timerwheel *w = new_wheel(0);
	struct tw_timer a = {0}, b = {0};

	(void)state;
	tw_arm(w, &a, 50);
	tw_arm(w, &a, 5000); /* progress: moved, not doubled */
	assert_int_equal(w->armed, 1);
	assert_null(tw_expire(w, 100));
	tw_arm(w, &b, 60);
	tw_cancel(w, &b);
	tw_cancel(w, &b); /* twice is harmless */
	assert_null(tw_expire(w, 200));
	assert_ptr_equal(tw_expire(w, 5000), &a);
	free(w);
}

static void test_long_timers_survive_turns(void **state)
{
	/* 60 s is several turns of the wheel: earlier turns leave it be. */
	struct timerwheel *w = new_wheel(0);
	struct tw_timer a = {0};

	(void)state;
	tw_arm(w, &a, 60000);
	for (int64_t t = 0; t < 60000; t += 7)
		assert_null(tw_expire(w, t));
	assert_ptr_equal(tw_expire(w, 60003), &a);
	free(w);
}

static void test_far_behind_sees_everything(void **state)
{
	/* A loop that slept through many turns still finds every due timer
	 * once, and the ones not due stay. */
	struct timerwheel *w = new_wheel(0);
	struct tw_timer t[100] = {{0}};
	struct tw_timer late = {0};
	int n = 0;

	(void)state;
	for (int i = 0; i < 100; i++)
		tw_arm(w, &t[i], 10 + i * 97);
	tw_arm(w, &late, 200000);
	while (tw_expire(w, 100000))
		n++;
	assert_int_equal(n, 100);
	assert_true(tw_armed(&late));
	assert_ptr_equal(tw_expire(w, 200000), &late);
	free(w);
}

static void test_already_due_when_armed(void **state)
{
	struct timerwheel *w = new_wheel(1000);
	struct tw_timer a = {0};

	(void)state;
	assert_null(tw_expire(w, 1000));
	tw_arm(w, &a, 500); /* in the past */
	assert_ptr_equal(tw_expire(w, 1000), &a);
	free(w);
}

static void test_wait_bound(void **state)
{
	struct timerwheel *w = new_wheel(0);
	struct tw_timer a = {0}, b = {0};

	(void)state;
	assert_int_equal(tw_wait_ms(w, 0, 1000), 1000); /* nothing armed */
	tw_arm(w, &a, 400);
	assert_true(tw_wait_ms(w, 0, 1000) <= 400);
	assert_true(tw_wait_ms(w, 0, 1000) >= 400 - TW_RES_MS);
	assert_int_equal(tw_wait_ms(w, 0, 100), 100); /* capped */
	tw_arm(w, &b, 30);
	assert_true(tw_wait_ms(w, 0, 1000) <= 30);
	tw_cancel(w, &b);
	tw_cancel(w, &a);
	tw_arm(w, &a, 100000); /* beyond one turn: woken early, not late */
	assert_true(tw_wait_ms(w, 0, 20000) <= 20000);
	free(w);
}

/* Time that went on without an expire (a caller that asks for the wait
 * first): a timer that fell due meanwhile is due now, not skipped with
 * the ticks the wheel has not walked yet. */
static void test_wait_after_time_moved_on(void **state)
{
	struct timerwheel *w = new_wheel(0);
	struct tw_timer a = {0};

	(void)state;
	tw_arm(w, &a, 30);
	assert_int_equal(tw_wait_ms(w, 200, 1000), 0);
	assert_ptr_equal(tw_expire(w, 200), &a);
	assert_null(tw_expire(w, 200));
	assert_int_equal(tw_wait_ms(w, 200, 1000), 1000);
	/* Far on, with a timer of a later turn: never a negative wait. */
	tw_arm(w, &a, 100000);
	assert_in_range(tw_wait_ms(w, 5000, 1000), 0, 1000);
	assert_null(tw_expire(w, 5000));
	assert_in_range(tw_wait_ms(w, 5000, 1000), 1, 1000);
	free(w);
}

/* A sooner timer joining a slot that holds a later turn's timer makes
 * the slot's soonest deadline its own: the wait ends at it, not at the
 * scan's end. */
static void test_sooner_timer_in_a_busy_slot(void **state)
{
	struct timerwheel *w = new_wheel(0);
	struct tw_timer a = {0}, b = {0};

	(void)state;
	tw_arm(w, &a, 60000);
	tw_arm(w, &b, 2660);
	assert_null(tw_expire(w, 2600));
	assert_int_equal(tw_wait_ms(w, 2600, 1000), 60);
	assert_ptr_equal(tw_expire(w, 2660), &b);
	free(w);
}

static void test_later_turns_wake_nobody(void **state)
{
	/* 60 s (an idle timeout) is in a slot the wheel passes seven times
	 * first. Each time, the wait used to say 0 from the slot's tick
	 * start to its end: an io_uring worker with idle connections spun. */
	struct timerwheel *w = new_wheel(0);
	struct tw_timer a = {0};
	int64_t t = 60000 % (TW_SLOTS * TW_RES_MS); /* its slot, turn one */

	(void)state;
	tw_arm(w, &a, 60000);
	for (int64_t now = t - TW_RES_MS; now < t + 2 * TW_RES_MS; now++) {
		assert_null(tw_expire(w, now));
		assert_int_equal(tw_wait_ms(w, now, 1000), 1000);
	}
	/* In its own turn it is the next wake-up, to the millisecond. */
	assert_null(tw_expire(w, 59990));
	assert_int_equal(tw_wait_ms(w, 59990, 1000), 10);
	assert_ptr_equal(tw_expire(w, 60000), &a);
	free(w);
}

static void test_due_later_in_the_current_tick(void **state)
{
	/* Due 5 ms into the tick being served: wait those 5 ms, not 0. */
	struct timerwheel *w = new_wheel(800);
	struct tw_timer a = {0};

	(void)state;
	tw_arm(w, &a, 806);
	assert_null(tw_expire(w, 801));
	assert_int_equal(tw_wait_ms(w, 801, 1000), 5);
	assert_ptr_equal(tw_expire(w, 806), &a);
	free(w);
}

static void test_many_in_one_slot(void **state)
{
	/* Later turns' timers ahead of due ones in one slot: every due one
	 * comes out once, in arming order, the others stay; a callback may
	 * cancel or re-arm one found due and not yet handed out. */
	enum { N = 2000 };
	struct timerwheel *w = new_wheel(0);
	struct tw_timer *late = calloc(N, sizeof(*late));
	struct tw_timer *soon = calloc(N, sizeof(*soon));
	int64_t turn = TW_SLOTS * TW_RES_MS;

	(void)state;
	assert_non_null(late);
	assert_non_null(soon);
	for (int i = 0; i < N; i++)
		tw_arm(w, &late[i], turn + 100);
	for (int i = 0; i < N; i++)
		tw_arm(w, &soon[i], 100);
	assert_ptr_equal(tw_expire(w, 100), &soon[0]);
	tw_cancel(w, &soon[1]);
	tw_arm(w, &soon[2], 2 * turn);
	for (int i = 3; i < N; i++)
		assert_ptr_equal(tw_expire(w, 100), &soon[i]);
	assert_null(tw_expire(w, 100));
	assert_int_equal(w->armed, N + 1);
	/* Next looked at when its turn begins: early, never late. */
	assert_true(tw_wait_ms(w, 100, 100000) <= turn);
	assert_true(tw_wait_ms(w, 100, 100000) >= turn - TW_RES_MS);
	for (int i = 0; i < N; i++)
		assert_ptr_equal(tw_expire(w, turn + 100), &late[i]);
	assert_null(tw_expire(w, turn + 100));
	assert_ptr_equal(tw_expire(w, 2 * turn), &soon[2]);
	assert_int_equal(w->armed, 0);
	free(late);
	free(soon);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_due_only),
		cmocka_unit_test(test_rearm_and_cancel),
		cmocka_unit_test(test_long_timers_survive_turns),
		cmocka_unit_test(test_far_behind_sees_everything),
		cmocka_unit_test(test_already_due_when_armed),
		cmocka_unit_test(test_wait_bound),
		cmocka_unit_test(test_wait_after_time_moved_on),
		cmocka_unit_test(test_sooner_timer_in_a_busy_slot),
		cmocka_unit_test(test_later_turns_wake_nobody),
		cmocka_unit_test(test_due_later_in_the_current_tick),
		cmocka_unit_test(test_many_in_one_slot),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
