/*
 * redirmemo.c - bounded, short-lived memory of allowed redirects per principal.
 *
 * Small linear tables on purpose: at most EGRESS_REDIRECT_MEMO_MAX entries per principal
 * are scanned per hop, and the principal list is scanned once per hop (at most
 * EGRESS_GRANTS_MAX, usually a handful).
 */
#include "egressd/redirmemo.h"

#include <stdlib.h>
#include <string.h>

#include "common/util.h"

struct memo_entry {
	enum dest_scheme scheme;
	struct host host;
	uint16_t port;
	char *path;                 /* owned */
	char hop[64];
	unsigned depth;
	bool cross_origin;
	bool linked;                /* a follow-up already named it as its parent */
	uint64_t at_ms;
};

struct memo_principal {
	char key[EGRESS_PRINCIPAL_MAX + 1 + 64];
	struct memo_entry e[EGRESS_REDIRECT_MEMO_MAX];
	size_t n;
	uint64_t newest_ms;
	struct memo_principal *next;
};

struct redirmemo {
	uint64_t ttl_ms;
	struct memo_principal *head;
	size_t nprincipals;
};

struct redirmemo *
redirmemo_new(uint64_t ttl_ms)
{
	struct redirmemo *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	m->ttl_ms = ttl_ms != 0 ? ttl_ms : (uint64_t)EGRESS_REDIRECT_MEMO_TTL_S * 1000;
	return m;
}

static void
entry_drop(struct memo_principal *p, size_t i)
{
	free(p->e[i].path);
	memmove(&p->e[i], &p->e[i + 1], (p->n - i - 1) * sizeof(p->e[0]));
	p->n--;
}

static void
principal_free(struct memo_principal *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->e[i].path);
	free(p);
}

void
redirmemo_free(struct redirmemo *m)
{
	if (m == NULL)
		return;
	while (m->head != NULL) {
		struct memo_principal *p = m->head;
		m->head = p->next;
		principal_free(p);
	}
	free(m);
}

static void
principal_unlink(struct redirmemo *m, struct memo_principal *p)
{
	for (struct memo_principal **pp = &m->head; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			m->nprincipals--;
			principal_free(p);
			return;
		}
	}
}

/* Drop expired entries of p (entries are in arrival order: the oldest come first). */
static void
expire(struct redirmemo *m, struct memo_principal *p, uint64_t now_ms)
{
	size_t k = 0;

	while (k < p->n && now_ms >= p->e[k].at_ms + m->ttl_ms)
		k++;
	for (size_t i = 0; i < k; i++)
		free(p->e[i].path);
	if (k > 0) {
		memmove(&p->e[0], &p->e[k], (p->n - k) * sizeof(p->e[0]));
		p->n -= k;
	}
}

static struct memo_principal *
find(struct redirmemo *m, const char *key)
{
	for (struct memo_principal *p = m->head; p != NULL; p = p->next)
		if (strcmp(p->key, key) == 0)
			return p;
	return NULL;
}

void
redirmemo_forget(struct redirmemo *m, const char *key)
{
	struct memo_principal *p;

	if (m == NULL || key == NULL)
		return;
	p = find(m, key);
	if (p != NULL)
		principal_unlink(m, p);
}

static bool
same_origin(const struct memo_entry *e, enum dest_scheme scheme, const struct host *h,
    uint16_t port)
{
	return e->scheme == scheme && e->port == port && e->host.kind == h->kind &&
	    strcmp(e->host.name, h->name) == 0;
}

int
redirmemo_record(struct redirmemo *m, const char *key, enum dest_scheme scheme,
    const struct host *h, uint16_t port, const char *path, size_t path_len,
    const char *hop, unsigned depth, bool cross_origin, uint64_t now_ms)
{
	struct memo_principal *p;
	struct memo_entry *e;
	char *pc;

	if (m == NULL || key == NULL || h == NULL || strlen(key) >= sizeof(p->key))
		return -1;
	if (path == NULL)
		path_len = 0;
	if (path_len > EGRESS_LOCATION_MAX)
		path_len = EGRESS_LOCATION_MAX;
	pc = malloc(path_len + 1);
	if (pc == NULL)
		return -1;
	if (path_len > 0)
		memcpy(pc, path, path_len);
	pc[path_len] = '\0';
	p = find(m, key);
	if (p == NULL) {
		/* Drop principals with nothing live first, then the stalest one. */
		for (struct memo_principal *q = m->head, *nx; q != NULL; q = nx) {
			nx = q->next;
			expire(m, q, now_ms);
			if (q->n == 0)
				principal_unlink(m, q);
		}
		if (m->nprincipals >= EGRESS_GRANTS_MAX) {
			struct memo_principal *old = m->head;
			for (struct memo_principal *q = m->head; q != NULL; q = q->next)
				if (q->newest_ms < old->newest_ms)
					old = q;
			principal_unlink(m, old);
		}
		p = calloc(1, sizeof(*p));
		if (p == NULL) {
			free(pc);
			return -1;
		}
		memcpy(p->key, key, strlen(key) + 1);
		p->next = m->head;
		m->head = p;
		m->nprincipals++;
	}
	expire(m, p, now_ms);
	if (p->n == EGRESS_REDIRECT_MEMO_MAX)
		entry_drop(p, 0);
	e = &p->e[p->n++];
	memset(e, 0, sizeof(*e));
	e->scheme = scheme;
	e->host = *h;
	e->host.port = 0;
	e->port = port;
	e->path = pc;
	if (hop != NULL) {
		size_t n = strlen(hop);
		if (n >= sizeof(e->hop))
			n = sizeof(e->hop) - 1;
		memcpy(e->hop, hop, n);
		e->hop[n] = '\0';
	}
	e->depth = depth;
	e->cross_origin = cross_origin;
	e->at_ms = now_ms;
	p->newest_ms = now_ms;
	return 0;
}

void
redirmemo_lookup(struct redirmemo *m, const char *key, enum dest_scheme scheme,
    const struct host *h, uint16_t port, const char *path, size_t path_len, uint64_t now_ms,
    struct redirmemo_hit *hit)
{
	struct memo_principal *p;
	struct memo_entry *exact = NULL, *any = NULL;

	memset(hit, 0, sizeof(*hit));
	if (m == NULL || key == NULL || h == NULL)
		return;
	p = find(m, key);
	if (p == NULL)
		return;
	expire(m, p, now_ms);
	if (path == NULL)
		path_len = 0;
	/* newest first: the most recent redirect is the likeliest parent */
	for (size_t i = p->n; i-- > 0;) {
		struct memo_entry *e = &p->e[i];
		if (!same_origin(e, scheme, h, port))
			continue;
		if (e->cross_origin)
			hit->strip = true;
		if (e->linked)
			continue;
		if (exact == NULL && path_len > 0 && strlen(e->path) == path_len &&
		    memcmp(e->path, path, path_len) == 0)
			exact = e;
		if (any == NULL)
			any = e;
	}
	if (exact == NULL)
		exact = any;
	if (exact != NULL) {
		exact->linked = true;
		hit->linked = true;
		memcpy(hit->parent_hop, exact->hop, sizeof(hit->parent_hop));
		hit->depth = exact->depth;
	}
	if (p->n == 0)
		principal_unlink(m, p);
}

size_t
redirmemo_count(struct redirmemo *m, const char *key, uint64_t now_ms)
{
	struct memo_principal *p;

	if (m == NULL || key == NULL)
		return 0;
	p = find(m, key);
	if (p == NULL)
		return 0;
	expire(m, p, now_ms);
	return p->n;
}
