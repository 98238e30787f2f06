/*
 * A JSON string literal written to a FILE: the report's strings, and what
 * the programs print.  Through a buffer on the stack for short strings.
 */
#include "sgx/json.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <streamguard/core.h>

int sgx_json_fwrite_string(FILE *f, const char *p, size_t len) {
    if (f == NULL || (p == NULL && len > 0)) {
        return SG_EINVAL;
    }
    if (len > (SIZE_MAX - 2) / 6) {
        return SG_EIO; /* no buffer could hold it */
    }
    char stack[1024];
    const size_t need = SGX_JSON_ESCAPE_MAX(len);
    char *b = need <= sizeof(stack) ? stack : malloc(need);
    if (b == NULL) {
        return SG_EIO;
    }
    const size_t n = sgx_json_escape(b, need, p != NULL ? p : "", len);
    const bool ok = fwrite(b, 1, n, f) == n && !ferror(f);
    if (b != stack) {
        free(b);
    }
    return ok ? 0 : SG_EIO;
}
