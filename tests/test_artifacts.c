/* test_artifacts.c - candidate.diff (bounded, exact: git apply --binary replays it, headers
 * as git writes them), logs with the truncation marker, decisions.jsonl filtering, atomic writes with sha256 (executor/artifacts). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>
#include <unistd.h>

#include "executor/artifacts.h"

static char root[256], repo[300], merged[300], out[300];

__attribute__((format(printf, 1, 2)))
static void
sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

static char *
slurp(const char *dir, const char *name, size_t *len)
{
	char p[600];
	FILE *f;
	char *buf = malloc(1 << 20);

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "r");
	if (f == NULL) {
		free(buf);
		return NULL;
	}
	*len = fread(buf, 1, (1 << 20) - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

static int
setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/test_artifacts.XXXXXX");
	if (mkdtemp(root) == NULL)
		return -1;
	snprintf(repo, sizeof(repo), "%s/repo", root);
	snprintf(merged, sizeof(merged), "%s/merged", root);
	snprintf(out, sizeof(out), "%s/out", root);
	sh("mkdir -p %s %s && cd %s && git init -q . && git config user.email t@example.com && "
	    "git config user.name t && printf 'hello\\n' > README.md && "
	    "printf '\\000\\001\\002' > blob.bin && printf '*.log\\n' > .gitignore && "
	    "git add -A && git commit -q -m base && cp -a %s %s", repo, out, repo, repo, merged);
	sh("printf 'hello, world\\n' > %s/README.md && printf '\\000\\003' > %s/blob.bin && "
	    "printf 'new file\\n' > %s/new.txt && printf 'ignored text\\n' > %s/x.log",
	    merged, merged, merged, merged);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	sh("rm -rf %s", root);
	return 0;
}

static void
no_temp_files(void)
{
	DIR *d = opendir(out);
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		assert_false(de->d_name[0] == '.' && strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0);
	closedir(d);
}

static void
test_diff(void **state)
{
	struct artifact a;
	char err[256], path[600], sha[65];
	uint64_t needed = 0, size = 0;
	size_t len;
	char *d;

	(void)state;
	assert_int_equal(artifacts_write_diff(out, repo, merged, 1 << 20, &a, &needed, err,
	    sizeof(err)), DIFF_WRITTEN);
	d = slurp(out, "candidate.diff", &len);
	assert_non_null(d);
	print_message("%s", d);
	assert_int_equal(a.size, len);
	assert_int_equal(needed, len);
	assert_string_equal(a.name, "candidate.diff");
	assert_non_null(strstr(d, "diff --git a/README.md b/README.md"));
	assert_non_null(strstr(d, "\n-hello\n+hello, world\n"));
	assert_non_null(strstr(d, "+new file\n"));
	/* A git binary patch with full object ids, never "Binary files differ". */
	assert_non_null(strstr(d, "GIT binary patch"));
	assert_null(strstr(d, "Binary files"));
	assert_non_null(strstr(d, "index 8352675d67aed6625ece79af41c27fdb4ee2e867.."));
	assert_null(strstr(d, "x.log"));
	snprintf(path, sizeof(path), "%s/candidate.diff", out);
	assert_int_equal(artifact_sha256_file(path, sha, &size), 0);
	assert_string_equal(sha, a.sha256);
	assert_int_equal(size, a.size);
	no_temp_files();
	free(d);

	/* Over the bound: nothing written, never a truncated diff. */
	sh("rm -f %s/candidate.diff", out);
	assert_int_equal(artifacts_write_diff(out, repo, merged, 64, &a, &needed, err,
	    sizeof(err)), DIFF_TOO_LARGE);
	assert_true(needed > 64);
	assert_null(slurp(out, "candidate.diff", &len));
	no_temp_files();
	/* Exactly the size fits. */
	assert_int_equal(artifacts_write_diff(out, repo, merged, len, &a, &needed, err,
	    sizeof(err)), DIFF_WRITTEN);
}


/*
 * Every kind of edit a worker makes, applied with `git apply --binary` to a fresh clone of
 * the base: the clone must then equal the edited tree (type, bytes, mode, link target).
 */
static void
test_diff_roundtrip(void **state)
{
	char rt[400], rtout[400], err[256], cmd[2048], work[512];
	struct artifact a;
	uint64_t needed = 0;

	(void)state;
	snprintf(rt, sizeof(rt), "%s/rt", root);
	snprintf(rtout, sizeof(rtout), "%s/rtout", root);
	sh("mkdir -p %s/base %s && cd %s/base && git init -q . && git config user.email t@x && "
	    "git config user.name t && printf 'a\\nb\\n' > text && printf 'x\\000y' > bin && "
	    "printf 'f\\n' > f2link && ln -s text link2file && mkdir d && printf 'in d\\n' > d/1 && "
	    "printf 'file\\n' > f2dir && printf 'crlf\\r\\nline\\r\\n' > crlf && "
	    "printf 'noeol' > noeol && printf 'exe\\n' > exe && printf 'gone\\n' > gone && "
	    ": > empty && : > empty_gone && printf 'move me\\n' > mv_src && printf 'b\\000x' > binmode && "
	    "chmod +x binmode && printf 'b\\000y' > binmode2 && "
	    "git add -A && git commit -q -m base && cp -a . ../work", rt, rtout, rt);
	/* the edits, in the work copy (playing the merged view) */
	sh("cd %s/work && printf 'a\\nB\\n' > text && printf '\\000\\377\\000' > bin && "
	    "rm f2link && ln -s d/1 f2link && rm link2file && printf 'now a file' > link2file && "
	    "rm -r d && printf 'd was a dir\\n' > d && rm f2dir && mkdir -p f2dir/deep/er && "
	    "printf 'x\\n' > f2dir/deep/er/y && printf 'crlf\\r\\nline2\\r\\n' > crlf && "
	    "printf 'noeol2' > noeol && chmod +x exe && rm gone && : > empty2 && "
	    "rm empty_gone && printf 'tail' >> empty && chmod -x binmode && chmod +x binmode2 && "
	    "mv mv_src 'mv dst é' && mkdir -p 'sp ace/new dir' && "
	    "printf '\\000\\000' > 'sp ace/new dir/b\"q\\\\' && ln -s ../text 'sp ace/ln' && "
	    "printf 'tab' > \"$(printf 'x\\ty')\" && : > 'sp ace/z'", rt);
	snprintf(cmd, sizeof(cmd), "%s/base", rt);
	snprintf(work, sizeof(work), "%s/work", rt);
	assert_int_equal(artifacts_write_diff(rtout, cmd, work, 1 << 20, &a, &needed, err,
	    sizeof(err)), DIFF_WRITTEN);
	sh("cd %s && git clone -q base clone && cd clone && "
	    "git apply --binary %s/candidate.diff", rt, rtout);
	/* Names quoted exactly as git quotes them: the header lines git itself writes for the
	 * same change (everything staged, full index, no renames) are ours, in the same order. */
	sh("cd %s && cp -a work gitview && cd gitview && git add -A && "
	    "git diff --cached --binary --full-index --no-renames HEAD | "
	    "grep -E '^(diff --git|--- |\\+\\+\\+ |(old|new|deleted file|new file) mode|index )' "
	    "| sed 's/\t$//' > ../git.heads && grep -E '^(diff --git|--- |\\+\\+\\+ |"
	    "(old|new|deleted file|new file) mode|index )' %s/candidate.diff | sed 's/\t$//' "
	    "> ../ours.heads && { diff ../git.heads ../ours.heads >&2; "
	    "cmp ../git.heads ../ours.heads; }", rt, rtout);
	/* names, types, modes, link targets, contents (directories: only by their entries) */
	sh("cd %s && for t in work clone; do (cd $t && find . -path ./.git -prune -o ! -type d "
	    "-printf '%%p %%y %%m %%l\\n' | sort > ../$t.list && find . -path ./.git -prune -o "
	    "-type f -print0 | sort -z | xargs -0 sha256sum > ../$t.sums); done && "
	    "cmp work.list clone.list && cmp work.sums clone.sums", rt);
}

static void
test_logs(void **state)
{
	struct artifact a;
	char err[256];
	size_t len;
	char *d;

	(void)state;
	assert_int_equal(artifacts_write_log(out, "stdout.log", "abc", 3, false, &a, err,
	    sizeof(err)), 0);
	d = slurp(out, "stdout.log", &len);
	assert_string_equal(d, "abc");
	assert_false(a.truncated);
	/* sha256("abc") */
	assert_string_equal(a.sha256,
	    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	free(d);
	assert_int_equal(artifacts_write_log(out, "stderr.log", "abcdef", 6, true, &a, err,
	    sizeof(err)), 0);
	d = slurp(out, "stderr.log", &len);
	assert_string_equal(d, "abcdef\n[egress-exec: output truncated at 6 bytes]\n");
	assert_true(a.truncated);
	assert_int_equal(a.size, len);
	free(d);
	/* Empty output. */
	assert_int_equal(artifacts_write_log(out, "stdout.log", NULL, 0, false, &a, err,
	    sizeof(err)), 0);
	assert_int_equal(a.size, 0);
	/* Names with a slash are refused. */
	assert_int_equal(artifact_write(out, "../x", "a", 1, &a, err, sizeof(err)), -1);
	assert_int_equal(artifact_write("/nonexistent-h8", "x", "a", 1, &a, err, sizeof(err)),
	    -1);
	no_temp_files();
}

#define AAAA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static void
test_decisions(void **state)
{
	struct artifact a;
	char err[256], src[600], want[1024];
	size_t len;
	char *d;
	FILE *f;

	(void)state;
	snprintf(src, sizeof(src), "%s/decisions-src.jsonl", root);
	f = fopen(src, "w");
	assert_non_null(f);
	fprintf(f, "{\"v\":1,\"seq\":7,\"event\":\"start\",\"hash\":\"%s\"}\n", AAAA);
	fputs("{\"v\":1,\"event\":\"decision\",\"principal\":\"run-1\",\"reason\":\"allowed\"}\n", f);
	fputs("{\"v\":1,\"event\":\"decision\",\"principal\":\"run-2\",\"reason\":\"allowed\"}\n", f);
	fputs("not json\n", f);
	fputs("{\"v\":1,\"event\":\"close\",\"grant_id\":\"abcd\"}\n", f);
	fputs("{\"v\":1,\"event\":\"decision\",\"principal\":\"run-1\",\"reason\":\"not_granted\"}", f);
	fclose(f);
	assert_int_equal(artifacts_write_decisions(out, src, "run-1", "abcd", &a, err,
	    sizeof(err)), 0);
	d = slurp(out, "decisions.jsonl", &len);
	/* the anchor: the record before the run's first one, and what was selected */
	snprintf(want, sizeof(want), "{\"egress_anchor\":{\"log\":\"%s\",\"seq\":7,\"hash\":"
	    "\"%s\",\"through_seq\":7,\"principal\":\"run-1\",\"grant_id\":\"abcd\"}}\n", src,
	    AAAA);
	assert_memory_equal(d, want, strlen(want));
	assert_string_equal(d + strlen(want),
	    "{\"v\":1,\"event\":\"decision\",\"principal\":\"run-1\",\"reason\":\"allowed\"}\n"
	    "{\"v\":1,\"event\":\"close\",\"grant_id\":\"abcd\"}\n"
	    "{\"v\":1,\"event\":\"decision\",\"principal\":\"run-1\",\"reason\":\"not_granted\"}\n");
	free(d);
	/* No log: an empty file. Missing log file: an error. */
	assert_int_equal(artifacts_write_decisions(out, NULL, "run-1", NULL, &a, err,
	    sizeof(err)), 0);
	assert_int_equal(a.size, 0);
	assert_int_equal(artifacts_write_decisions(out, "/nonexistent-h8", "run-1", NULL, &a,
	    err, sizeof(err)), -1);
	json_t *j = artifact_to_json(&a);
	assert_non_null(j);
	json_decref(j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_diff),
		cmocka_unit_test(test_diff_roundtrip),
		cmocka_unit_test(test_logs),
		cmocka_unit_test(test_decisions),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
