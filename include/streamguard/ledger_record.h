/*
 * streamguard ledger records: what the intent ledger records of one
 * operation, under its key - the intent before the first request, each
 * attempt's end, the resolution (done, failed, or unknown) - and the
 * reconciliation an operator or a job records for what was never
 * resolved.  Recorded by hand (sg_ledger_intent, _attempt, _resolve, or
 * the sg_ledger_op_* calls that read a started sg_op), or by the ledger
 * plugged into an operation's policy as its observer (sg_ledger_observer,
 * with an sg_ledger_binding).  Opening the ledger, its keys, listing what
 * is unresolved and its upkeep are <streamguard/ledger.h>, which includes
 * this file; the workflow is docs/ledger.md.
 *
 * Thread-safety: as the ledger's - any function may be called on one
 * handle from several threads (it has an internal mutex); functions that
 * take no sg_ledger are reentrant.
 *
 * Include <streamguard/ledger.h> rather than this file directly.
 */
#ifndef STREAMGUARD_LEDGER_RECORD_H
#define STREAMGUARD_LEDGER_RECORD_H

#include <streamguard/core.h>
#include <streamguard/ledger.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Records
 *
 * Every record call below returns 0 if it succeeds, or a negative error
 * code: those it names, and these, common to all of them:
 *   SG_EINVAL    @l or @key is NULL, or @key is bad (sg_ledger_key_check);
 *   SG_ERANGE    @key is longer than SG_LEDGER_KEY_MAX;
 *   SG_ENOMEM    out of memory;
 *   SG_ELOCKED   another process held the lock (or another thread the
 *                handle) past the lock timeout;
 *   SG_ESYS      a lock, stat, truncate or reopen call failed (errno);
 *   SG_EIO       reading or writing the file failed, or its fdatasync;
 *   SG_ETOOMANY  catching up with other processes' records found more than
 *                max_live unresolved operations.
 * ------------------------------------------------------------------------ */

/**
 * sg_ledger_intent - record that the operation @key is about to send its
 * first request: @method to @url.  Call it BEFORE the first attempt.  With
 * the default fsync policy, when it returns 0 the record is on stable
 * storage (its fdatasync, on the caller's thread, makes every record
 * written before it durable too); when it fails, do not send the request.
 *
 * A key is owned by one operation at a time: an intent for a key still
 * unresolved (here or in another process) fails with SG_EEXIST - the
 * earlier operation may have taken effect, reconcile it first.  A key
 * resolved done or failed, or reconciled, may be used again.
 *
 * @method: a token of 1 .. SG_LEDGER_METHOD_MAX characters.
 * @url: 1 .. SG_LEDGER_URL_MAX bytes, none of them a control character or
 *   a space (0x00 .. 0x20, 0x7F); bytes from 0x80 are kept as they are.
 *
 * Errors besides the common ones: SG_EINVAL (@method or @url NULL, empty
 * or holding a forbidden character), SG_ERANGE (either too long),
 * SG_EEXIST (@key is unresolved), SG_ETOOMANY (max_live unresolved
 * operations recorded already), SG_EIO also when the sync thread's
 * fdatasync failed since the last intent (nothing was written; the next
 * intent tries again).
 */
SG_EXTERN int sg_ledger_intent(sg_ledger *l, const char *key, const char *method,
                               const char *url);

/**
 * sg_ledger_attempt - record how attempt @n (1-based) of the unresolved
 * operation @key ended: its outcome, the phase it ended in, whether any of
 * the request may have been sent, the HTTP status (0 for none) and whether
 * its outcome is unknown.  The attempt count becomes the largest @n
 * recorded; "last outcome" becomes @outcome.  With the default policy it
 * is synced by the sync thread after it returns (a process crash cannot
 * lose it once it returned; a power loss before that sync can).
 *
 * Errors besides the common ones: SG_EINVAL (@n 0, @outcome or @phase out
 * of range, @http_status neither 0 nor 100 .. 599), SG_ENOTFOUND (@key is
 * not unresolved), SG_ESTATE (@key was resolved unknown already;
 * PostgreSQL: or this handle's intent of @key was reconciled and another
 * intent took the key since: fenced off).
 */
SG_EXTERN int sg_ledger_attempt(sg_ledger *l, const char *key, uint32_t n,
                                sg_outcome outcome, sg_phase phase, bool sent,
                                int http_status, bool outcome_unknown);

/** sg_ledger_attempt_record - sg_ledger_attempt with the fields of a policy
 *  attempt record (the one an on_attempt callback receives); its errors,
 *  SG_EINVAL also when @rec is NULL. */
SG_EXTERN int sg_ledger_attempt_record(sg_ledger *l, const char *key,
                                       const sg_op_attempt *rec);

/** How an operation ended, as far as the ledger is concerned. */
typedef enum sg_ledger_resolution {
    /** It has its answer (outcome ok): nothing to reconcile. */
    SG_LEDGER_DONE = 1,
    /** It did not take effect, or the server said how it ended (an HTTP
     *  error status, never sent, refused): nothing to reconcile. */
    SG_LEDGER_FAILED = 2,
    /** It may have taken effect (an attempt was outcome_unknown): it stays
     *  listed until sg_ledger_reconcile. */
    SG_LEDGER_UNKNOWN = 3
} sg_ledger_resolution;

/** "done", "failed", "unknown", or NULL when out of range. */
SG_EXTERN const char *sg_ledger_resolution_name(sg_ledger_resolution r);

/**
 * sg_ledger_resolution_of - the resolution for a finished operation:
 * SG_LEDGER_UNKNOWN when any of its attempts was outcome_unknown, else
 * SG_LEDGER_DONE when its outcome is ok, else SG_LEDGER_FAILED.  Returns
 * SG_LEDGER_UNKNOWN for NULL (the safe answer).  Thread-safety: reentrant.
 */
SG_EXTERN sg_ledger_resolution sg_ledger_resolution_of(const sg_op *op);

/**
 * sg_ledger_resolve - record how the unresolved operation @key ended, with
 * the operation's final @outcome.  DONE and FAILED remove it from the
 * unresolved list; UNKNOWN keeps it there until sg_ledger_reconcile.
 * Synced as sg_ledger_attempt: an event loop never waits for the disk
 * here; should the power fail before that sync, the operation is listed
 * again as pending after the restart (and reconciled), never lost.
 *
 * Errors besides the common ones: SG_EINVAL (@res or @outcome out of
 * range), SG_ENOTFOUND (@key is not unresolved: never recorded, resolved,
 * or reconciled meanwhile by an operator), SG_ESTATE (as for
 * sg_ledger_attempt).
 */
SG_EXTERN int sg_ledger_resolve(sg_ledger *l, const char *key, sg_ledger_resolution res,
                                sg_outcome outcome);

/* ------------------------------------------------------------------------
 * Recording an operation: the ledger as a policy observer, or by hand
 * ------------------------------------------------------------------------ */

/**
 * sg_ledger_binding - the user_data of sg_ledger_observer(): which ledger
 * records the operation, and the key to record it under when its policy
 * has no idempotency key (e.g. from sg_ledger_key_derive; NULL: none, and
 * an operation without an idempotency key is then refused with SG_EINVAL).
 * Borrowed by the operation: keep it, the ledger and the key alive until
 * the operation has ended or been freed.  One binding per operation, or
 * one for many when they all carry idempotency keys.
 */
typedef struct sg_ledger_binding {
    sg_ledger *ledger;
    const char *fallback_key;
} sg_ledger_binding;

/**
 * sg_ledger_observer - the intent ledger as a policy observer
 * (sg_op_options_set_observer with an sg_ledger_binding as user_data):
 *   on_intent      sg_ledger_op_intent with the policy's target as the URL:
 *                  durable before anything is sent; its error (SG_EEXIST
 *                  while the key is unresolved, SG_EINVAL without a key or
 *                  a target, any I/O error) refuses the operation;
 *   on_attempt_end sg_ledger_op_attempt;
 *   on_resolve     sg_ledger_op_resolve;
 *   start_intent, poll_intent, abandon_intent
 *                  the same intent, recorded off the caller's thread by
 *                  the handle's intent threads, each bounded by its
 *                  operation's budget, an eventfd readable when the answer
 *                  is in: the transports' own loops (sg_curl_multi,
 *                  sg_h2_conn) use these, so an operation waiting for its
 *                  intent never holds up the others.  An intent that lands
 *                  after its operation ended is resolved at once as failed
 *                  with that outcome: nothing was sent.  docs/ledger.md
 *                  ("The intent off the event loop") says how each backend
 *                  spreads intents over its threads.
 * Errors after the intent never change the outcome; the operation keeps
 * the first (sg_op_observer_error) and its transport reports it.
 *
 * Returns a pointer to an immutable table with static storage.
 * Thread-safety: reentrant; the calls it makes are as the ledger's.
 */
SG_EXTERN const sg_op_observer *sg_ledger_observer(void);

/**
 * sg_ledger_op_key - the key an operation is recorded under: its policy's
 * idempotency key when it has one (it names the operation everywhere),
 * else @fallback (e.g. from sg_ledger_key_derive).
 *
 * Returns the key, or NULL when @op has no idempotency key and @fallback is
 * NULL (then sg_ledger_op_intent fails with SG_EINVAL).
 * Thread-safety: reads only @op.
 */
SG_EXTERN const char *sg_ledger_op_key(const sg_op *op, const char *fallback);

/**
 * sg_ledger_op_intent - sg_ledger_intent for a started operation, with its
 * method: call it before the first request; if it fails, send nothing.
 * Waiting for another process's lock, or for the handle while another
 * thread uses it, ends when the operation's budget could lease nothing
 * more (its deadline less its floor, on CLOCK_MONOTONIC), or after the
 * lock timeout, whichever is first: then SG_ELOCKED, and the operation is
 * refused rather than late.  PostgreSQL: the whole intent - waiting for a
 * free intent connection, connecting, and the statement - ends by the same
 * instant or by the timeout, whichever is first: then SG_ETIMEDOUT.
 *
 * Returns 0, or SG_EINVAL (@op never started, @key or @url NULL), or an
 * error of sg_ledger_intent() (e.g. SG_EEXIST while @key is unresolved).
 * Thread-safety: as sg_ledger_intent.
 */
SG_EXTERN int sg_ledger_op_intent(sg_ledger *l, const char *key, const sg_op *op,
                                  const char *url);

/**
 * sg_ledger_op_attempt - records @op's latest attempt that has ended (call
 * it after sg_op_attempt_done: the attempt it settled, unless a later
 * attempt - a hedge beside it - has ended since; one still running is
 * never recorded).  The observer (sg_ledger_observer) records each attempt
 * exactly as it ends.  Returns 0, or SG_EINVAL (@op NULL or without an
 * attempt that has ended), or an error of sg_ledger_attempt_record().
 * Thread-safety: as sg_ledger_attempt.
 */
SG_EXTERN int sg_ledger_op_attempt(sg_ledger *l, const char *key, const sg_op *op);

/** sg_ledger_op_resolve - records how @op ended (sg_ledger_resolution_of),
 *  with its outcome.  Returns 0, or SG_EINVAL (@op NULL), or an error of
 *  sg_ledger_resolve().  Thread-safety: as sg_ledger_resolve. */
SG_EXTERN int sg_ledger_op_resolve(sg_ledger *l, const char *key, const sg_op *op);

/**
 * sg_ledger_reconcile - an operator (or a reconciliation job) settled the
 * unresolved operation @key - resolved as unknown, or never resolved because
 * its process died: it is no longer listed.  @note (NULL for none) is kept
 * in the record for the audit trail: at most SG_LEDGER_NOTE_MAX bytes, no
 * control characters (spaces are fine).  Synced as sg_ledger_resolve.
 *
 * Returns 0, or a record call's error (see "Records"), or: SG_EINVAL
 * (@note holds a control character), SG_ERANGE (@note too long),
 * SG_ENOTFOUND (@key is not unresolved).
 */
SG_EXTERN int sg_ledger_reconcile(sg_ledger *l, const char *key, const char *note);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_LEDGER_RECORD_H */
