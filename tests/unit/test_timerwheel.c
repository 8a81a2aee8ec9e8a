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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_due_only),
		cmocka_unit_test(test_rearm_and_cancel),
		cmocka_unit_test(test_long_timers_survive_turns),
		cmocka_unit_test(test_far_behind_sees_everything),
		cmocka_unit_test(test_already_due_when_armed),
		cmocka_unit_test(test_wait_bound),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
