/* libFuzzer: the control-protocol request decoder (egressd/control.c control_decode). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "egressd/control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct control_req r;
	const char *code = NULL;
	char msg[512];

	if (control_decode((const char *)data, size, &r, &code, msg, sizeof(msg)) == 0) {
		/* a grant.create has a grant, a lifetime, a device, and exactly one of an
		 * address to bind or a passed listener */
		if (r.op == CTL_GRANT_CREATE && (r.grant == NULL || r.grant->lifetime_s == 0 ||
		    r.ifname[0] == '\0' || (r.listenlen == 0) == !r.listen_fd))
			__builtin_trap();
		if (r.op == CTL_GRANT_REVOKE && strlen(r.grant_id) != GRANT_ID_HEX)
			__builtin_trap();
	} else {
		if (code == NULL || r.grant != NULL)
			__builtin_trap();
		json_decref(control_error(r.id, code, msg));
	}
	control_req_clear(&r);
	return 0;
}
