/*
 * The framing's accessors for the layers above (the transports): they
 * copy a framing config through these, never through its fields.
 */
#ifndef SG_FRAMING_INTERNAL_H
#define SG_FRAMING_INTERNAL_H

#include <streamguard/stream.h>

/*
 * Copies @src (NULL: the defaults) into @dst together with what it keeps
 * pointers to - the sentinels and the skip_types list - so that @dst no
 * longer depends on the caller's strings: they go into one block, *@block,
 * which the caller frees (free(); NULL when there was nothing to copy)
 * once @dst is no longer used.  The classifier's user_data stays borrowed.
 * 0, or SG_ENOMEM (then @dst is the defaults and *@block NULL).
 */
int sg__stream_config_copy(sg_stream_config *dst, const sg_stream_config *src,
                           void **block);

/* The name of the built-in provider profile whose classifier @cfg frames
 * with (sg_profile_framing: "openai", "anthropic", ...), a static string;
 * NULL for NULL, for no classifier or another one.  O(profiles). */
const char *sg__profile_name(const sg_stream_config *cfg);

#endif
