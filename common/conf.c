/*
 * conf.c - INI files through inih, validated against a schema.
 *
 * inih does the key = value splitting, whitespace stripping and comments. We feed it
 * through ini_parse_stream with our own line reader, which is where we (a) count lines,
 * since Debian's inih is built without INI_HANDLER_LINENO, (b) bound the file, the line
 * length and the characters, (c) refuse indented lines, which inih would otherwise join
 * to the previous value as configparser-style continuations, and (d) see section headers,
 * including empty sections that inih never reports to the handler. A configuration that
 * means something other than what it looks like is refused, never guessed at.
 */
#include "common/conf.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/util.h"

/* inih copies a section name into a fixed buffer of 50 bytes and truncates silently. */
#define CONF_SECTION_NAME_MAX 49

struct conf_entry {
	char *key;
	char **vals;            /* n values, NULL-terminated for conf_get_list */
	unsigned *lines;
	size_t n;
};

struct conf_section {
	char *name;
	const char *label;      /* points into name, or "" */
	unsigned line;
	struct conf_entry *ents;
	size_t nents;
};

struct conf {
	char *file;
	struct conf_section *secs;
	size_t nsecs;
};

struct load_state {
	struct conf *c;
	const struct conf_key *schema;
	size_t nschema;
	const char *text;
	size_t len, pos;
	unsigned lineno;
	bool inline_comment;    /* the current line has a ';' after a blank past its '='/':' */
	long cur;               /* index of the current section, -1 before any */
	bool failed;
	char *err;
	size_t errlen;
};

/* First error wins: later ones are usually consequences. */
static void
load_fail(struct load_state *st, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
load_fail(struct load_state *st, unsigned line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (st->failed)
		return;
	st->failed = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	errbuf_set(st->err, st->errlen, 0, "%s:%u: %s", st->c->file, line, msg);
}

/* ---------- schema ---------- */

/* Does section name match schema section pattern ("kind *" matches "kind label")? */
static bool
section_matches(const char *pattern, const char *name)
{
	size_t pl = strlen(pattern);

	if (strcmp(pattern, name) == 0)
		return true;
	if (pl >= 2 && pattern[pl - 2] == ' ' && pattern[pl - 1] == '*')
		return strncmp(pattern, name, pl - 1) == 0 && name[pl - 1] != '\0';
	return false;
}

/* Is name a section the schema knows (exactly or through a "kind *" pattern)? */
static bool
schema_has_section(const struct load_state *st, const char *name)
{
	for (size_t i = 0; i < st->nschema; i++)
		if (section_matches(st->schema[i].section, name))
			return true;
	return false;
}

/* A section's keys are those of every schema section that matches its name. */
static const struct conf_key *
schema_key(const struct load_state *st, const char *name, const char *key)
{
	for (size_t i = 0; i < st->nschema; i++)
		if (section_matches(st->schema[i].section, name) &&
		    strcmp(st->schema[i].key, key) == 0)
			return &st->schema[i];
	return NULL;
}

/* ---------- building the tree ---------- */

static struct conf_section *
section_add(struct load_state *st, const char *name, unsigned line)
{
	struct conf *c = st->c;
	struct conf_section *nv, *s;
	char *sp;

	nv = reallocarray(c->secs, c->nsecs + 1, sizeof(*nv));
	if (nv == NULL)
		return NULL;
	c->secs = nv;
	s = &c->secs[c->nsecs];
	memset(s, 0, sizeof(*s));
	s->name = strdup(name);
	if (s->name == NULL)
		return NULL;
	sp = strchr(s->name, ' ');
	s->label = sp != NULL ? sp + 1 : "";
	s->line = line;
	c->nsecs++;
	return s;
}

static struct conf_entry *
entry_find(const struct conf_section *s, const char *key)
{
	for (size_t i = 0; i < s->nents; i++)
		if (strcmp(s->ents[i].key, key) == 0)
			return &s->ents[i];
	return NULL;
}

static int
entry_append(struct conf_entry *e, const char *val, unsigned line)
{
	char **nv;
	unsigned *nl;
	char *dup;

	nv = reallocarray(e->vals, e->n + 2, sizeof(*nv));
	if (nv == NULL)
		return -1;
	e->vals = nv;
	nl = reallocarray(e->lines, e->n + 1, sizeof(*nl));
	if (nl == NULL)
		return -1;
	e->lines = nl;
	dup = strdup(val);
	if (dup == NULL)
		return -1;
	e->vals[e->n] = dup;
	e->vals[e->n + 1] = NULL;
	e->lines[e->n] = line;
	e->n++;
	return 0;
}

static struct conf_entry *
entry_add(struct conf_section *s, const char *key)
{
	struct conf_entry *nv, *e;

	nv = reallocarray(s->ents, s->nents + 1, sizeof(*nv));
	if (nv == NULL)
		return NULL;
	s->ents = nv;
	e = &s->ents[s->nents];
	memset(e, 0, sizeof(*e));
	e->key = strdup(key);
	if (e->key == NULL)
		return NULL;
	s->nents++;
	return e;
}

/* ---------- line reader (our checks) and handler ---------- */

static bool
is_blank(char ch)
{
	return ch == ' ' || ch == '\t';
}

/* "[name]" with name "word" or "word label"; after ']' only blanks or a comment. */
static void
read_section_header(struct load_state *st, const char *line, size_t n)
{
	const char *close = memchr(line, ']', n);
	char name[CONF_SECTION_NAME_MAX + 1];
	size_t nl, spaces = 0;

	if (close == NULL) {
		load_fail(st, st->lineno, "section header without ']'");
		return;
	}
	for (const char *q = close + 1; q < line + n; q++) {
		if (*q == ';' || *q == '#')
			break;
		if (!is_blank(*q) && *q != '\r') {
			load_fail(st, st->lineno, "text after section header");
			return;
		}
	}
	nl = (size_t)(close - line - 1);
	if (nl == 0 || nl > CONF_SECTION_NAME_MAX) {
		load_fail(st, st->lineno, "section name empty or longer than %d characters",
		    CONF_SECTION_NAME_MAX);
		return;
	}
	memcpy(name, line + 1, nl);
	name[nl] = '\0';
	for (size_t i = 0; i < nl; i++) {
		unsigned char ch = (unsigned char)name[i];

		if (ch == ' ')
			spaces++;
		if (ch <= ' ' && ch != ' ') {
			load_fail(st, st->lineno, "bad character in section name");
			return;
		}
		if (ch == '[' || ch == ';' || ch == '#' || ch == '*' || ch == 0x7f) {
			load_fail(st, st->lineno, "bad character in section name");
			return;
		}
	}
	if (spaces > 1 || name[0] == ' ' || name[nl - 1] == ' ') {
		load_fail(st, st->lineno, "section name must be [name] or [kind label]: [%s]", name);
		return;
	}
	if (!schema_has_section(st, name)) {
		load_fail(st, st->lineno, "unknown section [%s]", name);
		return;
	}
	for (size_t i = 0; i < st->c->nsecs; i++)
		if (strcmp(st->c->secs[i].name, name) == 0) {
			load_fail(st, st->lineno, "duplicate section [%s] (first at line %u)", name,
			    st->c->secs[i].line);
			return;
		}
	if (section_add(st, name, st->lineno) == NULL) {
		load_fail(st, st->lineno, "out of memory");
		return;
	}
	st->cur = (long)st->c->nsecs - 1;
}

/* ini_reader: hand inih one line at a time, after our own checks. NULL ends parsing. */
static char *
conf_reader(char *str, int num, void *stream)
{
	struct load_state *st = stream;
	const char *line, *nlp;
	size_t n, take;

	if (st->failed || st->pos >= st->len)
		return NULL;
	line = st->text + st->pos;
	nlp = memchr(line, '\n', st->len - st->pos);
	n = nlp != NULL ? (size_t)(nlp - line) : st->len - st->pos;
	take = nlp != NULL ? n + 1 : n;
	st->lineno++;
	if (n > EGRESS_CONF_LINE_MAX || num < 0 || n + 2 > (size_t)num) {
		load_fail(st, st->lineno, "line longer than %d bytes", EGRESS_CONF_LINE_MAX);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)line[i];

		if (ch == '\r' && i == n - 1)
			continue;
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
			load_fail(st, st->lineno, "control character in line");
			return NULL;
		}
	}
	size_t k = 0;
	while (k < n && is_blank(line[k]))
		k++;
	bool content = k < n && line[k] != '\r' && line[k] != ';' && line[k] != '#';
	if (content && k > 0) {
		/* inih would append it to the previous value (a continuation line). */
		load_fail(st, st->lineno, "indented line (continuation lines are not supported)");
		return NULL;
	}
	if (content && line[0] == '[') {
		read_section_header(st, line, n);
		if (st->failed)
			return NULL;
	}
	/* inih cuts a value at " ;" and the handler never sees what was cut: remember it for
	 * keys whose schema refuses that (CONF_NO_INLINE_COMMENT). */
	st->inline_comment = false;
	if (content && line[0] != '[') {
		size_t sep = 0;

		/* the line is not NUL-terminated: bounded by n */
		while (sep < n && line[sep] != '=' && line[sep] != ':')
			sep++;
		for (size_t i = sep + 1; i + 1 < n; i++)
			if (is_blank(line[i]) && line[i + 1] == ';')
				st->inline_comment = true;
	}
	memcpy(str, line, take);
	str[take] = '\0';
	st->pos += take;
	return str;
}

static int
conf_handler(void *user, const char *section, const char *name, const char *value)
{
	struct load_state *st = user;
	struct conf_section *s;

	if (st->failed)
		return 0;
	if (st->cur < 0) {
		/* Keys before any [section] live in the "" section, created on first use. */
		if (!schema_has_section(st, "")) {
			load_fail(st, st->lineno, "key '%s' outside any section", name);
			return 0;
		}
		if (section_add(st, "", st->lineno) == NULL) {
			load_fail(st, st->lineno, "out of memory");
			return 0;
		}
		st->cur = (long)st->c->nsecs - 1;
	}
	s = &st->c->secs[st->cur];
	if (strcmp(section, s->name) != 0) {
		load_fail(st, st->lineno, "section name not understood");
		return 0;
	}
	if (name == NULL || *name == '\0' || value == NULL) {
		load_fail(st, st->lineno, "empty key");
		return 0;
	}
	const struct conf_key *k = schema_key(st, s->name, name);
	if (k == NULL) {
		load_fail(st, st->lineno, "unknown key '%s' in [%s]", name, s->name);
		return 0;
	}
	if ((k->flags & CONF_NO_INLINE_COMMENT) && st->inline_comment) {
		load_fail(st, st->lineno, "the value of '%s' holds ';' after white space, where INI "
		    "starts a comment and would cut the value silently; write \"a; b\" (no space "
		    "before ';') and put comments on lines of their own", name);
		return 0;
	}
	struct conf_entry *e = entry_find(s, name);
	if (e != NULL && !(k->flags & CONF_LIST)) {
		load_fail(st, st->lineno, "duplicate key '%s' in [%s] (first at line %u)", name,
		    s->name, e->lines[0]);
		return 0;
	}
	if (e != NULL && e->n >= EGRESS_CONF_LIST_MAX) {
		load_fail(st, st->lineno, "more than %d values for '%s'", EGRESS_CONF_LIST_MAX,
		    name);
		return 0;
	}
	if (e == NULL)
		e = entry_add(s, name);
	if (e == NULL || entry_append(e, value, st->lineno) != 0) {
		load_fail(st, st->lineno, "out of memory");
		return 0;
	}
	return 1;
}

/*
 * Debian builds inih with run-time switches (ini_allow_multiline, ini_max_line, ...).
 * Pin them once: no multi-line values, a heap line buffer big enough for our line
 * limit, stop at the first error. Our reader enforces every one of these again, so a
 * library that ignored a switch would still not get past us. conf.c is the only user of
 * inih in the project, so these process-wide settings bother nobody.
 */
static void
inih_setup(void)
{
	ini_allow_multiline = false;
	ini_allow_bom = false;          /* we strip a BOM ourselves */
	ini_allow_inline_comments = true;
	ini_allow_no_value = false;
	ini_stop_on_first_error = true;
	ini_use_stack = false;
	ini_allow_realloc = false;
	ini_initial_alloc = EGRESS_CONF_LINE_MAX + 3;
	ini_max_line = EGRESS_CONF_LINE_MAX + 3;
}

static pthread_once_t inih_once = PTHREAD_ONCE_INIT;

static void
check_required(struct load_state *st)
{
	bool have_root = false;

	for (size_t i = 0; i < st->c->nsecs && !st->failed; i++) {
		struct conf_section *s = &st->c->secs[i];

		if (s->name[0] == '\0')
			have_root = true;
		for (size_t k = 0; k < st->nschema; k++) {
			const struct conf_key *ck = &st->schema[k];

			if ((ck->flags & CONF_REQUIRED) && section_matches(ck->section, s->name) &&
			    entry_find(s, ck->key) == NULL) {
				load_fail(st, s->line, "[%s]: missing required key '%s'", s->name,
				    ck->key);
				break;
			}
		}
	}
	if (have_root || st->failed)
		return;
	for (size_t k = 0; k < st->nschema; k++)
		if ((st->schema[k].flags & CONF_REQUIRED) && st->schema[k].section[0] == '\0') {
			load_fail(st, 1, "missing required key '%s'", st->schema[k].key);
			return;
		}
}

struct conf *
conf_load_string(const char *name, const char *text, size_t len,
    const struct conf_key *schema, size_t nschema, char *err, size_t errlen)
{
	struct load_state st;
	struct conf *c;
	int rc;

	errbuf_set(err, errlen, 0, "%s", "");
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		errbuf_set(err, errlen, 0, "%s: out of memory", name != NULL ? name : "(string)");
		return NULL;
	}
	c->file = strdup(name != NULL ? name : "(string)");
	if (c->file == NULL) {
		free(c);
		errbuf_set(err, errlen, 0, "out of memory");
		return NULL;
	}
	memset(&st, 0, sizeof(st));
	st.c = c;
	st.schema = schema;
	st.nschema = schema != NULL ? nschema : 0;
	st.text = text;
	st.len = len;
	st.cur = -1;
	st.err = err;
	st.errlen = errlen;
	if (text == NULL && len != 0) {
		load_fail(&st, 0, "no text");
		goto fail;
	}
	if (len > EGRESS_CONF_FILE_MAX) {
		load_fail(&st, 0, "larger than %d bytes", EGRESS_CONF_FILE_MAX);
		goto fail;
	}
	if (len > 0 && memchr(text, '\0', len) != NULL) {
		const char *z = memchr(text, '\0', len);
		unsigned line = 1;

		for (const char *q = text; q < z; q++)
			line += *q == '\n';
		load_fail(&st, line, "NUL byte");
		goto fail;
	}
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		st.pos = 3;             /* UTF-8 byte order mark */

	pthread_once(&inih_once, inih_setup);
	rc = ini_parse_stream(conf_reader, &st, conf_handler, &st);
	if (st.failed)
		goto fail;
	if (rc == -2) {
		load_fail(&st, st.lineno, "out of memory");
		goto fail;
	}
	if (rc != 0) {
		load_fail(&st, rc > 0 ? (unsigned)rc : st.lineno,
		    "syntax error (expected 'key = value', '[section]' or a comment)");
		goto fail;
	}
	check_required(&st);
	if (st.failed)
		goto fail;
	return c;
fail:
	conf_free(c);
	return NULL;
}

struct conf *
conf_load(const char *path, const struct conf_key *schema, size_t nschema, char *err,
    size_t errlen)
{
	_cleanup_fd_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	struct stat sb;
	size_t len = 0;

	if (path == NULL) {
		errbuf_set(err, errlen, 0, "(null): no path");
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		errbuf_set(err, errlen, 0, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &sb) != 0) {
		errbuf_set(err, errlen, 0, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (!S_ISREG(sb.st_mode)) {
		errbuf_set(err, errlen, 0, "%s: not a regular file", path);
		return NULL;
	}
	if (sb.st_size > EGRESS_CONF_FILE_MAX) {
		errbuf_set(err, errlen, 0, "%s:0: larger than %d bytes", path, EGRESS_CONF_FILE_MAX);
		return NULL;
	}
	/* Read at most one byte past the limit: the file may grow after fstat. */
	buf = malloc(EGRESS_CONF_FILE_MAX + 1);
	if (buf == NULL) {
		errbuf_set(err, errlen, 0, "%s: out of memory", path);
		return NULL;
	}
	while (len < EGRESS_CONF_FILE_MAX + 1) {
		ssize_t r = read(fd, buf + len, EGRESS_CONF_FILE_MAX + 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			errbuf_set(err, errlen, 0, "%s: %s", path, strerror(errno));
			return NULL;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	return conf_load_string(path, buf, len, schema, nschema, err, errlen);
}

void
conf_free(struct conf *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->nsecs; i++) {
		struct conf_section *s = &c->secs[i];

		for (size_t k = 0; k < s->nents; k++) {
			struct conf_entry *e = &s->ents[k];

			for (size_t v = 0; v < e->n; v++)
				free(e->vals[v]);
			free(e->vals);
			free(e->lines);
			free(e->key);
		}
		free(s->ents);
		free(s->name);
	}
	free(c->secs);
	free(c->file);
	free(c);
}

/* ---------- accessors ---------- */

size_t
conf_nsections(const struct conf *c)
{
	return c != NULL ? c->nsecs : 0;
}

const char *
conf_section_name(const struct conf *c, size_t i)
{
	return c != NULL && i < c->nsecs ? c->secs[i].name : NULL;
}

const char *
conf_section_label(const struct conf *c, size_t i)
{
	return c != NULL && i < c->nsecs ? c->secs[i].label : NULL;
}

long
conf_find_section(const struct conf *c, const char *name)
{
	if (c == NULL || name == NULL)
		return -1;
	for (size_t i = 0; i < c->nsecs; i++)
		if (strcmp(c->secs[i].name, name) == 0)
			return (long)i;
	return -1;
}

static const struct conf_entry *
lookup(const struct conf *c, size_t sec, const char *key)
{
	if (c == NULL || sec >= c->nsecs || key == NULL)
		return NULL;
	return entry_find(&c->secs[sec], key);
}

const char *
conf_get(const struct conf *c, size_t sec, const char *key, unsigned *line)
{
	const struct conf_entry *e = lookup(c, sec, key);

	if (line != NULL)
		*line = e != NULL ? e->lines[0] : 0;
	return e != NULL ? e->vals[0] : NULL;
}

const char *const *
conf_get_list(const struct conf *c, size_t sec, const char *key, size_t *n)
{
	const struct conf_entry *e = lookup(c, sec, key);

	if (n != NULL)
		*n = e != NULL ? e->n : 0;
	return e != NULL ? (const char *const *)e->vals : NULL;
}

unsigned
conf_line(const struct conf *c, size_t sec, const char *key)
{
	const struct conf_entry *e = lookup(c, sec, key);

	return e != NULL ? e->lines[0] : 0;
}

unsigned
conf_section_line(const struct conf *c, size_t sec)
{
	return c != NULL && sec < c->nsecs ? c->secs[sec].line : 0;
}

const char *
conf_file(const struct conf *c)
{
	return c != NULL ? c->file : NULL;
}

/* ---------- value parsers ---------- */

int
conf_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };

	if (s == NULL)
		return -1;
	for (size_t i = 0; i < EGRESS_NELEM(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

/*
 * Leading decimal digits of s into *v (no sign, no blanks, at least one digit, no
 * overflow); *end points after them.
 */
static int
parse_digits(const char *s, uint64_t *v, const char **end)
{
	uint64_t r = 0;
	const char *p = s;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (ckd_mul_sz(&r, r, (uint64_t)10) || ckd_add_sz(&r, r, (uint64_t)(*p - '0')))
			return -1;
	}
	*v = r;
	*end = p;
	return 0;
}

int
conf_parse_size(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v, mul = 1;
	const char *p;

	if (parse_digits(s, &v, &p) != 0)
		return -1;
	if (*p != '\0') {
		switch (*p) {
		case 'K': case 'k': mul = 1ull << 10; break;
		case 'M': case 'm': mul = 1ull << 20; break;
		case 'G': case 'g': mul = 1ull << 30; break;
		case 'T': case 't': mul = 1ull << 40; break;
		default: return -1;
		}
		if (p[1] != '\0')
			return -1;
	}
	if (ckd_mul_sz(&v, v, mul) || v > max)
		return -1;
	*out = v;
	return 0;
}

int
conf_parse_duration_ms(const char *s, uint64_t max_ms, uint64_t *out)
{
	uint64_t v, mul;
	const char *p;

	if (parse_digits(s, &v, &p) != 0)
		return -1;
	if (*p == '\0' || strcmp(p, "s") == 0)
		mul = 1000;             /* a bare number is seconds */
	else if (strcmp(p, "ms") == 0)
		mul = 1;
	else if (strcmp(p, "m") == 0)
		mul = 60 * 1000;
	else if (strcmp(p, "h") == 0)
		mul = 60 * 60 * 1000;
	else
		return -1;
	if (ckd_mul_sz(&v, v, mul) || v > max_ms)
		return -1;
	*out = v;
	return 0;
}

/* ---------- typed getters ---------- */

int
conf_get_bool(const struct conf *c, size_t sec, const char *key, bool def, bool *out,
    char *err, size_t errlen)
{
	unsigned line;
	const char *v = conf_get(c, sec, key, &line);

	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (conf_parse_bool(v, out) != 0) {
		errbuf_set(err, errlen, 0, "%s:%u: %s: expected true/false/yes/no/on/off/1/0, got '%s'",
		    c->file, line, key, v);
		return -1;
	}
	return 0;
}

int
conf_get_int(const struct conf *c, size_t sec, const char *key, long long min,
    long long max, long long def, long long *out, char *err, size_t errlen)
{
	unsigned line;
	const char *v = conf_get(c, sec, key, &line);
	const char *why;

	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (num_parse(v, min, max, out, &why) != 0) {
		errbuf_set(err, errlen, 0, "%s:%u: %s: %s integer '%s' (allowed %lld..%lld)", c->file,
		    line, key, why != NULL ? why : "invalid", v, min, max);
		return -1;
	}
	return 0;
}

int
conf_get_size(const struct conf *c, size_t sec, const char *key, uint64_t max,
    uint64_t def, uint64_t *out, char *err, size_t errlen)
{
	unsigned line;
	const char *v = conf_get(c, sec, key, &line);

	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (conf_parse_size(v, max, out) != 0) {
		errbuf_set(err, errlen, 0, "%s:%u: %s: bad size '%s' (a number with optional K/M/G/T, "
		    "at most %llu bytes)", c->file, line, key, v, (unsigned long long)max);
		return -1;
	}
	return 0;
}

int
conf_get_duration_ms(const struct conf *c, size_t sec, const char *key, uint64_t max_ms,
    uint64_t def, uint64_t *out, char *err, size_t errlen)
{
	unsigned line;
	const char *v = conf_get(c, sec, key, &line);

	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (conf_parse_duration_ms(v, max_ms, out) != 0) {
		errbuf_set(err, errlen, 0, "%s:%u: %s: bad duration '%s' (a number with ms/s/m/h, "
		    "at most %llu ms)", c->file, line, key, v, (unsigned long long)max_ms);
		return -1;
	}
	return 0;
}
