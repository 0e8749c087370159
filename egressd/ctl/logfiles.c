/* logfiles.c - the decision-log files the log commands read, in chain order (logfiles.h). */
#include "egressd/ctl/logfiles.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/limits.h"
#include "common/paths.h"
#include "egressd/ctl/logread.h"

/* More rotated files than this in one directory is not a log set egressctl reads at once. */
#define LOGFILES_SCAN_MAX 4096

static const char *logfiles_path = EGRESS_DECISION_LOG_DEFAULT;
static char **set_paths;
static size_t set_n;

void
logfiles_set_default(const char *path)
{
	logfiles_path = path != NULL ? path : EGRESS_DECISION_LOG_DEFAULT;
}

const char *
logfiles_default(void)
{
	return logfiles_path;
}

/* The seq of the file's first record: 0 with *seq, or -1. Reads one bounded line. */
static int
first_seq(const char *path, uint64_t *seq)
{
	struct logrec rec = { 0 };
	char *buf = NULL;
	size_t len;
	FILE *f;
	int rc = -1;

	struct stat st;

	/* Only regular files: a FIFO or a device read here would lose what the reader
	 * needs afterwards (and could block). */
	if (strcmp(path, "-") == 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (f = fopen(path, "re")) == NULL)
		return -1;
	buf = malloc(EGRESS_LOG_RECORD_MAX + 2);
	if (buf == NULL || fgets(buf, EGRESS_LOG_RECORD_MAX + 2, f) == NULL)
		goto out;
	len = strlen(buf);
	if (len == 0 || buf[len - 1] != '\n')
		goto out;       /* over-long or torn: not a record */
	if (logrec_parse(buf, len - 1, &rec, NULL, 0) != 0)
		goto out;
	*seq = rec.seq;
	rc = 0;
out:
	logrec_clear(&rec);
	free(buf);
	fclose(f);
	return rc;
}

int
logfiles_order(const char **files, size_t n)
{
	uint64_t *seqs;
	bool changed = false;

	if (n < 2)
		return 0;
	if ((seqs = calloc(n, sizeof(*seqs))) == NULL)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (first_seq(files[i], &seqs[i]) != 0) {
			free(seqs);
			return 0;
		}
	}
	/* insertion sort: stable, and n is at most a few dozen */
	for (size_t i = 1; i < n; i++) {
		uint64_t s = seqs[i];
		const char *f = files[i];
		size_t j = i;

		while (j > 0 && seqs[j - 1] > s) {
			seqs[j] = seqs[j - 1];
			files[j] = files[j - 1];
			j--;
			changed = true;
		}
		seqs[j] = s;
		files[j] = f;
	}
	free(seqs);
	return changed ? 1 : 0;
}

void
logfiles_free(void)
{
	for (size_t i = 0; i < set_n; i++)
		free(set_paths[i]);
	free(set_paths);
	set_paths = NULL;
	set_n = 0;
}

/* "<base>.<digits>" */
static bool
is_rotated_name(const char *name, const char *base)
{
	size_t bl = strlen(base);
	const char *p;

	if (strncmp(name, base, bl) != 0 || name[bl] != '.' || name[bl + 1] == '\0')
		return false;
	for (p = name + bl + 1; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

static int
add_path(char ***paths, size_t *n, size_t *cap, const char *dir, const char *name)
{
	char *p;

	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		char **np = realloc(*paths, nc * sizeof(*np));

		if (np == NULL)
			return -1;
		*paths = np;
		*cap = nc;
	}
	if (dir != NULL) {
		size_t len = strlen(dir) + strlen(name) + 2;

		if ((p = malloc(len)) == NULL)
			return -1;
		snprintf(p, len, "%s/%s", dir, name);
	} else if ((p = strdup(name)) == NULL) {
		return -1;
	}
	(*paths)[(*n)++] = p;
	return 0;
}

int
logfiles_default_set(const char **files, size_t max, size_t *dropped, char *err,
    size_t errlen)
{
	const char *path = logfiles_path, *slash = strrchr(path, '/');
	char dir[EGRESS_PATH_MAX];
	const char *base;
	size_t cap = 0, first;
	struct stat st;
	struct dirent *de;
	DIR *dh;

	logfiles_free();
	*dropped = 0;
	if (stat(path, &st) != 0) {
		snprintf(err, errlen, "no FILE given and the default decision log %s: %s (give "
		    "the files, or --log PATH)", path, strerror(errno));
		return -1;
	}
	if (slash == NULL) {
		snprintf(dir, sizeof(dir), ".");
		base = path;
	} else {
		snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
		base = slash + 1;
	}
	if ((dh = opendir(dir)) == NULL) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(dh)) != NULL && set_n < LOGFILES_SCAN_MAX) {
		struct stat fst;

		if (!is_rotated_name(de->d_name, base))
			continue;
		if (fstatat(dirfd(dh), de->d_name, &fst, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(fst.st_mode))
			continue;
		if (add_path(&set_paths, &set_n, &cap, strcmp(dir, "/") == 0 ? "" : dir,
		    de->d_name) != 0)
			goto nomem;
	}
	closedir(dh);
	if (add_path(&set_paths, &set_n, &cap, NULL, path) != 0)
		goto nomem2;
	/* Numeric order of the rotated suffixes first (the last seq of each file), the
	 * current file last; then the first records decide where they can be read. */
	for (size_t i = 1; i + 1 < set_n; i++) {
		char *p = set_paths[i];
		unsigned long long k = strtoull(strrchr(p, '.') + 1, NULL, 10);
		size_t j = i;

		while (j > 0 && strtoull(strrchr(set_paths[j - 1], '.') + 1, NULL, 10) > k) {
			set_paths[j] = set_paths[j - 1];
			j--;
		}
		set_paths[j] = p;
	}
	first = set_n > max ? set_n - max : 0;
	*dropped = first;
	if (first > 0)
		snprintf(err, errlen, "%zu oldest rotated file(s) of %s left out (at most %zu "
		    "files at once: name them to read them)", first, path, max);
	for (size_t i = first; i < set_n; i++)
		files[i - first] = set_paths[i];
	logfiles_order(files, set_n - first);
	return (int)(set_n - first);
nomem:
	closedir(dh);
nomem2:
	snprintf(err, errlen, "out of memory");
	logfiles_free();
	return -1;
}
