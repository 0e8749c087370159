/*
 * pathglob.c - canonical repository paths and fnmatchcase globs.
 *
 * Why reimplement fnmatch rather than call fnmatch(3): glibc's fnmatch has different
 * class rules ('^' negates, backslash escapes, FNM_PATHNAME) and recursive matching with
 * exponential worst cases. WorkUnits are written against Python's fnmatch.fnmatchcase, so
 * we compile a pattern the way CPython's fnmatch.translate does and match the result with
 * the classic iterative star algorithm, which is exact here because every non-star token
 * matches exactly one character.
 */
#include "common/pathglob.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"
#include "common/util.h"

/* ---------- canonical paths ---------- */

enum path_err
path_check(const char *p)
{
	size_t n;

	if (p == NULL || *p == '\0')
		return PATH_ERR_EMPTY;
	n = strnlen(p, EGRESS_REPO_PATH_MAX + 1);
	if (n > EGRESS_REPO_PATH_MAX)
		return PATH_ERR_TOO_LONG;
	if (p[0] == '/')
		return PATH_ERR_ABSOLUTE;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '\\')
			return PATH_ERR_BACKSLASH;
		if (c < 0x20 || c == 0x7f)
			return PATH_ERR_CONTROL;
	}
	/* Components: never normalize, refuse; "a/./b" and "a/../b" are not this path. */
	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != '/')
			continue;
		size_t len = i - start;
		if (len == 0)
			return PATH_ERR_EMPTY_COMPONENT;
		if (len == 1 && p[start] == '.')
			return PATH_ERR_DOT;
		if (len == 2 && p[start] == '.' && p[start + 1] == '.')
			return PATH_ERR_DOTDOT;
		start = i + 1;
	}
	return PATH_OK;
}

const char *
path_err_str(enum path_err e)
{
	switch (e) {
	case PATH_OK:
		return "ok";
	case PATH_ERR_EMPTY:
		return "empty path";
	case PATH_ERR_TOO_LONG:
		return "path too long";
	case PATH_ERR_ABSOLUTE:
		return "absolute path";
	case PATH_ERR_BACKSLASH:
		return "backslash in path";
	case PATH_ERR_CONTROL:
		return "control character in path";
	case PATH_ERR_EMPTY_COMPONENT:
		return "empty path component";
	case PATH_ERR_DOT:
		return "'.' path component";
	case PATH_ERR_DOTDOT:
		return "'..' path component";
	}
	return "invalid path";
}

/* ---------- UTF-8 ---------- */

/*
 * Next code point of NUL-terminated s at *i, advancing *i. Strict UTF-8 (no overlongs,
 * no surrogates, <= U+10FFFF); any other byte b >= 0x80 is one character U+DC00+b, as
 * Python's surrogateescape decodes it. Must not be called at the terminating NUL.
 */
static uint32_t
next_cp(const char *s, size_t *i)
{
	const unsigned char *u = (const unsigned char *)s + *i;
	uint32_t c = u[0];
	size_t n;
	uint32_t min;

	if (c < 0x80) {
		*i += 1;
		return c;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		n = 1; c &= 0x1f; min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 2; c &= 0x0f; min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 3; c &= 0x07; min = 0x10000;
	} else {
		goto bad;
	}
	for (size_t k = 1; k <= n; k++) {
		if ((u[k] & 0xc0) != 0x80)     /* also stops at the NUL terminator */
			goto bad;
		c = (c << 6) | (u[k] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		goto bad;
	*i += n + 1;
	return c;
bad:
	*i += 1;
	return 0xdc00 + u[0];
}

/* ---------- git's reserved names (read-cache.c verify_path, utf8.c, path.c) ---------- */

/* Next code point for HFS+ comparison: the ignorable ones skipped. 0 at the end of the
 * component and for an invalid sequence (git's pick_one_utf8_char gives 0 there too). */
static uint32_t
next_hfs_cp(const char *s, size_t len, size_t *i)
{
	for (;;) {
		uint32_t c;
		size_t j = *i;

		if (j >= len)
			return 0;
		c = next_cp(s, &j);
		if (j > len || (c >= 0xdc80 && c <= 0xdcff)) {
			*i = len;
			return 0;
		}
		*i = j;
		if ((c >= 0x200c && c <= 0x200f) || (c >= 0x202a && c <= 0x202e) ||
		    (c >= 0x206a && c <= 0x206f) || c == 0xfeff)
			continue;
		return c;
	}
}

/* HFS+: "." + needle (lowercase ASCII), ignoring case and ignorable code points. */
static bool
is_hfs_dot(const char *s, size_t len, const char *needle)
{
	size_t i = 0;

	if (next_hfs_cp(s, len, &i) != '.')
		return false;
	for (; *needle; needle++) {
		uint32_t c = next_hfs_cp(s, len, &i);
		if (c > 127 || (c >= 'A' && c <= 'Z' ? c + 32 : c) != (uint32_t)*needle)
			return false;
	}
	return next_hfs_cp(s, len, &i) == 0;
}

static char
lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

/* s[i..len) holds only spaces and periods up to the end or a ':' (a data stream). */
static bool
ntfs_tail(const char *s, size_t len, size_t i)
{
	for (; i < len; i++) {
		if (s[i] == ':')
			return true;
		if (s[i] != ' ' && s[i] != '.')
			return false;
	}
	return true;
}

/*
 * NTFS: "." + name, the 6-character short name "name~1".."~4", or the fall-back 8.3 short
 * name (shortprefix + "~" + digits), each followed by spaces/periods only (git's
 * is_ntfs_dot_generic).
 */
static bool
is_ntfs_dot(const char *s, size_t len, const char *name, const char *shortprefix)
{
	size_t nl = strlen(name), i;
	bool tilde = false;

	if (len >= nl + 1 && s[0] == '.') {
		for (i = 0; i < nl && lower(s[i + 1]) == name[i]; i++)
			;
		if (i == nl)
			return ntfs_tail(s, len, nl + 1);
	}
	if (len >= 8 && s[6] == '~' && s[7] >= '1' && s[7] <= '4') {
		for (i = 0; i < 6 && lower(s[i]) == name[i]; i++)
			;
		if (i == 6)
			return ntfs_tail(s, len, 8);
	}
	if (shortprefix == NULL || len < 8)
		return false;
	for (i = 0; i < 8; i++) {
		if (tilde) {
			if (s[i] < '0' || s[i] > '9')
				return false;
		} else if (s[i] == '~') {
			if (++i >= 8 || s[i] < '1' || s[i] > '9')
				return false;
			tilde = true;
		} else if (i >= 6 || (s[i] & 0x80) || lower(s[i]) != shortprefix[i]) {
			return false;
		}
	}
	return ntfs_tail(s, len, 8);
}

bool
path_component_is_dotgit(const char *c, size_t len)
{
	if (len == 0)
		return false;
	/* "git~1": the 8.3 short name NTFS gives ".git" */
	if (len >= 5 && lower(c[0]) == 'g' && lower(c[1]) == 'i' && lower(c[2]) == 't' &&
	    c[3] == '~' && c[4] == '1' && ntfs_tail(c, len, 5))
		return true;
	return is_ntfs_dot(c, len, "git", NULL) || is_hfs_dot(c, len, "git");
}

bool
path_has_dotgit(const char *path)
{
	for (const char *s = path;;) {
		const char *e = strchr(s, '/');
		size_t l = e ? (size_t)(e - s) : strlen(s);

		if (path_component_is_dotgit(s, l))
			return true;
		if (e == NULL)
			return false;
		s = e + 1;
	}
}

bool
path_is_git_control_file(const char *path)
{
	static const struct { const char *name, *shortprefix; } f[] = {
		{ "gitmodules", "gi7eba" }, { "gitattributes", "gi7d29" },
		{ "gitignore", "gi250a" }, { "mailmap", "maba30" },
	};
	const char *base = strrchr(path, '/');
	size_t len;

	base = base ? base + 1 : path;
	len = strlen(base);
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (is_ntfs_dot(base, len, f[i].name, f[i].shortprefix) ||
		    is_hfs_dot(base, len, f[i].name))
			return true;
	return false;
}

/* ---------- compiling a pattern ---------- */

enum tok_kind { TOK_LIT, TOK_ANY, TOK_STAR, TOK_CLASS };

struct tok {
	enum tok_kind kind;
	uint32_t cp;            /* TOK_LIT */
	bool neg;               /* TOK_CLASS */
	uint16_t off, n;        /* TOK_CLASS: items[off .. off+n) */
};

struct range {
	uint32_t lo, hi;
};

/* A compiled pattern; every array is bounded by EGRESS_GLOB_MAX code points. */
struct glob {
	struct tok tok[EGRESS_GLOB_MAX];
	size_t ntok;
	struct range item[EGRESS_GLOB_MAX];
	size_t nitem;
};

/* Element of a class body while translating: a character or a range separator. */
struct cel {
	uint32_t c;
	bool sep;
	bool dead;
};

/*
 * Translate the class body p[i..j) the way CPython's fnmatch.translate does, then record
 * the resulting regex set as items: see the comments for each step.
 */
static void
compile_class(struct glob *g, const uint32_t *p, size_t i, size_t j)
{
	struct cel el[EGRESS_GLOB_MAX];
	size_t n = j - i;
	bool has_dash = false;

	for (size_t k = 0; k < n; k++) {
		el[k].c = p[i + k];
		el[k].sep = false;
		el[k].dead = false;
		if (p[i + k] == '-')
			has_dash = true;
	}
	if (has_dash) {
		/*
		 * Hyphens that form ranges: the search starts after the first character (after
		 * "!x" when negated) and skips two characters after each range hyphen.
		 */
		size_t k = (p[i] == '!') ? 2 : 1;
		size_t last = SIZE_MAX;

		while (k < n) {
			while (k < n && el[k].c != '-')
				k++;
			if (k >= n)
				break;
			el[k].sep = true;
			last = k;
			k += 3;
		}
		/* An empty last chunk: its hyphen is a literal at the end ("[a-]"). */
		if (last != SIZE_MAX && last == n - 1)
			el[last].sep = false;
		/*
		 * Remove empty ranges right to left: when the character before a range hyphen
		 * sorts after the one following it, both and the hyphen go ("[z-a]" is empty).
		 */
		for (size_t s = n; s-- > 0;) {
			if (!el[s].sep || el[s].dead)
				continue;
			size_t l = s, r = s;
			while (l > 0 && el[l - 1].dead)
				l--;
			r++;
			while (r < n && el[r].dead)
				r++;
			if (l == 0 || r >= n)
				continue;
			l--;
			if (el[l].sep || el[r].sep)
				continue;       /* cannot happen (see CPython); be safe */
			if (el[l].c > el[r].c)
				el[l].dead = el[s].dead = el[r].dead = true;
		}
	}
	/* Compact, then read the set the way the regex engine will. */
	size_t m = 0;
	for (size_t k = 0; k < n; k++)
		if (!el[k].dead)
			el[m++] = el[k];
	struct tok *t = &g->tok[g->ntok++];
	t->kind = TOK_CLASS;
	t->neg = false;
	t->off = (uint16_t)g->nitem;
	size_t k = 0;
	if (m > 0 && !el[0].sep && el[0].c == '!') {
		t->neg = true;          /* stuff[0] == '!' becomes '^' */
		k = 1;
	}
	while (k < m) {
		struct range *r = &g->item[g->nitem++];

		if (!el[k].sep && k + 2 < m && el[k + 1].sep && !el[k + 2].sep) {
			r->lo = el[k].c;
			r->hi = el[k + 2].c;
			k += 3;
		} else {
			/* A character, or (never, see above) a stray separator: a literal. */
			r->lo = r->hi = el[k].sep ? '-' : el[k].c;
			k++;
		}
	}
	t->n = (uint16_t)(g->nitem - t->off);
}

/* Returns false when the pattern is too long. */
static bool
glob_compile(struct glob *g, const char *pattern)
{
	uint32_t p[EGRESS_GLOB_MAX];
	size_t n = 0, bi = 0;

	if (strnlen(pattern, EGRESS_GLOB_MAX + 1) > EGRESS_GLOB_MAX)
		return false;
	while (pattern[bi] != '\0')
		p[n++] = next_cp(pattern, &bi);   /* n <= bytes <= EGRESS_GLOB_MAX */
	g->ntok = 0;
	g->nitem = 0;
	for (size_t i = 0; i < n;) {
		uint32_t c = p[i++];

		if (c == '*') {
			if (g->ntok == 0 || g->tok[g->ntok - 1].kind != TOK_STAR)
				g->tok[g->ntok++] = (struct tok){ .kind = TOK_STAR };
		} else if (c == '?') {
			g->tok[g->ntok++] = (struct tok){ .kind = TOK_ANY };
		} else if (c == '[') {
			size_t j = i;

			if (j < n && p[j] == '!')
				j++;
			if (j < n && p[j] == ']')
				j++;
			while (j < n && p[j] != ']')
				j++;
			if (j >= n) {
				g->tok[g->ntok++] = (struct tok){ .kind = TOK_LIT, .cp = '[' };
			} else {
				compile_class(g, p, i, j);
				i = j + 1;
			}
		} else {
			g->tok[g->ntok++] = (struct tok){ .kind = TOK_LIT, .cp = c };
		}
	}
	return true;
}

static bool
tok_match(const struct glob *g, const struct tok *t, uint32_t c)
{
	switch (t->kind) {
	case TOK_LIT:
		return t->cp == c;
	case TOK_ANY:
		return true;
	case TOK_CLASS: {
		bool in = false;

		for (size_t k = t->off; k < (size_t)t->off + t->n; k++)
			if (c >= g->item[k].lo && c <= g->item[k].hi) {
				in = true;
				break;
			}
		return in != t->neg;
	}
	case TOK_STAR:
		break;
	}
	return false;
}

/* ---------- matching ---------- */

bool
glob_valid(const char *pattern)
{
	return pattern != NULL && strnlen(pattern, EGRESS_GLOB_MAX + 1) <= EGRESS_GLOB_MAX;
}

bool
glob_match(const char *pattern, const char *name)
{
	/* ~20 KiB: kept off the stack of deep callers by being static per thread. */
	static __thread struct glob g;
	size_t t = 0, ni = 0, star_t = 0, star_ni = 0;
	bool have_star = false;

	if (!glob_valid(pattern) || name == NULL || !glob_compile(&g, pattern))
		return false;
	for (;;) {
		if (t < g.ntok && g.tok[t].kind == TOK_STAR) {
			/* Remember where to resume: the star first matches nothing. */
			have_star = true;
			star_t = ++t;
			star_ni = ni;
			continue;
		}
		if (name[ni] == '\0')
			break;
		if (t < g.ntok) {
			size_t nx = ni;
			uint32_t c = next_cp(name, &nx);

			if (tok_match(&g, &g.tok[t], c)) {
				t++;
				ni = nx;
				continue;
			}
		}
		if (!have_star)
			return false;
		/* Let the last star swallow one more character and retry from there. */
		next_cp(name, &star_ni);
		ni = star_ni;
		t = star_t;
	}
	while (t < g.ntok && g.tok[t].kind == TOK_STAR)
		t++;
	return t == g.ntok;
}

bool
glob_is_pattern(const char *pattern)
{
	return pattern != NULL && strpbrk(pattern, "*?[") != NULL;
}

bool
path_glob_match(const char *pattern, const char *name)
{
	size_t n;

	if (glob_match(pattern, name))
		return true;
	if (pattern == NULL || name == NULL || glob_is_pattern(pattern))
		return false;
	n = strlen(pattern);
	return n > 0 && strncmp(name, pattern, n) == 0 && name[n] == '/';
}
