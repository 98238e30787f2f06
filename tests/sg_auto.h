/*
 * Test helpers: streamguard objects made for one scope and freed when it
 * ends (the compiler's cleanup attribute), so a test reads as its steps.
 * A failed assertion leaves the scope by longjmp and leaks them: the test
 * has failed already.
 */
#ifndef SG_TESTS_AUTO_H
#define SG_TESTS_AUTO_H

#include <stdio.h>
#include <stdlib.h>

#include <streamguard/policy.h>

static inline sg_op_options *sg_auto_options_new(void) {
    sg_op_options *o = NULL;
    if (sg_op_options_new(&o) != 0) {
        fprintf(stderr, "sg_op_options_new failed\n");
        abort();
    }
    return o;
}
static inline void sg_auto_options_free(sg_op_options **o) {
    sg_op_options_free(*o);
}
/* sg_op_options *NAME, every option at its default, freed at scope end. */
#define SG_AUTO_OPTIONS(name)                                            \
    sg_op_options *name __attribute__((cleanup(sg_auto_options_free))) = \
        sg_auto_options_new()

#ifdef STREAMGUARD_UNSTABLE_OP_H
static inline sg_op *sg_auto_op_new(void) {
    sg_op *op = NULL;
    if (sg_op_new(&op) != 0) {
        fprintf(stderr, "sg_op_new failed\n");
        abort();
    }
    return op;
}
static inline void sg_auto_op_free(sg_op **op) {
    sg_op_free(*op);
}
/* sg_op *NAME, never started, freed at scope end. */
#    define SG_AUTO_OP(name) \
        sg_op *name __attribute__((cleanup(sg_auto_op_free))) = sg_auto_op_new()
#endif

#endif
