/* syslog_spool.c - the syslog mirror's bounded record queue and loss accounting.
 * Contract: syslog_spool.h. */
#include "egressd/syslog_spool.h"

#include <stdlib.h>
#include <string.h>

bool
syslog_loss_drop(struct syslog_loss *l, uint64_t seq)
{
	bool first = !l->open;

	l->total++;
	if (first) {
		l->open = true;
		l->open_count = 0;
		l->open_first = seq;
		l->episodes++;
	}
	l->open_count++;
	if (seq != 0 && (l->open_first == 0 || seq < l->open_first))
		l->open_first = seq;
	if (seq > l->open_last || first)
		l->open_last = seq;
	return first;
}

void
syslog_loss_flush(struct syslog_loss *l)
{
	if (!l->open)
		return;
	syslog_loss_restore(l, l->open_count, l->open_first, l->open_last);
	l->open = false;
	l->open_count = l->open_first = l->open_last = 0;
}

void
syslog_loss_ok(struct syslog_loss *l)
{
	syslog_loss_flush(l);
}

bool
syslog_loss_take(struct syslog_loss *l, uint64_t *count, uint64_t *first, uint64_t *last)
{
	if (l->due_count == 0)
		return false;
	*count = l->due_count;
	*first = l->due_first;
	*last = l->due_last;
	l->due_count = l->due_first = l->due_last = 0;
	return true;
}

void
syslog_loss_restore(struct syslog_loss *l, uint64_t count, uint64_t first, uint64_t last)
{
	if (count == 0)
		return;
	if (l->due_count == 0) {
		l->due_first = first;
		l->due_last = last;
	} else {
		if (first != 0 && (l->due_first == 0 || first < l->due_first))
			l->due_first = first;
		if (last > l->due_last)
			l->due_last = last;
	}
	l->due_count += count;
}

void
sspool_init(struct syslog_spool *sp, uint64_t max)
{
	memset(sp, 0, sizeof(*sp));
	TAILQ_INIT(&sp->q);
	sp->max = max;
}

void
sspool_clear(struct syslog_spool *sp)
{
	struct sspool_rec *r;

	while ((r = TAILQ_FIRST(&sp->q)) != NULL) {
		TAILQ_REMOVE(&sp->q, r, link);
		free(r);
	}
	sp->next = NULL;
	sp->used = 0;
	sp->n = 0;
}

enum sspool_push
sspool_push(struct syslog_spool *sp, uint64_t seq, const char *line, size_t len)
{
	uint64_t cost = SSPOOL_COST(len);
	/* during an episode, a record goes in only with an eighth of the spool free: the
	 * episode does not end (and a new one begin) on every slightly shorter record */
	uint64_t need = cost + (sp->loss.open ? sp->max / 8 : 0);
	struct sspool_rec *r = NULL;

	/* drop-newest: the queued records stay a gap-free run (syslog_spool.h) */
	if (need <= sp->max && sp->used <= sp->max - need)
		r = malloc(sizeof(*r) + len);
	if (r == NULL)
		return syslog_loss_drop(&sp->loss, seq) ? SSPOOL_DROPPED_FIRST : SSPOOL_DROPPED;
	r->seq = seq;
	r->end = 0;
	r->len = len;
	memcpy(r->line, line, len);
	TAILQ_INSERT_TAIL(&sp->q, r, link);
	if (sp->next == NULL)
		sp->next = r;
	sp->used += cost;
	sp->n++;
	syslog_loss_ok(&sp->loss);
	return SSPOOL_QUEUED;
}

struct sspool_rec *
sspool_next(struct syslog_spool *sp)
{
	return sp->next;
}

void
sspool_sent(struct syslog_spool *sp, struct sspool_rec *r, uint64_t end)
{
	r->end = end;
	if (sp->next == r)
		sp->next = TAILQ_NEXT(r, link);
}

size_t
sspool_acked(struct syslog_spool *sp, uint64_t acked)
{
	struct sspool_rec *r;
	size_t n = 0;

	while ((r = TAILQ_FIRST(&sp->q)) != NULL && r->end != 0 && r->end <= acked) {
		TAILQ_REMOVE(&sp->q, r, link);
		sp->used -= SSPOOL_COST(r->len);
		sp->n--;
		free(r);
		n++;
	}
	return n;
}

size_t
sspool_rewind(struct syslog_spool *sp)
{
	struct sspool_rec *r;
	size_t n = 0;

	TAILQ_FOREACH(r, &sp->q, link) {
		if (r->end != 0)
			n++;
		r->end = 0;
	}
	sp->next = TAILQ_FIRST(&sp->q);
	return n;
}

uint64_t
sspool_line_seq(const char *line, size_t len)
{
	static const char key[] = "\"seq\":";
	size_t k = sizeof(key) - 1, lim = len < 96 ? len : 96;
	uint64_t v = 0;

	/* records begin {"v":1,"time":"...","seq":N (common/dlogchain.h): look near the start */
	for (size_t i = 0; i + k <= lim; i++) {
		if (memcmp(line + i, key, k) != 0)
			continue;
		for (i += k; i < len && line[i] >= '0' && line[i] <= '9'; i++) {
			if (v > (UINT64_MAX - 9) / 10)
				return 0;
			v = v * 10 + (uint64_t)(line[i] - '0');
		}
		return v;
	}
	return 0;
}
