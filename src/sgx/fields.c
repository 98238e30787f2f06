/* HTTP fields: which ones HTTP/2 does not carry. */
#include "sgx/fields.h"

#include <stddef.h>
#include <strings.h>

bool sgx_h2_connection_specific(const char *name, const char *value) {
    static const char *const names[] = {"connection",       "keep-alive",
                                        "proxy-connection", "transfer-encoding",
                                        "upgrade",          NULL};
    if (name == NULL || value == NULL) {
        return false;
    }
    for (const char *const *n = names; *n != NULL; n++) {
        if (strcasecmp(name, *n) == 0) {
            return true;
        }
    }
    return strcasecmp(name, "te") == 0 && strcasecmp(value, "trailers") != 0;
}
