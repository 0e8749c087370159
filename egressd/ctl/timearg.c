/* timearg.c - --since/--until/--at values. Contract: timearg.h. */
#include "egressd/ctl/timearg.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "egressd/ctl/logread.h"

int64_t
timearg_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int
ago(const char *s, int64_t now_us, int64_t *us)
{
	int64_t n = 0, unit;
	size_t i = 0;

	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		n = n * 10 + (s[i] - '0');
		if (n > TIMEARG_AGO_MAX_S)
			return -1;
	}
	if (i == 0 || s[i] == '\0' || s[i + 1] != '\0')
		return -1;
	switch (s[i]) {
	case 's': unit = 1; break;
	case 'm': unit = 60; break;
	case 'h': unit = 3600; break;
	case 'd': unit = 86400; break;
	case 'w': unit = 7 * 86400; break;
	default: return -1;
	}
	if (n > TIMEARG_AGO_MAX_S / unit)
		return -1;
	*us = now_us - n * unit * 1000000;
	return 0;
}

int
timearg_parse(const char *s, int64_t now_us, int64_t *us)
{
	size_t n = strlen(s);

	if (strcmp(s, "now") == 0) {
		*us = now_us;
		return 0;
	}
	if (n > 0 && s[0] >= '0' && s[0] <= '9' && ago(s, now_us, us) == 0)
		return 0;
	/* "YYYY-MM-DD HH:MM": minutes, as people write them; UTC like the log */
	if (n == 16 && s[4] == '-' && s[13] == ':' && (s[10] == ' ' || s[10] == 'T')) {
		char b[32];

		snprintf(b, sizeof(b), "%.16s:00Z", s);
		return logread_time_parse(b, us);
	}
	/* "YYYY-MM-DD HH:MM:SS" without a zone: UTC */
	if (n == 19 && s[4] == '-' && s[13] == ':' && s[16] == ':') {
		char b[32];

		snprintf(b, sizeof(b), "%.19sZ", s);
		return logread_time_parse(b, us);
	}
	return logread_time_parse(s, us);
}
