/*
 * gitconfig - sanitize a repository's .git/config for the worker (see gitconfig.h).
 *
 * Line by line: a section header sets the current section (lower-cased name, subsection
 * as written), a key line is kept, rewritten or dropped by the rules, and continuation
 * lines follow the fate of their key. Nothing here trusts the input to be well-formed.
 */
#define _GNU_SOURCE 1
#include "executor/gitconfig.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GC_NAME_MAX 64
#define GC_SUB_MAX  1024

struct gc_out {
	char *buf;
	size_t len, cap;
	bool oom;
};

static void
gc_put(struct gc_out *o, const char *s, size_t n)
{
	if (o->oom)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t nc = o->cap ? o->cap : 4096;
		char *nb;

		while (nc < o->len + n + 1)
			nc *= 2;
		if ((nb = realloc(o->buf, nc)) == NULL) {
			o->oom = true;
			return;
		}
		o->buf = nb;
		o->cap = nc;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

static void
gc_puts(struct gc_out *o, const char *s)
{
	gc_put(o, s, strlen(s));
}

/* Does the text contain scheme://userinfo@ ? If so, and out is given, write the text with
 * every such userinfo removed. */
static bool
gc_userinfo(const char *s, size_t n, struct gc_out *out)
{
	bool found = false;
	size_t i = 0, from = 0;

	while (i + 3 <= n) {
		if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') {
			size_t a = i + 3, e = a, at = 0;
			bool has_at = false;

			while (e < n && s[e] != '/' && s[e] != '?' && s[e] != '#' && s[e] != '"' &&
			    s[e] != ' ' && s[e] != '\t' && s[e] != '\\' && s[e] != ';')
				e++;
			for (size_t k = a; k < e; k++)
				if (s[k] == '@') {
					at = k;
					has_at = true;
				}
			if (has_at) {
				found = true;
				if (out != NULL) {
					gc_put(out, s + from, a - from);
					from = at + 1;
				}
				i = at + 1;
			} else {
				i++;    /* an authority may hide another "://" (https://a://b@h) */
			}
			continue;
		}
		i++;
	}
	if (out != NULL)
		gc_put(out, s + from, n - from);
	return found;
}

/* Parse "[name]" / "[name \"sub\"]" / "[name.sub]". Returns the index after ']' or 0. */
static size_t
gc_header(const char *l, size_t n, char *name, char *sub, bool *has_sub)
{
	size_t i = 1, k = 0;

	*has_sub = false;
	sub[0] = '\0';
	while (i < n && (isalnum((unsigned char)l[i]) || l[i] == '-' || l[i] == '.')) {
		if (k + 1 >= GC_NAME_MAX)
			return 0;
		name[k++] = (char)tolower((unsigned char)l[i++]);
	}
	name[k] = '\0';
	if (k == 0)
		return 0;
	{
		/* legacy [section.subsection] */
		char *dot = strchr(name, '.');
		if (dot != NULL) {
			*dot = '\0';
			snprintf(sub, GC_SUB_MAX, "%s", dot + 1);
			*has_sub = true;
		}
	}
	if (i < n && l[i] == ' ' && !*has_sub) {
		size_t j = 0;

		while (i < n && l[i] == ' ')
			i++;
		if (i >= n || l[i] != '"')
			return 0;
		i++;
		while (i < n && l[i] != '"') {
			char c = l[i];
			if (c == '\\' && i + 1 < n)
				c = l[++i];
			if (j + 1 >= GC_SUB_MAX || c == '\0')
				return 0;
			sub[j++] = c;
			i++;
		}
		if (i >= n)
			return 0;
		sub[j] = '\0';
		*has_sub = true;
		i++;
	}
	if (i >= n || l[i] != ']')
		return 0;
	return i + 1;
}

/* Is the rest of a line (after a header) empty or a comment? */
static bool
gc_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '#' || s[i] == ';')
			return true;
		if (!isspace((unsigned char)s[i]))
			return false;
	}
	return true;
}

/* Does a key line's value end in an unescaped backslash (continues on the next line)? */
static bool
gc_continues(const char *s, size_t n)
{
	size_t bs = 0;

	while (n > 0 && (s[n - 1] == '\r'))
		n--;
	while (bs < n && s[n - 1 - bs] == '\\')
		bs++;
	return bs % 2 == 1;
}

/* Case-insensitive search for the lower-case word w in s[0..n). */
static bool
gc_contains(const char *s, size_t n, const char *w)
{
	size_t wl = strlen(w);

	for (size_t i = 0; i + wl <= n; i++)
		if (strncasecmp(s + i, w, wl) == 0)
			return true;
	return false;
}

/* Does the line read as a section header ("[...", after blanks)? A continuation line that
 * does is kept out: git reads it as part of the value, a reader that does not join the
 * lines would see a section there ("[include]" followed by a path). */
static bool
gc_header_like(const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i < n && s[i] == '[';
}

/* A line that carries header material wherever it sits (a key, a value, a continuation). */
static bool
gc_header_material(const char *s, size_t n)
{
	return gc_contains(s, n, "extraheader") || gc_contains(s, n, "authorization:");
}

enum gc_verdict { GC_KEEP, GC_DROP, GC_REWRITE };

static enum gc_verdict
gc_judge(const char *sec, const char *sub, bool has_sub, const char *key, const char *line,
    size_t n)
{
	(void)has_sub;
	(void)sub;
	/* a header value is a credential wherever it was put (git reads it only under
	 * http, but the bytes would reach the worker from any section) */
	if (gc_header_material(line, n))
		return GC_DROP;
	if (strcmp(sec, "http") == 0 &&
	    (strcmp(key, "cookiefile") == 0 ||
	     strcmp(key, "sslcert") == 0 || strcmp(key, "sslkey") == 0 ||
	     strcmp(key, "proxy") == 0))
		return GC_DROP;
	if (strcmp(sec, "url") == 0 &&
	    (strcmp(key, "insteadof") == 0 || strcmp(key, "pushinsteadof") == 0) &&
	    gc_userinfo(line, n, NULL))
		return GC_DROP;
	if (strcmp(sec, "core") == 0 &&
	    (strcmp(key, "sshcommand") == 0 || strcmp(key, "askpass") == 0 ||
	     strcmp(key, "fsmonitor") == 0))
		return GC_DROP;
	if ((strcmp(sec, "commit") == 0 || strcmp(sec, "tag") == 0) &&
	    strcmp(key, "gpgsign") == 0)
		return GC_DROP;
	if (gc_userinfo(line, n, NULL))
		return GC_REWRITE;
	return GC_KEEP;
}

static bool
gc_section_dropped(const char *sec, const char *sub, bool has_sub)
{
	if (strcmp(sec, "credential") == 0 || strcmp(sec, "include") == 0 ||
	    strcmp(sec, "includeif") == 0)
		return true;
	if (has_sub && gc_userinfo(sub, strlen(sub), NULL))
		return true;
	return false;
}

int
gitconfig_sanitize(const char *in, size_t len, char **out, size_t *outlen, unsigned *changed)
{
	struct gc_out o = { 0 };
	char sec[GC_NAME_MAX] = "", sub[GC_SUB_MAX] = "";
	bool has_sub = false, sec_drop = false, cont = false, cont_keep = true, have_user = false;
	unsigned n_changed = 0;
	size_t pos = 0;

	*out = NULL;
	*outlen = 0;
	if (len > GITCONFIG_MAX)
		return -1;
	gc_puts(&o, "# sanitized by egress-exec: credentials, includes and signing removed "
	    "(docs/sandbox.md)\n");
	while (pos < len) {
		const char *l = in + pos;
		const char *nl = memchr(l, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - l) : len - pos;
		size_t i = 0;

		pos += n + (nl ? 1 : 0);
		if (memchr(l, '\0', n) != NULL) {      /* NUL bytes: not a config line */
			n_changed++;
			/* dropped, and what it continues into with it (a kept key never has such
			 * a line: the look-ahead below drops the whole key) */
			cont = gc_continues(l, n);
			cont_keep = false;
			continue;
		}
		if (cont) {                            /* continuation of the previous key */
			if (cont_keep && !sec_drop) {
				gc_put(&o, l, n);
				gc_puts(&o, "\n");
			}
			cont = gc_continues(l, n);
			continue;
		}
		while (i < n && (l[i] == ' ' || l[i] == '\t'))
			i++;
		if (i >= n || l[i] == '#' || l[i] == ';' || l[i] == '\r') {
			if (!sec_drop) {
				/* comments too: a token pasted into a comment is still a token */
				if (gc_userinfo(l, n, &o))
					n_changed++;
				gc_puts(&o, "\n");
			}
			continue;
		}
		if (l[i] == '[') {
			char name[GC_NAME_MAX];
			size_t end = gc_header(l + i, n - i, name, sub, &has_sub);

			if (end == 0) {                 /* unparsable header: drop, and its keys */
				sec_drop = true;
				n_changed++;
				continue;
			}
			snprintf(sec, sizeof(sec), "%s", name);
			sec_drop = gc_section_dropped(sec, sub, has_sub);
			if (sec_drop) {
				n_changed++;
				continue;
			}
			if (strcmp(sec, "user") == 0)
				have_user = true;
			gc_put(&o, l, i + end);
			gc_puts(&o, "\n");
			if (gc_blank(l + i + end, n - i - end))
				continue;
			/* a key on the header's line: handle it as its own line */
			i += end;
			while (i < n && (l[i] == ' ' || l[i] == '\t'))
				i++;
			l += i;
			n -= i;
			i = 0;
		}
		if (sec_drop) {
			cont = gc_continues(l, n);
			cont_keep = false;
			continue;
		}
		if (sec[0] == '\0' || !isalpha((unsigned char)l[i])) {
			n_changed++;                     /* a key outside a section, or garbage */
			cont = gc_continues(l, n);
			cont_keep = false;
			continue;
		}
		{
			char key[GC_NAME_MAX];
			size_t k = 0;
			enum gc_verdict v;
			bool more = gc_continues(l, n);

			while (i < n && (isalnum((unsigned char)l[i]) || l[i] == '-') &&
			    k + 1 < sizeof(key))
				key[k++] = (char)tolower((unsigned char)l[i++]);
			key[k] = '\0';
			/* git's key syntax: the name ends at blanks, '=' or the end of the line */
			if (i < n && l[i] != ' ' && l[i] != '\t' && l[i] != '=' && l[i] != '\r')
				v = GC_DROP;
			else
				v = gc_judge(sec, sub, has_sub, key, l, n);
			if (more && v == GC_KEEP) {
				/* judge a continued value whole: look ahead over its lines */
				size_t q = pos;
				bool c2 = true;

				while (c2 && q < len) {
					const char *l2 = in + q;
					const char *nl2 = memchr(l2, '\n', len - q);
					size_t n2 = nl2 ? (size_t)(nl2 - l2) : len - q;

					if (gc_header_material(l2, n2) || memchr(l2, '\0', n2) != NULL ||
					    gc_header_like(l2, n2))
						v = GC_DROP;
					else if (gc_userinfo(l2, n2, NULL) && v == GC_KEEP)
						v = GC_REWRITE;
					c2 = gc_continues(l2, n2);
					q += n2 + (nl2 ? 1 : 0);
				}
				if (c2)
					v = GC_DROP;   /* continued past the end of the file */
			}
			if (v == GC_REWRITE && more)
				v = GC_DROP;           /* a continued value is not rewritten by halves */
			switch (v) {
			case GC_KEEP:
				gc_put(&o, l, n);
				gc_puts(&o, "\n");
				break;
			case GC_REWRITE:
				n_changed++;
				gc_userinfo(l, n, &o);
				gc_puts(&o, "\n");
				break;
			case GC_DROP:
				n_changed++;
				break;
			}
			cont = more;
			cont_keep = v == GC_KEEP;
		}
	}
	if (!have_user)
		gc_puts(&o, "[user]\n\tname = egress worker\n\temail = worker@egress.invalid\n");
	if (o.oom) {
		free(o.buf);
		return -1;
	}
	*out = o.buf;
	*outlen = o.len;
	*changed = n_changed;
	return 0;
}
