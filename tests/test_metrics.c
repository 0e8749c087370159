/* test_metrics.c - Prometheus text exposition of egressd's counters (egressd/metrics). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/event.h>
#include <jansson.h>

#include "egressd/grants.h"
#include "egressd/metrics.h"

static void
test_render(void **st)
{
	struct metrics_stats m;
	struct event_base *base = event_base_new();
	struct grants *g = grants_new(base);
	char err[256];
	json_t *j = json_pack("{s:s, s:[s], s:{s:i}}", "principal", "run-a", "allow",
	    "https://api.example.com", "limits", "lifetime_s", 60);
	struct grant *gr = grant_from_json(j, err, sizeof(err));
	size_t len = 0;
	char *txt;

	json_decref(j);
	assert_non_null(gr);
	struct lgrant *lg = grants_add(g, gr, true, NULL, "eth0");
	assert_non_null(lg);
	lg->nconns = 3;
	lg->ntunnels = 2;
	memset(&m, 0, sizeof(m));
	metrics_decision(&m, 1, REASON_ALLOWED);
	metrics_decision(&m, 1, REASON_ALLOWED);
	metrics_decision(&m, 0, REASON_NOT_GRANTED);
	/* closes: a normal end, and a hop refused after its allow (the proxy's 407) that is a
	 * close record and a failed hop, never a second decision */
	metrics_close(&m, REASON_CLOSE_CLIENT);
	metrics_close(&m, REASON_UPSTREAM_AUTH_REQUIRED);
	metrics_close(NULL, REASON_UPSTREAM_AUTH_REQUIRED);
	metrics_hop_failed(&m, REASON_REDIRECT_DENIED);
	metrics_observe(&m.dns, 700);          /* 0.7 ms: first bucket */
	metrics_observe(&m.dns, 30000);        /* 30 ms */
	metrics_observe(&m.connect, 20000000); /* 20 s: only +Inf */
	m.bytes_up = 10;
	m.bytes_down = 20;
	txt = metrics_render(&m, g, &len);
	assert_non_null(txt);
	assert_int_equal(strlen(txt), len);
	assert_non_null(strstr(txt,
	    "egressd_decisions_total{verdict=\"allow\",reason=\"allowed\"} 2\n"));
	assert_non_null(strstr(txt,
	    "egressd_decisions_total{verdict=\"deny\",reason=\"not_granted\"} 1\n"));
	assert_non_null(strstr(txt, "egressd_closes_total{reason=\"client_closed\"} 1\n"));
	assert_non_null(strstr(txt,
	    "egressd_closes_total{reason=\"upstream_auth_required\"} 1\n"));
	assert_non_null(strstr(txt,
	    "egressd_hops_failed_total{reason=\"upstream_auth_required\"} 1\n"));
	assert_non_null(strstr(txt,
	    "egressd_hops_failed_total{reason=\"redirect_denied\"} 1\n"));
	assert_null(strstr(txt, "egressd_hops_failed_total{reason=\"client_closed\"}"));
	assert_null(strstr(txt, "egressd_decisions_total{verdict=\"deny\",reason=\"upstream"));
	assert_non_null(strstr(txt, "egressd_bytes_total{direction=\"up\"} 10\n"));
	assert_non_null(strstr(txt, "egressd_bytes_total{direction=\"down\"} 20\n"));
	assert_non_null(strstr(txt, "egressd_dns_seconds_bucket{le=\"0.001\"} 1\n"));
	assert_non_null(strstr(txt, "egressd_dns_seconds_bucket{le=\"0.05\"} 2\n"));
	assert_non_null(strstr(txt, "egressd_dns_seconds_count 2\n"));
	assert_non_null(strstr(txt, "egressd_connect_seconds_bucket{le=\"10\"} 0\n"));
	assert_non_null(strstr(txt, "egressd_connect_seconds_bucket{le=\"+Inf\"} 1\n"));
	assert_non_null(strstr(txt, "egressd_grants_active 1\n"));
	assert_non_null(strstr(txt, "egressd_connections_active{principal=\"run-a\""));
	assert_non_null(strstr(txt, "} 3\n"));
	assert_non_null(strstr(txt, "egressd_tunnels_active{principal=\"run-a\""));
	/* every non-comment line is "name{labels} value" or "name value" */
	for (char *line = txt; *line != '\0';) {
		char *nl = strchr(line, '\n');
		assert_non_null(nl);
		if (line[0] != '#')
			assert_non_null(memchr(line, ' ', (size_t)(nl - line)));
		line = nl + 1;
	}
	free(txt);
	grants_free(g);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
