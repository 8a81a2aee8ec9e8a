// SPDX-License-Identifier: MIT
/* Slot allocator: exhaustion, waiters, reuse only after free, reserved
 * numbers, counters. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "slots.h"

static void test_init_rejects_bad_ranges(void **state)
{
	struct slots s;

	(void)state;
	assert_int_equal(slots_init(&s, 0, 0), -EINVAL);
	assert_int_equal(slots_init(&s, -1, 4), -EINVAL);
	assert_int_equal(slots_init(&s, 0x7fffffff, 2), -EINVAL);
}

static void test_alloc_in_range_lowest_first(void **state)
{
	struct slots s;

	(void)state;
	assert_int_equal(slots_init(&s, 100, 4), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(slots_alloc(&s), 100 + i);
	assert_true(slots_contains(&s, 100));
	assert_true(slots_contains(&s, 103));
	assert_false(slots_contains(&s, 99));
	assert_false(slots_contains(&s, 104));
	slots_destroy(&s);
}

static void test_exhaustion_counts_waits(void **state)
{
	struct slots s;

	(void)state;
	assert_int_equal(slots_init(&s, 0, 2), 0);
	assert_true(slots_alloc(&s) >= 0);
	assert_true(slots_alloc(&s) >= 0);
	assert_int_equal(slots_available(&s), 0);
	assert_int_equal(slots_alloc(&s), -EAGAIN);
	assert_int_equal(slots_alloc(&s), -EAGAIN);
	assert_int_equal(s.waits, 2);
	assert_int_equal(s.inuse, 2);
	slots_destroy(&s);
}

static void test_reuse_only_after_free(void **state)
{
	struct slots s;
	int seen[8] = {0};

	(void)state;
	assert_int_equal(slots_init(&s, 10, 8), 0);
	int a = slots_alloc(&s);

	/* While a is held (its close not completed) it is never handed out,
	 * however many other numbers come and go. */
	for (int round = 0; round < 100; round++) {
		int b = slots_alloc(&s);

		assert_true(b >= 10 && b < 18);
		assert_int_not_equal(b, a);
		seen[b - 10]++;
		assert_null(slots_free(&s, b, NULL));
	}
	assert_int_equal(seen[a - 10], 0);
	assert_null(slots_free(&s, a, NULL));
	/* Now free: it may come back. */
	int found = 0;
	int got[8];

	for (int i = 0; i < 8; i++) {
		got[i] = slots_alloc(&s);
		found |= got[i] == a;
	}
	assert_true(found);
	for (int i = 0; i < 8; i++)
		assert_null(slots_free(&s, got[i], NULL));
	slots_destroy(&s);
}

static void test_double_free_and_out_of_range(void **state)
{
	struct slots s;
	int err;

	(void)state;
	assert_int_equal(slots_init(&s, 5, 3), 0);
	int a = slots_alloc(&s);

	assert_null(slots_free(&s, a, &err));
	assert_int_equal(err, 0);
	assert_null(slots_free(&s, a, &err));
	assert_int_equal(err, -EINVAL);
	assert_null(slots_free(&s, 4, &err));
	assert_int_equal(err, -ERANGE);
	assert_null(slots_free(&s, 8, &err));
	assert_int_equal(err, -ERANGE);
	assert_int_equal(s.inuse, 0);
	assert_int_equal(slots_available(&s), 3);
	slots_destroy(&s);
}

static void test_counters_peak(void **state)
{
	struct slots s;
	int n[5];

	(void)state;
	assert_int_equal(slots_init(&s, 0, 5), 0);
	for (int i = 0; i < 4; i++)
		n[i] = slots_alloc(&s);
	assert_int_equal(s.inuse, 4);
	assert_int_equal(s.peak, 4);
	for (int i = 0; i < 3; i++)
		slots_free(&s, n[i], NULL);
	assert_int_equal(s.inuse, 1);
	assert_int_equal(s.peak, 4);
	n[0] = slots_alloc(&s);
	assert_int_equal(s.peak, 4);
	slots_free(&s, n[0], NULL);
	slots_free(&s, n[3], NULL);
	assert_int_equal(s.inuse, 0);
	assert_int_equal(s.peak, 4);
	assert_int_equal(s.waits, 0);
	slots_destroy(&s);
}

static void test_waiters_fifo_handover(void **state)
{
	struct slots s;
	struct slot_waiter w1, w2, w3;

	(void)state;
	assert_int_equal(slots_init(&s, 0, 2), 0);
	int a = slots_alloc_or_wait(&s, &w1);
	int b = slots_alloc_or_wait(&s, &w1);

	assert_true(a >= 0 && b >= 0);
	assert_int_equal(slots_alloc_or_wait(&s, &w1), -EAGAIN);
	assert_int_equal(slots_alloc_or_wait(&s, &w2), -EAGAIN);
	assert_int_equal(slots_alloc_or_wait(&s, &w3), -EAGAIN);
	assert_int_equal(s.waits, 3);
	/* w2 goes away before any slot frees up. */
	slots_cancel_wait(&s, &w2);
	assert_false(w2.queued);

	/* Freed numbers go to the oldest waiter, not the free stack: new
	 * callers cannot overtake queued work. */
	assert_ptr_equal(slots_free(&s, b, NULL), &w1);
	assert_int_equal(w1.slot, b);
	assert_int_equal(s.inuse, 2);
	assert_int_equal(slots_alloc(&s), -EAGAIN);
	assert_ptr_equal(slots_free(&s, a, NULL), &w3);
	assert_int_equal(w3.slot, a);
	/* Queue empty: frees go back to the stack. */
	assert_null(slots_free(&s, w1.slot, NULL));
	assert_null(slots_free(&s, w3.slot, NULL));
	assert_int_equal(s.inuse, 0);
	assert_int_equal(slots_available(&s), 2);
	slots_destroy(&s);
}

static void test_cancel_wait_tail_keeps_queue(void **state)
{
	struct slots s;
	struct slot_waiter w1, w2;

	(void)state;
	assert_int_equal(slots_init(&s, 0, 1), 0);
	int a = slots_alloc(&s);

	assert_int_equal(slots_alloc_or_wait(&s, &w1), -EAGAIN);
	assert_int_equal(slots_alloc_or_wait(&s, &w2), -EAGAIN);
	slots_cancel_wait(&s, &w2); /* the tail */
	slots_cancel_wait(&s, &w2); /* idempotent */
	assert_int_equal(slots_alloc_or_wait(&s, &w2), -EAGAIN);
	assert_ptr_equal(slots_free(&s, a, NULL), &w1);
	assert_ptr_equal(slots_free(&s, w1.slot, NULL), &w2);
	assert_null(slots_free(&s, w2.slot, NULL));
	slots_destroy(&s);
}

static void test_reserved_never_handed_out(void **state)
{
	struct slots s;

	(void)state;
	assert_int_equal(slots_init(&s, 20, 6), 0);
	assert_int_equal(slots_mark_reserved(&s, 21), 0);
	assert_int_equal(slots_mark_reserved(&s, 24), 0);
	assert_int_equal(slots_mark_reserved(&s, 24), 0);
	assert_int_equal(slots_mark_reserved(&s, 26), -ERANGE);
	assert_int_equal(s.reserved, 2);
	assert_int_equal(slots_available(&s), 4);
	int got[4];

	for (int i = 0; i < 4; i++) {
		got[i] = slots_alloc(&s);
		assert_int_not_equal(got[i], 21);
		assert_int_not_equal(got[i], 24);
	}
	assert_int_equal(got[0], 20);
	assert_int_equal(got[1], 22);
	assert_int_equal(slots_alloc(&s), -EAGAIN);
	assert_int_equal(slots_mark_reserved(&s, got[0]), -EBUSY);
	/* A reserved number cannot be "freed" into circulation. */
	int err;

	assert_null(slots_free(&s, 21, &err));
	assert_int_equal(err, -EINVAL);
	slots_destroy(&s);
}

/* The specific engine's case: a range of real fd numbers, some of which
 * were already open before the range was reserved. */
static void test_range_with_preexisting_fds(void **state)
{
	struct slots s;
	int fds[3];

	(void)state;
	int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);

	assert_true(probe >= 0);
	close(probe);
	/* Open three fds at known numbers inside [base, base + 16). */
	int base = probe + 64;

	for (int i = 0; i < 3; i++) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		assert_true(fd >= 0);
		fds[i] = dup3(fd, base + 3 * i + 1, O_CLOEXEC);
		assert_int_equal(fds[i], base + 3 * i + 1);
		close(fd);
	}
	assert_int_equal(slots_init(&s, base, 16), 0);
	assert_int_equal(slots_reserve_open_fds(&s), 3);
	assert_int_equal(slots_available(&s), 13);
	for (int i = 0; i < 13; i++) {
		int n = slots_alloc(&s);

		assert_true(n >= base && n < base + 16);
		for (int j = 0; j < 3; j++)
			assert_int_not_equal(n, fds[j]);
		/* and the number really is free in the fd table */
		assert_int_equal(fcntl(n, F_GETFD), -1);
		assert_int_equal(errno, EBADF);
	}
	assert_int_equal(slots_alloc(&s), -EAGAIN);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	slots_destroy(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_rejects_bad_ranges),
		cmocka_unit_test(test_alloc_in_range_lowest_first),
		cmocka_unit_test(test_exhaustion_counts_waits),
		cmocka_unit_test(test_reuse_only_after_free),
		cmocka_unit_test(test_double_free_and_out_of_range),
		cmocka_unit_test(test_counters_peak),
		cmocka_unit_test(test_waiters_fifo_handover),
		cmocka_unit_test(test_cancel_wait_tail_keeps_queue),
		cmocka_unit_test(test_reserved_never_handed_out),
		cmocka_unit_test(test_range_with_preexisting_fds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
