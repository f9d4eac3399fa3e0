/* SPDX-License-Identifier: MIT */
/* test_queue.c: unit tests of daemon/queue: the FIFO of waiting lease requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "state/queue.h"

#define N 5

/* The waiters' timers are never started: the queue does not touch them. */
static struct waiter waiters[N];

static int reset(void **state)
{
	(void)state;
	memset(waiters, 0, sizeof(waiters));
	for (unsigned i = 0; i < N; i++)
		waiters[i].request_id = 100 + i;
	return 0;
}

/* assert_order checks that q holds exactly the waiters with these indices, head first. */
static void assert_order(const struct queue *q, const unsigned *idx, unsigned n)
{
	const struct waiter *it;
	unsigned i = 0;

	assert_int_equal(q->count, n);
	assert_int_equal(queue_empty(q), n == 0);
	TAILQ_FOREACH (it, &q->head, queue_link) {
		assert_true(i < n);
		assert_ptr_equal(it, &waiters[idx[i]]);
		assert_int_equal(queue_position(q, it), i);
		i++;
	}
	assert_int_equal(i, n);
	if (n > 0)
		assert_ptr_equal(queue_head(q), &waiters[idx[0]]);
	else
		assert_null(queue_head(q));
}

static void push_all(struct queue *q)
{
	queue_init(q);
	for (unsigned i = 0; i < N; i++)
		queue_push(q, &waiters[i]);
}

static void test_empty(void **state)
{
	struct queue q;

	(void)state;
	memset(&q, 0xff, sizeof(q));
	queue_init(&q);
	assert_true(queue_empty(&q));
	assert_int_equal(q.count, 0);
	assert_null(queue_head(&q));
}

static void test_fifo(void **state)
{
	static const unsigned all[N] = {0, 1, 2, 3, 4};
	struct queue q;

	(void)state;
	queue_init(&q);
	queue_push(&q, &waiters[0]);
	assert_false(queue_empty(&q));
	assert_int_equal(q.count, 1);
	assert_ptr_equal(queue_head(&q), &waiters[0]);
	assert_int_equal(queue_position(&q, &waiters[0]), 0);
	for (unsigned i = 1; i < N; i++)
		queue_push(&q, &waiters[i]);
	assert_order(&q, all, N);

	/* Popping the head repeatedly yields arrival order. */
	for (unsigned i = 0; i < N; i++) {
		struct waiter *w = queue_head(&q);

		assert_ptr_equal(w, &waiters[i]);
		assert_int_equal(w->request_id, 100 + i);
		queue_remove(&q, w);
		assert_order(&q, all + i + 1, N - i - 1);
	}
	assert_true(queue_empty(&q));
}

static void test_remove_head(void **state)
{
	static const unsigned rest[] = {1, 2, 3, 4};
	struct queue q;

	(void)state;
	push_all(&q);
	queue_remove(&q, &waiters[0]);
	assert_order(&q, rest, 4);
}

static void test_remove_middle(void **state)
{
	static const unsigned rest[] = {0, 1, 3, 4};
	static const unsigned fewer[] = {0, 4};
	struct queue q;

	(void)state;
	push_all(&q);
	queue_remove(&q, &waiters[2]);
	assert_order(&q, rest, 4);
	assert_int_equal(queue_position(&q, &waiters[3]), 2);
	queue_remove(&q, &waiters[1]);
	queue_remove(&q, &waiters[3]);
	assert_order(&q, fewer, 2);
}

static void test_remove_tail(void **state)
{
	static const unsigned rest[] = {0, 1, 2, 3};
	static const unsigned requeued[] = {0, 1, 2, 3, 4};
	static const unsigned moved[] = {1, 2, 3, 4, 0};
	struct queue q;

	(void)state;
	push_all(&q);
	queue_remove(&q, &waiters[4]);
	assert_order(&q, rest, 4);
	/* A removed waiter pushed again goes to the back. */
	queue_push(&q, &waiters[4]);
	assert_order(&q, requeued, 5);
	queue_remove(&q, &waiters[0]);
	queue_push(&q, &waiters[0]);
	assert_order(&q, moved, 5);
}

static void test_two_queues(void **state)
{
	static const unsigned evens[] = {0, 2, 4};
	static const unsigned odds[] = {1, 3};
	struct queue a, b;

	(void)state;
	queue_init(&a);
	queue_init(&b);
	for (unsigned i = 0; i < N; i++)
		queue_push(i % 2 ? &b : &a, &waiters[i]);
	assert_order(&a, evens, 3);
	assert_order(&b, odds, 2);
	queue_remove(&b, &waiters[1]);
	queue_remove(&b, &waiters[3]);
	assert_true(queue_empty(&b));
	assert_order(&a, evens, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_empty, reset),
	    cmocka_unit_test_setup(test_fifo, reset),
	    cmocka_unit_test_setup(test_remove_head, reset),
	    cmocka_unit_test_setup(test_remove_middle, reset),
	    cmocka_unit_test_setup(test_remove_tail, reset),
	    cmocka_unit_test_setup(test_two_queues, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
