/* test_syslog_spool.c - the syslog mirror's spool (egressd/syslog_spool.c): bounded,
 * drop-newest with the loss counted per episode and reported once it ends; records leave
 * only when acknowledged; a broken connection rewinds to the first unacknowledged record,
 * in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "egressd/syslog_spool.h"

static size_t
mkline(char *out, size_t cap, uint64_t seq)
{
	int n = snprintf(out, cap, "{\"v\":1,\"time\":\"2026-12-02T00:00:00.000000Z\","
	    "\"seq\":%llu,\"event\":\"decision\",\"pad\":\"%064d\"}", (unsigned long long)seq, 0);

	return (size_t)n;
}

static void
test_line_seq(void **state)
{
	char l[256];
	size_t n = mkline(l, sizeof(l), 1234567);

	(void)state;
	assert_int_equal(sspool_line_seq(l, n), 1234567);
	assert_int_equal(sspool_line_seq("{\"v\":1}", 7), 0);
	assert_int_equal(sspool_line_seq("{\"seq\":", 7), 0);
	/* past 64 bits: not a seq */
	assert_int_equal(sspool_line_seq("{\"seq\":99999999999999999999999}", 31), 0);
	/* only near the start: a "seq" inside a field further on is not the record's */
	{
		char far[400];

		memset(far, 'x', sizeof(far));
		memcpy(far + 300, "\"seq\":5", 7);
		assert_int_equal(sspool_line_seq(far, sizeof(far)), 0);
	}
}

static void
test_bound_and_drop_newest(void **state)
{
	struct syslog_spool sp;
	char l[256];
	size_t n = mkline(l, sizeof(l), 1);
	uint64_t cnt, first, last, seq = 0;
	size_t fit;

	(void)state;
	fit = 5;
	sspool_init(&sp, fit * SSPOOL_COST(n));
	for (seq = 1; seq <= fit; seq++) {
		n = mkline(l, sizeof(l), seq);
		assert_int_equal(sspool_push(&sp, seq, l, n), SSPOOL_QUEUED);
	}
	assert_int_equal(sp.n, fit);
	assert_true(sp.used <= sp.max);
	/* full: 6, 7, 8 are dropped (the newest), one warning for the episode */
	assert_int_equal(sspool_push(&sp, 6, l, n), SSPOOL_DROPPED_FIRST);
	assert_int_equal(sspool_push(&sp, 7, l, n), SSPOOL_DROPPED);
	assert_int_equal(sspool_push(&sp, 8, l, n), SSPOOL_DROPPED);
	assert_int_equal(sp.loss.total, 3);
	assert_int_equal(sp.loss.episodes, 1);
	/* nothing is due while the episode lasts */
	assert_false(syslog_loss_take(&sp.loss, &cnt, &first, &last));
	/* the queued run is intact, 1..5 in order */
	{
		struct sspool_rec *r;
		uint64_t want = 1;

		TAILQ_FOREACH(r, &sp.q, link)
			assert_int_equal(r->seq, want++);
		assert_int_equal(want, 6);
	}
	/* the collector takes 1: room for one record, but an episode ends only with an
	 * eighth of the spool free beyond it */
	sspool_sent(&sp, sspool_next(&sp), 100);
	assert_int_equal(sspool_acked(&sp, 100), 1);
	assert_int_equal(sspool_push(&sp, 9, l, n), SSPOOL_DROPPED);
	/* the collector takes 2 as well: room again; 10 goes in and ends the episode */
	sspool_sent(&sp, sspool_next(&sp), 200);
	assert_int_equal(sspool_acked(&sp, 200), 1);
	n = mkline(l, sizeof(l), 10);
	assert_int_equal(sspool_push(&sp, 10, l, n), SSPOOL_QUEUED);
	assert_true(syslog_loss_take(&sp.loss, &cnt, &first, &last));
	assert_int_equal(cnt, 4);
	assert_int_equal(first, 6);
	assert_int_equal(last, 9);
	assert_false(syslog_loss_take(&sp.loss, &cnt, &first, &last));
	/* a record larger than the whole spool is dropped, never queued */
	{
		static char big[8192];

		sspool_clear(&sp);
		sspool_init(&sp, 4096);
		assert_int_equal(sspool_push(&sp, 10, big, sizeof(big)), SSPOOL_DROPPED_FIRST);
		assert_int_equal(sp.n, 0);
		assert_int_equal(sp.used, 0);
	}
	sspool_clear(&sp);
}

static void
test_ack_and_rewind(void **state)
{
	struct syslog_spool sp;
	struct sspool_rec *r;
	char l[256];
	size_t n;

	(void)state;
	sspool_init(&sp, 1 << 20);
	for (uint64_t seq = 1; seq <= 4; seq++) {
		n = mkline(l, sizeof(l), seq);
		assert_int_equal(sspool_push(&sp, seq, l, n), SSPOOL_QUEUED);
	}
	/* 1, 2, 3 written (frames end at 10, 20, 30); the collector acknowledged 25 bytes:
	 * 1 and 2 leave, 3 (half acknowledged) stays */
	for (uint64_t end = 10; end <= 30; end += 10)
		sspool_sent(&sp, sspool_next(&sp), end);
	assert_int_equal(sspool_next(&sp)->seq, 4);
	assert_int_equal(sspool_acked(&sp, 25), 2);
	assert_int_equal(sp.n, 2);
	assert_int_equal(sspool_acked(&sp, 25), 0);   /* idempotent */
	/* the connection breaks: 3 is written again first, then 4 */
	assert_int_equal(sspool_rewind(&sp), 1);
	r = sspool_next(&sp);
	assert_int_equal(r->seq, 3);
	assert_int_equal(r->end, 0);
	/* offsets restart on the new connection */
	sspool_sent(&sp, r, 7);
	assert_int_equal(sspool_next(&sp)->seq, 4);
	sspool_sent(&sp, sspool_next(&sp), 14);
	assert_null(sspool_next(&sp));
	/* records arriving now are next */
	n = mkline(l, sizeof(l), 5);
	assert_int_equal(sspool_push(&sp, 5, l, n), SSPOOL_QUEUED);
	assert_int_equal(sspool_next(&sp)->seq, 5);
	assert_int_equal(sspool_acked(&sp, 14), 2);
	assert_int_equal(sp.n, 1);
	/* unwritten records are never freed by an acknowledgment */
	assert_int_equal(sspool_acked(&sp, 1000), 0);
	sspool_clear(&sp);
	assert_int_equal(sp.used, 0);
}

static void
test_loss_episodes(void **state)
{
	struct syslog_loss l;
	uint64_t cnt, first, last;

	(void)state;
	memset(&l, 0, sizeof(l));
	assert_true(syslog_loss_drop(&l, 10));
	assert_false(syslog_loss_drop(&l, 11));
	syslog_loss_ok(&l);
	assert_true(syslog_loss_drop(&l, 20));   /* a second episode warns again */
	syslog_loss_ok(&l);
	/* two ended episodes not yet taken: merged */
	assert_true(syslog_loss_take(&l, &cnt, &first, &last));
	assert_int_equal(cnt, 3);
	assert_int_equal(first, 10);
	assert_int_equal(last, 20);
	assert_int_equal(l.total, 3);
	assert_int_equal(l.episodes, 2);
	/* given back (its record could not be queued): due again, merged with the next */
	syslog_loss_restore(&l, cnt, first, last);
	assert_true(syslog_loss_drop(&l, 30));
	syslog_loss_flush(&l);                   /* shutdown ends an open episode */
	assert_true(syslog_loss_take(&l, &cnt, &first, &last));
	assert_int_equal(cnt, 4);
	assert_int_equal(first, 10);
	assert_int_equal(last, 30);
	/* ok without an episode: nothing due */
	syslog_loss_ok(&l);
	assert_false(syslog_loss_take(&l, &cnt, &first, &last));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_line_seq),
		cmocka_unit_test(test_bound_and_drop_newest),
		cmocka_unit_test(test_ack_and_rewind),
		cmocka_unit_test(test_loss_episodes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
