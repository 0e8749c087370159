/* test_logrotate.c - the decision log across files and with a key: size rotation
 * (log_max_bytes) and SIGUSR1-style reopen continue one chain whose new file starts with
 * a "rotate" record naming the previous file; the HMAC-keyed chain verifies only with its
 * key (no key, a wrong key, or an edit re-hashed without the key all fail); key files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "egressd/config.h"
#include "egressd/dlog.h"
#include "common/dlogchain.h"
#include "egressd/ctl/logread.h"

struct fix {
	char dir[64];
	char path[128];
	struct event_base *base;
};

static int
setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_logrotate.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/decisions.jsonl", f->dir);
	f->base = event_base_new();
	assert_non_null(f->base);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fix *f = *state;
	char cmd[160];

	event_base_free(f->base);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", f->dir);
	free(f);
	return 0;
}

static struct dlog *
open_log(struct fix *f, uint64_t max_bytes, const struct dlog_key *key)
{
	struct dlog_config cfg = { .path = f->path, .sync = DLOG_SYNC_NONE, .retry_ms = 250,
	    .max_bytes = max_bytes, .key = key };
	char err[256];
	struct dlog *d = dlog_open(f->base, &cfg, err, sizeof(err));

	if (d == NULL)
		fail_msg("dlog_open: %s", err);
	return d;
}

static void
append(struct dlog *d, int i)
{
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i}", "conn", "c-1", "principal", "run-1",
	    "dest", "api.example.com:443", "verdict", "allow", "n", i);

	assert_int_equal(dlog_append_sync(d, "decision", o, 5000), 0);
}

static void
make_key(struct dlog_key *k, char fill)
{
	memset(k, 0, sizeof(*k));
	k->len = 32;
	memset(k->bytes, fill, 32);
}

/* Files of the log in chain order: rotated ones (names sort by seq), then the path. */
static int
log_files(struct fix *f, char names[][320], int max)
{
	struct dirent **ents;
	int n = scandir(f->dir, &ents, NULL, alphasort), k = 0;

	assert_true(n >= 0);
	for (int i = 0; i < n; i++) {
		if (strncmp(ents[i]->d_name, "decisions.jsonl.", 16) == 0 && k < max - 1)
			snprintf(names[k++], 320, "%s/%s", f->dir, ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
	snprintf(names[k++], 320, "%s", f->path);
	return k;
}

static enum dlog_break
verify_all(struct fix *f, const struct dlog_key *key, struct dlog_verify *v)
{
	char names[64][320];
	int n = log_files(f, names, 64);

	dlog_verify_init(v, false);
	v->key = key;
	for (int i = 0; i < n; i++) {
		enum dlog_break b = dlog_verify_file(v, names[i]);

		if (b != DLOG_INTACT) {
			fprintf(stderr, "  verify: %s\n", v->message);
			return b;
		}
	}
	return DLOG_INTACT;
}

/* The first record of path: event, and for "rotate" its previous_file/seq. */
static void
first_record(const char *path, char *event, size_t elen, char *prev_file, size_t plen,
    long long *prev_seq, char *cause, size_t clen)
{
	struct logread r;
	struct logrec *rec;

	assert_int_equal(logread_open(&r, path), 0);
	assert_int_equal(logread_next(&r, &rec), 1);
	snprintf(event, elen, "%s", rec->event);
	snprintf(prev_file, plen, "%s",
	    json_string_value(json_object_get(rec->obj, "previous_file")) ?: "(null)");
	*prev_seq = json_integer_value(json_object_get(rec->obj, "previous_seq"));
	snprintf(cause, clen, "%s", json_string_value(json_object_get(rec->obj, "cause")) ?:
	    "");
	logread_close(&r);
}

static void
test_size_rotation(void **state)
{
	struct fix *f = *state;
	struct dlog_verify v;
	struct dlog *d = open_log(f, 2000, NULL);
	char names[64][320], ev[40], pf[256], cause[32];
	long long ps;
	int n;

	for (int i = 0; i < 30; i++)
		append(d, i);
	dlog_close(d);
	n = log_files(f, names, 64);
	assert_true(n >= 4);   /* 30 records of ~300 bytes in files of at most 2000 */
	for (int i = 0; i < n; i++) {
		struct stat st;

		assert_int_equal(stat(names[i], &st), 0);
		assert_true(st.st_size <= 2000);
		if (i == 0) {
			first_record(names[i], ev, sizeof(ev), pf, sizeof(pf), &ps, cause,
			    sizeof(cause));
			assert_string_equal(ev, "decision");
			continue;
		}
		/* every later file names the one before it and where its chain ended */
		first_record(names[i], ev, sizeof(ev), pf, sizeof(pf), &ps, cause, sizeof(cause));
		assert_string_equal(ev, "rotate");
		assert_string_equal(pf, names[i - 1]);
		assert_string_equal(cause, "max_bytes");
		{
			char want[32];

			snprintf(want, sizeof(want), ".%012lld", ps);
			assert_non_null(strstr(names[i - 1], want));
		}
	}
	assert_int_equal(verify_all(f, NULL, &v), DLOG_INTACT);
	assert_int_equal(v.records, 30 + (uint64_t)(n - 1));
	/* one rotated file alone, with --continued */
	dlog_verify_init(&v, true);
	assert_int_equal(dlog_verify_file(&v, names[1]), DLOG_INTACT);
	/* a rotated file missing from the middle is a deletion */
	assert_int_equal(unlink(names[1]), 0);
	assert_int_equal(verify_all(f, NULL, &v), DLOG_BREAK_DELETED);
}

/* A rotated file is never replaced: when the name is taken, egressd keeps writing to
 * the current file (past the limit) and rotates at the next write; the chain stays
 * whole. */
static void
test_rotation_never_replaces(void **state)
{
	struct fix *f = *state;
	struct dlog_verify v;
	struct dlog *d = open_log(f, 2000, NULL);
	char taken[320];
	FILE *fp;
	struct stat st;

	for (int i = 0; i < 6; i++)
		append(d, i);
	/* the next rotation would be to .000000000006 (6 records, about 1800 bytes) */
	snprintf(taken, sizeof(taken), "%s.000000000006", f->path);
	fp = fopen(taken, "w");
	fputs("evidence\n", fp);
	fclose(fp);
	for (int i = 6; i < 10; i++)
		append(d, i);
	dlog_close(d);
	fp = fopen(taken, "r");
	{
		char b[32] = "";

		assert_non_null(fgets(b, sizeof(b), fp));
		assert_string_equal(b, "evidence\n");
	}
	fclose(fp);
	/* the 7th record went into the current file (past the limit); the next rotation
	 * found a free name */
	snprintf(taken, sizeof(taken), "%s.000000000007", f->path);
	assert_int_equal(stat(taken, &st), 0);
	assert_true(st.st_size > 2000);
	dlog_verify_init(&v, false);
	assert_int_equal(dlog_verify_file(&v, taken), DLOG_INTACT);
	assert_int_equal(dlog_verify_file(&v, f->path), DLOG_INTACT);
	assert_int_equal(v.records, 11);   /* 10 and one rotate record */
}

static void
test_reopen_names_previous(void **state)
{
	struct fix *f = *state;
	struct dlog_verify v;
	struct dlog *d = open_log(f, 0, NULL);
	char old[320], ev[40], pf[256], cause[32];
	long long ps;
	uint64_t deadline;

	for (int i = 0; i < 3; i++)
		append(d, i);
	snprintf(old, sizeof(old), "%s/decisions.jsonl.1", f->dir);
	assert_int_equal(rename(f->path, old), 0);
	dlog_reopen(d);
	/* the reopen happens on the writer thread before the next group */
	deadline = mono_msec() + 2000;
	append(d, 3);
	append(d, 4);
	dlog_close(d);
	assert_true(mono_msec() < deadline + 5000);
	first_record(f->path, ev, sizeof(ev), pf, sizeof(pf), &ps, cause, sizeof(cause));
	assert_string_equal(ev, "rotate");
	assert_string_equal(pf, old);
	assert_int_equal(ps, 3);
	assert_string_equal(cause, "reopen");
	dlog_verify_init(&v, false);
	assert_int_equal(dlog_verify_file(&v, old), DLOG_INTACT);
	assert_int_equal(dlog_verify_file(&v, f->path), DLOG_INTACT);
	assert_int_equal(v.records, 6);
}

/* Change a byte of line idx (0-based) of path; with rehash, recompute its hash the way
 * someone without the key would (plain SHA-256) and fix the next line's prev. */
static void
tamper(const char *path, int idx, bool rehash)
{
	static char lines[64][EGRESS_LOG_RECORD_MAX + 2];
	FILE *fp = fopen(path, "r");
	int n = 0;

	assert_non_null(fp);
	while (n < 64 && fgets(lines[n], sizeof(lines[n]), fp) != NULL)
		n++;
	fclose(fp);
	assert_true(idx < n);
	{
		char *p = strstr(lines[idx], "api.example.com");

		assert_non_null(p);
		p[0] = 'A';
	}
	if (rehash) {
		char body[EGRESS_LOG_RECORD_MAX], hash[DLOG_HASH_HEX + 1];
		size_t len = strlen(lines[idx]) - 1;

		memcpy(body, lines[idx], len - 75);
		body[len - 75] = '}';
		assert_int_equal(dlog_hash_body(lines[idx] + len - 140, body, len - 74, hash), 0);
		memcpy(lines[idx] + len - 66, hash, DLOG_HASH_HEX);
		if (idx + 1 < n) {
			/* the next record's prev, and so its own hash, would need the key */
			size_t l2 = strlen(lines[idx + 1]) - 1;

			memcpy(lines[idx + 1] + l2 - 140, hash, DLOG_HASH_HEX);
		}
	}
	fp = fopen(path, "w");
	for (int i = 0; i < n; i++)
		fputs(lines[i], fp);
	fclose(fp);
}

static void
test_hmac(void **state)
{
	struct fix *f = *state;
	struct dlog_key key, wrong;
	struct dlog_verify v;
	struct dlog *d;

	make_key(&key, 'k');
	make_key(&wrong, 'w');
	d = open_log(f, 1500, &key);
	for (int i = 0; i < 12; i++)
		append(d, i);
	dlog_close(d);
	/* a restart continues the keyed chain: the last record checks with the key */
	d = open_log(f, 1500, &key);
	assert_true(dlog_writable(d));
	append(d, 12);
	dlog_close(d);

	assert_int_equal(verify_all(f, &key, &v), DLOG_INTACT);
	/* without the key: the very first record fails, with a hint */
	assert_int_equal(verify_all(f, NULL, &v), DLOG_BREAK_EDITED);
	assert_int_equal(v.seq, 1);
	assert_non_null(strstr(v.message, "--key"));
	/* with the wrong key */
	assert_int_equal(verify_all(f, &wrong, &v), DLOG_BREAK_EDITED);
	assert_int_equal(v.seq, 1);
	assert_non_null(strstr(v.message, "HMAC"));
	/* a keyed log reopened without the key: its last record does not verify, so the
	 * log stays unwritable (hops refused) instead of forking an unkeyed chain */
	d = open_log(f, 1500, &wrong);
	assert_false(dlog_writable(d));
	dlog_close(d);

	/* an edit re-hashed without the key: the keyed verify finds it */
	tamper(f->path, 1, true);
	assert_int_equal(verify_all(f, &key, &v), DLOG_BREAK_EDITED);
	assert_int_equal(v.line, 2);
}

/* A plain chain edited and re-hashed including the next prev: only the record after
 * that, whose hash covers the changed prev, breaks - the chain still catches it. */
static void
test_plain_rehash_caught(void **state)
{
	struct fix *f = *state;
	struct dlog_verify v;
	struct dlog *d = open_log(f, 0, NULL);

	for (int i = 0; i < 5; i++)
		append(d, i);
	dlog_close(d);
	tamper(f->path, 1, true);
	assert_int_equal(verify_all(f, NULL, &v), DLOG_BREAK_EDITED);
	assert_int_equal(v.line, 3);
	assert_int_equal(v.seq, 3);
}

static void
write_file(const char *path, const char *data, size_t n, mode_t mode)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	fwrite(data, 1, n, fp);
	fclose(fp);
	assert_int_equal(chmod(path, mode), 0);
}

static void
test_key_load(void **state)
{
	struct fix *f = *state;
	struct dlog_key k;
	char path[320], err[256], big[DLOG_KEY_MAX + 2];

	snprintf(path, sizeof(path), "%s/key", f->dir);
	write_file(path, "0123456789abcdef0123456789abcdef\n", 33, 0600);
	assert_int_equal(dlog_key_load(path, true, &k, err, sizeof(err)), 0);
	assert_int_equal(k.len, 32);   /* one trailing newline removed */
	assert_memory_equal(k.bytes, "0123456789abcdef", 16);
	/* readable by others: refused for egressd, accepted for an auditor's copy */
	write_file(path, "0123456789abcdef0123456789abcdef\n", 33, 0644);
	assert_int_equal(dlog_key_load(path, true, &k, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "chmod 600"));
	assert_int_equal(dlog_key_load(path, false, &k, err, sizeof(err)), 0);
	/* too short, too long, missing */
	write_file(path, "short\n", 6, 0600);
	assert_int_equal(dlog_key_load(path, true, &k, err, sizeof(err)), -1);
	memset(big, 'x', sizeof(big));
	write_file(path, big, sizeof(big), 0600);
	assert_int_equal(dlog_key_load(path, true, &k, err, sizeof(err)), -1);
	write_file(path, big, DLOG_KEY_MAX, 0600);
	assert_int_equal(dlog_key_load(path, true, &k, err, sizeof(err)), 0);
	assert_int_equal(k.len, DLOG_KEY_MAX);
	assert_int_equal(dlog_key_load("/nonexistent/key", true, &k, err, sizeof(err)), -1);
	/* a symlink is not followed */
	{
		char ln[200];

		snprintf(ln, sizeof(ln), "%s/keylink", f->dir);
		assert_int_equal(symlink(path, ln), 0);
		assert_int_equal(dlog_key_load(ln, false, &k, err, sizeof(err)), -1);
	}
	secret_wipe(&k, sizeof(k));
}

/* egressctl log verify --key: intact with the key (exit 0), wrong key exit 1. */
static void
test_egressctl_key(void **state)
{
	struct fix *f = *state;
	const char *bin = getenv("EGRESS_BINARY_DIR");
	struct dlog_key key;
	struct dlog *d;
	char cmd[1024], kpath[320], wpath[320];
	int rc;

	if (bin == NULL)
		skip();
	make_key(&key, 'k');
	d = open_log(f, 0, &key);
	for (int i = 0; i < 3; i++)
		append(d, i);
	dlog_close(d);
	snprintf(kpath, sizeof(kpath), "%s/k", f->dir);
	snprintf(wpath, sizeof(wpath), "%s/w", f->dir);
	write_file(kpath, "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk", 32, 0600);
	write_file(wpath, "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww", 32, 0600);
	snprintf(cmd, sizeof(cmd), "%s/egressd/egressctl log verify --key %s %s >/dev/null",
	    bin, kpath, f->path);
	rc = system(cmd);
	assert_true(WIFEXITED(rc));
	assert_int_equal(WEXITSTATUS(rc), 0);
	snprintf(cmd, sizeof(cmd), "%s/egressd/egressctl log verify --key %s %s >/dev/null",
	    bin, wpath, f->path);
	rc = system(cmd);
	assert_int_equal(WEXITSTATUS(rc), 1);
	snprintf(cmd, sizeof(cmd), "%s/egressd/egressctl log verify %s >/dev/null", bin,
	    f->path);
	rc = system(cmd);
	assert_int_equal(WEXITSTATUS(rc), 1);
}

/* egressd.ini: log_max_bytes and log_hmac_key (egressd/config.c). */
static void
test_config_keys(void **state)
{
	static const char ok[] = "[egressd]\nlog_max_bytes = 64M\n"
	    "log_hmac_key = /etc/egress/decision-log.key\nlog_syslog = unix:/dev/log\n";
	static const char small[] = "[egressd]\nlog_max_bytes = 100\n";
	static const char rel[] = "[egressd]\nlog_hmac_key = key\n";
	static const char none[] = "[egressd]\n";
	struct egressd_config *c;
	char err[512];

	(void)state;
	c = config_load_string("t.ini", ok, sizeof(ok) - 1, err, sizeof(err));
	if (c == NULL)
		fail_msg("%s", err);
	assert_int_equal(c->log_max_bytes, 64ULL * 1024 * 1024);
	assert_string_equal(c->log_hmac_key, "/etc/egress/decision-log.key");
	assert_string_equal(c->log_syslog, "unix:/dev/log");
	config_free(c);
	c = config_load_string("t.ini", none, sizeof(none) - 1, err, sizeof(err));
	assert_non_null(c);
	assert_int_equal(c->log_max_bytes, 0);
	assert_null(c->log_hmac_key);
	assert_null(c->log_syslog);
	config_free(c);
	assert_null(config_load_string("t.ini", small, sizeof(small) - 1, err, sizeof(err)));
	assert_non_null(strstr(err, "log_max_bytes"));
	assert_null(config_load_string("t.ini", rel, sizeof(rel) - 1, err, sizeof(err)));
	assert_non_null(strstr(err, "log_hmac_key"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_size_rotation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rotation_never_replaces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen_names_previous, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hmac, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plain_rehash_caught, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_egressctl_key, setup, teardown),
		cmocka_unit_test(test_config_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
