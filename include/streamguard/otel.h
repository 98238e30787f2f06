/*
 * streamguard otel: the OpenTelemetry exporter (libstreamguard-otel;
 * pkg-config streamguard-otel, CMake streamguard::streamguard_otel).
 *
 * Spans of guarded operations go to an OpenTelemetry collector over
 * OTLP/HTTP with protobuf encoding (POST of an ExportTraceServiceRequest,
 * Content-Type application/x-protobuf), as the OpenTelemetry SDKs' batch
 * span processor sends them: a bounded queue, a thread of its own that
 * exports in batches, and drops that are counted - never a wait on the
 * caller's path.  A collector that is down, slow or silent costs the
 * operations nothing but the spans it drops: the export timeout bounds the
 * exporter's thread, never a caller.
 *
 * Threads: an sg_otel_options belongs to one thread at a time.  An sg_otel
 * is safe to share between threads (spans from many operations, stats and
 * flush from any thread) until sg_otel_free, which must not race any other
 * call on it.  Nothing here logs; header values (API keys) are kept only
 * to be sent.
 *
 * Every int-returning function returns 0 if it succeeds, or one of the
 * negative SG_E* codes it lists (<streamguard/core.h>, sg_strerror).
 * docs/otel.md is the guide: the variables, the stats, the threading.
 */
#ifndef STREAMGUARD_OTEL_H
#define STREAMGUARD_OTEL_H

#include <streamguard/core.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** sg_otel - the exporter: its queue, its thread, its connection.  Opaque. */
typedef struct sg_otel sg_otel;

/** sg_otel_options - how an exporter is made.  Opaque, with one setter per
 *  option; each setter documents its default. */
typedef struct sg_otel_options sg_otel_options;

/** SG_OTEL_MAX_HEADERS - at most this many header lines an exporter sends
 *  beside its own; SG_OTEL_MAX_VALUE - at most this many bytes in one URL,
 *  header line, service name or resource attribute. */
#define SG_OTEL_MAX_HEADERS 32
#define SG_OTEL_MAX_VALUE 4096

/**
 * sg_otel_options_new - options with every default: the endpoint
 * http://localhost:4318/v1/traces, no extra header, service name
 * "unknown_service", a queue of 2048 spans, batches of at most 512, a
 * schedule delay of 5 s and an export timeout of 10 s (the OpenTelemetry
 * specification's defaults).  Nothing is read from the environment here:
 * sg_otel_options_from_env does that.
 *
 * Returns 0, or SG_EINVAL (@out is NULL), SG_ENOMEM.
 */
SG_EXTERN int sg_otel_options_new(sg_otel_options **out);

/** sg_otel_options_free - frees @o (NULL is fine). */
SG_EXTERN void sg_otel_options_free(sg_otel_options *o);

/**
 * sg_otel_options_set_endpoint - the full URL spans are POSTed to, used as
 * is (http:// or https://; ".../v1/traces" for a collector).  Copied.
 * Returns 0, or SG_EINVAL (NULL, or not an http(s) URL), SG_ERANGE (over
 * SG_OTEL_MAX_VALUE bytes), SG_ENOMEM.
 */
SG_EXTERN int sg_otel_options_set_endpoint(sg_otel_options *o, const char *url);

/**
 * sg_otel_options_add_header - one more header line sent with every export,
 * "Name: value" (an API key, a tenant).  Copied; never logged.  Returns 0,
 * or SG_EINVAL (NULL, no ':' after a non-empty token name, or a CR or LF
 * in it), SG_ERANGE (over SG_OTEL_MAX_VALUE bytes), SG_ETOOMANY (already
 * SG_OTEL_MAX_HEADERS), SG_ENOMEM.
 */
SG_EXTERN int sg_otel_options_add_header(sg_otel_options *o, const char *line);

/**
 * sg_otel_options_set_service_name - the resource's service.name.  Copied.
 * Default "unknown_service".  Returns 0, or SG_EINVAL (NULL or ""),
 * SG_ERANGE, SG_ENOMEM.
 */
SG_EXTERN int sg_otel_options_set_service_name(sg_otel_options *o, const char *name);

/**
 * sg_otel_options_set_max_queue_size - spans the queue holds at most
 * (1 .. 1,048,576; default 2048).  A span submitted while it is full is
 * dropped and counted (sg_otel_stats.dropped_queue_full).  The queue is
 * allocated once, at sg_otel_new: 8 bytes a span.  Returns 0, or
 * SG_ERANGE.
 */
SG_EXTERN int sg_otel_options_set_max_queue_size(sg_otel_options *o, size_t n);

/**
 * sg_otel_options_set_max_export_batch_size - spans in one export at most
 * (1 .. 1,048,576; default 512).  A batch larger than the queue is the
 * queue's size (as the specification says).  The exporter exports as soon
 * as a batch is full, or when the schedule delay has passed.  Returns 0,
 * or SG_ERANGE.
 */
SG_EXTERN int sg_otel_options_set_max_export_batch_size(sg_otel_options *o, size_t n);

/**
 * sg_otel_options_set_schedule_delay - nanoseconds between two exports of
 * a batch that is not full (1 ms .. 1 hour; default 5 s).  Returns 0, or
 * SG_ERANGE.
 */
SG_EXTERN int sg_otel_options_set_schedule_delay(sg_otel_options *o, int64_t ns);

/**
 * sg_otel_options_set_export_timeout - nanoseconds one export may take,
 * retries of a 429, 502, 503 or 504 included (1 ms .. 1 hour; default
 * 10 s).  It also bounds sg_otel_free.  Returns 0, or SG_ERANGE.
 */
SG_EXTERN int sg_otel_options_set_export_timeout(sg_otel_options *o, int64_t ns);

/**
 * sg_otel_options_from_env - sets @o from the OpenTelemetry environment
 * variables that are set (non-empty), over what @o held; those unset leave
 * it as it was.  Per-signal variables win over the general ones:
 *
 *   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT  the URL, as is
 *   OTEL_EXPORTER_OTLP_ENDPOINT         a base URL: "/v1/traces" is added
 *   OTEL_EXPORTER_OTLP_TRACES_HEADERS,  "k1=v1,k2=v2" (W3C baggage form;
 *   OTEL_EXPORTER_OTLP_HEADERS          keys and values percent-decoded)
 *   OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,  the export timeout, milliseconds
 *   OTEL_EXPORTER_OTLP_TIMEOUT
 *   OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, must be "http/protobuf" when set
 *   OTEL_EXPORTER_OTLP_PROTOCOL         (the only one this exporter speaks)
 *   OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE, spans
 *   OTEL_BSP_SCHEDULE_DELAY             milliseconds
 *   OTEL_SERVICE_NAME                   the service name, which wins over
 *   OTEL_RESOURCE_ATTRIBUTES            its service.name ("k=v,...", other
 *                                       keys ignored)
 *
 * A variable that does not parse is an error, not a default: nothing of
 * @o changes, and @err (when not NULL) receives @errlen bytes at most of a
 * message naming the variable and what is wrong - never a header's value.
 *
 * Returns 0, or SG_EINVAL (@o NULL, or a variable malformed), SG_ERANGE
 * (a number out of its setter's range), SG_EUNSUPPORTED (a protocol other
 * than http/protobuf), SG_ETOOMANY, SG_ENOMEM.
 */
SG_EXTERN int sg_otel_options_from_env(sg_otel_options *o, char *err, size_t errlen);

/**
 * sg_otel_new - makes an exporter from @o (copied: @o may be freed at once)
 * and starts its thread.  It connects to no one until it has a batch.
 *
 * Returns 0 and *@out, or SG_EINVAL (@out or @o NULL), SG_ENOMEM,
 * SG_ECURL (libcurl could not be set up), SG_ESYS (the thread could not be
 * started).
 */
SG_EXTERN int sg_otel_new(sg_otel **out, const sg_otel_options *o);

/**
 * sg_otel_flush - exports every span queued before the call and waits, at
 * most @timeout_ns nanoseconds, until the exporter is done with them
 * (exported, or failed and counted).  Any thread; it blocks its caller, so
 * not for the path of an operation.
 *
 * Returns 0, or SG_EINVAL (@otel NULL, @timeout_ns < 0), SG_ETIMEDOUT (not
 * done within @timeout_ns: the export goes on).
 */
SG_EXTERN int sg_otel_flush(sg_otel *otel, int64_t timeout_ns);

/**
 * sg_otel_free - stops the exporter: the spans still queued are exported
 * within the export timeout (what is left then is dropped and counted),
 * the thread is joined, everything is freed.  Returns within about the
 * export timeout whatever the collector does.  NULL is fine.  No other
 * call on @otel may run during it or follow it.
 */
SG_EXTERN void sg_otel_free(sg_otel *otel);

/** sg_otel_stats - the exporter's counters since sg_otel_new (caller's;
 *  size first, so that it may grow). */
typedef struct sg_otel_stats {
    size_t size;                 ///< sizeof(sg_otel_stats): SG_OTEL_STATS_INIT
    uint64_t submitted;          ///< spans handed to the exporter
    uint64_t queued;             ///< spans in the queue now
    uint64_t exported;           ///< spans the collector accepted
    uint64_t dropped_queue_full; ///< spans dropped because the queue was full
    uint64_t dropped_failed;     ///< spans of exports that failed
    uint64_t dropped_shutdown;   ///< spans still queued when sg_otel_free gave up
    uint64_t exports;            ///< export requests that succeeded
    uint64_t failed_exports;     ///< exports that failed (status, timeout, network)
    uint64_t retries;            ///< requests sent again after a 429, 502, 503, 504
} sg_otel_stats;

/** An sg_otel_stats ready for sg_otel_stats_get. */
#define SG_OTEL_STATS_INIT \
    { sizeof(sg_otel_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/**
 * sg_otel_stats_get - copies the counters into *@stats, as many as its size
 * says (set it with SG_OTEL_STATS_INIT).  Any thread.  Returns 0, or
 * SG_EINVAL (@otel or @stats NULL, or a size smaller than the first two
 * members).
 */
SG_EXTERN int sg_otel_stats_get(const sg_otel *otel, sg_otel_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_OTEL_H */
