/*
 * wpad - where Web Proxy Auto-Discovery looks: candidate PAC URLs from the host's domain.
 *
 * Owns: nothing (pure functions over caller buffers).
 * Callers: egressd/route (a system route whose proxy variable is `wpad://`), tests.
 *
 * Discovery by DNS only (no DHCP option 252): for the host's domain a.b.corp.example the
 * candidates are http://wpad.a.b.corp.example/wpad.dat, http://wpad.b.corp.example/...,
 * http://wpad.corp.example/... — walking up one label at a time and never to a name whose
 * parent is a public suffix (libpsl; a single label counts as one), so wpad.example or
 * wpad.co.uk, which anyone could register, is never asked. egressd fetches each with its
 * bounded PAC fetcher (pacfetch) in order; none answering is `pac_unavailable`, never
 * direct.
 */
#ifndef EGRESS_WPAD_H
#define EGRESS_WPAD_H

#include <stddef.h>

#include "common/limits.h"

#define WPAD_CANDIDATES_MAX 8
#define WPAD_URL_MAX        (EGRESS_HOSTNAME_MAX + 32)

/*
 * The host's DNS domain: the first name of the last `search` or `domain` line of the
 * resolver file at path (resolv.conf semantics: the later line wins), canonicalized.
 * Returns 0 with the name in out, -1 when there is none (or it is not a domain name).
 */
int wpad_search_domain(const char *path, char *out, size_t outlen);

/*
 * Candidate URLs for domain (canonical name), most specific first. Returns how many were
 * written (0 when the domain itself is a public suffix, is not a name, or no public suffix
 * list is usable: no discovery rather than an unsafe one).
 */
size_t wpad_candidates(const char *domain, char urls[][WPAD_URL_MAX], size_t max);

#endif
