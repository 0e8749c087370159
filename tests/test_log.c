/* test_log.c - common/log.c under systemd: "<N>" priority prefixes exactly when stderr is
 * the journal's stream ($JOURNAL_STREAM names the file on fd 2), never otherwise (a shell
 * redirect in between, a malformed variable), and a multi-line message stays one record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stderrcap.h"

#include "common/log.h"

/* Run the log calls with fd 2 on a fresh temporary file; *out gets what was written.
 * journal: 1 set JOURNAL_STREAM to that file, 0 to another file, -1 to garbage. */
static void
capture(int journal, char *out, size_t outlen)
{
	char other[] = "/tmp/test_log_o.XXXXXX";
	int ofd = mkstemp(other);
	struct stderrcap c;
	struct stat st;
	char js[64];

	assert_true(ofd >= 0);
	stderrcap_start(&c);
	assert_int_equal(fstat(journal == 1 ? c.fd : ofd, &st), 0);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
	    (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", journal >= 0 ? js : "12x:34", 1);
	log_init("tlog", 0);
	assert_int_equal(log_stderr_is_journal(), journal == 1);
	log_set_level(LOG_LEVEL_DEBUG);
	log_warnx("decision log unavailable, refusing hops: %s", "disk full");
	log_info("two\nlines");
	log_debug("detail");
	stderrcap_end(&c, out, outlen);
	close(ofd);
	unlink(other);
	unsetenv("JOURNAL_STREAM");
	log_init("tlog", 0);
}

static void
test_journal_priorities(void **state)
{
	char out[1024];

	(void)state;
	capture(1, out, sizeof(out));
	assert_string_equal(out,
	    "<4>tlog: decision log unavailable, refusing hops: disk full\n"
	    "<6>tlog: two lines\n"
	    "<7>tlog: debug: detail\n");
}

/* Negative twins: the variable names another file (stderr redirected after systemd set it
 * up), or is malformed: plain lines, no prefix, newlines kept as written. */
static void
test_not_journal(void **state)
{
	char out[1024];

	(void)state;
	capture(0, out, sizeof(out));
	assert_string_equal(out,
	    "tlog: decision log unavailable, refusing hops: disk full\n"
	    "tlog: two\nlines\n"
	    "tlog: debug: detail\n");
	capture(-1, out, sizeof(out));
	assert_null(strchr(out, '<'));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_journal_priorities),
		cmocka_unit_test(test_not_journal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
