/*
 * workunit - parse a WorkUnit file (see executor/workunit.h and docs/workunit.md).
 */
#define _GNU_SOURCE
#include "executor/workunit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "common/limits.h"
#include "common/pathglob.h"
#include "common/util.h"

/* ---- strlist ---- */

void
strlist_free(struct strlist *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
	l->present = false;
}

int
strlist_from_conf(const struct conf *c, size_t sec, const char *key, struct strlist *l)
{
	size_t n = 0;
	const char *const *vals = conf_get_list(c, sec, key, &n);

	memset(l, 0, sizeof(*l));
	if (vals == NULL)
		return 0;
	l->present = true;
	l->line = conf_line(c, sec, key);
	if (n == 0)
		return 0;
	/* One more slot: v is always NULL-terminated (callers hand it to argv/env APIs). */
	l->v = calloc(n + 1, sizeof(*l->v));
	if (l->v == NULL)
		return -1;
	for (size_t i = 0; i < n; i++) {
		/* `key =` only declares presence (an empty list). */
		if (vals[i] == NULL || vals[i][0] == '\0')
			continue;
		l->v[l->n] = strdup(vals[i]);
		if (l->v[l->n] == NULL) {
			strlist_free(l);
			return -1;
		}
		l->n++;
	}
	return 0;
}

static bool
strlist_contains(const struct strlist *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return true;
	return false;
}

bool
strlist_set_equal(const struct strlist *a, const struct strlist *b)
{
	for (size_t i = 0; i < a->n; i++)
		if (!strlist_contains(b, a->v[i]))
			return false;
	for (size_t i = 0; i < b->n; i++)
		if (!strlist_contains(a, b->v[i]))
			return false;
	return true;
}

/* ---- ceilings ---- */

struct ceiling_def {
	const char *key;
	bool size_suffix;      /* K/M/G/T accepted */
	uint64_t max;
	bool required;
};

static const struct ceiling_def ceiling_defs[CEIL__COUNT] = {
	[CEIL_WALL_SECONDS]   = { "wall_seconds",   false, 7ULL * 86400, true },
	[CEIL_CPU_MILLICORES] = { "cpu_millicores", false, 1024ULL * 1000, true },
	[CEIL_MEMORY_BYTES]   = { "memory_bytes",   true,  1ULL << 40, true },
	[CEIL_DISK_BYTES]     = { "disk_bytes",     true,  1ULL << 40, true },
	[CEIL_PROCESSES]      = { "processes",      false, 1ULL << 22, true },
	[CEIL_OUTPUT_BYTES]   = { "output_bytes",   true,  1ULL << 30, true },
	[CEIL_DIFF_BYTES]     = { "diff_bytes",     true,  1ULL << 30, false },
};

const char *
ceiling_key(enum ceiling_id id)
{
	if ((unsigned)id >= CEIL__COUNT)
		return "?";
	return ceiling_defs[id].key;
}

bool
ceiling_required(enum ceiling_id id)
{
	return (unsigned)id < CEIL__COUNT && ceiling_defs[id].required;
}

void
ceilings_from_conf(const struct conf *c, size_t sec, struct ceilings *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < CEIL__COUNT; i++) {
		const struct ceiling_def *d = &ceiling_defs[i];
		unsigned line = 0;
		const char *v = conf_get(c, sec, d->key, &line);

		if (v == NULL)
			continue;
		out->line[i] = line;
		uint64_t u = 0;
		bool ok;
		if (d->size_suffix) {
			ok = conf_parse_size(v, d->max, &u) == 0;
		} else {
			long long ll = 0;
			const char *es = NULL;
			ok = num_parse(v, 0, (long long)d->max, &ll, &es) == 0;
			u = (uint64_t)ll;
		}
		/* Zero is not a ceiling: it would mean "unlimited" to some kernels. */
		if (!ok || u == 0) {
			out->state[i] = CEIL_INVALID;
			continue;
		}
		out->value[i] = u;
		out->state[i] = CEIL_OK;
	}
}

size_t
ceilings_schema(const char *section, struct conf_key *out, size_t max)
{
	size_t n = 0;

	for (int i = 0; i < CEIL__COUNT && n < max; i++) {
		out[n].section = section;
		out[n].key = ceiling_defs[i].key;
		out[n].flags = 0;
		n++;
	}
	return n;
}

/* ---- WorkUnit ---- */

const char *
wu_network_str(enum wu_network n)
{
	switch (n) {
	case WU_NET_NONE: return "none";
	case WU_NET_ALLOWLIST: return "allowlist";
	case WU_NET_UNRESTRICTED: return "unrestricted";
	case WU_NET_ABSENT: break;
	}
	return "absent";
}

/* Keys that would make the WorkUnit choose what runs: accepted by the schema only so
 * that we can refuse them by name with executable_in_workunit instead of a generic
 * unknown-key error. */
static const char *const exec_trap_keys[] = {
	"executable", "argv", "args", "shell", "command", "cmd", "entrypoint", "interpreter",
	"exec", "program", "script",
};
/* Alternate task text: never used as authority, refused with invalid_file. */
static const char *const text_trap_keys[] = {
	"prompt", "goal", "title", "issue_title", "task", "instructions",
};
static const char *const wu_sections[] = {
	"", "security", "permissions", "budget", "constraints",
};

#define WU_SCHEMA_MAX 128

static size_t
wu_schema(struct conf_key *s)
{
	size_t n = 0;

#define K(sec, k, f) do { s[n].section = (sec); s[n].key = (k); s[n].flags = (f); n++; } while (0)
	K("", "id", 0);
	K("", "objective", CONF_LIST);
	K("", "objective_file", 0);
	K("security", "sandbox_required", 0);
	K("permissions", "process_execution", 0);
	K("permissions", "secrets", CONF_LIST);
	K("permissions", "network", 0);
	K("permissions", "destinations", CONF_LIST);
	K("permissions", "filesystem_write", CONF_LIST);
	K("constraints", "allowed_paths", CONF_LIST);
	K("constraints", "forbidden_paths", CONF_LIST);
	n += ceilings_schema("budget", s + n, WU_SCHEMA_MAX - n);
	for (size_t i = 0; i < EGRESS_NELEM(wu_sections); i++) {
		for (size_t j = 0; j < EGRESS_NELEM(exec_trap_keys); j++)
			K(wu_sections[i], exec_trap_keys[j], CONF_LIST);
		for (size_t j = 0; j < EGRESS_NELEM(text_trap_keys); j++)
			K(wu_sections[i], text_trap_keys[j], CONF_LIST);
	}
#undef K
	return n;
}

void
workunit_free(struct workunit *wu)
{
	if (wu == NULL)
		return;
	free(wu->file);
	free(wu->id);
	free(wu->objective);
	strlist_free(&wu->secrets);
	strlist_free(&wu->destinations);
	strlist_free(&wu->filesystem_write);
	strlist_free(&wu->allowed_paths);
	strlist_free(&wu->forbidden_paths);
	free(wu);
}

static enum wu_flag
flag_get(const struct conf *c, long sec, const char *key, unsigned *line)
{
	const char *v;

	*line = 0;
	if (sec < 0)
		return WU_FLAG_ABSENT;
	v = conf_get(c, (size_t)sec, key, line);
	if (v == NULL)
		return WU_FLAG_ABSENT;
	/* Only the two words the docs name: "yes", "1" or "on" would be true to conf_parse_bool
	 * and false to a reader who checks the docs. Admission refuses anything not true. */
	if (strcmp(v, "true") == 0)
		return WU_FLAG_TRUE;
	if (strcmp(v, "false") == 0)
		return WU_FLAG_NOT_TRUE;
	return WU_FLAG_INVALID;
}

/*
 * Read the objective file: beneath the WorkUnit's directory with no symlink anywhere on
 * the way (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), a regular file, bounded, no NUL
 * bytes. Why so strict: egress-exec runs as root and the objective is handed to the
 * worker, so a symlinked directory would let a WorkUnit read any host file into a worker
 * that may have network access.
 */
static char *
objective_read(const char *base_dir, const char *rel, char *err, size_t errlen)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct stat st;
	_cleanup_fd_ int dirfd = -1;
	_cleanup_fd_ int fd = -1;
	char *buf = NULL;
	size_t len = 0;

	dirfd = open(base_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		snprintf(err, errlen, "objective_file: %s: %s", base_dir, strerror(errno));
		return NULL;
	}
	fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "objective_file '%s': %s", rel, strerror(errno));
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "objective_file '%s': not a regular file", rel);
		return NULL;
	}
	buf = malloc(EGRESS_OBJECTIVE_MAX + 1);
	if (buf == NULL) {
		snprintf(err, errlen, "objective_file: out of memory");
		return NULL;
	}
	for (;;) {
		ssize_t r = read(fd, buf + len, EGRESS_OBJECTIVE_MAX + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "objective_file '%s': %s", rel, strerror(errno));
			free(buf);
			return NULL;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > EGRESS_OBJECTIVE_MAX) {
			snprintf(err, errlen, "objective_file '%s': larger than %d bytes", rel,
			    EGRESS_OBJECTIVE_MAX);
			free(buf);
			return NULL;
		}
	}
	if (memchr(buf, '\0', len) != NULL) {
		snprintf(err, errlen, "objective_file '%s': contains a NUL byte", rel);
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

/* Join the repeated `objective` lines with newlines. */
static char *
objective_join(const char *const *lines, size_t n)
{
	size_t total = 1;
	char *out, *p;

	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(lines[i]);
		if (ckd_add_sz(&total, total, l + 1) || total > EGRESS_OBJECTIVE_MAX + 1)
			return NULL;
	}
	out = malloc(total);
	if (out == NULL)
		return NULL;
	p = out;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(lines[i]);
		if (i > 0)
			*p++ = '\n';
		memcpy(p, lines[i], l);
		p += l;
	}
	*p = '\0';
	return out;
}

#define REFUSE(r, ...) do { *why = (r); snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

static struct workunit *
wu_from_conf(struct conf *c, const char *name, const char *base_dir, enum reason *why,
    char *err, size_t errlen)
{
	struct workunit *wu = calloc(1, sizeof(*wu));
	long top = conf_find_section(c, "");
	long sec;
	unsigned line = 0;
	const char *v;

	if (wu == NULL)
		REFUSE(REASON_INTERNAL_ERROR, "%s: out of memory", name);
	wu->file = strdup(name);
	if (wu->file == NULL)
		REFUSE(REASON_INTERNAL_ERROR, "%s: out of memory", name);

	/* Refused fields first: they must never be silently ignored. */
	for (size_t s = 0; s < conf_nsections(c); s++) {
		const char *sname = conf_section_name(c, s);
		for (size_t j = 0; j < EGRESS_NELEM(exec_trap_keys); j++) {
			if ((line = conf_line(c, s, exec_trap_keys[j])) != 0)
				REFUSE(REASON_ADM_EXECUTABLE,
				    "%s:%u: %s%s%s: a WorkUnit may not name an executable, argv or "
				    "shell; the AgentPreset decides what runs", name, line, sname,
				    sname[0] ? "." : "", exec_trap_keys[j]);
		}
		for (size_t j = 0; j < EGRESS_NELEM(text_trap_keys); j++) {
			if ((line = conf_line(c, s, text_trap_keys[j])) != 0)
				REFUSE(REASON_ADM_INVALID_FILE,
				    "%s:%u: %s%s%s is refused: 'objective' is the only task text",
				    name, line, sname, sname[0] ? "." : "", text_trap_keys[j]);
		}
	}

	if (top < 0 || (v = conf_get(c, (size_t)top, "id", &line)) == NULL)
		REFUSE(REASON_ADM_INVALID_FILE, "%s: 'id' is required", name);
	if (!label_valid(v, 64))
		REFUSE(REASON_ADM_INVALID_FILE,
		    "%s:%u: id must be 1-64 characters of A-Z a-z 0-9 . _ -", name, line);
	if ((wu->id = strdup(v)) == NULL)
		REFUSE(REASON_INTERNAL_ERROR, "%s: out of memory", name);

	{
		size_t nobj = 0;
		const char *const *obj = conf_get_list(c, (size_t)top, "objective", &nobj);
		const char *ofile = conf_get(c, (size_t)top, "objective_file", &line);

		if (obj != NULL && ofile != NULL)
			REFUSE(REASON_ADM_INVALID_FILE,
			    "%s:%u: give either objective or objective_file, not both", name, line);
		if (ofile != NULL) {
			char e2[256];
			enum path_err pe = path_check(ofile);
			if (pe != PATH_OK)
				REFUSE(REASON_ADM_INVALID_FILE, "%s:%u: objective_file: %s", name,
				    line, path_err_str(pe));
			if (base_dir == NULL)
				REFUSE(REASON_ADM_INVALID_FILE,
				    "%s:%u: objective_file is not available here", name, line);
			wu->objective = objective_read(base_dir, ofile, e2, sizeof(e2));
			if (wu->objective == NULL)
				REFUSE(REASON_ADM_INVALID_FILE, "%s:%u: %s", name, line, e2);
		} else if (obj != NULL) {
			wu->objective = objective_join(obj, nobj);
			if (wu->objective == NULL)
				REFUSE(REASON_ADM_INVALID_FILE, "%s:%u: objective is larger than %d "
				    "bytes", name, conf_line(c, (size_t)top, "objective"),
				    EGRESS_OBJECTIVE_MAX);
		} else {
			REFUSE(REASON_ADM_INVALID_FILE, "%s: 'objective' (or objective_file) is "
			    "required", name);
		}
		/* An objective of only white space is no task at all. */
		if (wu->objective[strspn(wu->objective, " \t\r\n")] == '\0')
			REFUSE(REASON_ADM_INVALID_FILE, "%s: the objective is empty", name);
	}

	sec = conf_find_section(c, "security");
	wu->sandbox_required = flag_get(c, sec, "sandbox_required", &wu->sandbox_required_line);

	sec = conf_find_section(c, "permissions");
	wu->process_execution = flag_get(c, sec, "process_execution",
	    &wu->process_execution_line);
	if (sec >= 0) {
		if (strlist_from_conf(c, (size_t)sec, "secrets", &wu->secrets) != 0 ||
		    strlist_from_conf(c, (size_t)sec, "destinations", &wu->destinations) != 0 ||
		    strlist_from_conf(c, (size_t)sec, "filesystem_write",
		    &wu->filesystem_write) != 0)
			REFUSE(REASON_INTERNAL_ERROR, "%s: out of memory", name);
		v = conf_get(c, (size_t)sec, "network", &wu->network_line);
		if (v != NULL) {
			if (strcmp(v, "none") == 0)
				wu->network = WU_NET_NONE;
			else if (strcmp(v, "allowlist") == 0)
				wu->network = WU_NET_ALLOWLIST;
			else if (strcmp(v, "unrestricted") == 0)
				wu->network = WU_NET_UNRESTRICTED;
			else
				REFUSE(REASON_ADM_INVALID_FILE, "%s:%u: permissions.network must be "
				    "none, allowlist or unrestricted", name, wu->network_line);
		}
	}

	sec = conf_find_section(c, "budget");
	if (sec >= 0)
		ceilings_from_conf(c, (size_t)sec, &wu->budget);

	sec = conf_find_section(c, "constraints");
	if (sec >= 0) {
		if (strlist_from_conf(c, (size_t)sec, "allowed_paths", &wu->allowed_paths) != 0 ||
		    strlist_from_conf(c, (size_t)sec, "forbidden_paths",
		    &wu->forbidden_paths) != 0)
			REFUSE(REASON_INTERNAL_ERROR, "%s: out of memory", name);
	}
	return wu;
fail:
	workunit_free(wu);
	return NULL;
}

struct workunit *
workunit_load_string(const char *name, const char *text, size_t len, const char *base_dir,
    enum reason *why, char *err, size_t errlen)
{
	struct conf_key schema[WU_SCHEMA_MAX];
	size_t n = wu_schema(schema);
	struct conf *c;
	struct workunit *wu;

	c = conf_load_string(name, text, len, schema, n, err, errlen);
	if (c == NULL) {
		*why = REASON_ADM_INVALID_FILE;
		return NULL;
	}
	wu = wu_from_conf(c, name, base_dir, why, err, errlen);
	conf_free(c);
	return wu;
}

struct workunit *
workunit_load(const char *path, enum reason *why, char *err, size_t errlen)
{
	struct conf_key schema[WU_SCHEMA_MAX];
	size_t n = wu_schema(schema);
	char dir[EGRESS_PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct conf *c;
	struct workunit *wu;

	if (slash == NULL) {
		snprintf(dir, sizeof(dir), ".");
	} else if ((size_t)(slash - path) >= sizeof(dir)) {
		*why = REASON_ADM_INVALID_FILE;
		snprintf(err, errlen, "%s: path too long", path);
		return NULL;
	} else {
		size_t dl = (size_t)(slash - path);
		if (dl == 0)
			dl = 1;  /* "/wu.ini" lives in "/" */
		memcpy(dir, path, dl);
		dir[dl] = '\0';
	}
	c = conf_load(path, schema, n, err, errlen);
	if (c == NULL) {
		*why = REASON_ADM_INVALID_FILE;
		return NULL;
	}
	wu = wu_from_conf(c, path, dir, why, err, errlen);
	conf_free(c);
	return wu;
}
