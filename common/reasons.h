/*
 * reasons - the single source of decision, refusal and close reasons.
 *
 * Owns: the reason enum and its table (common/reasons.def). Callers: everything that says
 * why something was allowed or refused. Nothing to free: every string is static.
 */
#ifndef EGRESS_REASONS_H
#define EGRESS_REASONS_H

enum reason {
#define X(id, str, status, text) REASON_##id,
#include "common/reasons.def"
#undef X
	REASON__COUNT
};

/* Stable string ("not_granted"). Out-of-range values give "internal_error". */
const char *reason_str(enum reason r);
/* HTTP status to answer a client with, or 0 when the reason is not an HTTP refusal. */
int reason_http_status(enum reason r);
/* One-line explanation for people (client body, egressctl, manifest). */
const char *reason_text(enum reason r);
/* Reverse lookup; returns 0 and sets *out, or -1 when the string is unknown. */
int reason_from_str(const char *s, enum reason *out);
/* Standard reason phrase for an HTTP status ("Forbidden"), "Error" when unknown. */
const char *reason_http_phrase(int status);

#endif
